"""The env families: everything bench knows of each, one :class:`EnvFamily` a family, in one table.

A family says, in one declaration:

- its ids: the prefixes of the ids it registers (``prefixes``) and the Gymnasium entry points of its envs
  (``entry_point``), so an id or a built env is known to be the family's;
- its registry entries (``envs``): each id's traits, success threshold with its source, and time scale;
- where its ids come from: the module whose import registers them (``module``, imported once and lazily: only
  an id of the family pays for it; MinAtar pulls in seaborn, gymnasium-robotics every robotics model, and
  ``bench recommend`` on the shipped reference must not), what to do once it is imported (``setup``), and the
  optional extra that installs it (``extra``, with its ``licence`` where that is not permissive);
- what the factory does to its envs (``adapter``): the observation adapter between the raw env and the learner.

:data:`FAMILIES` is the table; the registry (:mod:`bench.envs.registry`) reads it and nothing else, so a new family
is one more entry here (docs/architecture.md, "Adding an env family"). Ids no family declares still work: any
registered Gymnasium id is inferred by building it once.

**Thresholds.** A registered id's threshold is Gymnasium's ``reward_threshold`` wherever it has one
(``threshold_source`` :data:`GYM`; ``tests/test_envs.py`` checks they still agree), else a chosen bar whose
source says why; an id no family declares takes Gymnasium's threshold, or none (its suite then gives one).

**Time scales.** ``time_scale_us`` fixes an env's time axis: a score's scale must not depend on which
algorithms are in the store, so the time horizon is a constant per env, not the slowest run's time: the slowest
implementation's mean CPU time per step in the env's shipped reference pack (uncontended runs; its slowest run
where the pack's runs came from machines of different speeds, so that no run's curve is cut), rounded up to
100 µs. docs/reference.md ("Time axes") gives each value's measurements. Envs not yet measured have none; a
suite can set ``time_scale_us`` for any env.

**Observations.** Three families hand out observations that bench's learners cannot take as they are:
MiniGrid's ``Dict(image, direction, mission)``, gymnasium-robotics' goal-conditioned ``Dict(observation,
achieved_goal, desired_goal)`` and highway-env's ``(vehicles, features)`` Kinematics matrix. Their adapters turn
each into one flat vector, the same for every implementation (the env factory applies :func:`adapt` under the
episode monitor, so recorded returns are untouched).
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

from bench.envs.traits import EnvSpec

__all__ = ["FAMILIES", "GYM", "ChannelFirstFrames", "EnvFamily", "OptionalFamily", "adapt", "family_of_id",
           "family_of_spec", "register"]

#: The threshold source of an id whose threshold is Gymnasium's ``reward_threshold``.
GYM = "Gymnasium reward_threshold"
#: Atari: agent steps per env step (AtariPreprocessing's action repeat), Mnih et al. 2015.
ATARI_FRAME_SKIP = 4
#: Atari: episode cap in emulator frames (ALE v5 default, Machado et al. 2018) → 27,000 agent steps.
ATARI_MAX_FRAMES = 108_000


@dataclass(frozen=True)
class EnvFamily:
    """One env family (see the module docstring).

    :param name: the family's name (``EnvSpec.family`` of its envs).
    :param title: its name in messages.
    :param envs: its registry entries, in the order ``bench envs`` lists them; each entry's ``family`` is ``name``.
    :param prefixes: id prefixes it registers (to know which family an id not yet registered needs).
    :param entry_point: prefix of its ids' Gymnasium entry points (to know a built env's family); empty: none.
    :param module: the module whose import registers its ids; ``None`` where Gymnasium registers them itself.
    :param setup: called with the imported ``module``, once, where importing it is not all it takes
        (MinAtar registers on request; gymnasium-robotics needs one adjustment under MuJoCo 4.0).
    :param extra: the pyproject extra that installs ``module``, ``None`` for a core dependency.
    :param adapter: the observation adapter the factory applies, or ``None`` where the learner takes the env as
        it is.
    :param licence: said in the hint when the extra is missing, where it is not permissive.
    """

    name: str
    title: str
    envs: tuple[EnvSpec, ...] = ()
    prefixes: tuple[str, ...] = ()
    entry_point: str = ""
    module: str | None = None
    setup: Callable[[types.ModuleType], None] | None = None
    extra: str | None = None
    adapter: Callable[[gym.Env], gym.Env] | None = None
    licence: str = ""

    def __post_init__(self) -> None:
        wrong = [s.id for s in self.envs if s.family != self.name]
        if wrong:
            raise ValueError(f"family {self.name!r}: entries {wrong} name another family; allowed: family={self.name!r}")


#: The name the optional families had before every family was one (kept for code that imports it).
OptionalFamily = EnvFamily


# -- observation adapters and set-ups ------------------------------------------------------------------------
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
    # Lazy: minigrid is an optional extra, imported only once one of its envs is built.
    from minigrid.wrappers import ImgObsWrapper

    env = gym.wrappers.FlattenObservation(ImgObsWrapper(env))
    return gym.wrappers.DtypeObservation(env, np.float32)


def _flatten(env: gym.Env) -> gym.Env:
    """A ``Dict`` of boxes (goal-conditioned robotics) or a 2-D box (highway-env's Kinematics
    ``(vehicles, features)``) as one vector, in Gymnasium's order (``Dict`` keys sorted)."""
    return gym.wrappers.FlattenObservation(env)


def _register_with_gymnasium(module: types.ModuleType) -> None:
    """ale_py and gymnasium-robotics: ``gym.register_envs`` (gymnasium>=1.0 no longer does it on import)."""
    gym.register_envs(module)


def _minatar_setup(module: types.ModuleType) -> None:
    if "MinAtar/Breakout-v1" not in gym.registry:  # registering twice would warn
        module.register_envs()


def _robotics_setup(module: types.ModuleType) -> None:
    gym.register_envs(module)
    _joint_types_as_ints()


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
    # Lazy: MuJoCo and gymnasium-robotics load only once a robotics id is asked for.
    import mujoco

    try:
        from gymnasium_robotics.utils import mujoco_utils
    except ImportError:  # a gymnasium-robotics without the module: nothing to adjust
        return
    slide = mujoco.mjtJoint.mjJNT_SLIDE
    if isinstance(mujoco_utils.mujoco, _MujocoWithIntJointTypes) or slide == np.int32(int(slide)):
        return
    mujoco_utils.mujoco = _MujocoWithIntJointTypes(mujoco)


# -- the families ------------------------------------------------------------------------------------------
_MINIGRID = "chosen: success within about a fifth of the step limit"
_ATARI_HORIZON = ATARI_MAX_FRAMES // ATARI_FRAME_SKIP  # 27,000 agent steps
_MINATAR_DQN = "Young & Tian 2019 DQN at 5M frames (read off README plot)"

CLASSIC = EnvFamily("classic", "classic control", entry_point="gymnasium.envs.classic_control", envs=(
    EnvSpec("CartPole-v1", "classic", "discrete", "vector", "dense", 500, 475.0, GYM, time_scale_us=300.0),
    # Sparse: -1 every step until the goal; only reaching the flag is informative.
    EnvSpec("MountainCar-v0", "classic", "discrete", "vector", "sparse", 200, -110.0, GYM, time_scale_us=500.0),
    # Gymnasium has no threshold for Pendulum. -200 is a chosen bar: rl-baselines3-zoo's
    # tuned PPO/TRPO reach about -170 to -200 mean return at 100k-200k steps
    # (zoo benchmark table), so -200 means "as good as a tuned on-policy baseline".
    EnvSpec("Pendulum-v1", "classic", "continuous", "vector", "dense", 200, -200.0,
            "chosen: zoo PPO/TRPO reach -170..-200", time_scale_us=400.0),
    # Sparse: +100 on reaching the flag, and until then only the action cost −0.1·a² per step, which
    # rewards doing nothing (a deceptive local optimum at 0 return; Gymnasium's docs). The zoo's PPO, A2C
    # and TRPO all explore it with gSDE (benchmark.md: 88 to 92 at 20k-100k steps).
    EnvSpec("MountainCarContinuous-v0", "classic", "continuous", "vector", "sparse", 999, 90.0, GYM,
            time_scale_us=2500.0),
))

BOX2D = EnvFamily("box2d", "Box2D", entry_point="gymnasium.envs.box2d", envs=(
    EnvSpec("LunarLander-v3", "box2d", "discrete", "vector", "dense", 1000, 200.0, GYM, time_scale_us=700.0),
    EnvSpec("LunarLanderContinuous-v3", "box2d", "continuous", "vector", "dense", 1000, 200.0, GYM,
            time_scale_us=500.0),
    EnvSpec("BipedalWalker-v3", "box2d", "continuous", "vector", "dense", 1600, 300.0, GYM, time_scale_us=700.0),
    # Pixels with continuous actions (steer, gas, brake): frames from the env factory's frame pipeline
    # (each action repeated 2 frames, grayscale 84×84, 4 stacked); the horizon is in agent steps (1,000
    # frames / 2).
    EnvSpec("CarRacing-v3", "box2d", "continuous", "pixels", "dense", 500, 900.0, GYM, time_scale_us=19000.0),
    # Two Box2D tasks drawn (bench.envs.pixels): 2 frames per action, grey 84×84, 4 stacked, as CarRacing; the
    # horizon in agent steps (1,000 and 1,600 frames / 2). Same rewards and bars as the vector versions.
    EnvSpec("bench/LunarLanderContinuous-Pixels-v3", "box2d", "continuous", "pixels", "dense", 500, 200.0, GYM,
            time_scale_us=18400.0),
    EnvSpec("bench/BipedalWalker-Pixels-v3", "box2d", "continuous", "pixels", "dense", 800, 300.0, GYM,
            time_scale_us=22000.0),
))

MUJOCO = EnvFamily("mujoco", "MuJoCo", entry_point="gymnasium.envs.mujoco", envs=(
    EnvSpec("HalfCheetah-v5", "mujoco", "continuous", "vector", "dense", 1000, 4800.0, GYM, time_scale_us=1300.0),
    EnvSpec("Hopper-v5", "mujoco", "continuous", "vector", "dense", 1000, 3800.0, GYM, time_scale_us=1000.0),
    # Gymnasium has no threshold for Walker2d. 3000 is a chosen bar: rl-baselines3-zoo's
    # tuned on-policy agents end above it at 1M steps (benchmark.md, Walker2d-v3: PPO 3,479,
    # TRPO 4,933), so it means "walks as well as a tuned on-policy baseline".
    EnvSpec("Walker2d-v5", "mujoco", "continuous", "vector", "dense", 1000, 3000.0,
            "chosen: zoo PPO/TRPO reach 3.5k-4.9k at 1M", time_scale_us=2100.0),
    # Gymnasium has no threshold for Humanoid. 5000 is a chosen bar, commonly used as
    # "solved": in the SB3 / rl-baselines3-zoo MuJoCo tables PPO stays well below it
    # and SAC/TD3 get above it, so it separates "learned to walk" from "did not".
    EnvSpec("Humanoid-v5", "mujoco", "continuous", "vector", "dense", 1000, 5000.0, "chosen: common 'solved' bar"),
    EnvSpec("Ant-v5", "mujoco", "continuous", "vector", "dense", 1000, 6000.0, GYM, time_scale_us=1400.0),
    EnvSpec("Swimmer-v5", "mujoco", "continuous", "vector", "dense", 1000, 360.0, GYM, time_scale_us=1100.0),
))

# gymnasium-robotics (MIT; optional extra `robotics`): goal-conditioned Dict observations, flattened by the adapter.
ROBOTICS = EnvFamily(
    "robotics", "gymnasium-robotics", prefixes=("PointMaze_", "AntMaze_", "Fetch"), entry_point="gymnasium_robotics",
    module="gymnasium_robotics", setup=_robotics_setup, extra="robotics", adapter=_flatten, envs=(
        # Sparse: reward 1 while the ball is within 0.45 of the goal, else 0; the task continues after the goal is
        # reached (the package's default), so a return counts the steps spent at the goal. No published threshold:
        # 200 is a chosen bar, "at the goal for two thirds of the 300 steps". The goal-conditioned Dict observation
        # is flattened (the adapter).
        EnvSpec("PointMaze_UMaze-v3", "robotics", "continuous", "vector", "sparse", 300, 200.0,
                "chosen: at the goal for 200 of 300 steps", time_scale_us=900.0),
        # FetchReach-v4 (gymnasium-robotics' Fetch arm, Plappert et al. 2018, "Multi-Goal Reinforcement Learning"):
        # sparse, reward -1 per step while the gripper is farther than 0.05 from the goal, 0 within it; 50
        # steps, no termination at the goal, so a return counts the steps spent away from it (random policy about
        # -50). No published on-policy threshold (the paper reports success rates, with HER): -10 is a chosen
        # bar, "reaches the goal within about 10 steps and stays there". Built under MuJoCo 4.0 through this
        # family's set-up (the joint-type adjustment above).
        EnvSpec("FetchReach-v4", "robotics", "continuous", "vector", "sparse", 50, -10.0,
                "chosen: at the goal after about 10 of 50 steps", time_scale_us=1700.0),
    ))

# highway-env (MIT; optional extra `highway`): Kinematics observations, flattened by the adapter.
HIGHWAY = EnvFamily(
    "highway", "highway-env", entry_point="highway_env", module="highway_env", extra="highway", adapter=_flatten,
    prefixes=("highway", "merge-", "roundabout-", "intersection-", "racetrack-", "exit-", "u-turn-", "two-way-",
              "lane-keeping-", "parking-"), envs=(
        # Kinematics observation (5 vehicles × 5 features), flattened. Per-step reward normalised to [0, 1] (speed
        # and right lane; 0 on collision, which ends the episode), 30 policy steps (duration 30 s at 1 Hz). No
        # published threshold: 22.5 is a chosen bar, 3/4 of the maximum return, "survives the 30 steps, mostly at
        # high speed".
        EnvSpec("highway-fast-v0", "highway", "discrete", "vector", "dense", 30, 22.5,
                "chosen: 3/4 of the maximum return 30", time_scale_us=31000.0),
        # intersection-v0: Kinematics of 15 vehicles × 7 features (105 numbers), 3 actions (slower, idle, faster);
        # per-step reward the scaled speed in [0, 1], 1 on each step after arriving at the exit, −5 on a collision
        # (which ends the episode, as arriving does); at most 13 steps. Arriving at full speed takes about 10
        # steps, so the best return is about 10 (measured 2026-12-07: always "faster" over 30 seeded episodes,
        # max 10.0, mean 5.4 with 13 % crashes; random 1.6). No published threshold: 7.5 is a chosen bar, 3/4 of
        # that maximum, "crosses at speed without a crash".
        EnvSpec("intersection-v0", "highway", "discrete", "vector", "dense", 13, 7.5,
                "chosen: 3/4 of the maximum return 10"),
        # two-way-v0: a TimeToCollision grid (3 × 3 × 5, 45 numbers); per-step reward 0.8 · speed index + 0.2 for
        # the left lane (oncoming traffic's), 0 and the end of the episode on a collision; 15 steps, so at most 15.
        # No published threshold: 11.25 is a chosen bar, 3/4 of the maximum return (measured 2026-12-07 over 30
        # seeded episodes: random mean 4.9, always "left lane" 10.7).
        EnvSpec("two-way-v0", "highway", "discrete", "vector", "dense", 15, 11.25,
                "chosen: 3/4 of the maximum return 15", time_scale_us=9100.0),
    ))

# MiniGrid (Apache-2.0; optional extra `minigrid`; Chevalier-Boisvert et al. 2023). Sparse: the only reward is
# 1 − 0.9 · t / T on success (t steps taken, T the step limit), 0 otherwise. The learner sees the agent's 7×7×3
# view flattened (the adapter). No published threshold: 0.8 is a chosen bar, "succeeds, within about a fifth of
# the step limit" (T = 250, 288, 100, 270 below).
MINIGRID = EnvFamily(
    "minigrid", "MiniGrid", prefixes=("MiniGrid-", "BabyAI-"), entry_point="minigrid", module="minigrid",
    extra="minigrid", adapter=_minigrid_view, envs=(
        EnvSpec("MiniGrid-DoorKey-5x5-v0", "minigrid", "discrete", "vector", "sparse", 250, 0.8, _MINIGRID,
                time_scale_us=900.0),
        EnvSpec("MiniGrid-Unlock-v0", "minigrid", "discrete", "vector", "sparse", 288, 0.8, _MINIGRID,
                time_scale_us=900.0),
        EnvSpec("MiniGrid-LavaGapS5-v0", "minigrid", "discrete", "vector", "sparse", 100, 0.8, _MINIGRID,
                time_scale_us=900.0),
        EnvSpec("MiniGrid-KeyCorridorS3R1-v0", "minigrid", "discrete", "vector", "sparse", 270, 0.8, _MINIGRID,
                time_scale_us=600.0),
        # The same three tasks seen as pixels (bench.envs.pixels): MiniGrid's own RGB image of the agent's view,
        # 56×56, channel-first. Same rewards, step limits and bars as the vector versions.
        EnvSpec("bench/MiniGrid-DoorKey-5x5-Pixels-v0", "minigrid", "discrete", "pixels", "sparse", 250, 0.8, _MINIGRID),
        EnvSpec("bench/MiniGrid-Unlock-Pixels-v0", "minigrid", "discrete", "pixels", "sparse", 288, 0.8, _MINIGRID),
        EnvSpec("bench/MiniGrid-LavaGapS5-Pixels-v0", "minigrid", "discrete", "pixels", "sparse", 100, 0.8, _MINIGRID),
    ))

# Atari (ale-py, a core dependency; registered on first need, gymnasium>=1.0 no longer does it on import). The
# factory gives every ale_py id the Nature DQN preprocessing (bench.envs.factory.make_env).
ATARI = EnvFamily(
    "atari", "Atari", prefixes=("ALE/",), entry_point="ale_py", module="ale_py", setup=_register_with_gymnasium,
    envs=(
        # No Gymnasium threshold. The bar is the professional human games tester's score, Mnih et al. 2015
        # (Nature DQN), Extended Data Table 2: Breakout 31.8 (checked against a transcription of that table:
        # random 1.7, human 31.8), Pong 9.3 (from the same table; not independently re-checked here). Later
        # papers (e.g. Wang et al. 2016, rliable) use a different human set (30.5, 14.6).
        EnvSpec("ALE/Breakout-v5", "atari", "discrete", "pixels", "dense", _ATARI_HORIZON, 31.8,
                "human tester, Mnih et al. 2015", time_scale_us=6900.0),
        EnvSpec("ALE/Pong-v5", "atari", "discrete", "pixels", "dense", _ATARI_HORIZON, 9.3,
                "human tester, Mnih et al. 2015", time_scale_us=5900.0),
    ))

# MinAtar (Young & Tian 2019, arXiv:1903.03176; the `minatar` package, GPL-3.0, an optional extra:
# pip install -e '.[minatar]'). 10×10 frames, one channel per kind of object; the adapter hands them
# to the learner channel-first as uint8 0/1, and the policies use the paper's small CNN. v1 ids:
# the minimal action sets (Breakout 3, Asterix 5, Freeway 3), as gymnax and PureJaxRL use. Sticky
# actions (p = 0.1) and difficulty ramping on: the package's and the paper's defaults. No episode
# cap but Freeway's own: it terminates on step 2,501 (its timer of 2,500 frames runs out).
# Thresholds: the paper's DQN after 5M frames (the MinAtar README's learning curves,
# img/learning_curves.gif: 30 runs, 100-episode moving average, read off the plot to the nearest
# unit): Breakout 10, Asterix 17, Freeway 50. Random policy (1,000 episodes, README): Breakout 0.5.
MINATAR = EnvFamily(
    "minatar", "MinAtar", prefixes=("MinAtar/",), entry_point="minatar", module="minatar.gym", setup=_minatar_setup,
    extra="minatar", adapter=ChannelFirstFrames, licence="GPL-3.0", envs=(
        EnvSpec("MinAtar/Breakout-v1", "minatar", "discrete", "pixels", "dense", None, 10.0, _MINATAR_DQN,
                time_scale_us=1400.0),
        EnvSpec("MinAtar/Asterix-v1", "minatar", "discrete", "pixels", "dense", None, 17.0, _MINATAR_DQN,
                time_scale_us=1300.0),
        # Sparse: +1 per crossing of the road, about one per 3,500 random steps (measured: 0.7 per
        # 2,500-frame episode); Atari's Freeway is a hard-exploration, sparse-reward game in Bellemare
        # et al. 2016's taxonomy of Atari games by exploration ("Unifying Count-Based Exploration and
        # Intrinsic Motivation").
        EnvSpec("MinAtar/Freeway-v1", "minatar", "discrete", "pixels", "sparse", 2501, 50.0, _MINATAR_DQN,
                time_scale_us=1100.0),
        # Seaquest: the same plot, DQN about 20 at 5M frames; the README says its Seaquest curves predate a fix of
        # the oxygen bar in MinAtar 1.0.11 (bench runs 1.0.15), so the bar is approximate.
        EnvSpec("MinAtar/Seaquest-v1", "minatar", "discrete", "pixels", "dense", None, 20.0,
                "Young & Tian 2019 DQN at 5M frames (README plot, MinAtar <= 1.0.10)", time_scale_us=2200.0),
    ))

#: Every family, in the order ``bench envs`` lists their envs. A new family is one more entry.
FAMILIES: tuple[EnvFamily, ...] = (CLASSIC, BOX2D, MUJOCO, ROBOTICS, HIGHWAY, MINIGRID, ATARI, MINATAR)


# -- lookups -------------------------------------------------------------------------------------------------
def family_of_id(gym_id: str) -> EnvFamily | None:
    """The family whose ids start like ``gym_id`` (or that declares it), if any."""
    return next((f for f in FAMILIES if gym_id.startswith(f.prefixes) or any(s.id == gym_id for s in f.envs)),
                None) if gym_id else None


def family_of_spec(gspec: gym.envs.registration.EnvSpec) -> EnvFamily | None:
    """The family of a registered Gymnasium spec, by its entry point."""
    ep = gspec.entry_point if isinstance(gspec.entry_point, str) else ""
    return next((f for f in FAMILIES if f.entry_point and ep.startswith(f.entry_point)), None)


@functools.cache
def register(name: str) -> bool:
    """Import the family's module once, so its ids are registered; whether it is installed (a family whose ids
    Gymnasium registers itself: always)."""
    fam = next(f for f in FAMILIES if f.name == name)
    if fam.module is None:
        return True
    try:
        # gymnasium-robotics prints a notice about its Adroit envs to stderr on import: not ours to show.
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            mod = importlib.import_module(fam.module)
    except ImportError:
        return False
    if fam.setup is not None:
        fam.setup(mod)
    return True


def adapt(gspec: gym.envs.registration.EnvSpec, env: gym.Env) -> gym.Env:
    """``env`` as the learner sees it: its family's observation adapter applied, if it has one."""
    fam = family_of_spec(gspec)
    return fam.adapter(env) if fam is not None and fam.adapter is not None else env
