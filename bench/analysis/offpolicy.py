"""Off-policy reference points beside the answers (issue 43): how far the on-policy answer is from SB3's
DQN, SAC and TD3 on the same envs, at equal samples and at equal CPU time.

The answers are about on-policy algorithms; DQN, SAC and TD3 are never candidates in them. Their runs are
pooled apart when a store is read (:class:`bench.analysis.scoring.Data`, ``off_budgets``), so the table is
the same with and without them. For each profile with off-policy runs, one line:

- **envs**: the profile's envs where off-policy runs were compared (not those run at an equal CPU budget);
- **budget**: every run is scored as the table scores it (normalised area under the learning curve).
  At equal samples, over the smaller of the off-policy runs' and the on-policy runs' budget on each env
  (the off-policy suite's budgets are the zoo's or smaller, see ``docs/reference.md``): runs that ran
  longer count up to it, so no run is stretched. At equal CPU time, over the table's own time horizon
  for the env (its budget × its time scale, in training CPU seconds): the answer's score is the table's,
  and an off-policy run that ended sooner holds its last value, as every run does there;
- per priority: the **best** off-policy algorithm by the criterion's score (mean over envs of each env's
  IQM), the **on-policy answer** of the table for that profile and priority (its leader where the table
  names no winner), both scores with their intervals, the **gap** (best off-policy − answer) and the
  stratified permutation test's p of the two (time: runs of the one machine both share, as in the table).
  This p is not part of the table's Holm family: it is a reference, not an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bench.stats import aggregate as stats
from bench.analysis.scoring import (CRITERIA, N_BOOT, OFF_POLICY, PRIORITIES, PRIORITY_CRITERION, Data, Scored,
                                    score)

__all__ = ["OFF_POLICY", "Gap", "OffPolicyLine", "off_policy_lines", "off_policy_rows", "line_text"]


@dataclass
class Gap:
    """One priority of a profile's off-policy line (see the module docstring)."""

    priority: str
    best: str | None = None
    best_score: stats.Interval | None = None
    answer: str | None = None
    answer_verdict: str = ""
    answer_score: stats.Interval | None = None
    gap: float | None = None
    p_value: float | None = None
    envs: list[str] = field(default_factory=list)
    runs: dict[str, int] = field(default_factory=dict)
    message: str = ""


@dataclass
class OffPolicyLine:
    """A profile's off-policy reference: its envs, the budget each was compared at, and one :class:`Gap` per
    priority."""

    action: str
    obs: str
    reward: str
    envs: list[str]
    #: env → the common step budget of the sample-efficiency comparison.
    budgets: dict[str, int]
    gaps: list[Gap] = field(default_factory=list)
    #: env → the time horizon of the time-efficiency comparison, in training CPU seconds (the table's).
    horizons: dict[str, float] = field(default_factory=dict)

    @property
    def profile(self) -> str:
        return f"{self.action} · {self.obs} · {self.reward}"


def _profile(traits: dict[str, Any]) -> tuple[str, str, str]:
    return traits.get("action"), traits.get("obs"), traits.get("reward")  # type: ignore[return-value]


def common_view(data: Data, priority: str = "samples") -> tuple[Data, dict[str, int]] | None:
    """``data`` with the on-policy and the off-policy runs of every env that has off-policy runs pooled
    together, ready for :func:`bench.analysis.scoring.score`, with each such env's budget for ``priority``:
    by samples the common budget (the smaller of the two sides'), by time the table's own (the on-policy
    runs' budget, whose time horizon is that budget × the env's time scale; the off-policy runs' where
    there are no on-policy runs). ``None`` where no env has off-policy runs to compare."""
    runs = data.runs
    if runs.empty or "pooled_off" not in runs or not data.off_budgets:
        return None
    envs = sorted(e for e in data.off_budgets if e not in data.cpu_budgets and e in data.anchors)
    if not envs:
        return None
    on = {e: data.budgets.get(e, data.off_budgets[e]) for e in envs}
    budgets = {e: min(data.off_budgets[e], on[e]) for e in envs} if priority == "samples" else on
    view = runs.copy()
    view["pooled"] = (runs["pooled"] | runs["pooled_off"]) & runs["env"].isin(envs)
    return replace(data, runs=view, budgets=budgets, cpu_budgets={}, off_budgets={}, notes=[]), budgets


def off_policy_lines(data: Data, recs: list[Any], *, n_boot: int = N_BOOT) -> list[OffPolicyLine]:
    """One :class:`OffPolicyLine` per profile of ``recs`` (the table's
    :class:`bench.analysis.answers.Recommendation` rows, computed without the off-policy runs) that has
    off-policy runs in ``data``, in the table's order."""
    views = {p: common_view(data, p) for p in {r.priority for r in recs}}
    if not any(views.values()):
        return []
    scored = {p: (score(v[0]), v[1]) for p, v in views.items() if v is not None}
    lines: dict[tuple[str, str, str], OffPolicyLine] = {}
    for rec in recs:
        key = (rec.action, rec.obs, rec.reward)
        sc, budgets = scored[rec.priority]
        envs = [e for e in budgets if _profile(data.traits.get(e, {})) == key]
        if not envs:
            continue
        line = lines.setdefault(key, OffPolicyLine(*key, envs=envs, budgets={}))
        if rec.priority == "samples":
            line.budgets = {e: budgets[e] for e in envs}
        else:
            line.horizons = {e: sc.horizons[e] for e in envs if e in sc.horizons}
        line.gaps.append(_gap(sc, rec, envs, n_boot))
    return list(lines.values())


def _gap(scored: Scored, rec: Any, envs: list[str], n_boot: int) -> Gap:
    name = PRIORITY_CRITERION[rec.priority]
    crit = CRITERIA[name]
    col = crit.column
    runs = scored.runs
    off = runs[runs["algo"].isin(OFF_POLICY) & runs[col].notna() & runs["final_norm"].notna()]
    envs = [e for e in envs if e in set(off["env"])]
    g = Gap(rec.priority, answer=rec.algorithm, answer_verdict=rec.verdict, envs=envs)
    if not envs:
        g.message = f"no {name} score for the off-policy runs here (no time scale)" if crit.is_time \
            else "no off-policy run scored"
        return g
    cands = [a for a in OFF_POLICY if scored.covers(a, col, envs, "algo")]
    if not cands:
        g.message = f"no off-policy algorithm ran every one of {', '.join(envs)}"
        return g
    est = {a: crit.estimate(scored.tasks(a, col, envs, "algo"), n_boot=n_boot) for a in cands}
    g.best = max(cands, key=lambda a: (est[a].point, a))
    g.best_score = est[g.best]
    g.runs = {a: int(min(t.size for t in scored.tasks(a, col, envs, "algo"))) for a in cands}
    if rec.algorithm is None:
        g.message = "no on-policy answer to compare with"
        return g
    by = "algo" if rec.algorithm in set(runs["algo"]) else "label"
    if not scored.covers(rec.algorithm, col, envs, by):
        g.message = f"{rec.algorithm} has no {name} score on every one of {', '.join(envs)}"
        return g
    g.answer_score = crit.estimate(scored.tasks(rec.algorithm, col, envs, by), n_boot=n_boot)
    g.gap = float(g.best_score.point - g.answer_score.point)
    xt, yt = scored.pair(g.best, rec.algorithm, crit, envs, "algo", by)
    both = [i for i, (x, y) in enumerate(zip(xt, yt)) if x.size and y.size]
    if both:
        g.p_value = float(crit.compare([xt[i] for i in both], [yt[i] for i in both]).p_value)
    else:
        g.message = "no shared machine on quiet cores to test the gap"
    return g


# --------------------------------------------------------------------------- #
# Rows and text for the command and the report
# --------------------------------------------------------------------------- #
_PRIORITY_WORDS = {"samples": "equal samples", "time": "equal CPU time"}


def line_text(line: OffPolicyLine) -> str:
    """The line as ``bench recommend --verbose`` prints it (one paragraph)."""
    def where(e: str) -> str:
        sizes = ([f"{line.budgets[e]:,} steps"] if e in line.budgets else []) + \
            ([f"{line.horizons[e]:,.0f} CPU s"] if e in line.horizons else [])
        return " ".join([e, " / ".join(sizes)]) if sizes else e

    at = ", ".join(where(e) for e in line.envs)
    parts = []
    for g in sorted(line.gaps, key=lambda g: PRIORITIES.index(g.priority)):
        head = _PRIORITY_WORDS[g.priority]
        if g.best is None:
            parts.append(f"{head}: {g.message}")
            continue
        best = f"{g.best} {g.best_score}"
        if g.gap is None:
            parts.append(f"{head}: {best} ({g.message})")
            continue
        lead = "" if g.answer_verdict in ("recommended", "measured") else " (the table's leader)"
        p = f", p = {g.p_value:.2g}" if g.p_value is not None else f"; {g.message}" if g.message else ""
        parts.append(f"{head}: {best} against {g.answer}{lead} {g.answer_score}, gap {g.gap:+.3f}{p}")
    return f"{line.profile} (on {at}): " + "; ".join(parts)


def off_policy_rows(lines: list[OffPolicyLine]) -> list[dict[str, Any]]:
    """Flat rows, one per (profile, priority): action, obs, reward, priority, envs, budgets, horizons, best, best_score,
    answer, answer_verdict, answer_score (as printed, with their points), gap, p_value (not adjusted), runs,
    message, text (the profile's whole line)."""
    out = []
    for line in lines:
        text = line_text(line)
        for g in line.gaps:
            out.append(dict(
                action=line.action, obs=line.obs, reward=line.reward, priority=g.priority, envs=list(g.envs),
                budgets=dict(line.budgets), horizons=dict(line.horizons), best=g.best, best_score=str(g.best_score) if g.best_score else "",
                best_point=None if g.best_score is None else float(g.best_score.point), answer=g.answer,
                answer_verdict=g.answer_verdict, answer_score=str(g.answer_score) if g.answer_score else "",
                answer_point=None if g.answer_score is None else float(g.answer_score.point), gap=g.gap,
                p_value=g.p_value, runs=dict(g.runs), message=g.message, text=text))
    return out
