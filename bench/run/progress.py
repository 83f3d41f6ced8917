"""How far long runs are: the steps each running run has reported, as fractions, times left and lines.

A run's heartbeat writes its env steps and training CPU seconds so far into its row (``Store.heartbeat``), every
``HEARTBEAT_EVERY_S`` seconds, so anything that can read the store can follow it: ``bench status`` on
any host, and ``bench run``, whose bar moves within a cell as well as between cells. A reference cell
can train for an hour; without this, a log of ``bench run`` said nothing for that hour. A run with an
equal-compute budget (``cpu_seconds``) stops at whichever budget it reaches first, so its fraction is
the larger of the two: its step budget is set out of reach on purpose, and by steps alone a 20-minute
Humanoid run read 21% done, "~7 h left", three quarters of the way through.

Times left are wall-clock extrapolations from the run's own pace so far (set-up included), so they
are estimates, and say so (``~``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, Sequence

from bench.storage.vocabulary import cpu_budget


def fraction(steps: int | None, timesteps: int, cpu_s: float | None = None,
             cpu_seconds: float | None = None) -> float:
    """The share of its budget a run has done, in [0, 1] (0 before its first report): of its step
    budget, or of its CPU-seconds budget (``cpu_seconds``, with ``cpu_s`` used so far) where it has
    one and that share is larger, since the run stops at whichever it reaches first."""
    if not steps or timesteps <= 0:
        return 0.0
    by_cpu = cpu_s / cpu_seconds if cpu_s is not None and cpu_seconds else 0.0
    return min(1.0, max(steps / timesteps, by_cpu))


#: A running run whose env steps have not grown for :func:`stall_after_s` seconds is ``stalled`` (``bench status``):
#: its process is alive and its heartbeat thread beats, but it has not stepped its envs (a plugin or env stuck in a
#: sleep, a lock or a C call). The longest stretch between two env steps of a healthy run is one update, and an
#: update takes less than its rollout's worth of the env's time scale (``time_scale_us`` counts a run's updates with
#: its steps). So the stretch allowed is :data:`STALL_STEPS` steps at the env's time scale, at least this floor
#: (seconds): for every env of the registry but the pixel ones (CarRacing, highway) the floor is the larger.
STALL_AFTER_S = 600.0
#: Steps whose time (at the env's ``time_scale_us``) a run may go without an env step before it is stalled: the
#: largest rollout (``n_steps × n_envs``) of the shipped suites, BipedalWalker-v3's PPO in
#: ``suites/reference/continuous-dense.yaml``. The slowest rollout there, CarRacing-v3's 4,096 steps at 19,000 µs,
#: is 78 s; CarRacing's stall time is 65,536 × 19 ms = 21 min.
STALL_STEPS = 65_536


def stall_after_s(time_scale_us: float | None) -> float:
    """Seconds without an env step after which a running run is stalled: :data:`STALL_STEPS` steps at its env's
    ``time_scale_us`` (CPU µs per step; None where the env has none), at least :data:`STALL_AFTER_S`."""
    derived = STALL_STEPS * time_scale_us / 1e6 if time_scale_us else 0.0
    return max(STALL_AFTER_S, derived)


#: How a running run's ``error`` column starts while it is stalled (written by its own heartbeat).
STALLED = "stalled:"


class StallWatch:
    """Follows a run's step count from beat to beat and says, once it has not grown for ``after_s``
    seconds, that the run is stalled (the note its heartbeat writes into the run's ``error``)."""

    def __init__(self, after_s: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.after_s, self.clock = stall_after_s(None) if after_s is None else after_s, clock
        self._steps: int | None = None
        self._since = clock()

    def note(self, steps: int) -> str | None:
        """The stall note for a run at ``steps`` now, or None while it progresses."""
        now = self.clock()
        if self._steps is None or steps > self._steps:
            self._steps, self._since = steps, now
            return None
        idle = now - self._since
        if idle < self.after_s:
            return None
        return f"{STALLED} no env step for {duration(idle)} (at step {steps:,}); its process is alive"


def is_stalled(row: Any) -> bool:
    """Whether a store row is a running run whose heartbeat says it has stopped stepping (:class:`StallWatch`)."""
    return row.status == "running" and (row.error or "").startswith(STALLED)


def row_fraction(row: Any) -> float:
    """:func:`fraction` of a running run's store row (:meth:`bench.storage.store.Store.rows`)."""
    return fraction(row.total_steps, row.timesteps, getattr(row, "cpu_s", None), cpu_budget(getattr(row, "config", None)))


def seconds_left(elapsed: float, frac: float) -> float | None:
    """Wall seconds left at the pace so far, or None before there is a pace (``frac`` is 0)."""
    if frac <= 0.0 or elapsed <= 0.0:
        return None
    return elapsed * (1.0 - frac) / frac


def duration(seconds: float) -> str:
    """``40 s``, ``13 min``, ``2 h 05 min``: a time left, to the precision an estimate has."""
    s = max(0, int(round(seconds)))
    if s < 90:
        return f"{s} s"
    m = (s + 30) // 60
    if m < 90:
        return f"{m} min"
    return f"{m // 60} h {m % 60:02d} min"


def run_progress(steps: int | None, timesteps: int, started_at: float | None, now: float,
                 cpu_s: float | None = None, cpu_seconds: float | None = None) -> str:
    """``412,160 of 1,000,000 (41%, ~13 min left)`` for a running run; ``—`` before its first report.
    A run further along its CPU-seconds budget than its step budget reads ``1,203,000 steps, 900 of
    1,200 CPU s (75%, ~5 min left)``."""
    if not steps:
        return "—"
    frac = fraction(steps, timesteps, cpu_s, cpu_seconds)
    left = seconds_left(now - started_at, frac) if started_at else None
    by_cpu = frac > min(1.0, steps / timesteps) if timesteps > 0 else False
    done = f"{steps:,} steps, {cpu_s:,.0f} of {cpu_seconds:,.0f} CPU s" if by_cpu else f"{steps:,} of {timesteps:,}"
    return f"{done} ({frac:.0%}" + (f", ~{duration(left)} left)" if left is not None else ")")


def progress_line(suite: str, n_cells: int, n_finished: int, running: Sequence[tuple[str, float]], elapsed: float,
                  shown: int = 4) -> str:
    """One line for a log: cells finished, the running ones with their fractions, time so far and left.

    :param running: ``(name, fraction)`` of each cell in flight; the first ``shown`` are named.
    """
    done = n_finished + sum(f for _, f in running)
    left = seconds_left(elapsed, done / n_cells) if n_cells else None
    named = ", ".join(f"{name} {f:.0%}" for name, f in running[:shown])
    more = f", +{len(running) - shown} more" if len(running) > shown else ""
    return (f"{suite}: {n_finished}/{n_cells} cells finished"
            + (f"; running: {named}{more}" if running else "")
            + f"; {duration(elapsed)} so far" + (f", ~{duration(left)} left" if left is not None else ""))


class Heartbeat:
    """Calls ``beat()`` every ``every`` seconds from a daemon thread while the ``with`` block runs.

    Training holds the GIL only in stretches (torch and NumPy release it, and the
    interpreter switches threads every few milliseconds), so the beat keeps time
    even through an update of several minutes. A failed beat (a store briefly
    unreachable) is retried at the next one.
    """

    def __init__(self, beat: Callable[[], None], every: float, name: str = "bench-heartbeat"):
        self.beat = beat
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - the next beat tries again; the run (or display) goes on
                pass

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=max(self.every, 5.0))


class LiveProgress:
    """Polls the store for the steps of this ``bench run``'s cells in flight, every ``every`` seconds,
    in a daemon thread, and hands ``on_poll`` a ``{key: fraction}`` of those running.

    ``finished(key)`` takes a cell out of the poll once its outcome is in. A failed poll (a store
    briefly unreachable) is skipped: progress is a display, never a reason to stop a run.
    """

    def __init__(self, rows: Callable[[list[str]], dict[str, Any]], keys: Iterable[str],
                 on_poll: Callable[[dict[str, float]], None], every: float = 10.0):
        self._rows, self._on_poll, self.every = rows, on_poll, every
        self._pending = set(keys)
        self._lock = threading.Lock()
        self._ticker = Heartbeat(lambda: self._on_poll(self.poll()), every, name="bench-progress")

    def finished(self, key: str) -> None:
        with self._lock:
            self._pending.discard(key)

    def poll(self) -> dict[str, float]:
        """``{key: fraction}`` of the cells still pending that are running and have reported steps."""
        with self._lock:
            keys = sorted(self._pending)
        fracs = {k: row_fraction(r) for k, r in self._rows(keys).items()
                 if r.status == "running" and r.total_steps}
        with self._lock:  # a cell that finished during the query is not counted twice
            return {k: f for k, f in fracs.items() if k in self._pending}

    def __enter__(self) -> "LiveProgress":
        self._ticker.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ticker.__exit__(*exc)
