"""``bench run`` and ``bench status``: a suite's cells run (with live progress), and where each stands."""

from __future__ import annotations

import sys
import threading
import time
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from bench import api
from bench.distribution import NAME as DIST
from bench.cli.base import SetOpt, StoreOpt, _bad_input, _fmt, _store_url, _styled, err, out

#: How often ``bench run`` writes a progress line when stderr is not a terminal (a log file, CI).
PROGRESS_LINE_EVERY_S = 300.0
#: Above this many cells a dry run prints plain aligned lines, not a table: rich lays a table out cell by
#: cell, 40 s for 100,000 cells (docs/getting-started.md has the measurement).
DRY_RUN_TABLE_MAX = 1_000
#: ``bench status`` lists every cell of a suite this small; a larger one is summed up per env × label (a table of
#: 12,000 cells took rich 19.8 s to lay out, docs/getting-started.md), unless ``--cells`` asks for every cell.
STATUS_CELLS_MAX = 20
#: Failed cells named below ``bench status``'s summary; the rest are counted.
STATUS_FAILURES_MAX = 10


class Executor(str, Enum):
    local = "local"
    ray = "ray"


class Remeasure(str, Enum):
    contended = "contended"


def _choices(flag: str):
    """Shell completion (``bench --install-completion``) of a one-line run's ``flag``."""
    return lambda incomplete: [v for v in api.oneline_choices(flag) if v.startswith(incomplete)]


def run(
    suite: Optional[Path] = typer.Argument(None, help="Suite YAML file (or --env and --algo: a one-line run)."),
    store: str = StoreOpt,
    workers: Optional[int] = typer.Option(
        None, "--workers", min=1,
        help="Worker processes (default: number of cores); with --executor ray --address: at most this many cells at once.",
    ),
    only: Optional[str] = typer.Option(None, "--only", help="Run a subset, e.g. env=CartPole-v1,algo=ppo."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the cells that would run; touch nothing."),
    replace: bool = typer.Option(
        False, "--replace", help="Replace the grid of a suite of the same name already in the store (default: refuse)."
    ),
    executor: Executor = typer.Option(
        Executor.local, "--executor", help="local: a process pool on this machine; ray: one Ray task per cell."
    ),
    address: Optional[str] = typer.Option(
        None, "--address", help="With --executor ray: the cluster (auto or HOST:PORT); default: start a local Ray."
    ),
    remeasure: Optional[Remeasure] = typer.Option(
        None, "--remeasure",
        help="contended: also run again the done runs that shared their core (wall > 1.25 × CPU seconds), and "
             "replace each one only if the new run had its core to itself; the earlier clocks are kept in its metadata.",
    ),
    tensorboard: Optional[Path] = typer.Option(None, "--tensorboard", help="Also write each run's scalars as "
                                               f"TensorBoard events under DIR/<label>/<env>/seed<k> ({DIST}[tensorboard])."),
    wandb: Optional[str] = typer.Option(None, "--wandb", help=f"Also log each run to this W&B project ({DIST}[wandb]; "
                                        "WANDB_MODE=offline needs no network)."),
    artifacts: Optional[Path] = typer.Option(None, "--artifacts", help="Folder for saved policies (suite save:); "
                                             "default beside a SQLite store, else results/policies."),
    verbose: bool = typer.Option(False, "--verbose", help="Let the W&B client (--wandb) print its own lines; "
                                 "by default it is silent."),
    yes: bool = typer.Option(False, "--yes", help="Start a suite whose estimated cost needs confirming (over 1,000 "
                             "CPU-hours, or over 1e8 steps per run on an env with no time scale)."),
    overrides: Optional[list[str]] = SetOpt,
    env: Optional[str] = typer.Option(None, "--env", help="One-line run, no suite file: this env id (with --algo).",
                                      autocompletion=_choices("--env")),
    algo: Optional[str] = typer.Option(None, "--algo", help="One-line run: this algorithm.",
                                       autocompletion=_choices("--algo")),
    impl: Optional[str] = typer.Option(None, "--impl", help="One-line run: bench (default), sb3 or numpy.",
                                       autocompletion=_choices("--impl")),
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, help="One-line run: seeds 0..N-1 (default 3)."),
    timesteps: Optional[int] = typer.Option(None, "--timesteps", min=1, help="One-line run: budget in env steps "
                                            "(default: rl-baselines3-zoo's for the algorithm on the env)."),
) -> None:
    """Run a suite: every env × algorithm × seed cell, skipping cells already done.

    Without a suite file, --env and --algo make one (a one-line run): it is written beside the store
    (``results/bench.db`` → ``results/bench.suites/``; --dry-run prints it instead) and run like any suite.
    """
    store_url = _store_url(store)
    try:
        made = _oneline(suite, env, algo, impl, seeds, timesteps, store_url, overrides or ())
        plan = api.plan_run(made.path if made else suite, store_url, only=only, overrides=overrides or (),
                            workers=workers, executor=executor.value, address=address, replace=replace,
                            text=made.text if made else None)
        if made and not dry_run:
            api.write_oneline_suite(made, check=True)
        plan = plan.with_outputs(api.run_outputs(store_url, tensorboard, wandb, artifacts, verbose=verbose))
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    _warn_loopback(store_url, address)
    if dry_run:
        return _dry_run(plan, remeasure is not None, made)
    live = _LiveRun(plan, made, executor, address, remeasure is not None)
    try:
        result = api.run_suite(plan, replace=replace, remeasure=remeasure is Remeasure.contended, yes=yes,
                               on_start=live.on_start, on_done=live.on_done, on_poll=live.on_poll,
                               log=lambda s: err.print(s))
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    finally:
        live.progress.stop()
    if result.interrupted is not None:
        raise _interrupted(result)
    failed = _closing(result.suite, result.results, result.done_before, result.busy, result.seconds)
    _outputs(plan)
    if failed:
        raise typer.Exit(1)


def _warn_loopback(store_url: api.StoreURL, address: Optional[str]) -> None:
    """A warning where Ray workers on other hosts (``--address``) are given a store on this machine's loopback."""
    if address is not None and (host := store_url.host) in ("localhost", "127.0.0.1", "::1"):
        err.print(_styled("yellow", "warning", f": the store's host {host} is this machine's loopback; Ray workers "
                          "on other hosts will not reach it (give the address other hosts see)"))


def _interrupted(result) -> typer.Exit:
    """The line of a run that Ctrl-C or SIGTERM stopped, and its exit status (128 + the signal, as a shell's)."""
    n_done = sum(o.status == "done" for _, o in result.results)
    err.print(_styled(
        "yellow", "Interrupted.", f" {n_done} cells finished and are kept; in-flight runs are marked "
        "interrupted and will re-run with the next `bench run`."
    ))
    return typer.Exit(128 + result.interrupted)


class _LiveRun:
    """What ``bench run`` shows while its cells run: the opening line, a progress bar (on a terminal) or a
    progress line every :data:`PROGRESS_LINE_EVERY_S` (a log), and a line as each cell ends; its methods are
    :func:`bench.api.run_suite`'s callbacks."""

    def __init__(self, plan, made, executor: Executor, address: Optional[str], remeasure: bool):
        self.plan, self.made, self.executor, self.address, self.remeasure = plan, made, executor, address, remeasure
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("cells"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                 console=err, transient=False)
        # The bar counts finished cells plus the fractions of those in flight (their heartbeats report
        # their steps); a log, which has no bar, gets a line every PROGRESS_LINE_EVERY_S instead.
        self.finished: set[str] = set()
        self.partial: dict[str, float] = {}
        self.names: dict[str, str] = {}
        self.total = 0
        self.task: Any = None
        self.t0 = self.line_at = time.perf_counter()
        self.lock = threading.Lock()

    def on_start(self, r, todo) -> None:
        if self.made:  # the suite is registered: its file is written now, never for a run refused before
            err.print(f"{self.made.path}: the suite of these flags (`bench run {self.made.path}` runs it again)",
                      soft_wrap=True)
            api.write_oneline_suite(self.made)
        n_workers = self.plan.workers
        err.print(_styled(
            "bold", r.suite,
            f": {r.cells} cells — {r.done_before} done already"
            + (f" ({r.remeasured} of them contended, to measure again)" if self.remeasure else "")
            + f", {r.busy} running elsewhere, {len(todo)} to run on "
            + (f"{min(n_workers, max(len(todo), 1))} worker(s) " if self.executor is Executor.local
               else f"the Ray cluster at {self.address} " if self.address
               else f"a local Ray instance with {n_workers} CPUs ")
            + f"→ {self.plan.store_url.shown}"
        ))
        if todo:
            self.names = {c.key: f"{c.env_id} {c.label} seed {c.seed}" for c in todo}
            self.total = len(todo)
            self.progress.start()
            self.task = self.progress.add_task(r.suite, total=len(todo))
            self.t0 = self.line_at = time.perf_counter()

    def on_poll(self, partial: dict[str, float]) -> None:
        with self.lock:  # a poll read before a cell finished must not count it again
            self.partial = {k: f for k, f in partial.items() if k not in self.finished}
            self.progress.update(self.task, completed=len(self.finished) + sum(self.partial.values()))
            now = time.perf_counter()
            if (not err.is_terminal and now - self.line_at >= PROGRESS_LINE_EVERY_S
                    and len(self.finished) < self.total):
                self.line_at = now
                running = sorted((self.names[k], f) for k, f in self.partial.items())
                # One log line each, however many cells run: a wrapped line breaks grep and tail.
                self.progress.console.print(api.progress_line(self.plan.name, self.total, len(self.finished),
                                                              running, now - self.t0), soft_wrap=True)

    def on_done(self, cell, outcome) -> None:
        with self.lock:
            self.finished.add(cell.key)
            self.partial.pop(cell.key, None)
            self.progress.update(self.task, completed=len(self.finished) + sum(self.partial.values()))
        s, which, say = outcome.summary, f"{cell.env_id} {cell.label} seed {cell.seed}", self.progress.console.print
        if outcome.status == "done":
            stt = s.get("steps_to_threshold")
            solved = f"solved at {stt:,} steps" if stt is not None else "not solved"
            say(_styled("green", "done", f"   {which}: final return {_fmt(s.get('final_return'))}, {solved}, "
                        f"{outcome.wall_s:.1f}s" + (f"; {outcome.note}" if outcome.note else "")))
        elif outcome.status == "failed":
            say(_styled("red", "failed", f" {which}: {outcome.error}"))
        else:
            say(_styled("yellow", "skipped", f" {which}: {outcome.error or 'taken by another runner'}"))


def _outputs(plan) -> None:
    """Where the run's outputs are, after its closing summary: the store, the policies and TensorBoard folders and
    the W&B project where written, and the command that writes the report."""
    for what, where in plan.outputs().items():
        hint = f" (tensorboard --logdir {where})" if what == "tensorboard" else ""
        out.print(f"{what + ':':<12} {where}{hint}", markup=False, highlight=False, soft_wrap=True)


def _oneline(suite, env, algo, impl, seeds, timesteps, store_url: api.StoreURL, overrides):
    """A one-line run's suite (:func:`bench.api.oneline_suite`), or None with a suite file."""
    given = [f for f, v in (("--env", env), ("--algo", algo), ("--impl", impl), ("--seeds", seeds),
                            ("--timesteps", timesteps)) if v is not None]
    if suite is not None:
        if given:
            raise api.BadInput(f"{given[0]}: for a one-line run, which takes no suite file (got {suite} and "
                               f"{', '.join(given)}); allowed: a suite file, or --env ID --algo NAME")
        return None
    if env is None or algo is None:
        raise api.BadInput(f"{'--env' if env is None else '--algo'}: missing; allowed: a suite file (bench run "
                           "SUITE.yaml), or a one-line run with --env ID and --algo NAME (`bench envs` lists ids)")
    return api.oneline_suite(env, algo, impl=impl, seeds=seeds, timesteps=timesteps, store=store_url,
                             overrides=overrides)


def _dry_run(plan, remeasure: bool, made=None) -> None:
    """``bench run --dry-run``: a one-line run's suite file (``made``), not written; the cells that would run (a
    table, or plain lines above :data:`DRY_RUN_TABLE_MAX`), their hyperparameters' sources and the estimated cost."""
    if made:
        print(made.text + f"# (dry run: not written; without --dry-run it goes to {made.path})")
    cells = plan.cells
    contended = api.contended_keys(plan.store_url, cells) if remeasure else set()
    title = f"{plan.name}: {len(cells)} cells (dry run, nothing written)"
    if len(cells) > DRY_RUN_TABLE_MAX:
        _plain_dry_run(title, cells, contended if remeasure else None)
        out.print(f"estimated cost: {plan.cost.line()}")
        return
    t = Table(title=title)
    for col in ("key", "env", "label", "seed", "timesteps", "threshold"):
        t.add_column(col)
    if remeasure:
        t.add_column("re-measure")
    for c in cells:
        t.add_row(c.key, c.env_id, c.label, str(c.seed), f"{c.timesteps:,}", _fmt(c.threshold),
                  *(["contended"] if c.key in contended else [""] if remeasure else []))
    out.print(t)
    print("\n".join(api.hyperparams_lines(plan.loaded, {(c.label, c.env_id) for c in cells})))
    out.print(f"estimated cost: {plan.cost.line()}")


def _plain_dry_run(title: str, cells: list, contended: set[str] | None) -> None:
    """A dry run's cells as plain lines, columns padded to their widest value (one pass, no layout)."""
    head = ["key", "env", "label", "seed", "timesteps", "threshold"] + (["re-measure"] if contended is not None else [])
    rows = [[c.key, c.env_id, c.label, str(c.seed), f"{c.timesteps:,}", _fmt(c.threshold)]
            + (["contended" if c.key in contended else ""] if contended is not None else []) for c in cells]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    sys.stdout.write(_one_line_each(lines))


def _one_line_each(lines: list[str]) -> str:
    """``lines`` joined, each kept on one line (a label or env key with a line break is escaped)."""
    return "".join(ln.replace("\n", "\\n").replace("\r", "\\r") + "\n" for ln in lines)


def _closing(name: str, results: list, done_before: int, busy: int, seconds: float) -> int:
    n_done = sum(o.status == "done" for _, o in results)
    failed = [(c, o) for c, o in results if o.status == "failed"]
    skipped = sum(o.status == "skipped" for _, o in results)
    out.print(
        f"{name}: {n_done} done, {len(failed)} failed, {skipped + busy} left to other runners, "
        f"{done_before} already done before; {seconds:.1f}s"
    )
    for c, o in failed:
        print(f"  failed: {c.env_id} {c.label} seed {c.seed} [{c.key}]: {o.error}")
    return len(failed)


def status(suite: Path = typer.Argument(..., help="Suite YAML file."), store: str = StoreOpt,
           cells: bool = typer.Option(False, "--cells", help=f"List every cell (default: only when there are at most "
                                      f"{STATUS_CELLS_MAX}; more are summed up per env × label)."),
           overrides: Optional[list[str]] = SetOpt) -> None:
    """Show done / failed / running / stale / interrupted / pending per env × label of a suite, or per cell.

    A suite of at most 20 cells (or any with ``--cells``) gets one row per cell;
    a larger one gets one row per env × label, with how many cells are in each
    state and when its running ones end (``~13 min``, at their pace so far),
    and its failed cells named below.

    It reads the store, so on a cluster it shows every host's runs: ``host`` is
    where a run ran or runs, ``heartbeat`` how long ago a running run last
    reported, and ``steps`` how far it is (``412,160 of 1,000,000 (41%, ~13 min
    left)``, from its heartbeats). ``stale``: running, but its owner is dead (on
    this host) or silent for over STALE_AFTER_S seconds; the next ``bench run``
    re-runs it. ``stalled``: running and beating, but its env steps have not grown
    for 10 minutes, or longer on a slow env (a hung plugin or env).
    """
    store_url = _store_url(store)
    try:
        st = api.status(suite, store_url, overrides=overrides or ())
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    if not cells and len(st.cells) > STATUS_CELLS_MAX:
        _status_summary(st)
    else:
        _status_cells(st)
    out.print(", ".join(f"{k}: {v}" for k, v in sorted(st.counts.items())))
    if st.contended:
        out.print(f"{st.contended} of the done runs shared their core (wall > {st.contention_ratio:g} × CPU seconds), "
                  f"which inflates their CPU seconds: `bench run {suite} --remeasure contended` measures them again")


def _status_cells(st) -> None:
    """``bench status``: one row per cell."""
    t = Table(title=f"{st.name}: {len(st.cells)} cells")
    for col in ("env", "label", "seed", "status", "attempt", "host", "heartbeat", "steps", "final return",
                "steps to threshold", "error"):
        # Whole env keys and labels, folded onto more lines when narrow: kwargs variants of one env differ
        # only at their end, which an ellipsis would cut.
        t.add_column(col, overflow="fold" if col in ("env", "label") else "ellipsis")
    for c in st.cells:
        t.add_row(
            c.env_id, c.label, str(c.seed), c.state, _fmt(c.attempt), c.host,
            f"{c.heartbeat_s:,.0f}s ago" if c.heartbeat_s is not None else "",
            c.progress if c.progress is not None else _fmt(c.total_steps),
            _fmt(c.final_return), _fmt(c.steps_to_threshold), c.error,
        )
    out.print(t)


def _status_summary(st) -> None:
    """``bench status`` of a large suite: one row per env × label (a count per state, when its running cells will
    have finished), then its failed cells, the first :data:`STATUS_FAILURES_MAX` named."""
    groups = st.groups()
    states = [s for s in api.STATES if s in st.counts] + sorted(set(st.counts) - set(api.STATES))
    t = Table(title=f"{st.name}: {len(st.cells):,} cells in {len(groups)} env × label groups "
                    "(`--cells` lists every cell)")
    for col in ("env", "label", "cells", *states, "running ends in"):
        t.add_column(col, overflow="fold" if col in ("env", "label") else "ellipsis",
                     justify="left" if col in ("env", "label") else "right")
    for g in groups:
        t.add_row(g.env_id, g.label, f"{g.cells:,}", *(f"{g.counts[s]:,}" if s in g.counts else "" for s in states),
                  f"~{api.duration(g.seconds_left)}" if g.seconds_left is not None else "")
    out.print(t)
    failed = st.failures()
    for c in failed[:STATUS_FAILURES_MAX]:
        out.print(f"  {c.state}: {c.env_id} {c.label} seed {c.seed}" + (f": {c.error}" if c.error else ""),
                  markup=False, highlight=False, soft_wrap=True)
    if len(failed) > STATUS_FAILURES_MAX:
        out.print(f"  … and {len(failed) - STATUS_FAILURES_MAX:,} more failed (`--cells` lists every cell)")
