"""How often a profile rule names a false winner, and how often it finds a true one (issue 40).

A profile's answer is read as a claim about the next env of its kind. The simulation draws profiles
whose envs differ in which algorithm does better (an env × algorithm interaction), with a chosen mean
difference over envs, and counts how often each rule names a winner:

- each of ``k`` envs draws its true effect ``θ_i ~ N(delta, sd_env²)``;
- on env ``i`` each side has ``n`` runs with scores ``N(±θ_i / 2, sd_run²)``;
- the **random-effects rule** (:func:`bench.analysis.generalise.hksj`) names a winner when its
  two-sided p < ``alpha``;
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

from bench.analysis.generalise import SE_FLOOR

__all__ = ["Cell", "rates", "table"]


@dataclass(frozen=True)
class Cell:
    """One simulated setting and its rates: ``winner_re`` and ``winner_fixed`` are the fractions of
    ``reps`` profiles in which the random-effects and the fixed-env rule named a winner."""

    k: int
    n: int
    sd_env: float
    sd_run: float
    delta: float
    reps: int
    winner_re: float
    winner_fixed: float


def _hksj_p(d: np.ndarray, se: np.ndarray) -> np.ndarray:
    """:func:`bench.analysis.generalise.hksj`'s p-value for each row of ``d``, ``se`` ``(reps, k)`` → ``(reps,)``."""
    from bench.analysis import distributions as dist

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


def rates(k: int, n: int, sd_env: float, sd_run: float, delta: float = 0.0, *, reps: int = 20_000,
          alpha: float = 0.05, rng: np.random.Generator | int | None = 0) -> Cell:
    """Simulate ``reps`` profiles of ``k`` envs with ``n`` runs per side and env (see the module docstring)."""
    from bench.analysis import distributions as dist

    if k < 1 or n < 2:
        raise ValueError(f"need k >= 1 envs and n >= 2 runs per side, got k={k}, n={n}")
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    theta = delta + sd_env * g.standard_normal((reps, k))
    x = theta[..., None] / 2 + sd_run * g.standard_normal((reps, k, n))
    y = -theta[..., None] / 2 + sd_run * g.standard_normal((reps, k, n))
    d = x.mean(-1) - y.mean(-1)
    se = np.maximum(np.sqrt(x.var(-1, ddof=1) / n + y.var(-1, ddof=1) / n), SE_FLOOR)
    z = np.abs(d.mean(1)) / (np.sqrt((se**2).sum(1)) / k)
    fixed = float(np.mean(z > dist.norm_ppf(1 - alpha / 2)))
    re = float(np.mean(_hksj_p(d, se) < alpha)) if k >= 2 else 0.0  # one env: no claim beyond it
    return Cell(k, n, sd_env, sd_run, delta, reps, re, fixed)


def table(ks: Iterable[int], ns: Iterable[int], sd_envs: Iterable[float], sd_runs: Iterable[float],
          deltas: Iterable[float], *, reps: int = 20_000, seed: int = 0) -> list[Cell]:
    """:func:`rates` over the grid, each cell with its own stream (``seed`` and the cell's place in the grid)."""
    out = []
    grid = [(k, n, e, r, dl) for k in ks for n in ns for e in sd_envs for r in sd_runs for dl in deltas]
    for i, (k, n, e, r, dl) in enumerate(grid):
        out.append(rates(k, n, e, r, dl, reps=reps, rng=np.random.default_rng([seed, i])))
    return out
