"""From the results store to scores, a decision matrix and recommendations: the analysis's public names.

This is the numbers half of ``bench report`` and all of ``bench recommend``; it
draws nothing (figures and HTML are :mod:`bench.analysis.report`). It reads the
store only, and leans on the pure statistics of :mod:`bench.stats.aggregate`.
The work is done, in this order, by:

- :mod:`bench.analysis.readmodel`: the store or packs read once per command, and :class:`Data`
  (:func:`load`: the runs compared, their episodes and diagnostics, env traits, anchors);
- :mod:`bench.analysis.scores`: per-run scores and curves (:func:`score` → :class:`Scored`);
- :mod:`bench.analysis.criteria`: each :class:`Criterion` with its interval rule and test;
- :mod:`bench.analysis.tables`: per-env and across-env tables, categories;
- :mod:`bench.analysis.provenance`: which machine each run ran on;
- views: :mod:`bench.analysis.answers`, :mod:`bench.analysis.matrix`, :mod:`bench.analysis.report`.

This module names them in one place (``bench.analysis.scoring.X``) and says what counts.

What counts
-----------
- Statistics use runs whose status is ``done``. Failed, interrupted and pending
  runs are listed in the report's inventory with their errors, never silently
  averaged in or out.
- A run belongs to a *task* (its env), an *algorithm* (``ppo``, ``trpo``, …) and a
  *label* (``ppo-sb3``, ``ppo-bench``, or the suite's own label: one
  implementation and configuration of the algorithm).
- One comparison, one budget and one threshold per env: each env is compared at
  the budget most of its done runs have (ties: the larger), and at the threshold of the first suite
  that names it. Runs at another budget or threshold are set aside, with a note
  saying so, never held flat to a longer budget or mixed into another scale.
- Scores are normalised per env with fixed anchors (:mod:`bench.envs.anchors`):
  0 = a uniform-random policy's mean return, 1 = the env's threshold, capped at 1
  (past the threshold counts as solved, so envs with headroom do not dominate).

Per-run scores (the inputs of every criterion); none depends on other runs
---------------------------------------------------------------------------
- ``final_norm``: the normalised final return (mean of the last ``window`` episodes),
  capped at 1;
- ``auc_steps_norm``: the mean of the normalised learning curve over the env's
  budget in env steps (:func:`bench.stats.metrics.normalised_auc`): high when a
  run learns early, so it measures *sample efficiency*;
- ``auc_time_norm``: the same over the env's fixed time horizon in training
  **process CPU seconds** (budget × the env's ``time_scale_us``; a run that ended
  holds its final value, as a user would stop and keep the policy): *time
  efficiency*. Where the compared runs had an equal-compute budget (a suite's
  ``cpu_seconds``: a run stops at whichever budget comes first), the horizon is that
  CPU budget, and ``auc_steps_norm`` is not scored: each algorithm ran as many steps
  as its speed allowed, so there is no common step axis. Runs are single-threaded, so CPU seconds do not count the time a
  shared machine gives to other work, but they do grow with it (caches and memory
  bandwidth are shared: SB3 PPO on CartPole-v1 took 35.5 CPU seconds beside other
  work and 22.7 on a quiet core, 2026-11-26); wall seconds are recorded too, and a
  run whose wall time exceeds its CPU time by more than :data:`CONTENTION_RATIO` is flagged;
- ``solved`` and the censored times ``t_steps`` / ``t_cpu`` (crossing time, or the
  run's total when it never crossed).

Across runs
-----------
- Every aggregate weights each environment once, whatever its number of runs
  (the mean over envs of each env's IQM, CVaR or success fraction).
- Intervals: a 95% stratified bootstrap interval with at least
  :data:`bench.stats.aggregate.MIN_CI_RUNS` runs on every env; below that the
  observed range, labelled so. Success rates use Wilson intervals. The CVaR gets
  no interval below :data:`bench.stats.aggregate.MIN_CVAR_CI_RUNS` runs per env.
- Winners: only from the answers of :mod:`bench.analysis.answers` (one headline test per profile and
  priority, Holm-adjusted over the call), whose p-value is shown; interval overlap alone never decides.
  The decision matrix (:mod:`bench.analysis.matrix`) takes its marks from those same answers.
- Time by design (:mod:`bench.analysis.machines`): a time comparison uses, on each env, only runs that
  had their core to themselves and whose machine is known (speed-probe class), on the one machine both
  sides share most. No store-wide correction factor: nothing depends on other labels' runs.
- Answers generalise over envs (:mod:`bench.stats.generalise`): from
  :data:`bench.stats.generalise.MIN_ENVS_GENERALISE` envs on, a profile's winner comes from a
  t-test over the per-env effects, envs weighted equally; below that, the answer names the envs it was measured
  on. The headline p-values of one call are Holm-adjusted.
- Recommendations answer by algorithm first, with its implementations pooled
  (every run of every label of the algorithm, each run once, each env weighted
  once), then say which implementation of it did better, or that they tie.
"""

from __future__ import annotations

from bench.analysis.criteria import (ALPHA, COLLAPSE_DIAGNOSTICS, CRITERIA, CVAR_ALPHA, DIAGNOSTICS, MIN_ENVS, MIN_SEEDS,
                                     N_BOOT, OFF_POLICY, PRIORITY_CRITERION, SCORE_COLUMNS, SENSITIVITY,
                                     SEQUENCE_DIAGNOSTICS, Criterion)
from bench.stats.metrics import GRID, running_mean
from bench.analysis.provenance import (PROBE_CLASS, PROBE_CLASS_KEY, PROBE_SPAN, hardware_line, hardware_of,
                                       hardware_warnings, probe_class_ms, probe_classes)
from bench.analysis.readmodel import Data, ReadModel, load, suite_specs, variant_suites
from bench.analysis.scores import EnvCurves, Scored, score
from bench.analysis.tables import (across_envs, categories, category_of, final_table, improvement_matrix,
                                   mark_by_test, normalised_envs, score_matrices)
# The problem vocabulary lives apart so the command line checks options without importing this module.
from bench.envs.traits import ACTIONS, OBS, PRIORITIES, REWARDS
from bench.storage.vocabulary import CONTENTION_RATIO

__all__ = [
    "ACTIONS", "ALPHA", "COLLAPSE_DIAGNOSTICS", "CONTENTION_RATIO", "CRITERIA", "CVAR_ALPHA", "DIAGNOSTICS", "GRID",
    "MIN_ENVS", "MIN_SEEDS", "N_BOOT", "OBS", "OFF_POLICY", "PROBE_CLASS", "PROBE_CLASS_KEY", "PROBE_SPAN", "PRIORITIES",
    "PRIORITY_CRITERION", "REWARDS", "SENSITIVITY", "SEQUENCE_DIAGNOSTICS", "Criterion", "Data", "EnvCurves",
    "ReadModel", "SCORE_COLUMNS", "Scored", "across_envs", "categories", "category_of",
    "final_table", "hardware_line", "hardware_of", "hardware_warnings",
    "improvement_matrix", "load", "mark_by_test", "normalised_envs",
    "probe_class_ms", "probe_classes", "running_mean", "score", "score_matrices", "suite_specs", "variant_suites",
]
