"""From the results store to the answer: per-run metrics, cross-run statistics,
normalisation anchors, scores, the decision matrix, recommendations and the report.

- :mod:`.metrics`: per-run statistics (threshold crossing, censoring, AUC); pure NumPy;
- :mod:`.stats`: cross-run statistics (IQM, stratified bootstrap, profiles,
  P(improvement), Kaplan–Meier); pure NumPy;
- :mod:`.anchors`: per-env normalisation anchors (random-policy return, threshold), stored once;
- :mod:`.scoring`: store → per-run scores, decision matrix, recommendations;
- :mod:`.report`: figures and the self-contained HTML page (template ``report.html.j2``).

This package reads the store and never runs anything: it imports neither the
runner nor an algorithm. :mod:`.scoring`'s names are re-exported here, so
``from bench import analysis; analysis.load(url)`` works as before the split.
"""

from bench.analysis.scoring import (
    ACTIONS,
    ALPHA,
    CONTENTION_RATIO,
    CRITERIA,
    CVAR_ALPHA,
    DIAGNOSTICS,
    GRID,
    MIN_ENVS,
    MIN_SEEDS,
    N_BOOT,
    OBS,
    PRIORITIES,
    PRIORITY_CRITERION,
    REWARDS,
    SENSITIVITY,
    Criterion,
    Data,
    EnvCurves,
    Recommendation,
    Scored,
    across_envs,
    categories,
    category_of,
    decision_matrix,
    final_table,
    hardware_line,
    hardware_of,
    hardware_warnings,
    improvement_matrix,
    leave_one_env_out,
    load,
    normalised_envs,
    recommend,
    recommendation_rows,
    running_mean,
    score,
)

__all__ = [
    "ACTIONS", "ALPHA", "CONTENTION_RATIO", "CRITERIA", "CVAR_ALPHA", "DIAGNOSTICS", "GRID", "MIN_ENVS", "MIN_SEEDS",
    "N_BOOT", "OBS", "PRIORITIES", "PRIORITY_CRITERION", "REWARDS", "SENSITIVITY", "Criterion", "Data", "EnvCurves",
    "Recommendation", "Scored", "across_envs", "categories", "category_of", "decision_matrix", "final_table",
    "hardware_line", "hardware_of", "hardware_warnings", "improvement_matrix", "leave_one_env_out", "load",
    "normalised_envs", "recommend", "recommendation_rows", "running_mean", "score",
]
