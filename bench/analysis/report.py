"""``bench report``: one self-contained static HTML page from the results store.

The numbers come from :mod:`bench.analysis.scoring` (read once through the command's
:class:`bench.analysis.readmodel.ReadModel`; the pure statistics of :mod:`bench.stats.aggregate`); the
figures from :mod:`bench.analysis.figures`. This module writes ``index.html`` with every figure
embedded as a base64 PNG, no external CSS, JavaScript or fonts, so the page opens offline and fetches
nothing.

Sections (see the issue): inventory and provenance, per environment (learning
curves vs steps and vs seconds with IQM and 95% bootstrap bands, Kaplan-Meier
fraction solved, final-return table, diagnostics), across environments
(normalised IQM with stratified bootstrap intervals, performance profiles,
probability of improvement), the decision matrix and the recommendation table.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

import bench.analysis.answers as ans
import bench.analysis.claims as cl
import bench.analysis.collapse as collapse
import bench.analysis.figures as fg
import bench.analysis.matrix as mx
import bench.analysis.scoring as an
from bench.analysis.offpolicy import line_text, off_policy_lines
from bench.analysis.published import PUBLISHED, SOURCE, check, published_for
from bench.analysis.readmodel import AnchorSource, ReadModel, read_model
from bench.stats import aggregate as stats
from bench.stats import parity as par
from bench.stats.generalise import MIN_ENVS_GENERALISE

TEMPLATE = Path(__file__).with_name("report.html.j2")
#: The run columns an env's figures read (the rest of the frame stays in this process).
_DRAWN = ["key", "label", "t_steps", "t_cpu", "solved"]


# --------------------------------------------------------------------------- #
# The page
# --------------------------------------------------------------------------- #
def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


def _reached(v: float, digits: int) -> str:
    """A Kaplan-Meier median to threshold: ``nan`` is "not reached" (fewer than half the runs solved)."""
    return "not reached" if v != v else _f(v, digits)


def _f(v: Any, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "—"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, float):
        return f"{v:,.{digits}f}" if abs(v) < 1e5 else f"{v:,.0f}"
    return str(v)


def _provenance(data: an.Data) -> dict[str, Any]:
    r = data.runs
    done = r[r["status"] == "done"] if not r.empty else r
    metas = list(done["meta"]) if not done.empty else []
    versions = sorted({", ".join(f"{k} {v}" for k, v in sorted((m.get("versions") or {}).items()) if v) for m in metas})
    commits = sorted({f"{(m.get('git_commit') or '?')[:10]}{' (dirty)' if m.get('git_dirty') else ''}" for m in metas})
    starts = sorted(m["started_at"] for m in metas if m.get("started_at"))
    ends = sorted(m["finished_at"] for m in metas if m.get("finished_at"))
    return dict(
        versions=versions, commits=commits,
        hardware=sorted({an.hardware_of(m) + f" · {m.get('cpu_count', '?')} cores · host {m.get('host', '?')}" for m in metas}),
        python=sorted({m.get("python", "?") for m in metas}),
        stepping=_stepping(done),
        dates=f"{starts[0]} → {ends[-1]}" if starts and ends else "—",
        overrides=_overrides(done),
    )


def _overrides(done: Any) -> list[str]:
    """One line per ``bench run --set`` override the done runs were run with (``overrides`` in their meta),
    with the labels it reached; none for runs of the suite files as written."""
    if done.empty:
        return []
    by_text: dict[str, set[str]] = {}
    for label, m in zip(done["label"], done["meta"]):
        for o in m.get("overrides") or ():
            by_text.setdefault(str(o), set()).add(str(label))
    return [f"--set {o}: {', '.join(sorted(labels))}" for o, labels in sorted(by_text.items())]


def _stepping(done: Any) -> list[str]:
    """One line per env stepping mode of the done runs (``vec_env`` in their meta; none recorded: sync), with the
    labels that used it and any note (envpool: its envs are not Gymnasium's)."""
    if done.empty:
        return []
    by_mode: dict[str, set[str]] = {}
    notes: set[str] = set()
    for label, m in zip(done["label"], done["meta"]):
        by_mode.setdefault(m.get("vec_env", "sync"), set()).add(str(label))
        if m.get("vec_env_note"):
            notes.add(m["vec_env_note"])
    lines = [f"{mode}: {', '.join(sorted(labels))}" for mode, labels in sorted(by_mode.items())]
    return lines + [f"note: {n}" for n in sorted(notes)]


def _inventory(data: an.Data) -> tuple[list[dict], list[dict]]:
    r = data.runs
    if r.empty:
        return [], []
    counts = (r.groupby(["suite", "env", "label", "impl", "status"]).size().unstack("status", fill_value=0).reset_index())
    rows = []
    for c in counts.to_dict("records"):
        g = r[(r["suite"] == c["suite"]) & (r["env"] == c["env"]) & (r["label"] == c["label"])]
        rows.append(dict(suite=c["suite"], env=c["env"], label=c["label"], impl=c["impl"],
                         total=int(sum(c.get(s, 0) for s in ("pending", "running", "done", "failed", "interrupted"))),
                         **{s: int(c.get(s, 0)) for s in ("done", "failed", "interrupted", "running", "pending")},
                         pooled=int(g["pooled"].sum()), budget=_f(int(g["timesteps"].max()))))
    bad = r[r["status"].isin(["failed", "interrupted"])]
    failures = [dict(env=x.env, label=x.label, seed=int(x.seed), status=x.status, error=x.error or "")
                for x in bad.itertuples()]
    return rows, failures


def answer_data(data: an.Data, scored: an.Scored, recs: list[ans.Recommendation]) -> dict[str, Any]:
    """What the page's verdicts are made of: "The answer", the recommendation table and the decision matrix,
    from one list of answers (``recs``: :func:`bench.analysis.answers.recommend` on ``scored``, every profile
    and priority, the rows ``bench recommend --format json`` prints). Figures are drawn apart from it.

    :returns: ``recs`` (:func:`bench.analysis.answers.recommendation_rows`), ``matrix`` (the marked
        :func:`bench.analysis.matrix.decision_matrix`, with the language-model track's criteria), ``decision``
        (per category: category, envs as text, env_ids, criteria, rows), ``track`` (leave-one-env-out hit rates),
        ``lm`` (whether the LM criteria are in the matrix).
    """
    cats = an.categories(scored) if an.normalised_envs(scored) else {}
    dm = mx.decision_matrix(scored, data.sensitivity, recs=recs) if cats else pd.DataFrame(columns=mx.COLUMNS)
    # Sequence tasks add the language-model track's criteria (model memory, reward hacking).
    lm = [row for cat, envs in cats.items() for row in cl.lm_criteria(scored, data.diagnostics, cat, envs)]
    if lm:
        dm = pd.concat([dm, pd.DataFrame(lm, columns=dm.columns)], ignore_index=True)
    decision = [dict(category=cat, envs=", ".join(envs), env_ids=envs, criteria=mx.criteria_of(dm, cat),
                     rows=mx.decision_rows(dm, cat)) for cat, envs in cats.items()]
    return dict(recs=ans.recommendation_rows(recs), matrix=dm, decision=decision, track=mx.track_record(recs),
                lm=bool(lm))


def build(source: Any, out_dir: Path, suites: list[str] | None = None, *,
          log: Callable[[str], None] | None = None, anchors: bool | AnchorSource = False,
          stage: Callable[[str], None] | None = None, workers: int | None = None) -> Path:
    """Write ``out_dir/index.html`` for ``suites`` (default: all in the store); returns its path.

    :param source: a store or ``packs:`` URL, or the command's open
        :class:`bench.analysis.readmodel.ReadModel`: every section reads through that one model, so each
        table is read once.
    :param log: gets the lines worth keeping (notes while reading, the time it took).
    :param anchors: where the normalisation anchors come from, as :func:`bench.analysis.readmodel.load`'s (the api
        passes the run layer's :func:`bench.run.anchors.for_reading`, which computes and stores missing ones).
    :param stage: gets the step under way, for a live status line (a report of the shipped
        reference takes tens of CPU seconds).
    :param workers: processes drawing the figures beside this one (:class:`bench.analysis.figures.Painter`),
        0 to draw them here; default: one per core (:func:`default_workers`; this process computes the
        tables meanwhile). A report of fewer than :data:`PAINT_ENVS` envs draws here (starting a worker would cost
        more than it saves).
    """
    with read_model(source) as db:
        return _build(db, out_dir, suites, log=log, anchors=anchors, stage=stage or (lambda _: None),
                      workers=default_workers() if workers is None else workers)


#: From this many envs on, a report draws its figures in worker processes (:class:`bench.analysis.figures.Painter`).
PAINT_ENVS = 6


def default_workers() -> int:
    """One drawing process per core this process may run on (at most 8: ~80 figures gain little beyond).
    As many as the cores, not one fewer: the figures take more CPU than the tables computed meanwhile, so
    on 2 cores two drawing processes beside the computing one finish first (measured: docs/reference.md)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(8, cores)


def _build(db: ReadModel, out_dir: Path, suites: list[str] | None, *, log: Callable[[str], None] | None,
           anchors: bool | AnchorSource, stage: Callable[[str], None], workers: int) -> Path:
    with fg.Painter(workers if _env_count(db, suites) >= PAINT_ENVS else 0) as painter:
        return _build_with(db, out_dir, suites, log=log, anchors=anchors, stage=stage, painter=painter)


def _env_count(db: ReadModel, suites: list[str] | None) -> int:
    """How many envs the report's suites ran (the runs table, kept by the read model for the whole report)."""
    runs = db.runs_frame()
    if suites:
        runs = runs[runs["suite"].isin(suites)]
    return int(runs["env"].nunique()) if len(runs) else 0


def _build_with(db: ReadModel, out_dir: Path, suites: list[str] | None, *, log: Callable[[str], None] | None,
                anchors: bool | AnchorSource, stage: Callable[[str], None], painter: fg.Painter) -> Path:
    """The report's stages in order: read and score, each env's section, across envs, the answers, variants,
    claims, parity, then the page."""
    t0 = time.perf_counter()
    stage("reading the store")
    data = an.load(db, suites, anchors=anchors, log=log)
    scored = an.score(data)
    runs = scored.runs
    labels = sorted(data.runs["label"].unique()) if not data.runs.empty else []
    impl = dict(zip(data.runs.get("label", []), data.runs.get("impl", [])))
    style = fg.Style(labels, impl, dict(zip(data.runs.get("label", []), data.runs.get("algo", []))))
    warn = an.hardware_warnings(data)
    env_sections, flagged = _env_sections(db, painter, data, scored, style, warn, stage)
    across = _across(painter, scored, style, stage)

    stage("the answers and the decision matrix")
    recs = ans.recommend(scored)
    view = answer_data(data, scored, recs)
    decision = [dict(d, wall_warning=sorted(e for e in d["env_ids"] if e in warn)) for d in view["decision"]]
    inventory, failures = _inventory(data)
    stage("variants")
    variants = variant_sections(db, data, suites, anchors=anchors, log=log)
    # The claims of the suites asked for; by default of every claim suite in the store (which the
    # rest of the report leaves out, see scoring.load).
    stage("claims")
    claim_rows = cl.rows(cl.evaluate(db, suites, anchors=anchors))
    stage("implementation parity")
    parity_rows = _parity_rows(runs, flagged, data)

    stage("figures")
    for sec in env_sections:
        sec["figures"], sec["diagnostics"] = sec["figures"].result(), sec["diagnostics"].result()
    if across is not None:
        across.update(aggregate=across["aggregate"].result(), profiles=across["profiles"].result(),
                      improvement=[f.result() for f in across["improvement"]])
    html = _render(
        title="bench report: " + (", ".join(data.suites) or "empty store"),
        generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        store=_describe(data.store_url), suites=data.suites, inventory=inventory, failures=failures,
        provenance=_provenance(data), warnings=warn,
        notes=data.notes, envs=env_sections, across=across, unanchored=data.unanchored, correction=ans.CORRECTION,
        decision=decision, criteria=[(k, v.meaning) for k, v in an.CRITERIA.items()], sensitivity=an.SENSITIVITY,
        lm_criteria=list(cl.LM_CRITERIA.items()) if view["lm"] else [],
        recs=view["recs"], n_runs=len(data.runs), n_pooled=int(len(runs)),
        n_boot=an.N_BOOT, anchors=data.anchors, rules=_rules(), contended=int(runs["contended"].sum()) if len(runs) else 0,
        hardware_line=an.hardware_line(scored), track=view["track"], claims=claim_rows,
        published_source=SOURCE, parity=parity_rows, parity_margin=f"{par.MARGIN:g}", variants=variants,
        off_policy=[line_text(x) for x in off_policy_lines(data, recs)],
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    path.write_text(html, encoding="utf-8")
    if log:
        log(f"report built in {time.perf_counter() - t0:.1f}s from {len(data.runs)} runs")
    return path


def _env_sections(db: ReadModel, painter: fg.Painter, data: an.Data, scored: Any, style: fg.Style,
                  warn: dict[str, str], stage: Callable[[str], None]) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """One section per env (its figures still futures), and the runs flagged as collapsed."""
    runs = scored.runs
    # Each env's figures first, so the drawing processes start while the flags and the tables are computed.
    diag_rows = _rows_by_env(data.diagnostics, runs)
    drawn = {env_id: _draw_env(painter, env_id, c, runs, data, style, diag_rows.get(env_id, []))
             for env_id, c in scored.curves.items()}
    flagged = collapse.flags(runs, data.episodes, data.diagnostics, data.anchors, data.traits)
    last_eval = _last_evaluations(db, runs)
    env_sections = []
    for i, (env_id, c) in enumerate(scored.curves.items()):
        stage(f"tables of {env_id} ({i + 1} of {len(scored.curves)})")
        g = runs[runs["env"] == env_id]
        a = data.anchors.get(env_id)
        thr = data.traits.get(env_id, {}).get("threshold")
        table = an.final_table(scored, env_id)
        env_sections.append(dict(
            id=f"env-{_slug(env_id)}", env=env_id, traits=an.category_of(data.traits[env_id]),
            threshold=f"{thr:g}" if thr is not None else "—", random=f"{a.random_return:.4g}" if a else "—",
            anchor=f"{a.episodes} random episodes, seed {a.seed}" if a else "none",
            warning=warn.get(env_id),
            figures=drawn[env_id][0], diagnostics=drawn[env_id][1],
            table=[dict(label=t.label, impl=t.impl, runs=t.runs, iqm=mx.interval_text(t.iqm, t.lo, t.hi, t.kind),
                        median=_f(t.median), success=f"{t.solved}/{t.runs} = {t.success:.2f} [{t.success_lo:.2f}, {t.success_hi:.2f}]",
                        median_steps=_reached(t.median_steps, 0), median_cpu=_reached(t.median_cpu, 1),
                        contended=t.contended,
                        run_time=f"{_f(t.run_wall, 1)} / {_f(t.run_cpu, 1)}",
                        memory=_bytes(t.memory))
                   for t in table.itertuples()],
            horizon=f"{scored.horizons[env_id]:,.1f} CPU s" if env_id in scored.horizons else "none",
            flags=flagged[flagged["env"] == env_id].sort_values(["label", "seed"]).to_dict("records"),
            budget=f"{data.budgets.get(env_id, 0):,}",
            cpu_budget=f"{data.cpu_budgets[env_id]:,g}" if env_id in data.cpu_budgets else None,
            published=_published_rows(g, env_id, data.budgets.get(env_id, 0), last_eval),
        ))
    return env_sections, flagged


def _across(painter: fg.Painter, scored: Any, style: fg.Style, stage: Callable[[str], None]) -> dict[str, Any] | None:
    """The across-envs section (its figures still futures), or ``None`` without normalised scores."""
    if not an.normalised_envs(scored):
        return None
    stage("across environments")
    runs = scored.runs
    agg = an.across_envs(scored)
    pim = an.improvement_matrix(scored)
    # Best first (as the aggregate figure ranks them), so the top rows and first columns are the leaders.
    have = set(runs.loc[runs["final_norm"].notna(), "label"])
    ranked = [lb for lb in agg.sort_values("iqm", ascending=False)["label"] if lb in have]
    plabels = ranked + sorted(have - set(ranked))
    return dict(
        aggregate=painter.draw(fg.fig_aggregate, agg, style),
        profiles=painter.draw(fg.fig_profiles, runs[["label", "env", "final_norm"]], style),
        improvement=[painter.draw(fg.fig_improvement, pim, plabels, cols) for cols in fg.improvement_blocks(plabels)]
        if len(plabels) > 1 else [],
        table=[dict(label=r.label, impl=r.impl, envs=r.envs, runs=r.runs, iqm=mx.interval_text(r.iqm, r.lo, r.hi, r.kind))
               for r in agg.itertuples()],
    )


def _parity_rows(runs: pd.DataFrame, flagged: pd.DataFrame, data: an.Data) -> list[dict[str, Any]]:
    """The implementation-parity table: every algorithm with two implementations, per env."""
    return [row for algo, a, b in par.implementation_pairs(runs)
            for row in parity_table_rows(par.parity(
                runs, a, b, flagged=set(zip(flagged["key"], flagged["kind"])),
                checkable=collapse.checkable(data.diagnostics)), algo)]


def _render(**page: Any) -> str:
    """The page: ``report.html.j2`` rendered with ``page``."""
    # Lazy: jinja2 loads only for a page being written, not for the report's other readers (answer_data, parity).
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["shade"] = shade
    return env.from_string(TEMPLATE.read_text()).render(**page)


def _draw_env(painter: fg.Painter, env_id: str, c: an.EnvCurves, runs: pd.DataFrame, data: an.Data,
              style: fg.Style, diag_rows: Any) -> tuple[Any, Any]:
    """Futures of one env's curve figures and its diagnostics figure (``runs``: the scored runs of every env;
    ``diag_rows``: the positions of their diagnostics on this env, :func:`_rows_by_env`)."""
    g = runs[runs["env"] == env_id]
    a = data.anchors.get(env_id)
    curves = painter.draw(fg.env_figures, env_id, c, g[_DRAWN], style, data.traits.get(env_id, {}).get("threshold"),
                          a.random_return if a else None)
    diagnostics = painter.draw(fg.fig_diagnostics, env_id, g[["key", "label"]], data.diagnostics.iloc[diag_rows],
                               style, c.steps)
    return curves, diagnostics


def _rows_by_env(frame: pd.DataFrame, runs: pd.DataFrame) -> dict[str, np.ndarray]:
    """Env id → positions (ascending) of the rows of ``frame`` (``key``, …) that belong to ``runs`` on that env:
    the keys hashed once for every env, not the whole frame tested for membership once per env."""
    if not len(frame) or not len(runs):
        return {}
    codes, uniques = pd.factorize(frame["key"])
    env_of = dict(zip(runs["key"], runs["env"]))
    envs = sorted(set(env_of.values()))
    index = {e: i for i, e in enumerate(envs)}
    of_code = np.array([index.get(env_of.get(k), -1) for k in uniques], dtype=np.int64)
    row_env = np.where(codes >= 0, of_code[codes], -1)
    order = np.argsort(row_env, kind="stable")
    bounds = np.searchsorted(row_env[order], np.arange(len(envs) + 1))
    return {e: order[bounds[i]:bounds[i + 1]] for i, e in enumerate(envs)}


def _only(data: an.Data, envs: list[str], keep: Callable[[pd.DataFrame], pd.Series] | None = None) -> an.Data:
    """``data`` cut to the runs on ``envs`` (and, with ``keep``, to the runs it selects)."""
    mask = data.runs["env"].isin(envs)
    if keep is not None:
        mask &= keep(data.runs)
    runs = data.runs[mask].reset_index(drop=True)
    keys = set(runs["key"])
    return dataclasses.replace(data, runs=runs, episodes=data.episodes[data.episodes["key"].isin(keys)],
                               diagnostics=data.diagnostics[data.diagnostics["key"].isin(keys)],
                               traits={e: t for e, t in data.traits.items() if e in envs})


def variant_sections(source: Any, data: an.Data, suites: list[str] | None, *, anchors: bool | AnchorSource = False,
                     log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The report's section per variant suite (``variant:``; ``bench tune --export`` writes ``tuned``):
    its labels beside the runs of the report's other suites on the same envs, in one decision matrix
    per category, and the answer by algorithm from each side alone (the other suites v the variant).

    The answers elsewhere in the report leave variants out (:func:`bench.analysis.scoring.load`): they
    compare algorithms at one effort. Suites named on the command line are reported as named, with no
    section. Each entry: name, variant, envs, decision (as the main matrix's), answers (rows of both sides).
    """
    if suites:
        return []
    with read_model(source) as db:
        return [s for name, variant in an.variant_suites(db).items()
                if (s := _variant_section(db, data, name, variant, anchors=anchors, log=log)) is not None]


def _variant_section(db: ReadModel, data: an.Data, name: str, variant: str, *, anchors: bool | AnchorSource,
                     log: Callable[[str], None] | None) -> dict[str, Any] | None:
    """:func:`variant_sections`' entry for the variant suite ``name``, or None (no runs to set it beside)."""
    mine = db.runs_frame(name)  # the runs table only: which envs and labels, before anything is read
    envs = sorted(mine.loc[mine["status"] == "done", "env"].unique())
    base = sorted(data.runs.loc[data.runs["env"].isin(envs), "suite"].unique()) if envs else []
    if not base:
        if log:
            log(f"variant suite {name!r}: no runs of other suites on its envs to set it beside")
        return None
    # The base first: a run both sides hold (a cell a --set variant left as it was, under the base's label) is
    # read once, as the base's.
    both = _only(an.load(db, [*base, name], anchors=anchors, diagnostics=[]), envs)
    ours = set(mine["label"]) - set(data.runs.loc[data.runs["suite"].isin(base), "label"])
    mark = lambda r: r["label"].isin(ours)  # noqa: E731
    # Each side named by what it is: the variant, and the suites whose runs it varies.
    sides = [(", ".join(base), _only(both, envs, lambda r: ~mark(r))), (variant, _only(both, envs, mark))]
    budgets = {side: _budgets(d) for side, d in sides}
    note = ""
    if len(set(map(frozenset, budgets.values()))) > 1:
        # Runs are compared at one budget per env (bench.analysis.readmodel._pool): a variant of the budget
        # would set one side aside. Each side is then read, scored and shown at its own budget.
        sides = [(side, _only(an.load(db, suites, anchors=anchors, diagnostics=[]), envs, keep))
                 for (side, _), suites, keep in zip(sides, (base, [name]), (lambda r: ~mark(r), None))]
        note = ("The two sides ran at other budgets (" + "; ".join(
            f"{side}: {', '.join(f'{e} {t:,} steps' for e, t in sorted(b))}" for side, b in budgets.items())
            + "), and runs are compared at one budget per env: each side has its own matrix, at its own budget.")
        blocks = [(side, d) for side, d in sides]
    else:
        blocks = [("", both)]
    decision = []
    for side, d in blocks:
        scored = an.score(d)
        dm = mx.decision_matrix(scored, d.sensitivity, recs=ans.recommend(scored, track_record=False))
        decision += [dict(category=cat + (f" · {side}" if side else ""), envs=", ".join(e),
                          criteria=mx.criteria_of(dm, cat), rows=mx.decision_rows(dm, cat))
                     for cat, e in an.categories(scored).items()]
    answers = []
    for side, d in sides:
        for row in ans.recommendation_rows(ans.recommend(an.score(d))):
            if row.get("envs"):
                answers.append(dict(row, side=side))
    return dict(name=name, variant=variant, envs=", ".join(envs), base=", ".join(base), answers=answers,
                decision=decision, note=note)


def _budgets(data: an.Data) -> set[tuple[str, int]]:
    """The (env, budget) pairs of ``data``'s done runs."""
    done = data.runs[data.runs["status"] == "done"]
    return {(str(e), int(t)) for e, t in zip(done["env"], done["timesteps"])}


def parity_table_rows(envs: list[Any], algo: str = "") -> list[dict[str, str]]:
    """Display rows of :func:`bench.stats.parity.parity` results: one per env and metric (the report's
    parity table and ``bench parity`` print the same)."""
    def pair(d: dict[str, float], fmt: str) -> str:
        return " / ".join("—" if not np.isfinite(v) else format(v, fmt) for v in d.values()) if d else "—"

    rows = []
    for ep in envs:
        for c in ep.comparisons:
            lo, hi = c.ci
            diff = f"{c.diff:+.3f}" + (f" [{lo:+.3f}, {hi:+.3f}]" if np.isfinite(lo) and lo != hi else "")
            note = (f"{c.seeds_needed} runs per label needed" if c.seeds_needed else
                    c.reason if c.verdict != "inconclusive" or not np.isfinite(lo) else "")
            rows.append(dict(algo=algo, a=ep.label_a, b=ep.label_b, env=ep.env, metric=c.metric, diff=diff,
                             verdict=c.verdict, note=note, runs=f"{c.n_a} / {c.n_b}",
                             success=pair(ep.success, ".2f"), median_steps=pair(ep.median_steps, ",.0f"),
                             collapsed=pair(ep.collapsed, ".2f")))
    return rows


def _last_evaluations(db: ReadModel, runs: pd.DataFrame) -> dict[str, float]:
    """Run key → its last evaluation's mean return, for runs on envs with a published number."""
    envs = {e for _, e in PUBLISHED}
    keys = runs.loc[runs["env"].isin(envs), "key"].tolist() if len(runs) else []
    return db.last_evaluations(keys) if keys else {}


def _published_rows(g: pd.DataFrame, env_id: str, budget: int, last_eval: dict[str, float]) -> list[dict[str, Any]]:
    """One row per label of ``g`` (one env's pooled runs) whose algorithm has a published number.

    The zoo evaluates its one trained agent's deterministic policy, so each run contributes its last
    periodic evaluation where the suite asked for evaluations, else its final (trailing-mean, stochastic
    policy) training return, and the row says which.
    """
    rows = []
    for label, r in g.groupby("label", sort=True):
        pub = published_for(str(r["algo"].iloc[0]), env_id)
        if pub is None:
            continue
        evals = [last_eval.get(k) for k in r["key"]]
        use_eval = all(v is not None for v in evals)
        values = np.array(evals if use_eval else r["final_return"].to_numpy(float), dtype=float)
        values = values[np.isfinite(values)]
        if values.size == 0:
            continue
        c = check(values, pub, budget)
        rows.append(dict(
            label=label, algo=pub.algo, impl=str(r["impl"].iloc[0]), runs=c.runs,
            ours=f"{c.median:.4g} [{c.q25:.4g}, {c.q75:.4g}]",
            measure="last evaluation (deterministic)" if use_eval else "final training return (trailing mean)",
            zoo=f"{pub.mean:.4g} ± {pub.std:.3g}", zoo_env=pub.zoo_env, zoo_budget=f"{pub.timesteps:,}",
            verdict=("more than one IQR below the zoo" if c.below else
                     "within one IQR of the zoo or above" if c.same_budget else
                     f"not comparable: budget {budget:,} vs the zoo's {pub.timesteps:,}"),
            below=c.below,
        ))
    # A flag asks "this implementation or these settings?": the SB3 baseline ran the same settings beside it.
    for row in rows:
        if not row["below"] or row["impl"] == "sb3":
            continue
        sb3 = [o for o in rows if o["algo"] == row["algo"] and o["impl"] == "sb3"]
        if sb3:
            o = sb3[0]
            row["verdict"] += (f"; so is {o['label']} with the same settings: the settings, not this implementation"
                               if o["below"] else
                               f", where {o['label']} with the same settings is not: look at this implementation")
    return rows


def shade(rank: float | None) -> str:
    """A decision-matrix cell's background for its ``rank`` in its column (:func:`bench.analysis.matrix.decision_rows`,
    1 the best): from near-white to mid blue (ColorBrewer's "Blues", light enough for black text throughout);
    no shade without a score."""
    if rank is None:
        return ""
    lo, hi = (247, 251, 255), (107, 174, 214)  # Blues 9-class, first and sixth
    rgb = [round(a + (b - a) * min(1.0, max(0.0, rank))) for a, b in zip(lo, hi)]
    return "background: #{:02x}{:02x}{:02x}".format(*rgb)


def _describe(source: str) -> str:
    """The report's source (a store's URL or ``packs:FOLDER``) as its header names it, password hidden."""
    from bench.storage.urls import describe_url

    return describe_url(source)


def _bytes(m: dict[str, int] | None) -> str:
    """``model_memory`` as a short text: total, and how much of it is optimiser state."""
    if not m or not m.get("total_bytes"):
        return "—"
    kb = lambda b: f"{b / 1024:,.0f} KiB" if b < 1024 ** 2 else f"{b / 1024 ** 2:,.1f} MiB"  # noqa: E731
    return f"{kb(m['total_bytes'])} ({kb(m.get('optimizer_bytes', 0))} optimiser)"


def _rules() -> dict[str, Any]:
    return dict(alpha=an.ALPHA, min_seeds=an.MIN_SEEDS, min_envs=an.MIN_ENVS, min_ci=stats.MIN_CI_RUNS,
                min_envs_generalise=MIN_ENVS_GENERALISE,
                min_cvar=stats.MIN_CVAR_CI_RUNS, contention=an.CONTENTION_RATIO, cvar=an.CVAR_ALPHA,
                log_std_drop=collapse.LOG_STD_DROP, stall=collapse.STALL, spike=collapse.SPIKE_FACTOR)


# --------------------------------------------------------------------------- #
# Screenshot (headless Chromium)
# --------------------------------------------------------------------------- #
def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if p := shutil.which(name):
            return p
    return None


#: Flags for a quiet, offline, throwaway headless browser.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars")


def screenshot(html: Path, png: Path, *, width: int = 1400, height: int = 2400, timeout: float = 120) -> Path:
    """Render ``html`` in headless Chromium and save the top ``width × height`` pixels as ``png``.

    :raises FileNotFoundError: no Chromium on PATH (Debian: ``apt-get install chromium``).
    """
    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
    png = png.resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
                        f"--window-size={width},{height}", html.resolve().as_uri()],
                       capture_output=True, timeout=timeout, check=False)
    if not png.is_file():
        raise RuntimeError(f"chromium did not write {png}")
    return png

