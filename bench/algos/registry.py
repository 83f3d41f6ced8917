"""The list of algorithms: one line per algorithm folder, in :data:`FOLDERS`, and :data:`ALGOS` read from them.

Each algorithm is a folder ``bench/algos/<name>/`` whose ``spec.py`` exports ``SPEC``, an
:class:`~bench.algos.spec.AlgoSpec`: its typed hyperparameters, the implementations it has (lazy
``module:function`` strings), the SB3 class of its baseline and its constructor arguments, the action
spaces it acts in, rl-baselines3-zoo's tuned values, the default search space of ``bench tune`` and the
checks a suite's cell must pass. Suite validation (allowed names and implementations, the reasons one is
missing), the runner's dispatch, the SB3 adapter, the command line's help and the tuner's default spaces
are all read from here. Adding an algorithm is its folder and its name in :data:`FOLDERS`
(docs/architecture.md, "Adding an algorithm"); a package of your own declares one with :func:`register`::

    register(AlgoSpec(name="toy", params=ToyParams, impls={"bench": "my_pkg.toy:train"}))

A ``spec.py`` imports no torch and no SB3 (its implementations are named by string and imported on first
use), so reading the registry, as suite validation does, imports neither.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from typing import Any, Callable

from pydantic import BaseModel

from bench.algos.search import Dim
from bench.algos.spec import (
    IMPLS,
    SB3_ADAPTER,
    AlgoSpec,
    BudgetMinimum,
    CellFacts,
    Check,
    Refusal,
    learns_within_budget,
    phase_minimum,
    rollout_minimum,
    vector_obs_only,
)

__all__ = ["AlgoSpec", "ALGOS", "FOLDERS", "CellFacts", "Check", "Refusal", "register", "unregister", "spec", "names",
           "IMPLS", "SB3_ADAPTER", "PARAMS", "ZOO", "ZOO_TIMESTEPS", "AVAILABLE", "DEFAULT_SPACES",
           "OFF_POLICY_ACTIONS", "View", "BudgetMinimum", "rollout_minimum", "phase_minimum", "vector_obs_only",
           "learns_within_budget"]

#: The algorithm folders under ``bench/algos/``, one line each, in the textbook ladder's order REINFORCE → AC-MC →
#: AC-TD → A2C → A3C → NPG → TRPO → PPO, then GRPO and RLOO, then the off-policy reference points (SB3's only,
#: never the project's answers). Three names are rungs that another algorithm's module runs exactly, with their own
#: defaults: ``ac_mc`` (REINFORCE with ``baseline: value``), ``ac_td`` (A2C with one env) and ``rloo`` (GRPO's module
#: with ``advantage: rloo``); their folders hold only their spec.
FOLDERS: tuple[str, ...] = (
    "reinforce",
    "ac_mc",
    "ac_td",
    "a2c",
    "a3c",
    "npg",
    "trpo",
    "ppo",
    "grpo",
    "rloo",
    "dqn",
    "sac",
    "td3",
)

#: algorithm name → its spec, in :data:`FOLDERS`' order (then those :func:`register` added).
ALGOS: dict[str, AlgoSpec] = {s.name: s for s in (importlib.import_module(f"bench.algos.{f}.spec").SPEC
                                                  for f in FOLDERS)}


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
