"""A speed probe: how long this machine takes, in process CPU seconds, for one fixed piece of work.

Runs measure their time in process CPU seconds, which other processes on the machine inflate far
less than they inflate wall seconds. The machine itself still sets them, and its CPU's model name does
not identify it: on two virtual machines that both call themselves "Intel(R) Xeon(R) Processor", SB3
A2C on Hopper-v5 took 837 and 953 (2026-11-25) and 1,389 (2026-11-26, uncontended) CPU µs per step. So every run times this
probe as it starts and as it ends (``meta["cpu_probe_ms"]``), and the analysis tells machines apart by
it as well as by name (:func:`bench.analysis.scoring.hardware_of`).

The work is a little of what runs spend their time in: a small MLP's forward and backward pass in
torch (the algorithms' updates), NumPy matmuls (the NumPy kernel) and a Python loop (env stepping and
the harness), about 20 ms on a 2026 server core. It is repeated and the least time kept: interruptions
only ever add time. On one machine with both cores busy it read 21.4 to 22.5 ms over six calls.
"""

from __future__ import annotations

import time

#: Times the work is repeated; the least is kept.
REPEATS = 5


def _work() -> float:
    import numpy as np
    import torch

    g = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                              torch.nn.Linear(64, 2))
    x = torch.randn(64, 32, generator=g)
    for _ in range(60):
        net.zero_grad()
        net(x).square().mean().backward()
    a = np.random.default_rng(0).random((64, 64))
    for _ in range(100):
        a = np.tanh(a @ a / 64)
    s = 0
    for i in range(60_000):
        s += i * i % 7
    return float(a.sum()) + s  # used, so that nothing is optimised away


def cpu_probe_ms(repeats: int = REPEATS) -> float:
    """The probe's least process CPU milliseconds over ``repeats`` tries, in this process as it is
    (call it after the run's thread pinning: one torch and one BLAS thread)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        _work()
        best = min(best, time.process_time() - t0)
    return round(best * 1e3, 3)
