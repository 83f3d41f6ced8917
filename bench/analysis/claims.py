"""Claims from the literature, checked against the runs of the suites written to test them.

A suite in ``suites/claims/`` carries a ``claim:`` block: the claim in one line, its
source, and one or more expectations, each ``A > B on MEASURE`` (A and B being
algorithms, their implementations pooled, or labels). For each expectation the
runs of that suite give:

- the effect: the difference of the two aggregates (mean over envs of each env's
  IQM of the per-run measure), with a 95% stratified bootstrap interval when both
  sides have at least :data:`bench.analysis.stats.MIN_CI_RUNS` runs on every env;
- a two-sided stratified permutation test of "no difference", at the report's level.

An expectation **holds** when the test rejects in the expected direction with at
least :data:`~bench.analysis.scoring.MIN_SEEDS` runs per side and env, **does not
hold** when it rejects in the other direction, and is **not settled** otherwise
(no runs, too few, or no difference detectable). A claim holds when all its
expectations hold, does not hold when any does not, and is not settled otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bench.analysis import scoring, stats

#: Expectation measure (as a suite writes it) → the per-run column it compares.
MEASURES: dict[str, str] = {
    "sample efficiency": "auc_steps_norm",
    "time efficiency": "auc_time_norm",
    "final performance": "final_norm",
    "success rate": "solved_f",
    "final return": "final_return",
    "CPU seconds per million steps": "cpu_per_msteps",
    "gradient noise": "grad_noise",
}
HOLDS, FAILS, OPEN = "holds", "does not hold", "not settled"


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


@dataclass
class ClaimResult:
    suite: str
    text: str
    source: str | None
    verdict: str
    checks: list[Check] = field(default_factory=list)
    envs: list[str] = field(default_factory=list)


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
    return r


def _tasks(runs: pd.DataFrame, name: str, col: str, envs: list[str]) -> list[np.ndarray]:
    by = "label" if name in set(runs["label"]) else "algo"
    mine = runs[(runs[by] == name) & runs[col].notna()]
    return [mine.loc[mine["env"] == e, col].to_numpy(float) for e in envs]


def _difference(x: list[np.ndarray], y: list[np.ndarray], n_boot: int) -> tuple[float, float, float]:
    """aggregate(x) − aggregate(y) and its 95% stratified bootstrap interval (each side resampled within envs)."""
    agg = stats.aggregate_task_mean_iqm
    point = float(agg(x) - agg(y))
    rx = stats.stratified_resample(x, n_boot, rng=1)
    ry = stats.stratified_resample(y, n_boot, rng=2)
    lo, hi = stats.percentile_interval(np.asarray(agg(rx)) - np.asarray(agg(ry)))
    return point, float(lo), float(hi)


def check(runs: pd.DataFrame, expectation: dict[str, str], envs: list[str], *, n_boot: int = scoring.N_BOOT) -> Check:
    """The verdict on one expectation ``{a, op, b, measure}`` (``A > B on MEASURE``) from ``runs``
    (see the module docstring)."""
    a, sign, b, measure = (expectation[k] for k in ("a", "op", "b", "measure"))
    line = f"{a} {sign} {b} on {measure}"
    col = MEASURES[measure]
    x, y = _tasks(runs, a, col, envs), _tasks(runs, b, col, envs)
    counts = [t.size for t in x], [t.size for t in y]
    runs_txt = f"{a} {'/'.join(map(str, counts[0]))} vs {b} {'/'.join(map(str, counts[1]))} runs per env"
    if not envs or min(counts[0] + counts[1]) == 0:
        return Check(line, OPEN, runs=runs_txt, why="no runs of one side on some env (run the suite)")
    test = stats.permutation_test(x, y, stats.aggregate_task_mean_iqm, alternative="two-sided", rng=0)
    few = min(counts[0] + counts[1]) < scoring.MIN_SEEDS
    if few:
        effect = float(stats.aggregate_task_mean_iqm(x) - stats.aggregate_task_mean_iqm(y))
        out = Check(line, OPEN, effect=effect, p_value=test.p_value, runs=runs_txt,
                    why=f"fewer than {scoring.MIN_SEEDS} runs per side and env")
        return out
    effect, lo, hi = _difference(x, y, n_boot)
    out = Check(line, OPEN, effect=effect, lo=lo, hi=hi, kind="ci", p_value=test.p_value, runs=runs_txt)
    wanted = 1.0 if sign == ">" else -1.0
    if test.p_value < scoring.ALPHA and np.sign(effect) == wanted:
        out.verdict = HOLDS
    elif test.p_value < scoring.ALPHA:
        out.verdict, out.why = FAILS, "significant in the other direction"
    else:
        out.why = f"no difference detected at p < {scoring.ALPHA:g}"
    return out


def evaluate(store_url: str, suites: list[str] | None = None, *, n_boot: int = scoring.N_BOOT,
             anchors: bool = True) -> list[ClaimResult]:
    """The claim of every suite in ``suites`` (default: all in the store) that has one, with its verdict."""
    import json

    import sqlalchemy as sa

    from bench.run import store as st

    db = st.Store(store_url, readonly=True)
    with db.engine.connect() as c:
        specs = {r.name: json.loads(r.spec) for r in c.execute(sa.select(st.suites.c.name, st.suites.c.spec))}
    db.dispose()
    out = []
    for name, spec in sorted(specs.items()):
        claim = spec.get("claim")
        if not claim or (suites is not None and name not in suites):
            continue
        data = scoring.load(store_url, [name], anchors=anchors)
        scored = scoring.score(data)
        runs = measures(scored, data.diagnostics)
        envs = sorted(runs["env"].unique()) if len(runs) else []
        checks = [check(runs, ex, envs, n_boot=n_boot) for ex in claim["expect"]]
        verdicts = {c.verdict for c in checks}
        verdict = FAILS if FAILS in verdicts else HOLDS if verdicts == {HOLDS} else OPEN
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
            out.append(dict(suite=r.suite, claim=r.text, source=r.source or "", claim_verdict=r.verdict, line=c.line,
                            verdict=c.verdict, effect=effect, p="—" if c.p_value is None else f"{c.p_value:.2g}",
                            runs=c.runs, why=c.why, envs=", ".join(r.envs)))
    return out
