"""Claims from the literature, checked against the runs of the suites written to test them.

A suite in ``suites/claims/`` carries a ``claim:`` block: the claim in one line, its
source, and one or more expectations, each ``A > B on MEASURE`` (A and B being
algorithms, their implementations pooled, or labels). For each expectation the
runs of that suite give:

- the effect: the difference of the two aggregates (mean over envs of each env's
  IQM of the per-run measure), with a 95% stratified bootstrap interval when both
  sides have at least :data:`bench.stats.aggregate.MIN_CI_RUNS` runs on every env;
- a two-sided stratified permutation test of "no difference", at the report's level;
- the same per env (each env's IQM difference and its own permutation test), because an
  aggregate can hide effects of opposite signs: TRPO ahead on one env and behind on two
  averages to "no difference", and the stratified test's null spread then includes those
  effects, so it is conservative. The per-env tests are shown, not used for the verdict.

An expectation **holds** when the test rejects in the expected direction with at
least :data:`~bench.analysis.scoring.MIN_SEEDS` runs per side and env and the effect's
interval excludes zero on that side, **does not hold** when both say the other
direction, and is **not settled** otherwise (no runs, too few, no difference
detectable, or the test and the interval disagree: :func:`verdict`).

Further rules (issue 40):

- **Depends on the env.** A directional expectation whose per-env effects disagree significantly
  (Cochran's Q of the per-env mean differences rejects homogeneity at :data:`~bench.analysis.scoring.ALPHA`
  and some envs are significantly ahead in each direction, their per-env p Holm-adjusted over the claim's envs) is **depends on the env**, whatever the
  aggregate says: no one direction describes the next env.
- **Equivalence** (``A ≈ B``): two one-sided tests per env within ±:data:`EQUIVALENCE_MARGIN`. Holds when
  every env is equivalent; does not hold when some env is shown *outside* the margin (a one-sided test
  rejects ``|A − B| ≤ margin``); otherwise not settled: a difference that is significant but inside the
  margin settles nothing.
- **Deterministic measures** (:data:`DETERMINISTIC`, model memory): the same for every seed, so compared
  directly, without a p-value: holds when A's value is below (or above) B's on every env.
- **Time** (CPU seconds, time efficiency) is compared on each env's one shared machine with quiet cores
  only (:func:`bench.analysis.machines.one_machine`); where runs stopped at an equal CPU budget, no
  measure gets a verdict across machines (:func:`_equal_compute_across_machines`).
- **Scope.** Each verdict states the budget per env, the seeds and the implementations it rests on, and,
  where a side pools implementations, each implementation's effect, since own TRPO and sb3-contrib's can
  differ as much as TRPO and PPO do.

A claim holds when all its expectations hold, does not hold when any does not, depends on the env when
any does (and none fails), and is not settled otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bench.stats import generalise, permutation, aggregate as stats
import bench.analysis.machines as machines
import bench.analysis.scoring as scoring
from bench.analysis.readmodel import AnchorSource, read_model

#: Expectation measure (as a suite writes it) → the per-run column it compares.
MEASURES: dict[str, str] = {
    "sample efficiency": "auc_steps_norm",
    "time efficiency": "auc_time_norm",
    "final performance": "final_norm",
    "success rate": "solved_f",
    "final return": "final_return",
    "CPU seconds per million steps": "cpu_per_msteps",
    "gradient noise": "grad_noise",
    "model memory": "model_bytes",
    "exact match": "exact_match",
    "reward hacking": "hacking",
}
#: The language-model measures read the last updates of a run: how many.
LAST_UPDATES = 5
HOLDS, FAILS, OPEN, DEPENDS = "holds", "does not hold", "not settled", "depends on the env"
#: Measures that are the same for every seed of a configuration: compared without a p-value.
DETERMINISTIC = frozenset({"model_bytes"})


@dataclass
class Check:
    """One expectation's verdict: ``effect`` is aggregate(A) − aggregate(B) with its interval (``kind`` as in stats)."""

    line: str
    verdict: str
    effect: float = float("nan")
    lo: float = float("nan")
    hi: float = float("nan")
    kind: str = "none"
    p_value: float | None = None
    runs: str = ""
    why: str = ""
    #: Per env: ``(env, IQM(A) − IQM(B), two-sided permutation p)``, where both sides have runs there.
    per_env: list[tuple[str, float, float]] = field(default_factory=list)
    #: What the verdict rests on: budget per env, seeds, implementations (and their own effects).
    scope: str = ""
    #: Cochran's Q p-value of homogeneity of the per-env effects (directional, ≥ 2 envs).
    p_heterogeneity: float | None = None
    #: The least p ``p_value``'s Monte Carlo test can give (``1 / (draws + 1)``); ``None`` for an exact test.
    #: At the floor the p is printed as ``< floor``, never as if measured.
    p_floor: float | None = None
    #: The same for each entry of ``per_env``, in its order.
    per_env_floors: list[float | None] = field(default_factory=list)


@dataclass
class ClaimResult:
    suite: str
    text: str
    source: str | None
    verdict: str
    checks: list[Check] = field(default_factory=list)
    envs: list[str] = field(default_factory=list)


#: The diagnostics :func:`measures` reads (a claim suite's other diagnostics are left unread).
MEASURED_DIAGNOSTICS = ("grad/noise_ratio", *scoring.SEQUENCE_DIAGNOSTICS)


def measures(scored: scoring.Scored, diagnostics: pd.DataFrame) -> pd.DataFrame:
    """The scored runs with the claim-only measures added: ``cpu_per_msteps`` (training CPU seconds per
    million env steps) and ``grad_noise`` (the run's mean ``grad/noise_ratio``, weighted by the updates
    each stored row stands for; NaN where the run did not record it)."""
    r = scored.runs.copy()
    r["cpu_per_msteps"] = r["cpu_s"].astype(float) / r["total_steps"].astype(float) * 1e6
    d = diagnostics[diagnostics["name"] == "grad/noise_ratio"]
    if len(d):
        w = d["n"].fillna(1).astype(float) if "n" in d else pd.Series(1.0, index=d.index)
        v = d["value"].astype(float)
        ok = v.notna()
        mean = (v[ok] * w[ok]).groupby(d.loc[ok, "key"]).sum() / w[ok].groupby(d.loc[ok, "key"]).sum()
        r["grad_noise"] = r["key"].map(mean)
    else:
        r["grad_noise"] = np.nan
    # Bytes of every model the run held (trained, frozen copies, reward models, optimiser state).
    r["model_bytes"] = [float((m or {}).get("model_memory", {}).get("total_bytes", np.nan)) if isinstance(m, dict)
                        else np.nan for m in r["meta"]]
    r["exact_match"] = r["key"].map(_last_mean(diagnostics, "seq/exact_match"))
    # Split the scores by run once: filtering the whole frame per run is quadratic (565 runs × 1.4M rows
    # of the shipped reference cost 14 s of a report).
    scores = diagnostics[diagnostics["name"].isin(("seq/proxy_score", "seq/true_score"))]
    by_run = dict(tuple(scores.groupby("key", sort=False)))
    # A run with no scores (every run but the learned-reward task's) has no gap: NaN, without a frame to filter.
    r["hacking"] = [_gap_growth(by_run[k], e) if k in by_run else float("nan") for k, e in zip(r["key"], r["env"])]
    return r


def _series(diagnostics: pd.DataFrame, name: str) -> np.ndarray:
    """One run's ``name`` values in step order (``diagnostics``: that run's rows)."""
    d = diagnostics[diagnostics["name"] == name]
    return d.sort_values("step", kind="stable")["value"].to_numpy(float)


def _last_mean(diagnostics: pd.DataFrame, name: str) -> dict[str, float]:
    """Run key → mean of ``name`` over its last :data:`LAST_UPDATES` recorded updates."""
    d = diagnostics[diagnostics["name"] == name].sort_values(["key", "step"])
    return {k: float(g["value"].to_numpy(float)[-LAST_UPDATES:].mean()) for k, g in d.groupby("key", sort=False)}


def _gap_growth(diagnostics: pd.DataFrame, env: str) -> float:
    """Reward hacking in one run of the preference task (``diagnostics``: that run's rows): the growth
    of ``proxy − true`` (the true score standardised on the reward model's comparison responses, the
    proxy's own scale) from the first 3 updates to the last :data:`LAST_UPDATES`; NaN where the run
    recorded no proxy score."""
    proxy, true = _series(diagnostics, "seq/proxy_score"), _series(diagnostics, "seq/true_score")
    n = min(proxy.size, true.size)
    if n < 3 + LAST_UPDATES:
        return float("nan")
    from bench.envs.registry import parse_env_key
    from bench.envs.tokens import true_score_scale

    kw = parse_env_key(env)[2]
    mu, sd = true_score_scale(kw.get("length", 8), kw.get("pairs", 2000), kw.get("noise", 0.25), kw.get("rm_seed", 0))
    gap = proxy[:n] - (true[:n] - mu) / sd
    return float(gap[-LAST_UPDATES:].mean() - gap[:3].mean())


def _side(runs: pd.DataFrame, name: str, col: str) -> pd.DataFrame:
    """The runs of a label, or of an algorithm (its labels pooled), that have ``col``."""
    by = "label" if name in set(runs["label"]) else "algo"
    return runs[(runs[by] == name) & runs[col].notna()]


def _tasks(runs: pd.DataFrame, name: str, col: str, envs: list[str]) -> list[np.ndarray]:
    mine = _side(runs, name, col)
    return [mine.loc[mine["env"] == e, col].to_numpy(float) for e in envs]


def _pair(runs: pd.DataFrame, a: str, b: str, col: str, envs: list[str]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per env, the runs of ``a`` and ``b`` a check compares: all, or for a time measure each env's one shared
    machine on quiet cores (:func:`bench.analysis.machines.one_machine`)."""
    if col not in machines.TIME_COLUMNS:
        return _tasks(runs, a, col, envs), _tasks(runs, b, col, envs)
    xt, yt, _ = machines.one_machine(_side(runs, a, col), _side(runs, b, col), col, envs)
    return xt, yt


def _difference(x: list[np.ndarray], y: list[np.ndarray], n_boot: int) -> tuple[float, float, float]:
    """aggregate(x) − aggregate(y) and its 95% stratified bootstrap interval (each side resampled within envs)."""
    agg = stats.aggregate_task_mean_iqm
    point = float(agg(x) - agg(y))
    rx = stats.stratified_resample(x, n_boot, rng=1)
    ry = stats.stratified_resample(y, n_boot, rng=2)
    lo, hi = stats.percentile_interval(np.asarray(agg(rx)) - np.asarray(agg(ry)))
    return point, float(lo), float(hi)


def _scope(runs: pd.DataFrame, a: str, b: str, col: str, envs: list[str], x: list[np.ndarray],
           y: list[np.ndarray]) -> str:
    """What a verdict rests on: each env's budget, the runs per side, the implementations, and where a side
    pools several, each implementation's own effect against the other side."""
    budgets = []
    for e in envs if {"timesteps", "meta", "cpu_s"} <= set(runs.columns) else []:
        r = runs[runs["env"] == e]
        capped = [m.get("stopped_by") == "cpu_seconds" for m in r["meta"] if isinstance(m, dict)]
        cpu = r["cpu_s"].astype(float).max() if any(capped) else None
        budgets.append(f"{e} {int(r['timesteps'].max()):,} steps" + (f" or ≈{cpu / 60:.0f} CPU minutes" if cpu else ""))
    labels = {n: sorted(_side(runs, n, col)["label"].unique()) for n in (a, b)}
    out = (f"budget: {'; '.join(budgets) or '—'}; runs per env: {a} {'/'.join(str(t.size) for t in x)}, {b} "
           f"{'/'.join(str(t.size) for t in y)}; implementations: {a} = {', '.join(labels[a]) or '—'}, "
           f"{b} = {', '.join(labels[b]) or '—'}")
    agg = stats.aggregate_task_mean_iqm
    per_impl = []
    for side, other in ((a, b), (b, a)):
        if len(labels[side]) < 2:
            continue
        yo = _tasks(runs, other, col, envs)
        for lb in labels[side]:
            xl = _tasks(runs, lb, col, envs)
            if all(t.size for t in xl) and all(t.size for t in yo):
                per_impl.append(f"{lb} − {other} = {float(agg(xl) - agg(yo)):+.3g}")
        firsts = [_tasks(runs, lb, col, envs) for lb in labels[side][:2]]
        if all(t.size for f in firsts for t in f):
            per_impl.append(f"{labels[side][0]} − {labels[side][1]} = {float(agg(firsts[0]) - agg(firsts[1])):+.3g}")
    if per_impl:
        out += "; by implementation: " + ", ".join(per_impl)
    return out


def significantly_ahead(per_env: list[tuple[str, float, float]]) -> set[float]:
    """The directions (+1, −1) of the per-env effects ``(env, difference, p)`` that are significant once their p
    are Holm-adjusted over the claim's envs: a claim over k envs tests k of them, so "ahead on some env in each
    direction" is a family of k tests (issue 63)."""
    adjusted = generalise.holm([pv for _, _, pv in per_env])
    return {float(np.sign(d)) for (_, d, _), a in zip(per_env, adjusted) if a is not None and a < scoring.ALPHA and d != 0}


def _heterogeneity(x: list[np.ndarray], y: list[np.ndarray]) -> float:
    """Cochran's Q test of equal per-env mean differences (χ² on k − 1 df): its p-value; NaN below 2 envs."""
    from bench.stats import distributions as dist

    eff, se = generalise.env_effects(x, y)
    if eff.size < 2:
        return float("nan")
    w = 1.0 / se**2
    q = float(np.sum(w * (eff - np.sum(w * eff) / w.sum()) ** 2))
    return float(dist.chi2_sf(q, eff.size - 1))


def check(runs: pd.DataFrame, expectation: dict[str, str], envs: list[str], *, n_boot: int = scoring.N_BOOT) -> Check:
    """The verdict on one expectation ``{a, op, b, measure}`` (``A > B on MEASURE``) from ``runs``
    (see the module docstring)."""
    a, sign, b, measure = (expectation[k] for k in ("a", "op", "b", "measure"))
    line = f"{a} {sign} {b} on {measure}"
    col = MEASURES[measure]
    x, y = _pair(runs, a, b, col, envs)
    counts = [t.size for t in x], [t.size for t in y]
    runs_txt = f"{a} {'/'.join(map(str, counts[0]))} vs {b} {'/'.join(map(str, counts[1]))} runs per env"
    if col in machines.TIME_COLUMNS:
        runs_txt += " (time: each env's one shared machine, quiet cores only)"
    if not envs or min(counts[0] + counts[1]) == 0:
        why = "no runs of one side on some env (run the suite)"
        if col in machines.TIME_COLUMNS and envs and all(_tasks(runs, n, col, envs)[i].size for n in (a, b)
                                                         for i in range(len(envs))):
            why = "on some env the two sides share no known machine on quiet cores (bench run --remeasure contended)"
        return Check(line, OPEN, runs=runs_txt, why=why)
    scope = _scope(runs, a, b, col, envs, x, y)
    if sign == "≈":
        out = _equivalence(line, x, y, envs, runs_txt)
        out.scope = scope
        return out
    if col in DETERMINISTIC:
        return _deterministic(line, x, y, envs, runs_txt, 1.0 if sign == ">" else -1.0, scope)
    test = permutation.permutation_test(x, y, stats.aggregate_task_mean_iqm, alternative="two-sided", rng=0)
    env_tests = [permutation.permutation_test([xa], [yb], stats.aggregate_task_mean_iqm, alternative="two-sided", rng=0)
                 for xa, yb in zip(x, y)] if len(envs) > 1 else []
    per_env = [(e, float(stats.aggregate_task_mean_iqm([xa]) - stats.aggregate_task_mean_iqm([yb])), float(t.p_value))
               for e, xa, yb, t in zip(envs, x, y, env_tests)]
    floors = dict(p_floor=_floor(test), per_env_floors=[_floor(t) for t in env_tests])
    few = min(counts[0] + counts[1]) < scoring.MIN_SEEDS
    if few:
        effect = float(stats.aggregate_task_mean_iqm(x) - stats.aggregate_task_mean_iqm(y))
        return Check(line, OPEN, effect=effect, p_value=test.p_value, runs=runs_txt,
                     why=f"fewer than {scoring.MIN_SEEDS} runs per side and env", per_env=per_env, scope=scope,
                     **floors)
    effect, lo, hi = _difference(x, y, n_boot)
    out = Check(line, OPEN, effect=effect, lo=lo, hi=hi, kind="ci", p_value=test.p_value, runs=runs_txt,
                per_env=per_env, scope=scope, **floors)
    out.verdict, out.why = verdict(test.p_value, effect, lo, hi, 1.0 if sign == ">" else -1.0)
    if len(envs) > 1:
        out.p_heterogeneity = _heterogeneity(x, y)
        if out.p_heterogeneity < scoring.ALPHA and significantly_ahead(per_env) == {-1.0, 1.0}:
            out.verdict = DEPENDS
            out.why = (f"the per-env effects disagree (Cochran's Q p = {out.p_heterogeneity:.2g}; significant on "
                       "envs in both directions): no one direction holds for the next env")
    if out.verdict not in (OPEN, DEPENDS) and (mixed := _equal_compute_across_machines(
            _side(runs, a, col), _side(runs, b, col), envs)):
        out.verdict, out.why = OPEN, (
            f"equal-compute runs on {', '.join(mixed)} ran on more than one machine: what a CPU budget buys depends "
            "on the machine, so no verdict on any measure until both sides ran on one")
    return out


def _floor(test: permutation.PermutationTest) -> float | None:
    """The least p a permutation test can give: ``1 / (draws + 1)`` when drawn at random, none when exact."""
    return None if test.exact else 1.0 / (1 + test.n_permutations)


def _deterministic(line: str, x: list[np.ndarray], y: list[np.ndarray], envs: list[str], runs_txt: str,
                   wanted: float, scope: str) -> Check:
    """A measure that is the same for every seed: medians compared env by env, no p-value (a test of a
    constant measures only the trimming of the aggregate)."""
    mx, my = [float(np.median(t)) for t in x], [float(np.median(t)) for t in y]
    diffs = [p - q for p, q in zip(mx, my)]
    spread = max(float(np.ptp(t)) for t in x + y)
    out = Check(line, OPEN, effect=float(np.mean(diffs)), runs=runs_txt, scope=scope,
                per_env=[(e, d, float("nan")) for e, d in zip(envs, diffs)] if len(envs) > 1 else [])
    signs = {float(np.sign(d)) for d in diffs}
    note = "" if spread == 0 else f" (it varies by up to {spread:.3g} across seeds)"
    if signs == {wanted}:
        out.verdict, out.why = HOLDS, f"on every env, compared directly without a p-value: the same for every seed{note}"
    elif signs == {-wanted}:
        out.verdict, out.why = FAILS, f"the other way on every env, compared directly{note}"
    else:
        out.why = "equal, or different directions on different envs" + note
    return out


def _equal_compute_across_machines(x: pd.DataFrame, y: pd.DataFrame, envs: list[str]) -> list[str]:
    """The envs where runs of ``x`` or ``y`` stopped at a CPU-seconds budget (``meta.stopped_by``) and
    the two sides' runs there ran on more than one machine (``hardware``). There, every measure is a
    measure of the machine too: a faster one trains more steps in the same CPU seconds."""
    out = []
    for e in envs:
        both = pd.concat([x[x["env"] == e], y[y["env"] == e]])
        capped = any(isinstance(m, dict) and m.get("stopped_by") == "cpu_seconds" for m in both["meta"])
        if capped and both["hardware"].nunique() > 1:
            out.append(e)
    return out


def verdict(p: float, effect: float, lo: float, hi: float, wanted: float) -> tuple[str, str]:
    """``(verdict, why)`` of an ``A > B`` (``wanted`` +1) or ``A < B`` (−1) expectation from the
    permutation test's ``p``, the effect and its 95% interval ``[lo, hi]``.

    A verdict needs the test and the interval to agree: the test rejecting at ``ALPHA`` in a
    direction *and* the interval excluding zero on that side. The two are different statistics
    (a permutation null against a bootstrap of the aggregate), and near the boundary one can
    reject while the other does not; a verdict printed beside an interval that contains zero
    would claim more than the runs show, so that case stays not settled, with both figures.
    """
    if not p < scoring.ALPHA:
        return OPEN, f"no difference detected at p < {scoring.ALPHA:g}"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return OPEN, f"the test rejects (p = {p:.2g}) but the effect has no interval"
    side = np.sign(effect)
    if (side > 0 and not lo > 0) or (side < 0 and not hi < 0) or side == 0:
        return OPEN, f"the test rejects (p = {p:.2g}) but the 95% interval includes 0"
    if side == wanted:
        return HOLDS, ""
    return FAILS, "significant in the other direction"


#: The margin of an ``A ≈ B`` expectation, on a 0-1 measure (as bench parity's default).
EQUIVALENCE_MARGIN = 0.05


def _outside(xa: np.ndarray, yb: np.ndarray, margin: float) -> bool:
    """Whether one env's difference of means is shown *outside* ±``margin``: a one-sided Welch test at ALPHA
    rejects ``diff ≤ margin`` (or ``diff ≥ −margin``), the mirror image of the TOST's two tests."""
    from bench.stats import distributions as dist

    from bench.stats.parity import welch

    if xa.size < 2 or yb.size < 2:
        return False
    diff, se, df = welch(xa, yb)
    if se == 0.0:  # every run of each side scored the same: the difference is exact
        return abs(diff) > margin
    return bool(dist.t_sf((abs(diff) - margin) / se, df) < scoring.ALPHA)


def _equivalence(line: str, x: list[np.ndarray], y: list[np.ndarray], envs: list[str], runs_txt: str) -> Check:
    """``A ≈ B``: on every env, two one-sided Welch tests (TOST) put the difference of means within
    ±:data:`EQUIVALENCE_MARGIN` (bench.stats.parity). Holds when every env is equivalent (an
    intersection-union test, valid at α without correction); does not hold when some env is shown
    *outside* the margin (:func:`_outside`); otherwise not settled, including a difference that is
    significant but may lie inside the margin. The effect shown is the mean over envs of each env's
    difference of means, with the widest of the envs' 95% intervals; ``p_value`` is the largest TOST p."""
    from bench.stats.parity import compare

    comps = [compare(a, b, margin=EQUIVALENCE_MARGIN) for a, b in zip(x, y)]
    effect = float(np.mean([c.diff for c in comps]))
    lo, hi = min(c.ci[0] for c in comps), max(c.ci[1] for c in comps)
    per_env = [(e, c.diff, c.p_equiv) for e, c in zip(envs, comps)]
    out = Check(line, OPEN, effect=effect, lo=lo, hi=hi, kind="ci" if np.isfinite(lo) else "none",
                p_value=max(c.p_equiv for c in comps), runs=runs_txt, per_env=per_env if len(envs) > 1 else [])
    outside = [e for e, xa, yb in zip(envs, x, y) if _outside(xa, yb, EQUIVALENCE_MARGIN)]
    if all(c.verdict == "equivalent" for c in comps):
        out.verdict, out.why = HOLDS, f"equivalent within ±{EQUIVALENCE_MARGIN:g} on every env (TOST)"
    elif outside:
        out.verdict = FAILS
        out.why = f"the difference lies outside ±{EQUIVALENCE_MARGIN:g} on " + ", ".join(outside)
    else:
        need = max((c.seeds_needed or 0) for c in comps)
        inside = [e for e, c in zip(envs, comps) if c.verdict == "different"]
        out.why = (f"TOST p = {out.p_value:.2g}: not shown within ±{EQUIVALENCE_MARGIN:g}, nor outside it"
                   + (f" (significantly different from 0 on {', '.join(inside)}, but maybe inside the margin)"
                      if inside else "")
                   + (f"; about {need} runs per side would settle it" if need else ""))
    return out


def evaluate(source: Any, suites: list[str] | None = None, *, n_boot: int = scoring.N_BOOT,
             anchors: bool | AnchorSource = False) -> list[ClaimResult]:
    """The claim of every suite in ``suites`` (default: all in the store) that has one, with its verdict.
    ``source``: a store URL or an open reader (a command's :class:`bench.analysis.readmodel.ReadModel`);
    ``anchors`` as :func:`bench.analysis.readmodel.load`'s."""
    with read_model(source) as db:
        return _evaluate(db, db.suite_specs(), suites, n_boot=n_boot, anchors=anchors)


def _evaluate(db: Any, specs: dict[str, dict[str, Any]], suites: list[str] | None, *, n_boot: int,
              anchors: bool | AnchorSource) -> list[ClaimResult]:
    out = []
    for name, spec in sorted(specs.items()):
        claim = spec.get("claim")
        if not claim or (suites is not None and name not in suites):
            continue
        data = scoring.load(db, [name], anchors=anchors, diagnostics=MEASURED_DIAGNOSTICS)
        scored = scoring.score(data)
        runs = measures(scored, data.diagnostics)
        envs = sorted(runs["env"].unique()) if len(runs) else []
        checks = [check(runs, ex, envs, n_boot=n_boot) for ex in claim["expect"]]
        verdicts = {c.verdict for c in checks}
        verdict = FAILS if FAILS in verdicts else DEPENDS if DEPENDS in verdicts else \
            HOLDS if verdicts == {HOLDS} else OPEN
        out.append(ClaimResult(name, claim["text"], claim.get("source"), verdict, checks, envs))
    return out


def rows(results: list[ClaimResult]) -> list[dict[str, Any]]:
    """Flat rows for the report: one per expectation, with its claim."""
    out = []
    for r in results:
        for c in r.checks:
            if c.kind == "ci":
                effect = f"{c.effect:+.3g} [{c.lo:+.3g}, {c.hi:+.3g}]"
            else:
                effect = "—" if c.effect != c.effect else f"{c.effect:+.3g} (no interval: {c.why})"
            floors = c.per_env_floors or [None] * len(c.per_env)
            out.append(dict(suite=r.suite, claim=r.text, source=r.source or "", claim_verdict=r.verdict, line=c.line,
                            verdict=c.verdict, effect=effect, p=generalise.format_p(c.p_value, c.p_floor),
                            p_heterogeneity="" if c.p_heterogeneity is None else f"{c.p_heterogeneity:.2g}",
                            runs=c.runs, why=c.why, envs=", ".join(r.envs), scope=c.scope,
                            per_env="; ".join(f"{e} {d:+.3g}" + ("" if pv != pv else f" (p {generalise.format_p(pv, fl)})")
                                             for (e, d, pv), fl in zip(c.per_env, floors))))
    return out


#: The language-model track's criteria beside the usual ones (issue 17), both lower-is-better and in
#: their own units, so they stand in the decision matrix of a category that holds sequence tasks only.
LM_CRITERIA: dict[str, str] = {
    "model memory (KiB)": "median bytes of every model a run held (policy, frozen reference, value model, reward "
                          "models and optimiser state; provenance model_memory), in KiB; the same for every seed, "
                          "so no interval",
    "reward hacking": "IQM over runs of the growth of proxy − true score (the true score on the proxy's scale) from "
                      "a run's first 3 updates to its last 5, on the tasks with a learned reward model; lower is "
                      "better, 0 = no gap opened",
}


def lm_criteria(scored: scoring.Scored, diagnostics: pd.DataFrame, category: str, envs: list[str], *,
                n_boot: int = scoring.N_BOOT) -> list[dict[str, Any]]:
    """Decision-matrix rows (columns of :func:`bench.analysis.matrix.decision_matrix`) for
    :data:`LM_CRITERIA` on ``envs``, where they are all sequence tasks; else none (a mixed category,
    such as "all environments", would compare labels that ran no sequence task).

    Memory is exact per configuration: the lowest is marked ``best`` when strictly below every other
    label. Reward hacking is an IQM over runs with a stratified bootstrap interval (a range below 5
    runs), marked by the permutation test as every other criterion (lowest is best)."""
    seq = [e for e in envs if scored.traits.get(e, {}).get("obs") == "sequence"]
    if not seq or len(seq) < len(envs):
        return []
    m = measures(scored, diagnostics)
    m = m[m["env"].isin(seq) & m["final_norm"].notna()]
    rows: list[dict[str, Any]] = []
    base = lambda lb, g: dict(category=category, label=lb, algo=g["algo"].iloc[0], impl=g["impl"].iloc[0],  # noqa: E731
                              cat_envs=len(envs), n_runs=len(g), mark="", p=np.nan, note="")
    mem = []
    for lb, g in m.groupby("label", sort=True):
        b = g["model_bytes"].dropna()
        mem.append(dict(base(lb, g), criterion="model memory (KiB)", point=float(b.median()) / 2**10 if len(b) else np.nan,
                        lo=np.nan, hi=np.nan, kind="none", n_envs=int(g.loc[g["model_bytes"].notna(), "env"].nunique()),
                        note="" if len(b) else "not recorded"))
    live = [r for r in mem if np.isfinite(r["point"])]
    if len(live) > 1:
        low = min(r["point"] for r in live)
        tops = [r for r in live if r["point"] == low]
        for r in tops:
            r["mark"] = "best" if len(tops) == 1 else "tie"
    rows += mem

    crit = scoring.Criterion("hacking", stats.aggregate_task_mean_iqm, LM_CRITERIA["reward hacking"])
    with_rm = [e for e in seq if m.loc[m["env"] == e, "hacking"].notna().any()]
    hack, tasks = [], {}
    for lb, g in m.groupby("label", sort=True):
        t = [g.loc[(g["env"] == e) & g["hacking"].notna(), "hacking"].to_numpy(float) for e in with_rm]
        if not with_rm or not all(x.size for x in t):
            hack.append(dict(base(lb, g), criterion="reward hacking", point=np.nan, lo=np.nan, hi=np.nan, kind="none",
                             n_envs=0, note="no learned-reward task" if not with_rm else "no proxy/true scores"))
            continue
        ci = crit.estimate(t, n_boot=n_boot)
        tasks[lb] = t
        hack.append(dict(base(lb, g), criterion="reward hacking", point=ci.point, lo=ci.lo, hi=ci.hi, kind=ci.kind,
                         n_envs=len(with_rm)))
    enough = len(with_rm) >= scoring.MIN_ENVS and all(x.size >= scoring.MIN_SEEDS for t in tasks.values() for x in t)
    scoring.mark_by_test(hack, tasks, crit, scored, with_rm, lower_is_better=True, enough=enough)
    return rows + hack
