"""A profile's answer in three parts: what can still be best, what is ruled out, and the default (issue 63).

The statistics are :mod:`bench.stats.selection`'s pure functions; this module feeds them from the scored
runs. Labels (algorithm-implementation) are the unit: two implementations are not pooled, so no parity check
decides what is compared, and a copied label (the same computation under another name: identical returns on
every env and seed) is counted once, whatever its name, so that it moves nothing. A time measure compares each
pair of labels on the one machine they share most on each env (:meth:`Scored.pair`): runs on a machine that
only one side used never enter a time answer.

Every number of a row depends on the row's envs and the labels that ran all of them, except the default's
single best, which reads every env of the store (that is the point: a profile of few envs leans on the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.stats import selection
import bench.analysis.machines as machines
from bench.analysis.criteria import ALPHA, OFF_POLICY, Criterion
from bench.analysis.scores import Scored

__all__ = ["Selection", "Track", "select", "track_record"]


@dataclass(frozen=True)
class Selection:
    """One profile × priority's three parts.

    :param labels: the labels compared (each ran every env of the row), twins counted once under ``names``.
    :param candidates: labels that can still be best, by mean regret (least first).
    :param ruled_out: ``(label, p, behind)``: the adjusted p of "label is the best" (< α) and the label it is
        most clearly behind.
    :param regret: label → its mean shortfall to the per-env best over the row's envs, with its interval.
    :param default: the default and how it was chosen (:func:`bench.stats.selection.choose_default`).
    :param partial: labels that ran some but not all of the row's envs (not compared).
    :param twins: label → the other names of the same computation.
    :param parts: label → its ``(algorithm, implementation)``, for views that group labels by algorithm.
    """

    labels: tuple[str, ...]
    candidates: tuple[str, ...]
    ruled_out: tuple[tuple[str, float, str], ...]
    regret: dict[str, selection.Interval]
    default: selection.Choice | None
    partial: tuple[str, ...]
    twins: dict[str, tuple[str, ...]]
    parts: dict[str, tuple[str, str]]


@dataclass(frozen=True)
class Track:
    """Leave-one-env-out record of a row (ASlib's single best against virtual best, Bischl et al. 2016).

    For each env E of the row with ≥ 1 other env: the row is answered without E (and the single best is
    chosen without E), then read on E. ``covered``: E's best label was among the candidates; ``default``,
    ``single``: mean regret on E of the default and of the store's single best among the labels the row
    compares (the same menu; the oracle's regret is 0);
    ``gap_closed``: ``1 − default / single`` (NaN where the single best lost nothing)."""

    trials: int
    covered: int
    default: float
    single: float

    @property
    def gap_closed(self) -> float:
        return 1.0 - self.default / self.single if self.single > 0 else float("nan")


def _env_differences(scored: Scored, crit: Criterion, env: str) -> tuple[tuple[str, ...], np.ndarray]:
    """Every label with scores on ``env`` (twins once) and their ``(m, m)`` mean differences there, computed once."""
    def compute() -> tuple[tuple[str, ...], np.ndarray]:
        labels = list(_twin_groups(scored, _labels_on(scored, crit, [env])))
        if crit.is_time:  # each pair on the machine it shares most on the env (Scored.pair's rule)
            r = scored.runs
            r = r[(r["env"] == env) & r["final_norm"].notna() & r[crit.column].notna()]
            side = {lb: r[r["label"] == lb] for lb in labels}
            m = len(labels)
            d = np.full((m, m), np.nan)
            for i in range(m):
                d[i, i] = 0.0
                for j in range(i + 1, m):
                    xt, yt, _ = machines.one_machine(side[labels[i]], side[labels[j]], crit.column, [env])
                    if xt[0].size and yt[0].size:
                        d[i, j], d[j, i] = xt[0].mean() - yt[0].mean(), yt[0].mean() - xt[0].mean()
        else:
            s = np.array([t[0].mean() for t in (scored.tasks(lb, crit.column, [env]) for lb in labels)])
            d = s[:, None] - s[None, :]
        return tuple(labels), d
    return scored.once(("env differences", crit.column, env), compute)


def _labels_on(scored: Scored, crit: Criterion, envs: list[str]) -> list[str]:
    r = scored.runs
    names = sorted(lb for lb in r.loc[~r["algo"].isin(OFF_POLICY), "label"].unique())
    return [lb for lb in names if scored.covers(lb, crit.column, envs)]


#: What tells two runs of one env and seed apart: their final return alone does not (every CartPole run that
#: solves it ends at 500), their learning curve's area and steps to the threshold do.
_FINGERPRINT = ("final_return", "auc_steps_norm", "t_steps", "total_steps")


def _fingerprint(scored: Scored, label: str) -> frozenset:
    def compute() -> frozenset:
        r = scored.runs[scored.runs["label"] == label]
        values = zip(*(r[c].astype(float) for c in _FINGERPRINT))
        return frozenset(zip(r["env"], r["seed"], (tuple(None if v != v else v for v in vs) for vs in values)))
    return scored.once(("fingerprint", label), compute)


def _twin_groups(scored: Scored, labels: list[str]) -> dict[str, tuple[str, ...]]:
    """Label → the labels (itself first) whose runs have identical returns on every env and seed."""
    groups: dict[frozenset, list[str]] = {}
    for lb in labels:
        groups.setdefault(_fingerprint(scored, lb), []).append(lb)
    return {g[0]: tuple(g) for g in groups.values()}


def _store_regrets(scored: Scored, crit: Criterion) -> dict[str, dict[str, float]]:
    """env → label → regret on that env, over every env of the store with scores of ``crit``."""
    def compute() -> dict[str, dict[str, float]]:
        envs = sorted(scored.runs.loc[scored.runs[crit.column].notna(), "env"].unique())
        out = {}
        for e in envs:
            labels, d = _env_differences(scored, crit, e)
            if len(labels) >= 2:
                out[e] = dict(zip(labels, selection.regrets(d[None])[0]))
        return out
    return scored.once(("store regrets", crit.column), compute)


def _single_best_ranking(scored: Scored, crit: Criterion, without: str | None = None) -> dict[str, float]:
    """label → mean regret over the store's envs (but ``without``)."""
    per: dict[str, list[float]] = {}
    for e, regs in _store_regrets(scored, crit).items():
        if e != without:
            for lb, v in regs.items():
                if v == v:
                    per.setdefault(lb, []).append(v)
    return {lb: float(np.mean(v)) for lb, v in per.items()}


def select(scored: Scored, crit: Criterion, envs: list[str], *, without: str | None = None,
           alpha: float = ALPHA) -> Selection | None:
    """The three parts on ``envs`` (None where fewer than 2 labels ran all of them); ``without``: an env left
    out of the single best's ranking too (the leave-one-env-out record)."""
    every = _labels_on(scored, crit, envs)
    some = sorted({lb for e in envs for lb in _labels_on(scored, crit, [e])} - set(every))
    groups = _twin_groups(scored, every)
    labels = list(groups)
    if len(labels) < 2:
        return None
    index = {lb: i for i, lb in enumerate(labels)}
    D = np.full((len(envs), len(labels), len(labels)), np.nan)
    for k, e in enumerate(envs):
        on_e, d = _env_differences(scored, crit, e)
        pos = [on_e.index(lb) for lb in labels]
        D[k] = d[np.ix_(pos, pos)]
    off = ~np.eye(len(labels), dtype=bool)
    if np.isnan(D[:, off]).all():  # no pair compared on any env (a time measure with no shared machine)
        return None
    p = selection.best_p(D)
    R = selection.regrets(D)
    regret = {lb: selection.mean_interval(R[:, index[lb]]) for lb in labels}
    by_regret = sorted(labels, key=lambda lb: (regret[lb].point, lb))
    cands = tuple(lb for lb in by_regret if p[index[lb]] >= alpha)
    out = []
    for lb in by_regret:
        i = index[lb]
        if p[i] < alpha:
            behind = min((b for b in labels if b != lb), key=lambda b: (selection.pair_p(D[:, i, index[b]]), b))
            out.append((lb, float(p[i]), behind))
    store = _single_best_ranking(scored, crit, without)
    default = selection.choose_default(list(cands), store, {lb: R[:, index[lb]] for lb in cands}) if cands else None
    r = scored.runs
    parts = {lb: (str(a), str(i)) for lb, a, i in zip(r["label"], r["algo"], r["impl"]) if lb in index}
    return Selection(tuple(labels), cands, tuple(out), regret, default, tuple(some),
                     {k: v[1:] for k, v in groups.items() if len(v) > 1}, parts)


def track_record(scored: Scored, crit: Criterion, envs: list[str]) -> Track | None:
    """The row's leave-one-env-out record (:class:`Track`); None with fewer than 2 envs."""
    if len(envs) < 2:
        return None
    trials = covered = 0
    lost_default: list[float] = []
    lost_single: list[float] = []
    store = _store_regrets(scored, crit)
    for held in envs:
        sel = select(scored, crit, [e for e in envs if e != held], without=held)
        regs = store.get(held, {})
        if sel is None or sel.default is None or not regs:
            continue
        ran = [lb for lb in regs if regs[lb] == regs[lb]]
        pick = sel.default.label
        ranking = _single_best_ranking(scored, crit, held)
        # The same menu for both rules: the labels the row compares that ran on E.
        single = min((lb for lb in ran if lb in ranking and lb in sel.labels), key=lambda lb: (ranking[lb], lb),
                     default=None)
        if pick not in ran or single is None:
            continue
        trials += 1
        covered += int(any(regs.get(c) == 0.0 for c in sel.candidates))  # a candidate was E's best
        lost_default.append(regs[pick])
        lost_single.append(regs[single])
    if not trials:
        return None
    return Track(trials, covered, float(np.mean(lost_default)), float(np.mean(lost_single)))
