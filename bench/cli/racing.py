"""``bench race ENV``: candidate labels raced rung by rung on one env (:func:`bench.api.race`), each rung's
decision printed as it is made, then one answer and the CPU it spent against the full grid's. ``bench race
SUITE.yaml`` races a suite file with a ``race:`` block (:func:`bench.api.race_file`), as ``bench tune SUITE.yaml``
tunes one with a ``tune:`` block."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bench import api
from bench.cli.base import StoreOpt, _bad_input, _store_url, err, out


def _p(x: float) -> str:
    return f"{x:.2g}"


def _rung_lines(report, result) -> list[str]:
    last = report.fraction >= 1
    at = "the full budget" if last else f"{api.race_fraction(report.fraction)} of the budget"
    head = f"rung {len(result.rungs)}: {at} ({report.steps:,} steps)"
    step = report.step
    if step is None:
        return [f"{head}: no label has finished an episode yet; all {len(report.ran)} go on"]
    lines = [f"{head}: leader {step.leader}; {'still in' if last else 'go on'}: {', '.join(step.kept)}"
             + (f"; {len(report.ran) - len(step.kept) - len(step.stopped)} without a score yet go on too"
                if len(report.ran) > len(step.kept) + len(step.stopped) else "")]
    lines += [f"  stopped {s.label}: behind {step.leader} (one-sided Welch p = {_p(s.p)}, Holm-adjusted "
              f"{_p(s.p_adjusted)}, below {step.alpha:g})" for s in step.stopped]
    return lines


#: The flags a suite file sets itself (its algorithms, seeds, timesteps and race block), so refused beside one.
_FILE_SETS = {"--algos": "algorithms", "--seeds": "seeds", "--budget": "defaults.timesteps",
              "--cpu-hours": "race.cpu_hours", "--priority": "race.priority", "--rungs": "race.rungs"}


def _is_suite_file(arg: str) -> bool:
    """A suite file, not an env id: env ids never end in .yaml (``module:EnvId`` neither)."""
    return arg.lower().endswith((".yaml", ".yml"))


def race(
    env: str = typer.Argument(..., help="Gymnasium id (or a bench env) to race the labels on, or a suite YAML file "
                                        "with a race: block (docs/race.md)."),
    algos: Optional[str] = typer.Option(
        None, "--algos", help="Comma-separated labels: ppo = the own implementation (ppo-bench), ppo-numpy another; "
                              "SB3's cannot pause, so are refused. Default: the shipped reference's candidates for "
                              "the env's profile, else ppo,a2c,trpo."),
    seeds: Optional[int] = typer.Option(None, "--seeds", help=f"Seeds per label (default {api.RACE_SEEDS})."),
    budget: Optional[int] = typer.Option(None, "--budget", help="Full budget in env steps (default: the largest "
                                                                "rl-baselines3-zoo budget among the labels)."),
    cpu_hours: Optional[float] = typer.Option(None, "--cpu-hours", help="End the race after the rung where it has "
                                                                        "spent this many CPU hours."),
    priority: Optional[str] = typer.Option(None, "--priority", help="samples | time: which reference answer gives the "
                                                                    "default --algos (a rung decides on the sample score)."),
    rungs: Optional[str] = typer.Option(None, "--rungs", help=f"Fractions of the budget, the last 1 (default "
                                                             f"{api.RACE_RUNGS})."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Worker processes (default: number of cores); "
                                                                  "with --executor ray: the local Ray's CPUs."),
    executor: str = typer.Option("local", "--executor", help="local: a process pool on this machine; ray: one Ray "
                                                             "task per run and rung, as `bench run --executor ray`."),
    address: Optional[str] = typer.Option(None, "--address", help="With --executor ray: the cluster (auto or "
                                                                  "HOST:PORT); default: start a local Ray."),
    artifacts: Optional[Path] = typer.Option(None, "--artifacts", help="Folder of the runs' checkpoints (default "
                                             "beside a SQLite store, else results/policies); on a cluster, one that "
                                             "every worker reaches."),
    store: str = StoreOpt,
) -> None:
    """Race labels on one env: all run to each rung, those the statistics rule out stop, the rest continue from
    their checkpoints (docs/race.md). ENV may be a suite file with a race: block instead."""
    store_url = _store_url(store)
    if workers is not None and workers < 1:
        raise _bad_input(f"--workers: {workers}; allowed: 1 or more")
    given = {"--algos": algos, "--seeds": seeds, "--budget": budget, "--cpu-hours": cpu_hours, "--priority": priority,
             "--rungs": rungs}
    if _is_suite_file(env) and (flag := next((f for f, v in given.items() if v is not None), None)):
        raise _bad_input(f"{flag}: {env} is a suite file, which sets it itself ({_FILE_SETS[flag]}); allowed beside a "
                         "suite file: --store, --workers, --executor, --address, --artifacts")

    def on_rung(report, result) -> None:
        for line in _rung_lines(report, result):
            out.print(line, soft_wrap=True)

    log = lambda s: err.print(s, soft_wrap=True)  # noqa: E731
    where = dict(store=store_url, workers=workers, executor=executor, address=address, artifacts=artifacts,
                 on_rung=on_rung, log=log)
    try:
        if _is_suite_file(env):
            result = api.race_file(env, **where)
        else:
            result = api.race(env, algos=algos, seeds=api.RACE_SEEDS if seeds is None else seeds, budget=budget,
                              cpu_hours=cpu_hours, priority=priority, rungs=api.RACE_RUNGS if rungs is None else rungs,
                              **where)
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    for line in api.race_answer_lines(result):
        out.print(line, soft_wrap=True)
