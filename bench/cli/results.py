"""Reading results: ``bench report``, ``recommend``, ``export``, ``import`` and ``parity``."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path
from typing import Any, Optional

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from bench import api
from bench.cli.base import StoreOpt, _bad_input, _choice, _results_store, _store_url, err, out

def report(
    suites: Optional[list[str]] = typer.Argument(None, help="Suite names in the store, or suite YAML files (default: every suite in the store)."),
    store: str = StoreOpt,
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Output folder (default: reports/<suite name>/, or reports/all/)."),
    screenshot: Optional[Path] = typer.Option(None, "--screenshot", help="Also save a PNG of the page's top 1400×2400 pixels (needs chromium)."),
    workers: Optional[int] = typer.Option(None, "--workers", min=0, help="Processes drawing the figures beside the one computing the tables (default: one per core; 0: draw there too; a report of fewer than 6 envs draws there)."),
) -> None:
    """Write a self-contained HTML report (index.html, figures embedded) from the store alone."""
    # A store whose runs all failed still gets a report: it lists the failures and their errors.
    store_url = _store_url(store)
    try:
        if err.is_terminal:  # a live line of the step under way; logs and CI get only the lines that stay
            with err.status("report: reading the store") as live:
                path = api.report(suites, store_url, out_dir, screenshot=screenshot, log=lambda s: err.print(s),
                                  stage=lambda s: live.update(f"report: {s}"), workers=workers)
        else:
            path = api.report(suites, store_url, out_dir, screenshot=screenshot, log=lambda s: err.print(s),
                              workers=workers)
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    out.print(f"report: {path}")


def export(
    store: str = StoreOpt,
    suite: Optional[str] = typer.Option(None, "--suite", help="Only this suite (by name)."),
    what: str = typer.Option("runs", "--what", help="runs (one row per run), episodes (one row per training "
                             "episode: the learning curves), evaluations (one row per periodic evaluation, eval:) or "
                             "diagnostics (one row per stored diagnostic point)."),
    format: str = typer.Option("csv", "--format", help="csv, parquet or json (records) of --what; pack (the suite's "
                               "store tables as compact files in the folder --out, the shipped reference's format; needs "
                               "--suite); rliable-npz or rliable-json (normalised per-run scores, label → (runs × envs), "
                               "as the report computes them)."),
    score: str = typer.Option("final", "--score", help="With rliable-*: final (normalised final return, the report's "
                              "across-env IQM), samples (normalised AUC vs env steps) or time (vs CPU seconds)."),
    out_path: Path = typer.Option(..., "--out", help="Output file (a folder for --format pack)."),
    keep: str = typer.Option("all", "--keep", help="With --format pack, what of a suite not yet finished: all (its "
                             "runs as they stand), done (the finished runs; every other cell packed as pending, "
                             "without rows, so that `bench import` then `bench run` starts it afresh) or envs (only "
                             "the envs whose every run finished; the other envs' cells all pending)."),
) -> None:
    """Export runs, episodes, evaluations or diagnostics as CSV, Parquet or JSON; normalised scores for rliable; or
    pack a suite."""
    store_url = _store_url(store)
    try:
        line = api.export(store_url, out_path, suite=suite, what=what, format=format, score=score, keep=keep,
                          log=lambda s: err.print(s, markup=False))
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    err.print(line, markup=False)


def import_(
    packs: list[Path] = typer.Argument(..., help="Packs (folders `bench export --format pack` wrote), or folders of "
                                       "packs, e.g. results/reference/minatar or results/reference."),
    store: str = StoreOpt,
) -> None:
    """Load packed results into a store (SQLite or PostgreSQL): to go on with a packed suite
    (`bench run` then skips its done cells), or to put the shipped reference beside your own runs."""
    store_url = _store_url(store)
    try:
        line = api.import_packs(packs, store_url)
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    err.print(line, markup=False)


def _values(allowed: tuple[str, ...]):
    """Shell completion for an option that takes one of ``allowed`` (``bench --install-completion``)."""
    return lambda incomplete: [v for v in allowed if v.startswith(incomplete)]


def recommend(
    action: Optional[str] = typer.Option(None, "--action", help="discrete | continuous (default: both).",
                                         autocompletion=_values(api.ACTIONS)),
    obs: Optional[str] = typer.Option(None, "--obs", help="vector | pixels | sequence (tokens; default: all).",
                                      autocompletion=_values(api.OBS)),
    reward: Optional[str] = typer.Option(None, "--reward", help="dense | sparse (default: both).",
                                         autocompletion=_values(api.REWARDS)),
    priority: Optional[str] = typer.Option(None, "--priority", help="samples | time (default: both; wall-clock = time).",
                                           autocompletion=_values(api.PRIORITIES + ("wall-clock",))),
    fmt: str = typer.Option("table", "--format", help="table | markdown | json | csv."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Scores, runner-up, track record and envs too."),
    store: Optional[str] = typer.Option(None, "--store", help="Answer from this results store (SQLAlchemy URL) "
                                        "instead of the shipped reference (results/reference)."),
    with_reference: bool = typer.Option(False, "--with-reference", help="Two tables: the store's (--store, default "
                                        f"{api.DEFAULT_URL}), then the shipped reference's."),
) -> None:
    """Which algorithm for my problem? The matching rows of the recommendation table, with their evidence:
    the shipped reference's, or with --store your own store's."""
    action = _choice("--action", action, api.ACTIONS)
    obs = _choice("--obs", obs, api.OBS)
    reward = _choice("--reward", reward, api.REWARDS)
    priority = _choice("--priority", "time" if priority == "wall-clock" else priority, api.PRIORITIES)
    fmt = _choice("--format", fmt, ("table", "markdown", "json", "csv"))
    if with_reference and fmt in ("json", "csv"):
        raise _bad_input(f"--with-reference: prints two tables; allowed with --format table or markdown (got {fmt!r})")

    sources: list[tuple[Any, str, str]] = []  # (url or Reference, its name in the table's title, the line saying so)
    if store is not None or with_reference:
        source, where = _results_store(_store_url(store), fallback=False)
        sources.append((source, str(source), where))
    if store is None:
        ref = api.reference(log=lambda s: err.print(s, markup=False))
        if ref is not None:
            sources.append((ref, ref.name, f"reading the project's shipped reference results ({ref.folder}/)"))
        elif with_reference:
            raise _bad_input("--with-reference: no shipped reference here (no packs under results/reference, nor in "
                             "the checkout bench runs from); allowed: a checkout of bench")
        else:  # a wheel installed on its own: the default store, as before the reference shipped
            source, where = _results_store(_store_url(None), fallback=False)
            sources.append((source, str(source), where))
    for i, (source, name, where) in enumerate(sources):
        if i:
            print()
        err.print(where, markup=False)
        _recommend_from(source, name, action=action, obs=obs, reward=reward, priority=priority, fmt=fmt, verbose=verbose)


def _recommend_from(source: Any, name: str, *, action: Optional[str], obs: Optional[str], reward: Optional[str],
                    priority: Optional[str], fmt: str, verbose: bool) -> None:
    """One recommendation table, from ``source`` (a store's URL or the shipped reference: :func:`bench.api.recommend`),
    titled with its ``name``."""
    answer = api.recommend(source, action=action, obs=obs, reward=reward, priority=priority,
                           log=lambda s: err.print(s, markup=False))
    for line in answer.left_out:  # left out by the read: say so, once each
        err.print(line, markup=False)
    rows = answer.rows
    if fmt == "json":
        print(json.dumps(rows, indent=2, default=str))
        return
    if fmt == "csv":
        import pandas as pd  # only here: importing it costs every other command most of a second

        flat = [{**r, "envs": ";".join(r["envs"]), "tested_envs": ";".join(r["tested_envs"]),
                 "effects": ";".join(f"{k}={v:.4g}" for k, v in r["effects"].items()),
                 "pooling": ";".join(r["pooling"]),
                 "runs": ";".join(f"{k}={v}" for k, v in r["runs"].items())} for r in rows]
        print(pd.DataFrame(flat).to_csv(index=False), end="")
        return
    shown = rows if verbose else [r for r in rows if r["envs"]]
    cols = _recommend_columns(verbose)
    cells = [[_recommend_cell(r, c) for c in cols] for r in shown]
    if fmt == "markdown":
        print(f"bench recommend — {name}\n")
        print("| " + " | ".join(cols) + " |")
        print("|" + "|".join("---" for _ in cols) + "|")
        for line in cells:
            print("| " + " | ".join(x.replace("|", "\\|").replace("\n", "<br>") for x in line) + " |")
    elif verbose:  # one block per row: details do not fit a table in 100 columns
        print(f"bench recommend — {name}")
        for r in shown:
            print(f"{_recommend_cell(r, 'problem')}, priority {r['priority']}")
            for c in ("can still be best", "ruled out, p", "default (regret)", "regret", "not on every env", "track",
                      "headline", "implementations", "p (Holm)", "headline envs", "track record", "evidence", "score",
                      "runner-up", "per env", "pooling", "note"):
                print(textwrap.fill(_recommend_cell(r, c), width=100, initial_indent=f"  {c + ':':<19}",
                                    subsequent_indent=" " * 21))
    else:
        t = Table(title=f"bench recommend — {name}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  expand=True)
        # The answer's three parts get the most room: they are the point.
        ratio = {"problem": 2, "can still be best": 4, "ruled out": 3, "default (regret)": 3, "envs": 2, "track": 2}
        for c in cols:
            t.add_column(c, overflow="fold", no_wrap=c in ("priority",), ratio=ratio.get(c))
        for line in cells:
            t.add_row(*(Text(x) for x in line))  # user strings stay literal text, never markup
        out.print(t, width=min(100, out.width))  # the table fits 100 columns (long cells fold)
    if len(shown) < len(rows):
        equal_only = answer.legend["equal_compute_only"]
        for why, pick in (("no measured env", lambda r: r["message"] != equal_only),
                          ("by samples: envs run only at an equal CPU budget, where sample efficiency is not scored",
                           lambda r: r["message"] == equal_only)):
            empty = sorted({f"{r['action']} {r['obs']} {r['reward']}" for r in rows if not r["envs"] and pick(r)})
            if empty:
                print(textwrap.fill(f"insufficient evidence ({why}): {'; '.join(empty)}", width=100))
    twins = sorted({c for r in shown for c in r["candidates"] + [x["label"] for x in r["ruled_out"]] if " = " in c})
    if twins and not verbose:
        print(textwrap.fill("counted once (identical returns on every env and seed): " + "; ".join(twins), width=100))
    by_hw: dict[str, list[str]] = {}
    for r in shown:
        if r["hardware"]:
            by_hw.setdefault(r["hardware"], []).append(f"{r['action']} {r['obs']} {r['reward']}")
    for h, profiles in by_hw.items():  # in the table's order
        head = "time" if len(by_hw) == 1 else f"time, {'; '.join(profiles)}"
        print(textwrap.fill(f"{head}: {h}", width=100))
    seq_envs = sorted({e for r in shown if r["obs"] == "sequence" for e in r["envs"]})
    if seq_envs:  # the language-model track's own criteria, lower is better (bench report's decision matrix)
        for crit, got in answer.lm_lines:  # computed on the sequence envs of every row with envs: those shown
            print(textwrap.fill(f"{crit} (sequence tasks, lower is better): {'; '.join(got)}", width=100))
    _print_legend(answer.legend)
    if verbose:
        _print_off_policy(answer.off_policy, fmt)



def _print_legend(g: dict[str, Any]) -> None:
    """What the compact table's three parts and its track mean, under the table."""
    print(textwrap.fill(
        f"Can still be best: not shown worse than another label over the envs (paired t-tests, Bonferroni over each "
        f"label's comparisons; a {1 - g['alpha']:.0%} set per row, none from one env). Default: the store's single best "
        "among them unless the row's envs show another ahead; regret: mean shortfall to each env's best [t interval "
        "over envs: not a 95% interval for the next env, 35-90% in simulation]. Track: leave-one-env-out, envs whose "
        "best was in the set / trials; regret of the default v the single best, the honest next-env figure. Details: "
        "--verbose, docs/statistics.md.", width=100))

def _print_off_policy(lines: list[str], fmt: str) -> None:
    """The off-policy reference lines (:mod:`bench.analysis.offpolicy`) under the table, one per profile."""
    if not lines:
        return
    head = ("off-policy reference (SB3 DQN, SAC, TD3: never candidates above; best of them against the answer, "
            "normalised AUC at equal samples and at equal CPU time over each env's common budget; p not adjusted):")
    print()
    print(head if fmt != "markdown" else f"**{head}**\n")
    for text in lines:
        print(f"- {text}" if fmt == "markdown" else textwrap.fill(text, width=100, initial_indent="  ",
                                                                  subsequent_indent="    "))


def parity(
    label_a: str = typer.Argument(..., help="A label in the store, e.g. ppo-bench."),
    label_b: str = typer.Argument(..., help="The label to compare it with, e.g. ppo-sb3."),
    env: Optional[list[str]] = typer.Option(None, "--env", help="Only this env (repeat for several; default: every "
                                            "env both labels ran)."),
    margin: float = typer.Option(0.05, "--margin", help="Equivalence margin on the normalised scale (0 = random "
                                 "policy, 1 = threshold)."),
    fmt: str = typer.Option("table", "--format", help="table | json."),
    store: str = StoreOpt,
) -> None:
    """Are two labels the same algorithm? Per env: equivalent, different or inconclusive, with the evidence."""
    fmt = _choice("--format", fmt, ("table", "json"))
    store_url = _store_url(store)
    try:
        res = api.parity(label_a, label_b, envs=env or None, margin=margin, store=store_url,
                         log=lambda s: err.print(s, markup=False))
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    if fmt == "json":
        print(json.dumps([dict(env=ep.env, verdict=ep.verdict, success=ep.success, median_steps=ep.median_steps,
                               collapsed=ep.collapsed, collapse_checks=ep.collapse_checks,
                               comparisons=[dataclasses.asdict(c) for c in ep.comparisons])
                          for ep in res.envs], indent=2, default=str))
        return
    t = Table(title=f"bench parity {label_a} {label_b}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    cols = ["env", "metric", "A − B [95% CI]", "verdict", "runs", "success", "median steps", "collapsed"]
    for c in cols:
        t.add_column(c, overflow="fold")
    for r in res.rows:
        verdict = r["verdict"] + (f" ({r['note']})" if r["verdict"] == "inconclusive" and r["note"] else "")
        t.add_row(*(Text(x) for x in (r["env"], r["metric"], r["diff"], verdict, r["runs"], r["success"],
                                      r["median_steps"], r["collapsed"])))
    out.print(t)
    for ep in res.envs:
        print(f"{ep.env}: {ep.verdict}")
    print(f"equivalent: the 90% Welch interval of A − B within ±{margin:g} (two one-sided tests at "
          f"{res.alpha:g}); different: Welch's test rejects equal means at {res.alpha:g}; otherwise inconclusive, "
          "with the runs per label for 80% power. Scores normalised: 0 = random policy, 1 = threshold. "
          "A / B: success rate, median env steps to the threshold, fraction of runs flagged as collapsed ('—': "
          "nothing the detector could check, e.g. SB3 records no gradient norm).")


def _recommend_columns(verbose: bool) -> list[str]:
    base = ["problem", "priority", "can still be best", "ruled out", "default (regret)", "envs", "track"]
    return base + ["ruled out, p", "regret", "not on every env", "headline", "p (Holm)", "headline envs", "LOO", "impl", "runs", "score", "runner-up",
                   "per env", "pooling", "note"] if verbose else base


def _by_algorithm(labels: list[str], parts: dict[str, list[str]]) -> str:
    """Labels grouped by algorithm, in their order: ``trpo (bench, sb3), ppo (sb3)``, where a label is named
    ``algorithm-implementation``; any other label (a twin ``a = b``, a custom name) stays as it is."""
    groups: dict[str, list[str]] = {}
    for lb in labels:
        algo, impl = parts.get(lb, ("", ""))
        key, item = (algo, impl) if algo and lb == f"{algo}-{impl}" else (lb, "")
        groups.setdefault(key, []).append(item)
    return ", ".join(k if not any(v) else f"{k} ({', '.join(x for x in v if x)})" for k, v in groups.items())


def _recommend_cell(r: dict, col: str) -> str:
    if col == "problem":
        return f"{r['action']} {r['obs']} {r['reward']}"
    if col == "can still be best":
        return _by_algorithm(r["candidates"], r["label_parts"]) or "—"
    if col == "ruled out":
        return _by_algorithm([x["label"] for x in r["ruled_out"]], r["label_parts"]) or "—"
    if col == "default (regret)":
        return f"{r['default']} {r['default_regret']}" if r["default"] else "—"
    if col == "ruled out, p":
        return "; ".join(f"{x['label']} p {x['p']:.2g} (behind {x['behind']})" for x in r["ruled_out"]) or "—"
    if col == "track":
        return r["choice_track"] or "—"
    if col == "regret":
        return "; ".join(f"{k} {v}" for k, v in r["regrets"].items()) or "—"
    if col == "not on every env":
        return ", ".join(r["partial"]) or "—"
    if col == "headline":
        return r["answer"]
    if col == "p (Holm)":
        return r["p_text"]
    if col in ("impl", "implementations"):
        return r["impl"] or "—"
    if col == "envs":
        return str(len(r["envs"])) if r["envs"] else "—"
    if col == "headline envs":
        n, k = len(r["envs"]), len(r["tested_envs"])
        if not n:
            return "—"
        head = f"{n}" if k == n else f"{k} of {n}"
        return f"{head}: {r['directions']}" if r["directions"] else head
    if col in ("LOO", "track record"):
        return r["track_record"] or "—"
    if col == "runs":
        return r["evidence"].split(", ", 1)[-1].removesuffix(" runs") if r["envs"] else "—"
    if col == "evidence":  # every env named, the untested too (an answer of insufficient evidence says on what)
        untested = [e for e in r["envs"] if e not in r["tested_envs"]]
        return (r["evidence"] + (f"; tested on {', '.join(r['tested_envs'])}" if r["tested_envs"] else "")
                + (f"; not tested on {', '.join(untested)}" if untested else ""))
    if col == "runner-up":
        return f"{r['runner_up']}: {r['runner_up_score']}" if r["runner_up"] else "—"
    if col == "per env":
        return "; ".join(f"{e} {d:+.3g}" for e, d in r["effects"].items()) or "—"
    if col == "pooling":
        return "; ".join(r["pooling"]) or "—"
    if col == "note":
        return "; ".join(x for x in (r["message"], r["implementation"]) if x)
    return str(r.get(col) or "—")
