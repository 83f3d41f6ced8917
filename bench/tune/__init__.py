"""Hyperparameter tuning with Optuna, on the results store's own database.

- :mod:`.study`: targets, the multi-seed pruned trial, studies, workers (local or Ray);
- :mod:`.export`: each study's best trial as a suite ``bench run`` accepts.

How much each algorithm's result depends on its hyperparameters is read from the studies as data by
the analysis (:mod:`bench.analysis.sensitivity`), which never imports the tuner.

The names below are re-exported, so ``from bench.tune import tune`` works. No submodule imports this package.
"""

from bench.tune.export import check_exportable, export_suite
from bench.tune.study import (
    CENSORED_PENALTY,
    DIRECTIONS,
    GRACE_S,
    HEARTBEAT_S,
    MAX_RETRY,
    OBJECTIVE_VERSIONS,
    SQLITE_RAY,
    SQLITE_WORKERS,
    STUDY_ATTR,
    BadInput,
    CheckpointRecorder,
    Target,
    TuneOutcome,
    check_studies,
    is_sqlite,
    make_storage,
    open_study,
    optimize,
    run_trial,
    seed_score,
    target_from_flags,
    targets_from_suite,
    tune,
    with_anchor,
)

__all__ = [
    "CENSORED_PENALTY", "DIRECTIONS", "GRACE_S", "HEARTBEAT_S", "MAX_RETRY", "OBJECTIVE_VERSIONS", "SQLITE_RAY",
    "SQLITE_WORKERS", "STUDY_ATTR", "BadInput", "CheckpointRecorder", "Target", "TuneOutcome",
    "check_exportable", "check_studies", "export_suite", "is_sqlite", "make_storage", "open_study", "optimize",
    "run_trial", "seed_score", "target_from_flags", "targets_from_suite", "tune",
    "with_anchor",
]
