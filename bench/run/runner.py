"""Run one cell into the store: the unit of work every executor calls.

The unit of work is :func:`run_cell`: claim the cell's run, train, write what
was recorded in one transaction. The local process pool (:mod:`bench.run.pool`,
the default) and the Ray executor call exactly this function. The parent process
only orchestrates: it never writes a run's data, so a parent killed with SIGKILL
leaves nothing half-written (its workers die with it, see
:func:`bench.run.pool.init_worker`). What a run records of its machine is
:mod:`bench.run.provenance`'s.

While a run trains, a background thread sends its heartbeat every
:data:`HEARTBEAT_EVERY_S` seconds, however long one update takes, so a live run
is never taken over as stale.
"""

from __future__ import annotations

import json
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from bench.envs.checks import EnvError
from bench.run.limits import STOP_GRACE_S, LimitStop, LimitWatch, limit_field
from bench.run.loggers import open_sinks
from bench.run.progress import Heartbeat, StallWatch, stall_after_s
from bench.run.probe import cpu_probe_ms
from bench.run.provenance import accelerator_meta, iso_time, run_metadata, stepping_meta
from bench.run.saving import finish_outputs, policies_dir
from bench.suites.suite import Cell

if TYPE_CHECKING:  # annotations only
    from bench.storage.urls import StoreURL

# Every worker uses one torch/BLAS thread: runs are parallel across processes,
# and wall-clock comparisons are only fair at a fixed thread count.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
HEARTBEAT_EVERY_S = 10.0


@dataclass
class Outcome:
    """What a worker reports back about one cell."""

    key: str
    status: str  # done | failed | skipped (someone else owns it or it is done) | paused (at its pause_at step)
    error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    note: str | None = None  # a re-measurement: what changed (see remeasure_cell)
    #: A paused run's episodes so far (``step``, ``ret``, ``cpu_s`` lists): what a race decides its rung on.
    episodes: dict[str, list] | None = None


# --------------------------------------------------------------------------- #
# One cell
# --------------------------------------------------------------------------- #
def train_cell(cell: Cell, recorder: Any) -> None:
    """Dispatch one cell to its implementation, a lookup on its :class:`~bench.algos.registry.AlgoSpec`.
    Algorithms see only env, typed params, seed, budget, recorder."""
    from bench.algos.plugins import load
    from bench.algos.registry import spec as registered

    spec = cell.spec
    if spec is None:  # a cell built without one (the tuner's): the registry's, or the plugin its entry names
        spec = load(cell.entry).spec(cell.algo) if cell.impl == "python" and cell.entry else registered(cell.algo)
    if cell.impl not in spec.impls:
        raise NotImplementedError(f"impl {cell.impl!r} for {cell.algo!r} is not available; allowed: "
                                  f"{', '.join(spec.impls)}")
    params = cell.params if cell.params is not None else spec.params.model_validate(cell.hyperparams)
    spec.trainer(cell.impl)(cell.env_id, params, seed=cell.seed, timesteps=cell.timesteps, recorder=recorder)


def make_recorder(cell: Cell, heartbeat: Callable[[], None] | None = None):
    """The :class:`~bench.storage.record.Recorder` a cell trains with: its evaluation, CPU-seconds budget
    and heartbeat. Its ``steps`` is the run's progress, readable from another thread. It pins this
    process to one torch and one BLAS thread first, so that the run's clocks start after that."""
    from bench import envs
    from bench.algos.common import pin_one_thread
    from bench.storage.record import EvalConfig, Recorder

    pin_one_thread()
    ev = EvalConfig(**cell.eval) if cell.eval else None
    return Recorder(
        heartbeat=heartbeat,
        heartbeat_every=HEARTBEAT_EVERY_S,
        eval=ev,
        cpu_limit=cell.cpu_seconds,
        save=cell.save,
        sink=open_sinks(cell),
        # Evaluation episodes use their own seed stream, far from the training envs' seed + i.
        evaluate=(lambda policy, n: envs.evaluate_policy(cell.env_id, policy, n, seed=cell.seed + 1_000_000)) if ev else None,
    )


def record_cell(cell: Cell, *, heartbeat: Callable[[], None] | None = None, recorder: Any = None):
    """Train one cell with a fresh recorder (or ``recorder``, from :func:`make_recorder`); returns
    ``(recorder, error or None)``.

    Never raises for a training failure: a run that raises or diverges is a
    result (``failed``, with its error and whatever it recorded before).
    ``heartbeat`` is called between updates (:class:`Heartbeat` sends them from a
    thread instead, independent of update length; :func:`run_cell` uses that).
    """
    from bench.algos.resume import Paused
    from bench.run.checkpoints import CheckpointError
    from bench.storage.record import BudgetReached

    if recorder is None:
        recorder = make_recorder(cell, heartbeat)
    try:
        train_cell(cell, recorder)
        return recorder, None
    except BudgetReached:  # the equal-compute budget ended the run at an update boundary: a finished run
        return recorder, None
    except Paused as e:  # stopped at its pause step after a checkpoint there: not done, not failed
        recorder.paused_at = e.steps
        return recorder, None
    except EnvError as e:  # names the env, the step and what was wrong: the whole story
        return recorder, str(e)
    except CheckpointError as e:  # names the file and why it was refused
        return recorder, str(e)
    except LimitStop:  # the run's LimitWatch stopped it; the caller records the watch's reason
        return recorder, "stopped by its limit"
    except Exception as e:  # noqa: BLE001 - any training error is a recorded result
        tb = traceback.extract_tb(e.__traceback__)
        where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        return recorder, f"{type(e).__name__}: {e}{where}".replace("\n", " ")
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt) and not _sigint_ignored():
            raise  # Ctrl-C of an in-process run (the tuner, a test): stop, do not record
        # SystemExit (sys.exit()), KeyboardInterrupt where no Ctrl-C can reach this process (a pool worker
        # ignores SIGINT, so the training code raised it), GeneratorExit or a BaseException of the user's own:
        # the run's error, not the end of the worker. A worker that left through Python's shutdown took the
        # run with it as "worker process died", and printed its traceback to the terminal.
        tb = traceback.extract_tb(e.__traceback__)
        where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        who = "plugin" if cell.impl == "python" else "training"
        what = f"{type(e).__name__}({', '.join(repr(a) for a in e.args)})"
        return recorder, f"{who} raised {what}{where}".replace("\n", " ")


def _sigint_ignored() -> bool:
    """Whether this process ignores SIGINT (a pool worker, :func:`_init_worker`): then a KeyboardInterrupt
    cannot be the user's Ctrl-C. Only the main thread's handler is asked; elsewhere it counts as not ignored."""
    try:
        return signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    except (ValueError, OSError):
        return False


def result_of(cell: Cell, recorder: Any, started: float) -> Any:
    """Turn a recorder into the store's RunResult (summary computed by bench.stats.metrics)."""
    from bench.stats.metrics import summarize
    from bench.storage.record import downsample_diagnostics
    from bench.storage.schema import RunResult

    recorder.align_episodes()  # a run stopped mid-episode (LimitStop) may have written part of its last one
    arrays = recorder.summary_inputs()
    s = summarize(arrays["steps"], arrays["wall"], arrays["returns"], threshold=cell.threshold, window=cell.window)
    summary = {
        "total_steps": int(recorder.steps),
        "episodes": s.episodes,
        "wall_s": recorder.clock(),
        "cpu_s": recorder.cpu_seconds(),
        "steps_to_threshold": s.steps_to_threshold,
        "seconds_to_threshold": s.seconds_to_threshold,
        "final_return": s.final_return,
        "auc": s.auc,
    }
    meta = run_metadata()
    meta.update(started_at=iso_time(started), finished_at=iso_time(time.time()), updates=recorder.updates,
                stopped_by=recorder.stopped_by, model_memory=recorder.model_memory(), **recorder.contention(),
                **stepping_meta(cell), **accelerator_meta(cell))
    if getattr(cell, "overrides", ()):  # `bench run --set`: what the command line changed of the suite file
        meta["overrides"] = list(cell.overrides)
    return RunResult(
        summary=summary,
        episodes={"step": recorder.ep_step, "wall_s": recorder.ep_wall, "cpu_s": recorder.ep_cpu, "ret": recorder.ep_return,
                  "length": recorder.ep_length},
        diagnostics=downsample_diagnostics(recorder.diag, cell.diag_points),
        evaluations=recorder.evals,
        meta=meta,
    )


_STORES: dict[StoreURL, Any] = {}


def _store(store_url: StoreURL):
    """This process's one writer of the store at ``store_url``, opened on first use."""
    from bench.storage.store import Store

    if store_url not in _STORES:
        _STORES[store_url] = Store(store_url)
    return _STORES[store_url]


def checkpoints_of(cell: Cell, store_url: StoreURL | None) -> Any:
    """The cell's mid-run checkpoints (:class:`bench.run.checkpoints.Checkpoints`) beside the store's saved
    policies, or ``None`` when its suite takes none (``checkpoint_every``) or there is no store."""
    if not cell.checkpoint_every or store_url is None:
        return None
    from bench.run.checkpoints import Checkpoints, checkpoint_dir

    return Checkpoints(checkpoint_dir(policies_dir(store_url, cell.outputs.policies), cell.key),
                       cell.checkpoint_every, cell.key, pause_at=cell.pause_at)


def measure_cell(cell: Cell, beat: Callable[[int, float], None] | None = None,
                 store_url: StoreURL | None = None,
                 give_up: Callable[[Any, str], None] | None = None,
                 checkpoints: Any = None) -> tuple[Any, str | None, float]:
    """Train one cell and turn what it recorded into a RunResult; returns ``(result, error or None,
    start time)``. ``beat(steps, cpu_s)`` (env steps and training CPU seconds so far) is called every
    :data:`HEARTBEAT_EVERY_S` seconds from a thread. With ``store_url``, the policies the cell keeps
    (``cell.save``) are written beside that store (:mod:`bench.run.saving`).

    The cell's per-run limits are watched from here (:class:`bench.run.limits.LimitWatch`): a run past one
    returns as failed, its error naming the limit, with what it recorded until then. Where its training does
    not return after the stop, ``give_up(result, reason)`` is called from the watch's thread with what it
    recorded so far (to write it), and then this process is killed. With ``checkpoints``
    (:func:`checkpoints_of`), the run continues from the last one there is and takes them as it goes."""
    started = time.time()
    recorder = make_recorder(cell)  # pins the threads the probe then runs with
    recorder.checkpoints = checkpoints
    probe_start = cpu_probe_ms()  # outside the run's clocks, which the recorder starts below

    def abandon(why: str) -> None:
        recorder.stopped_by = limit_field(why)
        result = result_of(cell, recorder, started)
        result.meta["limit_stop"] = (f"training did not return within {STOP_GRACE_S:g} s of the stop, so its process "
                                     "was killed after writing this")
        if give_up is not None:
            give_up(result, why)

    run_metadata()  # computed once per process, here outside the run's clocks: a given-up run is written at once
    recorder.restart_clocks()
    watch = LimitWatch(cell, abandon).start()
    error: str | None = None
    try:
        try:
            if beat is None:
                recorder, error = record_cell(cell, recorder=recorder)
            else:
                with Heartbeat(lambda: beat(recorder.steps, recorder.cpu_seconds()), HEARTBEAT_EVERY_S):
                    recorder, error = record_cell(cell, recorder=recorder)
        finally:
            watch.disarm()
    except LimitStop:  # raised just after training returned, before disarm() withdrew it
        watch.disarm()
    if watch.reason is not None:
        error = watch.reason
        recorder.stopped_by = limit_field(watch.reason)
    result = result_of(cell, recorder, started)
    # How fast this machine was for a fixed piece of work as the run started and ended (bench.run.probe):
    # the CPU's name alone does not tell machines apart.
    result.meta["cpu_probe_ms"] = {"start": probe_start, "end": cpu_probe_ms()}
    if checkpoints is not None:  # how many it took, the step it continued from, or why it took none
        result.meta["checkpoints"] = dict(checkpoints.note)
    if getattr(recorder, "paused_at", None) is not None and error is None:
        result.meta["paused_at"] = int(recorder.paused_at)
    finish_outputs(cell, recorder, result, error, store_url)
    return result, error, started


def run_cell(store_url: StoreURL, cell: Cell, owner: str, remeasure: bool = False,
             on_start: Callable[[], None] | None = None) -> Outcome:
    """Claim, train and record one cell. The same function for every executor. With ``remeasure``,
    the cell is a done run to measure again instead (:func:`remeasure_cell`). ``on_start()`` is called
    once the run is claimed (or, re-measured, about to train): where its per-run limits start."""
    if remeasure:
        if on_start is not None:
            on_start()
        return remeasure_cell(store_url, cell)
    store = _store(store_url)
    attempt = store.claim(cell.key, owner)
    if attempt is None:
        return Outcome(cell.key, "skipped")
    if on_start is not None:
        on_start()
    # Each beat also writes the steps and CPU seconds so far: how far a long run is, for `bench status`
    # and `bench run`; and, when the steps have not grown for a while, that the run is stalled: the beat
    # comes from a thread, so it goes on whether or not training does. How long "a while" is depends on the env's
    # time scale (bench.run.progress.stall_after_s).
    watch = StallWatch(stall_after_s(cell.time_scale_us))
    ck = checkpoints_of(cell, store_url)
    result, error, started = measure_cell(
        cell, lambda steps, cpu: store.heartbeat(cell.key, attempt, steps, cpu, watch.note(steps)), store_url=store_url,
        give_up=lambda result, why: store.finish(cell.key, attempt, "failed", result, why), checkpoints=ck)
    if "paused_at" in result.meta:  # a race's rung: not done; its checkpoint continues it on the next run
        s = result.summary
        if not store.pause(cell.key, attempt, s["total_steps"], s["cpu_s"],
                           f"paused at step {s['total_steps']:,} of {cell.timesteps:,} (a race's rung); the next "
                           "`bench run` or `bench race` continues it from its checkpoint"):
            return Outcome(cell.key, "skipped", error="lost ownership of the run (another runner took it over)")
        return Outcome(cell.key, "paused", None, s, time.time() - started,
                       episodes={k: [float(x) for x in result.episodes[k]] for k in ("step", "ret", "cpu_s")})
    status = "failed" if error else "done"
    if not store.finish(cell.key, attempt, status, result, error):
        return Outcome(cell.key, "skipped", error="lost ownership of the run (another runner took it over)")
    if ck is not None and not (error or "").startswith("checkpoint "):  # recorded: its checkpoint is spent (one
        ck.clear()  # that was refused stays, for its owner to look at, as the error line says)
    return Outcome(cell.key, status, error, result.summary, time.time() - started)


#: What a re-measured run keeps of each earlier measurement, in ``meta.earlier_measurements``.
_EARLIER = ("started_at", "finished_at", "cpu_model", "cpu_id", "float_paths", "versions", "cpu_probe_ms",
            "wall_per_cpu", "load_start", "load_end", "host", "git_commit")


def _why_other_returns(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What may explain a re-measured run's other returns (``""`` where nothing recorded differs).

    Each is a candidate, not a finding: another commit need not compute differently (on 2026-11-26 five
    commits whose reference runs came back with other returns gave, on one machine, the very episodes of
    today's code over 100k steps), while one CPU name covers CPUs that round differently. So a run from
    before CPUID was recorded leaves the CPU open.
    """
    why = []
    a, b = old.get("git_commit"), new.get("git_commit")
    if a and b and a != b:
        why.append(f"another commit ({a[:8]} → {b[:8]})")
    ids = (old.get("cpu_id"), new.get("cpu_id"))
    paths = (old.get("float_paths"), new.get("float_paths"))
    pkgs = (old.get("versions"), new.get("versions"))
    if (old.get("cpu_model") != new.get("cpu_model") or (None not in ids and ids[0] != ids[1])
            or (None not in paths and paths[0] != paths[1])):
        why.append("another CPU, whose float rounding may differ")
    elif None in ids:
        why.append(("or " if why else "perhaps ") + "another CPU of the same name (no CPUID was recorded then)")
    if None not in pkgs and pkgs[0] != pkgs[1]:
        changed = sorted(k for k in set(pkgs[0]) | set(pkgs[1]) if pkgs[0].get(k) != pkgs[1].get(k))
        why.append("other package versions (" + ", ".join(changed) + ")")
    return f" ({'; '.join(why)})" if why else ""


def remeasure_cell(store_url: StoreURL, cell: Cell) -> Outcome:
    """Run a done cell again and, if the new run had its core to itself, put it in the done run's
    place (``bench run --remeasure contended``).

    Why: CPU seconds are inflated when a run shares its core. On the 2-core machines that produced
    the shipped reference, SB3 PPO on CartPole-v1 (seed 8) took 35.5 CPU seconds contended and 22.7
    measured again on a quiet core, with the same returns (2026-11-26). A seed's returns do not depend on the clock, so the new run is the same
    experiment measured again; on the same CPU its returns are the same, and ``same_returns`` records
    whether they were. The done run stays untouched until the new one is written in one transaction,
    so a re-measurement that dies, fails or is contended again loses nothing. Nothing is claimed: the
    run stays ``done`` (and counted) throughout.
    """
    import numpy as np

    from bench.storage.vocabulary import is_contended

    store = _store(store_url)
    row = store.rows([cell.key]).get(cell.key)
    if row is None or row.status != "done":
        return Outcome(cell.key, "skipped", error="not a done run: nothing to re-measure")
    before = store.episodes_of(cell.key)["ret"].to_numpy(dtype=float)
    result, error, started = measure_cell(cell, store_url=store_url)
    wall = time.time() - started
    if error:
        return Outcome(cell.key, "failed", f"the re-measurement failed and the earlier run is kept: {error}", wall_s=wall)
    s = result.summary
    if is_contended(s["wall_s"], s["cpu_s"]):
        return Outcome(cell.key, "skipped", error=f"contended again (wall / CPU {s['wall_s'] / s['cpu_s']:.2f}); the "
                       "earlier run is kept", wall_s=wall)
    old = json.loads(row.meta) if row.meta else {}
    after = np.asarray(result.episodes["ret"], dtype=float)
    same = bool(before.shape == after.shape and np.array_equal(before, after))
    earlier = {"attempt": row.attempt, "wall_s": row.wall_s, "cpu_s": row.cpu_s, "total_steps": row.total_steps,
               "final_return": row.final_return, **{k: old[k] for k in _EARLIER if k in old}}
    result.meta["earlier_measurements"] = [*old.get("earlier_measurements", []), earlier]
    result.meta["same_returns"] = same
    if not store.replace_done(cell.key, row.attempt, result, started):
        return Outcome(cell.key, "skipped", error="re-run or re-measured by another runner meanwhile", wall_s=wall)
    note = (f"re-measured: {row.cpu_s:.1f} → {s['cpu_s']:.1f} CPU s (wall / CPU {row.wall_s / row.cpu_s:.2f} → "
            f"{s['wall_s'] / s['cpu_s']:.2f}); " + ("the same returns" if same else "returns differ from the earlier run's"
            + _why_other_returns(old, result.meta)))
    return Outcome(cell.key, "done", None, s, wall, note=note)
