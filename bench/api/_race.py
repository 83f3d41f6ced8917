"""``bench race ENV``: candidate labels raced on one env, rung by rung, the runs that go on continuing from their
checkpoints (docs/race.md, "Running a race").

The race is a suite like any other (written beside the store, as a one-line run's is, so ``bench report`` and
``bench recommend --store`` read its runs), with a checkpoint interval. Each rung runs the labels still in up to
that fraction of the full budget (:attr:`bench.suites.cells.Cell.pause_at`: the run stops at the first update
boundary at or past it, writes a checkpoint there and is recorded as paused, ``interrupted`` in the store), then
decides with :func:`bench.analysis.race.race_step` on the runs' ``held`` prefix scores
(:func:`bench.analysis.race.prefix_scores`). The next rung continues only the labels still in from their
checkpoints; the schedules stay keyed to the full budget, so what a rung sees is the full run's prefix. The last
rung (fraction 1) runs them to the end: those runs are done. A stopped label's runs stay paused with their
checkpoints, so ``bench run`` on the race's suite file later completes the grid from where they stopped.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from bench.api._common import BadInput, parse_store
from bench.storage.urls import StoreURL
from bench.suites.race import DEFAULT_RUNGS, NO_PAUSE, RUNGS_ALLOWED, rung_fractions

#: The level each rung tests at (the reference's own, 0.05, at every rung: docs/race.md's chosen design).
ALPHA = 0.05
DEFAULT_SEEDS = 5
#: The labels raced when neither ``--algos`` nor the shipped reference's answer names any.
FALLBACK_ALGOS = ("ppo", "a2c", "trpo")
#: The score a rung decides on (:data:`bench.analysis.race.SCORES`): the chosen design's.
SCORE = "held"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class RungReport:
    """One rung: its ``fraction`` of the budget and env ``steps``, the labels that ran to it, their seeds' scores
    (label → ``(n_seeds,)``, NaN for a seed with no finished episode yet), the decision (``step``:
    :class:`bench.analysis.race.RaceStep`; ``None`` where no label had a score), and the CPU seconds the race had
    spent once it ended."""

    fraction: float
    steps: int
    ran: tuple[str, ...]
    scores: dict[str, np.ndarray]
    step: Any
    cpu_s: float


@dataclass
class RaceResult:
    """A whole race: its suite (``suite``, ``path``, ``store_url``), the ``labels`` raced, each rung's report, the
    tied set still in at the end (``kept``) and its ``pick`` (the highest IQM of the last rung's scores among
    them), each kept label's interval text, the CPU seconds spent and the full grid's estimate
    (:func:`grid_cpu`), and ``cut``: why it ended before its last rung (``--cpu-hours``), else ``None``."""

    env: str
    suite: str
    path: str
    store_url: StoreURL
    labels: tuple[str, ...]
    budget: int
    seeds: int
    rungs: list[RungReport] = field(default_factory=list)
    kept: tuple[str, ...] = ()
    pick: str | None = None
    intervals: dict[str, str] = field(default_factory=dict)
    cpu_s: float = 0.0
    grid_cpu_s: float = 0.0
    cut: str | None = None
    failed: list[str] = field(default_factory=list)
    #: The command that completes the grid from the paused runs' checkpoints (``bench run FILE``).
    grid_command: str = ""

    @property
    def url(self) -> str:
        """The store's normalised URL as text (kept for callers of 0.x; :attr:`store_url` is the type)."""
        return self.store_url.text


def parse_rungs(text: str) -> tuple[float, ...]:
    """``--rungs``: fractions of the budget (``1/9`` or ``0.5``), increasing, each in (0, 1], the last 1.

    :raises BadInput: one line naming the bad value."""
    try:
        out = rung_fractions(text)
    except ValueError as e:
        what = " is not a list of fractions" if str(e) == "not a list" else ""
        raise BadInput(f"--rungs: {text!r}{what}; {RUNGS_ALLOWED}") from None
    return tuple(float(f) for f in out)


def parse_algos(text: str) -> list[tuple[str, str]]:
    """``--algos``: ``algo`` (the own implementation, ``bench``) or ``algo-impl`` (``ppo-numpy``), as
    ``(algo, impl)``. SB3's labels (``ppo-sb3``) are refused: their runs take no checkpoints, so they cannot
    pause at a rung (docs/race.md).

    :raises BadInput: one line naming the bad label and what is allowed."""
    from bench.algos.registry import names, spec

    known = list(names())
    out: list[tuple[str, str]] = []
    for item in [p.strip() for p in text.split(",")]:
        algo, impl = item, "bench"
        if item not in known and "-" in item:
            algo, impl = item.rsplit("-", 1)
        if algo not in known:
            raise BadInput(f"--algos: {item!r} is not a registered algorithm; allowed: {', '.join(known)} (the own "
                           "implementation), or ALGO-IMPL such as ppo-numpy")
        if impl == "sb3":
            raise BadInput(f"--algos: {item!r} cannot race: SB3's runs take no checkpoints, so they cannot pause at "
                           f"a rung and continue; allowed: the own implementations (e.g. {algo})")
        if algo in NO_PAUSE:
            raise BadInput(f"--algos: {item!r} cannot race: its runs take no checkpoints (asynchronous workers), so "
                           "they cannot pause at a rung and continue; allowed: the other own implementations")
        if impl not in spec(algo).impls or impl == "python":
            raise BadInput(f"--algos: {item!r}: {algo} has no implementation {impl!r} that can race; allowed: "
                           + ", ".join(f"{algo}-{i}" for i in spec(algo).impls if i not in ("sb3", "python")))
        if (algo, impl) in out:
            raise BadInput(f"--algos: {item!r} is given twice")
        out.append((algo, impl))
    if not out:
        raise BadInput("--algos: no label given; allowed: a comma-separated list, e.g. ppo,a2c")
    return out


def default_algos(env: str, priority: str | None, log: Callable[[str], None] | None = None) -> str:
    """The candidates the shipped reference's answer names for ``env``'s profile (action, observations, reward)
    at ``priority`` that can race (not SB3's), as ``--algos`` text; :data:`FALLBACK_ALGOS` where it names none."""
    from bench.api._recommend import recommend
    from bench.envs.registry import get_spec

    try:
        s = get_spec(env)
        answer = recommend(None, action=s.action, obs=s.obs, reward=s.reward, priority=priority, log=log)
    except (BadInput, KeyError, ValueError, ImportError):
        return ",".join(FALLBACK_ALGOS)
    for row in answer.rows:
        parts = row.get("label_parts") or {}
        got = []
        for named in row.get("candidates") or []:
            # A candidate is named with its twins (``a = b``), the same computation under other labels.
            for label in named.split(" = "):
                algo, impl = parts.get(label, (None, None))
                if algo and algo not in NO_PAUSE and impl not in (None, "sb3", "python"):
                    got.append(algo if impl == "bench" else f"{algo}-{impl}")
                    break
        if got:
            return ",".join(dict.fromkeys(got))
    return ",".join(FALLBACK_ALGOS)


def race_suite(env: str, labels: Sequence[tuple[str, str]], seeds: int, budget: int) -> dict[str, Any]:
    """The race's suite, as its YAML would parse: one env, the labels, checkpoints every tenth of the budget
    (a killed race loses at most that much of each run; the rungs' own checkpoints are taken whatever it is)."""
    what = _UNSAFE.sub("-", env).strip("-.") or "env"
    tail = f".{'-'.join(f'{a}{i[0]}' for a, i in labels)}.{budget}x{seeds}"
    name = ("race." + what)[:64 - len(tail)] + tail
    return {
        "name": name[:64],
        "description": f"bench race {env} --algos {','.join(a if i == 'bench' else f'{a}-{i}' for a, i in labels)} "
                       f"--seeds {seeds} --budget {budget}",
        "seeds": seeds,
        "defaults": {"timesteps": budget, "checkpoint_every": max(1, budget // 10)},
        "envs": [{"id": env}],
        "algorithms": [{"algo": a, "impl": i} for a, i in labels],
    }


def grid_cpu(rows: dict[str, Any], budget: int) -> tuple[float, float]:
    """``(spent, grid)``: the CPU seconds the race's runs took (each to where it stopped), and the full grid's
    estimate: a done run's own CPU seconds, a paused run's CPU per env step so far times the budget."""
    spent = grid = 0.0
    for r in rows.values():
        cpu = float(r.cpu_s or 0.0)
        spent += cpu
        steps = float(r.total_steps or 0)
        grid += cpu if r.status == "done" or steps >= budget else (cpu / steps * budget if steps > 0 else 0.0)
    return spent, grid


def race(env: str, *, algos: str | None = None, seeds: int = DEFAULT_SEEDS, budget: int | None = None,
         cpu_hours: float | None = None, priority: str | None = None, store: StoreURL | str | None = None,
         rungs: str = DEFAULT_RUNGS, workers: int | None = None, executor: str = "local",
         address: str | None = None, artifacts: str | Path | None = None,
         on_rung: Callable[[RungReport, RaceResult], None] | None = None,
         log: Callable[[str], None] | None = None) -> RaceResult:
    """Race ``algos`` (``--algos`` text; default :func:`default_algos`) on ``env`` with ``seeds`` seeds each, rungs
    at ``rungs`` (fractions of ``budget`` env steps; default: rl-baselines3-zoo's largest budget among the labels),
    on the local process pool, or as Ray tasks with ``executor="ray"`` (on the cluster at ``address``, else a local
    Ray instance), as :func:`bench.api.run_suite` runs a suite. ``cpu_hours`` ends the race after the rung where it
    has spent that much CPU (answering from that rung). ``priority`` (samples | time) picks the reference's
    candidates only: a rung decides on the sample score either way. ``artifacts``: the folder of the runs'
    checkpoints (and saved policies), as ``bench run --artifacts``; default beside a SQLite store, else
    ``results/policies``; on a cluster, a folder every worker reaches. ``on_rung(report, result)`` is called as
    each rung is decided.

    :raises BadInput: a flag's value is wrong (one line)."""
    from bench.api._oneline import OneLineSuite, write_oneline_suite
    from bench.suites.oneline import suite_yaml, suites_dir, zoo_budget
    from bench.envs.traits import PRIORITIES

    if priority is not None and priority not in PRIORITIES:
        raise BadInput(f"--priority: {priority!r} is not allowed; allowed: {', '.join(PRIORITIES)}")
    if seeds < 2:
        raise BadInput(f"--seeds: {seeds} is too few to rule a label out (seeds are the unit of the test); allowed: "
                       "2 or more")
    if cpu_hours is not None and not (cpu_hours > 0 and math.isfinite(cpu_hours)):
        raise BadInput(f"--cpu-hours: {cpu_hours!r}; allowed: a positive number of CPU hours")
    if budget is not None and budget < 1:
        raise BadInput(f"--budget: {budget}; allowed: a positive number of env steps")
    fractions = parse_rungs(rungs)
    store_url = parse_store(store)
    if algos is None:
        algos = default_algos(env, priority, log)
        if log is not None:
            log(f"--algos: {algos} (the shipped reference's candidates for {env}'s profile, or {','.join(FALLBACK_ALGOS)})")
    labels = parse_algos(algos)
    if budget is None:
        zoo = [b for a, _ in labels if (b := zoo_budget(a, env)) is not None]
        if not zoo:
            raise BadInput(f"--budget: rl-baselines3-zoo has no budget for {algos} on {env}, so there is no default; "
                           "allowed: --budget N (env steps)")
        budget = max(zoo)
    data = race_suite(env, labels, seeds, budget)
    made = OneLineSuite(data["name"], suites_dir(store_url.sqlite_path) / f"{data['name']}.yaml",
                        suite_yaml(data, f"`{data['description']}`"))
    write_oneline_suite(made, check=True)
    plan = _plan(made.path, store_url, workers, executor, address, artifacts, text=made.text)
    write_oneline_suite(made)
    return _run_race(plan, env, fractions, budget, seeds, cpu_hours, f"bench run {made.path}", on_rung, log)


def race_file(path: str | Path, *, store: StoreURL | str | None = None, workers: int | None = None, executor: str = "local",
              address: str | None = None, artifacts: str | Path | None = None,
              on_rung: Callable[[RungReport, RaceResult], None] | None = None,
              log: Callable[[str], None] | None = None) -> RaceResult:
    """Race the suite file ``path``, which has a ``race:`` block (:class:`bench.suites.race.RaceSpec`;
    ``bench race SUITE.yaml``): its labels, seeds and budget are the file's ``algorithms``, ``seeds`` and
    ``timesteps`` on its one env, its rungs and CPU cap the block's. Its cells are the very runs that
    :func:`race` makes of the same settings, so the two give the same runs and the same answer. Runs without a
    ``checkpoint_every`` of the file's take one every tenth of the budget, as :func:`race`'s do (not part of a
    cell's key). The other parameters are :func:`race`'s.

    :raises BadInput: the file is not a valid suite (one line per problem: file, line, path, value, what is
        allowed), has no ``race:`` block, or an option is wrong."""
    store_url = parse_store(store)
    plan = _plan(Path(path), store_url, workers, executor, address, artifacts)
    suite = plan.loaded.suite
    if suite.race is None:
        raise BadInput(f"{path}: race: the suite has no race block, so there is nothing to race; allowed: a suite with "
                       f"race: {{rungs: \"{DEFAULT_RUNGS}\"}} (docs/race.md), or `bench run {path}` for its whole grid")
    budget = plan.cells[0].timesteps
    every = max(1, budget // 10)
    plan = dataclasses.replace(plan, cells=[c if c.checkpoint_every else dataclasses.replace(c, checkpoint_every=every)
                                            for c in plan.cells])
    grid = f"bench run {path} --set race=null" + (
        "" if all(c.checkpoint_every for c in plan.loaded.cells) else f" --set defaults.checkpoint_every={every}")
    return _run_race(plan, plan.cells[0].env_id, parse_rungs(suite.race.rungs), budget, len(suite.seed_list),
                     suite.race.cpu_hours, grid, on_rung, log)


def _plan(path: Path, store_url: StoreURL, workers: int | None, executor: str, address: str | None,
          artifacts: str | Path | None, text: str | None = None) -> Any:
    """The race's suite planned as ``bench run`` plans one (executor, address and store checked), writing nothing;
    with ``artifacts``, its runs' checkpoints go there."""
    from bench.api._run import plan_run, run_outputs

    plan = plan_run(path, store_url, workers=workers, executor=executor, address=address, text=text, race=True)
    if artifacts is not None:
        plan = plan.with_outputs(run_outputs(store_url, artifacts=Path(artifacts)))
    return plan


def _run_race(plan: Any, env: str, fractions: Sequence[float], budget: int, seeds: int, cpu_hours: float | None,
              grid: str, on_rung: Callable[[RungReport, RaceResult], None] | None,
              log: Callable[[str], None] | None) -> RaceResult:
    """The rungs of a planned race (:func:`race`, :func:`race_file`), then its answer. With the Ray executor and no
    cluster address, one local Ray instance serves every rung (run alone, each rung would start and stop its own)."""
    started = False
    if plan.executor == "ray" and plan.address is None:
        from bench.run.ray_executor import RayUnavailable, connect

        try:
            started = connect(None, plan.workers)
        except RayUnavailable as e:
            raise BadInput(f"--executor: {e}") from None
    try:
        return _rungs(plan, env, fractions, budget, seeds, cpu_hours, grid, on_rung, log)
    finally:
        if started:
            import ray

            ray.shutdown()


def _rungs(plan: Any, env: str, fractions: Sequence[float], budget: int, seeds: int, cpu_hours: float | None,
           grid: str, on_rung: Callable[[RungReport, RaceResult], None] | None,
           log: Callable[[str], None] | None) -> RaceResult:
    from bench.analysis.race import race_step
    from bench.api._run import run_suite

    store_url = plan.store_url
    cells = plan.cells
    by_label = {lb: [c for c in cells if c.label == lb] for lb in dict.fromkeys(c.label for c in cells)}
    result = RaceResult(env, plan.name, str(plan.loaded.path), store_url, tuple(by_label), budget, seeds, grid_command=grid)
    low, high, window = _anchors(plan, env, log), plan.loaded.env_meta[cells[0].env_id]["threshold"], cells[0].window
    alive = list(by_label)
    for r, f in enumerate(fractions):
        at = None if f >= 1 else max(1, math.ceil(f * budget))
        todo = [dataclasses.replace(c, pause_at=at) for lb in alive for c in by_label[lb]]
        run = run_suite(dataclasses.replace(plan, cells=todo), yes=True, log=log)
        if run.interrupted is not None:  # Ctrl-C or SIGTERM: what ran is kept, paused runs keep their checkpoints
            result.cut = (f"interrupted by signal {run.interrupted} at the rung at {_fraction_text(f)} of the budget; "
                          "`bench race` with the same flags continues it from the runs' checkpoints")
            break
        result.failed += [f"{c.label} seed {c.seed}: {o.error}" for c, o in run.failed]
        curves = _curves(store_url, todo, {c.key: o for c, o in run.results})
        scores = {lb: np.array([_score(curves.get(c.key), f, budget, window, low, high) for c in by_label[lb]])
                  for lb in alive}
        rows = _rows(store_url, cells)
        spent, _ = grid_cpu(rows, budget)
        scored = {lb: s for lb, s in scores.items() if np.any(~np.isnan(s))}
        step = race_step(scored, alpha=ALPHA) if scored else None
        report = RungReport(f, at or budget, tuple(alive), scores, step, spent)
        result.rungs.append(report)
        if step is not None:
            alive = list(step.kept) + [lb for lb in alive if lb not in scored]  # no score yet: not ruled out
        if on_rung is not None:
            on_rung(report, result)
        if cpu_hours is not None and f < 1 and spent >= cpu_hours * 3600:
            result.cut = (f"--cpu-hours {cpu_hours:g}: {spent / 3600:.3g} CPU hours spent by the rung at "
                          f"{_fraction_text(f)} of the budget; the answer is that rung's")
            break
    _answer(result, alive)
    result.cpu_s, result.grid_cpu_s = grid_cpu(_rows(store_url, cells), budget)
    return result


def _fraction_text(f: float) -> str:
    return str(Fraction(f).limit_denominator(1000))


def _anchors(plan: Any, env: str, log: Callable[[str], None] | None) -> float:
    """The env's random-policy return (its score's 0), computed once and stored as the report does."""
    from bench.run.anchors import ensure_anchors
    from bench.storage.store import Store

    meta = plan.loaded.env_meta[plan.cells[0].env_id]
    thr = meta["threshold"]
    if thr is None:
        raise BadInput(f"{env}: it has no threshold, which a race's score is normalised to; allowed: an env with a "
                       "threshold (give one in a suite file's envs[].threshold)")
    got = ensure_anchors(Store(plan.store_url), {plan.cells[0].env_id: thr}, log, {plan.cells[0].env_id: meta.get("family")})
    if plan.cells[0].env_id not in got:
        raise BadInput(f"{env}: its random-policy anchor cannot be computed here, so its runs cannot be scored")
    return got[plan.cells[0].env_id].random_return


def _rows(store_url: StoreURL, cells: Sequence[Any]) -> dict[str, Any]:
    from bench.storage.store import Store

    return Store(store_url).rows([c.key for c in cells])


def _curves(store_url: StoreURL, cells: Sequence[Any], outcomes: dict[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each cell's episodes (``step``, ``ret``) so far: a paused run's from its outcome, a done run's from the store
    (one run to the end at this rung, or done before the race)."""
    from bench.storage.store import Store

    out = {}
    for c in cells:
        o = outcomes.get(c.key)
        if o is not None and o.status == "paused" and o.episodes is not None:
            out[c.key] = (np.asarray(o.episodes["step"], float), np.asarray(o.episodes["ret"], float))
    rest = [c.key for c in cells if c.key not in out]
    if rest:
        rows = Store(store_url).rows(rest)
        done = [k for k in rest if rows.get(k) is not None and rows[k].status == "done"]
        if done:
            ep = Store(store_url).episodes_for(done)
            for k, g in ep.groupby("key"):
                out[str(k)] = (g["step"].to_numpy(float), g["ret"].to_numpy(float))
    return out


def _score(curve: tuple[np.ndarray, np.ndarray] | None, f: float, budget: int, window: int, low: float,
           high: float) -> float:
    from bench.analysis.race import prefix_scores

    if curve is None:
        return float("nan")
    return float(prefix_scores(curve[0], curve[1], window, budget=budget, fractions=[f], low=low, high=high,
                               kind=SCORE)[0])


def _answer(result: RaceResult, alive: list[str]) -> None:
    """The tied set, its pick (the highest IQM of the last rung's scores, as :func:`bench.analysis.race.race`
    picks) and each kept label's interval over its seeds."""
    from bench.analysis.matrix import interval_text
    from bench.stats.aggregate import interval, iqm

    last = result.rungs[-1].scores if result.rungs else {}
    result.kept = tuple(alive)
    scored = {lb: s[~np.isnan(s)] for lb, s in last.items() if lb in alive and np.any(~np.isnan(s))}
    result.pick = max(scored, key=lambda lb: float(iqm(scored[lb]))) if scored else None
    for lb, s in scored.items():
        iv = interval([s])  # one task: the IQM over seeds, with the interval its seed count supports
        result.intervals[lb] = interval_text(iv.point, iv.lo, iv.hi, iv.kind)


def race_fraction(f: float) -> str:
    """A rung's fraction of the budget as the command line writes it (``1/27``)."""
    return _fraction_text(f)


def race_answer_lines(result: RaceResult) -> list[str]:
    """The race's answer in words: the winner or the tied set with intervals, then the CPU it spent against the
    full grid's estimate, where its runs are and how to read them."""
    lines = []
    if result.cut:
        lines.append(f"ended early: {result.cut}")
    if result.pick is None:
        lines.append(f"answer: none (no run of {', '.join(result.labels)} finished an episode)")
    elif len(result.kept) == 1:
        lines.append(f"answer: {result.pick} wins on {result.env}: IQM of the sample score over its seeds "
                     f"{result.intervals[result.pick]}")
    else:
        lines.append(f"answer: tied on {result.env} (no rung's test ruled them out): "
                     + "; ".join(f"{lb} {result.intervals.get(lb, '—')}" for lb in result.kept)
                     + f"; highest IQM: {result.pick}")
    runs = len(result.labels) * result.seeds
    share = result.cpu_s / result.grid_cpu_s if result.grid_cpu_s > 0 else float("nan")
    lines.append(f"CPU: {result.cpu_s:,.1f} s spent, against an estimated {result.grid_cpu_s:,.1f} s for the full grid "
                 f"({runs} runs × {result.budget:,} steps; a stopped run's CPU per step so far × the budget): "
                 f"{share:.0%} of it, {result.grid_cpu_s - result.cpu_s:,.1f} s saved")
    if result.failed:
        lines.append(f"failed runs ({len(result.failed)}): " + "; ".join(result.failed[:3])
                     + (" …" if len(result.failed) > 3 else ""))
    lines.append(f"suite {result.suite} ({result.path}); stopped labels' runs are paused with their checkpoints "
                 f"(`{result.grid_command or 'bench run ' + result.path}` completes the grid); "
                 f"`bench report {result.suite}` reads the runs")
    return lines
