"""Own A2C against SB3's A2C on one env, seed for seed, with the gradient-spike signature on BOTH (issue 19).

SB3's A2C clips its gradient with ``torch.nn.utils.clip_grad_norm_`` and throws the norm away, so
`bench parity` cannot check its runs for gradient spikes ("—"). This script, for measurement only,
wraps that function in its own process to keep the pre-clipping norm, records it as ``grad/norm``
exactly as own A2C does, and applies the collapse detector's rule (bench.analysis.collapse) to both.

    .venv/bin/python scripts/a2c_spike_parity.py CartPole-v1 100000 0 1 2 3 4

Prints one line per run: final return (mean of the last 20 episodes), first step with a 20-episode
mean ≥ the threshold, and the first gradient spike (step, factor over the earlier median) in the
norm of every update and in the norms as a suite stores them (``grad/norm_max`` of 500 stretches,
what `bench parity` reads), then a summary per implementation.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from bench.algos.a2c import a2c
from bench.algos.common import pin_one_thread
from bench.algos.hyperparams import resolve
from bench.analysis.collapse import gradient_spike
from bench.algos.sb3 import train_sb3
from bench.envs import get_spec
from bench.storage.record import Recorder, downsample_diagnostics
from bench.suites.suite import DIAG_POINTS


def run_sb3(env_id: str, seed: int, steps: int) -> Recorder:
    rec = Recorder()
    clip = torch.nn.utils.clip_grad_norm_

    def clip_and_keep(*args, **kwargs):  # SB3's A2C calls it once per update, on the whole gradient
        norm = clip(*args, **kwargs)
        rec.diagnostics({"grad/norm": float(norm)})
        return norm

    torch.nn.utils.clip_grad_norm_ = clip_and_keep
    try:
        train_sb3(env_id, "a2c", resolve("a2c", env_id), seed=seed, timesteps=steps, recorder=rec)
    finally:
        torch.nn.utils.clip_grad_norm_ = clip
    return rec


def run_own(env_id: str, seed: int, steps: int) -> Recorder:
    rec = Recorder()
    a2c.train(env_id, resolve("a2c", env_id), seed=seed, timesteps=steps, recorder=rec)
    return rec


def spike(rows: list[tuple], key: str) -> str:
    g = [(r[0], r[2]) for r in rows if r[1] == key]
    flag = gradient_spike(np.array([s for s, _ in g]), np.array([v for _, v in g]))
    return flag.detail if flag else "none"


def summary(rec: Recorder, threshold: float) -> tuple[float, int | None, str, str]:
    """Final return, first step solved, and the first spike in every update's norm and in the norms
    as a suite stores them (per-stretch maxima of DIAG_POINTS stretches: what `bench parity` reads)."""
    rets, ends = np.array(rec.ep_return, dtype=float), np.array(rec.ep_step)
    run = np.convolve(rets, np.ones(20) / 20, mode="valid")
    hit = np.flatnonzero(run >= threshold)
    solved = int(ends[hit[0] + 19]) if hit.size else None
    stored = downsample_diagnostics([r for r in rec.diag if r[1] == "grad/norm"], DIAG_POINTS)
    return float(rets[-20:].mean()), solved, spike(rec.diag, "grad/norm"), spike(stored, "grad/norm_max")


def main() -> None:
    pin_one_thread()
    env_id, steps, seeds = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3:]]
    threshold = get_spec(env_id).threshold
    table: dict[str, list] = {"bench": [], "sb3": []}
    for seed in seeds:
        for impl, fn in (("bench", run_own), ("sb3", run_sb3)):
            t0 = time.process_time()
            final, solved, every, stored = summary(fn(env_id, seed, steps), threshold)
            table[impl].append((final, solved, every, stored))
            print(f"{impl:5s} seed {seed}: final {final:7.1f}  solved at {solved}  spike: {every}; as stored: {stored}  "
                  f"({time.process_time() - t0:.0f} CPU-s)", flush=True)
    for impl, rows in table.items():
        finals = np.array([r[0] for r in rows])
        print(f"{impl}: final return mean {finals.mean():.1f} (min {finals.min():.1f}); solved "
              f"{sum(r[1] is not None for r in rows)}/{len(rows)}; runs with a gradient spike: every update "
              f"{sum(r[2] != 'none' for r in rows)}/{len(rows)}, as stored {sum(r[3] != 'none' for r in rows)}/{len(rows)}")


if __name__ == "__main__":
    main()
