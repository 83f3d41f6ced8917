"""The ``bench`` command: run | status | export | tune | report | recommend | eval | envs | schema | speed.

Bad input is one line per problem on stderr and exit status 2; nothing runs and
no store is created or touched. A run's own failure is a result, reported in the
closing summary (exit status 1 when any cell failed). Any other failure (a store
that cannot be reached or read, a disk that is full) is one line and exit status
1; ``bench --debug …`` (or ``--debug`` anywhere on the line) shows its traceback.

User strings (labels, errors, paths) are printed as literal text: rich's markup
is off on both consoles, and styled words are built as :class:`rich.text.Text`.
"""

from __future__ import annotations

import json
import re
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from bench.storage.packed import PackError
from bench.streams import ensure_standard_streams, silence_output
from bench.storage.store import DEFAULT_URL, StoreError
from typer._click.exceptions import UsageError  # typer's own copy of click: what its parser raises

#: Set by ``--debug``: errors show their traceback instead of one line.
DEBUG = False
#: This invocation's arguments (sys.argv's, or those given to ``app(...)`` in-process), for usage errors' lines.
_ARGS: list[str] = []


class _BenchGroup(TyperGroup):
    """Every command's errors end as one line on stderr and a non-zero exit (``--debug``: the traceback)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        global DEBUG, _STORE_IN_USE, _ARGS
        _STORE_IN_USE = None
        _SECRETS.clear()
        _ARGS = list(args)
        head, sep, tail = list(args), [], []
        if "--" in head:  # after "--" nothing is an option
            i = head.index("--")
            head, sep, tail = head[:i], ["--"], head[i + 1:]
        DEBUG = "--debug" in head  # per invocation: one in-process call (bench.cli.app) must not leak into the next
        head = [a for a in head if a != "--debug"]
        try:
            return super().parse_args(ctx, head + sep + tail)
        except UsageError as e:
            raise _usage_line(e) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            try:
                return super().invoke(ctx)
            finally:
                sys.stdout.flush()  # here, where a reader gone away is caught, not in the interpreter's last flush
        except UsageError as e:  # a bad option, value or argument of a command
            raise _usage_line(e) from None
        except (typer.Exit, typer.Abort, typer.exceptions.TyperException):  # click's own exits
            raise
        except PackError as e:  # a pack that fails its check is bad input: one line, naming the file
            raise _bad_input(str(e)) from None
        except BrokenPipeError:
            # The reader went away (`bench recommend | head`): nothing is wrong with the input or the store,
            # so no error line. Stop quietly as rich's console does for the commands that print through it
            # (stdout and stderr to /dev/null, so the interpreter's last flush cannot raise again; status 1).
            silence_output()
            raise typer.Exit(1) from None
        except Exception as e:  # noqa: BLE001 - the one place that turns any error into one line
            if DEBUG:
                import traceback

                traceback.print_exc()
            _say(_error_line(e))
            raise typer.Exit(1) from None


def _usage_line(e: UsageError) -> typer.Exit:
    """A usage error (unknown option, missing argument, value out of range) as the one line every other
    bad input gets, exit status 2: ``bench speed: Invalid value for '--timesteps': Input should be
    greater than or equal to 1 (got '0') (bench speed --help)``, not click's boxed usage text."""
    where = e.ctx.command_path if e.ctx is not None else "bench"
    got = _given(getattr(getattr(e, "param", None), "opts", []))
    text = e.format_message() + (f" (got {got!r})" if got is not None else "")
    _say(" ".join(f"{where}: {text} ({where} --help)".split()))
    return typer.Exit(2)


def _given(opts: list[str]) -> str | None:
    """The value given on the command line to the option named ``opts`` (its last use), if any."""
    args, got = _ARGS, None
    for i, a in enumerate(args):
        for o in opts:
            if a == o and i + 1 < len(args):
                got = args[i + 1]
            elif a.startswith(o + "="):
                got = a[len(o) + 1:]
    return got


def _error_line(e: BaseException) -> str:
    """One line for an error that reached the top (the store's own errors are already one line)."""
    import sqlalchemy as sa

    if isinstance(e, StoreError):
        text = str(e)
    elif isinstance(e, sa.exc.SQLAlchemyError):
        orig = getattr(e, "orig", None) or e
        where = f" at {_STORE_IN_USE}" if _STORE_IN_USE else ""
        text = f"the results store{where} failed: {type(orig).__name__}: {orig}"
    elif isinstance(e, OSError):
        text = f"{e.filename}: {e.strerror or e}" if e.filename is not None else f"{type(e).__name__}: {e}"
    else:
        # Not a failure bench foresaw: still one line, but say so (the fuzz test looks for these).
        text = f"internal error: {type(e).__name__}: {e}"
    text = _redact(" ".join(text.split()))
    return f"error: {text}" + ("" if DEBUG else " (bench --debug shows the traceback)")


#: The store the running command opened, named in error lines.
_STORE_IN_USE: str | None = None
#: The passwords of the store URLs this command was given: never printed (:func:`_redact`).
_SECRETS: set[str] = set()


def _say(line: str) -> None:
    """One line on stderr, passwords hidden (:func:`_redact`); a stderr gone away (``2>&1 | head``) stops it quietly."""
    try:
        print(_redact(line), file=sys.stderr, flush=True)
    except BrokenPipeError:
        silence_output()


def _redact(line: str) -> str:
    """``line`` with every URL's password, and every password this command was given, hidden."""
    from bench.storage.store import redact

    return redact(line, _SECRETS)

app = typer.Typer(
    cls=_BenchGroup,
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    help="Which on-policy RL algorithm should I use? Run benchmark suites and find out.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"bench {version('bench')}")
        raise typer.Exit()


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error (also accepted after the command)."),
          _v: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print bench's version.")) -> None:
    global DEBUG
    DEBUG = DEBUG or debug


ensure_standard_streams()  # `bench … >&-`: before anything opens a file that would take descriptor 1 or 2
# Off a terminal (CI logs, pipes) rich would wrap at 80 columns; give tables room instead.
# Markup off: labels such as "[/]" and errors such as "[nan]" are text, not rich tags.
out = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, markup=False, width=None if sys.stderr.isatty() else 160)


def _styled(style: str, word: str, rest: str = "") -> Text:
    """``word`` in ``style``, then ``rest`` as literal text."""
    return Text.assemble((word, style), rest)

StoreOpt = typer.Option(DEFAULT_URL, "--store", help="SQLAlchemy URL of the results store (SQLite file or postgresql://…).")
SetOpt = typer.Option(None, "--set", metavar="PATH=VALUE",
                      help="Override the suite file, e.g. defaults.timesteps=2e5 or 'algorithms[0].hyperparams."
                           "learning_rate=1e-4' (repeatable; checked as the file is, recorded with each run).")


def _bad_input(lines: list[str] | str) -> typer.Exit:
    # Plain print, not rich: paths like algorithms[1] must not be read as markup.
    for line in [lines] if isinstance(lines, str) else lines:
        _say(line)
    return typer.Exit(2)


def _writable(flag: str, path: Path, *, folder: bool) -> Path:
    """``path`` if the command can write it there (:func:`bench.api.writable`), else one line naming
    ``flag`` and exit status 2."""
    from bench.api import BadInput, writable

    try:
        return writable(flag, path, folder=folder)
    except BadInput as e:
        raise _bad_input(e.lines) from None


def _load(suite_path: Path, overrides: Optional[list[str]] = None):
    from bench.suites.suite import SuiteError, load_suite

    try:
        return load_suite(suite_path, overrides or ())
    except SuiteError as e:
        raise _bad_input(e.lines) from None


def _keep_secret(url: str) -> None:
    """Remember ``url``'s password, so that no line this command prints shows it (:func:`_redact`)."""
    from bench.storage.store import url_secret

    if (secret := url_secret(url)) is not None:
        _SECRETS.add(secret)


def _check_url(url: str, flag: str = "--store") -> str:
    """The normalised store URL; a bad or in-memory URL is bad input (one line, exit 2)."""
    global _STORE_IN_USE
    from bench.storage.store import check_url, describe_url

    _keep_secret(url)
    try:
        url = check_url(url)
    except StoreError as e:
        raise _bad_input(f"{flag}: {e}") from None
    _STORE_IN_USE = describe_url(url)
    return url


def _open_readonly(url: str):
    """The store at ``url`` opened read-only, or None when there is none yet; StoreError (one line, exit 1)
    when it cannot be reached or is not a bench store."""
    from bench.storage.store import Store, StoreMissing

    try:
        return Store(url, readonly=True)
    except StoreMissing:
        return None


def _fmt(v, digits: int = 1) -> str:
    if v is None or v != v:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


#: How often ``bench run`` writes a progress line when stderr is not a terminal (a log file, CI).
PROGRESS_LINE_EVERY_S = 300.0


class Executor(str, Enum):
    local = "local"
    ray = "ray"


class Remeasure(str, Enum):
    contended = "contended"


@app.command()
def run(
    suite: Path = typer.Argument(..., help="Suite YAML file."),
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
                                               "TensorBoard events under DIR/<label>/<env>/seed<k> (bench[tensorboard])."),
    wandb: Optional[str] = typer.Option(None, "--wandb", help="Also log each run to this W&B project (bench[wandb]; "
                                        "WANDB_MODE=offline needs no network)."),
    artifacts: Optional[Path] = typer.Option(None, "--artifacts", help="Folder for saved policies (suite save:); "
                                             "default beside a SQLite store, else results/policies."),
    yes: bool = typer.Option(False, "--yes", help="Start a suite whose estimated cost needs confirming (over 1,000 "
                             "CPU-hours, or over 1e8 steps per run on an env with no time scale)."),
    overrides: Optional[list[str]] = SetOpt,
) -> None:
    """Run a suite: every env × algorithm × seed cell, skipping cells already done."""
    from bench import api

    _keep_secret(store)
    try:
        plan = api.plan_run(suite, store, only=only, overrides=overrides or (), workers=workers,
                            executor=executor.value, address=address)
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    url = _check_url(plan.url)
    plan = plan.with_outputs(_outputs(url, tensorboard, wandb, artifacts))
    if address is not None:
        import sqlalchemy as sa

        if (host := sa.engine.make_url(url).host) in ("localhost", "127.0.0.1", "::1"):
            err.print(_styled("yellow", "warning", f": the store's host {host} is this machine's loopback; Ray workers "
                              "on other hosts will not reach it (give the address other hosts see)"))
    if dry_run:
        _dry_run(plan, remeasure is not None)
        return

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    import threading

    from bench.run.progress import progress_line
    from bench.storage.store import describe_url

    n_workers = plan.workers
    progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                        TextColumn("cells"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                        console=err, transient=False)
    # The bar counts finished cells plus the fractions of those in flight (their heartbeats report
    # their steps); a log, which has no bar, gets a line every PROGRESS_LINE_EVERY_S instead.
    shown: dict[str, Any] = {"finished": set(), "partial": {}, "line_at": time.perf_counter(), "task": None,
                             "names": {}, "t0": time.perf_counter()}
    lock = threading.Lock()

    def on_start(r, todo) -> None:
        err.print(_styled(
            "bold", r.suite,
            f": {r.cells} cells — {r.done_before} done already"
            + (f" ({r.remeasured} of them contended, to measure again)" if remeasure else "")
            + f", {r.busy} running elsewhere, {len(todo)} to run on "
            + (f"{min(n_workers, max(len(todo), 1))} worker(s) " if executor is Executor.local
               else f"the Ray cluster at {address} " if address else f"a local Ray instance with {n_workers} CPUs ")
            + f"→ {describe_url(url)}"
        ))
        if todo:
            shown["names"] = {c.key: f"{c.env_id} {c.label} seed {c.seed}" for c in todo}
            shown["total"] = len(todo)
            progress.start()
            shown["task"] = progress.add_task(r.suite, total=len(todo))
            shown["t0"] = shown["line_at"] = time.perf_counter()

    def on_poll(partial: dict[str, float]) -> None:
        with lock:  # a poll read before a cell finished must not count it again
            shown["partial"] = {k: f for k, f in partial.items() if k not in shown["finished"]}
            progress.update(shown["task"], completed=len(shown["finished"]) + sum(shown["partial"].values()))
            now = time.perf_counter()
            if (not err.is_terminal and now - shown["line_at"] >= PROGRESS_LINE_EVERY_S
                    and len(shown["finished"]) < shown["total"]):
                shown["line_at"] = now
                running = sorted((shown["names"][k], f) for k, f in shown["partial"].items())
                # One log line each, however many cells run: a wrapped line breaks grep and tail.
                progress.console.print(progress_line(plan.name, shown["total"], len(shown["finished"]),
                                                     running, now - shown["t0"]), soft_wrap=True)

    def on_done(cell, outcome) -> None:
        with lock:
            shown["finished"].add(cell.key)
            shown["partial"].pop(cell.key, None)
            progress.update(shown["task"], completed=len(shown["finished"]) + sum(shown["partial"].values()))
        s = outcome.summary
        if outcome.status == "done":
            stt = s.get("steps_to_threshold")
            solved = f"solved at {stt:,} steps" if stt is not None else "not solved"
            progress.console.print(_styled(
                "green", "done", f"   {cell.env_id} {cell.label} seed {cell.seed}: final return "
                f"{_fmt(s.get('final_return'))}, {solved}, {outcome.wall_s:.1f}s"
                + (f"; {outcome.note}" if outcome.note else "")
            ))
        elif outcome.status == "failed":
            progress.console.print(_styled("red", "failed", f" {cell.env_id} {cell.label} seed {cell.seed}: {outcome.error}"))
        else:
            progress.console.print(_styled("yellow", "skipped", f" {cell.env_id} {cell.label} seed {cell.seed}: "
                                           f"{outcome.error or 'taken by another runner'}"))

    try:
        result = api.run_suite(plan, replace=replace, remeasure=remeasure is Remeasure.contended, yes=yes,
                               on_start=on_start, on_done=on_done, on_poll=on_poll, log=lambda s: err.print(s))
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    finally:
        progress.stop()
    if result.interrupted is not None:
        n_done = sum(o.status == "done" for _, o in result.results)
        err.print(_styled(
            "yellow", "Interrupted.", f" {n_done} cells finished and are kept; in-flight runs are marked "
            "interrupted and will re-run with the next `bench run`."
        ))
        raise typer.Exit(128 + result.interrupted)
    if _closing(result.suite, result.results, result.done_before, result.busy, result.seconds):
        raise typer.Exit(1)


def _dry_run(plan, remeasure: bool) -> None:
    """``bench run --dry-run``: the cells that would run (a table, or plain lines above
    :data:`DRY_RUN_TABLE_MAX`), their hyperparameters' sources and the estimated cost."""
    cells = plan.cells
    contended = _contended_done(plan.url, cells) if remeasure else set()
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
    from bench.api import hyperparams_lines

    print("\n".join(hyperparams_lines(plan.loaded, {(c.label, c.env_id) for c in cells})))
    out.print(f"estimated cost: {plan.cost.line()}")


def _outputs(url: str, tensorboard: Optional[Path], wandb: Optional[str], artifacts: Optional[Path]):
    """``bench run``'s --tensorboard, --wandb and --artifacts as the cells' Outputs, checked (one line, exit 2).
    Paths are made absolute here: a Ray worker need not share this process's working directory."""
    from bench.run.loggers import missing
    from bench.run.saving import policies_dir
    from bench.suites.suite import Outputs

    for flag, given in (("--tensorboard", tensorboard), ("--wandb", wandb)):
        if given is not None and (why := missing(flag)):
            raise _bad_input(why)
    if wandb is not None and (not wandb.strip() or any(c in wandb for c in "/\\#?%:")):
        raise _bad_input(f"--wandb: {wandb!r} is not a W&B project name; allowed: a name without / \\ # ? % :")
    tb, art = (None if p is None else str(_writable(f, p, folder=True).resolve())
               for f, p in (("--tensorboard", tensorboard), ("--artifacts", artifacts)))
    return Outputs(policies=art or str(policies_dir(url).resolve()), tensorboard=tb, wandb=wandb)


#: Above this many cells a dry run prints plain aligned lines, not a table: rich lays a table out cell by
#: cell, 40 s for 100,000 cells (docs/getting-started.md has the measurement).
DRY_RUN_TABLE_MAX = 1_000


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


def _contended_done(url: str, cells: list) -> set[str]:
    """Keys of the done runs among ``cells`` that shared their core, read without writing anything."""
    from bench.storage.vocabulary import contended_done

    db = _open_readonly(url)
    return contended_done(db.rows([c.key for c in cells])) if db is not None else set()


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


@app.command()
def status(suite: Path = typer.Argument(..., help="Suite YAML file."), store: str = StoreOpt,
           overrides: Optional[list[str]] = SetOpt) -> None:
    """Show done / failed / running / stale / interrupted / pending for every cell of a suite.

    It reads the store, so on a cluster it shows every host's runs: ``host`` is
    where a run ran or runs, ``heartbeat`` how long ago a running run last
    reported, and ``steps`` how far it is (``412,160 of 1,000,000 (41%, ~13 min
    left)``, from its heartbeats). ``stale``: running, but its owner is dead (on
    this host) or silent for over STALE_AFTER_S seconds; the next ``bench run``
    re-runs it. ``stalled``: running and beating, but its env steps have not grown
    for STALL_AFTER_S seconds (a hung plugin or env).
    """
    from bench.run.progress import is_stalled, run_progress
    from bench.storage.store import describe_url, is_claimable, owner_host
    from bench.storage.vocabulary import CONTENTION_RATIO, contended_done, cpu_budget

    loaded = _load(suite, overrides)
    url = _check_url(store)
    db = _open_readonly(url)  # an unreachable or foreign store is an error, never "all pending"
    if db is None:  # most likely a mistyped --store: a table of pending cells would hide that
        raise _bad_input(f"--store: no results store at {describe_url(url)}; allowed: a store `bench run {suite}` "
                         "wrote (it has not run yet, or --store names another file)")
    rows = db.rows([c.key for c in loaded.cells])
    t = Table(title=f"{loaded.suite.name}: {len(loaded.cells)} cells")
    for col in ("env", "label", "seed", "status", "attempt", "host", "heartbeat", "steps", "final return",
                "steps to threshold", "error"):
        # Whole env keys and labels, folded onto more lines when narrow: kwargs variants of one env differ
        # only at their end, which an ellipsis would cut.
        t.add_column(col, overflow="fold" if col in ("env", "label") else "ellipsis")
    counts: dict[str, int] = {}
    now = time.time()
    for c in loaded.cells:
        r = rows.get(c.key)
        st = "pending" if r is None else r.status
        if r is not None and st == "running" and is_claimable(r):
            st = "stale"  # its runner died; the next `bench run` re-runs it
        elif r is not None and is_stalled(r):
            st = "stalled"  # alive, but no env step for STALL_AFTER_S seconds
        counts[st] = counts.get(st, 0) + 1
        t.add_row(
            c.env_id, c.label, str(c.seed), st,
            _fmt(r.attempt if r else 0), (owner_host(r.owner) or "") if r else "",
            f"{now - r.heartbeat_at:,.0f}s ago" if r is not None and r.status == "running" and r.heartbeat_at else "",
            (run_progress(r.total_steps, r.timesteps, r.started_at, now, r.cpu_s, cpu_budget(r.config))
             if st in ("running", "stalled")
             else _fmt(r.total_steps) if r else "—"),
            _fmt(r.final_return if r else None), _fmt(r.steps_to_threshold if r else None),
            (r.error or "")[:60] if r else "",
        )
    out.print(t)
    out.print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    n_contended = len(contended_done(rows))
    if n_contended:
        out.print(f"{n_contended} of the done runs shared their core (wall > {CONTENTION_RATIO:g} × CPU seconds), which "
                  f"inflates their CPU seconds: `bench run {suite} --remeasure contended` measures them again")


#: ``bench export --format``: what each writes, and which ``--what`` it takes.
EXPORT_FORMATS = ("csv", "parquet", "json", "pack", "rliable-npz", "rliable-json")
EXPORT_WHAT = ("runs", "episodes", "diagnostics")


@app.command()
def export(
    store: str = StoreOpt,
    suite: Optional[str] = typer.Option(None, "--suite", help="Only this suite (by name)."),
    what: str = typer.Option("runs", "--what", help="runs (one row per run), episodes (one row per training "
                             "episode: the learning curves) or diagnostics (one row per stored diagnostic point)."),
    format: str = typer.Option("csv", "--format", help="csv, parquet or json (records) of --what; pack (the suite's "
                               "store tables as compact files in the folder --out, the shipped reference's format; needs "
                               "--suite); rliable-npz or rliable-json (normalised per-run scores, label → (runs × envs), "
                               "as the report computes them)."),
    score: str = typer.Option("final", "--score", help="With rliable-*: final (normalised final return, the report's "
                              "across-env IQM), samples (normalised AUC vs env steps) or time (vs CPU seconds)."),
    out_path: Path = typer.Option(..., "--out", help="Output file (a folder for --format pack)."),
) -> None:
    """Export runs, episodes or diagnostics as CSV, Parquet or JSON; normalised scores for rliable; or pack a suite."""
    from bench.analysis.scoring import SCORE_COLUMNS
    from bench.storage.store import describe_url

    what = _choice("--what", what, EXPORT_WHAT)
    format = _choice("--format", format, EXPORT_FORMATS)
    score = _choice("--score", score, tuple(SCORE_COLUMNS))
    if format in ("pack", "rliable-npz", "rliable-json") and what != "runs":
        raise _bad_input(f"--what: --format {format} exports whole runs; allowed with it: runs (got {what!r})")
    url = _check_url(store)
    if format != "pack" and out_path.is_dir():
        suffix = {"rliable-npz": "npz", "rliable-json": "json"}.get(format, format)
        raise _bad_input(f"--out: {out_path} is a folder; allowed: a file path, e.g. {out_path / (what + '.' + suffix)}")
    _writable("--out", out_path, folder=format == "pack")
    db = _open_readonly(url)
    if db is None:
        raise _bad_input(f"--store: no results store at {describe_url(url)}; run a suite first (`bench run SUITE.yaml`)")
    if suite is not None and suite not in (names := db.suite_names()) and (
            format != "pack" or suite not in (tuned := _tuning_suites(url))):
        allowed = names + (sorted(set(tuned) - set(names)) if format == "pack" else [])
        raise _bad_input(f"--suite: no suite named {suite!r} in the store; allowed: {', '.join(allowed) or 'none'}")
    if format == "pack":
        if suite is None:
            raise _bad_input("--format pack: name the suite to pack with --suite")
        from bench.api import pack_suite

        m = pack_suite(db, suite, out_path, log=lambda s: err.print(s, markup=False))
        shared = "".join(f"; {n} runs shared with {p}" for p, n in m.get("shared_runs", {}).items())
        studies = m.get("studies")
        what = f"{sum(m['runs'].values())} runs" + (f" and {studies['count']} tuning studies "
                                                    f"({sum(studies['trials'].values())} trials)" if studies else "")
        err.print(f"packed {what} of {suite} into {out_path} ({m['bytes'] / 1e6:.1f} MB{shared})", markup=False)
        return
    if format.startswith("rliable-"):
        db.dispose()
        from bench.api import NothingToExport, export_scores

        try:
            n = export_scores(url, suite, SCORE_COLUMNS[score], format, out_path, log=lambda s: err.print(s, markup=False))
        except NothingToExport as e:
            raise _bad_input(f"--format {format}: {e}") from None
        err.print(f"wrote {SCORE_COLUMNS[score]} of {n[0]} labels × {n[1]} envs to {out_path}")
        return
    df = {"runs": db.runs_frame, "episodes": db.episodes_frame, "diagnostics": db.diagnostics_frame}[what](suite)
    db.dispose()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if format == "csv":
        df.to_csv(out_path, index=False)
    elif format == "parquet":
        df.to_parquet(out_path, index=False)
    else:  # records; json, not pandas' to_json, which keeps 10 digits and so does not round-trip a float
        rows = [{k: None if isinstance(v, float) and v != v else v for k, v in r.items()} for r in df.to_dict("records")]
        out_path.write_text(json.dumps(rows, default=str))
    err.print(f"wrote {len(df)} {'runs' if what == 'runs' else what[:-1] + ' rows'} to {out_path}")


@app.command("import")
def import_(
    packs: list[Path] = typer.Argument(..., help="Packs (folders `bench export --format pack` wrote), or folders of "
                                       "packs, e.g. results/reference/minatar or results/reference."),
    store: str = StoreOpt,
) -> None:
    """Load packed results into a store (SQLite or PostgreSQL): to go on with a packed suite
    (`bench run` then skips its done cells), or to put the shipped reference beside your own runs."""
    from bench.storage import packed
    from bench.storage.store import Store, describe_url

    found: list[Path] = []
    for p in packs:
        under = packed.verified_packs(p)
        if not under:
            raise _bad_input(f"PACK: {p} is not a pack (a folder with {packed.MANIFEST}) nor a folder of packs; "
                             "allowed: what `bench export --format pack` writes, e.g. results/reference/classic")
        found += [q for q in under if q.resolve() not in {f.resolve() for f in found}]
    try:
        found = packed.with_siblings(found)
        suites = [packed.verify(p)["suite"] for p in found]
    except FileNotFoundError as e:
        raise _bad_input(f"PACK: {e}; allowed: import the folder that holds both") from None
    except (ValueError, KeyError) as e:
        raise _bad_input(f"PACK: a {packed.MANIFEST} is not a pack manifest ({e}); allowed: what "
                         "`bench export --format pack` writes") from None
    if (bad := packed.unreadable(found)) is not None:  # checked before the store is opened: nothing written
        raise _bad_input(f"PACK: {bad} is not a readable Parquet table; allowed: what `bench export --format pack` writes")
    url = _check_url(store)
    db = Store(url)
    n = packed.load(found, db)
    db.dispose()
    kept = f"; {n['kept']} already there, kept as they were" if n["kept"] else ""
    added = packed.load_studies(found, url)
    studies = f"; {added} tuning stud{'y' if added == 1 else 'ies'}" if added else ""
    err.print(f"imported {n['new']} runs{studies} of {', '.join(dict.fromkeys(suites))} into {describe_url(url)}{kept}",
              markup=False)


def _tuning_suites(url: str) -> list[str]:
    """The tuning suites whose ``bench tune`` studies are in the store (a pack can hold them)."""
    from bench.storage import packed

    try:
        return packed.tuning_suites(url)
    except Exception:  # noqa: BLE001 - a store Optuna cannot read has no studies to pack
        return []


@app.command()
def envs() -> None:
    """List every env bench knows (its registry and its own sequence tasks): traits and default thresholds."""
    from bench.envs import known_specs as list_specs

    t = Table(title="bench environments: the registry and bench's own sequence tasks (any other Gymnasium id "
                    "runs too; give it a threshold, and a time_scale_us for time scores)")
    for col in ("id", "family", "action", "obs", "reward", "horizon", "threshold", "threshold source", "time scale (µs/step)"):
        t.add_column(col)
    for s in list_specs():
        t.add_row(s.id, s.family, s.action, s.obs, s.reward, _fmt(s.horizon), _fmt(s.threshold), s.threshold_source,
                  _fmt(s.time_scale_us))
    out.print(t)


@app.command()
def speed(
    algo: str = typer.Option("ppo", "--algo", help="Comma-separated: ppo, a2c, trpo."),
    env: str = typer.Option("CartPole-v1", "--env", help="Gymnasium id."),
    timesteps: int = typer.Option(20_000, "--timesteps", min=1, help="Env steps per timed run."),
    rounds: int = typer.Option(3, "--rounds", min=1, help="Timed rounds per implementation (alternating)."),
    seeds: int = typer.Option(0, "--seeds", min=0, help="Also compare median samples-to-threshold over this many seeds."),
    sample_timesteps: Optional[int] = typer.Option(None, "--sample-timesteps", min=1, help="Budget of those runs."),
    kernel: str = typer.Option("auto", "--kernel", help="The own implementation's kernel: auto, numpy or torch (autograd)."),
    vec_env: str = typer.Option("sync", "--vec-env", help="Env stepping for both implementations: sync, async, vector, envpool."),
    out_json: Optional[Path] = typer.Option(None, "--json", help="Also write the measurements as JSON."),
) -> None:
    """Own implementation vs SB3: env-steps/s side by side in one process, one torch and BLAS thread each."""
    from dataclasses import asdict

    from bench.envs import env_exists, missing_extra, vec_env_problem
    from bench.run.speed import compare, median_steps

    algos = [a.strip() for a in algo.split(",") if a.strip()]
    bad = [a for a in algos if a not in ("ppo", "a2c", "trpo")]
    if bad or not algos:
        raise _bad_input(f"--algo: {', '.join(bad) or repr(algo)} not comparable with SB3; allowed: ppo, a2c, trpo")
    if not env_exists(env):
        extra = missing_extra(env)
        raise _bad_input(f"--env: {env!r} is {extra}" if extra else
                         f"--env: unknown environment {env!r}; allowed: a registered Gymnasium id (see `bench envs`)")
    if kernel not in ("auto", "numpy", "torch"):
        raise _bad_input(f"--kernel: {kernel!r} is not a kernel; allowed: auto, numpy, torch")
    why = vec_env_problem(env, vec_env)
    if why is not None:
        raise _bad_input(f"--vec-env: {vec_env!r}: {why}")
    if out_json is not None:
        _writable("--json", out_json, folder=False)
    results = []
    for a in algos:
        results.append(compare(a, env, timesteps=timesteps, rounds=rounds, sample_seeds=seeds,
                               sample_timesteps=sample_timesteps, overrides={"kernel": kernel, "vec_env": vec_env},
                               progress=lambda s: err.print(s)))
    t = Table(title=f"own (kernel {kernel}) vs SB3 on {env}, {vec_env} env stepping: env-steps/s (median of {rounds}), one thread, "
                    f"same hyperparameters")
    for col in ("algo", "own steps/s", "sb3 steps/s", "ratio", "own median steps-to-threshold", "sb3 median",
                "own median CPU s to threshold", "sb3 median"):
        t.add_column(col)
    for r in results:
        t.add_row(
            r.algo, _fmt(float(sorted(r.own_steps_per_s)[len(r.own_steps_per_s) // 2]), 0),
            _fmt(float(sorted(r.sb3_steps_per_s)[len(r.sb3_steps_per_s) // 2]), 0), f"{r.ratio:.2f}x",
            _fmt(median_steps(r.own_steps_to_threshold), 0) if seeds else "",
            _fmt(median_steps(r.sb3_steps_to_threshold), 0) if seeds else "",
            _fmt(median_steps(r.own_cpu_s_to_threshold), 2) if seeds else "",
            _fmt(median_steps(r.sb3_cpu_s_to_threshold), 2) if seeds else "",
        )
    out.print(t)
    if out_json is not None:
        import platform

        from bench.run.runner import run_metadata

        out_json.write_text(json.dumps({"results": [asdict(r) | {"ratio": r.ratio, "kernel": kernel, "vec_env": vec_env} for r in results],
                                        "meta": run_metadata(), "machine": platform.machine()}, indent=2))


class Objective(str, Enum):
    auc = "auc"
    steps_to_threshold = "steps_to_threshold"
    final_return = "final_return"


@app.command()
def tune(
    suite: Optional[Path] = typer.Argument(None, help="Suite YAML (its tune: block); or use --algo, --impl and --env."),
    algo: Optional[str] = typer.Option(None, "--algo", help="reinforce | ac_mc | ac_td | a2c | a3c | npg | trpo | ppo | grpo | rloo (without a suite)."),
    impl: str = typer.Option("bench", "--impl", help="bench | sb3 | numpy (without a suite)."),
    env: Optional[str] = typer.Option(None, "--env", help="Gymnasium id (without a suite)."),
    timesteps: Optional[int] = typer.Option(None, "--timesteps", min=1, help="Env steps per seed per trial."),
    trials: Optional[int] = typer.Option(None, "--trials", min=1, help="Finished trials wanted per study, in total (default 20)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Stop starting trials after this many seconds."),
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, help="Seeds per trial (default 3)."),
    objective: Optional[Objective] = typer.Option(None, "--objective", help="auc | steps_to_threshold | final_return."),
    storage: str = typer.Option(DEFAULT_URL, "--storage", "--store", help="Store URL; studies live beside the results."),
    study: Optional[str] = typer.Option(None, "--study", help="Study name (default <algo>-<impl>-<env>)."),
    workers: int = typer.Option(1, "--workers", min=1, help="Tuning processes on the shared storage (PostgreSQL only)."),
    executor: str = typer.Option("local", "--executor", help="local (processes) | ray (workers as Ray tasks; PostgreSQL only)."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster (auto | HOST:PORT); without it a local Ray starts."),
    export_path: Optional[Path] = typer.Option(None, "--export", help="Write the best configuration as a suite file."),
    heartbeat: int = typer.Option(60, "--heartbeat", min=1, help="Seconds between a running trial's heartbeats."),
    grace: int = typer.Option(120, "--grace", min=1, help="Seconds of silence before a trial's worker counts as dead."),
    only: Optional[str] = typer.Option(None, "--only", help="With a suite: tune a subset of its studies, e.g. "
                                       "algo=a2c,impl=bench (keys env, algo, impl, label)."),
) -> None:
    """Tune hyperparameters with Optuna: multi-seed trials, pruning, resumable studies in the store."""
    from bench.suites.suite import parse_only
    from bench.tune import (SQLITE_RAY, SQLITE_WORKERS, BadInput, check_exportable, check_studies, is_sqlite,
                            target_from_flags, targets_from_suite, with_anchor)

    obj = objective.value if objective else None
    if study is not None and not re.fullmatch(r"[^\x00-\x1f\x7f-\x9f]{1,128}", study):
        # Printed in every progress line and stored as Optuna's study name: text, as labels are.
        raise _bad_input(f"--study: {study!r} is not a study name; allowed: 1 to 128 printable characters "
                         "(no control characters)")
    if export_path is not None:  # checked first: tuning takes hours, and the export comes last
        _writable("--export", export_path, folder=False)
    try:
        if suite is not None:
            if algo or env:
                raise BadInput("--algo/--env: give either a suite file or --algo, --impl and --env, not both")
            loaded = _load(suite)
            try:
                filt = parse_only(only)
            except ValueError as e:
                raise BadInput(str(e)) from None
            targets = targets_from_suite(loaded, timesteps=timesteps, seeds=seeds, objective=obj, study=study,
                                         only=filt)
            n_trials = trials or (loaded.suite.tune.trials if loaded.suite.tune else 20)
        else:
            if not algo or not env:
                raise BadInput("bench tune: give a suite file, or --algo and --env (and optionally --impl)")
            if only is not None:
                raise BadInput("--only: picks studies of a suite file; without one, --algo, --impl and --env name the study")
            targets = [target_from_flags(algo, impl, env, timesteps=timesteps, seeds=seeds or 3,
                                         objective=obj or "auc", study=study)]
            n_trials = trials or 20
        if export_path is not None:
            check_exportable(targets)
        url = _check_url(storage, "--storage")
        if executor not in ("local", "ray"):
            raise BadInput(f"--executor: {executor!r}; allowed: local, ray")
        if address is not None and executor != "ray":
            raise BadInput("--address: only with --executor ray")
        if (workers > 1 or executor == "ray") and is_sqlite(url):
            raise BadInput(SQLITE_RAY if executor == "ray" else SQLITE_WORKERS.format(workers=workers))
        if executor == "ray":
            from bench.run.ray_executor import check_address

            if address is not None and (why := check_address(address)):
                raise BadInput(f"--address: {why}")
            try:
                import ray  # noqa: F401
            except ImportError:
                raise BadInput("--executor ray: ray is not installed; install it with pip install 'bench[ray]'") from None
        # The random-policy anchor `auc` is scored against, resolved once here so that a bad
        # threshold is one line before anything runs (and every worker gets the same value).
        targets = [with_anchor(t, url) for t in targets]
        check_studies(targets, url)
    except BadInput as e:
        raise _bad_input(str(e)) from None

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from bench.storage.store import describe_url
    from bench.tune import export_suite
    from bench.tune import tune as tune_target
    from bench.algos.common import pin_one_thread

    pin_one_thread()
    failed = 0
    for t in targets:
        err.print(_styled("bold", t.study, f": {t.label} on {t.env_id}, {len(t.seeds)} seeds × {t.timesteps:,} steps "
                          f"per trial, {t.objective} ({t.direction}), {len(t.space)} dimensions → {describe_url(url)}"))
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("trials"),
                      TimeElapsedColumn(), console=err) as progress:
            task = progress.add_task(t.study, total=n_trials)

            def on_trial(ft, progress=progress, task=task) -> None:
                state = ft.state.name.lower()
                if state in ("complete", "pruned"):
                    # Cooperating workers may each finish one trial past the target.
                    done = progress.tasks[task].completed + 1
                    progress.update(task, completed=done, total=max(done, n_trials))
                val = f"{ft.value:.4g}" if ft.value is not None else "—"
                why = ft.user_attrs.get("error") or ""
                progress.console.print(f"trial {ft.number}: {state} {t.objective} {val} {why}".rstrip(), markup=False)

            try:
                outcome = tune_target(t, url, trials=n_trials, timeout=timeout, workers=workers,
                                      executor=executor, address=address,
                                      heartbeat_s=heartbeat, grace_s=grace, on_trial=on_trial,
                                      on_start=lambda n, progress=progress, task=task: progress.update(
                                          task, completed=n, total=max(n, n_trials)))
            except BadInput as e:
                progress.stop()
                raise _bad_input(str(e)) from None
            except KeyboardInterrupt:
                progress.stop()
                err.print(_styled("yellow", "Interrupted.", " Finished trials are kept in the study; run again to continue."))
                raise typer.Exit(130) from None
        for ft in outcome.new:
            if ft.state.name == "FAIL" and "error" not in ft.user_attrs:
                print(f"trial {ft.number}: failed: its worker stopped sending heartbeats (killed?); "
                      "re-queued with the same parameters", file=sys.stderr)
        # Trials failed by the heartbeat check were another worker's; count only what raised here.
        failed += sum(ft.state.name == "FAIL" and "error" in ft.user_attrs for ft in outcome.new)
        if outcome.dead_workers:
            print(f"{t.study}: {outcome.dead_workers} worker process(es) exited with an error", file=sys.stderr)
            failed += outcome.dead_workers
        counts = ", ".join(f"{v} {k}" for k, v in sorted(outcome.counts.items()))
        best = (f"best trial {outcome.best_trial}: {t.objective} {outcome.best_value:.4g} {json.dumps(outcome.best_hyperparams)}"
                if outcome.best_trial is not None else "no completed trial yet")
        out.print(f"{t.study}: {counts}; {best}", markup=False)
    if export_path is not None:
        try:
            # From a suite: as many fresh seeds as the suite runs (its `seeds:`), for a run beside it.
            export_suite(targets, url, export_path, seeds=len(loaded.suite.seed_list) if suite is not None else None)
        except BadInput as e:
            raise _bad_input(str(e)) from None
        err.print(f"wrote the best configuration to {export_path} (`bench run {export_path}` runs it on fresh seeds)")
    if failed:
        raise typer.Exit(1)


def _results_store(store: str, *, need_done: bool = True, fallback: bool = True) -> tuple[str, str]:
    """The store to read, and a line saying which it is (:func:`bench.api.results_store`): bad input is one
    line and exit status 2; a store that cannot be reached or read is one line and exit status 1."""
    from bench.api import BadInput, results_store

    _check_url(store)  # its password hidden from every line, its name in later error lines
    try:
        return results_store(store, need_done=need_done, fallback=fallback, log=lambda s: err.print(s, markup=False))
    except BadInput as e:
        raise _bad_input(e.lines) from None


@app.command()
def report(
    suites: Optional[list[str]] = typer.Argument(None, help="Suite names in the store, or suite YAML files (default: every suite in the store)."),
    store: str = StoreOpt,
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Output folder (default: reports/<suite name>/, or reports/all/)."),
    screenshot: Optional[Path] = typer.Option(None, "--screenshot", help="Also save a PNG of the page's top 1400×2400 pixels (needs chromium)."),
) -> None:
    """Write a self-contained HTML report (index.html, figures embedded) from the store alone."""
    # A store whose runs all failed still gets a report: it lists the failures and their errors.
    from bench import api

    _check_url(store)
    if screenshot is not None:
        # The path first: a path that cannot be written is the same bad input with or without a browser.
        _writable("--screenshot", screenshot, folder=False)
        from bench.analysis.report import find_chromium

        if find_chromium() is None:
            raise _bad_input(f"--screenshot: {screenshot} needs chromium on PATH (Debian: apt-get install chromium); none found")
    try:
        if err.is_terminal:  # a live line of the step under way; logs and CI get only the lines that stay
            with err.status("report: reading the store") as live:
                path = api.report(suites, store, out_dir, log=lambda s: err.print(s),
                                  stage=lambda s: live.update(f"report: {s}"))
        else:
            path = api.report(suites, store, out_dir, log=lambda s: err.print(s))
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    if screenshot is not None:
        from bench.analysis.report import screenshot as take

        err.print(f"screenshot: {take(path, screenshot)}")
    out.print(f"report: {path}")


def _choice(flag: str, value: Optional[str], allowed: tuple[str, ...]) -> Optional[str]:
    if value is not None and value not in allowed:
        raise _bad_input(f"{flag}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
    return value


@app.command()
def recommend(
    action: Optional[str] = typer.Option(None, "--action", help="discrete | continuous (default: both)."),
    obs: Optional[str] = typer.Option(None, "--obs", help="vector | pixels | sequence (tokens; default: all)."),
    reward: Optional[str] = typer.Option(None, "--reward", help="dense | sparse (default: both)."),
    priority: Optional[str] = typer.Option(None, "--priority", help="samples | time (default: both; wall-clock = time)."),
    fmt: str = typer.Option("table", "--format", help="table | markdown | json | csv."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Scores, runner-up, track record and envs too."),
    store: Optional[str] = typer.Option(None, "--store", help="Answer from this results store (SQLAlchemy URL) "
                                        "instead of the shipped reference (results/reference)."),
    with_reference: bool = typer.Option(False, "--with-reference", help="Two tables: the store's (--store, default "
                                        f"{DEFAULT_URL}), then the shipped reference's."),
) -> None:
    """Which algorithm for my problem? The matching rows of the recommendation table, with their evidence:
    the shipped reference's, or with --store your own store's."""
    from bench.traits import ACTIONS, OBS, PRIORITIES, REWARDS

    action = _choice("--action", action, ACTIONS)
    obs = _choice("--obs", obs, OBS)
    reward = _choice("--reward", reward, REWARDS)
    priority = _choice("--priority", "time" if priority == "wall-clock" else priority, PRIORITIES)
    fmt = _choice("--format", fmt, ("table", "markdown", "json", "csv"))
    if with_reference and fmt in ("json", "csv"):
        raise _bad_input(f"--with-reference: prints two tables; allowed with --format table or markdown (got {fmt!r})")
    from bench.storage.store import describe_url

    sources: list[tuple[Any, str, str]] = []  # (url or Reference, its name in the table's title, the line saying so)
    if store is not None or with_reference:
        url, where = _results_store(store or DEFAULT_URL, fallback=False)
        sources.append((url, describe_url(url), where))
    if store is None:
        from bench.api import reference

        ref = reference(log=lambda s: err.print(s, markup=False))
        if ref is not None:
            sources.append((ref, ref.name, f"reading the project's shipped reference results ({ref.folder}/)"))
        elif with_reference:
            raise _bad_input("--with-reference: no shipped reference here (no packs under results/reference, nor in "
                             "the checkout bench runs from); allowed: a checkout of bench")
        else:  # a wheel installed on its own: the default store, as before the reference shipped
            url, where = _results_store(DEFAULT_URL, fallback=False)
            sources.append((url, describe_url(url), where))
    for i, (url, name, where) in enumerate(sources):
        if i:
            print()
        err.print(where, markup=False)
        _recommend_from(url, name, action=action, obs=obs, reward=reward, priority=priority, fmt=fmt, verbose=verbose)


def _recommend_from(url: Any, source: str, *, action: Optional[str], obs: Optional[str], reward: Optional[str],
                    priority: Optional[str], fmt: str, verbose: bool) -> None:
    """One recommendation table, from ``url`` (a store URL or the shipped reference: :func:`bench.api.recommend`),
    titled with its ``source``'s name."""
    from bench import api

    answer = api.recommend(url, action=action, obs=obs, reward=reward, priority=priority,
                           log=lambda s: err.print(s, markup=False))
    for line in answer.left_out:  # left out by the read: say so, once each
        err.print(line, markup=False)
    rows = answer.rows
    if fmt == "json":
        print(json.dumps(rows, indent=2, default=str))
        return
    if fmt == "csv":
        import pandas as pd

        flat = [{**r, "envs": ";".join(r["envs"]), "tested_envs": ";".join(r["tested_envs"]),
                 "effects": ";".join(f"{k}={v:.4g}" for k, v in r["effects"].items()),
                 "pooling": ";".join(r["pooling"]),
                 "runs": ";".join(f"{k}={v}" for k, v in r["runs"].items())} for r in rows]
        print(pd.DataFrame(flat).to_csv(index=False), end="")
        return
    import textwrap

    shown = rows if verbose else [r for r in rows if r["envs"]]
    cols = _recommend_columns(verbose)
    cells = [[_recommend_cell(r, c) for c in cols] for r in shown]
    if fmt == "markdown":
        print(f"bench recommend — {source}\n")
        print("| " + " | ".join(cols) + " |")
        print("|" + "|".join("---" for _ in cols) + "|")
        for line in cells:
            print("| " + " | ".join(x.replace("|", "\\|").replace("\n", "<br>") for x in line) + " |")
    elif verbose:  # one block per row: details do not fit a table in 100 columns
        print(f"bench recommend — {source}")
        for r in shown:
            print(f"{_recommend_cell(r, 'problem')}, priority {r['priority']}: {r['answer']}")
            for c in ("implementations", "p (Holm)", "envs", "track record", "evidence", "score", "runner-up",
                      "per env", "pooling", "note"):  # noqa: E501 - one block per row
                print(textwrap.fill(_recommend_cell(r, c), width=100, initial_indent=f"  {c + ':':<17}",
                                    subsequent_indent=" " * 19))
    else:
        from rich import box

        t = Table(title=f"bench recommend — {source}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  expand=True)
        ratio = {"problem": 3, "answer": 5, "envs": 3, "impl": 3}  # the answer gets the most room: it is the point
        for c in cols:
            t.add_column(c, overflow="fold", no_wrap=c in ("priority", "p (Holm)", "LOO"), ratio=ratio.get(c))
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
    pooled = sorted({n for r in shown for n in r["pooling"]})
    if pooled and not verbose:
        print(textwrap.fill("ranked apart or counted once: " + "; ".join(pooled), width=100))
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
    g = answer.legend
    n_tests = sum(r["p_value"] is not None for r in rows)
    print(textwrap.fill(
        f"Winner from ≥ {g['min_envs_generalise']} envs: a random-effects test over envs (HKSJ), a claim about the next "
        f"env of the kind; with fewer, the answer names the envs measured. p: {g['correction']} over the {n_tests} "
        f"headline tests; winner at p < {g['alpha']:g}, ≥ {g['min_seeds']} runs per env. envs: count, then the "
        "sign per env tested (alphabetical). LOO: leave-one-env-out hits/trials. Scores: normalised AUC vs steps or "
        "CPU s. Details: --verbose, docs/statistics.md.", width=100))
    if verbose:
        _print_off_policy(answer.off_policy, fmt)


def _print_off_policy(lines: list[str], fmt: str) -> None:
    """The off-policy reference lines (:mod:`bench.analysis.offpolicy`) under the table, one per profile."""
    import textwrap

    if not lines:
        return
    head = ("off-policy reference (SB3 DQN, SAC, TD3: never candidates above; best of them against the answer, "
            "normalised AUC at equal samples and at equal CPU time over each env's common budget; p not adjusted):")
    print()
    print(head if fmt != "markdown" else f"**{head}**\n")
    for text in lines:
        print(f"- {text}" if fmt == "markdown" else textwrap.fill(text, width=100, initial_indent="  ",
                                                                  subsequent_indent="    "))


@app.command()
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
    import math

    fmt = _choice("--format", fmt, ("table", "json"))
    if not (math.isfinite(margin) and 0 < margin <= 1):
        raise _bad_input(f"--margin: {margin!r} is not a margin; allowed: a number in (0, 1] on the normalised scale")
    url, where = _results_store(store)
    err.print(where, markup=False)

    from bench.analysis import collapse, parity as par, scoring
    from bench.analysis.report import parity_table_rows

    data = scoring.load(url, log=lambda s: err.print(s, markup=False))
    scored = scoring.score(data)
    runs = scored.runs
    have = sorted(runs.loc[runs["final_norm"].notna(), "label"].unique()) if len(runs) else []
    for name in (label_a, label_b):
        if name not in have:
            raise _bad_input(f"{name!r}: no label of that name has scored runs in the store; allowed: "
                             f"{', '.join(have) or 'none'}")
    if label_a == label_b:
        raise _bad_input(f"{label_b!r}: the same label twice; allowed: two different labels")
    known = set(runs["env"])
    for e in env or []:
        if e not in known:
            raise _bad_input(f"--env: {e!r} has no scored runs in the store; allowed: {', '.join(sorted(known))}")
    flagged = collapse.flags(runs, data.episodes, data.diagnostics, data.anchors, data.traits)
    result = par.parity(runs, label_a, label_b, envs=env or None, margin=margin,
                        flagged=set(zip(flagged["key"], flagged["kind"])), checkable=collapse.checkable(data.diagnostics))
    if not result:
        raise _bad_input(f"{label_a} and {label_b} have no env in common with scored runs of both"
                         + (f" among --env {', '.join(env)}" if env else ""))
    if fmt == "json":
        import dataclasses

        print(json.dumps([dict(env=ep.env, verdict=ep.verdict, success=ep.success, median_steps=ep.median_steps,
                               collapsed=ep.collapsed, collapse_checks=ep.collapse_checks, comparisons=[dataclasses.asdict(c) for c in ep.comparisons])
                          for ep in result], indent=2, default=str))
        return
    from rich import box

    t = Table(title=f"bench parity {label_a} {label_b}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    cols = ["env", "metric", "A − B [95% CI]", "verdict", "runs", "success", "median steps", "collapsed"]
    for c in cols:
        t.add_column(c, overflow="fold")
    for r in parity_table_rows(result):
        verdict = r["verdict"] + (f" ({r['note']})" if r["verdict"] == "inconclusive" and r["note"] else "")
        t.add_row(*(Text(x) for x in (r["env"], r["metric"], r["diff"], verdict, r["runs"], r["success"],
                                      r["median_steps"], r["collapsed"])))
    out.print(t)
    for ep in result:
        print(f"{ep.env}: {ep.verdict}")
    print(f"equivalent: the 90% Welch interval of A − B within ±{margin:g} (two one-sided tests at "
          f"{par.ALPHA:g}); different: Welch's test rejects equal means at {par.ALPHA:g}; otherwise inconclusive, "
          "with the runs per label for 80% power. Scores normalised: 0 = random policy, 1 = threshold. "
          "A / B: success rate, median env steps to the threshold, fraction of runs flagged as collapsed ('—': "
          "nothing the detector could check, e.g. SB3 records no gradient norm).")


def _recommend_columns(verbose: bool) -> list[str]:
    base = ["problem", "priority", "answer", "p (Holm)", "envs", "LOO", "impl"]
    return base + ["runs", "score", "runner-up", "per env", "pooling", "note"] if verbose else base


def _recommend_cell(r: dict, col: str) -> str:
    if col == "problem":
        return f"{r['action']} {r['obs']} {r['reward']}"
    if col == "p (Holm)":
        return r["p_text"]
    if col in ("impl", "implementations"):
        return r["impl"] or "—"
    if col == "envs":
        n, k = len(r["envs"]), len(r["tested_envs"])
        if not n:
            return "—"
        head = f"{n}" if k == n else f"{k} of {n}"
        return f"{head}: {r['directions']}" if r["directions"] else head
    if col in ("LOO", "track record"):
        return r["track_record"] or "—"
    if col == "runs":
        return r["evidence"].split(", ", 1)[-1].removesuffix(" runs") if r["envs"] else "—"
    if col == "evidence":
        return r["evidence"] + (f"; tested on {', '.join(r['tested_envs'])}" if r["tested_envs"] else "")
    if col == "runner-up":
        return f"{r['runner_up']}: {r['runner_up_score']}" if r["runner_up"] else "—"
    if col == "per env":
        return "; ".join(f"{e} {d:+.3g}" for e, d in r["effects"].items()) or "—"
    if col == "pooling":
        return "; ".join(r["pooling"]) or "—"
    if col == "note":
        return "; ".join(x for x in (r["message"], r["implementation"]) if x)
    return str(r.get(col) or "—")


@app.command("eval")
def eval_(
    run_: str = typer.Argument(..., metavar="RUN", help="A run key (or a unique prefix of it), or label=…,env=…,seed=…"),
    store: str = StoreOpt,
    episodes: int = typer.Option(10, "--episodes", min=1, help="Deterministic episodes to run."),
    video: Optional[Path] = typer.Option(None, "--video", help="Also film them into this MP4 (bench[video])."),
    kind: str = typer.Option("auto", "--kind", help="best | final | auto (best where the run kept it)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="First episode's seed (default: the run's eval seed)."),
    artifacts: Optional[str] = typer.Option(None, "--artifacts", help="The policies folder, if it moved."),
) -> None:
    """Run a saved policy (suite save: final | best) for N episodes: mean ± sd return, and an MP4 with --video."""
    from bench.api import PolicyError, evaluate, load_policy, video_missing

    _choice("--kind", kind, ("auto", "best", "final"))
    if video is not None and (why := video_missing() or (None if video.suffix.lower() == ".mp4" else
                                                         f"--video: {video} is not an .mp4 file; allowed: FILE.mp4")):
        raise _bad_input(why)
    if video is not None:
        _writable("--video", video, folder=False)
    try:
        pi = load_policy(run_, _check_url(store), kind=kind, artifacts=artifacts)  # type: ignore[arg-type]
        ev = evaluate(pi, episodes, seed=seed, video=video)
    except PolicyError as e:
        raise _bad_input(str(e)) from None
    out.print(f"{pi.label} on {pi.env_id}, seed {pi.seed}, {pi.kind} policy (step {pi.step:,}): return {ev.mean:.1f} ± "
              f"{ev.sd:.1f} over {episodes} episode(s) from seed {ev.seed}" + (f"; {ev.frames} frames → {video}" if video else ""))


@app.command()
def schema() -> None:
    """Print the JSON Schema of suite files."""
    from bench.suites.suite import json_schema

    print(json.dumps(json_schema(), indent=2))


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
