"""Envs that misbehave, for the tests of the env checks (importable by name: ``bad_envs:NanReward-v0``).

Each has Box(3) observations and Discrete(2) actions and goes wrong at its 5th step of an episode (or at once).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class _Base(gym.Env):
    observation_space = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)
    bad_at = 5

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):
        self.t += 1
        obs, reward = np.full(3, 0.1, np.float32), 1.0
        if self.t == self.bad_at:
            obs, reward = self.go_wrong(obs, reward)
        return obs, reward, False, self.t >= 50, {}

    def go_wrong(self, obs, reward):
        return obs, reward


class NanReward(_Base):
    def go_wrong(self, obs, reward):
        return obs, float("nan")


class InfObservation(_Base):
    def go_wrong(self, obs, reward):
        obs[1] = -np.inf
        return obs, reward


class WrongShape(_Base):
    def go_wrong(self, obs, reward):
        return np.zeros(4, np.float32), reward


class StrObservation(_Base):
    def go_wrong(self, obs, reward):
        return np.array(["a", "b", "c"]), reward


class StrObservationAtReset(_Base):
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.array(["a", "b", "c"]), {}


class Sleeps(_Base):
    """Sleeps ``sleep_s`` seconds in its ``at``-th step (a stuck env: the run stops stepping, its heartbeat goes on)."""

    def __init__(self, at=5, sleep_s=3.0):
        self.bad_at, self.sleep_s = at, float(sleep_s)

    def go_wrong(self, obs, reward):
        import time

        time.sleep(self.sleep_s)
        return obs, reward


class Raises(_Base):
    def go_wrong(self, obs, reward):
        raise ValueError("the simulator\nexploded")


class DictObs(gym.Env):
    observation_space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,), np.float32),
                                         "goal": gym.spaces.Box(-1, 1, (2,), np.float32)})
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


class TupleObs(DictObs):
    observation_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32)))


class Fault(_Base):
    """One fault, chosen by ``gym.make`` kwargs (the fuzz test's env): ``kind`` (``reward``: the reward is
    ``value``; ``observation``: component ``index`` of the observation is ``value``; ``shape``: an observation
    of ``size`` numbers; ``raises``: an exception with ``text``), at step ``at`` of the first episode. ``value``
    is a string (``"nan"``, ``"inf"``, ``"-inf"``): env keys carry kwargs as JSON, which has no such numbers."""

    def __init__(self, kind="reward", at=5, value="nan", index=0, size=4, text="boom"):
        self.kind, self.bad_at, self.index, self.size, self.text = kind, at, index, size, text
        self.value = float(value)

    def go_wrong(self, obs, reward):
        if self.kind == "reward":
            return obs, self.value
        if self.kind == "observation":
            obs[self.index] = self.value
            return obs, reward
        if self.kind == "shape":
            return np.zeros(self.size, np.float32), reward
        raise RuntimeError(self.text)


for _cls in (NanReward, InfObservation, WrongShape, StrObservation, StrObservationAtReset, Sleeps, Raises, DictObs, TupleObs, Fault):
    if f"{_cls.__name__}-v0" not in gym.registry:
        gym.register(f"{_cls.__name__}-v0", entry_point=_cls, max_episode_steps=50)
