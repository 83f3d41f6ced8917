"""Hyperparameter tuning with Optuna, on the results store's own database.

- :mod:`.targets`: what a study tunes, from flags or a suite, with its random-policy anchor;
- :mod:`.trial`: the multi-seed pruned trial and its score;
- :mod:`.study`: studies on the store's database, workers (local or Ray);
- :mod:`.export`: each study's best trial as a suite ``bench run`` accepts.

How much each algorithm's result depends on its hyperparameters is read from the studies as data by
the analysis (:mod:`bench.analysis.sensitivity`), which never imports the tuner.

The names below are re-exported, so ``from bench.tune import tune`` works. No submodule imports this package.
"""

from bench.storage.vocabulary import MAX_RETRY, OBJECTIVE_VERSIONS, STUDY_ATTR
from bench.tune.export import check_exportable, export_suite
from bench.tune.study import (GRACE_S, HEARTBEAT_S, SQLITE_RAY, SQLITE_WORKERS, TuneOutcome, check_studies, is_sqlite,
                              make_storage, open_study, optimize, tune)
from bench.tune.targets import (CENSORED_PENALTY, DIRECTIONS, BadInput, Target, target_from_flags, targets_from_suite,
                                with_anchor)
from bench.tune.trial import CheckpointRecorder, run_trial, seed_score

__all__ = [
    "CENSORED_PENALTY", "DIRECTIONS", "GRACE_S", "HEARTBEAT_S", "MAX_RETRY", "OBJECTIVE_VERSIONS", "SQLITE_RAY",
    "SQLITE_WORKERS", "STUDY_ATTR", "BadInput", "CheckpointRecorder", "Target", "TuneOutcome",
    "check_exportable", "check_studies", "export_suite", "is_sqlite", "make_storage", "open_study", "optimize",
    "run_trial", "seed_score", "target_from_flags", "targets_from_suite", "tune",
    "with_anchor",
]
