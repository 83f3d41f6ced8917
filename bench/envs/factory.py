"""One env factory for every implementation.

Every implementation (the project's own algorithms and the SB3 baselines) gets
its environments from :func:`make_env` / :func:`make_vec_env`, so preprocessing
and episode accounting are identical across implementations. Episodes are
counted by :class:`EpisodeMonitor`, which feeds a :class:`bench.storage.record.Recorder`
with *raw* returns: for Atari that is the unclipped game score over the whole
game (all lives), whatever the learner sees.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Protocol

import gymnasium as gym
import numpy as np

from bench.envs.checks import bad_action, bad_dtype, bad_shape, float_box, non_numeric, raised, returned
from bench.envs.families import ChannelFirstFrames, adapt
from bench.envs.pixels import RENDERED, ActionRepeat
from bench.envs.registry import ATARI_FRAME_SKIP, EVAL_STEP_CAP, get_spec, is_atari, make_raw, require
from bench.envs.vector import SameStepSyncVectorEnv, VectorEpisodeMonitor, make_vector_backend, vec_env_problem

__all__ = ["RecorderLike", "EpisodeMonitor", "ChannelFirstFrames", "EpisodicLife", "ActionRepeat", "make_env",
           "make_vec_env", "evaluate_policy"]


class RecorderLike(Protocol):
    """What :class:`EpisodeMonitor` needs; :class:`bench.storage.record.Recorder` satisfies it."""

    steps: int

    def episode(self, ret: float, length: int) -> None: ...


# -- wrappers --------------------------------------------------------------------
class EpisodeMonitor(gym.Wrapper):
    """Counts env steps and reports finished episodes to a recorder.

    Every ``step`` adds one to ``recorder.steps`` (shared by all envs of a
    vector env, so it counts global transitions) and accumulates the reward it
    sees; on ``terminated or truncated`` it calls ``recorder.episode(ret, length)``.
    ``reset`` starts a new episode and drops any unfinished one.

    Place it where rewards are still raw: under reward clipping and above
    nothing that ends episodes early, so it records the true return.

    It also checks each step (:mod:`bench.envs.checks`): a non-finite reward, float observation or
    continuous action, an observation of another shape than its space's or not of numbers (on reset too), or an
    exception from the env raises :class:`~bench.envs.checks.EnvError` naming ``env_id``, the step and the quantity.
    """

    def __init__(self, env: gym.Env, recorder: RecorderLike, env_id: str | None = None) -> None:
        super().__init__(env)
        self.recorder = recorder
        self.env_id = env_id or (env.spec.id if env.spec is not None else type(env.unwrapped).__name__)
        self._ret = 0.0
        self._len = 0
        self._check_obs = float_box(env.observation_space)
        self._check_act = float_box(env.action_space)
        space = env.observation_space
        self._shape = space.shape if isinstance(space, gym.spaces.Box) else None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._ret = 0.0
        self._len = 0
        obs, info = self.env.reset(seed=seed, options=options)
        if non_numeric(obs):
            raise bad_dtype(self.env_id, obs, self.observation_space, self.recorder.steps, reset=True)
        return obs, info

    def step(self, action):
        # Lean on purpose: this runs on every env step of every run.
        if self._check_act and not np.isfinite(action).all():
            raise bad_action(self.env_id, action, self.recorder.steps + 1)
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as e:  # noqa: BLE001 - any failure of the env's step: named, with the step
            raise raised(self.env_id, e, self.recorder.steps + 1) from e
        r = float(reward)
        if not math.isfinite(r):
            raise returned(self.env_id, "reward", r, self.recorder.steps + 1)
        if self._shape is not None and getattr(obs, "shape", self._shape) != self._shape:
            raise bad_shape(self.env_id, obs.shape, self._shape, self.recorder.steps + 1)
        if non_numeric(obs):  # before the sum below, which fails on strings with NumPy's words, not ours
            raise bad_dtype(self.env_id, obs, self.observation_space, self.recorder.steps + 1)
        # One reduction per step: a sum is finite when every value is (a sum of huge finite values that
        # overflows is checked exactly before anything is said).
        if self._check_obs and not math.isfinite(obs.sum()) and not np.isfinite(obs).all():
            raise returned(self.env_id, "observation", obs, self.recorder.steps + 1)
        self._ret += r
        self._len += 1
        self.recorder.steps += 1
        if terminated or truncated:
            self.recorder.episode(self._ret, self._len)
            self._ret = 0.0
            self._len = 0
        return obs, reward, terminated, truncated, info


class EpisodicLife(gym.Wrapper):
    """Atari: a lost life ends the learner's episode, but not the game.

    The idea of Mnih et al. 2015 (Nature DQN), also SB3's ``EpisodicLifeEnv``:
    bootstrapping stops at a life loss, which speeds up learning the value of
    staying alive. The learner sees ``terminated=True`` on a life loss; the
    following ``reset()`` only takes one no-op step (action 0) and continues the
    same game. A real reset happens only when the game is over (terminated, or
    truncated by ALE v5's frame cap) or when a seed is given, so
    ``reset(seed=...)`` always means a fresh, seeded game.

    The no-op step is a real env step: wrappers below this one (the
    :class:`EpisodeMonitor`) count it and its reward.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._lives = 0
        self._game_over = True

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())  # type: ignore[attr-defined]

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = bool(terminated or truncated)
        lives = self._ale_lives()
        # "0 <": at zero lives ALE itself reports the game as terminated.
        if 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self._game_over or seed is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op itself ended the game: start a new one
                obs, info = self.env.reset(options=options)
        self._game_over = False
        self._lives = self._ale_lives()
        return obs, info


# -- factories ---------------------------------------------------------------------
def make_env(env_id: str, *, recorder: RecorderLike | None = None, training: bool = True,
             render_mode: str | None = None) -> gym.Env:
    """One environment, not yet seeded (seed it with ``reset(seed=...)``).

    ``env_id`` is an env key (:func:`bench.envs.registry.env_key`): a Gymnasium id, or
    ``module:EnvId``, with ``gym.make`` kwargs in brackets when it has any.

    Non-Atari: ``gym.make(id, **kwargs)`` (with its registered ``TimeLimit``), then its family's
    observation adapter (:func:`bench.envs.families.adapt`: MinAtar's frames channel-first, MiniGrid's
    view, goal-conditioned and highway observations flattened), then an :class:`EpisodeMonitor` when
    ``recorder`` is given. MinAtar keeps the package's sticky actions and difficulty ramping.

    Atari (ale_py ids), the Nature DQN preprocessing (Mnih et al. 2015) on ALE v5:

    1. ``gym.make(id, frameskip=1)``; v5's sticky actions (p=0.25) stay on, as
       Machado et al. 2018 recommend, and its 108,000-frame cap truncates games;
    2. ``AtariPreprocessing``: up to 30 no-op starts, frame skip 4 with max-pooling,
       84×84 grayscale;
    3. :class:`EpisodeMonitor`, so recorded returns are the raw game score over the
       whole game (all lives);
    4. training only: :class:`EpisodicLife` and sign reward clipping (Mnih et al. 2015);
    5. ``FrameStackObservation(4)`` → observations ``(4, 84, 84)`` uint8, channel-first.

    ``training=False`` (evaluation) keeps 1, 2, 3 and 5: no life-loss episodes, no clipping.
    ``render_mode`` is passed to ``gym.make`` (``rgb_array``: ``render()`` returns the frame, for videos).

    :raises KeyError: ``env_id`` is not a registered Gymnasium id.
    """
    gspec = require(env_id)
    render = {"render_mode": render_mode} if render_mode is not None else {}
    if gspec.id in FRAME_SKIP:
        return _continuous_frames(env_id, FRAME_SKIP[gspec.id], recorder, render)
    if gspec.id in RENDERED:  # drawn, repeated, grey and 84×84 by its entry point (bench.envs.pixels)
        env = make_raw(env_id)
        env = EpisodeMonitor(env, recorder, env_id) if recorder is not None else env
        return gym.wrappers.FrameStackObservation(env, 4)
    if not is_atari(gspec):
        env = adapt(gspec, make_raw(env_id, **render))
        return EpisodeMonitor(env, recorder, env_id) if recorder is not None else env

    env = make_raw(env_id, frameskip=1, **render)
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=30,
        frame_skip=ATARI_FRAME_SKIP,
        screen_size=84,
        grayscale_obs=True,
        terminal_on_life_loss=False,  # life loss is EpisodicLife's job, above the monitor
    )
    if recorder is not None:
        env = EpisodeMonitor(env, recorder, env_id)
    if training:
        env = EpisodicLife(env)
        env = gym.wrappers.TransformReward(env, np.sign)
    return gym.wrappers.FrameStackObservation(env, 4)


#: Pixel envs with continuous actions that get the Atari-style frame pipeline, and their action repeat.
#: CarRacing-v3: rl-baselines3-zoo's `CarRacing-v2` entry repeats each action for 2 frames (its FrameSkip wrapper).
FRAME_SKIP: dict[str, int] = {"CarRacing-v3": 2}


def _continuous_frames(env_id: str, skip: int, recorder: RecorderLike | None,
                       render: dict[str, Any] | None = None) -> gym.Env:
    """CarRacing and its kind: each action repeated ``skip`` frames (:class:`ActionRepeat`), grayscale,
    84×84, then :class:`EpisodeMonitor` (raw returns over agent steps), then the last 4 frames stacked
    channel-first: ``(4, 84, 84)`` uint8, the Nature CNN's input as on Atari (the zoo uses 64×64 and 2 frames
    for SB3's CNN, which sizes itself; the own Nature CNN takes 84×84)."""
    env = ActionRepeat(make_raw(env_id, **(render or {})), skip)
    env = gym.wrappers.ResizeObservation(gym.wrappers.GrayscaleObservation(env), (84, 84))
    if recorder is not None:
        env = EpisodeMonitor(env, recorder, env_id)
    return gym.wrappers.FrameStackObservation(env, 4)


def make_vec_env(
    env_id: str,
    n_envs: int,
    *,
    recorder: RecorderLike | None = None,
    training: bool = True,
    autoreset_mode: gym.vector.AutoresetMode = gym.vector.AutoresetMode.SAME_STEP,
    vec_env: str = "sync",
) -> gym.vector.VectorEnv:
    """``n_envs`` copies of ``env_id`` in one vector env, stepped as ``vec_env`` says.

    ``sync`` (the default): :func:`make_env` copies in one in-process
    ``SyncVectorEnv``; runs are already parallel across processes, so this is
    the cheapest for cheap envs. ``async``, ``vector``, ``envpool``: see
    :mod:`bench.envs.vector`. All copies share ``recorder``, so ``recorder.steps``
    counts transitions over all of them, and a recorder sees the same episodes at
    the same step counts in every mode, given the same transitions. With
    ``SAME_STEP`` autoreset (the default, and the only one outside ``sync``) a
    finished sub-env is reset within the same ``step()`` and its last
    observation is in ``info["final_obs"]``.

    :raises KeyError: ``env_id`` is not a registered Gymnasium id.
    :raises ValueError: ``n_envs`` < 1, or ``env_id`` cannot be stepped in ``vec_env``
        (or not with ``autoreset_mode``).
    """
    if n_envs < 1:
        raise ValueError(f"n_envs must be >= 1, got {n_envs}")
    require(env_id)
    if vec_env == "sync":
        fns: list[Callable[[], gym.Env]] = [
            functools.partial(make_env, env_id, recorder=recorder, training=training) for _ in range(n_envs)
        ]
        return SameStepSyncVectorEnv(fns, autoreset_mode=autoreset_mode)
    why = vec_env_problem(env_id, vec_env)
    if why is not None:
        raise ValueError(f"vec_env {vec_env}: {why}")
    if autoreset_mode != gym.vector.AutoresetMode.SAME_STEP:
        raise ValueError(f"vec_env {vec_env} resets in the same step; allowed autoreset_mode: SAME_STEP (or vec_env sync)")
    venv: gym.vector.VectorEnv
    if vec_env == "async":
        # Spawned, not forked: forking after torch and BLAS have started threads is unsafe (as the runner's pool).
        plain = [functools.partial(make_env, env_id, training=training) for _ in range(n_envs)]
        venv = gym.vector.AsyncVectorEnv(plain, autoreset_mode=autoreset_mode, context="spawn")
    else:
        venv = make_vector_backend(env_id, n_envs, vec_env)
    return VectorEpisodeMonitor(venv, recorder, env_id) if recorder is not None else venv


def evaluate_policy(
    env_id: str,
    policy: Callable[[np.ndarray], np.ndarray],
    n_episodes: int,
    *,
    seed: int,
    on_frame: Callable[[np.ndarray], None] | None = None,
) -> list[float]:
    """Raw returns of ``n_episodes`` episodes of ``policy`` on a fresh evaluation env.

    The env is built with ``training=False`` (Atari: whole games, unclipped
    score). Episodes run one after another: the first reset uses ``seed``, later
    ones continue the env's random stream, so the result is deterministic for a
    deterministic policy and a given seed. ``policy`` maps a batch of
    observations to a batch of actions; it is called with a batch of one.
    Actions are passed on as given (clip continuous actions in the policy if needed).

    Each episode is capped at the env's horizon (or 100,000 steps when it has
    none), so a broken env cannot hang a run.

    ``on_frame``: the env is made with ``render_mode="rgb_array"`` and each frame, ``(H, W, 3)`` uint8,
    is passed to it: after each reset and after each step (``bench eval --video``).

    :raises ValueError: ``n_episodes`` < 1.
    """
    if n_episodes < 1:
        raise ValueError(f"n_episodes must be >= 1, got {n_episodes}")
    cap = get_spec(env_id).horizon or EVAL_STEP_CAP
    env = make_env(env_id, training=False, render_mode="rgb_array" if on_frame is not None else None)
    returns: list[float] = []
    try:
        for ep in range(n_episodes):
            obs, _ = env.reset(seed=seed if ep == 0 else None)
            if on_frame is not None:
                on_frame(env.render())
            ret = 0.0
            for _ in range(cap):
                action = policy(np.asarray(obs)[None])[0]
                obs, reward, terminated, truncated, _ = env.step(action)
                if on_frame is not None:
                    on_frame(env.render())
                ret += float(reward)
                if terminated or truncated:
                    break
            returns.append(ret)
    finally:
        env.close()
    return returns

