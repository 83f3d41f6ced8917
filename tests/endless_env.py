"""An env whose episodes never end (never terminated, never truncated, no time limit), for tests of budgets.

Importable by name, so that worker processes (A3C's, a pool's) find it: ``endless_env:Endless-v0``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class Endless(gym.Env):
    """Box(4) observations, Discrete(2) actions, reward 1 per step, forever."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), {}

    def step(self, action):
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), 1.0, False, False, {}


if "Endless-v0" not in gym.registry:
    gym.register("Endless-v0", entry_point=Endless)  # no max_episode_steps: no TimeLimit wrapper
