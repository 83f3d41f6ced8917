"""Benchmark: CarRacing-v3's agent step with :class:`bench.envs.ActionRepeat` against the same repeat with every
frame drawn, side by side in one process.

Run with ``nox -s benchmark -- -k action_repeat``. Both sides return the same observations, rewards and flags
(``tests/test_envs.py``); they differ only in whether the frame that the repeat drops is drawn. Rounds of 100 agent
steps alternate between the two (CPU seconds of this process, one thread), and the ratio of the medians is
printed; docs/reference.md quotes it. Drawing is about 97 % of a CarRacing frame's CPU time (cProfile, 2026-12-06),
so with 2 frames per agent step the ratio should be close to 0.5; the check allows up to 0.65.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from bench.envs import ActionRepeat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_envs import EveryFrameDrawn  # noqa: E402

pytest.importorskip("Box2D")

ROUNDS, STEPS, SKIP = 7, 100, 2


def _cpu_per_step(env: gym.Env, rng: np.random.Generator) -> float:
    t = time.process_time()
    for _ in range(STEPS):
        _, _, term, trunc, _ = env.step(rng.uniform([-1, 0, 0], [1, 1, 0.3]).astype(np.float32))
        if term or trunc:
            env.reset()
    return (time.process_time() - t) / STEPS


def test_action_repeat_draws_half_the_frames(benchmark):
    fast, slow = ActionRepeat(gym.make("CarRacing-v3"), SKIP), EveryFrameDrawn(gym.make("CarRacing-v3"), SKIP)
    for env in (fast, slow):
        env.reset(seed=0)
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {"repeat": [], "drawn": []}
    for _ in range(ROUNDS):
        times["drawn"].append(_cpu_per_step(slow, rng))
        times["repeat"].append(_cpu_per_step(fast, rng))
    benchmark.pedantic(lambda: _cpu_per_step(fast, rng), rounds=1, iterations=1)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["repeat"] / med["drawn"]
    print(f"\nCarRacing-v3, CPU ms per agent step (median of {ROUNDS} rounds of {STEPS}): ActionRepeat "
          f"{med['repeat'] * 1e3:.2f}, every frame drawn {med['drawn'] * 1e3:.2f}, ratio {ratio:.3f}")
    assert ratio <= 0.65
