"""Owners: who is running a claimed run, and are they still alive?

An owner is ``host:pid:start`` of the process that runs the attempt, optionally prefixed with an
executor's task tag, ``TAG@host:pid:start`` (see :mod:`bench.storage.store`, "Owners").
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

#: A running row whose heartbeat is older than this is considered interrupted.
STALE_AFTER_S = 120.0


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3, the state, first), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The command name (field 2) is in parentheses and may hold spaces and parentheses itself.
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _proc_start(pid: int) -> str | None:
    fields = _proc_stat(pid)
    # Field 22 is the start time in clock ticks.
    return fields[19] if fields is not None and len(fields) > 19 else None


#: Process states (``/proc/<pid>/stat`` field 3, proc(5)) of a process that has exited: ``Z`` a zombie, not yet
#: reaped by its parent (under a PID 1 that does not reap, as in a container without an init, it stays one),
#: ``X`` dead. Its pid and start time are still there, so they alone would take it for alive.
DEAD_STATES = frozenset("ZX")


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether process ``pid`` runs (started at ``start``, clock ticks since boot, when given): it exists, has
    not exited (a zombie has: :data:`DEAD_STATES`) and, with ``start``, is not another process that reuses the pid."""
    fields = _proc_stat(pid)
    if fields is None or len(fields) <= 19:
        return False
    if fields[0] in DEAD_STATES:
        return False
    return start is None or fields[19] == start


def this_owner(tag: str | None = None) -> str:
    """``host:pid:start`` of this process (``TAG@…`` with a task tag); the start time guards against pid reuse."""
    pid = os.getpid()
    me = f"{socket.gethostname()}:{pid}:{_proc_start(pid) or 0}"
    return f"{tag}@{me}" if tag else me


def owner_tag(owner: str | None) -> str | None:
    """The executor's task tag of an owner string, or None."""
    return owner.split("@", 1)[0] if owner and "@" in owner else None


def owner_host(owner: str | None) -> str | None:
    """The host an owner ran on (hostnames contain neither ``@`` nor ``:``)."""
    return owner.rsplit("@", 1)[-1].split(":", 1)[0] if owner else None


def owner_alive(owner: str | None) -> bool | None:
    """True/False when the owner ran on this host, None when we cannot tell (another host)."""
    if not owner:
        return False
    try:
        host, pid, start = owner.rsplit("@", 1)[-1].rsplit(":", 2)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    if not Path("/proc").is_dir():
        try:
            os.kill(int(pid), 0)
            return True
        except OSError:
            return False
    return pid_alive(int(pid), start)


def is_claimable(row: Any, now: float | None = None, owner: str | None = None) -> bool:
    """Whether a run row should be (re-)run (by ``owner``, if given): not done, and not alive elsewhere."""
    if row.status == "done":
        return False
    if row.status != "running":
        return True
    tag = owner_tag(owner)
    if tag is not None and owner_tag(row.owner) == tag and row.owner != owner:
        # The same executor task, run again: Ray re-submits a task only after the
        # worker running it died, so the earlier attempt is gone even if its host
        # cannot be asked. (Were it alive after all, its finish() would be refused.)
        return True
    alive = owner_alive(row.owner)
    if alive is False:
        return True
    now = time.time() if now is None else now
    return (now - (row.heartbeat_at or 0.0)) > STALE_AFTER_S
