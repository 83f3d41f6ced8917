"""A user environment for bench: a corridor with one reward at its far end.

It registers ``bench_example/Corridor-v0`` with Gymnasium when this module is imported, so a
suite names it in Gymnasium's ``module:EnvId`` form and passes ``gym.make`` arguments as kwargs::

    envs:
      - id: "bench_example_plugin.corridor:bench_example/Corridor-v0"
        kwargs: {length: 8}
        threshold: 0.5
        traits: {reward: sparse}   # inference cannot see sparsity; say it

The agent starts at cell 0 of ``length`` cells and steps left (0) or right (1). Reaching the
last cell ends the episode with reward 1; every other step gives 0, and the time limit is
``4 × length`` steps. A random walk needs about ``length²`` steps to reach the end, so the
reward gets sparse quickly as ``length`` grows: a small exploration benchmark.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    """Observation: the position as a fraction of the corridor, shape (1,); actions: Discrete(2)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, length: int = 8) -> None:
        if not isinstance(length, int) or length < 2:
            raise ValueError(f"length must be an integer >= 2, got {length!r}")
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._pos = 0

    def _obs(self) -> np.ndarray:
        return np.array([self._pos / (self.length - 1)], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._pos = 0
        return self._obs(), {}

    def step(self, action):
        self._pos = min(self.length - 1, max(0, self._pos + (1 if int(action) == 1 else -1)))
        done = self._pos == self.length - 1
        return self._obs(), float(done), done, False, {}


def _make(length: int = 8, **kwargs: Any) -> gym.Env:
    """Entry point with the time limit that scales with the corridor: 4 × length steps."""
    env = Corridor(length, **kwargs)
    return gym.wrappers.TimeLimit(env, max_episode_steps=4 * length)


if "bench_example/Corridor-v0" not in gym.registry:
    # No max_episode_steps here: the time limit depends on the length kwarg, so _make adds it.
    gym.register("bench_example/Corridor-v0", entry_point=_make)
