"""Run a suite's cells in parallel worker processes, into the store.

The unit of work is :func:`run_cell`: claim the cell's run, train, write what
was recorded in one transaction. The local process pool (the default) and any
other executor call exactly this function. The parent process only
orchestrates: it never writes a run's data, so a parent killed with SIGKILL
leaves nothing half-written (its workers die with it, see ``_init_worker``).

Each worker process claims runs as itself (its own ``host:pid:start`` owner), so
when one worker dies only the run it held is failed, and the other workers'
runs go on. While a run trains, a background thread sends its heartbeat every
:data:`HEARTBEAT_EVERY_S` seconds, however long one update takes, so a live run
is never taken over as stale.
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing as mp
import multiprocessing.connection
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Callable

from bench.envs.checks import EnvError
from bench.run.limits import (STOP_GRACE_S, WATCH_EVERY_S, Backstop, LimitStop, LimitWatch, has_limits, is_limit_stop,
                              kill_tree, limit_field)
from bench.run.loggers import open_sinks
from bench.run.progress import Heartbeat, StallWatch
from bench.run.probe import cpu_probe_ms
from bench.run.saving import finish_outputs
from bench.suites.suite import Cell

# Every worker uses one torch/BLAS thread: runs are parallel across processes,
# and wall-clock comparisons are only fair at a fixed thread count.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
HEARTBEAT_EVERY_S = 10.0
_PACKAGES = ("bench", "torch", "numpy", "gymnasium", "stable-baselines3", "sb3-contrib", "ale-py", "mujoco", "box2d")


@dataclass
class Outcome:
    """What a worker reports back about one cell."""

    key: str
    status: str  # done | failed | skipped (someone else owns it or it is done)
    error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    note: str | None = None  # a re-measurement: what changed (see remeasure_cell)


# --------------------------------------------------------------------------- #
# Provenance
# --------------------------------------------------------------------------- #
def _cpuinfo(field: str) -> str | None:
    """The first ``field`` of /proc/cpuinfo (``model name``, ``flags``), or None where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def _float_paths() -> dict[str, Any]:
    """What picks the code paths that round floats, beside the package versions: a seed's returns are
    the same run to run on one machine, but not across CPUs. MKL (torch's LAPACK and CPU matmuls, e.g.
    the orthogonal initialisation's QR) chooses its kernels by CPU unless ``MKL_CBWR`` fixes them (on
    one AVX-512 host, 2026-11-24, own PPO on CartPole reached 475 at seed 0 after 28,018 steps with
    MKL's default, 39,948 with ``MKL_CBWR=AVX2`` and 21,258 with ``COMPATIBLE``); OpenBLAS (NumPy's
    matmuls) and torch's own kernels dispatch by CPU too. Recorded so a re-run that differs can say why.
    """
    import torch

    flags = set((_cpuinfo("flags") or "").split())
    try:
        from threadpoolctl import threadpool_info

        blas = sorted({f"{i.get('internal_api')} {i.get('architecture')}" for i in threadpool_info()
                       if i.get("user_api") == "blas"})
    except Exception:  # noqa: BLE001 - provenance only
        blas = []
    return {"cpu_simd": [f for f in ("avx2", "fma", "avx512f") if f in flags],
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "blas_kernels": blas, "mkl_cbwr": os.environ.get("MKL_CBWR")}


def _git_commit() -> dict[str, Any]:
    here = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5,
        ).stdout.strip()
        return {"git_commit": commit or None, "git_dirty": bool(dirty) if commit else None}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}


_STATIC_META: dict[str, Any] | None = None


def run_metadata() -> dict[str, Any]:
    """Package versions, Python, CPU, host, threads and git commit of this process."""
    global _STATIC_META
    if _STATIC_META is None:
        versions = {}
        for p in _PACKAGES:
            try:
                versions[p] = importlib_metadata.version(p)
            except importlib_metadata.PackageNotFoundError:
                versions[p] = None
        _STATIC_META = {
            "versions": versions,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpu_model": _cpu_model(),
            # CPUID family / model / stepping: one model name covers several generations ("Intel(R) Xeon(R) Processor").
            "cpu_id": "/".join(_cpuinfo(f) or "?" for f in ("cpu family", "model\t", "stepping")),
            "cpu_count": os.cpu_count(),
            "host": socket.gethostname(),
            "float_paths": _float_paths(),
            **_git_commit(),
        }
    import torch

    return {**_STATIC_META, "torch_threads": torch.get_num_threads(), "blas_threads": _blas_threads(),
            "pid": os.getpid(), "nice": os.nice(0)}  # niceness: a run at nice 15 (Ray's default) yields its core


def stepping_meta(cell: Cell) -> dict[str, Any]:
    """How the run's envs were stepped (``vec_env``, bench.envs.vector), with a note where the envs are not Gymnasium's."""
    mode = cell.hyperparams.get("vec_env", "sync")
    out: dict[str, Any] = {"vec_env": mode}
    if mode == "envpool":
        try:
            version = importlib_metadata.version("envpool")
        except importlib_metadata.PackageNotFoundError:
            version = "?"
        out["vec_env_note"] = (f"envpool {version} steps its own C++ implementation of the env: dynamics, start "
                               "states and time limits may differ from Gymnasium's")
    return out


def accelerator_meta(cell: Cell) -> dict[str, Any]:
    """The GPU a run's networks were on (hyperparameter ``device``: ``cuda``, or ``auto`` where one is), as
    ``{"accelerator": {device, name, cuda, count}}``; empty for a CPU run. A GPU run's process CPU seconds
    include the host thread's wait for the GPU (torch synchronises when it reads a result back), so they
    follow its wall time and measure that GPU as much as the CPU: the analysis counts the GPU as part of
    the machine (``bench.analysis.scoring.hardware_of``). On an H100 beside a 16-core Xeon, 2026-11-26, the
    24 runs of a device check had wall / CPU 1.00-1.01, GPU runs included.
    """
    if cell.hyperparams.get("device", "cpu") == "cpu":
        return {}
    import torch

    if not torch.cuda.is_available():
        return {}
    return {"accelerator": {"device": "cuda", "name": torch.cuda.get_device_name(torch.cuda.current_device()),
                            "cuda": torch.version.cuda, "count": torch.cuda.device_count()}}


def _blas_threads() -> int | None:
    """Threads of the BLAS libraries NumPy loaded (the NumPy kernel's matmuls), or None if none is."""
    from threadpoolctl import threadpool_info

    n = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(n) if n else None


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- #
# One cell
# --------------------------------------------------------------------------- #
def train_cell(cell: Cell, recorder: Any) -> None:
    """Dispatch one cell to its implementation. Algorithms see only env, params, seed, budget, recorder."""
    if cell.impl == "python":
        from bench.algos.plugins import run

        assert cell.entry is not None
        run(cell.entry, cell.env_id, cell.hyperparams, seed=cell.seed, timesteps=cell.timesteps, recorder=recorder)
        return
    from bench.algos.hyperparams import PARAMS

    params = PARAMS[cell.algo].model_validate(cell.hyperparams)
    if cell.impl == "sb3":
        from bench.baselines import train_sb3

        train_sb3(cell.env_id, cell.algo, params, seed=cell.seed, timesteps=cell.timesteps, recorder=recorder)
    elif cell.impl == "bench":
        from bench.algos import TRAIN

        TRAIN[cell.algo](cell.env_id, params, seed=cell.seed, timesteps=cell.timesteps, recorder=recorder)
    elif cell.impl == "numpy":
        from bench.algos import TRAIN_NUMPY

        TRAIN_NUMPY[cell.algo](cell.env_id, params, seed=cell.seed, timesteps=cell.timesteps, recorder=recorder)
    else:
        raise NotImplementedError(f"impl {cell.impl!r} for {cell.algo!r} is not available")


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
    from bench.storage.record import BudgetReached

    if recorder is None:
        recorder = make_recorder(cell, heartbeat)
    try:
        train_cell(cell, recorder)
        return recorder, None
    except BudgetReached:  # the equal-compute budget ended the run at an update boundary: a finished run
        return recorder, None
    except EnvError as e:  # names the env, the step and what was wrong: the whole story
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
    """Turn a recorder into the store's RunResult (summary computed by bench.analysis.metrics)."""
    from bench.analysis.metrics import summarize
    from bench.storage.record import downsample_diagnostics
    from bench.storage.store import RunResult

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
    meta.update(started_at=_iso(started), finished_at=_iso(time.time()), updates=recorder.updates,
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


_STORES: dict[str, Any] = {}


def _store(url: str):
    from bench.storage.store import Store

    if url not in _STORES:
        _STORES[url] = Store(url)
    return _STORES[url]


def measure_cell(cell: Cell, beat: Callable[[int, float], None] | None = None,
                 store_url: str | None = None,
                 give_up: Callable[[Any, str], None] | None = None) -> tuple[Any, str | None, float]:
    """Train one cell and turn what it recorded into a RunResult; returns ``(result, error or None,
    start time)``. ``beat(steps, cpu_s)`` (env steps and training CPU seconds so far) is called every
    :data:`HEARTBEAT_EVERY_S` seconds from a thread. With ``store_url``, the policies the cell keeps
    (``cell.save``) are written beside that store (:mod:`bench.run.saving`).

    The cell's per-run limits are watched from here (:class:`bench.run.limits.LimitWatch`): a run past one
    returns as failed, its error naming the limit, with what it recorded until then. Where its training does
    not return after the stop, ``give_up(result, reason)`` is called from the watch's thread with what it
    recorded so far (to write it), and then this process is killed."""
    started = time.time()
    recorder = make_recorder(cell)  # pins the threads the probe then runs with
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
    finish_outputs(cell, recorder, result, error, store_url)
    return result, error, started


def run_cell(store_url: str, cell: Cell, owner: str, remeasure: bool = False,
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
    # comes from a thread, so it goes on whether or not training does.
    watch = StallWatch()
    result, error, started = measure_cell(
        cell, lambda steps, cpu: store.heartbeat(cell.key, attempt, steps, cpu, watch.note(steps)), store_url=store_url,
        give_up=lambda result, why: store.finish(cell.key, attempt, "failed", result, why))
    status = "failed" if error else "done"
    if not store.finish(cell.key, attempt, status, result, error):
        return Outcome(cell.key, "skipped", error="lost ownership of the run (another runner took it over)")
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


def remeasure_cell(store_url: str, cell: Cell) -> Outcome:
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


# --------------------------------------------------------------------------- #
# The local process pool
# --------------------------------------------------------------------------- #
_PR_SET_PDEATHSIG = 1


def _init_worker() -> None:
    # The parent handles Ctrl-C; workers must not die half-way through a write.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Die with the parent: a `bench run` killed with SIGKILL must not leave
    # orphans that go on training (Linux prctl; elsewhere orphans finish their
    # cell and the next run's claim logic sorts it out).
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except OSError:
            pass
        if os.getppid() == 1:  # the parent already died before prctl took effect
            os._exit(1)

    from bench.algos.common import pin_one_thread

    pin_one_thread()


class Interrupted(Exception):
    """The user pressed Ctrl-C, or the run was sent SIGTERM; in-flight runs were marked interrupted.

    :param signum: the signal that stopped it (``signal.SIGINT`` or ``signal.SIGTERM``); the CLI exits
        with ``128 + signum``, as a shell reports a process the signal killed.
    """

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into the same clean stop as Ctrl-C.

    A `bench run` started in the background by a script cannot be stopped with Ctrl-C: a
    non-interactive shell starts background jobs with SIGINT ignored, and Python keeps it ignored.
    ``kill PID`` (SIGTERM) is how such a run is stopped, so it gets the same care: workers
    terminated, their runs marked ``interrupted`` rather than left ``running`` until they go stale.
    """


#: The error of a run whose worker process died under it.
WORKER_DIED = "worker process died (killed, out of memory or crashed)"
#: Seconds a worker has to end after SIGTERM (Ctrl-C, ``kill``, the end of a pool) before it gets SIGKILL: a
#: worker that ignores SIGTERM (a plugin's handler, code stuck in C) would otherwise hang ``bench run``.
KILL_AFTER_S = 5.0


def _worker_main(conn: Any, store_url: str, remeasure: frozenset[str] = frozenset()) -> None:
    """A pool worker: say who it is, then run the cells it is sent, one at a time, until told to stop."""
    _init_worker()
    from bench.storage.store import this_owner

    owner = this_owner()
    conn.send(("owner", owner))
    while True:
        try:
            cell = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if cell is None:
            return
        try:
            out = run_cell(store_url, cell, owner, remeasure=cell.key in remeasure,
                           on_start=lambda: conn.send(("started", cell.key)))
        except Exception as e:  # noqa: BLE001 - not a training error (run_cell records those): e.g. the store failed
            out = Outcome(cell.key, "failed", " ".join(f"{type(e).__name__}: {e}".split()))
        conn.send(("done", out))


@dataclass
class _Worker:
    proc: Any
    conn: Any
    owner: str | None = None
    cell: Cell | None = None
    #: When (``time.monotonic()``) its run started (claimed), where its limits start; None before.
    started_at: float | None = None
    #: Why the pool killed it (a limit reached, its own watch failing to stop it), its run's error; None before.
    stopped: str | None = None
    #: The pool's watch of its run's limits (the backstop of bench.run.limits).
    backstop: Backstop = field(default_factory=Backstop)
    #: Told to exit after its run was stopped by a limit: whatever the run left in the process goes with it.
    retiring: bool = False


def stop_processes(procs: list[Any], grace: float = KILL_AFTER_S) -> None:
    """SIGTERM every live process of ``procs`` (``multiprocessing`` processes), then SIGKILL those still alive
    ``grace`` seconds later, and reap them all."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)


def run_local(
    store_url: str,
    cells: list[Cell],
    owner: str,
    workers: int,
    on_done: Callable[[Cell, Outcome], None],
    remeasure: frozenset[str] = frozenset(),
) -> list[Outcome]:
    """Run ``cells`` on ``workers`` worker processes; ``on_done`` sees each outcome. The cells whose
    keys are in ``remeasure`` are done runs to measure again (:func:`remeasure_cell`).

    Each worker claims runs under its own owner (``host:pid:start``); ``owner``, the
    parent's, is not used for runs. A worker that dies (SIGKILL, OOM kill, segfault)
    fails only the run it held, and a new worker takes its place; the others go on.
    Ctrl-C terminates the workers, marks their runs ``interrupted`` and raises
    :class:`Interrupted`.
    """
    from bench.storage.store import Store

    os.environ.update(THREAD_ENV)
    ctx = mp.get_context("spawn")  # fork after torch/BLAS threads exist is unsafe
    queue = list(cells)
    queue.reverse()  # pop() from the end takes cells in the given order
    pool: list[_Worker] = []
    outcomes: list[Outcome] = []

    db: Any = None

    def store() -> Any:  # one store for the parent: it writes only for workers that died
        nonlocal db
        if db is None:
            db = Store(store_url)
        return db

    def start() -> None:
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(theirs, store_url, remeasure), name="bench-worker")  # not daemonic: vector envs may start processes
        proc.start()
        theirs.close()
        w = _Worker(proc, mine)
        pool.append(w)
        give(w)

    def give(w: _Worker) -> None:
        w.cell = queue.pop() if queue else None
        w.started_at = None
        w.backstop = Backstop()
        try:
            w.conn.send(w.cell)
        except (OSError, ValueError):
            pass  # it died meanwhile: found out below through its sentinel

    def finished(w: _Worker, out: Outcome) -> None:
        cell, w.cell = w.cell, None
        outcomes.append(out)
        if cell is not None:
            on_done(cell, out)

    def read(w: _Worker) -> bool:
        """Take the worker's messages; False once its pipe is closed."""
        try:
            while w.conn.poll():
                kind, value = w.conn.recv()
                if kind == "owner":
                    w.owner = value
                elif kind == "started":
                    if w.cell is not None and w.cell.key == value:
                        w.started_at = time.monotonic()
                else:
                    finished(w, value)
                    if is_limit_stop(value.error):
                        retire(w)
                    elif w.proc.is_alive():
                        give(w)
            return True
        except (EOFError, OSError):
            return False

    def retire(w: _Worker) -> None:
        """Let a worker whose run a limit stopped exit, and start another in its place: a run that hogged or
        hung may have left threads, memory or processes behind, which must not count against the next run."""
        w.retiring = True
        try:
            w.conn.send(None)
        except (OSError, ValueError):
            pass
        if queue:
            start()

    def recorded(w: _Worker) -> str | None:
        """The limit its own watch recorded for the run of a worker that died: it gives training up by writing
        what the run recorded, then kills its process (bench.run.limits.LimitWatch)."""
        assert w.cell is not None
        row = store().rows([w.cell.key]).get(w.cell.key)
        if row is not None and w.owner is not None and row.owner == w.owner and row.status == "failed":
            return row.error if is_limit_stop(row.error) else None
        return None

    def buried(w: _Worker) -> None:
        # Only the run this worker held: its own owner, not the other workers'.
        pool.remove(w)
        w.conn.close()
        w.proc.join(timeout=5)
        if w.cell is not None:
            why = w.stopped or (recorded(w) if w.started_at is not None else None) or WORKER_DIED
            if w.owner is not None:
                store().release(w.owner, "failed", why)
            finished(w, Outcome(w.cell.key, "failed", why))
        if queue and not w.retiring:
            start()

    watching = any(has_limits(c) for c in cells)

    def watch() -> None:
        """Kill (SIGKILL, with its child processes) each worker whose run has stayed past one of its limits for
        BACKSTOP_S: its own LimitWatch stops it well before that, unless that watch cannot run at all."""
        now = time.monotonic()
        for w in pool:
            if w.cell is None or w.started_at is None or w.stopped is not None or not w.proc.is_alive():
                continue
            why = w.backstop.check(w.cell, now - w.started_at, w.proc.pid)
            if why is not None:
                w.stopped = why
                kill_tree(w.proc.pid)

    def on_term(signum: int, frame: Any) -> None:
        raise _Terminated

    # Signal handlers can only be set from the main thread (an embedding program may call us elsewhere).
    main = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, on_term) if main else None
    try:
        for _ in range(max(1, min(workers, len(queue)))):
            start()
        while any(w.cell is not None for w in pool):
            by_handle: dict[Any, _Worker] = {}
            for w in pool:
                by_handle[w.conn] = w
                by_handle[w.proc.sentinel] = w
            ready = mp.connection.wait(list(by_handle), timeout=WATCH_EVERY_S if watching else None)
            if watching:
                watch()
            for w in {id(by_handle[h]): by_handle[h] for h in ready}.values():
                alive = read(w)
                if not alive or not w.proc.is_alive():
                    read(w)  # a last outcome sent just before it exited
                    buried(w)
    except KeyboardInterrupt as e:
        if main:  # a second SIGTERM during the clean-up must not cut it short
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signum = signal.SIGTERM if isinstance(e, _Terminated) else signal.SIGINT
        stop_processes([w.proc for w in pool])  # SIGTERM, then SIGKILL after KILL_AFTER_S
        why = "interrupted by SIGTERM" if signum == signal.SIGTERM else "interrupted by the user (Ctrl-C)"
        for w in pool:
            if w.owner is not None:
                store().release(w.owner, "interrupted", why)
        raise Interrupted(signum) from None
    finally:
        if main:
            signal.signal(signal.SIGTERM, old_term)
        for w in pool:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
        for w in pool:
            w.proc.join(timeout=10)
        stop_processes([w.proc for w in pool])
        if db is not None:
            db.dispose()
    return outcomes
