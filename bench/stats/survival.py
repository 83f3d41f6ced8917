"""Censored time-to-threshold: the Kaplan-Meier estimate of the fraction of runs solved by step ``s``.

Runs that never reached the threshold are right-censored at their last step (Kaplan & Meier 1958),
never dropped. Pure NumPy, no I/O; :func:`kaplan_meier_median` is the median time to threshold as R's
survival package prints it.
"""

from __future__ import annotations

import numpy as np

from bench.stats.aggregate import _rng, percentile_interval

__all__ = ["censored_at_budget", "kaplan_meier", "kaplan_meier_band", "kaplan_meier_median"]

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


def censored_at_budget(times: np.ndarray, solved: np.ndarray) -> np.ndarray:
    """``times`` with every unsolved run censored at the end of the budget: the latest time of any run.

    The runs a report compares all ran their whole budget (done runs at one budget,
    :func:`bench.analysis.readmodel.load`), so a run that did not solve is known not
    to solve within it, however few steps or CPU seconds it happened to use. Censored
    at its own last time instead, a run that stopped sooner than a slower solve left the
    risk set before it: 1 solve in 3 runs then read as ``F = 1`` and a median of that
    solve's time (issue 66). Censored at the end, ``F`` ends at the fraction solved, and
    the median is "not reached" (``nan`` from :func:`kaplan_meier_median`) when fewer
    than half the runs solved.

    :param times: ``(n,)``: crossing time where solved, else the run's own last time.
    :param solved: ``(n,)`` bool.
    :returns: ``(n,)`` float.
    """
    t = np.asarray(times, dtype=float).reshape(-1)
    s = np.asarray(solved, dtype=bool).reshape(-1)
    return np.where(s, t, np.max(t)) if t.size else t


def kaplan_meier_median(times: np.ndarray, solved: np.ndarray) -> float:
    """Median time to threshold: where the Kaplan-Meier fraction solved ``F(t)`` reaches ½.

    The smallest time ``t_k`` with ``F(t_k) >= 0.5``, except when ``F`` equals 0.5
    exactly (within 1e-12) on a flat stretch ``[t_k, t_j)`` that ends at a later
    solve ``t_j``: then the midpoint ``(t_k + t_j) / 2``, the usual rule for an
    even number of values (times 1, 2, 3, 4 all solved → 2.5). This follows R's
    ``survival`` package as ``print.survfit`` reports the median (``minmin`` in
    ``survmean``, R/print.survfit.R). Where ``F`` reaches exactly 0.5 at the last
    solve and never rises again (only censored runs, or nothing, after it), the
    median is that solve's time ``t_k``, again as ``print.survfit``; R's
    ``quantile.survfit`` would instead give ``(t_k + t_max) / 2`` with ``t_max``
    the last censoring time, and lifelines' ``median_survival_time_`` never
    takes a midpoint (it returns ``t_k``, 2 in the example above).

    :param times: ``(n,)``: crossing time where solved, else the censoring time.
    :param solved: ``(n,)`` bool.
    :returns: the median, or ``nan`` when ``F`` never reaches ½ within the
        observed times (lifelines returns ``inf`` there).
    """
    t, f = kaplan_meier(times, solved)
    tol = 1e-12
    reached = np.flatnonzero(f >= 0.5 - tol)
    if reached.size == 0:
        return float("nan")
    k = reached[0]
    later = np.flatnonzero(f > f[k] + tol)
    if abs(f[k] - 0.5) <= tol and later.size:
        return float((t[k] + t[later[0]]) / 2)
    return float(t[k])
