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
:func:`bench.stats.metrics.summarize`. Its value is the mean over seeds of the
per-seed objective:

- ``auc``: the report's sample-efficiency score of the run,
  :func:`bench.stats.metrics.normalised_auc` over ``(0, budget]``: the
  running mean of the last ``window`` returns, read on a fixed grid of env
  steps, mapped so that the env's random-policy return is 0 and its threshold 1,
  capped at 1, and averaged (maximised). The random-policy return is the report's
  anchor (:func:`bench.run.anchors.ensure_anchors`), resolved once per target
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
import multiprocessing as mp
import os
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable

# What makes a bench study and its retries: storage's vocabulary, which packs and the analysis read.
from bench.storage.vocabulary import MAX_RETRY, STUDY_ATTR

if TYPE_CHECKING:  # annotations only
    from bench.storage.urls import StoreURL
from bench.tune.targets import OBJECTIVE_MEANINGS, BadInput, Target, with_anchor
from bench.tune.trial import run_trial

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


# --------------------------------------------------------------------------- #
# Studies on the store's database
# --------------------------------------------------------------------------- #
def is_sqlite(store_url: StoreURL) -> bool:
    return store_url.backend == "sqlite"


def make_storage(store_url: StoreURL, *, heartbeat_s: int = HEARTBEAT_S, grace_s: int = GRACE_S) -> Any:
    """Optuna's RDBStorage on the results store's URL, with heartbeats and retry of dead workers' trials."""
    import optuna

    import sqlalchemy as sa

    from bench.storage.store import Store
    from bench.storage.urls import engine_kwargs

    # Create bench's own tables too (and, for SQLite, the file in WAL mode): the
    # database is then a complete results store that reports can open.
    Store(store_url).dispose()
    # Optuna creates its tables with a check-then-create (and then inserts its version
    # row), so two `bench tune`s on a fresh store race: the loser fails with "table
    # studies already exists" or a unique violation. Its second try finds everything made.
    for attempt in range(5):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    store_url.text,
                    engine_kwargs=engine_kwargs(store_url.text),
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


def check_studies(targets: list[Target], store_url: StoreURL) -> None:
    """Refuse, before anything runs, targets whose existing study was tuned under other settings.

    Reads only: creates neither the store nor a study.
    """
    import optuna

    from bench.storage.store import store_exists
    from bench.storage.urls import readonly_engine_args

    if not store_exists(store_url):  # StoreError (one line) when it cannot be reached or is not a bench store
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        ro_url, kwargs = readonly_engine_args(store_url.text)
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
    store_url: StoreURL,
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
    storage = make_storage(store_url, heartbeat_s=heartbeat_s, grace_s=grace_s)
    target = with_anchor(target, store_url)  # no-op when tune() resolved it already
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


def _worker_main(target: Target, store_url: StoreURL, kw: dict[str, Any], worker: int) -> None:
    from bench.run.pool import init_worker

    init_worker()  # one torch thread; die with the parent; Ctrl-C is the parent's to handle
    optimize(target, store_url, worker=worker, **kw)


def _ray_worker(target: Target, store_url: StoreURL, kw: dict[str, Any], worker: int) -> None:
    """One tuning worker as a Ray task: the same loop as a local worker process.

    A task lost with its worker is re-submitted by Ray (``max_retries``) and simply
    resumes the study; the trial it was running is failed by the heartbeat check
    and re-queued with the same parameters, as for a killed local worker.
    """
    from bench.algos.common import pin_one_thread

    pin_one_thread()
    optimize(target, store_url, worker=worker, **kw)


def _run_ray_workers(target: Target, store_url: StoreURL, kw: dict[str, Any], workers: int, study: Any, seen: set[int],
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
        refs = [remote.remote(target, store_url, kw, w) for w in range(workers)]
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
    store_url: StoreURL,
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

    if (workers > 1 or executor == "ray") and is_sqlite(store_url):
        raise BadInput(SQLITE_RAY if executor == "ray" else SQLITE_WORKERS.format(workers=workers))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(store_url, heartbeat_s=heartbeat_s, grace_s=grace_s)
    target = with_anchor(target, store_url, log=log)
    study = open_study(target, storage)  # created (and checked) once, before any worker starts
    before = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
    if on_start is not None:
        on_start(len(study.get_trials(deepcopy=False, states=_finished_states())))
    kw = dict(trials=trials, timeout=timeout, heartbeat_s=heartbeat_s, grace_s=grace_s)
    dead = 0
    if executor == "ray":
        dead = _run_ray_workers(target, store_url, kw, workers, study, set(before), on_trial, address)
    elif workers <= 1:
        optimize(target, store_url, on_trial=on_trial, **kw)  # type: ignore[arg-type]
    else:
        os.environ.update(THREAD_ENV)
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_worker_main, args=(target, store_url, kw, w), daemon=False) for w in range(workers)]
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
