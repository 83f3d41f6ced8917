"""Per-run limits: how long a run may take and how much memory it may hold, enforced from outside the run.

A suite may set ``max_wall_minutes`` and ``max_memory_mb`` (``defaults``, or per algorithm entry: see
``docs/suites.md``). The local process pool (:func:`bench.run.runner.run_local`) checks each worker every
:data:`~bench.run.runner.WATCH_EVERY_S` seconds against its run's limits and stops a worker past one with
SIGKILL, together with its child processes (async vector envs, A3C's workers): a run that hangs in a plugin, or
grows until the machine swaps, cannot be asked to stop, so nothing inside it is relied on. The run is recorded
as failed, its error naming the limit (:func:`limit_reached`). Limits are not part of a cell's key: they decide
whether a run is allowed to finish, not what it does.

Memory is the resident set (``VmRSS`` in ``/proc/<pid>/status``, proc(5)) of the worker and all its
descendants, summed; pages shared between them (a forked child's copy-on-write pages) count once per process,
so the sum can overstate what they hold together. Linux only: elsewhere the memory limit is not checked.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any


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


def limit_reached(cell: Any, elapsed_s: float, pid: int) -> str | None:
    """Why the run of ``cell`` (a :class:`bench.suites.suite.Cell`), running for ``elapsed_s`` wall seconds in
    process ``pid``, must stop (its recorded error), or None while it is within its limits."""
    wall = getattr(cell, "max_wall_minutes", None)
    if wall is not None and elapsed_s > wall * 60:
        return f"stopped: wall-clock limit of {minutes(wall)} reached"
    mem = getattr(cell, "max_memory_mb", None)
    if mem is not None:
        used = rss_mb(pid)
        if used is not None and used > mem:
            return f"stopped: memory limit of {mem:,} MB reached ({used:,.0f} MB resident)"
    return None
