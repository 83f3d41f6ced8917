"""The smaller commands: ``bench tune``, ``eval``, ``envs``, ``speed`` and ``schema``."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench import api
from bench.distribution import NAME as DIST
from bench.cli.base import StoreOpt, _bad_input, _choice, _fmt, _store_url, _styled, _writable, err, out

def envs() -> None:
    """List every env bench knows (its registry and its own sequence tasks): traits and default thresholds."""
    t = Table(title="bench environments: the registry and bench's own sequence tasks (any other Gymnasium id "
                    "runs too; give it a threshold, and a time_scale_us for time scores)")
    for col in ("id", "family", "action", "obs", "reward", "horizon", "threshold", "threshold source", "time scale (µs/step)"):
        t.add_column(col)
    for s in api.envs():
        t.add_row(s.id, s.family, s.action, s.obs, s.reward, _fmt(s.horizon), _fmt(s.threshold), s.threshold_source,
                  _fmt(s.time_scale_us))
    out.print(t)


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
    try:
        results = api.speed(algo, env, timesteps=timesteps, rounds=rounds, seeds=seeds, sample_timesteps=sample_timesteps,
                            kernel=kernel, vec_env=vec_env, out_json=out_json, progress=lambda s: err.print(s))
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    t = Table(title=f"own (kernel {kernel}) vs SB3 on {env}, {vec_env} env stepping: env-steps/s (median of {rounds}), one thread, "
                    f"same hyperparameters")
    for col in ("algo", "own steps/s", "sb3 steps/s", "ratio", "own median steps-to-threshold", "sb3 median",
                "own median CPU s to threshold", "sb3 median"):
        t.add_column(col)
    for r in results:
        t.add_row(
            r.algo, _fmt(float(sorted(r.own_steps_per_s)[len(r.own_steps_per_s) // 2]), 0),
            _fmt(float(sorted(r.sb3_steps_per_s)[len(r.sb3_steps_per_s) // 2]), 0), f"{r.ratio:.2f}x",
            _fmt(api.median_steps(r.own_steps_to_threshold), 0) if seeds else "",
            _fmt(api.median_steps(r.sb3_steps_to_threshold), 0) if seeds else "",
            _fmt(api.median_steps(r.own_cpu_s_to_threshold), 2) if seeds else "",
            _fmt(api.median_steps(r.sb3_cpu_s_to_threshold), 2) if seeds else "",
        )
    out.print(t)


class Objective(str, Enum):
    auc = "auc"
    steps_to_threshold = "steps_to_threshold"
    final_return = "final_return"


def tune(
    suite: Optional[Path] = typer.Argument(None, help="Suite YAML (its tune: block); or use --algo, --impl and --env."),
    algo: Optional[str] = typer.Option(None, "--algo", help=f"{' | '.join(api.TUNE_ALGOS)} (without a suite)."),
    impl: str = typer.Option("bench", "--impl", help=f"{' | '.join(api.IMPLS)} (without a suite)."),
    env: Optional[str] = typer.Option(None, "--env", help="Gymnasium id (without a suite)."),
    timesteps: Optional[int] = typer.Option(None, "--timesteps", min=1, help="Env steps per seed per trial."),
    trials: Optional[int] = typer.Option(None, "--trials", min=1, help="Finished trials wanted per study, in total (default 20)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Stop starting trials after this many seconds."),
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, help="Seeds per trial (default 3)."),
    objective: Optional[Objective] = typer.Option(None, "--objective", help="auc | steps_to_threshold | final_return."),
    store: str = typer.Option(api.DEFAULT_URL, "--storage", "--store", help="Store URL; studies live beside the results."),
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
    store_url = _store_url(store, "--storage")
    try:
        plan = api.plan_tune(suite, algo=algo, impl=impl, env=env, timesteps=timesteps, trials=trials, seeds=seeds,
                             objective=objective.value if objective else None, store=store_url, study=study,
                             workers=workers, executor=executor, address=address, export=export_path, only=only)
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    failed = sum(_tune_one(plan, t, timeout=timeout, heartbeat=heartbeat, grace=grace) for t in plan.targets)
    if export_path is not None:
        try:
            api.export_best(plan, export_path)
        except api.BadInput as e:
            raise _bad_input(e.lines) from None
        err.print(f"wrote the best configuration to {export_path} (`bench run {export_path}` runs it on fresh seeds)")
    if failed:
        raise typer.Exit(1)


def _tune_one(plan, t, *, timeout: Optional[float], heartbeat: int, grace: int) -> int:
    """``bench tune``'s study ``t`` of ``plan``: its head line, a progress bar and a line per trial, then its
    summary. Returns the failures that count against the exit status: trials that raised here, and worker
    processes that exited with an error."""
    n_trials = plan.trials
    err.print(_styled("bold", t.study, f": {t.label} on {t.env_id}, {len(t.seeds)} seeds × {t.timesteps:,} steps "
                      f"per trial, {t.objective} ({t.direction}), {len(t.space)} dimensions → {plan.store_url.shown}"))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("trials"),
                  TimeElapsedColumn(), console=err) as progress:
        task = progress.add_task(t.study, total=n_trials)

        def on_trial(ft) -> None:
            state = ft.state.name.lower()
            if state in ("complete", "pruned"):
                # Cooperating workers may each finish one trial past the target.
                done = progress.tasks[task].completed + 1
                progress.update(task, completed=done, total=max(done, n_trials))
            val = f"{ft.value:.4g}" if ft.value is not None else "—"
            why = ft.user_attrs.get("error") or ""
            progress.console.print(f"trial {ft.number}: {state} {t.objective} {val} {why}".rstrip(), markup=False)

        try:
            [outcome] = api.tune(plan, t, timeout=timeout, heartbeat_s=heartbeat, grace_s=grace, on_trial=on_trial,
                                 on_start=lambda n: progress.update(task, completed=n, total=max(n, n_trials)))
        except api.BadInput as e:
            progress.stop()
            raise _bad_input(e.lines) from None
        except KeyboardInterrupt:
            progress.stop()
            err.print(_styled("yellow", "Interrupted.", " Finished trials are kept in the study; run again to continue."))
            raise typer.Exit(130) from None
    for ft in outcome.new:
        if ft.state.name == "FAIL" and "error" not in ft.user_attrs:
            print(f"trial {ft.number}: failed: its worker stopped sending heartbeats (killed?); "
                  "re-queued with the same parameters", file=sys.stderr)
    # Trials failed by the heartbeat check were another worker's; count only what raised here.
    failed = sum(ft.state.name == "FAIL" and "error" in ft.user_attrs for ft in outcome.new)
    if outcome.dead_workers:
        print(f"{t.study}: {outcome.dead_workers} worker process(es) exited with an error", file=sys.stderr)
        failed += outcome.dead_workers
    counts = ", ".join(f"{v} {k}" for k, v in sorted(outcome.counts.items()))
    best = (f"best trial {outcome.best_trial}: {t.objective} {outcome.best_value:.4g} {json.dumps(outcome.best_hyperparams)}"
            if outcome.best_trial is not None else "no completed trial yet")
    out.print(f"{t.study}: {counts}; {best}", markup=False)
    return failed


def eval_(
    run_: str = typer.Argument(..., metavar="RUN", help="A run key (or a unique prefix of it), or label=…,env=…,seed=…"),
    store: str = StoreOpt,
    episodes: int = typer.Option(10, "--episodes", min=1, help="Deterministic episodes to run."),
    video: Optional[Path] = typer.Option(None, "--video", help=f"Also film them into this MP4 ({DIST}[video])."),
    kind: str = typer.Option("auto", "--kind", help="best | final | auto (best where the run kept it)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="First episode's seed (default: the run's eval seed)."),
    artifacts: Optional[str] = typer.Option(None, "--artifacts", help="The policies folder, if it moved."),
    trust: bool = typer.Option(False, "--trust", help="Also load files that run code: an SB3 policy saved by an "
                               "earlier bench (SB3's zip, VecNormalize's pickle) and a module:EnvId env's module. "
                               "Only for files you trust."),
) -> None:
    """Run a saved policy (suite save: final | best) for N episodes: mean ± sd return, and an MP4 with --video.

    Saved files are read as data (tensors, arrays, JSON); a file that is not, or not bench's, is refused in one line."""
    _choice("--kind", kind, ("auto", "best", "final"))
    if video is not None and (why := api.video_missing() or (None if video.suffix.lower() == ".mp4" else
                                                         f"--video: {video} is not an .mp4 file; allowed: FILE.mp4")):
        raise _bad_input(why)
    if video is not None:
        _writable("--video", video, folder=False)
    store_url = _store_url(store)
    try:
        pi = api.load_policy(run_, store_url, kind=kind, artifacts=artifacts, trust=trust)
        ev = api.evaluate(pi, episodes, seed=seed, video=video)
    except api.PolicyError as e:
        raise _bad_input(str(e)) from None
    out.print(f"{pi.label} on {pi.env_id}, seed {pi.seed}, {pi.kind} policy (step {pi.step:,}): return {ev.mean:.1f} ± "
              f"{ev.sd:.1f} over {episodes} episode(s) from seed {ev.seed}" + (f"; {ev.frames} frames → {video}" if video else ""))


def schema() -> None:
    """Print the JSON Schema of suite files."""
    print(json.dumps(api.suite_schema(), indent=2))
