"""The one place an algorithm is declared: an :class:`AlgoSpec` per algorithm in :data:`ALGOS`.

A spec holds everything the rest of ``bench`` needs to know about an algorithm: its typed
hyperparameters, the implementations it has and the ``train`` callable of each, the SB3 class its
baseline is, the action spaces it acts in, rl-baselines3-zoo's tuned values, the default search space
of ``bench tune`` and the checks a suite's cell must pass. Suite validation (allowed names and
implementations, the reasons one is missing), the runner's dispatch, the command line's help and the
tuner's default spaces are all read from here. Adding an algorithm is one module with a ``train`` and
one :func:`register` call (or one entry below)::

    register(AlgoSpec(name="toy", params=ToyParams, impls={"bench": "my_pkg.toy:train"}))

Implementations are named as ``module:function`` strings and imported on first use, so reading the
registry (as suite validation does) imports no torch and no SB3.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic import BaseModel

import bench.algos.onpolicy_params as on
import bench.algos.search as search
import bench.algos.zoo as zoo
from bench.algos.offpolicy_params import OFF_POLICY_PARAMS, ZOO_OFF_POLICY, ZOO_OFF_POLICY_TIMESTEPS
from bench.algos.search import Dim
from bench.envs.traits import ACTIONS

__all__ = ["AlgoSpec", "ALGOS", "CellFacts", "Refusal", "register", "unregister", "spec", "names", "IMPLS", "PARAMS",
           "ZOO", "ZOO_TIMESTEPS", "AVAILABLE", "DEFAULT_SPACES", "OFF_POLICY_ACTIONS", "View", "BudgetMinimum",
           "rollout_minimum", "phase_minimum", "vector_obs_only", "learns_within_budget"]

#: The implementations a built-in algorithm can have: the project's own, SB3's, the pure-NumPy one.
#: (A plugin's is ``python``: :mod:`bench.algos.plugins`.)
IMPLS = ("bench", "sb3", "numpy")
#: The SB3 adapter every SB3 implementation runs through; it is called with the algorithm's name.
SB3_ADAPTER = "bench.baselines:train_sb3"


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
    """

    algo: str
    label: str
    env: str
    action: str
    obs: str
    timesteps: int
    hyperparams: Mapping[str, Any]


@dataclass(frozen=True)
class Refusal:
    """Why a cell cannot run: ``at`` is the suite field to blame (the env's or defaults' ``timesteps``,
    or the env's ``id``), ``message`` one line saying what is allowed, ``value`` the value shown (``None``
    at ``env``: the env's id)."""

    at: Literal["timesteps", "env"]
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


def _own(module: str) -> str:
    return f"bench.algos.{module}:train"


def _sb3_missing(what: str) -> dict[str, str]:
    return {"sb3": what}


_OFF_MISSING = "bench has no {} of its own: off-policy algorithms are SB3's reference points"

#: algorithm name → its spec, in the textbook ladder's order REINFORCE → AC-MC → AC-TD → A2C → A3C → NPG →
#: TRPO → PPO, then GRPO and RLOO, then the off-policy reference points. Two names are rungs that another
#: algorithm's module runs exactly, with their own defaults: ``ac_mc`` is REINFORCE with ``baseline: value``;
#: ``ac_td`` is A2C with one env. ``rloo`` (REINFORCE with a leave-one-out baseline over a group) is GRPO's
#: module with ``advantage: rloo``. Their default spaces are their module's, less what the name fixes.
ALGOS: dict[str, AlgoSpec] = {s.name: s for s in [
    AlgoSpec("reinforce", on.REINFORCEParams, {"bench": _own("reinforce"), "numpy": _own("reinforce_numpy")},
             space=search.SPACE_REINFORCE, missing=_sb3_missing("Stable-Baselines3 has no REINFORCE")),
    AlgoSpec("ac_mc", on.ACMCParams, {"bench": _own("reinforce")},
             space={k: v for k, v in search.SPACE_REINFORCE.items() if k != "baseline"},
             missing=_sb3_missing("Stable-Baselines3 has no REINFORCE with a value baseline (ac_mc)")),
    # n_envs is not in A2C's space, so one-env A2C searches all of it.
    AlgoSpec("ac_td", on.ACTDParams, {"bench": _own("a2c")}, space=dict(search.SPACE_A2C),
             missing=_sb3_missing("ac_td is the project's name for one-env A2C; for SB3 use algo a2c with n_envs 1")),
    AlgoSpec("a2c", on.A2CParams, {"bench": _own("a2c"), "sb3": SB3_ADAPTER}, sb3_class="stable_baselines3:A2C",
             zoo=zoo.ZOO_A2C, zoo_timesteps=zoo.ZOO_TIMESTEPS_A2C, space=search.SPACE_A2C),
    AlgoSpec("a3c", on.A3CParams, {"bench": _own("a3c")}, space=search.SPACE_A3C,
             missing=_sb3_missing("Stable-Baselines3 has no A3C")),
    # NPG shares TRPO's space: target_kl is its normalised step size.
    AlgoSpec("npg", on.NPGParams, {"bench": _own("npg")}, space=dict(search.SPACE_TRPO),
             missing=_sb3_missing("Stable-Baselines3 and sb3-contrib have no NPG")),
    AlgoSpec("trpo", on.TRPOParams, {"bench": _own("trpo"), "sb3": SB3_ADAPTER}, sb3_class="sb3_contrib:TRPO",
             zoo=zoo.ZOO_TRPO, zoo_timesteps=zoo.ZOO_TIMESTEPS_TRPO, space=search.SPACE_TRPO),
    AlgoSpec("ppo", on.PPOParams, {"bench": _own("ppo"), "sb3": SB3_ADAPTER}, sb3_class="stable_baselines3:PPO",
             zoo=zoo.ZOO_PPO, zoo_timesteps=zoo.ZOO_TIMESTEPS_PPO, space=search.SPACE_PPO),
    AlgoSpec("grpo", on.GRPOParams, {"bench": _own("grpo")}, space=search.SPACE_GRPO,
             missing=_sb3_missing("Stable-Baselines3 has no GRPO")),
    # RLOO is GRPO's module at one epoch by default: the ratio is 1, so clip_range does nothing there.
    AlgoSpec("rloo", on.RLOOParams, {"bench": _own("grpo")},
             space={k: v for k, v in search.SPACE_GRPO.items() if k not in ("clip_range", "n_epochs")},
             missing=_sb3_missing("Stable-Baselines3 has no RLOO")),
    # Off-policy reference points (bench.algos.offpolicy_params): SB3's only, never the project's answers.
    # SB3's DQN is discrete-only, SAC and TD3 continuous-only.
    *[AlgoSpec(name, OFF_POLICY_PARAMS[name], {"sb3": SB3_ADAPTER}, sb3_class=f"stable_baselines3:{name.upper()}",
               policy="off", actions=(action,), zoo=ZOO_OFF_POLICY[name], zoo_timesteps=ZOO_OFF_POLICY_TIMESTEPS[name],
               checks=(phase_minimum, vector_obs_only, learns_within_budget),
               missing={i: _OFF_MISSING.format(name.upper()) for i in ("bench", "numpy")})
      for name, action in (("dqn", "discrete"), ("sac", "continuous"), ("td3", "continuous"))],
]}


def register(algo: AlgoSpec) -> None:
    """Declare an algorithm: from now on suites, the runner, ``bench tune`` and the help read it.

    :raises ValueError: the name is taken or is not one a suite can write, or the spec names no implementation.
    """
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", algo.name):
        raise ValueError(f"algorithm name {algo.name!r} cannot be written in a suite; allowed: a lowercase letter, "
                         "then up to 31 lowercase letters, digits or _")
    if algo.name in ALGOS:
        raise ValueError(f"algorithm {algo.name!r} is already registered; give it its own name")
    if not algo.impls:
        raise ValueError(f"algorithm {algo.name!r} names no implementation; allowed: {', '.join(IMPLS)}")
    ALGOS[algo.name] = algo


def unregister(name: str) -> None:
    """Take a registered algorithm out again (a test's toy algorithm)."""
    ALGOS.pop(name, None)


def spec(name: str) -> AlgoSpec:
    """The spec of algorithm ``name``.

    :raises KeyError: not a registered algorithm (the message lists them).
    """
    try:
        return ALGOS[name]
    except KeyError:
        raise KeyError(f"unknown algorithm {name!r}; allowed: {', '.join(ALGOS)}") from None


def names(policy: str | None = None) -> tuple[str, ...]:
    """The registered algorithms, in registry order (only the on- or off-policy ones with ``policy``)."""
    return tuple(n for n, s in ALGOS.items() if policy is None or s.policy == policy)


# --------------------------------------------------------------------------- #
# Derived tables: read-only views that follow register()
# --------------------------------------------------------------------------- #
class View(Mapping[str, Any]):
    """algorithm name → ``get(spec)`` over the registry as it is now, for the specs ``keep`` accepts."""

    def __init__(self, get: Callable[[AlgoSpec], Any], keep: Callable[[AlgoSpec], bool] = lambda s: True) -> None:
        self._get, self._keep = get, keep

    def __getitem__(self, name: str) -> Any:
        s = ALGOS[name]
        if not self._keep(s):
            raise KeyError(name)
        return self._get(s)

    def __iter__(self) -> Iterator[str]:
        return (n for n, s in ALGOS.items() if self._keep(s))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return repr(dict(self))


#: algorithm → its hyperparameter model.
PARAMS: Mapping[str, type[BaseModel]] = View(lambda s: s.params)
#: algorithm → bench env id → rl-baselines3-zoo tuned hyperparameters, as fields of ``PARAMS[algo]``.
ZOO: Mapping[str, Mapping[str, Mapping[str, Any]]] = View(lambda s: s.zoo)
#: algorithm → bench env id → the zoo's ``n_timesteps`` for that entry (the budget it was tuned for).
ZOO_TIMESTEPS: Mapping[str, Mapping[str, int]] = View(lambda s: s.zoo_timesteps)
#: algorithm → the implementations it has.
AVAILABLE: Mapping[str, tuple[str, ...]] = View(lambda s: tuple(s.impls))
#: algorithm → its default search space, for those that have one.
DEFAULT_SPACES: Mapping[str, Mapping[str, Dim]] = View(lambda s: s.space, lambda s: bool(s.space))
#: off-policy algorithm → the one action space it acts in.
OFF_POLICY_ACTIONS: Mapping[str, str] = View(lambda s: s.actions[0], lambda s: s.policy == "off")
