"""Words the store's writers and readers share: contention, a run's CPU budget, what makes a bench study.

They sit at the bottom of the package, beside the store, because the runner (which writes runs), the
tuner (which writes studies), the packs (which copy both) and the analysis (which reads both) must agree
on them without importing one another.
"""

from __future__ import annotations

import json
from typing import Any

#: The user attribute of an Optuna study (``bench tune`` keeps its studies in the store) that holds its target's
#: settings: what makes a study a bench study.
STUDY_ATTR = "bench"
#: How often a study's trial whose worker died is re-queued with the same parameters (by ``bench tune``'s
#: heartbeat check, and by a pack's import for a trial that was running when packed).
MAX_RETRY = 3
#: The version of each tuning objective's definition, kept in a study's settings so that a reader can tell
#: which scale a study's values are on (:mod:`bench.tune.targets` defines the objectives; the sensitivity table
#: reads them). ``auc`` version 2 is the normalised AUC; version 1 was the mean return per episode.
OBJECTIVE_VERSIONS = {"auc": 2, "final_return": 1, "steps_to_threshold": 1}
#: A run whose wall seconds exceed its CPU seconds by this factor shared its core: it is flagged as
#: contended (analysis), and ``bench run --remeasure contended`` runs it again. A single-threaded run
#: with a core to itself has wall / CPU about 1.
CONTENTION_RATIO = 1.25


def is_contended(wall_s: float | None, cpu_s: float | None) -> bool:
    """Whether a run with these clocks shared its core (wall > :data:`CONTENTION_RATIO` × CPU seconds)."""
    return wall_s is not None and cpu_s is not None and cpu_s > 0 and wall_s > CONTENTION_RATIO * cpu_s


def cpu_budget(config: Any) -> float | None:
    """A run's equal-compute budget in CPU seconds (``cpu_seconds`` in its stored cell identity,
    the ``config`` column), or None where it has none."""
    try:
        v = json.loads(config).get("cpu_seconds") if isinstance(config, str) and config else None
    except (ValueError, AttributeError):
        v = None
    return float(v) if v is not None else None


def contended_done(rows: dict[str, Any]) -> set[str]:
    """The keys of the done runs among ``rows`` (``Store.rows``) that shared their core."""
    return {k for k, r in rows.items() if r.status == "done" and is_contended(r.wall_s, r.cpu_s)}


def readable_name(optuna_name: str) -> str:
    """The hyperparameter a stored Optuna parameter name stands for (``one_minus_gamma`` → ``gamma``): the
    inverse of ``bench.algos.search.Dim.optuna_name``, for readers of studies that never import the tuner."""
    for prefix in ("log2_", "one_minus_"):
        if optuna_name.startswith(prefix):
            return optuna_name[len(prefix) :]
    return optuna_name
