"""What an algorithm is to the rest of ``bench``: :class:`AlgoSpec`, and the checks a spec can hold.

Each algorithm's folder (``bench/algos/<name>/spec.py``) builds one ``SPEC`` from this module;
:mod:`bench.algos.registry` lists them. This module imports nothing of the algorithms, so a spec can import it
and the registry can import the specs: there is no cycle to fall into (issue 65: adding VPG by the docs failed
with a circular ImportError when the params class lived beside ``train`` and the registry imported both).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic import BaseModel

from bench.algos.search import Dim
from bench.envs.traits import ACTIONS

__all__ = ["AlgoSpec", "CellFacts", "Refusal", "Check", "BudgetMinimum", "IMPLS", "SB3_ADAPTER", "rollout_minimum",
           "phase_minimum", "vector_obs_only", "learns_within_budget", "sb3_missing", "own", "sb3_schedule"]

#: The implementations a built-in algorithm can have: the project's own, SB3's, the pure-NumPy one.
#: (A plugin's is ``python``: :mod:`bench.algos.plugins`.)
IMPLS = ("bench", "sb3", "numpy")
#: The SB3 adapter every SB3 implementation runs through; it is called with the algorithm's name.
SB3_ADAPTER = "bench.algos.sb3:train_sb3"


# --------------------------------------------------------------------------- #
# An algorithm's own checks of a suite's cell
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class CellFacts:
    """What an algorithm's checks see of one cell of a suite: everything resolved.

    :param algo: the algorithm's name; ``label`` the suite entry's display name (``ppo-bench``).
    :param env: the env's key (``LunarLander-v3[continuous=true]``); ``action`` and ``obs`` are its traits.
    :param timesteps: the cell's budget in env steps.
    :param hyperparams: the resolved hyperparameters, as stored with the cell.
    :param impl: the implementation the entry asks for (``bench``, ``sb3``, ``numpy``).
    """

    algo: str
    label: str
    env: str
    action: str
    obs: str
    timesteps: int
    hyperparams: Mapping[str, Any]
    impl: str = "bench"


@dataclass(frozen=True)
class Refusal:
    """Why a cell cannot run: ``at`` is the suite field to blame (the env's or defaults' ``timesteps``,
    the env's ``id``, or the entry's ``impl``), ``message`` one line saying what is allowed, ``value`` the value
    shown (``None`` at ``env``: the env's id)."""

    at: Literal["timesteps", "env", "impl"]
    message: str
    value: Any


Check = Callable[[CellFacts], "Refusal | None"]


@dataclass(frozen=True)
class BudgetMinimum:
    """A check: the budget holds at least one unit of ``n_envs × <per_env>`` steps, the run's smallest step.

    A dataclass, not a closure, so that a spec that holds it pickles (a cell carries its spec to the worker).
    """

    per_env: str
    unit: str

    def __call__(self, f: CellFacts) -> Refusal | None:
        need = int(f.hyperparams.get("n_envs", 1)) * int(f.hyperparams.get(self.per_env, 1))
        if f.timesteps >= need:
            return None
        return Refusal("timesteps", f"budget is smaller than {self.unit} of {f.label} on {f.env} (n_envs × "
                                    f"{self.per_env} = {need}); allowed: >= {need}", f.timesteps)


#: An on-policy run updates once per rollout of ``n_envs × n_steps`` steps: a smaller budget never updates.
rollout_minimum = BudgetMinimum("n_steps", "one rollout")
#: An off-policy run has no rollout: its unit is one training phase, ``train_freq`` steps per env.
phase_minimum = BudgetMinimum("train_freq", "one training phase")


def vector_obs_only(f: CellFacts) -> Refusal | None:
    """The off-policy reference points' replay buffers of frames do not fit the reference's machines."""
    if f.obs != "pixels":
        return None
    return Refusal("env", f"{f.algo} ({f.label}) runs on vector observations only (a replay buffer "
                          f"of frames does not fit the reference's machines), and {f.env} has pixel observations; "
                          "allowed: a vector env", None)


def learns_within_budget(f: CellFacts) -> Refusal | None:
    """An off-policy run takes no gradient step before ``learning_starts`` steps."""
    starts = f.hyperparams.get("learning_starts", 0)
    if f.timesteps > int(starts):
        return None
    return Refusal("timesteps", f"budget ends before {f.label} takes its first gradient step on {f.env} "
                                f"(learning_starts = {starts}); allowed: > {starts}", f.timesteps)


# --------------------------------------------------------------------------- #
# The spec
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class AlgoSpec:
    """Everything ``bench`` knows about one algorithm.

    :param name: the name a suite writes (``algo: ppo``); lowercase, ``[a-z][a-z0-9_]*``.
    :param params: its typed hyperparameters (a pydantic model; on-policy ones subclass
        :class:`bench.HyperParams`). A suite's ``hyperparams`` are validated by it, and ``train`` gets an instance.
    :param impls: implementation (``bench``, ``sb3``, ``numpy``, ``python``) → its ``module:function``, imported
        on first use. Each has the contract ``train(env_id, params, *, seed, timesteps, recorder)``, except
        ``sb3``, which is :data:`SB3_ADAPTER` (called with the name after ``env_id``).
    :param sb3_class: the SB3 / sb3-contrib model class (``stable_baselines3:PPO``) of its ``sb3`` implementation.
    :param policy: ``on`` (rollouts) or ``off`` (a replay buffer: SB3's reference points, never an answer).
    :param actions: the action spaces it acts in; a suite runs it only on envs with one of these (an entry
        that acts in none of the suite's envs is refused).
    :param zoo: rl-baselines3-zoo's tuned values, bench env id → fields of ``params``.
    :param zoo_timesteps: the zoo's ``n_timesteps`` for the same entries.
    :param space: the default search space of ``bench tune`` (empty: it cannot be tuned without a ``tune.space``).
    :param checks: its own checks of a suite's cell, each a :data:`Check`; the first refusal is reported.
    :param missing: implementation → why it does not exist, where there is more to say than the allowed list.
    :param zoo_additions: bench env id → the fields of ``zoo`` that are bench's own values, not the zoo's
        (``bench run --dry-run`` labels them ``bench``).
    :param sb3_kwargs: ``(params, action_space) → dict``: the SB3 constructor arguments of its ``sb3``
        implementation beyond those every on-policy (or off-policy) SB3 algorithm shares, which
        :mod:`bench.algos.sb3` builds. A module-level function, so that the spec pickles.
    :param sb3_separate_critic: its SB3 policy gets a feature extractor of its own for the critic on pixels.
    :param sb3_fixed: hyperparameter → (the one value its ``sb3`` implementation has, why): a suite that sets
        another value for ``impl: sb3`` is refused.
    :param vec_env_refused: env-stepping mode (``async`` ...) → why it cannot run in it.
    """

    name: str
    params: type[BaseModel]
    impls: Mapping[str, str]
    sb3_class: str | None = None
    policy: Literal["on", "off"] = "on"
    actions: tuple[str, ...] = ACTIONS
    zoo: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    zoo_timesteps: Mapping[str, int] = field(default_factory=dict)
    space: Mapping[str, Dim] = field(default_factory=dict)
    checks: tuple[Check, ...] = (rollout_minimum,)
    missing: Mapping[str, str] = field(default_factory=dict)
    zoo_additions: Mapping[str, frozenset[str]] = field(default_factory=dict)
    sb3_kwargs: Callable[[Any, Any], dict[str, Any]] | None = None
    sb3_separate_critic: bool = False
    sb3_fixed: Mapping[str, tuple[Any, str]] = field(default_factory=dict)
    vec_env_refused: Mapping[str, str] = field(default_factory=dict)

    @property
    def module(self) -> str | None:
        """The module of its own implementation (``impl: bench``), if it has one."""
        own = self.impls.get("bench")
        return own.split(":")[0] if own else None

    def trainer(self, impl: str) -> Callable[..., None]:
        """``train(env_id, params, *, seed, timesteps, recorder)`` of implementation ``impl``.

        :raises KeyError: it has no such implementation.
        """
        module, _, attr = self.impls[impl].partition(":")
        fn = getattr(importlib.import_module(module), attr)
        if impl != "sb3":
            return fn
        name = self.name

        def train(env_id: str, params: Any, *, seed: int, timesteps: int, recorder: Any) -> None:
            fn(env_id, name, params, seed=seed, timesteps=timesteps, recorder=recorder)

        return train


def own(module: str, function: str = "train") -> str:
    """The lazy entry point ``bench.algos.<module>:<function>`` (``own("ppo.ppo")``)."""
    return f"bench.algos.{module}:{function}"


def sb3_missing(why: str) -> dict[str, str]:
    """``missing`` of an algorithm that Stable-Baselines3 does not have: ``why`` is said where a suite asks for it."""
    return {"sb3": why}


def sb3_schedule(value: float, kind: str) -> float | Callable[[float], float]:
    """SB3 schedule for a value: constant, or linear decay to 0 (zoo ``lin_X``).

    SB3 calls schedules with ``progress_remaining``, going from 1 at the start of
    training to 0 at the end.
    """
    if kind == "linear":
        return lambda progress_remaining: progress_remaining * value
    return value
