"""How often a profile rule names a false winner, and how often it finds a true one (issue 40).

A profile's answer is read as a claim about the next env of its kind. The simulation draws profiles
whose envs differ in which algorithm does better (an env × algorithm interaction), with a chosen mean
difference over envs, and counts how often each rule names a winner:

- each of ``k`` envs draws its true effect ``θ_i ~ N(delta, sd_env²)``;
- on env ``i`` each side has ``n`` runs with scores ``N(±θ_i / 2, sd_run²)``;
- the **equal-weight rule** (:func:`bench.stats.generalise.equal_weights`, the headline test) names a
  winner when its two-sided t-test over the per-env effects gives p < ``alpha``;
- the **random-effects rule** (:func:`bench.stats.generalise.hksj`, inverse-variance weights; the
  headline test until issue 63) likewise;
- the **fixed-env rule** (what a stratified test over the envs asks: did A beat B on *these* envs)
  names one when ``|mean_i d_i| / sqrt(Σ se_i²) / k`` exceeds the normal quantile: the large-sample
  form of the stratified permutation test of the mean over envs of per-env means.

With ``delta = 0`` the rate of named winners is the false-winner rate; with ``delta > 0`` it is the
power. Everything is vectorised over replicates ``(reps, k)``; :func:`table` runs the grid that
``scripts/simulate_generalise.py`` prints for docs/statistics.md, and the tests run it small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

import bench.stats.distributions as dist
import bench.stats.selection as selection
from bench.stats.generalise import SE_FLOOR

__all__ = ["Cell", "rates", "table"]


@dataclass(frozen=True)
class Cell:
    """One simulated setting and its rates: ``winner_re`` and ``winner_fixed`` are the fractions of
    ``reps`` profiles in which the random-effects and the fixed-env rule named a winner; ``winner_eq`` the
    equal-weight rule's; ``stuck`` of the ``k`` envs had every run of both sides score the same (0)."""

    k: int
    n: int
    sd_env: float
    sd_run: float
    delta: float
    reps: int
    winner_re: float
    winner_fixed: float
    winner_eq: float = float("nan")
    stuck: int = 0


def _hksj_p(d: np.ndarray, se: np.ndarray) -> np.ndarray:
    """:func:`bench.stats.generalise.hksj`'s p-value for each row of ``d``, ``se`` ``(reps, k)`` → ``(reps,)``."""
    k = d.shape[1]
    w = 1.0 / se**2
    sw = w.sum(1)
    fixed = (w * d).sum(1) / sw
    q = (w * (d - fixed[:, None]) ** 2).sum(1)
    tau2 = np.maximum(0.0, (q - (k - 1)) / (sw - (w**2).sum(1) / sw))
    wr = 1.0 / (se**2 + tau2[:, None])
    mu = (wr * d).sum(1) / wr.sum(1)
    scale = np.maximum(1.0, (wr * (d - mu[:, None]) ** 2).sum(1) / (k - 1))
    t = mu / np.sqrt(scale / wr.sum(1))
    return 2 * dist.t_sf(np.abs(t), k - 1)


def _equal_p(d: np.ndarray) -> np.ndarray:
    """:func:`bench.stats.generalise.equal_weights`'s p-value for each row of ``d`` ``(reps, k)`` → ``(reps,)``."""
    k = d.shape[1]
    se = d.std(1, ddof=1) / np.sqrt(k)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, np.abs(d.mean(1)) / se, np.where(d.mean(1) == 0, 0.0, np.inf))
    return 2 * dist.t_sf(t, k - 1)


def rates(k: int, n: int, sd_env: float, sd_run: float, delta: float = 0.0, *, reps: int = 20_000,
          alpha: float = 0.05, rng: np.random.Generator | int | None = 0, stuck: int = 0) -> Cell:
    """Simulate ``reps`` profiles of ``k`` envs with ``n`` runs per side and env (see the module docstring);
    ``stuck`` of them (the first) an env that no algorithm learns: every run of both sides scores 0."""
    if k < 1 or n < 2:
        raise ValueError(f"need k >= 1 envs and n >= 2 runs per side, got k={k}, n={n}")
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    theta = delta + sd_env * g.standard_normal((reps, k))
    x = theta[..., None] / 2 + sd_run * g.standard_normal((reps, k, n))
    y = -theta[..., None] / 2 + sd_run * g.standard_normal((reps, k, n))
    x[:, :stuck], y[:, :stuck] = 0.0, 0.0
    d = x.mean(-1) - y.mean(-1)
    se = np.maximum(np.sqrt(x.var(-1, ddof=1) / n + y.var(-1, ddof=1) / n), SE_FLOOR)
    z = np.abs(d.mean(1)) / (np.sqrt((se**2).sum(1)) / k)
    fixed = float(np.mean(z > dist.norm_ppf(1 - alpha / 2)))
    re = float(np.mean(_hksj_p(d, se) < alpha)) if k >= 2 else 0.0  # one env: no claim beyond it
    eq = float(np.mean(_equal_p(d) < alpha)) if k >= 2 else 0.0
    return Cell(k, n, sd_env, sd_run, delta, reps, re, fixed, eq, stuck)


def table(ks: Iterable[int], ns: Iterable[int], sd_envs: Iterable[float], sd_runs: Iterable[float],
          deltas: Iterable[float], *, reps: int = 20_000, seed: int = 0, stuck: int = 0) -> list[Cell]:
    """:func:`rates` over the grid, each cell with its own stream (``seed`` and the cell's place in the grid)."""
    out = []
    grid = [(k, n, e, r, dl) for k in ks for n in ns for e in sd_envs for r in sd_runs for dl in deltas]
    for i, (k, n, e, r, dl) in enumerate(grid):
        out.append(rates(k, n, e, r, dl, reps=reps, rng=np.random.default_rng([seed, i]), stuck=stuck))
    return out


# --------------------------------------------------------------------------- #
# What can still be best (issue 63): how often the true best is ruled out, the power to rule out the others,
# and the coverage of the default's regret interval
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class SelectionCell:
    """One simulated setting of :func:`selection_rates` and its rates over ``reps`` profiles.

    ``best_out``: the true best ruled out (paired tests, :func:`bench.stats.selection.best_p`);
    ``best_out_pooled``: the same by Hsu's pooled-variance form; ``power_1`` / ``power_2``: an algorithm
    0.1 / 0.2 below the best ruled out (paired); ``coverage``: the default's (least observed mean regret)
    95% regret interval holds its true expected regret on the next env of the kind."""

    k: int
    m: int
    sd_int: float
    sd_run: float
    n: int
    reps: int
    best_out: float
    best_out_pooled: float
    power_1: float
    power_2: float
    coverage: float


def _gaps(m: int) -> np.ndarray:
    """True mean scores over the env distribution: the best at 0, then 0.1 and 0.2 below it, alternately."""
    return np.array([0.0] + [-0.1 if i % 2 else -0.2 for i in range(1, m)][::-1][: m - 1][::-1])


def _pooled_best_p(S: np.ndarray) -> np.ndarray:
    """Hsu's MCB in its pooled-variance form on ``S`` ``(reps, k, m)``: the two-way (env × label) residual
    variance on ``(k − 1)(m − 1)`` df for every pair, Bonferroni over each label's ``m − 1`` comparisons."""
    reps, k, m = S.shape
    resid = S - S.mean(1, keepdims=True) - S.mean(2, keepdims=True) + S.mean((1, 2), keepdims=True)
    df = (k - 1) * (m - 1)
    s2 = (resid**2).sum((1, 2)) / df
    mean = S.mean(1)
    t = (mean[:, :, None] - mean[:, None, :]) / np.sqrt(2 * s2 / k)[:, None, None]
    p = np.where(np.eye(m, dtype=bool), np.inf, dist.t_cdf(t, df))
    return np.minimum(1.0, (m - 1) * p.min(-1))


def selection_rates(k: int, m: int, sd_int: float, sd_run: float = 0.1, n: int = 5, *, reps: int = 2000,
                    alpha: float = 0.05, rng: np.random.Generator | int | None = 0) -> SelectionCell:
    """Simulate ``reps`` profiles of ``k`` envs and ``m`` labels (see :class:`SelectionCell`).

    Label ``a``'s true score on env ``e`` is ``μ_a + sd_int · z`` (the env × algorithm interaction), with ``μ``
    from :func:`_gaps`; each env's observed score is the mean of ``n`` runs of sd ``sd_run``. The true expected
    regret of a label is estimated on 20,000 fresh envs."""
    if k < 2 or m < 2:
        raise ValueError(f"need k >= 2 envs and m >= 2 labels, got k={k}, m={m}")
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    mu = _gaps(m)
    theta = mu + sd_int * g.standard_normal((reps, k, m))
    S = theta + sd_run / np.sqrt(n) * g.standard_normal((reps, k, m))
    p = selection.best_p(S[..., :, None] - S[..., None, :])
    fresh = mu + sd_int * g.standard_normal((20_000, m))
    true_regret = (fresh.max(1, keepdims=True) - fresh).mean(0)
    R = S.max(2, keepdims=True) - S  # (reps, k, m)
    pick = R.mean(1).argmin(1)
    r = R[np.arange(reps), :, pick]  # (reps, k)
    half = dist.t_ppf(0.975, k - 1) * r.std(1, ddof=1) / np.sqrt(k)
    lo, hi = np.maximum(r.mean(1) - half, 0.0), np.maximum(r.mean(1) + half, 0.0)
    cover = float(np.mean((lo <= true_regret[pick]) & (true_regret[pick] <= hi)))
    out = p < alpha
    first = lambda gap: int(np.flatnonzero(np.isclose(mu, gap))[0]) if np.isclose(mu, gap).any() else None  # noqa: E731
    i1, i2 = first(-0.1), first(-0.2)
    return SelectionCell(k, m, sd_int, sd_run, n, reps, float(out[:, 0].mean()),
                         float((_pooled_best_p(S) < alpha)[:, 0].mean()),
                         float(out[:, i1].mean()) if i1 is not None else float("nan"),
                         float(out[:, i2].mean()) if i2 is not None else float("nan"), cover)


def selection_table(ks: Iterable[int], ms: Iterable[int], sd_ints: Iterable[float], *, sd_run: float = 0.1,
                    n: int = 5, reps: int = 2000, seed: int = 0) -> list[SelectionCell]:
    """:func:`selection_rates` over the grid, each cell with its own stream."""
    grid = [(k, m, s) for k in ks for m in ms for s in sd_ints]
    return [selection_rates(k, m, s, sd_run, n, reps=reps, rng=np.random.default_rng([seed, i]))
            for i, (k, m, s) in enumerate(grid)]
