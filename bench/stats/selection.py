"""Which labels can still be best on the next env of a kind, which are ruled out, and which to default to.

Pure functions over per-env score differences (issue 63). The environment is the unit the answer
generalises over: every test and interval here is over envs, never over runs pooled across envs.

Input: ``D`` of shape ``(k, m, m)``, ``D[e, a, b]`` = mean score of label ``a`` minus that of label ``b`` on
env ``e`` (NaN where the pair could not be compared there, e.g. no shared machine for a time measure).

- **Can still be best** (multiple comparisons with the best, Hsu 1984, "Constrained simultaneous confidence
  intervals for multiple comparisons with the best", Ann. Statist. 12(3)): label ``a`` is ruled out when it
  is shown worse than some other label over envs. Each comparison is a one-sided paired t-test over the envs
  both ran (``D[:, a, b]``); the hypothesis "``a`` is the best" is the intersection of its ``m − 1``
  comparisons, so its p-value is Bonferroni's ``min(1, (m − 1) · min_b p_ab)``. The true best is then ruled out
  with probability ≤ α whatever the others do (only its own ``m − 1`` comparisons can exclude it). Paired
  t-tests over envs rather than Hsu's pooled-variance form: the env × algorithm interaction differs from pair to
  pair (A2C and PPO disagree across envs far more than PPO's two implementations do), and the pooled form
  assumes it does not. :mod:`bench.stats.simulation` measures both rates.
- **Regret** of ``a`` on env ``e``: its shortfall to the env's best, ``max(0, max_b D[e, b, a])`` (a pairwise
  form, so that a time measure needs only pairs compared on one machine). Its mean over envs estimates the
  expected shortfall on the next env of the kind; the interval is Student's t over envs, cut at 0.
- **Default**: the candidate whose choice costs least on the next env. A profile of 2–8 envs estimates that
  badly: a leave-one-env-out replay on the shipped reference found that the profile's own least-regret label
  lost more than always choosing the store's single best (docs/statistics.md, "Defaults"). So the default is
  the store's single best among the candidates (least mean regret over every env of the store), and moves to
  the profile's own least-regret candidate only where the profile's envs show it ahead of that choice, by a
  one-sided paired t-test of their regrets at :data:`SWITCH_LEVEL` (a pre-test estimator: shrinkage all the
  way to the store-wide choice unless the profile's evidence says otherwise). That candidate is picked on the
  same envs from the ``c − 1`` candidates beside the single best, so the test's p carries Bonferroni's factor
  ``c − 1``: uncorrected, the profile's envs moved defaults that then lost on the env held out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import bench.stats.distributions as dist

__all__ = ["SWITCH_LEVEL", "Choice", "Interval", "best_p", "choose_default", "differences", "mean_interval",
           "pair_p", "regrets"]

#: Level of the (Bonferroni-corrected) one-sided test that moves a profile's default off the store's single best
#: (module docstring): the answers' own α. Looser levels did no better over the shipped reference's
#: leave-one-env-out record (docs/statistics.md, "Defaults").
SWITCH_LEVEL = 0.05
#: Relative spread below which equal differences are taken as exactly equal (rounding of a mean of equal values).
_NO_SPREAD = 1e-12


@dataclass(frozen=True)
class Interval:
    """A mean over envs with its two-sided interval (``lo``/``hi`` NaN with fewer than 2 envs)."""

    point: float
    lo: float
    hi: float
    n: int

    def __str__(self) -> str:
        if self.n < 2 or self.lo != self.lo:
            return f"{self.point:.3f}"
        return f"{self.point:.3f} [{self.lo:.3f}, {self.hi:.3f}]"


@dataclass(frozen=True)
class Choice:
    """A default and why: ``label``; ``how`` is ``single best`` (the store's single best among the
    candidates), ``profile`` (the profile's envs moved it, with ``p`` the switch test's p) or ``only``."""

    label: str
    how: str
    p: float | None = None


def differences(scores: np.ndarray) -> np.ndarray:
    """``(k, m)`` per-env scores (NaN where a label did not run) → ``(k, m, m)`` differences ``a − b``."""
    s = np.asarray(scores, dtype=float)
    return s[:, :, None] - s[:, None, :]


def pair_p(d: np.ndarray) -> float:
    """One-sided p of a paired t-test over envs that the mean of ``d`` ``(k,)`` is below 0 (NaNs dropped).

    Fewer than 2 envs: 1 (one env makes no claim about the next). No spread: 0 if every difference is
    negative, else 1."""
    d = d[~np.isnan(d)]
    k = d.size
    if k < 2:
        return 1.0
    sd = float(d.std(ddof=1))
    if sd <= _NO_SPREAD * max(1.0, abs(float(d.mean()))):  # equal differences (up to rounding): no t to compute
        return 0.0 if d.mean() < 0 else 1.0
    t = float(d.mean()) / (sd / np.sqrt(k))
    return float(dist.t_cdf(t, k - 1))


def best_p(D: np.ndarray) -> np.ndarray:
    """p-values of "label ``a`` is the best" (module docstring): ``min(1, (m − 1) · min_b p_ab)``.

    :param D: ``(k, m, m)`` differences, or ``(..., k, m, m)`` without NaNs (replicates of a simulation).
    :returns: ``(m,)``, or ``(..., m)``.
    """
    m = D.shape[-1]
    if m < 2:
        return np.ones(D.shape[:-3] + (m,))
    if D.ndim == 3 and np.isnan(D).any():  # envs missing for some pairs: pair by pair
        p = np.array([[pair_p(D[:, a, b]) if a != b else np.inf for b in range(m)] for a in range(m)])
    else:
        k = D.shape[-3]
        mean, sd = D.mean(axis=-3), D.std(axis=-3, ddof=1) if k > 1 else np.zeros(D.shape[:-3] + (m, m))
        with np.errstate(divide="ignore", invalid="ignore"):
            t = mean / (sd / np.sqrt(k))
            spread = sd > _NO_SPREAD * np.maximum(1.0, np.abs(mean))
            p = np.where(spread, dist.t_cdf(t, max(k - 1, 1)), np.where(mean < 0, 0.0, 1.0))
        p = np.where(k < 2, 1.0, p)
        p = np.where(np.eye(m, dtype=bool), np.inf, p)
    return np.minimum(1.0, (m - 1) * p.min(axis=-1))


def regrets(D: np.ndarray) -> np.ndarray:
    """``(k, m)`` shortfall of each label to the best on each env: ``max(0, max_b D[e, b, a])`` (NaN where the
    label has no comparison on the env)."""
    behind = np.swapaxes(D, 1, 2)  # behind[e, a, b] = D[e, b, a]
    with np.errstate(all="ignore"):
        worst = np.where(np.isnan(behind).all(axis=2), np.nan, np.nanmax(np.where(np.isnan(behind), -np.inf, behind), axis=2))
    return np.where(np.isnan(worst), np.nan, np.maximum(worst, 0.0))


def mean_interval(x: np.ndarray, level: float = 0.95, *, floor: float | None = 0.0) -> Interval:
    """Mean of ``x`` ``(k,)`` over envs (NaNs dropped) with Student's t interval, cut at ``floor``."""
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    k = x.size
    if k == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    mu = float(x.mean())
    if k < 2:
        return Interval(mu, float("nan"), float("nan"), k)
    half = float(dist.t_ppf(0.5 + level / 2, k - 1)) * float(x.std(ddof=1)) / np.sqrt(k)
    lo, hi = mu - half, mu + half
    if floor is not None:
        lo, hi = max(lo, floor), max(hi, floor)
    return Interval(mu, lo, hi, k)


def choose_default(candidates: list[str], store_regret: dict[str, float], profile_regrets: dict[str, np.ndarray],
                   level: float = SWITCH_LEVEL) -> Choice:
    """The default among ``candidates`` (module docstring).

    :param store_regret: label → mean regret over every env of the store it ran (the single best's ranking);
        a candidate without one ranks last. Ties: the label first in alphabetical order.
    :param profile_regrets: label → ``(k,)`` regrets on the profile's envs, in one env order.
    """
    if len(candidates) == 1:
        return Choice(candidates[0], "only")
    single = min(candidates, key=lambda c: (store_regret.get(c, np.inf), c))
    own = min(candidates, key=lambda c: (float(np.nanmean(profile_regrets[c])), c))
    if own == single:
        return Choice(single, "single best")
    # ``own`` was picked on these envs from the c − 1 candidates beside ``single``: Bonferroni over that choice.
    p = min(1.0, (len(candidates) - 1) * pair_p(profile_regrets[own] - profile_regrets[single]))
    return Choice(own, "profile", p) if p < level else Choice(single, "single best", p)
