"""Tasks bench also shows as pixels: the same dynamics and rewards through another observation (issue 68).

Each is registered with Gymnasium under its own ``bench/`` id, so the vector and the pixel version of a task are
two envs with their own traits, runs and answers:

- ``bench/MiniGrid-DoorKey-5x5-Pixels-v0``, ``bench/MiniGrid-Unlock-Pixels-v0``,
  ``bench/MiniGrid-LavaGapS5-Pixels-v0``: MiniGrid's own ``RGBImgPartialObsWrapper`` image of the agent's 7×7
  view (8 pixels a tile, 56×56×3), channel-first ``(3, 56, 56)`` uint8, the frames every implementation's CNN
  takes (the Nature CNN: it needs at least 36×36). The vector versions see the same view as 147 object, colour and
  state indices (:mod:`bench.envs.families`). Needs the ``minigrid`` extra.
- ``bench/LunarLanderContinuous-Pixels-v3``, ``bench/BipedalWalker-Pixels-v3``: the Box2D task drawn
  (``render_mode="rgb_array"``, Gymnasium's ``AddRenderObservation``), each action repeated for 2 frames as the
  CarRacing suite does (:class:`bench.envs.factory.ActionRepeat`; the frame is drawn once per agent step, after
  the repeat), grey-scaled and resized to 84×84; the env factory stacks the last 4 (``(4, 84, 84)`` uint8), as
  for CarRacing and Atari. Horizons in agent steps: half the task's (1,000 and 1,600 frames).

Registering reads no package: the entry points import MiniGrid or Box2D only when an env is built. The action
repeat of pixel envs with continuous actions (:class:`ActionRepeat`, CarRacing's too) lives here, below the
env factory.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

import bench.envs.families as families

__all__ = ["MINIGRID_PIXELS", "RENDERED", "ActionRepeat", "register"]

#: MiniGrid pixel id → the MiniGrid id it shows.
MINIGRID_PIXELS: dict[str, str] = {
    "bench/MiniGrid-DoorKey-5x5-Pixels-v0": "MiniGrid-DoorKey-5x5-v0",
    "bench/MiniGrid-Unlock-Pixels-v0": "MiniGrid-Unlock-v0",
    "bench/MiniGrid-LavaGapS5-Pixels-v0": "MiniGrid-LavaGapS5-v0",
}
#: Rendered Box2D id → (the task's id, its action repeat).
RENDERED: dict[str, tuple[str, int]] = {
    "bench/LunarLanderContinuous-Pixels-v3": ("LunarLanderContinuous-v3", 2),
    "bench/BipedalWalker-Pixels-v3": ("BipedalWalker-v3", 2),
}
#: MiniGrid's tile size in pixels for RGBImgPartialObsWrapper (its default): a 7×7 view is 56×56.
TILE = 8


class ActionRepeat(gym.Wrapper):
    """Each action repeated for ``skip`` frames: the rewards summed, the last frame's observation returned.

    rl-baselines3-zoo's ``FrameSkip`` for CarRacing (``rl_zoo3/wrappers.py``): no max-pooling, which on Atari
    removes sprites that flicker between frames; CarRacing draws every object on every frame.

    Frames before the last are not rendered where the env draws its observation inside ``step()`` with
    ``_render("state_pixels")`` (Gymnasium's CarRacing), because that drawing is nearly all of its step's CPU
    time and those observations are dropped. The drawing has no effect on the dynamics or the rewards, so
    every returned observation, reward and flag is the one the fully rendered env gives
    (``tests/test_envs.py``). When an episode ends on a frame that was not drawn, that frame is drawn after
    the step with the score it would have shown (``step()`` draws before charging the frame's 0.1).
    """

    def __init__(self, env: gym.Env, skip: int) -> None:
        super().__init__(env)
        if skip < 1:
            raise ValueError(f"skip must be >= 1, got {skip}")
        self.skip = skip
        self._score_shown = 0.0  # the score a dropped frame would have drawn (``_note_score``)
        u = env.unwrapped
        self._drawn_in_step = callable(getattr(type(u), "_render", None)) and u.render_mode != "human"

    def step(self, action):
        u = self.env.unwrapped
        may_skip = self._drawn_in_step and hasattr(u, "reward")  # CarRacing sets its score in reset()
        total = 0.0
        for i in range(self.skip):
            undrawn = may_skip and i < self.skip - 1
            if undrawn:  # an instance attribute shadows the method for this frame only
                u._render = self._note_score  # type: ignore[attr-defined]
            try:
                obs, reward, terminated, truncated, info = self.env.step(action)
            finally:
                if undrawn:
                    del u._render  # type: ignore[attr-defined]
            total += float(reward)
            if terminated or truncated:
                if undrawn:
                    obs = self._draw_as_in_step(u)
                break
        return obs, total, terminated, truncated, info

    def _note_score(self, mode: str) -> np.ndarray:
        """Stands in for the env's ``_render`` on a dropped frame: notes the score it would have drawn."""
        u = self.env.unwrapped
        self._score_shown = u.reward
        return u.state.copy()  # the last drawn frame: a valid observation, never returned

    def _draw_as_in_step(self, u: Any) -> np.ndarray:
        after = u.reward
        u.reward = self._score_shown
        try:
            u.state = u._render("state_pixels")
        finally:
            u.reward = after
        return u.state


class ChannelFirstImage(gym.ObservationWrapper):
    """``(H, W, C)`` uint8 frames → ``(C, H, W)``, the layout every implementation's CNN takes."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        h, w, c = env.observation_space.shape
        self.observation_space = gym.spaces.Box(0, 255, (c, h, w), np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(observation, -1, 0))


def minigrid_pixels(base: str, **kwargs: Any) -> gym.Env:
    """MiniGrid ``base`` seen through ``RGBImgPartialObsWrapper`` (the agent's view as an image), channel-first."""
    if not families.register("minigrid"):
        raise ImportError(f"{base} as pixels needs MiniGrid; install the optional extra minigrid")
    from minigrid.wrappers import ImgObsWrapper, RGBImgPartialObsWrapper

    env = ImgObsWrapper(RGBImgPartialObsWrapper(gym.make(base, **kwargs), tile_size=TILE))
    return ChannelFirstImage(env)


def rendered(base: str, skip: int, **kwargs: Any) -> gym.Env:
    """Box2D ``base`` drawn: ``skip`` frames per action, then the frame drawn once, grey, 84×84 (the factory
    stacks 4). The render wrapper sits outside the repeat, so a dropped frame is never drawn."""
    kwargs.pop("render_mode", None)  # always drawn into an array: the frame is the observation
    env = ActionRepeat(gym.make(base, render_mode="rgb_array", **kwargs), skip)
    env = gym.wrappers.AddRenderObservation(env, render_only=True)
    return gym.wrappers.ResizeObservation(gym.wrappers.GrayscaleObservation(env), (84, 84))


def register() -> None:
    """Register the pixel versions with Gymnasium (once; importing :mod:`bench.envs` does it)."""
    for name, base in MINIGRID_PIXELS.items():
        if name not in gym.registry:
            gym.register(name, entry_point=minigrid_pixels, kwargs={"base": base})
    for name, (base, skip) in RENDERED.items():
        if name not in gym.registry:
            # The task's own TimeLimit counts frames inside the repeat; this one counts agent steps and ends the
            # episode on the same step. Same threshold: the same task and rewards.
            task = gym.spec(base)
            gym.register(name, entry_point=rendered, kwargs={"base": base, "skip": skip},
                         max_episode_steps=task.max_episode_steps // skip, reward_threshold=task.reward_threshold)
