"""Cells: the runs a suite expands into, each keyed by a hash of what defines it; and ``--only`` filters."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from bench.algos.registry import AlgoSpec
from bench.suites.overrides import Override
from bench.suites.schema import DIAG_POINTS, KEY_VERSION, Suite, merge_resources

# --------------------------------------------------------------------------- #
# Cells
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class Outputs:
    """Where a run writes besides the store, as ``bench run``'s options say; never part of a key.

    :param policies: the folder of saved policies (``--artifacts``); ``None``: beside a SQLite store
        (``results/bench.db`` → ``results/bench.policies``), else ``results/policies``.
    :param tensorboard: mirror the run's scalars to TensorBoard event files under this folder (``--tensorboard``).
    :param wandb: mirror them to this Weights & Biases project (``--wandb``).
    :param verbose: let the W&B client print its own lines (``--verbose``); by default it is silent, so a run's
        output is bench's lines.
    """

    policies: str | None = None
    tensorboard: str | None = None
    wandb: str | None = None
    verbose: bool = False


@dataclass(frozen=True)
class Cell:
    """One run to do: an (env, algorithm, seed) point of the grid, fully resolved."""

    suite: str
    env_id: str
    algo: str
    impl: str
    label: str
    seed: int
    timesteps: int
    threshold: float | None
    window: int
    eval: dict[str, int] | None
    hyperparams: dict[str, Any] = field(hash=False)
    key: str = ""
    #: Stored diagnostics points per key (0 = every update); in the key only when not the default.
    diag_points: int = DIAG_POINTS
    #: Equal-compute budget in training CPU seconds (``None``: env steps only); in the key only when set.
    cpu_seconds: float | None = None
    #: impl python: the plugin's ``module:function`` and its package version, in the key when set.
    entry: str | None = None
    plugin_version: str | None = None
    #: Ray scheduling request (``num_cpus``, ``num_gpus``); deliberately not in :meth:`identity`.
    resources: dict[str, float] = field(default_factory=lambda: merge_resources(), hash=False, compare=False)
    #: Which policies to keep (:data:`SaveMode`); deliberately not in :meth:`identity`: saving reads the policy
    #: and changes nothing the run computes or records, so a run is the same experiment with it on or off.
    save: str = field(default="none", compare=False)
    #: Env steps between mid-run checkpoints (:mod:`bench.run.checkpoints`), ``None``: none. Not in :meth:`identity`:
    #: taking one draws no random numbers and changes nothing the run computes, and a continued run records
    #: the returns the uninterrupted one would have.
    checkpoint_every: int | None = field(default=None, compare=False)
    #: Stop the run at this env step after a checkpoint there (a race's rung, :mod:`bench.api._race`), recorded as
    #: not done, so that the next run of the cell continues it. Not in :meth:`identity`: the run's schedules stay
    #: keyed to ``timesteps``, so what it records up to the pause is the full run's prefix.
    pause_at: int | None = field(default=None, compare=False)
    #: Where the run's files go besides the store (``bench run``'s options); not in :meth:`identity` either.
    outputs: Outputs = field(default_factory=Outputs, compare=False)
    #: Per-run limits (:mod:`bench.run.limits`), enforced by every executor; not in :meth:`identity` either: they
    #: decide whether a run may finish, not what it does, so setting them keeps every key.
    max_wall_minutes: float | None = field(default=None, compare=False)
    max_memory_mb: int | None = field(default=None, compare=False)
    #: Whether ``max_wall_minutes`` is the default one (:func:`bench.suites.cost.default_wall_minutes`), not the
    #: suite's: the stop says so, and Ray does not give the run a worker of its own for it.
    wall_limit_default: bool = field(default=False, compare=False)
    #: The env's time scale (CPU µs per step, the registry's or the suite's; None where it has none), which sets how
    #: long the run may go without an env step before ``bench status`` calls it stalled
    #: (:func:`bench.run.progress.stall_after_s`). Not in :meth:`identity`: it is the env's, not the experiment's.
    time_scale_us: float | None = field(default=None, compare=False)
    #: The ``--set`` overrides (as typed) that reach this cell, for its run's provenance. Not in
    #: :meth:`identity`: what an override changes (a budget, a hyperparameter) is already there, so one
    #: that changes the experiment changes the key and one that does not (a description) leaves it.
    overrides: tuple[str, ...] = field(default=(), hash=False, compare=False)
    #: The resolved hyperparameters as the algorithm's typed model, handed to ``train`` as they are (``hyperparams``
    #: is their stored form, :func:`bench.algos.hyperparams.key_view`, which the key covers). ``None`` in a cell
    #: built elsewhere: the runner validates ``hyperparams`` with the algorithm's model then.
    params: BaseModel | None = field(default=None, hash=False, compare=False, repr=False)
    #: The algorithm's :class:`~bench.algos.registry.AlgoSpec` (a plugin's too), which travels with the cell to the
    #: worker, so an algorithm registered in this process runs in workers that never registered it.
    spec: AlgoSpec | None = field(default=None, hash=False, compare=False, repr=False)

    def identity(self) -> dict[str, Any]:
        """What the key covers: everything that changes what the run does or records."""
        return {
            "v": KEY_VERSION,
            "env_id": self.env_id,
            "algo": self.algo,
            "impl": self.impl,
            "hyperparams": self.hyperparams,
            "seed": self.seed,
            "timesteps": self.timesteps,
            "threshold": self.threshold,
            "window": self.window,
            "eval": self.eval,
            # Only when it differs from the default, so adding the option left every existing key as it was.
            **({"diag_points": self.diag_points} if self.diag_points != DIAG_POINTS else {}),
            **({"cpu_seconds": self.cpu_seconds} if self.cpu_seconds is not None else {}),
            **({"entry": self.entry, "plugin_version": self.plugin_version} if self.entry is not None else {}),
        }


def cell_key(identity: dict[str, Any]) -> str:
    """Stable hash of a cell's identity (sorted JSON, SHA-256, 20 hex digits)."""
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class LoadedSuite:
    suite: Suite
    path: str
    cells: list[Cell]
    #: Per env key: threshold and its source, traits, time scale, for the store (report anchors, profiles).
    env_meta: dict[str, dict[str, Any]]
    #: The suite's plugins (impl: python), loaded: algorithm name → :class:`bench.algos.plugins.Plugin`.
    plugins: dict[str, Any] = field(default_factory=dict)
    #: The command line's ``--set PATH=VALUE`` overrides, applied before validation (:mod:`.overrides`).
    overrides: tuple[Override, ...] = ()
    #: A variant (:mod:`.variants`): the suite of the file's name that it varies, and its labels renamed
    #: (the file's label → the variant's); ``None`` and empty otherwise.
    variant_of: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


def _with_key(cell: Cell) -> Cell:
    return replace(cell, key=cell_key(cell.identity()))



# --------------------------------------------------------------------------- #
# --only filters
# --------------------------------------------------------------------------- #
FILTER_KEYS = ("env", "algo", "impl", "label", "seed")


def parse_only(text: str | None) -> dict[str, set[str]]:
    """Parse ``env=CartPole-v1,algo=ppo`` (repeat a key for alternatives). Raises ValueError."""
    out: dict[str, set[str]] = {}
    if not text:
        return out
    for part in text.split(","):
        if "=" not in part:
            raise ValueError(f"--only: {part!r} is not key=value; allowed keys: {', '.join(FILTER_KEYS)}")
        k, v = (s.strip() for s in part.split("=", 1))
        if k not in FILTER_KEYS:
            raise ValueError(f"--only: unknown key {k!r}; allowed keys: {', '.join(FILTER_KEYS)}")
        out.setdefault(k, set()).add(v)
    return out


def matches_only(only: dict[str, set[str]], values: dict[str, Any]) -> bool:
    """Does a point with these ``values`` (key → its value: env, algo, impl, label, seed) match every key
    of ``only`` (any of its values)? The one rule of ``bench run --only`` and ``bench tune --only``."""

    def names(k: str) -> set[str]:
        v = str(values[k])
        # env=LunarLander-v3 picks every kwargs variant of the id (a key with kwargs holds commas,
        # which --only cannot spell); env=<the whole key> picks one.
        return {v, v.split("[", 1)[0]} if k == "env" else {v}

    return all(names(k) & vs for k, vs in only.items())


def select(cells: list[Cell], only: dict[str, set[str]]) -> list[Cell]:
    """Cells matching every given key (any of its values)."""
    return [c for c in cells if matches_only(only, {"env": c.env_id, "algo": c.algo, "impl": c.impl,
                                                    "label": c.label, "seed": c.seed})]
