"""Benchmark: one PPO minibatch step, torch autograd against the NumPy kernel, side by side.

Run with ``nox -s benchmark`` (or ``pytest -o addopts= tests/benchmarks/test_kernel_step.py --benchmark-only -s``).
The step is the one ``ppo.train`` takes on CartPole with the zoo's settings:
256 samples, two 64-64 tanh MLPs, advantage standardisation, the clipped loss,
backward (autograd, or the kernel's hand-written pass), global clipping and
fused Adam over the flat buffer. Both paths run in this process on one torch
and one BLAS thread, in interleaved rounds, each on its own copy of the same
policy. The figures are the per-step times docs/performance.md and ``npkernel.py`` quote.
"""

from __future__ import annotations

import statistics
import time

import gymnasium as gym
import numpy as np
import torch

from bench.algos.common import FlatParams, pin_one_thread
from bench.algos.npkernel import ActorCriticKernel, standardize
from bench.algos.policy import ActorCritic
from bench.algos.ppo.ppo import ppo_losses

B, STEPS, ROUNDS = 256, 400, 5


def _setup():
    torch.manual_seed(0)
    pol = ActorCritic(gym.spaces.Box(-5, 5, (4,), np.float32), gym.spaces.Discrete(2))
    flat = FlatParams(list(pol.parameters()))
    return pol, flat, torch.optim.Adam([flat.param], lr=1e-3, eps=1e-5, fused=True)


def test_ppo_minibatch_step_torch_vs_numpy_kernel(benchmark):
    pin_one_thread()
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(B, 4)).astype(np.float32)
    act = rng.integers(0, 2, size=B)
    adv, ret = rng.normal(size=B).astype(np.float32), rng.normal(size=B).astype(np.float32)
    old_logp = np.full(B, np.log(0.5), np.float32)
    old_v = np.zeros(B, np.float32)
    t = {k: torch.from_numpy(v) for k, v in dict(obs=obs, act=act, adv=adv, ret=ret, old_logp=old_logp,
                                                 old_v=old_v).items()}
    tp, tflat, topt = _setup()
    npol, nflat, nopt = _setup()
    kern = ActorCriticKernel(npol)

    def torch_step(step: bool = True) -> None:
        pd = tp.dist(t["obs"])
        logp = pd.log_prob(t["act"])
        a = (t["adv"] - t["adv"].mean()) / (t["adv"].std() + 1e-8)
        pg, vl, _ = ppo_losses(logp, t["old_logp"], a, tp.value(t["obs"]), t["old_v"], t["ret"], 0.2, None)
        loss = pg + 0.5 * vl - 0.0 * pd.entropy().mean()
        tflat.zero_grad()
        loss.backward()
        if step:
            tflat.clip_grad_norm(0.5)
            topt.step()

    def numpy_step(step: bool = True) -> None:
        kern.pg_step(obs, act, standardize(adv), ret, vf_coef=0.5, ent_coef=0.0, old_logp=old_logp,
                     clip_range=0.2, old_values=old_v)
        if step:
            nflat.clip_grad_norm(0.5)
            nopt.step()

    # Same start, same data, same loss: the first gradients agree (the unit tests check this in detail;
    # after thousands of Adam steps float rounding makes the two trajectories drift apart, as any two kernels).
    torch_step(step=False)
    numpy_step(step=False)
    np.testing.assert_allclose(nflat.grad.numpy(), tflat.grad.numpy(), rtol=1e-3, atol=1e-6)

    times: dict[str, list[float]] = {"torch": [], "numpy": []}

    def rounds() -> None:
        for name, fn in (("torch", torch_step), ("numpy", numpy_step)):  # interleaved
            for _ in range(20):
                fn()  # warm-up
            s = time.perf_counter()
            for _ in range(STEPS):
                fn()
            times[name].append((time.perf_counter() - s) / STEPS * 1e6)

    benchmark.pedantic(rounds, rounds=ROUNDS, iterations=1)
    mt, mn = statistics.median(times["torch"]), statistics.median(times["numpy"])
    benchmark.extra_info.update(torch_us=times["torch"], numpy_us=times["numpy"], ratio=mt / mn)
    print(f"\nPPO minibatch step (CartPole, 256 samples, 64-64 tanh): torch autograd median {mt:.0f} us, "
          f"NumPy kernel median {mn:.0f} us, ratio {mt / mn:.2f}x; all: {times}")
    assert mn < mt


def _per_call_us(fn, n: int = 2000) -> float:
    for _ in range(100):
        fn()
    s = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - s) / n * 1e6


def test_where_the_torch_step_goes(benchmark):
    """The per-op figures ``npkernel.py`` and docs/performance.md quote: torch's and NumPy's tanh and
    256×64 @ 64×64 matmul, and the clipped loss alone (on leaf logits and values) through
    autograd, forward and backward; one thread each, medians of 5 rounds."""
    pin_one_thread()
    rng = np.random.default_rng(0)
    x_np = rng.normal(size=(B, 64)).astype(np.float32)
    w_np = rng.normal(size=(64, 64)).astype(np.float32)
    x, w = torch.from_numpy(x_np), torch.from_numpy(w_np)
    logits = torch.randn(B, 2, requires_grad=True)
    values = torch.randn(B, requires_grad=True)
    act = torch.randint(0, 2, (B,))
    adv, ret, old = torch.randn(B), torch.randn(B), torch.full((B,), float(np.log(0.5)))

    def loss_fwd_bwd() -> None:
        from bench.algos.common import CategoricalPd

        pd = CategoricalPd(logits)
        logp = pd.log_prob(act)
        a = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg, vl, _ = ppo_losses(logp, old, a, values, values.detach(), ret, 0.2, None)
        (pg + 0.5 * vl - 0.0 * pd.entropy().mean()).backward()

    ops = {
        "torch tanh 256x64": lambda: torch.tanh(x),
        "numpy tanh 256x64": lambda: np.tanh(x_np),
        "torch matmul 256x64@64x64": lambda: x @ w,
        "numpy matmul 256x64@64x64": lambda: x_np @ w_np,
        "torch clipped loss fwd+bwd (autograd)": loss_fwd_bwd,
    }
    times: dict[str, list[float]] = {k: [] for k in ops}

    def rounds() -> None:
        for k, fn in ops.items():
            times[k].append(_per_call_us(fn))

    benchmark.pedantic(rounds, rounds=5, iterations=1)
    med = {k: statistics.median(v) for k, v in times.items()}
    benchmark.extra_info.update(median_us=med)
    print("\n" + "\n".join(f"{k}: median {v:.1f} us" for k, v in med.items()))
    # The kernel's case rests on this: if torch's CPU tanh stops being the slow one, say so.
    assert med["numpy tanh 256x64"] < med["torch tanh 256x64"]
