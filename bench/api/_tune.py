"""Tuning: ``bench tune``'s targets checked against the store (nothing runs until every one is), then
each study run with callbacks for progress, and the best configurations exported as a suite."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench.algos.registry import DEFAULT_SPACES
from bench.algos.registry import IMPLS as _IMPLS
from bench.api._common import BadInput, parse_store, writable
from bench.distribution import install_hint
from bench.storage.urls import StoreURL

#: What ``bench tune --algo`` and ``--impl`` accept without a suite: the algorithms with a default search space
#: (their :class:`bench.algos.registry.AlgoSpec`), and every implementation.
TUNE_ALGOS: tuple[str, ...] = tuple(DEFAULT_SPACES)
IMPLS: tuple[str, ...] = tuple(_IMPLS)


@dataclass(frozen=True)
class TunePlan:
    """What :func:`tune` would run: one :class:`bench.tune.Target` per study, on the store ``store_url``.

    :param trials: finished trials wanted per study, in total.
    :param export_seeds: the seeds an exported suite runs (a suite's own count; ``None``: the exporter's default).
    """

    targets: list
    store_url: StoreURL
    trials: int
    workers: int = 1
    executor: str = "local"
    address: str | None = None
    export: Path | None = None
    export_seeds: int | None = None

    @property
    def url(self) -> str:
        """The store's normalised URL as text (kept for callers of 0.x; :attr:`store_url` is the type)."""
        return self.store_url.text


def plan_tune(suite: str | Path | None = None, *, algo: str | None = None, impl: str = "bench",
              env: str | None = None, timesteps: int | None = None, trials: int | None = None,
              seeds: int | None = None, objective: str | None = None, store: StoreURL | str | None = None,
              study: str | None = None, workers: int = 1, executor: str = "local", address: str | None = None,
              export: Path | None = None, only: str | None = None) -> TunePlan:
    """Check a tuning job: a suite file (its ``tune:`` block, flags overriding it) or ``algo``, ``impl`` and
    ``env``; the store (studies live beside the results); the executor. Each target's random-policy anchor
    is resolved here, so that a bad threshold is one line before anything runs. Trains nothing.

    :raises BadInput: one line naming what was wrong and what is allowed.
    """
    from bench.suites.suite import SuiteError, load_suite, parse_only
    from bench.tune import (SQLITE_RAY, SQLITE_WORKERS, check_exportable, check_studies, is_sqlite, target_from_flags,
                            targets_from_suite, with_anchor)
    from bench.tune import BadInput as TuneBadInput

    if study is not None and not re.fullmatch(r"[^\x00-\x1f\x7f-\x9f]{1,128}", study):
        # Printed in every progress line and stored as Optuna's study name: text, as labels are.
        raise BadInput(f"--study: {study!r} is not a study name; allowed: 1 to 128 printable characters "
                       "(no control characters)")
    if export is not None:  # checked first: tuning takes hours, and the export comes last
        writable("--export", Path(export), folder=False)
    export_seeds = None
    try:
        if suite is not None:
            if algo or env:
                raise BadInput("--algo/--env: give either a suite file or --algo, --impl and --env, not both")
            try:
                loaded = load_suite(Path(suite))
            except SuiteError as e:
                raise BadInput(e.lines) from None
            try:
                filt = parse_only(only)
            except ValueError as e:
                raise BadInput(str(e)) from None
            targets = targets_from_suite(loaded, timesteps=timesteps, seeds=seeds, objective=objective, study=study,
                                         only=filt)
            n_trials = trials or (loaded.suite.tune.trials if loaded.suite.tune else 20)
            # From a suite: as many fresh seeds as the suite runs (its `seeds:`), for a run beside it.
            export_seeds = len(loaded.suite.seed_list)
        else:
            if not algo or not env:
                raise BadInput("bench tune: give a suite file, or --algo and --env (and optionally --impl)")
            if only is not None:
                raise BadInput("--only: picks studies of a suite file; without one, --algo, --impl and --env name the study")
            targets = [target_from_flags(algo, impl, env, timesteps=timesteps, seeds=seeds or 3,
                                         objective=objective or "auc", study=study)]
            n_trials = trials or 20
        if export is not None:
            check_exportable(targets)
        store_url = parse_store(store, "--storage")
        if executor not in ("local", "ray"):
            raise BadInput(f"--executor: {executor!r}; allowed: local, ray")
        if address is not None and executor != "ray":
            raise BadInput("--address: only with --executor ray")
        if (workers > 1 or executor == "ray") and is_sqlite(store_url):
            raise BadInput(SQLITE_RAY if executor == "ray" else SQLITE_WORKERS.format(workers=workers))
        if executor == "ray":
            from bench.run.ray_executor import check_address

            if address is not None and (why := check_address(address)):
                raise BadInput(f"--address: {why}")
            try:
                import ray  # noqa: F401
            except ImportError:
                raise BadInput(f"--executor ray: ray is not installed; install it with {install_hint('ray')}") from None
        # The random-policy anchor `auc` is scored against, resolved once here so that a bad
        # threshold is one line before anything runs (and every worker gets the same value).
        targets = [with_anchor(t, store_url) for t in targets]
        check_studies(targets, store_url)
    except TuneBadInput as e:
        raise BadInput(str(e)) from None
    return TunePlan(targets, store_url, n_trials, workers, executor, address, None if export is None else Path(export),
                    export_seeds)


def tune(plan: TunePlan, target: Any = None, *, timeout: float | None = None, heartbeat_s: int = 60,
         grace_s: int = 120, on_trial: Callable[[Any], None] | None = None,
         on_start: Callable[[int], None] | None = None) -> list:
    """Run the studies of ``plan`` (or only its ``target``) until each has ``plan.trials`` finished trials or
    ``timeout`` seconds pass; a study resumes where it stopped. Returns one :class:`bench.tune.TuneOutcome`
    per study. ``on_trial(frozen_trial)`` as each trial ends; ``on_start(n)`` with the trials a study had.

    :raises BadInput: a study that cannot run (e.g. its workers cannot start).
    """
    from bench.algos.common import pin_one_thread
    from bench.tune import BadInput as TuneBadInput
    from bench.tune import tune as tune_target

    pin_one_thread()
    outcomes = []
    for t in [target] if target is not None else plan.targets:
        try:
            outcomes.append(tune_target(t, plan.store_url, trials=plan.trials, timeout=timeout, workers=plan.workers,
                                        executor=plan.executor, address=plan.address, heartbeat_s=heartbeat_s,
                                        grace_s=grace_s, on_trial=on_trial, on_start=on_start))
        except TuneBadInput as e:
            raise BadInput(str(e)) from None
    return outcomes


def export_best(plan: TunePlan, path: Path | None = None) -> Path:
    """Write each study's best configuration as a suite file (``bench run`` runs it on fresh seeds).

    :raises BadInput: a study with no finished trial, or no path given here nor in the plan.
    """
    from bench.tune import BadInput as TuneBadInput
    from bench.tune import export_suite

    path = path or plan.export
    if path is None:
        raise BadInput("--export: no path to write the best configuration to")
    try:
        export_suite(plan.targets, plan.store_url, path, seeds=plan.export_seeds)
    except TuneBadInput as e:
        raise BadInput(str(e)) from None
    return path
