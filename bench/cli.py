"""The ``bench`` command: run | status | export | envs | schema | speed.

Bad input is one line per problem on stderr and exit status 2; nothing runs and
no store is created or touched. A run's own failure is a result, reported in the
closing summary (exit status 1 when any cell failed).
"""

from __future__ import annotations

import json
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from bench.store import DEFAULT_URL

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Which on-policy RL algorithm should I use? Run benchmark suites and find out.",
)
# Off a terminal (CI logs, pipes) rich would wrap at 80 columns; give tables room instead.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)

StoreOpt = typer.Option(DEFAULT_URL, "--store", help="SQLAlchemy URL of the results store (SQLite file or postgresql://…).")


def _bad_input(lines: list[str] | str) -> typer.Exit:
    # Plain print, not rich: paths like algorithms[1] must not be read as markup.
    for line in [lines] if isinstance(lines, str) else lines:
        print(line, file=sys.stderr)
    return typer.Exit(2)


def _load(suite_path: Path):
    from bench.suite import SuiteError, load_suite

    try:
        return load_suite(suite_path)
    except SuiteError as e:
        raise _bad_input(e.lines) from None


def _check_url(url: str) -> str:
    import sqlalchemy as sa

    from bench.store import normalise_url

    try:
        u = sa.engine.make_url(normalise_url(url))
        if u.get_backend_name() not in ("sqlite", "postgresql"):
            raise ValueError
    except Exception:  # noqa: BLE001 - any parse failure is the same user error
        raise _bad_input(
            f"--store: {url!r} is not a usable store URL; allowed: sqlite:///PATH or postgresql://USER@HOST:PORT/DB"
        ) from None
    return normalise_url(url)


def _fmt(v, digits: int = 1) -> str:
    if v is None or v != v:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


@app.command()
def run(
    suite: Path = typer.Argument(..., help="Suite YAML file."),
    store: str = StoreOpt,
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Worker processes (default: number of cores)."),
    only: Optional[str] = typer.Option(None, "--only", help="Run a subset, e.g. env=CartPole-v1,algo=ppo."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the cells that would run; touch nothing."),
) -> None:
    """Run a suite: every env × algorithm × seed cell, skipping cells already done."""
    import os

    from bench.suite import parse_only, select

    loaded = _load(suite)
    try:
        filt = parse_only(only)
    except ValueError as e:
        raise _bad_input(str(e)) from None
    url = _check_url(store)
    cells = select(loaded.cells, filt)
    if not cells:
        raise _bad_input(f"--only: {only!r} matches none of the {len(loaded.cells)} cells of {suite}")
    n_workers = workers or os.cpu_count() or 1

    if dry_run:
        t = Table(title=f"{loaded.suite.name}: {len(cells)} cells (dry run, nothing written)")
        for col in ("key", "env", "label", "seed", "timesteps", "threshold"):
            t.add_column(col)
        for c in cells:
            t.add_row(c.key, c.env_id, c.label, str(c.seed), f"{c.timesteps:,}", _fmt(c.threshold))
        out.print(t)
        return

    from bench.runner import Interrupted, run_local
    from bench.store import Store, describe_url, is_claimable, this_owner

    db = Store(url)
    db.register(loaded.suite.name, str(suite), loaded.suite.model_dump(mode="json"), loaded.env_meta, loaded.cells)
    rows = db.rows([c.key for c in cells])
    todo = [c for c in cells if is_claimable(rows[c.key])]
    done_before = sum(rows[c.key].status == "done" for c in cells)
    busy = len(cells) - len(todo) - done_before
    err.print(
        f"[bold]{loaded.suite.name}[/]: {len(cells)} cells — {done_before} done already, "
        f"{busy} running elsewhere, {len(todo)} to run on {min(n_workers, max(len(todo), 1))} worker(s) "
        f"→ {describe_url(url)}"
    )
    if not todo:
        _closing(loaded.suite.name, [], done_before, busy, 0.0)
        return

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    owner = this_owner()
    t0 = time.perf_counter()
    results = []
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cells"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    ) as progress:
        task = progress.add_task(loaded.suite.name, total=len(todo))

        def on_done(cell, outcome) -> None:
            results.append((cell, outcome))
            progress.advance(task)
            s = outcome.summary
            if outcome.status == "done":
                stt = s.get("steps_to_threshold")
                solved = f"solved at {stt:,} steps" if stt is not None else "not solved"
                progress.console.print(
                    f"[green]done[/]   {cell.env_id} {cell.label} seed {cell.seed}: final return "
                    f"{_fmt(s.get('final_return'))}, {solved}, {outcome.wall_s:.1f}s"
                )
            elif outcome.status == "failed":
                progress.console.print(f"[red]failed[/] {cell.env_id} {cell.label} seed {cell.seed}: {outcome.error}", markup=True)
            else:
                progress.console.print(f"[yellow]skipped[/] {cell.env_id} {cell.label} seed {cell.seed}: taken by another runner")

        try:
            run_local(url, todo, owner, n_workers, on_done)
        except Interrupted:
            progress.stop()
            n_done = sum(o.status == "done" for _, o in results)
            err.print(
                f"[yellow]Interrupted.[/] {n_done} cells finished and are kept; in-flight runs are marked "
                "interrupted and will re-run with the next `bench run`."
            )
            raise typer.Exit(130) from None
    failed = _closing(loaded.suite.name, results, done_before, busy, time.perf_counter() - t0)
    if failed:
        raise typer.Exit(1)


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
def status(suite: Path = typer.Argument(..., help="Suite YAML file."), store: str = StoreOpt) -> None:
    """Show done / failed / running / pending for every cell of a suite."""
    from bench.store import Store, is_claimable, store_exists

    loaded = _load(suite)
    url = _check_url(store)
    rows = Store(url).rows([c.key for c in loaded.cells]) if store_exists(url) else {}
    t = Table(title=f"{loaded.suite.name}: {len(loaded.cells)} cells")
    for col in ("env", "label", "seed", "status", "attempt", "steps", "final return", "steps to threshold", "error"):
        t.add_column(col)
    counts: dict[str, int] = {}
    for c in loaded.cells:
        r = rows.get(c.key)
        st = "pending" if r is None else r.status
        if r is not None and st == "running" and is_claimable(r):
            st = "stale"  # its runner died; the next `bench run` re-runs it
        counts[st] = counts.get(st, 0) + 1
        t.add_row(
            c.env_id, c.label, str(c.seed), st,
            _fmt(r.attempt if r else 0), _fmt(r.total_steps if r else None),
            _fmt(r.final_return if r else None), _fmt(r.steps_to_threshold if r else None),
            (r.error or "")[:60] if r else "",
        )
    out.print(t)
    out.print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))


class Format(str, Enum):
    csv = "csv"
    parquet = "parquet"


@app.command()
def export(
    store: str = StoreOpt,
    suite: Optional[str] = typer.Option(None, "--suite", help="Only this suite (by name)."),
    format: Format = typer.Option(Format.csv, "--format", help="csv or parquet."),
    out_path: Path = typer.Option(..., "--out", help="Output file."),
) -> None:
    """Export one row per run (summary, config and provenance) as CSV or Parquet."""
    from bench.store import Store, describe_url, store_exists

    url = _check_url(store)
    if not store_exists(url):
        raise _bad_input(f"--store: no results store at {describe_url(url)}; run a suite first (`bench run SUITE.yaml`)")
    db = Store(url)
    if suite is not None and suite not in (names := db.suite_names()):
        raise _bad_input(f"--suite: no suite named {suite!r} in the store; allowed: {', '.join(names) or 'none'}")
    df = db.runs_frame(suite)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if format is Format.csv:
        df.to_csv(out_path, index=False)
    else:
        df.to_parquet(out_path, index=False)
    err.print(f"wrote {len(df)} runs to {out_path}")


@app.command()
def envs() -> None:
    """List the environment registry: traits and default thresholds."""
    from bench.envs import list_specs

    t = Table(title="bench environment registry (any other Gymnasium id runs too; give it a threshold)")
    for col in ("id", "family", "action", "obs", "reward", "horizon", "threshold", "threshold source"):
        t.add_column(col)
    for s in list_specs():
        t.add_row(s.id, s.family, s.action, s.obs, s.reward, _fmt(s.horizon), _fmt(s.threshold), s.threshold_source)
    out.print(t)


@app.command()
def speed(
    algo: str = typer.Option("ppo", "--algo", help="Comma-separated: ppo, a2c, trpo."),
    env: str = typer.Option("CartPole-v1", "--env", help="Gymnasium id."),
    timesteps: int = typer.Option(20_000, "--timesteps", min=1, help="Env steps per timed run."),
    rounds: int = typer.Option(3, "--rounds", min=1, help="Timed rounds per implementation (alternating)."),
    seeds: int = typer.Option(0, "--seeds", min=0, help="Also compare median samples-to-threshold over this many seeds."),
    sample_timesteps: Optional[int] = typer.Option(None, "--sample-timesteps", min=1, help="Budget of those runs."),
    out_json: Optional[Path] = typer.Option(None, "--json", help="Also write the measurements as JSON."),
) -> None:
    """Own implementation vs SB3: env-steps/s side by side in one process, one torch thread each."""
    from dataclasses import asdict

    from bench.envs import env_exists
    from bench.speed import compare, median_steps

    algos = [a.strip() for a in algo.split(",") if a.strip()]
    bad = [a for a in algos if a not in ("ppo", "a2c", "trpo")]
    if bad or not algos:
        raise _bad_input(f"--algo: {', '.join(bad) or repr(algo)} not comparable with SB3; allowed: ppo, a2c, trpo")
    if not env_exists(env):
        raise _bad_input(f"--env: unknown environment {env!r}; allowed: a registered Gymnasium id (see `bench envs`)")
    results = []
    for a in algos:
        results.append(compare(a, env, timesteps=timesteps, rounds=rounds, sample_seeds=seeds,
                               sample_timesteps=sample_timesteps, progress=lambda s: err.print(s)))
    t = Table(title=f"own vs SB3 on {env}: env-steps/s (median of {rounds}), one torch thread, same hyperparameters")
    for col in ("algo", "own steps/s", "sb3 steps/s", "ratio", "own median steps-to-threshold", "sb3 median"):
        t.add_column(col)
    for r in results:
        t.add_row(
            r.algo, _fmt(float(sorted(r.own_steps_per_s)[len(r.own_steps_per_s) // 2]), 0),
            _fmt(float(sorted(r.sb3_steps_per_s)[len(r.sb3_steps_per_s) // 2]), 0), f"{r.ratio:.2f}x",
            _fmt(median_steps(r.own_steps_to_threshold), 0) if seeds else "",
            _fmt(median_steps(r.sb3_steps_to_threshold), 0) if seeds else "",
        )
    out.print(t)
    if out_json is not None:
        import platform

        from bench.runner import run_metadata

        out_json.write_text(json.dumps({"results": [asdict(r) | {"ratio": r.ratio} for r in results],
                                        "meta": run_metadata(), "machine": platform.machine()}, indent=2))


@app.command()
def schema() -> None:
    """Print the JSON Schema of suite files."""
    from bench.suite import json_schema

    print(json.dumps(json_schema(), indent=2))


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
