"""Hyperparameter tuning with Optuna, on the results store's own database.

- :mod:`.study`: targets, the multi-seed pruned trial, studies, workers (local or Ray);
- :mod:`.export`: each study's best trial as a suite ``bench run`` accepts;
- :mod:`.sensitivity`: how much each algorithm's result depends on its
  hyperparameters, read from the studies (the report's only use of this package).

The names below are re-exported, so ``from bench.tune import tune, sensitivity_table``
works as before the package was split. No submodule imports this package.
"""

from bench.tune.export import check_exportable, export_suite
from bench.tune.sensitivity import SENSITIVITY_COLUMNS, iqr_normalised, sensitivity_table
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
    "SQLITE_WORKERS", "STUDY_ATTR", "SENSITIVITY_COLUMNS", "BadInput", "CheckpointRecorder", "Target", "TuneOutcome",
    "check_exportable", "check_studies", "export_suite", "is_sqlite", "iqr_normalised", "make_storage", "open_study", "optimize",
    "run_trial", "seed_score", "sensitivity_table", "target_from_flags", "targets_from_suite", "tune",
    "with_anchor",
]
