"""The local process pool: ``bench run``'s default executor. Each worker process runs
:func:`bench.run.runner.run_cell` on the cells it is sent, one at a time, and dies with its parent.

Each worker claims runs as itself (its own ``host:pid:start`` owner), so when one worker dies only the run
it held is failed, and the other workers' runs go on. Ctrl-C or SIGTERM stops the pool cleanly: workers
terminated, their runs marked ``interrupted``.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from bench.run.limits import WATCH_EVERY_S, Backstop, has_limits, is_limit_stop, kill_tree
from bench.run.runner import THREAD_ENV, Outcome, run_cell
from bench.suites.suite import Cell

if TYPE_CHECKING:  # annotations only: the run layer opens the store through runner._store
    from bench.storage.urls import StoreURL

_PR_SET_PDEATHSIG = 1


def init_worker() -> None:
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


def _worker_main(conn: Any, store_url: StoreURL, remeasure: frozenset[str] = frozenset()) -> None:
    """A pool worker: say who it is, then run the cells it is sent, one at a time, until told to stop."""
    init_worker()
    from bench.storage.owners import this_owner

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
    store_url: StoreURL,
    cells: list[Cell],
    owner: str,
    workers: int,
    on_done: Callable[[Cell, Outcome], None],
    remeasure: frozenset[str] = frozenset(),
) -> list[Outcome]:
    """Run ``cells`` on ``workers`` worker processes; ``on_done`` sees each outcome. The cells whose
    keys are in ``remeasure`` are done runs to measure again (:func:`bench.run.runner.remeasure_cell`).

    Each worker claims runs under its own owner (``host:pid:start``); ``owner``, the
    parent's, is not used for runs. A worker that dies (SIGKILL, OOM kill, segfault)
    fails only the run it held, and a new worker takes its place; the others go on.
    Ctrl-C terminates the workers, marks their runs ``interrupted`` and raises
    :class:`Interrupted`.
    """
    os.environ.update(THREAD_ENV)
    pool = _Pool(store_url, cells, on_done, remeasure)

    def on_term(signum: int, frame: Any) -> None:
        raise _Terminated

    # Signal handlers can only be set from the main thread (an embedding program may call us elsewhere).
    main = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, on_term) if main else None
    try:
        pool.run(workers)
    except KeyboardInterrupt as e:
        if main:  # a second SIGTERM during the clean-up must not cut it short
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pool.interrupt(signal.SIGTERM if isinstance(e, _Terminated) else signal.SIGINT)
    finally:
        if main:
            signal.signal(signal.SIGTERM, old_term)
        pool.close()
    return pool.outcomes


class _Pool:
    """The worker processes of one :func:`run_local` call, the cells still to give them, and the outcomes so far."""

    def __init__(self, store_url: StoreURL, cells: list[Cell], on_done: Callable[[Cell, Outcome], None],
                 remeasure: frozenset[str]):
        self.store_url, self.on_done, self.remeasure = store_url, on_done, remeasure
        self.ctx = mp.get_context("spawn")  # fork after torch/BLAS threads exist is unsafe
        self.queue = list(cells)
        self.queue.reverse()  # pop() from the end takes cells in the given order
        self.workers: list[_Worker] = []
        self.outcomes: list[Outcome] = []
        self.watching = any(has_limits(c) for c in cells)
        self._db: Any = None

    def store(self) -> Any:
        """One store for the parent, opened on first use: it writes only for workers that died."""
        from bench.storage.store import Store

        if self._db is None:
            self._db = Store(self.store_url)
        return self._db

    def run(self, workers: int) -> None:
        """Start the workers, then hand out cells and bury dead workers until every cell has an outcome."""
        for _ in range(max(1, min(workers, len(self.queue)))):
            self.start()
        while any(w.cell is not None for w in self.workers):
            by_handle: dict[Any, _Worker] = {}
            for w in self.workers:
                by_handle[w.conn] = w
                by_handle[w.proc.sentinel] = w
            ready = mp.connection.wait(list(by_handle), timeout=WATCH_EVERY_S if self.watching else None)
            if self.watching:
                self.watch()
            for w in {id(by_handle[h]): by_handle[h] for h in ready}.values():
                alive = self.read(w)
                if not alive or not w.proc.is_alive():
                    self.read(w)  # a last outcome sent just before it exited
                    self.buried(w)

    def start(self) -> None:
        mine, theirs = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker_main, args=(theirs, self.store_url, self.remeasure),
                                name="bench-worker")  # not daemonic: vector envs may start processes
        proc.start()
        theirs.close()
        w = _Worker(proc, mine)
        self.workers.append(w)
        self.give(w)

    def give(self, w: _Worker) -> None:
        w.cell = self.queue.pop() if self.queue else None
        w.started_at = None
        w.backstop = Backstop()
        try:
            w.conn.send(w.cell)
        except (OSError, ValueError):
            pass  # it died meanwhile: found out below through its sentinel

    def finished(self, w: _Worker, out: Outcome) -> None:
        cell, w.cell = w.cell, None
        self.outcomes.append(out)
        if cell is not None:
            self.on_done(cell, out)

    def read(self, w: _Worker) -> bool:
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
                    self.finished(w, value)
                    if is_limit_stop(value.error):
                        self.retire(w)
                    elif w.proc.is_alive():
                        self.give(w)
            return True
        except (EOFError, OSError):
            return False

    def retire(self, w: _Worker) -> None:
        """Let a worker whose run a limit stopped exit, and start another in its place: a run that hogged or
        hung may have left threads, memory or processes behind, which must not count against the next run."""
        w.retiring = True
        try:
            w.conn.send(None)
        except (OSError, ValueError):
            pass
        if self.queue:
            self.start()

    def recorded(self, w: _Worker) -> str | None:
        """The limit its own watch recorded for the run of a worker that died: it gives training up by writing
        what the run recorded, then kills its process (bench.run.limits.LimitWatch)."""
        assert w.cell is not None
        row = self.store().rows([w.cell.key]).get(w.cell.key)
        if row is not None and w.owner is not None and row.owner == w.owner and row.status == "failed":
            return row.error if is_limit_stop(row.error) else None
        return None

    def buried(self, w: _Worker) -> None:
        # Only the run this worker held: its own owner, not the other workers'.
        self.workers.remove(w)
        w.conn.close()
        w.proc.join(timeout=5)
        if w.cell is not None:
            why = w.stopped or (self.recorded(w) if w.started_at is not None else None) or WORKER_DIED
            if w.owner is not None:
                self.store().release(w.owner, "failed", why)
            self.finished(w, Outcome(w.cell.key, "failed", why))
        if self.queue and not w.retiring:
            self.start()

    def watch(self) -> None:
        """Kill (SIGKILL, with its child processes) each worker whose run has stayed past one of its limits for
        BACKSTOP_S: its own LimitWatch stops it well before that, unless that watch cannot run at all."""
        now = time.monotonic()
        for w in self.workers:
            if w.cell is None or w.started_at is None or w.stopped is not None or not w.proc.is_alive():
                continue
            why = w.backstop.check(w.cell, now - w.started_at, w.proc.pid)
            if why is not None:
                w.stopped = why
                kill_tree(w.proc.pid)

    def interrupt(self, signum: int) -> None:
        """Ctrl-C or SIGTERM: terminate the workers, mark their runs interrupted, raise :class:`Interrupted`."""
        stop_processes([w.proc for w in self.workers])  # SIGTERM, then SIGKILL after KILL_AFTER_S
        why = "interrupted by SIGTERM" if signum == signal.SIGTERM else "interrupted by the user (Ctrl-C)"
        for w in self.workers:
            if w.owner is not None:
                self.store().release(w.owner, "interrupted", why)
        raise Interrupted(signum) from None

    def close(self) -> None:
        """Tell every worker left to stop, reap them (SIGTERM, then SIGKILL), and close the parent's store."""
        for w in self.workers:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
        for w in self.workers:
            w.proc.join(timeout=10)
        stop_processes([w.proc for w in self.workers])
        if self._db is not None:
            self._db.dispose()
