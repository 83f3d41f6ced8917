"""Env families that come from optional packages, and what the learner sees of their observations.

Each family is one optional extra (``pip install -e '.[minigrid]'``, …) whose package registers its
ids with Gymnasium when imported. Importing is lazy and per family: only an id with the family's prefix
pays for it (MinAtar pulls in seaborn, gymnasium-robotics every robotics model; ``bench recommend``
on the shipped reference must not).

Three of these families hand out observations that bench's learners cannot take as they are: MiniGrid's
``Dict(image, direction, mission)``, gymnasium-robotics' goal-conditioned ``Dict(observation,
achieved_goal, desired_goal)`` and highway-env's ``(vehicles, features)`` Kinematics matrix.
:func:`adapt` turns each into one flat vector, the same for every implementation (the env factory
applies it under the episode monitor, so recorded returns are untouched).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import types
import warnings
from dataclasses import dataclass
from typing import Callable

import gymnasium as gym
import numpy as np

__all__ = ["FAMILIES", "ChannelFirstFrames", "OptionalFamily", "adapt", "family_of_id", "family_of_spec", "register"]


class ChannelFirstFrames(gym.ObservationWrapper):
    """MinAtar: ``(H, W, C)`` bool object channels → ``(C, H, W)`` uint8 0/1, the layout and dtype the
    CNNs of every implementation take (the frames the registry calls pixels)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        h, w, c = env.observation_space.shape
        self.observation_space = gym.spaces.Box(0, 1, (c, h, w), np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(observation, -1, 0), dtype=np.uint8)


def _minigrid_view(env: gym.Env) -> gym.Env:
    """MiniGrid: the agent's egocentric 7×7×3 view (object, colour, state indices), flattened to 147
    float32 numbers. The direction and the mission string are dropped: the four envs bench uses have one
    fixed mission each, and the view shows what the agent faces (Chevalier-Boisvert et al. 2023,
    "Minigrid & Miniworld", the ``ImgObsWrapper`` setting)."""
    from minigrid.wrappers import ImgObsWrapper

    env = gym.wrappers.FlattenObservation(ImgObsWrapper(env))
    return gym.wrappers.DtypeObservation(env, np.float32)


def _flatten(env: gym.Env) -> gym.Env:
    """A ``Dict`` of boxes (goal-conditioned robotics) or a 2-D box (highway-env's Kinematics
    ``(vehicles, features)``) as one vector, in Gymnasium's order (``Dict`` keys sorted)."""
    return gym.wrappers.FlattenObservation(env)


@dataclass(frozen=True)
class OptionalFamily:
    """One optional env family.

    :param name: the registry's family name (``EnvSpec.family``).
    :param title: its name in messages.
    :param extra: the pyproject extra that installs it.
    :param module: the module whose import registers its ids.
    :param prefixes: id prefixes it registers (to know which family an unknown id needs).
    :param entry_point: prefix of its ids' Gymnasium entry points (to know a built env's family).
    :param adapter: the observation adapter, or ``None`` where the learner takes the env as it is.
    :param licence: said in the hint when the extra is missing, where it is not permissive.
    """

    name: str
    title: str
    extra: str
    module: str
    prefixes: tuple[str, ...]
    entry_point: str
    adapter: Callable[[gym.Env], gym.Env] | None = None
    licence: str = ""


FAMILIES: tuple[OptionalFamily, ...] = (
    OptionalFamily("minatar", "MinAtar", "minatar", "minatar.gym", ("MinAtar/",), "minatar", ChannelFirstFrames,
                   licence="GPL-3.0"),
    OptionalFamily("minigrid", "MiniGrid", "minigrid", "minigrid", ("MiniGrid-", "BabyAI-"), "minigrid", _minigrid_view),
    OptionalFamily("robotics", "gymnasium-robotics", "robotics", "gymnasium_robotics", ("PointMaze_", "AntMaze_", "Fetch"),
                   "gymnasium_robotics", _flatten),
    OptionalFamily("highway", "highway-env", "highway", "highway_env",
                   ("highway", "merge-", "roundabout-", "intersection-", "racetrack-", "exit-", "u-turn-", "two-way-",
                    "lane-keeping-", "parking-"), "highway_env", _flatten),
)


def family_of_id(gym_id: str) -> OptionalFamily | None:
    """The optional family whose ids start like ``gym_id``, if any."""
    return next((f for f in FAMILIES if gym_id.startswith(f.prefixes)), None)


def family_of_spec(gspec: gym.envs.registration.EnvSpec) -> OptionalFamily | None:
    """The optional family of a registered Gymnasium spec, by its entry point."""
    ep = gspec.entry_point if isinstance(gspec.entry_point, str) else ""
    return next((f for f in FAMILIES if ep.startswith(f.entry_point)), None)


@functools.cache
def register(name: str) -> bool:
    """Import the family's package once, so its ids are registered; whether it is installed."""
    fam = next(f for f in FAMILIES if f.name == name)
    try:
        # gymnasium-robotics prints a notice about its Adroit envs to stderr on import: not ours to show.
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            mod = importlib.import_module(fam.module)
    except ImportError:
        return False
    if fam.name == "minatar":
        if "MinAtar/Breakout-v1" not in gym.registry:  # registering twice would warn
            mod.register_envs()
    elif fam.name == "robotics":
        gym.register_envs(mod)
        _joint_types_as_ints()
    return True


class _MujocoWithIntJointTypes(types.SimpleNamespace):
    """The ``mujoco`` module as one gymnasium-robotics helper module sees it: ``mjtJoint``'s members as plain
    ints (their values), every other name the real module's."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__(mjtJoint=types.SimpleNamespace(**{n: int(v) for n, v in real.mjtJoint.__members__.items()}))
        self._real = real

    def __getattr__(self, name: str):
        return getattr(self._real, name)


def _joint_types_as_ints() -> None:
    """Let gymnasium-robotics 1.4.2's Fetch envs build under MuJoCo 4.0.

    Its joint helpers (``gymnasium_robotics.utils.mujoco_utils``: a joint's qpos and qvel, set and read, which
    every Fetch env's set-up calls) check ``model.jnt_type[i] in (mjtJoint.mjJNT_HINGE, mjtJoint.mjJNT_SLIDE)``.
    MuJoCo 4.0's enum members answer ``==`` against a NumPy integer with False from their side
    (``mjJNT_SLIDE == np.int32(2)`` is False, ``np.int32(2) == mjJNT_SLIDE`` True), and a tuple's ``in``
    asks its members: every Fetch env failed its set-up with an AssertionError. Those helpers now see
    integer joint types, which compare equal either way round; nothing else changes, and a MuJoCo whose
    enums compare equal to NumPy integers is left alone."""
    import mujoco

    try:
        from gymnasium_robotics.utils import mujoco_utils
    except ImportError:  # a gymnasium-robotics without the module: nothing to adjust
        return
    slide = mujoco.mjtJoint.mjJNT_SLIDE
    if isinstance(mujoco_utils.mujoco, _MujocoWithIntJointTypes) or slide == np.int32(int(slide)):
        return
    mujoco_utils.mujoco = _MujocoWithIntJointTypes(mujoco)


def adapt(gspec: gym.envs.registration.EnvSpec, env: gym.Env) -> gym.Env:
    """``env`` as the learner sees it: its family's observation adapter applied, if it has one."""
    fam = family_of_spec(gspec)
    return fam.adapter(env) if fam is not None and fam.adapter is not None else env
