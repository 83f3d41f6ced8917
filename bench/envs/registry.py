"""The registry of known environment ids and their traits.

The registry (:data:`REGISTRY`) holds the ids the benchmark was designed around,
each with a success threshold and where that threshold comes from. Any other
registered Gymnasium id works too; :func:`get_spec` infers its traits by
building the env once.
"""

from __future__ import annotations

import difflib
import functools
import dataclasses
from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import numpy as np

__all__ = [
    "ATARI_FRAME_SKIP",
    "ATARI_MAX_FRAMES",
    "EVAL_STEP_CAP",
    "EnvSpec",
    "Family",
    "REGISTRY",
    "TIME_SCALE_US",
    "env_exists",
    "close_matches",
    "get_spec",
    "list_specs",
    "require",
    "is_atari",
]

Family = Literal["classic", "box2d", "mujoco", "atari", "other"]

#: Atari: agent steps per env step (AtariPreprocessing's action repeat), Mnih et al. 2015.
ATARI_FRAME_SKIP = 4
#: Atari: episode cap in emulator frames (ALE v5 default, Machado et al. 2018) → 27,000 agent steps.
ATARI_MAX_FRAMES = 108_000
#: Step cap for evaluation episodes of envs without a known horizon, so a broken env cannot hang a run.
EVAL_STEP_CAP = 100_000


@dataclass(frozen=True)
class EnvSpec:
    """Traits of one environment, as the benchmark reports and groups them.

    :param id: the Gymnasium id.
    :param family: ``classic`` | ``box2d`` | ``mujoco`` | ``atari`` | ``other``.
    :param action: ``discrete`` or ``continuous`` action space.
    :param obs: ``vector`` or ``pixels`` observations (as the learner sees them).
    :param reward: ``dense`` or ``sparse`` reward signal.
    :param horizon: maximum agent steps per episode, ``None`` when unbounded/unknown.
    :param threshold: the return at which the env counts as solved, ``None`` if none is known.
    :param threshold_source: short citation for ``threshold``.
    :param registered: ``True`` for :data:`REGISTRY` entries, ``False`` for inferred ones.
    :param time_scale_us: CPU microseconds per env step that fix the env's time axis: the
        report's time criteria read each run's learning curve over ``budget × time_scale_us``
        CPU seconds, whatever else is in the store (see :data:`TIME_SCALE_US`); ``None``
        when not yet measured (a suite may give one).
    """

    id: str
    family: Family
    action: Literal["discrete", "continuous"]
    obs: Literal["vector", "pixels"]
    reward: Literal["dense", "sparse"]
    horizon: int | None
    threshold: float | None
    threshold_source: str
    registered: bool = True
    time_scale_us: float | None = None


_GYM = "Gymnasium reward_threshold"
_ATARI_HORIZON = ATARI_MAX_FRAMES // ATARI_FRAME_SKIP  # 27,000 agent steps

#: The built-in registry, in the order the CLI lists it. Horizons are
#: ``gym.spec(id).max_episode_steps``; thresholds are Gymnasium's
#: ``reward_threshold`` wherever it has one (the tests check they still agree).
REGISTRY: dict[str, EnvSpec] = {
    s.id: s
    for s in [
        EnvSpec("CartPole-v1", "classic", "discrete", "vector", "dense", 500, 475.0, _GYM),
        # Sparse: -1 every step until the goal; only reaching the flag is informative.
        EnvSpec("MountainCar-v0", "classic", "discrete", "vector", "sparse", 200, -110.0, _GYM),
        # Gymnasium has no threshold for Pendulum. -200 is a chosen bar: rl-baselines3-zoo's
        # tuned PPO/TRPO reach about -170 to -200 mean return at 100k-200k steps
        # (zoo benchmark table), so -200 means "as good as a tuned on-policy baseline".
        EnvSpec("Pendulum-v1", "classic", "continuous", "vector", "dense", 200, -200.0,
                "chosen: zoo PPO/TRPO reach -170..-200"),
        EnvSpec("LunarLander-v3", "box2d", "discrete", "vector", "dense", 1000, 200.0, _GYM),
        EnvSpec("LunarLanderContinuous-v3", "box2d", "continuous", "vector", "dense", 1000, 200.0, _GYM),
        EnvSpec("HalfCheetah-v5", "mujoco", "continuous", "vector", "dense", 1000, 4800.0, _GYM),
        EnvSpec("Hopper-v5", "mujoco", "continuous", "vector", "dense", 1000, 3800.0, _GYM),
        # Gymnasium has no threshold for Humanoid. 5000 is a chosen bar, commonly used as
        # "solved": in the SB3 / rl-baselines3-zoo MuJoCo tables PPO stays well below it
        # and SAC/TD3 get above it, so it separates "learned to walk" from "did not".
        EnvSpec("Humanoid-v5", "mujoco", "continuous", "vector", "dense", 1000, 5000.0,
                "chosen: common 'solved' bar"),
        # Atari: no Gymnasium threshold. The bar is the professional human games tester's
        # score, Mnih et al. 2015 (Nature DQN), Extended Data Table 2: Breakout 31.8
        # (checked against a transcription of that table: random 1.7, human 31.8),
        # Pong 9.3 (from the same table; not independently re-checked here). Later
        # papers (e.g. Wang et al. 2016, rliable) use a different human set (30.5, 14.6).
        EnvSpec("ALE/Breakout-v5", "atari", "discrete", "pixels", "dense", _ATARI_HORIZON, 31.8,
                "human tester, Mnih et al. 2015"),
        EnvSpec("ALE/Pong-v5", "atari", "discrete", "pixels", "dense", _ATARI_HORIZON, 9.3,
                "human tester, Mnih et al. 2015"),
    ]
}


#: CPU microseconds per env step that fix each env's time axis (``EnvSpec.time_scale_us``).
#: A score's scale must not depend on which algorithms are in the store, so the time
#: horizon is a constant per env, not the slowest run's time. Each value is the CPU time
#: per step of the slowest implementation in the shipped reference results at the env's
#: reference budget (one thread, AMD EPYC, 2026-11-23), rounded up: CartPole-v1 157 µs
#: (sb3 TRPO), Pendulum-v1 231 µs (sb3 PPO), MountainCar-v0 228 µs (sb3 TRPO), from
#: `results/reference.db`; HalfCheetah-v5 826 µs (sb3 PPO, `results/speed-halfcheetah.json`).
#: Envs not yet measured have none; a suite can set ``time_scale_us`` for any env.
TIME_SCALE_US: dict[str, float] = {
    "CartPole-v1": 200.0,
    "Pendulum-v1": 250.0,
    "MountainCar-v0": 250.0,
    "HalfCheetah-v5": 1000.0,
}
REGISTRY = {k: dataclasses.replace(v, time_scale_us=TIME_SCALE_US.get(k)) for k, v in REGISTRY.items()}

# -- Gymnasium registry ------------------------------------------------------
@functools.cache
def _register_ale() -> None:
    """Register the ALE ids with Gymnasium, once (gymnasium>=1.0 no longer does it on import).

    Done lazily so importing :mod:`bench.envs` stays cheap for code that only
    needs the registry table.
    """
    import ale_py

    gym.register_envs(ale_py)


def env_exists(env_id: str) -> bool:
    """Whether ``env_id`` is a registered Gymnasium id (ALE ids included)."""
    _register_ale()
    return env_id in gym.registry


def close_matches(env_id: str, n: int = 3) -> list[str]:
    """Registered ids that look like ``env_id``, best first, for "did you mean" hints."""
    _register_ale()
    return difflib.get_close_matches(env_id, list(gym.registry), n=n, cutoff=0.6)


def require(env_id: str) -> gym.envs.registration.EnvSpec:
    """The Gymnasium spec of ``env_id``, or a :class:`KeyError` that says what is allowed."""
    if not env_exists(env_id):
        near = close_matches(env_id)
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        raise KeyError(
            f"unknown environment {env_id!r}.{hint} Allowed: a registered Gymnasium id "
            f"(built-in registry: {', '.join(REGISTRY)})"
        )
    return gym.spec(env_id)


def is_atari(gspec: gym.envs.registration.EnvSpec) -> bool:
    # By entry point rather than by the "ALE/" prefix, so legacy ids such as
    # BreakoutNoFrameskip-v4 (also registered by ale_py) get the same preprocessing.
    return isinstance(gspec.entry_point, str) and gspec.entry_point.startswith("ale_py")


def _family(gspec: gym.envs.registration.EnvSpec) -> Family:
    ep = gspec.entry_point if isinstance(gspec.entry_point, str) else ""
    if is_atari(gspec):
        return "atari"
    for name in ("classic_control", "box2d", "mujoco"):
        if ep.startswith(f"gymnasium.envs.{name}"):
            return "classic" if name == "classic_control" else name  # type: ignore[return-value]
    return "other"


# -- traits --------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def get_spec(env_id: str) -> EnvSpec:
    """Traits of ``env_id``: the :data:`REGISTRY` entry, or inferred for any other registered id.

    Inference builds the env once (with :func:`make_env`, so Atari ids are seen
    as the learner sees them: stacked 84×84 frames):

    * action: ``Discrete`` → discrete, ``Box`` → continuous (anything else is rejected);
    * obs: a ``uint8`` ``Box`` with two or more dimensions → pixels, else vector;
    * reward: always ``dense``. Sparsity cannot be read off a space, so an
      inferred env is assumed dense; add it to the registry to say otherwise;
    * horizon: ``max_episode_steps`` of the Gymnasium spec (Atari: the frame cap / frame skip);
    * threshold: Gymnasium's ``reward_threshold``, else ``None`` (a suite must then give one).

    :raises KeyError: ``env_id`` is not a registered Gymnasium id.
    :raises ValueError: the env is registered but cannot be built, or its action space is
        neither ``Discrete`` nor ``Box``.
    """
    if env_id in REGISTRY:
        return REGISTRY[env_id]
    gspec = require(env_id)
    try:
        # The raw env: its spaces give the traits (Atari's raw frames are uint8 pixels, as
        # are the factory's preprocessed ones), and the registry needs nothing of the factory.
        env = gym.make(env_id)
    except Exception as e:  # noqa: BLE001 - any failure to build means: unusable here
        raise ValueError(f"{env_id} is registered but could not be built: {type(e).__name__}: {e}") from e
    try:
        act_space, obs_space = env.action_space, env.observation_space
    finally:
        env.close()

    if isinstance(act_space, gym.spaces.Discrete):
        action: Literal["discrete", "continuous"] = "discrete"
    elif isinstance(act_space, gym.spaces.Box):
        action = "continuous"
    else:
        raise ValueError(
            f"{env_id} has a {type(act_space).__name__} action space; allowed: Discrete or Box"
        )
    pixels = (
        isinstance(obs_space, gym.spaces.Box) and obs_space.dtype == np.uint8 and len(obs_space.shape) >= 2
    )
    if is_atari(gspec):
        frames = int(gspec.kwargs.get("max_num_frames_per_episode", ATARI_MAX_FRAMES))
        horizon: int | None = frames // ATARI_FRAME_SKIP
    else:
        horizon = gspec.max_episode_steps
    threshold = None if gspec.reward_threshold is None else float(gspec.reward_threshold)
    return EnvSpec(
        id=env_id,
        family=_family(gspec),
        action=action,
        obs="pixels" if pixels else "vector",
        reward="dense",
        horizon=horizon,
        threshold=threshold,
        threshold_source=_GYM if threshold is not None else "none: set one in the suite",
        registered=False,
    )


def list_specs() -> list[EnvSpec]:
    """The built-in registry, in registry order (``bench envs`` prints it)."""
    return list(REGISTRY.values())
