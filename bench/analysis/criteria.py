"""The criteria a comparison is made on, and the rules every answer follows.

Each :class:`Criterion` is one column of the decision matrix: a per-run score, an aggregate over envs,
its interval rule (:meth:`Criterion.estimate`) and its test (:meth:`Criterion.compare`), and what kind
of measure it is (``is_time``: compared on one machine; ``over_steps``: none at an equal-compute budget).
The rules around them (levels, least runs and envs, bootstrap replicates) are named here once; see
:mod:`bench.analysis.scoring` for what counts and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from bench.stats import permutation, aggregate as stats

__all__ = ["ALPHA", "COLLAPSE_DIAGNOSTICS", "CRITERIA", "CVAR_ALPHA", "Criterion", "DIAGNOSTICS", "MIN_ENVS", "MIN_SEEDS",
           "N_BOOT", "OFF_POLICY", "PRIORITY_CRITERION", "SCORE_COLUMNS", "SENSITIVITY", "SEQUENCE_DIAGNOSTICS"]

#: Bootstrap replicates for intervals in tables, the decision matrix and recommendations.
N_BOOT = 2000
#: The off-policy algorithms (SB3's DQN, SAC, TD3: bench.algos.offpolicy_params.OFF_POLICY; a test keeps the two
#: equal). Their runs are reference points beside the answers, never candidates in them (see :class:`Data`).
OFF_POLICY = ("dqn", "sac", "td3")
#: Level of the permutation tests that decide winners and ties.
ALPHA = 0.05
#: Least runs per candidate on each env, and least envs, for a profile's winner (else "leaning").
MIN_SEEDS = 5
MIN_ENVS = 2
#: Lower-tail fraction for the reliability criterion (CVaR of the worst 25% of runs).
CVAR_ALPHA = 0.25
#: The criterion each priority ranks by.
PRIORITY_CRITERION = {"samples": "sample efficiency", "time": "time efficiency"}


@dataclass(frozen=True)
class Criterion:
    """One column of the decision matrix: a per-run score, an aggregate over envs, its interval rule
    (:meth:`estimate`) and its test (:meth:`compare`), and what kind of measure it is."""

    column: str
    aggregate: Callable[[list[np.ndarray]], np.ndarray]
    meaning: str
    #: Least runs on every env for a bootstrap interval; below it, ``small_n`` says what is shown instead.
    min_ci_runs: int = stats.MIN_CI_RUNS
    small_n: str = "range"
    #: The interval: ``bootstrap`` (stratified, :func:`bench.stats.aggregate.interval`) or ``wilson`` (a
    #: success fraction: :func:`bench.stats.aggregate.wilson_pooled`).
    interval: str = "bootstrap"
    #: A time measure: compared only on each env's one shared machine, on quiet cores (:mod:`bench.analysis.machines`).
    is_time: bool = False
    #: Scored over env steps: none at an equal-compute budget, where there is no common step axis (:func:`score`).
    over_steps: bool = False

    def estimate(self, tasks: list[np.ndarray], *, n_boot: int = N_BOOT) -> stats.Interval:
        """The aggregate of ``tasks`` (per env, ``(n_runs,)`` scores) with the interval their run counts support
        (see the module docstring)."""
        if self.interval == "wilson":
            return stats.wilson_pooled([int(t.sum()) for t in tasks], [t.size for t in tasks])
        if self.small_n == "none" and min(t.size for t in tasks) < self.min_ci_runs:
            # A lower-tail mean of a few runs is one or two runs: no interval can be honest about it.
            return stats.Interval(float(self.aggregate(tasks)), float("nan"), float("nan"), kind="none")
        return stats.interval(tasks, self.aggregate, n_boot=n_boot, rng=0, min_runs=self.min_ci_runs)

    def compare(self, x: list[np.ndarray], y: list[np.ndarray]) -> permutation.PermutationTest:
        """Stratified permutation test of ``x`` against ``y`` (per env, ``(n_i,)`` and ``(m_i,)``) on the
        aggregate (two-sided)."""
        return permutation.permutation_test(x, y, self.aggregate, alternative="two-sided", rng=0)


CRITERIA: dict[str, Criterion] = {
    "sample efficiency": Criterion(
        "auc_steps_norm", stats.aggregate_task_mean_iqm,
        "mean over envs of the IQM over runs of the normalised area under the learning curve vs env steps "
        "(0 to the env's budget)", over_steps=True),
    "time efficiency": Criterion(
        "auc_time_norm", stats.aggregate_task_mean_iqm,
        "mean over envs of the IQM over runs of the normalised area under the learning curve vs training CPU "
        "seconds (0 to the env's fixed time horizon)", is_time=True),
    "final performance": Criterion(
        "final_norm", stats.aggregate_task_mean_iqm,
        "mean over envs of the IQM over runs of the normalised final return, capped at 1 (the threshold)"),
    "reliability": Criterion(
        "final_norm", lambda ts: stats.aggregate_task_cvar(ts, CVAR_ALPHA),
        "mean over envs of the CVaR of the worst 25% of runs' normalised final return",
        min_ci_runs=stats.MIN_CVAR_CI_RUNS, small_n="none"),
    "success rate": Criterion(
        "solved_f", stats.aggregate_task_mean,
        "mean over envs of the fraction of runs reaching the threshold (Wilson interval)", interval="wilson"),
}
SENSITIVITY = "hyperparameter sensitivity"
#: Diagnostics the report plots, in this order, where a run recorded them.
DIAGNOSTICS = ("policy/entropy", "policy/approx_kl", "grad/noise_ratio", "policy/log_std")
#: Diagnostics read for the collapse detector (:mod:`bench.analysis.collapse`) besides those.
COLLAPSE_DIAGNOSTICS = ("grad/norm", "grad/norm_max")
#: Read for the language-model track's claim measures (exact match, reward hacking; bench.analysis.claims).
SEQUENCE_DIAGNOSTICS = ("seq/exact_match", "seq/proxy_score", "seq/true_score")
#: Per-run score columns :func:`bench.analysis.tables.score_matrices` can export, by the name
#: ``bench export --score`` gives them.
SCORE_COLUMNS = {"final": "final_norm", "samples": "auc_steps_norm", "time": "auc_time_norm"}
