"""``bench race ENV``: candidate labels raced rung by rung on one env (:func:`bench.api.race`), each rung's
decision printed as it is made, then one answer and the CPU it spent against the full grid's."""

from __future__ import annotations

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


def race(
    env: str = typer.Argument(..., help="Gymnasium id (or a bench env) to race the labels on."),
    algos: Optional[str] = typer.Option(
        None, "--algos", help="Comma-separated labels: ppo = the own implementation (ppo-bench), ppo-numpy another; "
                              "SB3's cannot pause, so are refused. Default: the shipped reference's candidates for "
                              "the env's profile, else ppo,a2c,trpo."),
    seeds: int = typer.Option(api.RACE_SEEDS, "--seeds", help="Seeds per label."),
    budget: Optional[int] = typer.Option(None, "--budget", help="Full budget in env steps (default: the largest "
                                                                "rl-baselines3-zoo budget among the labels)."),
    cpu_hours: Optional[float] = typer.Option(None, "--cpu-hours", help="End the race after the rung where it has "
                                                                        "spent this many CPU hours."),
    priority: Optional[str] = typer.Option(None, "--priority", help="samples | time: which reference answer gives the "
                                                                    "default --algos (a rung decides on the sample score)."),
    rungs: str = typer.Option(api.RACE_RUNGS, "--rungs", help="Fractions of the budget, the last 1."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Worker processes (default: number of cores)."),
    store: str = StoreOpt,
) -> None:
    """Race labels on one env: all run to each rung, those the statistics rule out stop, the rest continue from
    their checkpoints (docs/race.md)."""
    store_url = _store_url(store)
    if workers is not None and workers < 1:
        raise _bad_input(f"--workers: {workers}; allowed: 1 or more")

    def on_rung(report, result) -> None:
        for line in _rung_lines(report, result):
            out.print(line, soft_wrap=True)

    try:
        result = api.race(env, algos=algos, seeds=seeds, budget=budget, cpu_hours=cpu_hours, priority=priority,
                          store=store_url, rungs=rungs, workers=workers, on_rung=on_rung,
                          log=lambda s: err.print(s, soft_wrap=True))
    except api.BadInput as e:
        raise _bad_input(e.lines) from None
    for line in api.race_answer_lines(result):
        out.print(line, soft_wrap=True)
