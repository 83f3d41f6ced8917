"""Tuning studies with Optuna: multi-seed, pruned, resumable, fault-tolerant.

One *target* is an (algorithm, implementation, env) to tune; one Optuna study
holds its trials. ``bench tune SUITE.yaml`` makes one target per (algorithm
entry, env) of the suite, all with the same trials, seeds and env steps, so
every algorithm gets the same tuning effort.

A trial
-------
A trial samples hyperparameters from the target's search space
(:mod:`bench.suites.spaces`), then trains on every tuning seed, one after the other,
through the very path ``bench run`` uses: :func:`bench.run.runner.train_cell`
dispatches the same :class:`~bench.suites.suite.Cell`, and
:func:`bench.run.runner.result_of` computes the same summary with
:func:`bench.analysis.metrics.summarize`. Its value is the mean over seeds of the
per-seed objective:

- ``auc``: the report's sample-efficiency score of the run,
  :func:`bench.analysis.metrics.normalised_auc` over ``(0, budget]``: the
  running mean of the last ``window`` returns, read on a fixed grid of env
  steps, mapped so that the env's random-policy return is 0 and its threshold 1,
  capped at 1, and averaged (maximised). The random-policy return is the report's
  anchor (:func:`bench.analysis.anchors.ensure_anchors`), resolved once per target
  from the study's store before any trial runs (:func:`with_anchor`) and kept in
  the study's settings, so every worker scores with the same value and a trial's
  value is the very number the report gives that run;
- ``final_return``: the mean return of the last ``window`` episodes (maximised);
- ``steps_to_threshold``: env steps until the trailing mean reaches the
  threshold (minimised). A censored seed, one that never reaches it, counts as
  **2 × budget**: the PAR-2 convention of solver competitions (a time-out scores
  twice the time limit), so a seed that never solves ranks below one that solves
  on the last step, and censored runs are never dropped.

Until version 2 (:data:`OBJECTIVE_VERSIONS`), ``auc`` was the mean training
return per episode, which weights a run's many short early episodes over its
few long late ones and is on the env's raw scale. A study tuned under an older
version of its objective is refused, since its values are not comparable.

Pruning: intermediate values at fixed budget fractions
------------------------------------------------------
Seeds train one after another, and each seed reports at ``checkpoints`` equal
fractions of its budget (default 4: 25 %, 50 %, 75 %, 100 %). The report's
*step* is the env steps the trial has consumed, ``i × budget + k × budget /
checkpoints`` for seed ``i``, and its *value* is the mean of the finished seeds'
objectives and the objective of the current seed's curve so far (for ``auc``,
``normalised_auc`` with ``upto`` = the checkpoint's ``k × budget / checkpoints``
steps, so at one checkpoint every trial's value covers the same steps; at the
last checkpoint it is the seed's objective). Every trial of
a study follows this same schedule with the same seeds in the same order, so
the pruner (Optuna's ``MedianPruner`` by default) always compares values that
mean the same thing at the same step. Reports come from the recorder's
``after_update`` hook, so the pruner can stop a trial mid-seed; a trial may not
be pruned before ``n_warmup_checkpoints`` of its first seed nor before
``n_startup_trials`` trials have finished.

A NaN or diverging run (:class:`bench.storage.record.Diverged`, or a non-finite
objective) makes the trial PRUNED; any other exception makes it FAIL, with the
error kept as the ``error`` user attribute, and the study goes on.

Storage, resume and faults
--------------------------
Studies live in the results store's own database (``--store``: SQLite by
default, PostgreSQL for several processes or hosts), in Optuna's tables beside
bench's. Running a target again loads its study and adds trials:
``--trials`` is the number of *finished* (complete or pruned) trials wanted in
total, so asking for 6 after 4 runs 2 more. A study remembers its settings
(objective and its version, budget, seeds, space, threshold, window, the
random-policy return ``auc`` is normalised with, ...); adding trials with
different ones is refused, since their scores would not be comparable.

Each trial runs with Optuna's heartbeat (``RDBStorage(heartbeat_interval=...)``).
A worker killed with SIGKILL leaves its trial RUNNING with a heartbeat that
stops; the next ``bench tune`` on the study (or any of its cooperating workers,
before each trial) marks it FAIL once the heartbeat is ``grace`` seconds old, and
``RetryHeartbeatStaleTrialCallback`` re-queues it as a WAITING trial with the
same parameters (system attributes ``failed_trial`` and ``retry_history`` say
which), which the next trial to start picks up first.

``workers > 1`` starts that many processes, each running ``study.optimize`` on
the shared storage. SQLite is refused for that: Optuna's FAQ advises against
concurrent writers on SQLite; use PostgreSQL.

Sampling is TPE (multivariate), seeded with ``sampler_seed + trials already in
the study + 10007 × worker`` so that a resumed study or a second worker does not
replay the first one's random start-up trials.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

import numpy as np

from bench.storage.record import Diverged, Recorder
# What makes a bench study, its objective versions and its retries: storage's vocabulary, which packs and the analysis read.
# A study scored under another objective version is refused; studies from before versions were kept count as 1.
from bench.storage.vocabulary import MAX_RETRY, OBJECTIVE_VERSIONS, STUDY_ATTR
from bench.suites.spaces import (DEFAULT_SPACES, Dim, TuneSpec, build_space, parse_space, plugin_space, sample,
                                 suite_algos)
from bench.suites.suite import AVAILABLE, Cell, cell_key, matches_only

#: Optimisation direction of each objective.
DIRECTIONS = {"auc": "maximize", "final_return": "maximize", "steps_to_threshold": "minimize"}
#: What each version of an objective meant, for the refusal message.
OBJECTIVE_MEANINGS = {
    ("auc", 1): "the mean training return per episode",
    ("auc", 2): "the report's per-step AUC, normalised from the random-policy return (0) to the threshold (1)",
}
#: Objectives whose target resolves the env's random-policy anchor before tuning: ``auc``
#: is scored with it, and ``final_return`` is put on its scale by the sensitivity table.
ANCHORED = ("auc", "final_return")
#: A censored seed's steps_to_threshold, in budgets (PAR-2).
CENSORED_PENALTY = 2.0
#: Seconds between a running trial's heartbeats, and before a silent one counts as dead.
HEARTBEAT_S = 60
GRACE_S = 120


SQLITE_WORKERS = (
    "--workers: {workers} workers on a SQLite store is refused (Optuna's FAQ advises against concurrent writers "
    "on SQLite); use a PostgreSQL store (--store postgresql://USER@HOST:PORT/DB) or --workers 1"
)
SQLITE_RAY = (
    "--executor ray: tuning workers on Ray need a store every worker can write to at once; SQLite is not one "
    "(use --store postgresql://USER@HOST:PORT/DB)"
)


class BadInput(ValueError):
    """A user error in flags or settings: one line, exit status 2, nothing runs."""


# --------------------------------------------------------------------------- #
# Targets
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class Target:
    """One (algorithm, implementation, env) to tune, with everything a trial needs."""

    study: str
    algo: str
    impl: str
    label: str
    env_id: str
    threshold: float
    window: int
    timesteps: int
    seeds: tuple[int, ...]
    objective: str
    checkpoints: int
    space: dict[str, Dim]
    fixed: dict[str, Any] = field(default_factory=dict)
    pruner: dict[str, Any] = field(default_factory=dict)
    sampler_seed: int = 0
    suite: str | None = None
    #: impl python: the plugin's ``module:function`` and its package version (as in :class:`Cell`).
    entry: str | None = None
    plugin_version: str | None = None
    #: The env's random-policy return (the report's anchor at ``threshold``); set by
    #: :func:`with_anchor` before trials run, ``None`` until then.
    random_return: float | None = None

    @property
    def direction(self) -> str:
        return DIRECTIONS[self.objective]

    def identity(self) -> dict[str, Any]:
        """What a study's trials were scored under; adding trials requires the same.

        ``random_return`` is part of it only for ``auc``, the one objective it changes.
        """
        ident = {
            "algo": self.algo, "impl": self.impl, "env_id": self.env_id, "fixed": self.fixed,
            "threshold": self.threshold, "window": self.window, "timesteps": self.timesteps,
            "seeds": list(self.seeds), "objective": self.objective,
            "objective_version": OBJECTIVE_VERSIONS[self.objective], "checkpoints": self.checkpoints,
            "space": {k: d.describe() for k, d in self.space.items()},
        }
        if self.objective == "auc":
            ident["random_return"] = self.random_return
        if self.entry is not None:  # only for plugins, so every earlier study keeps its identity
            ident["entry"] = self.entry
        return json.loads(json.dumps(ident))

    def params(self, hyperparams: dict[str, Any]) -> Any:
        """The typed hyperparameters of ``hyperparams`` on this target: the built-in's layers
        (defaults ← zoo ← these), or a plugin's own model (defaults ← these)."""
        if self.entry is not None:
            from bench.algos.plugins import load

            return load(self.entry).params.model_validate(hyperparams)
        from bench.algos.hyperparams import resolve

        return resolve(self.algo, self.env_id, hyperparams)

    def cell(self, hyperparams: dict[str, Any], seed: int) -> Cell:
        """The cell ``bench run`` would make for these resolved hyperparameters and seed."""
        c = Cell(
            suite=self.suite or "tune", env_id=self.env_id, algo=self.algo, impl=self.impl, label=self.label,
            seed=seed, timesteps=self.timesteps, threshold=self.threshold, window=self.window, eval=None,
            hyperparams=hyperparams, entry=self.entry, plugin_version=self.plugin_version,
        )
        from dataclasses import replace

        return replace(c, key=cell_key(c.identity()))

    def marks(self) -> list[int]:
        """Env steps of a seed at which intermediate values are reported, shape ``(checkpoints,)``."""
        return [math.ceil(k * self.timesteps / self.checkpoints) for k in range(1, self.checkpoints + 1)]


def _n_envs(algo: str, env_id: str, fixed: dict[str, Any]) -> int:
    from bench.algos.hyperparams import resolve

    return int(resolve(algo, env_id, fixed).n_envs)  # type: ignore[attr-defined]


def _for_impl(space: dict[str, Dim], impl: str) -> dict[str, Dim]:
    """``space`` without the dimensions ``impl`` does not use (the NumPy REINFORCE has no network)."""
    from bench.suites.suite import NUMPY_UNUSED

    return {k: v for k, v in space.items() if not (impl == "numpy" and k in NUMPY_UNUSED)}


def target_from_flags(
    algo: str,
    impl: str,
    env_id: str,
    *,
    timesteps: int | None = None,
    seeds: int = 3,
    objective: str = "auc",
    study: str | None = None,
) -> Target:
    """A target from ``bench tune --algo --impl --env``: the default space, the registry's threshold."""
    from bench.envs import env_exists, get_spec
    from bench.algos.hyperparams import PARAMS, ZOO_TIMESTEPS

    if algo not in PARAMS:
        raise BadInput(f"--algo: unknown algorithm {algo!r}; allowed: {', '.join(PARAMS)}")
    if algo not in DEFAULT_SPACES:
        raise BadInput(f"--algo: {algo} is an off-policy reference point, run with the zoo's values and not tuned (no "
                       f"search space); allowed: {', '.join(DEFAULT_SPACES)}")
    if impl not in AVAILABLE[algo]:
        raise BadInput(f"--impl: {impl!r} is not available for {algo}; allowed: {', '.join(AVAILABLE[algo])}")
    if not env_exists(env_id):
        raise BadInput(f"--env: unknown environment {env_id!r}; allowed: a registered Gymnasium id (see `bench envs`)")
    threshold = get_spec(env_id).threshold
    if threshold is None:
        raise BadInput(f"--env: {env_id} has no threshold; tune it from a suite file that sets envs[i].threshold")
    if objective not in DIRECTIONS:
        raise BadInput(f"--objective: unknown objective {objective!r}; allowed: {', '.join(DIRECTIONS)}")
    if timesteps is None:
        timesteps = ZOO_TIMESTEPS.get(algo, {}).get(env_id)
        if timesteps is None:
            raise BadInput(f"--timesteps: rl-baselines3-zoo has no budget for {algo} on {env_id}; give --timesteps")
    spec = TuneSpec(seeds=seeds, objective=objective, timesteps=timesteps)  # type: ignore[arg-type]
    n_envs = _n_envs(algo, env_id, {})
    if n_envs > timesteps:
        raise BadInput(f"--timesteps: {timesteps} is smaller than one rollout of {algo} on {env_id} (n_envs {n_envs})")
    space = _for_impl(build_space(algo, {}, fixed={}, use_defaults=True, n_envs=n_envs, timesteps=timesteps,
                                  checkpoints=spec.checkpoints), impl)
    return Target(
        study=study or f"{algo}-{impl}-{env_id}", algo=algo, impl=impl, label=f"{algo}-{impl}", env_id=env_id,
        threshold=float(threshold), window=20, timesteps=timesteps, seeds=tuple(spec.seed_list), objective=objective,
        checkpoints=spec.checkpoints, space=space, pruner=spec.pruner.model_dump(), sampler_seed=spec.sampler_seed,
    )


def targets_from_suite(
    loaded: Any,
    *,
    timesteps: int | None = None,
    seeds: int | None = None,
    objective: str | None = None,
    study: str | None = None,
    only: dict[str, set[str]] | None = None,
) -> list[Target]:
    """One target per (algorithm entry, env) of a loaded suite; flags override its ``tune:`` block.

    ``only`` (``bench tune --only``, parsed by :func:`bench.suites.suite.parse_only`) keeps the targets that
    match every key given (env, algo, impl, label; any of a key's values), as ``bench run --only`` keeps
    cells: a long tuning suite then runs in chunks, each study resuming where it stopped. A study's name
    depends only on its suite, algorithm and env, so a chunk's studies are the whole suite's.
    """
    suite = loaded.suite
    spec: TuneSpec = suite.tune or TuneSpec()
    over: dict[str, Any] = {}
    if seeds is not None:
        over["seeds"] = seeds
    if objective is not None:
        over["objective"] = objective
    if over:
        spec = TuneSpec.model_validate({**spec.model_dump(), **over})
    from bench.algos.hyperparams import PARAMS

    plugins = getattr(loaded, "plugins", {})
    models = {**PARAMS, **{n: p.params for n, p in plugins.items()}}
    algos = suite_algos(suite, models)
    user, issues = parse_space(spec.space, algos, models=models)
    assert not issues, issues  # load_suite already reported these
    pairs = [(a, e) for a in suite.algorithms for e in suite.envs]
    if only:
        if "seed" in only:
            raise BadInput("--only: seed= picks runs, and a study tunes on the suite's tune seeds; allowed keys here: "
                           "env, algo, impl, label")
        n = len(pairs)
        pairs = [(a, e) for a, e in pairs
                 if matches_only(only, {"env": e.key, "algo": a.algo, "impl": a.impl, "label": a.display})]
        if not pairs:
            given = ",".join(f"{k}={v}" for k, vs in only.items() for v in sorted(vs))
            raise BadInput(f"--only: {given!r} matches none of the {n} (algorithm, env) targets of {loaded.path}")
    if study is not None and len(pairs) > 1:
        raise BadInput(f"--study: names one study, but {loaded.path} has {len(pairs)} (algorithm, env) targets; leave it out")
    out = []
    for a, e in pairs:
        fixed = {**a.hyperparams, **a.env_overrides(e)}
        mode = e.vec_env or suite.defaults.vec_env
        if mode != "sync":  # env stepping, as bench run steps this env (sync stays out: earlier studies keep their identity)
            fixed["vec_env"] = mode
        budget = timesteps or spec.timesteps or e.timesteps or suite.defaults.timesteps
        plugin = plugins.get(a.algo) if a.impl == "python" else None
        n_envs = int(plugin.params.model_validate(fixed).n_envs) if plugin is not None else _n_envs(a.algo, e.key, fixed)
        if budget < n_envs:
            raise BadInput(f"--timesteps: {budget} is smaller than one rollout of {a.display} on {e.key} (n_envs {n_envs})")
        space = _for_impl(build_space(
            a.algo, user[a.algo], fixed=fixed, use_defaults=spec.default_space, n_envs=n_envs,
            timesteps=budget, checkpoints=spec.checkpoints,
            defaults=plugin_space(a.algo, plugin.params)[0] if plugin is not None else None,
        ), a.impl)
        if not space:
            hint = (" (the plugin declares no search_space on its hyperparameter model)" if plugin is not None else "")
            raise BadInput(f"{loaded.path}: tune.space: nothing to search for {a.display}{hint}; set default_space: "
                           "true or name a dimension")
        out.append(
            Target(
                study=study or f"{suite.name}-{a.display}-{e.key}", algo=a.algo, impl=a.impl, label=a.display,
                env_id=e.key, threshold=float(loaded.env_meta[e.key]["threshold"]), window=e.window or suite.defaults.window,
                timesteps=int(budget), seeds=tuple(spec.seed_list), objective=spec.objective,
                checkpoints=spec.checkpoints, space=space, fixed=fixed, pruner=spec.pruner.model_dump(),
                sampler_seed=spec.sampler_seed, suite=suite.name,
                entry=plugin.entry if plugin is not None else None,
                plugin_version=plugin.version if plugin is not None else None,
            )
        )
    return out


# --------------------------------------------------------------------------- #
# The random-policy anchor
# --------------------------------------------------------------------------- #
def with_anchor(target: Target, url: str, log: Callable[[str], None] | None = None) -> Target:
    """``target`` with its env's random-policy return, the low anchor of the report's scores.

    Read from the store at ``url``, where the report keeps it; computed (a few
    seconds of random play) and stored the first time an env and threshold need it
    (:func:`bench.analysis.anchors.ensure_anchors`). A target whose objective does
    not use the anchor, or that has it already, is returned as it is.
    """
    if target.objective not in ANCHORED or target.random_return is not None:
        return target
    if target.threshold is None:
        if target.objective == "auc":
            raise BadInput(f"--objective auc: {target.env_id} has no threshold, and the normalised AUC runs from the "
                           "random-policy return to the threshold; set envs[i].threshold or use --objective final_return")
        return target
    from dataclasses import replace

    from bench.analysis.anchors import ensure_anchors
    from bench.storage.store import Store

    db = Store(url)
    try:
        anchor = ensure_anchors(db, {target.env_id: float(target.threshold)}, log=log)[target.env_id]
    finally:
        db.dispose()
    if target.objective == "auc" and not target.threshold > anchor.random_return:
        raise BadInput(
            f"--objective auc: the threshold of {target.env_id} ({target.threshold:g}) is not above its random-policy "
            f"return ({anchor.random_return:.6g}), so the normalised AUC has no scale; set a higher envs[i].threshold "
            "or use --objective final_return"
        )
    return replace(target, random_return=float(anchor.random_return))


# --------------------------------------------------------------------------- #
# Scores (pure)
# --------------------------------------------------------------------------- #
def seed_score(steps: np.ndarray, returns: np.ndarray, target: Target, *, upto: int | None = None) -> float | None:
    """One seed's objective from its finished episodes; ``None`` if it has none.

    :param steps, returns: shape ``(n_episodes,)``: the global env step at which each
        episode ended, and its return (``Recorder.summary_inputs()``).
    :param upto: the env steps the curve is scored over, for ``auc``: the budget
        for a finished seed, a checkpoint's steps for an intermediate value
        (default: the budget).

    ``auc`` is :func:`~bench.analysis.metrics.normalised_auc` on ``(0, upto]``
    (``target.random_return`` must be set, see :func:`with_anchor`); the others come
    from :func:`~bench.analysis.metrics.summarize`, the summary ``bench run`` stores,
    with a censored ``steps_to_threshold`` counted as :data:`CENSORED_PENALTY` × budget.
    """
    from bench.analysis.metrics import normalised_auc, summarize

    steps = np.asarray(steps)
    returns = np.asarray(returns, dtype=float)
    if returns.size == 0:
        return None
    if target.objective == "auc":
        if target.random_return is None:
            raise ValueError(f"target {target.study!r}: auc needs the random-policy return; resolve it with with_anchor()")
        return normalised_auc(steps, returns, target.window, upto=target.timesteps if upto is None else upto,
                              low=target.random_return, high=target.threshold)
    s = summarize(steps, np.zeros(returns.shape), returns, threshold=target.threshold, window=target.window)
    if target.objective == "steps_to_threshold":
        return float(s.steps_to_threshold) if s.steps_to_threshold is not None else CENSORED_PENALTY * target.timesteps
    return float(s.final_return)


# --------------------------------------------------------------------------- #
# One trial
# --------------------------------------------------------------------------- #
class _Prune(Exception):
    """Raised from the recorder hook to unwind training when the pruner says stop."""


@dataclass
class CheckpointRecorder(Recorder):
    """A :class:`~bench.storage.record.Recorder` that calls ``on_mark(k)`` when env steps cross ``marks[k]``."""

    marks: Sequence[int] = ()
    on_mark: Callable[[int, "CheckpointRecorder"], None] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self._next = 0

    def after_update(self, policy: Any = None) -> None:
        super().after_update(policy)
        while self._next < len(self.marks) and self.steps >= self.marks[self._next]:
            self._next += 1
            if self.on_mark is not None:
                self.on_mark(self._next - 1, self)

    def finish_marks(self) -> None:
        """Report the marks no update reached (a run may stop just short of a fraction)."""
        while self._next < len(self.marks):
            self._next += 1
            if self.on_mark is not None:
                self.on_mark(self._next - 1, self)


def _partial_summary(rec: Recorder, target: Target) -> dict[str, Any]:
    from bench.analysis.metrics import summarize

    a = rec.summary_inputs()
    return summarize(a["steps"], a["wall"], a["returns"], threshold=target.threshold, window=target.window).as_dict()


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".replace("\n", " ")[:500]


def run_trial(trial: Any, target: Target) -> float:
    """The Optuna objective: sample, train every seed, return the mean objective (see module doc)."""
    import optuna
    from pydantic import ValidationError

    from bench.algos.common import pin_one_thread
    from bench.algos.hyperparams import key_view
    from bench.run.runner import result_of, train_cell
    from bench.storage.store import this_owner

    if target.objective == "auc" and target.random_return is None:
        raise ValueError(f"target {target.study!r}: auc needs the random-policy return; resolve it with with_anchor()")
    pin_one_thread()
    cpu0 = time.process_time()
    trial.set_user_attr("worker", this_owner())
    base = key_view(target.params(target.fixed))
    values = sample(trial, target.space, rollout_of=lambda v: {**base, **v}["n_steps"] * {**base, **v}["n_envs"])
    hyperparams = {**target.fixed, **values}
    trial.set_user_attr("hyperparams", hyperparams)
    try:
        resolved = key_view(target.params(hyperparams))
    except ValidationError as e:
        err = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors(include_url=False))
        trial.set_user_attr("error", f"invalid hyperparameters: {err}")
        raise ValueError(f"invalid hyperparameters: {err}") from None

    marks = target.marks()
    T = target.timesteps
    scores: list[float] = []
    solved: list[bool] = []

    def finish(state: str, current_solved: bool = False) -> None:
        n_solved = sum(solved) + int(current_solved)
        trial.set_user_attr("seed_scores", scores)
        trial.set_user_attr("solved", solved)
        trial.set_user_attr("solved_fraction", n_solved / len(target.seeds))
        trial.set_user_attr("outcome", state)
        # What the trial cost (a pack's CPU-hours): this process's CPU seconds, one thread pinned.
        trial.set_user_attr("cpu_s", round(time.process_time() - cpu0, 3))

    for i, seed in enumerate(target.seeds):
        cell = target.cell(resolved, seed)

        def on_mark(k: int, rec: CheckpointRecorder, i: int = i) -> None:
            a = rec.summary_inputs()
            # Over the checkpoint's steps, not rec.steps (which overshoots by part of a
            # rollout that differs between trials), so values at one step are comparable.
            partial = seed_score(a["steps"], a["returns"], target, upto=marks[k])
            if partial is None or not math.isfinite(partial):
                return
            trial.report(float(np.mean(scores + [partial])), step=i * T + marks[k])
            last = i == len(target.seeds) - 1 and k == len(marks) - 1
            if not last and trial.should_prune():
                raise _Prune(f"pruned at seed {seed}, {marks[k]:,} of {T:,} steps")

        rec = CheckpointRecorder(marks=marks, on_mark=on_mark)
        started = time.time()
        try:
            train_cell(cell, rec)
            rec.finish_marks()
        except _Prune as e:
            finish("pruned", _partial_summary(rec, target)["steps_to_threshold"] is not None)
            raise optuna.TrialPruned(str(e)) from None
        except Diverged as e:
            trial.set_user_attr("error", _one_line(e))
            finish("diverged")
            raise optuna.TrialPruned(f"diverged at seed {seed}: {e}") from None
        except Exception as e:  # noqa: BLE001 - any training error fails the trial, with its message
            trial.set_user_attr("error", _one_line(e))
            finish("failed")
            raise
        summary = result_of(cell, rec, started).summary
        a = rec.summary_inputs()
        score = seed_score(a["steps"], a["returns"], target, upto=T)
        if score is None:
            trial.set_user_attr("error", f"seed {seed}: no episode finished within {T:,} steps; nothing to score")
            finish("failed")
            raise RuntimeError(f"seed {seed}: no episode finished within {T:,} steps; nothing to score")
        if not math.isfinite(score):
            finish("diverged")
            raise optuna.TrialPruned(f"non-finite {target.objective} at seed {seed}")
        scores.append(score)
        solved.append(summary["steps_to_threshold"] is not None)
    finish("complete")
    return float(np.mean(scores))


# --------------------------------------------------------------------------- #
# Studies on the store's database
# --------------------------------------------------------------------------- #
def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def make_storage(url: str, *, heartbeat_s: int = HEARTBEAT_S, grace_s: int = GRACE_S) -> Any:
    """Optuna's RDBStorage on the results store's URL, with heartbeats and retry of dead workers' trials."""
    import optuna

    import sqlalchemy as sa

    from bench.storage.store import Store, engine_kwargs, normalise_url

    url = normalise_url(url)
    # Create bench's own tables too (and, for SQLite, the file in WAL mode): the
    # database is then a complete results store that reports can open.
    Store(url).dispose()
    # Optuna creates its tables with a check-then-create (and then inserts its version
    # row), so two `bench tune`s on a fresh store race: the loser fails with "table
    # studies already exists" or a unique violation. Its second try finds everything made.
    for attempt in range(5):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    url,
                    engine_kwargs=engine_kwargs(url),
                    heartbeat_interval=int(heartbeat_s),
                    grace_period=int(grace_s),
                    heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY),
                )
        except (sa.exc.OperationalError, sa.exc.IntegrityError, sa.exc.ProgrammingError):
            if attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _pruner(target: Target) -> Any:
    import optuna

    p = target.pruner or {}
    kind = p.get("type", "median")
    if kind == "none":
        return optuna.pruners.NopPruner()
    # Steps are env steps consumed by the trial, so warm-up is counted in checkpoints of a seed.
    warmup = target.marks()[p.get("n_warmup_checkpoints", 1) - 1] if p.get("n_warmup_checkpoints", 1) > 0 else 0
    if kind == "percentile":
        return optuna.pruners.PercentilePruner(
            p.get("percentile", 25.0), n_startup_trials=p.get("n_startup_trials", 5), n_warmup_steps=warmup
        )
    return optuna.pruners.MedianPruner(n_startup_trials=p.get("n_startup_trials", 5), n_warmup_steps=warmup)


def _check_existing(target: Target, existing: Any) -> None:
    had = existing.user_attrs.get(STUDY_ATTR)
    if had is None:
        raise BadInput(f"--study: {target.study!r} exists in the store but was not made by `bench tune`; choose another name")
    had = {"objective_version": 1, **had}  # studies from before versions were kept
    now = target.identity()
    was, version = had["objective_version"], now["objective_version"]
    if had.get("objective") == target.objective and was != version:
        meaning = OBJECTIVE_MEANINGS.get((target.objective, was))
        raise BadInput(
            f"--study: {target.study!r} was tuned with version {was} of the {target.objective} objective"
            + (f" ({meaning})" if meaning else "")
            + f"; it is now version {version} ({OBJECTIVE_MEANINGS.get((target.objective, version), 'changed')}), "
            "so the old trials' values are not comparable: pass --study NEW_NAME for a new study"
        )
    # Before the anchor is resolved (the read-only check before anything runs) there is
    # nothing to compare it with; open_study checks it once it is.
    skip = {"random_return"} if target.random_return is None else set()
    diff = [k for k in now if k not in skip and had.get(k) != now[k]]
    if diff:
        shown = "; ".join(f"{k} {json.dumps(had.get(k))[:60]} (now {json.dumps(now[k])[:60]})" for k in diff)
        raise BadInput(
            f"--study: {target.study!r} was tuned with other settings: {shown}; "
            "add trials with the same settings, or pass --study NEW_NAME for a new study"
        )


def check_studies(targets: list[Target], url: str) -> None:
    """Refuse, before anything runs, targets whose existing study was tuned under other settings.

    Reads only: creates neither the store nor a study.
    """
    import optuna

    from bench.storage.store import normalise_url, readonly_engine_args, store_exists

    url = normalise_url(url)
    if not store_exists(url):  # StoreError (one line) when it cannot be reached or is not a bench store
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        ro_url, kwargs = readonly_engine_args(url)
        storage = optuna.storages.RDBStorage(ro_url, engine_kwargs=kwargs, skip_compatibility_check=True,
                                             skip_table_creation=True)
        names = set(optuna.study.get_all_study_names(storage))
    except Exception:  # noqa: BLE001 - no Optuna tables yet: no studies
        return
    for t in targets:
        if t.study in names:
            _check_existing(t, optuna.load_study(study_name=t.study, storage=storage))


def open_study(target: Target, storage: Any, *, worker: int = 0) -> Any:
    """Create the target's study or load it to add trials; refuses one tuned under other settings."""
    import optuna

    if target.objective == "auc" and target.random_return is None:
        raise ValueError(f"target {target.study!r}: auc needs the random-policy return; resolve it with with_anchor()")

    n_before = 0
    try:
        existing = optuna.load_study(study_name=target.study, storage=storage)
        n_before = len(existing.trials)
    except KeyError:
        existing = None
    if existing is not None:
        _check_existing(target, existing)
    sampler = optuna.samplers.TPESampler(
        seed=target.sampler_seed + n_before + 10007 * worker, multivariate=True, constant_liar=True
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = optuna.create_study(
            storage=storage, study_name=target.study, direction=target.direction, sampler=sampler,
            pruner=_pruner(target), load_if_exists=True,
        )
    if existing is None:
        study.set_user_attr(
            STUDY_ATTR,
            # random_return for every objective that has one: the sensitivity table puts
            # final_return on the (random return, threshold) scale with it.
            {**target.identity(), "label": target.label, "suite": target.suite, "random_return": target.random_return,
             "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")},
        )
    return study


def _finished_states() -> tuple[Any, ...]:
    from optuna.trial import TrialState

    return (TrialState.COMPLETE, TrialState.PRUNED)


def optimize(
    target: Target,
    url: str,
    *,
    trials: int,
    timeout: float | None = None,
    heartbeat_s: int = HEARTBEAT_S,
    grace_s: int = GRACE_S,
    worker: int = 0,
    on_trial: Callable[[Any], None] | None = None,
) -> None:
    """Run trials of ``target`` in this process until the study has ``trials`` finished ones."""
    import optuna
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    # ERROR: Optuna would log each failed trial with its traceback; the caller reports
    # trials itself (the error is the trial's `error` user attribute).
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = make_storage(url, heartbeat_s=heartbeat_s, grace_s=grace_s)
    target = with_anchor(target, url)  # no-op when tune() resolved it already
    study = open_study(target, storage, worker=worker)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # Fail dead workers' trials now (Optuna also does before each trial), so their
        # retries are counted below even when no new trial would otherwise start.
        optuna.storages.fail_stale_trials(study)
    finished = len(study.get_trials(deepcopy=False, states=_finished_states()))
    waiting = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
    remaining = max(trials - finished, 0)
    if remaining == 0:
        return
    callbacks: list[Any] = [MaxTrialsCallback(trials, states=_finished_states())]
    if on_trial is not None:
        callbacks.append(lambda _study, frozen: on_trial(frozen))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # n_trials also bounds failed trials (they do not count as finished), so a
        # target whose every trial raises cannot loop forever.
        study.optimize(
            lambda t: run_trial(t, target), n_trials=remaining + waiting, timeout=timeout,
            callbacks=callbacks, catch=(Exception,), gc_after_trial=False,
        )


def _worker_main(target: Target, url: str, kw: dict[str, Any], worker: int) -> None:
    from bench.run.runner import _init_worker

    _init_worker()  # one torch thread; die with the parent; Ctrl-C is the parent's to handle
    optimize(target, url, worker=worker, **kw)


def _ray_worker(target: Target, url: str, kw: dict[str, Any], worker: int) -> None:
    """One tuning worker as a Ray task: the same loop as a local worker process.

    A task lost with its worker is re-submitted by Ray (``max_retries``) and simply
    resumes the study; the trial it was running is failed by the heartbeat check
    and re-queued with the same parameters, as for a killed local worker.
    """
    from bench.algos.common import pin_one_thread

    pin_one_thread()
    optimize(target, url, worker=worker, **kw)


def _run_ray_workers(target: Target, url: str, kw: dict[str, Any], workers: int, study: Any, seen: set[int],
                     on_trial: Callable[[Any], None] | None, address: str | None) -> int:
    """Run ``workers`` tuning workers as Ray tasks; returns how many ended with an error."""
    import ray

    from bench.run.ray_executor import MAX_RETRIES, connect
    from bench.run.runner import THREAD_ENV

    started = connect(address, workers)
    try:
        remote = ray.remote(_ray_worker).options(
            num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False,
            runtime_env={"env_vars": dict(THREAD_ENV)},
        )
        refs = [remote.remote(target, url, kw, w) for w in range(workers)]
        pending = list(refs)
        dead = 0
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0)
                for ref in done:
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayError:
                        dead += 1
                seen |= _report_new(study, seen, on_trial)
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        _report_new(study, seen, on_trial)
        return dead
    finally:
        if started:
            ray.shutdown()


@dataclass
class TuneOutcome:
    """What one target's tuning left in its study."""

    study: str
    counts: dict[str, int]
    new: list[Any]  # FrozenTrials finished by this call
    best_value: float | None
    best_trial: int | None
    best_hyperparams: dict[str, Any] | None
    #: Worker processes that exited with an error (``workers > 1`` only).
    dead_workers: int = 0


def tune(
    target: Target,
    url: str,
    *,
    trials: int,
    timeout: float | None = None,
    workers: int = 1,
    heartbeat_s: int = HEARTBEAT_S,
    grace_s: int = GRACE_S,
    on_trial: Callable[[Any], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    executor: str = "local",
    address: str | None = None,
    log: Callable[[str], None] | None = None,
) -> TuneOutcome:
    """Tune one target with ``workers`` processes (1: in this process). See the module doc.

    ``executor="ray"`` runs the workers as Ray tasks instead (on the cluster at
    ``address``, or a local Ray instance), which needs a PostgreSQL storage.

    ``on_start(n)`` is told how many trials the study had finished already;
    ``on_trial(frozen_trial)`` sees each trial that finishes from then on;
    ``log(line)`` is told when the env's random-policy anchor is computed.

    The anchor is resolved here, once, before any worker starts, and the workers
    get the resolved target, so none recomputes it.
    """
    import optuna

    from bench.run.runner import THREAD_ENV

    if (workers > 1 or executor == "ray") and is_sqlite(url):
        raise BadInput(SQLITE_RAY if executor == "ray" else SQLITE_WORKERS.format(workers=workers))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(url, heartbeat_s=heartbeat_s, grace_s=grace_s)
    target = with_anchor(target, url, log=log)
    study = open_study(target, storage)  # created (and checked) once, before any worker starts
    before = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
    if on_start is not None:
        on_start(len(study.get_trials(deepcopy=False, states=_finished_states())))
    kw = dict(trials=trials, timeout=timeout, heartbeat_s=heartbeat_s, grace_s=grace_s)
    dead = 0
    if executor == "ray":
        dead = _run_ray_workers(target, url, kw, workers, study, set(before), on_trial, address)
    elif workers <= 1:
        optimize(target, url, on_trial=on_trial, **kw)  # type: ignore[arg-type]
    else:
        os.environ.update(THREAD_ENV)
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_worker_main, args=(target, url, kw, w), daemon=False) for w in range(workers)]
        for p in procs:
            p.start()
        seen = set(before)
        try:
            while any(p.is_alive() for p in procs):
                time.sleep(1.0)
                seen |= _report_new(study, seen, on_trial)
        except KeyboardInterrupt:
            for p in procs:
                p.terminate()
            raise
        finally:
            for p in procs:
                p.join(timeout=10)
        _report_new(study, seen, on_trial)
        dead = sum(p.exitcode not in (0, None) for p in procs)
    all_trials = study.get_trials(deepcopy=False)
    counts: dict[str, int] = {}
    for t in all_trials:
        counts[t.state.name.lower()] = counts.get(t.state.name.lower(), 0) + 1
    complete = [t for t in all_trials if t.state == optuna.trial.TrialState.COMPLETE]
    best = study.best_trial if complete else None
    return TuneOutcome(
        study=target.study, counts=counts,
        new=[t for t in all_trials if t.state.is_finished() and t.number not in before],
        best_value=None if best is None else best.value, best_trial=None if best is None else best.number,
        best_hyperparams=None if best is None else best.user_attrs.get("hyperparams"),
        dead_workers=dead,
    )


def _report_new(study: Any, seen: set[int], on_trial: Callable[[Any], None] | None) -> set[int]:
    new = set()
    for t in study.get_trials(deepcopy=False):
        if t.state.is_finished() and t.number not in seen:
            new.add(t.number)
            if on_trial is not None:
                on_trial(t)
    return new
