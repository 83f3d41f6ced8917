"""Per-run limits: how long a run may take and how much memory it may hold.

A suite may set ``max_wall_minutes`` and ``max_memory_mb`` (``defaults``, or per algorithm entry: see
``docs/suites.md``). Limits are not part of a cell's key: they decide whether a run is allowed to finish, not
what it does. A run past one is recorded as failed, its error naming the limit (:func:`limit_reached`), and it
keeps what it recorded until then (episodes, diagnostics, evaluations, its step count): a run stopped after
an hour has an hour of learning curve worth looking at. They are enforced in two layers, each the same under
every executor:

1. **From inside the run** (:class:`LimitWatch`, started by :func:`bench.run.runner.run_cell`, so the local
   pool's workers and Ray's tasks alike): a thread of the run's own process checks its wall time and memory
   every :data:`WATCH_EVERY_S` seconds. Past a limit it kills the child processes the run started (async vector
   envs, A3C's workers: one of them may be what hogs or hangs) and raises :class:`LimitStop` in the training
   thread, which unwinds training like any error, and the run is written as usual. Training that does not
   return within :data:`STOP_GRACE_S` (a C call that never returns, a loop that swallows every exception) is
   given up: the watch writes what the run recorded itself, then ends its own process with SIGKILL.
2. **From outside** (the local pool's parent, the Ray driver), as a backstop for a process whose watch cannot
   run at all (C code that holds the GIL forever): a run still past a limit :data:`BACKSTOP_S` seconds after
   reaching it is killed (SIGKILL; ``ray.cancel(force=True)``) and failed with the limit named. Only then is
   what it recorded lost, since nothing of the process can be asked any more.

Memory is the resident set (``VmRSS`` in ``/proc/<pid>/status``, proc(5)) of the run's process and all its
descendants, summed; pages shared between them (a forked child's copy-on-write pages) count once per process,
so the sum can overstate what they hold together. The process is a worker that may have run other cells
before (the pool's, or Ray's, which a run with a limit does not share: see ``bench.run.ray_executor``), so
its imports count too. Linux only: elsewhere the memory limit is not checked.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

#: How often (seconds) a run's limits are checked, from inside it and from outside.
WATCH_EVERY_S = 1.0
#: Seconds a run past a limit has to unwind its training after :class:`LimitStop` is raised in it, before its
#: watch gives training up, writes what it recorded and ends the process.
STOP_GRACE_S = 5.0
#: Seconds a run may stay past a limit before its executor kills it from outside (losing what it recorded):
#: long enough for the watch inside to stop it, give it up and write a long run's rows.
BACKSTOP_S = 30.0
#: How the error of a run stopped by a limit starts.
STOPPED = "stopped: "


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (children, their children, ...), read from ``/proc``; [] where there is none."""
    parent_of: dict[int, int] = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            parent_of[int(d.name)] = int(fields[1])  # field 4, the parent's pid
        except (OSError, IndexError, ValueError):
            continue
    out: list[int] = []
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent_of.items() if pp == p]
        out += kids
        frontier += kids
    return out


def rss_mb(pid: int) -> float | None:
    """Resident memory of ``pid`` and its descendants in MiB, or None where ``/proc`` cannot tell."""
    total_kb = 0
    seen = False
    for p in [pid, *children(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
                    seen = True
                    break
        except (OSError, ValueError, IndexError):
            continue  # it exited meanwhile
    return total_kb / 1024 if seen else None


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and its descendants (children first, so none is re-parented and lost)."""
    for p in [*reversed(children(pid)), pid]:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass  # gone already


def minutes(m: float) -> str:
    """``10 min``, ``1.5 min``, ``2 h``: a limit as a suite wrote it, readable."""
    if m >= 60 and m % 60 == 0:
        return f"{m / 60:g} h"
    return f"{m:g} min"


def wall_reached(cell: Any, elapsed_s: float) -> str | None:
    """Why the run of ``cell``, running for ``elapsed_s`` wall seconds, must stop for its wall-clock limit, or None.
    The default limit (``cell.wall_limit_default``: :func:`bench.suites.cost.default_wall_minutes`) says so and how
    to change it."""
    wall = getattr(cell, "max_wall_minutes", None)
    if wall is None or elapsed_s <= wall * 60:
        return None
    if getattr(cell, "wall_limit_default", False):
        from bench.suites.cost import DEFAULT_WALL_FLOOR_MIN, DEFAULT_WALL_MULTIPLE

        return (f"{STOPPED}wall-clock limit of {minutes(wall)} reached (the default: {DEFAULT_WALL_MULTIPLE} times the "
                f"run's estimated CPU time, at least {minutes(DEFAULT_WALL_FLOOR_MIN)}; set max_wall_minutes in the suite "
                "to change it, 0 for no limit)")
    return f"{STOPPED}wall-clock limit of {minutes(wall)} reached"


def limit_reached(cell: Any, elapsed_s: float, pid: int) -> str | None:
    """Why the run of ``cell`` (a :class:`bench.suites.suite.Cell`), running for ``elapsed_s`` wall seconds in
    process ``pid``, must stop (its recorded error), or None while it is within its limits."""
    wall = wall_reached(cell, elapsed_s)
    if wall is not None:
        return wall
    mem = getattr(cell, "max_memory_mb", None)
    if mem is not None:
        used = rss_mb(pid)
        if used is not None and used > mem:
            return f"{STOPPED}memory limit of {mem:,} MB reached ({used:,.0f} MB resident)"
    return None


def has_limits(cell: Any) -> bool:
    """Whether ``cell`` has a per-run limit (its suite's, or the default wall-clock one)."""
    return getattr(cell, "max_wall_minutes", None) is not None or getattr(cell, "max_memory_mb", None) is not None


def needs_own_worker(cell: Any) -> bool:
    """Whether Ray gives the run of ``cell`` a worker of its own: where its suite sets a limit (a memory limit must
    not count another run's leftovers), not for the default wall-clock limit alone, which every run has."""
    if getattr(cell, "max_memory_mb", None) is not None:
        return True
    return getattr(cell, "max_wall_minutes", None) is not None and not getattr(cell, "wall_limit_default", False)


def is_limit_stop(error: str | None) -> bool:
    """Whether a run's recorded ``error`` says a limit stopped it (:func:`limit_reached`)."""
    return bool(error) and error.startswith(STOPPED) and " limit of " in error


def limit_field(why: str) -> str:
    """The suite field behind a :func:`limit_reached` reason: ``max_wall_minutes`` or ``max_memory_mb``
    (recorded as the run's ``meta.stopped_by``)."""
    return "max_memory_mb" if why.startswith(f"{STOPPED}memory") else "max_wall_minutes"


class Backstop:
    """The executor's side (:data:`BACKSTOP_S`): says when a run has stayed past one of its limits so long
    that its own watch must have failed. One per run in flight; ``check`` is called every
    :data:`WATCH_EVERY_S` seconds while the run is known to have started."""

    def __init__(self, after_s: float | None = None):
        self.after_s = BACKSTOP_S if after_s is None else after_s
        self.over_since: float | None = None

    def check(self, cell: Any, elapsed_s: float, pid: int | None) -> str | None:
        """The reason to kill the run now, or None. ``pid`` None: the run's memory cannot be read from here
        (a Ray worker on another host), so only its wall time is checked."""
        if pid is None:
            why = wall_reached(cell, elapsed_s)
        else:
            why = limit_reached(cell, elapsed_s, pid)
        now = time.monotonic()
        if why is None:
            self.over_since = None  # memory can go down again
            return None
        if self.over_since is None:
            self.over_since = now
        return why if now - self.over_since >= self.after_s else None


class LimitStop(BaseException):
    """Raised in a run's training thread by its :class:`LimitWatch` once the run is past a limit.

    A ``BaseException``, like ``KeyboardInterrupt``: training code that catches ``Exception`` to carry on
    (SB3's callbacks, a plugin's retry loop) lets it through. The reason is the watch's ``reason``.
    """


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    """Schedule ``exc`` in the thread ``thread_id``: raised there at its next bytecode, whatever it runs (a
    blocking C call first has to return). ``None`` withdraws one still pending. CPython's
    ``PyThreadState_SetAsyncExc`` (see the C API's "Thread State and the Global Interpreter Lock")."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


class LimitWatch:
    """Watches the run trained in the calling thread against its cell's limits, from a daemon thread of the
    same process (the first layer of the module docstring).

    Use::

        watch = LimitWatch(cell, give_up)
        watch.start()
        try:
            try:
                train()              # LimitStop may be raised in here ...
            finally:
                watch.disarm()       # ... and never after this returns
        except LimitStop:            # raised after train() returned, before disarm() took effect
            watch.disarm()
        if watch.reason: ...         # the run was stopped: its error

    The exception is raised once, at most, and only while the watch is armed; :meth:`disarm` withdraws it if
    it is still pending, so the two ``disarm`` calls above leave no window where it can escape.

    :param give_up: ``give_up(reason)``, called from the watch's thread when training has not returned
        :data:`STOP_GRACE_S` seconds after :class:`LimitStop`: it writes what the run recorded. The process
        is then ended with SIGKILL, whether or not it succeeded; the training thread may hold locks, run
        code that ignores exceptions, or never return.
    """

    def __init__(self, cell: Any, give_up: Callable[[str], None], *, every: float = WATCH_EVERY_S,
                 grace: float = STOP_GRACE_S):
        self.cell, self.give_up, self.every, self.grace = cell, give_up, every, grace
        #: Why the run was stopped (its recorded error), or None while it is within its limits.
        self.reason: str | None = None
        self._target = threading.get_ident()
        self._lock = threading.Lock()
        self._armed = False
        self._given_up = False
        self._done = threading.Event()
        self._before: set[int] = set()
        self._thread: threading.Thread | None = None

    def start(self) -> "LimitWatch":
        """Start watching from now (the run's limits count from here); does nothing for a cell without limits."""
        if not has_limits(self.cell):
            return self
        self._t0 = time.monotonic()
        self._before = set(children(os.getpid()))
        self._armed = True
        self._thread = threading.Thread(target=self._loop, name="bench-limits", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._done.wait(self.every):
            why = limit_reached(self.cell, time.monotonic() - self._t0, os.getpid())
            if why is not None:
                break
        else:
            return
        with self._lock:
            if not self._armed:
                return  # training returned meanwhile: the run is over, within its limits
            self.reason = why
            self.kill_children()
            _raise_in(self._target, LimitStop)
        if self._done.wait(self.grace):
            return
        with self._lock:
            if not self._armed:
                return
            self._given_up = True
        try:
            self.give_up(why)
        finally:
            self.kill_children()
            os.kill(os.getpid(), signal.SIGKILL)

    def kill_children(self) -> None:
        """SIGKILL the processes started under this process since :meth:`start` (the run's), with theirs."""
        for pid in set(children(os.getpid())) - self._before:
            kill_tree(pid)

    def disarm(self) -> None:
        """Called by the training thread once training has returned (or raised): no :class:`LimitStop` is raised
        after this, and the watch stops. Where the watch has given training up already, it is writing the run
        and about to end this process: this waits for that, never returning."""
        if self._thread is None:
            return  # never started: no limits
        with self._lock:
            self._armed = False
            _raise_in(self._target, None)
            given_up = self._given_up
        self._done.set()
        if given_up:
            while True:
                time.sleep(1.0)
        if self.reason is not None:
            self.kill_children()  # whatever the run left running
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.every + 1.0)
