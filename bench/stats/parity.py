"""Implementation parity: is ``ppo-bench`` the same algorithm as ``ppo-sb3``, env by env?

``bench`` pools an algorithm's implementations when it recommends by algorithm, which is honest
only where they behave alike. This module decides, for two labels on one env, between three
verdicts on a per-run metric (normalised sample-AUC or normalised final return, both on the
report's scale, 0 = random policy and 1 = threshold):

- **equivalent**: two one-sided tests (TOST; Schuirmann 1987, "A comparison of the two one-sided
  tests procedure and the power approach for assessing the equivalence of average
  bioavailability", J. Pharmacokinet. Biopharm. 15(6)) reject both ``mean_a - mean_b <= -δ`` and
  ``mean_a - mean_b >= +δ`` at level α, with Welch's standard error and degrees of freedom. That is
  the same as the (1 − 2α) Welch interval of the difference lying inside ``(-δ, +δ)``.
- **different**: not equivalent, and Welch's two-sample t-test rejects ``mean_a = mean_b`` at α
  (two-sided), with the difference's (1 − α) interval and Hedges' g.
- **inconclusive**: neither. The seeds per label that would give the TOST 80% power at the
  observed spread, if the true difference were 0, are given (normal approximation refined with t
  quantiles: ``n = 2 s² (t_{1-α} + t_{1-β/2})² / δ²`` per group, Chow, Shao & Wang 2008, *Sample
  Size Calculations in Clinical Research*, 2nd ed., §3.2, equivalence with θ = 0).

Precedence: a difference smaller than the margin that is nevertheless significant (a tight
interval that excludes 0 but lies inside ±δ) is **equivalent**: δ is the size below which the two
count as the same algorithm for the recommendation, which is what the verdict is for.

Everything here is pure: arrays in, dataclasses out. The t distribution is :mod:`bench.stats.distributions`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from bench.stats.survival import censored_at_budget, kaplan_meier_median

__all__ = ["ALPHA", "MARGIN", "POWER", "METRICS", "Comparison", "EnvParity", "compare", "parity",
           "seeds_for_equivalence", "welch", "implementation_pairs"]

#: Equivalence margin on the normalised scale (0 = random policy, 1 = threshold): 5% of the way.
MARGIN = 0.05
#: Level of every test (the TOST's two one-sided tests each, and the two-sided Welch test).
ALPHA = 0.05
#: Power the sample-size estimate aims at.
POWER = 0.80
#: The metrics a parity check compares: Scored column → its name in tables.
METRICS = {"auc_steps_norm": "sample-AUC", "final_norm": "final return"}

Verdict = Literal["equivalent", "different", "inconclusive"]


@dataclass(frozen=True)
class Comparison:
    """One metric, two labels, one env.

    :param diff: ``mean(a) - mean(b)``; ``ci``: its (1 − α) Welch interval (two-sided).
    :param p_diff: Welch's two-sided p-value for ``diff = 0``; ``p_equiv``: the TOST p-value
        (the larger of the two one-sided ones); ``nan`` where a test is undefined.
    :param g: Hedges' g (bias-corrected standardised difference), ``nan`` without spread.
    :param seeds_needed: runs per label for 80% TOST power at the observed spread (inconclusive only).
    """

    metric: str
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    diff: float
    ci: tuple[float, float]
    p_diff: float
    p_equiv: float
    g: float
    verdict: Verdict
    seeds_needed: int | None = None
    reason: str = ""


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """``(diff, se, df)``: the difference of means, Welch's standard error and Welch–Satterthwaite df.

    :param a: shape ``(n_a,)``, ``n_a >= 2``; ``b``: shape ``(n_b,)``, ``n_b >= 2``.
    ``df`` is ``inf`` when both variances are 0 (then ``se`` is 0 too).
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        return float(a.mean() - b.mean()), 0.0, math.inf
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return float(a.mean() - b.mean()), se, df


def _pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    return math.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2))


def seeds_for_equivalence(sd: float, margin: float = MARGIN, alpha: float = ALPHA, power: float = POWER) -> int:
    """Runs per label for a TOST at ``alpha`` to have ``power`` when the true difference is 0.

    ``n = 2 sd² (t_{1-α, 2n-2} + t_{1-β/2, 2n-2})² / margin²`` (β = 1 − power), solved by fixed-point
    iteration from the normal approximation; at least 2.
    """
    # Lazy: scipy.special loads only for a test or interval that needs it, so importing the statistics stays cheap.
    import bench.stats.distributions as dist

    if sd <= 0:
        return 2
    beta = 1.0 - power
    n = 2.0 * sd**2 * (dist.norm_ppf(1 - alpha) + dist.norm_ppf(1 - beta / 2)) ** 2 / margin**2
    for _ in range(50):
        df = max(2 * math.ceil(n) - 2, 1)
        new = 2.0 * sd**2 * (dist.t_ppf(1 - alpha, df) + dist.t_ppf(1 - beta / 2, df)) ** 2 / margin**2
        if math.ceil(new) == math.ceil(n):
            break
        n = new
    return max(2, math.ceil(n))


def compare(a: np.ndarray, b: np.ndarray, metric: str = "", *, margin: float = MARGIN, alpha: float = ALPHA,
            power: float = POWER) -> Comparison:
    """The verdict on one metric for runs ``a`` and ``b`` (shapes ``(n_a,)``, ``(n_b,)``); see the module doc."""
    # Lazy: scipy.special loads only for a test or interval that needs it, so importing the statistics stays cheap.
    import bench.stats.distributions as dist

    a, b = np.asarray(a, float), np.asarray(b, float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    base: dict[str, Any] = dict(metric=metric, n_a=int(a.size), n_b=int(b.size),
                                mean_a=float(a.mean()) if a.size else math.nan,
                                mean_b=float(b.mean()) if b.size else math.nan)
    if a.size < 2 or b.size < 2:
        return Comparison(**base, diff=base["mean_a"] - base["mean_b"], ci=(math.nan, math.nan), p_diff=math.nan,
                          p_equiv=math.nan, g=math.nan, verdict="inconclusive", seeds_needed=None,
                          reason="fewer than 2 runs of a label: no spread to test against")
    diff, se, df = welch(a, b)
    if se == 0.0:
        # Every run of both labels scored the same value each (CartPole's capped final return, say):
        # no test is needed, and none is defined; the two constants differ by |diff| exactly.
        same = abs(diff) < margin
        return Comparison(**base, diff=diff, ci=(diff, diff), p_diff=0.0 if diff else 1.0, p_equiv=0.0 if same else 1.0,
                          g=math.nan, verdict="equivalent" if same else "different",
                          reason="every run of each label scored the same value" + (
                              " (1, the cap: both reached the threshold, and the metric cannot tell them apart "
                              "above it)" if base["mean_a"] == base["mean_b"] == 1.0 else ""))
    t_crit = dist.t_ppf(1 - alpha / 2, df)
    ci = (diff - t_crit * se, diff + t_crit * se)
    p_diff = float(2 * dist.t_sf(abs(diff) / se, df))
    # TOST: H0a: diff <= -margin (rejected when diff is well above it), H0b: diff >= +margin.
    p_lower = float(dist.t_sf((diff + margin) / se, df))
    p_upper = float(dist.t_cdf((diff - margin) / se, df))
    p_equiv = max(p_lower, p_upper)
    sd = _pooled_sd(a, b)
    n = a.size + b.size
    g = diff / sd * (1 - 3 / (4 * n - 9)) if sd > 0 else math.nan  # Hedges 1981's small-sample correction
    if p_equiv < alpha:
        return Comparison(**base, diff=diff, ci=ci, p_diff=p_diff, p_equiv=p_equiv, g=g, verdict="equivalent",
                          reason=f"the {1 - 2 * alpha:.0%} interval of the difference lies within ±{margin:g}")
    if p_diff < alpha:
        return Comparison(**base, diff=diff, ci=ci, p_diff=p_diff, p_equiv=p_equiv, g=g, verdict="different",
                          reason=f"Welch's test rejects equal means at {alpha:g}")
    need = seeds_for_equivalence(sd, margin, alpha, power)
    return Comparison(**base, diff=diff, ci=ci, p_diff=p_diff, p_equiv=p_equiv, g=g, verdict="inconclusive",
                      seeds_needed=need, reason=f"neither test decides; about {need} runs per label would give the "
                                                f"equivalence test {power:.0%} power at this spread")


@dataclass
class EnvParity:
    """Two labels on one env: a :class:`Comparison` per metric, and what else tells them apart.

    :param success: label → fraction of runs that reached the threshold.
    :param median_steps: label → Kaplan–Meier median env steps to the threshold, unsolved runs censored
        at their last step (``nan`` when fewer than half reach it).
    :param collapsed: label → fraction of runs the collapse detector flagged, among the signatures
        it could check on every run of both labels, the same for both (``nan`` where it could check none);
        ``collapse_checks``: label → those signatures.
    """

    env: str
    label_a: str
    label_b: str
    comparisons: list[Comparison]
    success: dict[str, float] = field(default_factory=dict)
    median_steps: dict[str, float] = field(default_factory=dict)
    collapsed: dict[str, float] = field(default_factory=dict)
    collapse_checks: dict[str, list[str]] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        """The env's overall verdict: different if any metric is, equivalent if all are, else inconclusive."""
        vs = [c.verdict for c in self.comparisons]
        if "different" in vs:
            return "different"
        return "equivalent" if vs and all(v == "equivalent" for v in vs) else "inconclusive"


def parity(runs: Any, label_a: str, label_b: str, *, envs: list[str] | None = None, margin: float = MARGIN,
           alpha: float = ALPHA, flagged: set[tuple[str, str]] | None = None,
           checkable: dict[str, set[str]] | None = None) -> list[EnvParity]:
    """Per env where both labels have scored runs: their :class:`EnvParity`.

    :param runs: a :class:`bench.analysis.scoring.Scored` ``runs`` frame (one row per pooled done
        run at its env's budget, with ``env``, ``label``, ``key``, ``final_norm``, ``auc_steps_norm``,
        ``solved``, ``t_steps``, ``total_steps``).
    :param flagged: ``(key, signature)`` of every run the collapse detector flagged (``None``: not run).
    :param checkable: key → the signatures its diagnostics allow (:func:`bench.analysis.collapse.checkable`).
        Both labels' collapsed fractions count only the signatures every run of both could show, so an
        implementation that records no gradient norm is neither credited with "no spikes" nor set beside
        one whose spikes are counted.
    """
    r = runs[runs["final_norm"].notna() & runs["label"].isin([label_a, label_b])]
    have_a, have_b = set(r.loc[r["label"] == label_a, "env"]), set(r.loc[r["label"] == label_b, "env"])
    common = sorted(have_a & have_b)
    if envs is not None:
        common = [e for e in common if e in envs]
    out = []
    for env in common:
        ga, gb = r[(r["env"] == env) & (r["label"] == label_a)], r[(r["env"] == env) & (r["label"] == label_b)]
        comps = [compare(ga[col].to_numpy(float), gb[col].to_numpy(float), name, margin=margin, alpha=alpha)
                 for col, name in METRICS.items()]
        ep = EnvParity(env, label_a, label_b, comps)
        # Both labels' collapse fractions count the same signatures, those every run of either could show:
        # own A2C's gradient spikes beside SB3's log-std collapses alone would read as "own collapses, SB3
        # does not" when SB3 only does not record the norm (docs/parity.md, A2C on CartPole and HalfCheetah).
        both = [*ga["key"], *gb["key"]]
        kinds = set.intersection(*[(checkable or {}).get(k, set()) for k in both]) if both else set()
        for lab, g in ((label_a, ga), (label_b, gb)):
            solved = g["solved"].astype(bool).to_numpy()
            ep.success[lab] = float(solved.mean())
            # Kaplan–Meier: unsolved runs count as censored at the end of the budget, so a label that solves
            # less often is not credited with the speed of its few lucky runs.
            times = np.where(solved, g["t_steps"].to_numpy(float), g["total_steps"].to_numpy(float))
            ep.median_steps[lab] = kaplan_meier_median(censored_at_budget(times, solved), solved)
            if flagged is not None:
                ep.collapse_checks[lab] = sorted(kinds)
                hit = {k for k, kind in flagged if kind in kinds}
                ep.collapsed[lab] = float(g["key"].isin(hit).mean()) if kinds else math.nan
        out.append(ep)
    return out


def implementation_pairs(runs: Any) -> list[tuple[str, str, str]]:
    """``(algo, label_a, label_b)`` for every algorithm with runs under two or more labels of different
    implementations, pairs in label order (``ppo-bench`` before ``ppo-sb3``)."""
    r = runs[runs["final_norm"].notna()]
    out = []
    for algo, g in r.groupby("algo", sort=True):
        labels = sorted(g.drop_duplicates("label")[["label", "impl"]].itertuples(index=False))
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                if labels[i].impl != labels[j].impl:
                    out.append((str(algo), labels[i].label, labels[j].label))
    return out
