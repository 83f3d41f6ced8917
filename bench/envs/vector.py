"""How a run's envs are stepped: the vector-env backends behind :func:`bench.envs.make_vec_env`.

Every implementation gets its envs from ``make_vec_env(..., vec_env=mode)`` (the
SB3 baselines through :func:`bench.algos.sb3.sb3_vec_env`, an SB3 ``VecEnv`` over
the same Gymnasium vector env), so own-vs-SB3 comparisons always step envs alike.
Every backend here keeps the one contract the collectors rely on: Gymnasium's
``AutoresetMode.SAME_STEP``, a finished sub-env is reset within ``step()`` and its
last observation is in ``info["final_obs"]`` (masked by ``info["_final_obs"]``).

Modes (:data:`VEC_ENV_MODES`):

- ``sync``: :class:`SameStepSyncVectorEnv` (Gymnasium's ``SyncVectorEnv`` with a
  leaner step) over :func:`bench.envs.make_env`, each copy with its own
  :class:`~bench.envs.factory.EpisodeMonitor` (the default, and the only mode for
  Atari, whose raw score is recorded inside the wrapper stack);
- ``async``: ``gym.vector.AsyncVectorEnv``, the same envs in subprocesses (for
  simulators whose step costs more than the inter-process round trip);
- ``vector``: the env's own NumPy-vectorised implementation (Gymnasium's
  ``vector_entry_point``; in Gymnasium 1.x only CartPole's is NumPy, the
  ``phys2d`` ones are JAX);
- ``envpool``: the C++ envs of the ``envpool`` package (Weng et al. 2022), where it
  implements the same id. Its dynamics and versions may differ from Gymnasium's.

In the three modes other than ``sync``, episodes are recorded by
:class:`VectorEpisodeMonitor` on the vector env, in the same order and at the same
step counts as the per-env monitors of ``sync``.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.vector.utils import batch_space

from bench.envs.checks import bad_action, bad_dtype, float_box, non_numeric, raised, returned
from bench.envs.registry import is_atari, parse_env_key, require

__all__ = ["VEC_ENV_MODES", "VecEnvMode", "vec_env_problem", "VectorEpisodeMonitor", "SameStepSyncVectorEnv",
           "SameStepCartPoleVectorEnv",
           "EnvPoolVectorEnv", "make_vector_backend"]

VecEnvMode = Literal["sync", "async", "vector", "envpool"]
VEC_ENV_MODES: tuple[str, ...] = ("sync", "async", "vector", "envpool")

_CARTPOLE_VECTOR = "gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv"


def envpool_installed() -> bool:
    """Whether the optional ``envpool`` package can be imported (it has wheels for Linux x86-64 only)."""
    return importlib.util.find_spec("envpool") is not None


def vec_env_problem(env_id: str, mode: str) -> str | None:
    """Why ``env_id`` (an env key) cannot be stepped in ``mode``, in one sentence, or None if it can.

    :raises KeyError: ``env_id`` is not a registered Gymnasium id.
    """
    if mode not in VEC_ENV_MODES:
        return f"unknown env stepping; allowed: {', '.join(VEC_ENV_MODES)}"
    if mode == "sync":
        return None
    gspec = require(env_id)
    module, gym_id, kwargs = parse_env_key(env_id)
    if is_atari(gspec):
        return (f"{gym_id} is Atari, whose raw game score is recorded inside each env's wrapper stack (under life "
                "loss and reward clipping); allowed for Atari: sync")
    if mode == "vector":
        ep = gspec.vector_entry_point
        if ep is None:
            return (f"{gym_id} has no vector entry point (gym.make_vec's vectorization_mode='vector_entry_point'); "
                    "allowed here: sync, async (vector: CartPole-v0, CartPole-v1)")
        if ep != _CARTPOLE_VECTOR:
            return (f"{gym_id}'s vector entry point {ep} is not one bench can reset in the same step; "
                    "allowed here: sync, async (vector: CartPole-v0, CartPole-v1)")
    if mode == "envpool":
        if not envpool_installed():
            return "the envpool package is not installed (pip install envpool); allowed here: sync, async"
        import envpool

        if module is not None or kwargs or gym_id not in envpool.list_all_envs():
            what = "gym.make kwargs" if kwargs else f"{gym_id}"
            return f"envpool has no {what} (envpool.list_all_envs()); allowed here: sync, async"
    return None


class VectorEpisodeMonitor(gym.vector.VectorWrapper):
    """:class:`~bench.envs.factory.EpisodeMonitor` for a whole (same-step autoreset) vector env.

    Sub-env ``i`` of a step is counted as in ``sync`` mode, where its own monitor
    runs inside ``SyncVectorEnv.step`` after sub-envs ``0..i-1``: one added to
    ``recorder.steps``, then its episode if it ended. So a recorder sees the same
    episodes at the same step counts in every mode, given the same transitions.
    Returns are summed in float64 from the rewards the vector env returns (raw:
    normalisation happens above, in the algorithm or SB3's ``VecNormalize``).
    """

    def __init__(self, env: gym.vector.VectorEnv, recorder: Any, env_id: str = "?") -> None:
        super().__init__(env)
        self.recorder = recorder
        self.env_id = env_id
        self._ret = np.zeros(self.num_envs, np.float64)
        self._len = np.zeros(self.num_envs, np.int64)
        # The checks of EpisodeMonitor (:mod:`bench.envs.checks`), on the whole batch at once.
        self._check_obs = float_box(env.single_observation_space)
        self._check_act = float_box(env.single_action_space)

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        self._ret[:] = 0.0
        self._len[:] = 0
        obs, info = self.env.reset(seed=seed, options=options)
        if non_numeric(obs):
            raise bad_dtype(self.env_id, obs, self.single_observation_space, self.recorder.steps, reset=True)
        return obs, info

    def step(self, actions):
        if self._check_act and not np.isfinite(actions).all():
            raise bad_action(self.env_id, actions, self.recorder.steps + 1)
        try:
            obs, reward, terminated, truncated, info = self.env.step(actions)
        except Exception as e:  # noqa: BLE001 - any failure of a sub-env's step: named, with the step
            raise raised(self.env_id, e, self.recorder.steps + 1) from e
        if not np.isfinite(reward).all():
            raise returned(self.env_id, "reward", reward, self.recorder.steps + 1)
        if non_numeric(obs):
            raise bad_dtype(self.env_id, obs, self.single_observation_space, self.recorder.steps + 1)
        if self._check_obs and not np.isfinite(obs).all():
            raise returned(self.env_id, "observation", obs, self.recorder.steps + 1)
        self._ret += reward
        self._len += 1
        done = np.logical_or(terminated, truncated)
        if not done.any():
            self.recorder.steps += self.num_envs
            return obs, reward, terminated, truncated, info
        for i in range(self.num_envs):
            self.recorder.steps += 1
            if done[i]:
                self.recorder.episode(float(self._ret[i]), int(self._len[i]))
                self._ret[i] = 0.0
                self._len[i] = 0
        return obs, reward, terminated, truncated, info


class SameStepSyncVectorEnv(gym.vector.SyncVectorEnv):
    """Gymnasium's ``SyncVectorEnv`` with same-step autoreset and a step that batches only what
    the collectors read: observations, rewards, terminations, truncations, and at episode ends
    ``final_obs`` and ``final_info`` (with their ``_final_obs``/``_final_info`` masks), as the parent
    does, in the parent's layout. What it leaves out is the parent's batching of every key of every
    sub-env's per-step ``info``, and of a reset's ``info`` (``_add_info``: an array and a mask per
    key per step), and the deep copy of the observations (a plain array copy here, the same values).

    Why: inside a run (HalfCheetah-v5, one env, own PPO, 2026-11-25) the parent's ``step`` cost
    about 30 µs above its sub-env's, which is more than the MuJoCo step's own Python overhead and
    ~5% of the whole run; most of it is that per-key batching of an info dict nobody reads
    (``x_position``, ``reward_ctrl``, ...). Episode statistics reach the recorder through each
    sub-env's :class:`~bench.envs.factory.EpisodeMonitor`, not through ``info``.

    The transitions are the parent's, bit for bit (``tests/test_envs.py``). Anything the lean step
    does not cover (another autoreset mode, non-array observation or action spaces) takes the
    parent's ``step``.
    """

    def __init__(self, env_fns: Any, **kwargs: Any) -> None:
        super().__init__(env_fns, **kwargs)
        self._lean = (self.autoreset_mode == gym.vector.AutoresetMode.SAME_STEP
                      and isinstance(self.single_observation_space, gym.spaces.Box)
                      and isinstance(self.single_action_space, (gym.spaces.Box, gym.spaces.Discrete)))

    def step(self, actions):
        if not self._lean:
            return super().step(actions)
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            obs, self._rewards[i], term, trunc, info = env.step(actions[i])
            self._terminations[i], self._truncations[i] = term, trunc
            if term or trunc:  # batched exactly as the parent batches them
                infos = self._add_info(infos, {"final_obs": obs, "final_info": info}, i)
                obs, _ = env.reset()
            self._env_obs[i] = obs
            self._observations[i] = obs
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        return (self._observations.copy() if self.copy else self._observations, self._rewards.copy(),
                self._terminations.copy(), self._truncations.copy(), infos)


def _final_info(obs: np.ndarray, done: np.ndarray) -> dict[str, Any]:
    """The ``final_obs``/``final_info`` entries of ``SyncVectorEnv``'s same-step info, for the ``done`` sub-envs."""
    final = np.full(len(done), None, dtype=object)
    for i in np.flatnonzero(done):
        final[i] = obs[i].copy()
    return {"final_obs": final, "_final_obs": done.copy(), "final_info": {}, "_final_info": done.copy()}


class SameStepCartPoleVectorEnv(CartPoleVectorEnv):
    """Gymnasium's NumPy-vectorised CartPole, with same-step autoreset.

    ``CartPoleVectorEnv`` (Gymnasium 1.x) only autoresets on the *next* step, which
    costs each finished sub-env a dummy transition (reward 0, action ignored) that
    the collectors would have to mask. Here the finished sub-envs are re-drawn at
    the end of the same ``step()`` with the very draw the parent would make one
    step later (uniform in ±0.05), and their last observation goes to
    ``info["final_obs"]``. The dynamics are the parent's, unchanged.

    Differences from ``sync`` CartPole (``gym.make`` per sub-env): one random
    generator draws every sub-env's start state (``reset(seed=s)`` seeds it with
    ``s``, where ``sync`` seeds sub-env ``i`` with ``s + i``), so start states, and
    hence episodes, differ for the same seed; given the same state and action the
    transition, reward, termination and truncation are the same (to float
    rounding: NumPy's ``cos``/``sin`` on arrays against ``math``'s on scalars).
    """

    metadata = {**CartPoleVectorEnv.metadata, "autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        done = self.prev_done.copy()  # the parent's "reset on the next step" mask: terminated | truncated
        if not done.any():
            return obs, reward, terminated, truncated, info
        info = _final_info(obs, done)
        self.state[:, done] = self.np_random.uniform(low=self.low, high=self.high, size=(4, int(done.sum())))
        self.steps[done] = 0
        self.prev_done[:] = False
        return self.state.T.astype(np.float32), reward, terminated, truncated, info


class EnvPoolVectorEnv(gym.vector.VectorEnv):
    """An ``envpool`` batch of ``num_envs`` envs as a Gymnasium vector env with same-step autoreset.

    envpool autoresets on the next step, like ``CartPoleVectorEnv``; its
    ``reset(env_id=...)`` resets chosen envs at once, which gives the same-step
    reset here. envpool fixes its seeds when the pool is built (sub-env ``i``
    gets ``seed + i``), so ``reset(seed=s)`` builds a new pool seeded with ``s``.
    Its envs are envpool's own C++ implementations: dynamics, start-state
    distributions and time limits may differ from Gymnasium's.
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, gym_id: str, num_envs: int) -> None:
        self._gym_id = gym_id
        self.num_envs = num_envs
        self._pool = self._make(seed=0)
        self.single_observation_space = self._pool.observation_space
        self.single_action_space = self._pool.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    def _make(self, seed: int) -> Any:
        import envpool  # optional: vec_env_problem has checked that it is installed

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*precision lowered.*")  # envpool's float64 Box bounds
            # One worker thread, not envpool's default of one per env: bench's runs are single-threaded so
            # that process CPU seconds measure them, and on 2 cores a pool of 8 threads costs more than it
            # steps (CartPole, quiet machine, 2026-11-24: 84k against 70k env steps per CPU second; each
            # spinning worker adds CPU seconds beside the wall clock). docs/performance.md#env-stepping.
            return envpool.make_gymnasium(self._gym_id, num_envs=self.num_envs, seed=int(seed), num_threads=1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._pool.close()
            self._pool = self._make(seed)
        obs, _ = self._pool.reset()
        return obs, {}

    def step(self, actions):
        obs, reward, terminated, truncated, _ = self._pool.step(np.asarray(actions))
        done = np.logical_or(terminated, truncated)
        if not done.any():
            return obs, reward, terminated, truncated, {}
        info = _final_info(obs, done)
        ids = np.flatnonzero(done)
        fresh, _ = self._pool.reset(env_id=ids.astype(np.int32))
        obs = obs.copy()
        obs[ids] = fresh
        return obs, reward, terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        self._pool.close()


def make_vector_backend(env_id: str, n_envs: int, mode: str) -> gym.vector.VectorEnv:
    """The ``vector`` or ``envpool`` vector env of ``env_id`` (no monitor; see :func:`bench.envs.make_vec_env`).

    :raises ValueError: ``env_id`` cannot be stepped in ``mode`` (:func:`vec_env_problem`).
    """
    why = vec_env_problem(env_id, mode)
    if why is not None:
        raise ValueError(f"vec_env {mode}: {why}")
    _, gym_id, kwargs = parse_env_key(env_id)
    if mode == "vector":
        gspec = require(env_id)
        # gym.make_vec(id, vectorization_mode="vector_entry_point") builds the parent class with the spec's
        # time limit and the key's kwargs; the subclass is built with the same arguments.
        kw = {"max_episode_steps": gspec.max_episode_steps, **gspec.kwargs, **kwargs}
        return SameStepCartPoleVectorEnv(num_envs=n_envs, **kw)
    if mode == "envpool":
        return EnvPoolVectorEnv(gym_id, n_envs)
    raise ValueError(f"make_vector_backend builds vector and envpool envs, not {mode!r}")
