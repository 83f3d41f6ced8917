"""The decision matrix: every label's score on every criterion, per category, marked by the answers.

One rule for every verdict (issue 40). The matrix computes scores and intervals, never a test of its
own: its marks are the answers of :func:`bench.analysis.answers.recommend`, the very
:class:`~bench.analysis.answers.Recommendation` objects that ``bench recommend`` prints and the
report's "The answer" section shows. So the matrix, the answer and the command agree by
construction: same winner, same wording class, same Holm-adjusted p, same envs.

Where a mark goes
-----------------
- In a profile's category (action · observations · reward), on the column of a priority's
  criterion (samples: sample efficiency; time: time efficiency), the answer for that profile and
  priority marks the labels its two tested candidates stand for (``Recommendation.labels``: an
  algorithm's pooled implementations, or the one label where they were ranked apart):

  - ``recommended``: the winner's labels ``answer`` (★), the runner-up's ``runner-up``;
  - ``measured`` (fewer envs than a claim about the next env needs): ``measured`` (◆) and ``runner-up``;
  - ``leaning`` (fewer runs than a winner needs): ``leaning`` (▲) and ``runner-up``;
  - ``no difference``: ``no difference`` (≈) on both;
  - ``insufficient evidence``: no mark.

  Each marked cell also carries the answer's adjusted p and its per-env directions (the sign of
  winner − runner-up on each env tested): per env, the direction only, never a test, as a forest plot
  sets each study's estimate beside the pooled one. Tests per env would be a second family of p-values
  beside the answer's: unadjusted, the per-cell tests over fixed envs that issue 40 removed; adjusted over
  the matrix (Holm 1979), their p-values would move with every label and env added
  (docs/statistics.md, "The decision matrix").
- Every other cell is an estimate with its interval and no mark: the other criteria (final
  performance, reliability, success rate, sensitivity), the labels outside an answer's best two, and the
  "all environments" category, which mixes profiles and is no answer. Marking those by tests would add
  headline tests: either to the answers' Holm family, which would change ``bench recommend``'s p-values,
  or to a family of their own, a second rule. Neither is wanted; the intervals are there to read.
- The language-model track's criteria (:func:`bench.analysis.claims.lm_criteria`) keep their own marks,
  which ``bench recommend --obs sequence`` prints from the same function.

Nothing here depends on labels that are not in an answer's best two: a label added far behind changes
no score (fixed anchors), no answer (:func:`~bench.analysis.answers.recommend`) and so no mark.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

from bench.stats import generalise
from bench.analysis.answers import Recommendation, p_text, recommend
from bench.analysis.scoring import CRITERIA, N_BOOT, PRIORITIES, PRIORITY_CRITERION, SENSITIVITY, Scored, categories

__all__ = ["COLUMNS", "MARKS", "criteria_of", "decision_matrix", "decision_rows", "interval_text", "mark",
           "track_record"]

#: Columns of :func:`decision_matrix`.
COLUMNS = ["category", "label", "algo", "impl", "criterion", "point", "lo", "hi", "kind", "n_envs", "cat_envs",
           "n_runs", "mark", "p", "p_text", "directions", "note"]
#: How each mark reads in a cell (the LM criteria's ``best``/``tie``/``lead`` too).
MARKS = {"answer": "★ answer", "measured": "◆ ahead on these envs", "leaning": "▲ leaning",
         "no difference": "≈ no difference", "runner-up": "runner-up",
         "best": "★ best", "tie": "≈ tie", "lead": "▲ ahead"}
#: The mark of the winner's labels, by verdict.
_WINNER = {"recommended": "answer", "measured": "measured", "leaning": "leaning", "no difference": "no difference"}


def decision_matrix(scored: Scored, sensitivity: pd.DataFrame | None = None, *,
                    recs: list[Recommendation] | None = None, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Every (category, label, criterion): normalised score and interval, marked by the answers.

    A label is scored in a category over the category's envs it ran (``n_envs`` of ``cat_envs``; a
    score over fewer envs says so). ``kind`` says what the interval is (``ci``, ``range`` below 5
    runs per env, ``none``).

    :param recs: the answers to mark with (:func:`bench.analysis.answers.recommend` on ``scored``, every
        profile and priority, as the report computes them once); computed here when not given.
    :returns: columns :data:`COLUMNS`; ``mark``, ``p`` (the answer's Holm-adjusted p), ``p_text`` (as
        printed) and ``directions`` are set only on the cells an answer marks (see the module docstring).
    """
    r = scored.runs[scored.runs["final_norm"].notna()]
    out: list[dict] = []
    for cat, envs in categories(scored).items():
        rc = r[r["env"].isin(envs)]
        labels = sorted(rc["label"].unique())
        first = rc.drop_duplicates("label").set_index("label")  # each label's algo and impl, from its first run
        n_runs = rc["label"].value_counts()
        for name, crit in CRITERIA.items():
            for lb in labels:
                mine = [e for e in envs if scored.tasks(lb, crit.column, [e])[0].size]
                base = dict(category=cat, label=lb, algo=first.at[lb, "algo"], impl=first.at[lb, "impl"], criterion=name,
                            n_envs=len(mine), cat_envs=len(envs), n_runs=int(n_runs[lb]), mark="", p=np.nan, p_text="",
                            directions="", note="")
                if not mine:
                    out.append(dict(base, point=np.nan, lo=np.nan, hi=np.nan, kind="none",
                                    note="no time scale for these envs" if crit.is_time else "no runs"))
                    continue
                ci = crit.estimate(scored.tasks(lb, crit.column, mine), n_boot=n_boot)
                # A score over fewer envs is not set beside one over all of them without saying so (issue 40).
                fewer = f"over {len(mine)} of the {len(envs)} envs only" if len(mine) < len(envs) else ""
                out.append(dict(base, point=ci.point, lo=ci.lo, hi=ci.hi, kind=ci.kind, note=fewer))
        for lb in labels:
            out.append(_sensitivity_cell(cat, lb, first.at[lb, "algo"], first.at[lb, "impl"], envs, sensitivity))
    dm = pd.DataFrame(out, columns=COLUMNS)
    return mark(dm, recommend(scored, n_boot=n_boot, track_record=False) if recs is None else recs)


def mark(dm: pd.DataFrame, recs: list[Recommendation]) -> pd.DataFrame:
    """``dm`` with the answers' marks (module docstring): each answer marks the cells of its profile's
    category, on its priority's criterion, of the labels its two tested candidates stand for."""
    dm = dm.copy()
    for rec in recs:
        if rec.verdict not in _WINNER or not rec.algorithm or not rec.runner_up:
            continue
        col = (dm["category"] == rec.profile) & (dm["criterion"] == PRIORITY_CRITERION[rec.priority])
        shown = p_text(rec)
        dirs = generalise.directions(rec.effects)
        for side, name in (("winner", rec.algorithm), ("runner-up", rec.runner_up)):
            m = _WINNER[rec.verdict] if side == "winner" or rec.verdict == "no difference" else "runner-up"
            pooled = rec.labels.get(name, [])
            how = name if pooled == [name] else f"{name} (pooled: {', '.join(pooled)})"
            note = f"{'answer' if side == 'winner' else 'runner-up'}: {how}; {rec.message}"
            at = col & dm["label"].isin(pooled)
            dm.loc[at, "mark"] = m
            dm.loc[at, "p"] = np.nan if rec.p_adjusted is None else float(rec.p_adjusted)
            dm.loc[at, "p_text"] = shown
            dm.loc[at, "directions"] = dirs
            dm.loc[at, "note"] = [f"{n}; {note}" if n else note for n in dm.loc[at, "note"]]
    return dm


def _sensitivity_cell(cat: str, label: str, algo: str, impl: str, envs: list[str], sens: pd.DataFrame | None) -> dict:
    """Hyperparameter sensitivity from the tuner: mean over envs of the IQR of normalised trial scores (lower is better)."""
    row = dict(category=cat, label=label, algo=algo, impl=impl, criterion=SENSITIVITY, point=np.nan, lo=np.nan,
               hi=np.nan, kind="none", n_envs=0, cat_envs=len(envs), n_runs=0, mark="", p=np.nan, p_text="",
               directions="", note="no tuning data")
    if sens is None:
        return row
    s = sens[(sens["algo"] == algo) & (sens["impl"] == impl) & sens["env_id"].isin(envs)]
    s = s[s["score_iqr"].notna()]
    if s.empty:
        return row
    note = (f"IQR of normalised trial scores, {int(s['n_trials'].sum())} trials (pruned ones at their last value; "
            "lower = less sensitive)")
    if s["success_fraction"].notna().any():
        note += f"; {s['success_fraction'].mean():.0%} of trials reached the threshold"
    imp: dict[str, list[float]] = {}
    for d in s["importances"]:
        for k, v in (d or {}).items():
            imp.setdefault(k, []).append(float(v))
    if imp:
        top = min(imp, key=lambda k: (-np.mean(imp[k]), k))  # ties by name: the same on every run
        note += f"; most important: {top} ({np.mean(imp[top]):.2f})"
    row.update(point=float(s["score_iqr"].mean()), n_envs=int(s["env_id"].nunique()), n_runs=int(s["n_trials"].sum()),
               note=note)
    return row


# --------------------------------------------------------------------------- #
# The matrix as the report's table rows
# --------------------------------------------------------------------------- #
def criteria_of(dm: pd.DataFrame, category: str) -> list[str]:
    """The decision matrix's columns for one category: every criterion, the sensitivity, then any
    language-model-track criterion its rows hold."""
    from bench.analysis.claims import LM_CRITERIA

    have = set(dm.loc[dm["category"] == category, "criterion"])
    return list(CRITERIA) + [SENSITIVITY] + [c for c in LM_CRITERIA if c in have]


def _text(v: Any) -> str:
    """A text column of the matrix as text: rows appended without it (the LM criteria's) hold NaN."""
    return v if isinstance(v, str) else ""


def lower_is_better() -> frozenset[str]:
    """The criteria whose lower scores are better: the tuner's sensitivity, and the language-model track's
    model memory and reward hacking."""
    from bench.analysis.claims import LM_CRITERIA

    return frozenset({SENSITIVITY, *LM_CRITERIA})


def decision_rows(dm: pd.DataFrame, category: str, lower_better: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The decision matrix of one category as table rows: one per label, one cell per criterion; each cell
    ``text`` (score and interval), ``mark`` (as :data:`MARKS` reads it, with the answer's adjusted p and
    per-env directions where an answer marks it), ``title`` (runs, envs, notes) and ``rank``: where its score
    sits in its column, 0 (worst) to 1 (best), min-max scaled (``lower_better``: criteria whose lower
    scores are better; default :func:`lower_is_better`), None without a score; the page shades cells by it."""
    crits = criteria_of(dm, category)
    by_label: dict[str, dict[str, dict[str, Any]]] = {}  # label → criterion → its first row
    for x in dm[dm["category"] == category].to_dict("records"):
        by_label.setdefault(x["label"], {}).setdefault(x["criterion"], x)
    lower = lower_is_better() if lower_better is None else set(lower_better)
    ranks = {crit: _ranks({lb: by[crit]["point"] for lb, by in by_label.items() if crit in by}, crit in lower)
             for crit in crits}
    rows = []
    for lb in sorted(by_label):
        cells = []
        for crit in crits:
            x = by_label[lb].get(crit)
            if x is None:  # a criterion this label has no row for (it ran none of what it measures)
                cells.append(dict(text="n/a", mark="", title="not measured for this label", rank=None))
                continue
            note = _text(x["note"])
            if x["point"] != x["point"]:
                cells.append(dict(text=note or "n/a", mark="", title=note, rank=None))
                continue
            cover = f" ({x['n_envs']}/{x['cat_envs']} envs)" if x["n_envs"] < x["cat_envs"] else ""
            m = MARKS.get(_text(x["mark"]), "")
            if m and _text(x.get("p_text")):
                m += f" (p {x['p_text']}" + (f"; {x['directions']}" if _text(x.get("directions")) else "") + ")"
            cells.append(dict(text=interval_text(x["point"], x["lo"], x["hi"], x["kind"]) + cover, mark=m,
                              title=f"{x['n_runs']} runs on {x['n_envs']} envs. {note}".strip(), rank=ranks[crit].get(lb)))
        rows.append(dict(label=lb, impl=next(iter(by_label[lb].values()))["impl"], cells=cells))
    return rows


def _ranks(points: dict[str, float], lower_better: bool) -> dict[str, float]:
    """Label → its score min-max scaled within the column, 1 the best (0.5 for all where every score is equal:
    no order to show)."""
    vals = {lb: float(v) for lb, v in points.items() if v == v}
    if not vals:
        return {}
    lo, hi = min(vals.values()), max(vals.values())
    if hi == lo:
        return dict.fromkeys(vals, 0.5)
    return {lb: (hi - v) / (hi - lo) if lower_better else (v - lo) / (hi - lo) for lb, v in vals.items()}


def interval_text(point: float, lo: float, hi: float, kind: str) -> str:
    """A score with what its interval is: ``0.84 [0.79, 0.91]`` (95% CI), ``0.84 (range 0.79–0.91)`` below
    5 runs per env, or the bare point where no interval is honest."""
    if point != point:
        return "—"
    if kind == "none" or lo != lo:
        return f"{point:.2f}"
    return f"{point:.2f} (range {lo:.2f}–{hi:.2f})" if kind == "range" else f"{point:.2f} [{lo:.2f}, {hi:.2f}]"


def track_record(recs: list[Recommendation]) -> dict[str, Any]:
    """Leave-one-env-out hit rates: per priority over the profiles that have one, and overall."""
    per = {}
    for p in PRIORITIES:
        hits = sum(r.loo[0] for r in recs if r.priority == p and r.loo)
        trials = sum(r.loo[1] for r in recs if r.priority == p and r.loo)
        if trials:
            per[p] = f"{hits}/{trials} = {hits / trials:.0%}"
    hits = sum(r.loo[0] for r in recs if r.loo)
    trials = sum(r.loo[1] for r in recs if r.loo)
    return dict(per=per, overall=f"{hits}/{trials} = {hits / trials:.0%}" if trials else "")
