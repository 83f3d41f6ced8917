"""Standard streams that may be closed or go away while bench writes to them.

``bench run … >&-`` starts Python with file descriptor 1 closed: ``sys.stdout`` is None, and worse,
the next file the process opens (the SQLite store) takes descriptor 1, so that anything printed would
be written into it. :func:`ensure_standard_streams` puts ``/dev/null`` on every closed one first.
A reader that goes away (``bench recommend | head -1``) is handled where the command's output is
written: see ``bench.cli``.
"""

from __future__ import annotations

import os
import sys

_NAMES = ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w"))


def ensure_standard_streams() -> None:
    """Open ``/dev/null`` on each of descriptors 0, 1 and 2 that is closed, lowest first (so a
    descriptor opened for one never lands on another closed one), and give ``sys`` a stream on it."""
    for fd, name, mode in _NAMES:
        try:
            os.fstat(fd)
            closed = False
        except OSError:
            closed = True
        if closed:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if closed or getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, encoding="utf-8", errors="backslashreplace", closefd=False))


def silence_output() -> None:
    """Point descriptors 1 and 2 at ``/dev/null``: the reader has gone, and the interpreter's last
    flush must not fail again (Python's advice for SIGPIPE: docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)
