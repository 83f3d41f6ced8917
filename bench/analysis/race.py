"""A race on one env: which labels stop at each rung, and why. Pure functions over arrays, no I/O.

A race runs every label of a grid on one env with rungs keyed to the full budget (fractions of it, the last
one 1). At each rung the labels still in have run to that fraction; a label stops only when its seeds rule
it out against the rung's leader (:func:`race_step`): a one-sided Welch test of "its mean is below the
leader's", Holm-adjusted over the labels tested at that rung, with seeds as the unit on one env. Never for
ranking below a cut: a label the test cannot tell from the leader stays in, however low it ranks.

Across rungs the error may be spent (:func:`rung_alphas`): with ``equal`` or ``last-half`` each rung tests at
its share of ``alpha`` and the shares sum to ``alpha``, so by the union bound the chance that any true null is
rejected at any rung is at most ``alpha``, whatever the dependence between rungs; with ``none`` (the design
docs/race.md reports) each rung tests at ``alpha``, and that chance is at most ``alpha`` times the rungs. Either
way the null is about the score *at the rung*, not at the full budget; the replay on the shipped reference
(``scripts/race_replay.py``, docs/race.md) measures how often the pick is tied-best at the full budget.

Scores a rung can be decided on, from a run's prefix (:func:`prefix_scores`): ``held``, the run's sample score
(:func:`bench.stats.metrics.normalised_auc` over the whole budget) with its curve held at its last value
after the prefix, which is how the reference scores a run that ended early; ``so_far``, the area under the
curve up to the rung only; ``last``, the normalised running mean of the last ``window`` returns at the rung.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from bench.stats import distributions as dist
from bench.stats.generalise import holm
from bench.stats.metrics import normalised_auc, running_mean
from bench.stats.parity import welch
from bench.stats.aggregate import iqm

__all__ = ["Race", "RaceStep", "SCORES", "SPENDING", "Stop", "prefix_cpu", "prefix_scores", "race", "race_step",
           "rung_alphas", "spent", "welch_below"]

#: The rung scores :func:`prefix_scores` computes (see the module docstring).
SCORES = ("held", "so_far", "last")
#: How :func:`rung_alphas` shares ``alpha`` over the rungs.
SPENDING = ("none", "equal", "last-half")


@dataclass(frozen=True)
class Stop:
    """A label ruled out at a rung: its one-sided Welch p against the leader, and Holm's adjusted p."""

    label: str
    p: float
    p_adjusted: float


@dataclass(frozen=True)
class RaceStep:
    """One rung's decision: the ``leader`` (highest mean), the labels ``kept`` (the leader first), the labels
    ``stopped`` with why, and the level ``alpha`` the Holm-adjusted p-values were held to."""

    leader: str
    kept: tuple[str, ...]
    stopped: tuple[Stop, ...]
    alpha: float


def welch_below(x: np.ndarray, leader: np.ndarray) -> float:
    """One-sided Welch p-value of "mean of ``x`` is below the mean of ``leader``" (Welch 1947).

    :param x, leader: shape ``(n,)`` and ``(m,)``, one score per seed (NaN dropped).
    :returns: ``P(T <= t)`` on the Welch–Satterthwaite df. With fewer than 2 seeds on either side nothing can be
        ruled out: 1. With no spread on either side (e.g. every seed capped at 1) the difference is exact: 0
        when ``x`` is lower, else 1.
    """
    x, leader = np.asarray(x, float), np.asarray(leader, float)
    x, leader = x[~np.isnan(x)], leader[~np.isnan(leader)]
    if x.size < 2 or leader.size < 2:
        return 1.0
    diff, se, df = welch(x, leader)
    if se == 0.0:
        return 0.0 if diff < 0 else 1.0
    return float(dist.t_cdf(diff / se, df))


def race_step(scores: Mapping[str, np.ndarray], *, alpha: float, margin: float = 0.0) -> RaceStep:
    """Which labels stop at one rung.

    :param scores: label → its seeds' scores at this rung, shape ``(n_seeds,)`` (seed counts may differ; NaN is a
        seed with no score yet and is left out).
    :param alpha: this rung's level (:func:`rung_alphas`).
    :param margin: how far behind the leader a label must be shown to be: the test is of "its mean plus
        ``margin`` is below the leader's" (0: behind at all).
    :returns: the leader (highest mean; ties: the first label given), and each other label kept or stopped: stopped
        when its Holm-adjusted p (over the other labels) is below ``alpha``.
    """
    if not scores:
        raise ValueError("race_step needs at least one label")
    means = {k: float(np.nanmean(v)) if np.any(~np.isnan(np.asarray(v, float))) else -np.inf
             for k, v in scores.items()}
    leader = max(means, key=lambda k: means[k])  # max keeps the first of equal values
    others = [k for k in scores if k != leader]
    p = [welch_below(np.asarray(scores[k], float) + margin, scores[leader]) for k in others]
    adj = holm(p)
    stopped = tuple(Stop(k, pk, float(a)) for k, pk, a in zip(others, p, adj) if a is not None and a < alpha)
    out = {s.label for s in stopped}
    return RaceStep(leader, (leader, *[k for k in others if k not in out]), stopped, alpha)


def rung_alphas(alpha: float, rungs: int, spending: str = "equal") -> tuple[float, ...]:
    """Each rung's level.

    ``none``: ``alpha`` at every rung (no control across rungs: the issue's naive race). ``equal``: ``alpha /
    rungs`` each (Bonferroni over rungs). ``last-half``: half of ``alpha`` at the last rung, where the pick is
    made on the score itself, the other half shared equally by the earlier rungs. The shares of ``equal`` and
    ``last-half`` sum to ``alpha``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if rungs < 1:
        raise ValueError(f"a race needs at least one rung, got {rungs}")
    if spending == "none":
        return (alpha,) * rungs
    if spending == "equal" or rungs == 1:
        return (alpha / rungs,) * rungs
    if spending == "last-half":
        return (alpha / 2 / (rungs - 1),) * (rungs - 1) + (alpha / 2,)
    raise ValueError(f"spending must be one of {', '.join(SPENDING)}, got {spending!r}")


@dataclass(frozen=True)
class Race:
    """A whole race: each rung's :class:`RaceStep`, the ``pick`` (the highest IQM over seeds among the labels
    still in at the last rung, as the reference ranks labels on one env), and for each label the index of the
    last rung it ran to (``reached``) and how many seeds it ran at each rung it ran to (``seeds``)."""

    steps: tuple[RaceStep, ...]
    pick: str
    reached: dict[str, int]
    seeds: dict[str, tuple[int, ...]]

    @property
    def kept(self) -> tuple[str, ...]:
        """The labels still in at the end: the race's tied set."""
        return self.steps[-1].kept


def race(scores: Mapping[str, np.ndarray], alphas: Sequence[float], *, first_seeds: int | None = None,
         until_one: bool = False, margins: Sequence[float] | None = None) -> Race:
    """A race decided rung by rung with :func:`race_step`.

    :param scores: label → scores shape ``(n_rungs, n_seeds)``: row ``r`` is each seed's score at rung ``r``.
    :param alphas: each rung's level, shape ``(n_rungs,)`` (:func:`rung_alphas`).
    :param first_seeds: run only the first ``first_seeds`` seeds of each label before the last rung; the labels
        still in at the last rung run all their seeds (``None``: all seeds at every rung).
    :param until_one: end the race at the rung where one label is left (it is the pick; no later rung is run),
        instead of running it on to the full budget.
    :param margins: each rung's ``margin`` (:func:`race_step`), shape ``(n_rungs,)``; ``None``: 0 at every rung.
    """
    n = len(alphas)
    if not scores:
        raise ValueError("race needs at least one label")
    for k, s in scores.items():
        if np.ndim(s) != 2 or np.shape(s)[0] != n:
            raise ValueError(f"scores of {k!r} must have shape (n_rungs={n}, n_seeds), got {np.shape(s)}")
    alive = list(scores)
    reached = {k: 0 for k in scores}
    seeds: dict[str, list[int]] = {k: [] for k in scores}
    steps = []
    for r, a in enumerate(alphas):
        last = r == n - 1
        now = {}
        for k in alive:
            s = np.asarray(scores[k], float)[r]
            now[k] = s if last or first_seeds is None else s[:first_seeds]
            reached[k] = r
            seeds[k].append(int(now[k].size))
        step = race_step(now, alpha=a, margin=0.0 if margins is None else float(margins[r]))
        steps.append(step)
        alive = list(step.kept)
        if until_one and len(alive) == 1:
            break
    final = {k: np.asarray(scores[k], float)[len(steps) - 1] for k in alive}
    pick = max(alive, key=lambda k: float(iqm(final[k][~np.isnan(final[k])])) if np.any(~np.isnan(final[k]))
               else -np.inf)
    return Race(tuple(steps), pick, reached, {k: tuple(v) for k, v in seeds.items()})


def prefix_scores(steps: np.ndarray, returns: np.ndarray, window: int, *, budget: float, fractions: Sequence[float],
                  low: float, high: float, kind: str = "held") -> np.ndarray:
    """One run's score at each rung, from the episodes it had finished by then.

    :param steps, returns: shape ``(n_episodes,)``, the run's episodes in order (``steps`` non-decreasing).
    :param budget: the env's full budget in env steps; rung ``r`` is at ``fractions[r] * budget``.
    :param low, high: the env's normalisation anchors (0 = random policy, 1 = threshold).
    :param kind: one of :data:`SCORES` (module docstring). At fraction 1 ``held`` and ``so_far`` are the run's
        sample score (``auc_steps_norm``).
    :returns: shape ``(len(fractions),)``; NaN at a rung before the run's first episode ended.
    """
    if kind not in SCORES:
        raise ValueError(f"kind must be one of {', '.join(SCORES)}, got {kind!r}")
    steps, returns = np.asarray(steps, float), np.asarray(returns, float)
    out = np.full(len(fractions), np.nan)
    for r, f in enumerate(fractions):
        upto = f * budget
        # The last rung is the whole run, every episode (a run may end a rollout past its budget).
        i = steps.size if f >= 1 else int(np.searchsorted(steps, upto, side="right"))
        if i == 0:
            continue
        if kind == "last":
            out[r] = min((running_mean(returns[:i], window)[-1] - low) / (high - low), 1.0)
        else:
            out[r] = normalised_auc(steps[:i], returns[:i], window, upto=budget if kind == "held" else upto,
                                    low=low, high=high)
    return out


def prefix_cpu(steps: np.ndarray, cpu: np.ndarray, total: float, *, budget: float,
               fractions: Sequence[float]) -> np.ndarray:
    """One run's CPU seconds to each rung: its per-episode CPU stamps interpolated at the rung's step (from 0 at
    step 0), and at fraction 1 the run's whole CPU ``total`` (what it cost: set-up and the rollout past its last
    episode included).

    :param steps, cpu: shape ``(n_episodes,)``, each episode's end step and the run's CPU seconds then.
    :returns: shape ``(len(fractions),)``.
    """
    steps, cpu = np.asarray(steps, float), np.asarray(cpu, float)
    x = np.r_[0.0, steps, max(steps[-1] if steps.size else 0.0, budget)]
    y = np.r_[0.0, cpu, total]
    return np.array([total if f >= 1 else float(np.interp(f * budget, x, y)) for f in fractions])


def spent(result: Race, cpu: Mapping[str, np.ndarray]) -> float:
    """The CPU seconds a race ran: each label's seeds to the last rung the label reached (a rung continues the
    rung before it, so a seed's cost is its prefix to the last rung it ran to; a seed first run at the last rung,
    with ``first_seeds``, runs from nothing to there, the same prefix).

    :param cpu: label → ``(n_rungs, n_seeds)`` CPU seconds of each seed's prefix to each rung (:func:`prefix_cpu`).
    """
    return float(sum(np.asarray(cpu[k], float)[r, :result.seeds[k][-1]].sum() for k, r in result.reached.items()))
