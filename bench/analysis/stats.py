"""Cross-run statistics: pure NumPy functions, no I/O.

Per-run summaries (threshold crossing, final return, AUC) live in
:mod:`bench.analysis.metrics`; this module aggregates *many* runs into figures with
honest uncertainty, following Agarwal et al. 2021, "Deep Reinforcement Learning
at the Edge of the Statistical Precipice" (NeurIPS), whose reference library is
rliable. rliable itself is not importable here (its dependency ``arch`` fails
with pandas 3), so the methods are written afresh from the paper:

- the interquartile mean (IQM) as the aggregate: robust to outlier runs, yet
  uses half of the data, unlike the median (paper, section 4.3);
- percentile *stratified* bootstrap confidence intervals: runs are resampled
  with replacement within each task, never across tasks (paper, section 4.2,
  and Efron & Tibshirani 1993, chapter 13);
- performance profiles: the fraction of runs scoring above τ, per τ (section 4.2);
- the probability of improvement P(X > Y), the Mann-Whitney U statistic
  divided by ``n·m`` (ties count one half), averaged over tasks (section 4.3).

Two more, for censored samples-to-threshold and for reliability:

- the Kaplan-Meier estimate of the fraction of runs solved by step ``s``, runs
  that never reached the threshold being right-censored at their last step
  (Kaplan & Meier 1958), never dropped;
- the lower-tail CVaR (the mean of the worst α fraction of runs), the
  "risk across runs" reliability measure of Chan et al. 2020, "Measuring the
  Reliability of Reinforcement Learning Algorithms" (ICLR).

Conventions. A *task* is one environment. Scores of many tasks are a list of 1-D
arrays, one per task, because tasks may hold different numbers of runs (failed
runs, different seed counts); a rectangular ``(n_runs, n_tasks)`` matrix, as in
rliable, is accepted too and split into its columns. Aggregates take a list of
arrays shaped ``(..., n_k)`` (any leading batch axes, runs last) and return
shape ``(...)``, so one call evaluates every bootstrap replicate at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

__all__ = [
    "Interval",
    "as_tasks",
    "iqm",
    "iqr",
    "cvar_lower",
    "aggregate_iqm",
    "aggregate_mean",
    "aggregate_cvar",
    "stratified_resample",
    "percentile_interval",
    "bootstrap_ci",
    "stratified_bootstrap_ci",
    "performance_profile",
    "probability_of_improvement",
    "kaplan_meier",
    "kaplan_meier_band",
    "wilson_interval",
    "normalise",
    "intervals_overlap",
]

Tasks = Sequence[np.ndarray]
#: An aggregate maps per-task arrays ``(..., n_k)`` to shape ``(...)``.
Aggregate = Callable[[Sequence[np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval ``[lo, hi]`` at ``level``."""

    point: float
    lo: float
    hi: float
    level: float = 0.95

    def overlaps(self, other: "Interval") -> bool:
        return intervals_overlap((self.lo, self.hi), (other.lo, other.hi))

    def __str__(self) -> str:
        return f"{self.point:.2f} [{self.lo:.2f}, {self.hi:.2f}]"


def as_tasks(scores: np.ndarray | Tasks) -> list[np.ndarray]:
    """Per-task 1-D float arrays from a ``(n_runs, n_tasks)`` matrix or a list of ``(n_k,)`` arrays.

    :raises ValueError: a task has no runs, or a score is not finite.
    """
    if isinstance(scores, np.ndarray):
        if scores.ndim != 2:
            raise ValueError(f"a score matrix must be (n_runs, n_tasks), got shape {scores.shape}")
        tasks = [np.asarray(scores[:, j], dtype=float) for j in range(scores.shape[1])]
    else:
        tasks = [np.asarray(t, dtype=float).reshape(-1) for t in scores]
    for j, t in enumerate(tasks):
        if t.size == 0:
            raise ValueError(f"task {j} has no runs")
        if not np.all(np.isfinite(t)):
            raise ValueError(f"task {j} has non-finite scores")
    return tasks


# --------------------------------------------------------------------------- #
# Point statistics along the last axis (runs)
# --------------------------------------------------------------------------- #
def iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: the mean of the middle 50% of values along ``axis``.

    ``k = floor(n / 4)`` values are cut from each end, as in SciPy's
    ``trim_mean(x, 0.25)`` (which rliable uses), so for ``n = 8`` it is the mean
    of the 3rd to 6th smallest values, and for ``n < 4`` the plain mean.

    :param x: shape ``(..., n)`` with the runs along ``axis``.
    :returns: shape ``(...)``, ``x`` with ``axis`` removed.
    """
    a = np.sort(np.asarray(x, dtype=float), axis=axis)
    n = a.shape[axis]
    if n == 0:
        raise ValueError("iqm of an empty array")
    k = n // 4
    return np.take(a, np.arange(k, n - k), axis=axis).mean(axis=axis)


def iqr(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile range ``q75 - q25`` along ``axis`` (linear interpolation between order statistics).

    :param x: shape ``(..., n)``. :returns: shape ``(...)``.
    """
    q25, q75 = np.percentile(np.asarray(x, dtype=float), [25, 75], axis=axis)
    return q75 - q25


def cvar_lower(x: np.ndarray, alpha: float = 0.25, axis: int = -1) -> np.ndarray:
    """Lower-tail conditional value at risk: the mean of the worst ``alpha`` fraction of values.

    Uses the ``k = max(1, ceil(alpha · n))`` smallest values, so it is defined for
    any ``n >= 1`` (for ``n = 8``, ``alpha = 0.25``: the mean of the 2 smallest).
    Higher is more reliable: a high CVaR means even the bad seeds do well
    (Chan et al. 2020).

    :param x: shape ``(..., n)``. :returns: shape ``(...)``.
    """
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    a = np.sort(np.asarray(x, dtype=float), axis=axis)
    n = a.shape[axis]
    k = max(1, int(np.ceil(alpha * n - 1e-12)))
    return np.take(a, np.arange(k), axis=axis).mean(axis=axis)


# --------------------------------------------------------------------------- #
# Aggregates over tasks (each takes per-task arrays (..., n_k) → (...))
# --------------------------------------------------------------------------- #
def aggregate_iqm(tasks: Sequence[np.ndarray]) -> np.ndarray:
    """IQM over all runs of all tasks pooled, as rliable's ``aggregate_iqm`` on a score matrix.

    :param tasks: arrays shaped ``(..., n_k)``, same leading shape.
    :returns: shape ``(...)``.
    """
    return iqm(np.concatenate([np.asarray(t, dtype=float) for t in tasks], axis=-1))


def aggregate_mean(tasks: Sequence[np.ndarray]) -> np.ndarray:
    """Mean over tasks of each task's mean over runs (every task weighs the same).

    :param tasks: arrays shaped ``(..., n_k)``. :returns: shape ``(...)``.
    """
    return np.mean([np.asarray(t, dtype=float).mean(axis=-1) for t in tasks], axis=0)


def aggregate_cvar(tasks: Sequence[np.ndarray], alpha: float = 0.25) -> np.ndarray:
    """Mean over tasks of each task's lower-tail CVaR over runs.

    :param tasks: arrays shaped ``(..., n_k)``. :returns: shape ``(...)``.
    """
    return np.mean([cvar_lower(t, alpha) for t in tasks], axis=0)


# --------------------------------------------------------------------------- #
# Bootstrap
# --------------------------------------------------------------------------- #
def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def stratified_resample(tasks: Tasks, n_boot: int, rng: np.random.Generator | int | None = 0) -> list[np.ndarray]:
    """Bootstrap replicates that resample runs with replacement *within* each task.

    :param tasks: per-task arrays ``(n_k,)``.
    :returns: per-task arrays ``(n_boot, n_k)``; replicate ``b`` of task ``k`` holds
        ``n_k`` draws from that task's runs only.
    """
    g = _rng(rng)
    out = []
    for t in as_tasks(tasks):
        idx = g.integers(0, t.size, size=(n_boot, t.size))
        out.append(t[idx])
    return out


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval: the ``(1-level)/2`` and ``(1+level)/2`` quantiles over axis 0.

    :param replicates: shape ``(n_boot, ...)``. :returns: ``(lo, hi)``, each shape ``(...)``.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    lo, hi = np.quantile(replicates, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return lo, hi


def stratified_bootstrap_ci(
    scores: np.ndarray | Tasks,
    aggregate: Aggregate = aggregate_iqm,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    rng: np.random.Generator | int | None = 0,
) -> Interval:
    """An aggregate over tasks with its stratified percentile bootstrap interval.

    :param scores: ``(n_runs, n_tasks)`` or per-task arrays ``(n_k,)``.
    :param aggregate: per-task arrays ``(..., n_k)`` → ``(...)``, e.g. :func:`aggregate_iqm`.
    :returns: the aggregate of the data and the interval of its ``n_boot`` replicates.
    """
    tasks = as_tasks(scores)
    point = float(aggregate(tasks))
    reps = np.asarray(aggregate(stratified_resample(tasks, n_boot, rng)))
    lo, hi = percentile_interval(reps, level)
    return Interval(point, float(lo), float(hi), level)


def bootstrap_ci(
    x: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray] = iqm,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    rng: np.random.Generator | int | None = 0,
) -> Interval:
    """One task: a statistic over runs with its percentile bootstrap interval.

    :param x: shape ``(n,)`` (one score per run).
    :param statistic: ``(..., n) → (...)``, e.g. :func:`iqm` or ``np.mean`` with ``axis=-1``.
    """
    return stratified_bootstrap_ci([np.asarray(x, dtype=float)], lambda ts: statistic(ts[0]),
                                   n_boot=n_boot, level=level, rng=rng)


# --------------------------------------------------------------------------- #
# Performance profiles and probability of improvement
# --------------------------------------------------------------------------- #
def performance_profile(
    scores: np.ndarray | Tasks,
    taus: np.ndarray,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    rng: np.random.Generator | int | None = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run-score distribution: the fraction of runs with score ``> τ``, for each τ.

    Each task's fraction is computed over its own runs, then averaged over tasks,
    so a task with more seeds does not weigh more (as rliable's score
    distributions). The band is a stratified percentile bootstrap.

    :param scores: ``(n_runs, n_tasks)`` or per-task arrays ``(n_k,)``.
    :param taus: shape ``(n_tau,)``.
    :returns: ``(profile, lo, hi)``, each shape ``(n_tau,)``.
    """
    tasks = as_tasks(scores)
    taus = np.asarray(taus, dtype=float)

    def frac(ts: Sequence[np.ndarray]) -> np.ndarray:
        # (..., n_k, 1) > (n_tau,) → (..., n_k, n_tau) → mean over runs → mean over tasks
        return np.mean([(np.asarray(t)[..., None] > taus).mean(axis=-2) for t in ts], axis=0)

    profile = frac(tasks)
    lo, hi = percentile_interval(frac(stratified_resample(tasks, n_boot, rng)), level)
    return profile, lo, hi


def _p_greater(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + ½ P(X = Y) for one task, over every pair. x ``(..., n)``, y ``(..., m)`` → ``(...)``."""
    d = np.asarray(x)[..., :, None] - np.asarray(y)[..., None, :]
    return (d > 0).mean(axis=(-2, -1)) + 0.5 * (d == 0).mean(axis=(-2, -1))


def probability_of_improvement(
    x: np.ndarray | Tasks,
    y: np.ndarray | Tasks,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    rng: np.random.Generator | int | None = 0,
) -> Interval:
    """P(X > Y): how likely a run of X beats a run of Y on a random task of the set.

    Per task it is the Mann-Whitney U statistic over ``n·m``: the fraction of
    (x-run, y-run) pairs where x scores higher, ties counting ½; then the
    mean over tasks (Agarwal et al. 2021, section 4.3). The interval resamples
    the runs of X and of Y independently within each task.

    :param x: X's scores, ``(n_runs, n_tasks)`` or per-task arrays ``(n_k,)``.
    :param y: Y's scores on the same tasks in the same order (``(m_k,)`` each).
    :returns: the estimate in ``[0, 1]``; 0.5 means no difference.
    """
    xs, ys = as_tasks(x), as_tasks(y)
    if len(xs) != len(ys):
        raise ValueError(f"x has {len(xs)} tasks and y has {len(ys)}; they must cover the same tasks")
    point = float(np.mean([_p_greater(a, b) for a, b in zip(xs, ys)]))
    g = _rng(rng)
    bx, by = stratified_resample(xs, n_boot, g), stratified_resample(ys, n_boot, g)
    reps = np.mean([_p_greater(a, b) for a, b in zip(bx, by)], axis=0)
    lo, hi = percentile_interval(reps, level)
    return Interval(point, float(lo), float(hi), level)


# --------------------------------------------------------------------------- #
# Censored time-to-threshold: Kaplan-Meier
# --------------------------------------------------------------------------- #
def _km_from_counts(deaths: np.ndarray, at_risk: np.ndarray) -> np.ndarray:
    """Survival after each distinct time: ``prod (1 - d_j / n_j)``. Shapes ``(..., U)`` → ``(..., U)``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(at_risk > 0, 1.0 - deaths / np.where(at_risk > 0, at_risk, 1), 1.0)
    return np.cumprod(factor, axis=-1)


def _km_counts(times: np.ndarray, solved: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct times ``(U,)``, and solved counts and runs at risk at each, ``(..., U)``.

    ``weights`` ``(..., n)`` is how often each run is counted (1 for the data,
    bootstrap multiplicities for a replicate).
    """
    uniq, inv = np.unique(times, return_inverse=True)
    U = uniq.size
    w = np.asarray(weights, dtype=float)
    onehot = np.zeros((times.size, U))
    onehot[np.arange(times.size), inv] = 1.0
    deaths = (w * solved) @ onehot  # (..., U): solved runs whose time is u_j
    present = w @ onehot  # (..., U): runs (solved or censored) whose time is u_j
    # At risk at u_j: runs whose time is >= u_j (a run censored at u_j is still at risk there).
    at_risk = np.flip(np.cumsum(np.flip(present, -1), -1), -1)
    return uniq, deaths, at_risk


def kaplan_meier(times: np.ndarray, solved: np.ndarray, grid: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fraction of runs solved by time ``t``, with right-censoring (Kaplan & Meier 1958).

    A run that reached the threshold contributes its crossing time as an event;
    a run that never did is *censored* at its last recorded time: it counts as
    "not yet solved" up to then and drops out of the risk set after, instead of
    being dropped (which would flatter slow algorithms) or counted as never
    solving (which would be a claim beyond the budget).

    ``F(t) = 1 - prod_{t_j <= t} (1 - d_j / n_j)``, with ``d_j`` runs solved at
    ``t_j`` and ``n_j`` runs whose time (solved or censored) is ``>= t_j``.

    :param times: shape ``(n,)``: crossing time where solved, else the censoring time.
    :param solved: shape ``(n,)`` bool.
    :param grid: shape ``(G,)``; default: the distinct times.
    :returns: ``(grid, fraction_solved)``, each shape ``(G,)``, right-continuous steps.
    """
    t = np.asarray(times, dtype=float).reshape(-1)
    s = np.asarray(solved, dtype=bool).reshape(-1)
    if t.shape != s.shape or t.size == 0:
        raise ValueError(f"times and solved must be non-empty and of equal length, got {t.shape} and {s.shape}")
    uniq, deaths, at_risk = _km_counts(t, s, np.ones(t.size))
    f = 1.0 - _km_from_counts(deaths, at_risk)
    g = uniq if grid is None else np.asarray(grid, dtype=float)
    return g, _step_at(uniq, f, g)


def _step_at(knots: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Right-continuous step function (0 before the first knot) evaluated on ``grid``.

    knots ``(U,)``, values ``(..., U)``, grid ``(G,)`` → ``(..., G)``.
    """
    pos = np.searchsorted(knots, grid, side="right") - 1
    padded = np.concatenate([np.zeros(values.shape[:-1] + (1,)), values], axis=-1)
    return padded[..., pos + 1]


def kaplan_meier_band(
    times: np.ndarray,
    solved: np.ndarray,
    grid: np.ndarray,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    rng: np.random.Generator | int | None = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Kaplan-Meier fraction solved on ``grid`` with a percentile bootstrap band over runs.

    Each replicate resamples runs with replacement (Efron 1981, "Censored data
    and the bootstrap"); it is computed from multinomial run counts, so all
    replicates are one matrix product.

    :param times: ``(n,)``. :param solved: ``(n,)`` bool. :param grid: ``(G,)``.
    :returns: ``(fraction, lo, hi)``, each shape ``(G,)``.
    """
    t = np.asarray(times, dtype=float).reshape(-1)
    s = np.asarray(solved, dtype=bool).reshape(-1)
    grid = np.asarray(grid, dtype=float)
    _, frac = kaplan_meier(t, s, grid)
    g = _rng(rng)
    counts = g.multinomial(t.size, np.full(t.size, 1.0 / t.size), size=n_boot)  # (B, n)
    uniq, deaths, at_risk = _km_counts(t, s, counts)
    reps = _step_at(uniq, 1.0 - _km_from_counts(deaths, at_risk), grid)  # (B, G)
    lo, hi = percentile_interval(reps, level)
    return frac, lo, hi


# --------------------------------------------------------------------------- #
# Small helpers
# --------------------------------------------------------------------------- #
def wilson_interval(successes: int, n: int, level: float = 0.95) -> Interval:
    """A success rate ``k / n`` with the Wilson score interval (Wilson 1927).

    Unlike the normal approximation it stays inside ``[0, 1]`` and is not empty
    at ``k = 0`` or ``k = n``, which matters with a handful of seeds.
    """
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    # Two-sided normal quantile, by bisection on erf so the module needs only NumPy and math.
    from math import erf, sqrt

    lo_z, hi_z = 0.0, 10.0
    for _ in range(80):
        mid = (lo_z + hi_z) / 2
        if erf(mid / sqrt(2)) < level:
            lo_z = mid
        else:
            hi_z = mid
    z = (lo_z + hi_z) / 2
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), level)


def normalise(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """Min-max normalisation with fixed anchors: ``(x - low) / (high - low)``.

    With ``low`` the random policy's return and ``high`` the env's threshold,
    0 means "no better than random" and 1 means "solved"; the anchors are fixed
    per env, so adding an algorithm never changes anyone's scores.

    :param x: any shape. :returns: the same shape.
    :raises ValueError: ``high == low`` (no scale).
    """
    if not np.isfinite(low) or not np.isfinite(high) or high == low:
        raise ValueError(f"normalisation anchors must be finite and differ, got low={low}, high={high}")
    return (np.asarray(x, dtype=float) - low) / (high - low)


def intervals_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether the closed intervals ``a = (lo, hi)`` and ``b`` share a point."""
    return bool(a[0] <= b[1] and b[0] <= a[1])
