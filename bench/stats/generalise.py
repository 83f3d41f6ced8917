"""Answers about the *next* env of a kind: the env is the unit of generalisation (issue 40).

``bench recommend`` answers per problem profile ("discrete · vector · dense"), and a user reads the
answer as a claim about their own env of that kind. A stratified permutation test treats the
profile's envs as fixed: it asks "did A beat B on these envs". When two algorithms are equal on
average over envs but differ env by env (an env × algorithm interaction), that test names a winner
far more often than 5% of the time (:mod:`bench.stats.simulation` measures how often).

So a profile's answer is a test over per-env effects, every env weighted equally (:func:`equal_weights`, a t
on k − 1 degrees of freedom; issue 63: inverse-variance weights let an env whose runs all scored the same carry
the profile). The random-effects meta-analysis below (:func:`hksj`) was the rule before, and is kept for the
simulation that compares the two (:mod:`bench.stats.simulation`):

- each env gives one effect, the difference of the two sides' mean normalised scores over runs,
  with its standard error from the runs (Welch: ``sqrt(s_x²/n_x + s_y²/n_y)``);
- the between-env variance τ² by DerSimonian and Laird (1986), the mean effect by inverse-variance
  weights ``1 / (se² + τ²)``;
- its standard error by Hartung–Knapp–Sidik–Jonkman (Hartung and Knapp 2001; Sidik and Jonkman
  2002), with a t distribution on k − 1 degrees of freedom, and never below the DerSimonian–Laird
  standard error (the "ad hoc" variance correction of Knapp and Hartung 2003, discussed by
  Röver, Knapp and Friede 2015, BMC Med Res Methodol 15:99): with few envs whose effects happen to
  agree, plain HKSJ can be narrower than the fixed-effect interval. IntHout, Ioannidis and Borm
  (2014, BMC Med Res Methodol 14:25) show HKSJ keeps its nominal error rate at small k where
  DerSimonian–Laird alone does not.

Profiles with fewer envs than :data:`MIN_ENVS_GENERALISE` get no claim about the next env: their
answer says what was measured, naming the envs ("on CartPole-v1, LunarLander-v3: ppo"), from the
stratified permutation test over those envs. Which test an answer uses is fixed by its env count
before any score is read, so each answer has one headline test, and :func:`holm` adjusts those
across the answers of one call.

Everything here is pure: arrays in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["MIN_ENVS_GENERALISE", "SE_FLOOR", "Meta", "directions", "env_effects", "equal_weights", "format_p", "hksj",
           "holm"]

#: Least envs for a claim about the next env of a profile (the random-effects test). Fewer envs give an
#: answer about the envs measured only. From the simulation (:mod:`bench.stats.simulation`,
#: docs/statistics.md "How many envs"): at 2 envs the test keeps its false-winner rate at 5% under an
#: env × algorithm interaction of sd 0.05-0.1, but with t on 1 degree of freedom it has little power (≤ 0.26
#: at a difference of 0.2) at the effects the reference shows; from 3 envs it has more.
MIN_ENVS_GENERALISE = 3
#: Least standard error of one env's effect: two sides whose runs all scored the same (a capped score,
#: every run solved) have a sample variance of 0, and an env must not get infinite weight from that.
SE_FLOOR = 1e-3


def env_effects(x: Sequence[np.ndarray], y: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-env effects and their standard errors.

    :param x, y: per env, the two sides' per-run scores, ``k`` arrays each of shape ``(n_i,)``, ``n_i ≥ 1``.
    :returns: ``(effects, ses)``, shapes ``(k,)``: ``mean(x_i) − mean(y_i)`` and the Welch standard error
        ``sqrt(var(x_i)/n_x + var(y_i)/n_y)`` (sample variances; a side of one run contributes none),
        never below :data:`SE_FLOOR`.
    """
    eff, se = [], []
    for a, b in zip(x, y):
        a, b = np.asarray(a, float), np.asarray(b, float)
        eff.append(a.mean() - b.mean())
        v = (a.var(ddof=1) / a.size if a.size > 1 else 0.0) + (b.var(ddof=1) / b.size if b.size > 1 else 0.0)
        se.append(max(float(np.sqrt(v)), SE_FLOOR))
    return np.array(eff, float), np.array(se, float)


@dataclass(frozen=True)
class Meta:
    """A random-effects estimate of the mean effect over envs.

    ``mu`` the mean effect, ``se`` its (HKSJ) standard error, ``lo``/``hi`` its 95% interval,
    ``tau`` the between-env standard deviation (DerSimonian–Laird), ``k`` the envs, ``p`` the two-sided
    p-value of "mean effect 0" (t on ``k − 1`` degrees of freedom; ``nan`` for one env).
    """

    mu: float
    se: float
    lo: float
    hi: float
    tau: float
    k: int
    p: float


def hksj(effects: np.ndarray, ses: np.ndarray, level: float = 0.95) -> Meta:
    """Random-effects meta-analysis with the HKSJ adjustment (see the module docstring).

    :param effects, ses: shape ``(k,)``, per-env effects and their standard errors (all > 0).
    """
    # Lazy: scipy.special loads only for a test or interval that needs it, so importing the statistics stays cheap.
    import bench.stats.distributions as dist

    y, s2 = np.asarray(effects, float), np.asarray(ses, float) ** 2
    k = y.size
    if k < 2:
        mu = float(y[0]) if k else float("nan")
        return Meta(mu, float("nan"), float("nan"), float("nan"), float("nan"), k, float("nan"))
    w = 1.0 / s2
    fixed = np.sum(w * y) / w.sum()
    q = float(np.sum(w * (y - fixed) ** 2))
    tau2 = max(0.0, (q - (k - 1)) / (w.sum() - np.sum(w**2) / w.sum()))
    wr = 1.0 / (s2 + tau2)
    mu = float(np.sum(wr * y) / wr.sum())
    # HKSJ's scaled variance, never below the DerSimonian–Laird one (Knapp and Hartung 2003).
    scale = max(1.0, float(np.sum(wr * (y - mu) ** 2)) / (k - 1))
    se = float(np.sqrt(scale / wr.sum()))
    df = k - 1
    t = mu / se
    p = float(2 * dist.t_sf(abs(t), df))
    half = float(dist.t_ppf(0.5 + level / 2, df)) * se
    return Meta(mu, se, mu - half, mu + half, float(np.sqrt(tau2)), k, p)


def equal_weights(effects: np.ndarray, level: float = 0.95) -> Meta:
    """The mean effect over envs with every env weighted equally: Student's t on ``k − 1`` degrees of freedom
    over the per-env effects (shape ``(k,)``), the form HKSJ takes when all weights are equal.

    Inverse-variance weights let one env carry a profile: where every run of both sides scores the same (an env
    that no algorithm learns stays at the random score), its standard error sits at :data:`SE_FLOOR` and its
    weight swamps every other env's (FetchReach-v4 took 100% of continuous · vector · sparse's weight, issue 63).
    The answer is about the next env of the kind, where every env counts the same, as the rankings count them.
    ``tau`` is the standard deviation of the per-env effects (between-env spread plus each env's noise).
    """
    import bench.stats.distributions as dist  # lazy, as in hksj: scipy.special only where a test needs it

    y = np.asarray(effects, float)
    k = y.size
    if k < 2:
        mu = float(y[0]) if k else float("nan")
        return Meta(mu, float("nan"), float("nan"), float("nan"), float("nan"), k, float("nan"))
    mu, sd = float(y.mean()), float(y.std(ddof=1))
    se = sd / np.sqrt(k)
    if se == 0.0:  # every env the same effect: no spread to test against
        p = 1.0 if mu == 0.0 else 0.0
        return Meta(mu, 0.0, mu, mu, 0.0, k, p)
    df = k - 1
    p = float(2 * dist.t_sf(abs(mu / se), df))
    half = float(dist.t_ppf(0.5 + level / 2, df)) * se
    return Meta(mu, float(se), mu - half, mu + half, sd, k, p)


def holm(p: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (Holm 1979), for the headline tests of one call; ``None`` stays
    ``None`` and is not counted. Controls the family-wise error rate at any dependence between the tests.

    :param p: shape ``(m,)``. :returns: shape ``(m,)``, each ``min(1, max over j ≤ rank of (m − j + 1) p_(j))``.
    """
    idx = [i for i, v in enumerate(p) if v is not None and v == v]
    order = sorted(idx, key=lambda i: (p[i], i))
    m = len(order)
    out: list[float | None] = [None if v is None or v != v else float(v) for v in p]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p[i])))  # type: ignore[arg-type]
        out[i] = running
    return out


def directions(effects: Sequence[float]) -> str:
    """The sign of each env's effect, ``"+ + − +"`` (``0`` where exactly none), in the order given."""
    return " ".join("+" if e > 0 else "−" if e < 0 else "0" for e in effects)


def format_p(p: float | None, floor: float | None = None) -> str:
    """A p-value as printed: ``"—"`` without one; ``"< 5e-05"`` at or below ``floor`` (the least p the
    test can give, a Monte Carlo test's ``1 / (draws + 1)``; never printed as if measured); else 2
    significant figures."""
    if p is None or p != p:
        return "—"
    if floor is not None and p <= floor * (1 + 1e-9):
        return f"< {floor:.0e}"
    return f"{p:.2g}"
