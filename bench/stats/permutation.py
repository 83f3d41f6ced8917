"""Stratified permutation tests: does ``aggregate(x) - aggregate(y)`` differ from what relabelling runs gives?

Pure NumPy, no I/O (the conventions of :mod:`bench.stats.aggregate`: a *task* is one env, scores of many
tasks a list of 1-D arrays). :func:`permutation_test` relabels runs within each task only (a stratified
test: runs are never exchanged across envs), exactly by enumeration when the relabelings are few, with the p-value's floor made visible (3 vs 3 runs can never
reach p < 0.1 two-sided); :func:`mann_whitney_exact` is its rank version for one task.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from bench.stats.aggregate import Aggregate, Tasks, _rng, aggregate_task_mean, aggregate_task_mean_iqm, as_tasks

__all__ = ["PermutationTest", "mann_whitney_exact", "permutation_test"]

_ALTERNATIVES = ("two-sided", "greater", "less")
#: Floats per batch of relabelings, to bound memory (≈ 8 MB per copy of the runs).
_PERM_CHUNK_FLOATS = 1 << 20


@dataclass(frozen=True)
class PermutationTest:
    """Result of :func:`permutation_test`.

    ``statistic`` is the observed ``aggregate(x) - aggregate(y)``; ``exact`` says
    whether every within-task relabeling was enumerated (then ``n_permutations``
    is their count) or ``n_permutations`` random ones were drawn.
    """

    statistic: float
    p_value: float
    exact: bool
    n_permutations: int
    alternative: str


def _relabel(pools: list[np.ndarray], idx: list[tuple[np.ndarray, np.ndarray]]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Split each task's pooled runs by positions ``idx[k] = (x_positions (B, n_k), y_positions (B, m_k))``."""
    return [pool[i] for pool, (i, _) in zip(pools, idx)], [pool[j] for pool, (_, j) in zip(pools, idx)]


@functools.lru_cache(maxsize=32)
def _orderings(size: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every way to label ``n`` of ``size`` runs X: the X positions ``(C(size, n), n)`` and the Y
    positions ``(C(size, n), size - n)``, each row increasing. Cached: a report tests the same seed
    counts on many env pairs, and building C(20, 10) = 184,756 rows is most of an exact test's cost.
    Two contiguous arrays, not one split by views: gathering through a contiguous index array is
    2.5x faster (measured, 184,756 rows of 10)."""
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(size), n)), dtype=np.intp)
    chosen = flat.reshape(-1, n)
    rest = np.ones((chosen.shape[0], size), dtype=bool)
    rest[np.arange(chosen.shape[0])[:, None], chosen] = False
    others = np.ascontiguousarray(np.nonzero(rest)[1].reshape(chosen.shape[0], -1))
    for a in (chosen, others):
        a.setflags(write=False)
    return chosen, others


def permutation_test(
    x_tasks: np.ndarray | Tasks,
    y_tasks: np.ndarray | Tasks,
    aggregate: Aggregate = aggregate_task_mean_iqm,
    *,
    alternative: str = "two-sided",
    max_exact: int = 200_000,
    n_perm: int = 20_000,
    rng: np.random.Generator | int | None = 0,
) -> PermutationTest:
    """Stratified permutation test of ``T = aggregate(x) - aggregate(y)``.

    H0: within each task, the runs of X and of Y are exchangeable (the same
    distribution per env; envs may differ). So relabelings happen within each
    task, never across: task ``k`` keeps ``n_k`` runs labelled X and ``m_k``
    labelled Y, as in a stratified (blocked) permutation test.

    - Exact, when the number of relabelings ``prod_k C(n_k + m_k, n_k)`` is at
      most ``max_exact``: all are enumerated and ``p = #{T_perm ≥ T_obs} / N``
      ("greater"; "less" mirrored; "two-sided" compares ``|T|``). The identity
      relabeling is among them, so ``p >= 1/N``: with 3 vs 3 runs on one task
      ``N = 20`` and a two-sided p is at least 2/20 = 0.1, so no difference can
      be declared at 0.05 however separated the runs are.
    - Otherwise Monte Carlo over ``n_perm`` random within-task relabelings, with
      ``p = (1 + #) / (1 + n_perm)``: counting the observed labelling as one of
      the draws keeps ``P(p <= α) <= α`` under H0, where ``# / n_perm`` would not
      (Phipson & Smyth 2010, "Permutation p-values should never be zero",
      Stat. Appl. Genet. Mol. Biol. 9(1)).

    Ties: ``T_perm`` counts as reaching ``T_obs`` within a tolerance of 1e-12
    relative to the larger of ``|T_obs|`` and the largest ``|score|``, so a
    relabeling that gives the same value up to float rounding is not missed.

    :param x_tasks: X's scores, ``(n_runs, n_tasks)`` or per-task arrays ``(n_k,)``.
    :param y_tasks: Y's scores on the same tasks in the same order, ``(m_k,)`` each.
    :param aggregate: per-task arrays ``(..., n_k)`` → ``(...)``; batches of
        relabelings are evaluated in one call each.
    :param alternative: ``"two-sided"``, ``"greater"`` (X higher) or ``"less"``.
    """
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}")
    if n_perm < 1 or max_exact < 0:
        raise ValueError(f"n_perm must be >= 1 and max_exact >= 0, got n_perm={n_perm}, max_exact={max_exact}")
    xs, ys = as_tasks(x_tasks), as_tasks(y_tasks)
    if len(xs) != len(ys):
        raise ValueError(f"x has {len(xs)} tasks and y has {len(ys)}; they must cover the same tasks")
    pools = [np.concatenate([a, b]) for a, b in zip(xs, ys)]
    n_x = [a.size for a in xs]
    t_obs = float(aggregate(xs) - aggregate(ys))
    tol = 1e-12 * max(abs(t_obs), max(float(np.abs(pool).max()) for pool in pools))

    def hits_of(pools: list[np.ndarray], idx: list[tuple[np.ndarray, np.ndarray]]) -> int:
        """How many of a batch of relabelings (``idx``: per task, X and Y positions) reach ``t_obs``."""
        bx, by = _relabel(pools, idx)
        t = np.asarray(aggregate(bx) - aggregate(by))
        if alternative == "greater":
            return int(np.count_nonzero(t >= t_obs - tol))
        if alternative == "less":
            return int(np.count_nonzero(t <= t_obs + tol))
        return int(np.count_nonzero(np.abs(t) >= abs(t_obs) - tol))

    chunk = max(1, _PERM_CHUNK_FLOATS // sum(pool.size for pool in pools))
    n_total = math.prod(math.comb(pool.size, n) for pool, n in zip(pools, n_x))
    if n_total <= max_exact:
        return PermutationTest(t_obs, _exact_hits(pools, n_x, n_total, chunk, hits_of) / n_total, True, n_total,
                               alternative)
    hits = _sampled_hits(pools, n_x, n_perm, chunk, _rng(rng), hits_of)
    return PermutationTest(t_obs, (1 + hits) / (1 + n_perm), False, n_perm, alternative)


def _exact_hits(pools: list[np.ndarray], n_x: list[int], n_total: int, chunk: int,
                hits_of: Callable[[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]], int]) -> int:
    """:func:`permutation_test`'s count over every relabeling (``n_total`` of them), ``chunk`` at a time."""
    # Every task's relabelings: its X positions and its Y positions, (C_k, n_k) and (C_k, m_k).
    # Both list positions in increasing order, so with each pool sorted every relabelled side
    # arrives sorted and the aggregates' own sorts (IQM, CVaR) have nothing to do (_sorted_last).
    # The set of relabelings, and so the p-value, does not depend on the pool's order.
    pools = [np.sort(pool) for pool in pools]
    orders = [_orderings(pool.size, n) for pool, n in zip(pools, n_x)]
    sizes = [o[0].shape[0] for o in orders]
    strides = [math.prod(sizes[k + 1:]) for k in range(len(sizes))]  # mixed radix: task 0 slowest
    hits = 0
    for start in range(0, n_total, chunk):
        stop = min(start + chunk, n_total)
        if len(orders) == 1:  # one task: slices of its orderings, not a gather
            hits += hits_of(pools, [(orders[0][0][start:stop], orders[0][1][start:stop])])
            continue
        g = np.arange(start, stop)
        rows = [(g // st) % sz for st, sz in zip(strides, sizes)]
        hits += hits_of(pools, [(ch[r], ot[r]) for (ch, ot), r in zip(orders, rows)])
    return hits


def _sampled_hits(pools: list[np.ndarray], n_x: list[int], n_perm: int, chunk: int, gen: np.random.Generator,
                  hits_of: Callable[[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]], int]) -> int:
    """:func:`permutation_test`'s count over ``n_perm`` random within-task relabelings, ``chunk`` at a time."""
    hits = 0
    for start in range(0, n_perm, chunk):
        b = min(chunk, n_perm - start)
        perms = [np.argsort(gen.random((b, pool.size)), axis=1) for pool in pools]
        hits += hits_of(pools, [(p[:, :n], p[:, n:]) for p, n in zip(perms, n_x)])
    return hits


def _midranks(v: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``v`` ``(n,)``, ties sharing the mean of their ranks."""
    _, inv, counts = np.unique(v, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts  # 0-based rank of each distinct value's first copy
    return (first + (counts + 1) / 2)[inv.reshape(-1)]


def mann_whitney_exact(
    x: np.ndarray, y: np.ndarray, *, alternative: str = "two-sided", max_exact: int = 200_000
) -> float:
    """Exact p-value of the Mann-Whitney U test (Wilcoxon rank-sum) for one task.

    It is the exact permutation test of the difference in mean midranks, which
    for fixed sizes is an increasing function of ``U`` (``U = R_x - n(n+1)/2``);
    with ties it is the exact test conditional on the tie pattern. The two-sided
    p-value counts relabelings with ``|U - nm/2| >= |U_obs - nm/2|``.

    :param x: ``(n,)``. :param y: ``(m,)``.
    :raises ValueError: ``C(n + m, n) > max_exact`` (use :func:`permutation_test`'s Monte Carlo).
    """
    a = np.asarray(x, dtype=float).reshape(-1)
    b = np.asarray(y, dtype=float).reshape(-1)
    if math.comb(a.size + b.size, a.size) > max_exact:
        raise ValueError(f"C({a.size + b.size}, {a.size}) relabelings exceed max_exact={max_exact}")
    r = _midranks(np.concatenate([a, b]))
    return permutation_test([r[:a.size]], [r[a.size:]], aggregate_task_mean,
                            alternative=alternative, max_exact=max_exact).p_value
