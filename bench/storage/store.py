"""The results store: one schema on SQLite (default) or PostgreSQL (clusters).

Tables
------
- ``suites``: each suite's validated spec and per-env metadata (thresholds, traits).
- ``suite_cells``: which runs (by cell key) belong to which suite, under which label.
- ``runs``: one row per cell key: status, attempt, owner, heartbeat, summary, metadata.
- ``episodes``, ``diagnostics``, ``evaluations``: what the run recorded.
- ``anchors`` (and the older ``env_anchors``): per env, the random-policy return and threshold that
  reports normalise scores with; written once, never overwritten.
- ``env_facts``: per env key, what a reader needs to know of the env without importing it (traits,
  horizon, spaces, threshold and its source, time scale, anchor), recorded by ``bench run``. Stores
  written before it have none; readers then use the suites' ``env_meta`` and the built-in registry.

Crash safety
------------
A run's row moves ``pending → running → done | failed`` (``interrupted`` when the
runner was stopped). Claiming a run bumps its ``attempt`` with a conditional
UPDATE, so two runners never both own it. Everything a run recorded is written
in **one transaction** together with its final status, and only if the writer
still owns that attempt: a crash at any moment leaves either no trace of the
attempt's data or the whole of it, never a half-run counted as done. A
``running`` row whose owner is dead (same host, process gone) or whose heartbeat
is stale is taken over by the next ``bench run``.

Owners
------
An owner is ``host:pid:start`` of the process that runs the attempt, optionally
prefixed with an executor's task tag, ``TAG@host:pid:start`` (the Ray executor
tags each task with a random id that its retries share). A task that an
executor re-submits after its worker died takes over its own earlier attempt at
once, even from another host where the dead pid cannot be checked.

Several writers
---------------
Any number of ``bench run`` processes and workers may share one store (on a
cluster: PostgreSQL). Schema creation and suite registration tolerate running
concurrently (``CREATE TABLE IF NOT EXISTS``, on PostgreSQL under an advisory
lock; ``INSERT … ON CONFLICT DO NOTHING``), and the conditional claim makes each
attempt belong to exactly one of them.

Opening
-------
``Store(url)`` is a writer: it creates the schema (SQLite: in WAL mode) when it
is missing. ``Store(url, readonly=True)`` is what the read-only commands
(status, report, recommend, export) use: it changes nothing, creates no table
and no file. On SQLite it opens the file with ``mode=ro``, or, when no ``-wal``
file lies beside it (no writer has the database open), as ``immutable=1``, so
that no ``-wal``/``-shm`` files are created either and a store on a read-only
mount can be read. On PostgreSQL its sessions are read-only transactions.

Whatever cannot be used is a :class:`StoreError` with one line: an in-memory
SQLite URL (every worker would get its own empty database), a server that does
not answer within :data:`CONNECT_TIMEOUT_S` seconds (PostgreSQL; a URL's own
``?connect_timeout=N`` wins), a file that is not SQLite, is truncated, or is a
SQLite database of something else. A file bench did not make is never written to.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

DEFAULT_URL = "sqlite:///results/bench.db"
#: A running row whose heartbeat is older than this is considered interrupted.
STALE_AFTER_S = 120.0
STATUSES = ("pending", "running", "done", "failed", "interrupted")
#: Seconds a PostgreSQL server may take to accept a connection before the store counts as
#: unreachable (libpq's ``connect_timeout``; a URL's own ``?connect_timeout=N`` wins).
CONNECT_TIMEOUT_S = 5
#: What the columns hold on both backends (PostgreSQL enforces them; SQLite would not).
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
NAME_MAX = 64  # suites.name
LABEL_MAX = 128  # suite_cells.label, runs.env_id
#: Episode clocks (``episodes.wall_s``, ``episodes.cpu_s``) are kept to the millisecond. Finer digits
#: are timer noise (a contended core moves them by far more), and they are most of a pack's bytes:
#: rounded, a pack stores them as delta-encoded integer milliseconds, read back exactly
#: (:mod:`bench.storage.packed`). Issue 13 measured 26 of the shipped reference's 41 MB in these two columns.
CLOCK_DECIMALS = 3


class StoreError(Exception):
    """A store that cannot be used (unreachable, misconfigured, corrupt, foreign). ``str(e)`` is one line."""


class SuiteConflict(StoreError):
    """A suite of this name is in the store with another grid (see :meth:`Store.register`)."""

metadata = sa.MetaData()

suites = sa.Table(
    "suites",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("path", sa.Text),
    sa.Column("spec", sa.Text, nullable=False),  # JSON of the validated suite
    sa.Column("env_meta", sa.Text, nullable=False),  # JSON: env id -> threshold, traits
    sa.Column("updated_at", sa.Float, nullable=False),
)

suite_cells = sa.Table(
    "suite_cells",
    metadata,
    sa.Column("suite", sa.String(64), primary_key=True),
    sa.Column("key", sa.String(40), primary_key=True),
    sa.Column("label", sa.String(128), nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("key", sa.String(40), primary_key=True),
    sa.Column("env_id", sa.String(128), nullable=False),
    sa.Column("algo", sa.String(32), nullable=False),
    sa.Column("impl", sa.String(32), nullable=False),
    sa.Column("seed", sa.Integer, nullable=False),
    sa.Column("timesteps", sa.BigInteger, nullable=False),
    sa.Column("threshold", sa.Float),
    sa.Column("window", sa.Integer, nullable=False),
    sa.Column("config", sa.Text, nullable=False),  # JSON: the cell identity, resolved hyperparameters included
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("attempt", sa.Integer, nullable=False, default=0),
    sa.Column("owner", sa.String(255)),
    sa.Column("error", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float),
    sa.Column("heartbeat_at", sa.Float),
    sa.Column("finished_at", sa.Float),
    sa.Column("total_steps", sa.BigInteger),
    sa.Column("episodes", sa.Integer),
    sa.Column("wall_s", sa.Float),
    sa.Column("cpu_s", sa.Float),
    sa.Column("steps_to_threshold", sa.BigInteger),
    sa.Column("seconds_to_threshold", sa.Float),
    sa.Column("final_return", sa.Float),
    sa.Column("auc", sa.Float),
    sa.Column("meta", sa.Text),  # JSON: versions, host, CPU, threads, git commit, times
)

episodes = sa.Table(
    "episodes",
    metadata,
    sa.Column("key", sa.String(40), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("step", sa.BigInteger, nullable=False),
    sa.Column("wall_s", sa.Float, nullable=False),
    sa.Column("ret", sa.Float, nullable=False),
    sa.Column("length", sa.Integer, nullable=False),
    # Training process CPU seconds at the episode's end: the time axis of the report's
    # time criteria (a single-threaded run's CPU seconds do not count other processes' time).
    # Added 2026-11: NULL in stores written before (:data:`MIGRATIONS`).
    sa.Column("cpu_s", sa.Float),
)

diagnostics = sa.Table(
    "diagnostics",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(40), nullable=False, index=True),
    sa.Column("step", sa.BigInteger, nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("value", sa.Float),
    # Updates this row is the mean of (diagnostics are stored downsampled, ``defaults.diag_points``);
    # NULL in stores written before, where every row was one update.
    sa.Column("n", sa.Integer),
)

evaluations = sa.Table(
    "evaluations",
    metadata,
    sa.Column("key", sa.String(40), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("step", sa.BigInteger, nullable=False),
    sa.Column("wall_s", sa.Float, nullable=False),
    sa.Column("mean_return", sa.Float, nullable=False),
    sa.Column("std_return", sa.Float, nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
)


env_anchors = sa.Table(
    "env_anchors",
    metadata,
    # Superseded by `anchors` (keyed by env alone, so two thresholds for one env
    # shared one scale). Kept for stores written before: its random returns are
    # reused where env, threshold and random-policy settings match.
    sa.Column("env_id", sa.String(128), primary_key=True),
    sa.Column("random_return", sa.Float, nullable=False),  # mean return of a uniform-random policy
    sa.Column("threshold", sa.Float, nullable=False),
    sa.Column("episodes", sa.Integer, nullable=False),
    sa.Column("seed", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)


anchors = sa.Table(
    "anchors",
    metadata,
    # Normalisation anchors for reports, keyed by everything that defines them (the
    # env, its threshold, and the random-policy settings): written once, never
    # overwritten, so adding runs or algorithms never changes anyone's scores, and
    # two suites with different thresholds for one env each get their own scale.
    sa.Column("env_id", sa.String(128), primary_key=True),
    sa.Column("threshold", sa.Float, primary_key=True),
    sa.Column("episodes", sa.Integer, primary_key=True),
    sa.Column("seed", sa.Integer, primary_key=True),
    sa.Column("random_return", sa.Float, nullable=False),  # mean return of a uniform-random policy
    sa.Column("created_at", sa.Float, nullable=False),
)

env_facts = sa.Table(
    "env_facts",
    metadata,
    # What a store says of each env it holds runs of, so that it is read, reported and exported
    # without importing the env's package (a user's ``module:EnvId``). Written by ``bench run``
    # (:meth:`Store.put_env_facts`); the latest writer's facts win (they describe the same env).
    sa.Column("env_id", sa.String(128), primary_key=True),
    sa.Column("facts", sa.Text, nullable=False),  # JSON: family, action, obs, reward, horizon, spaces, threshold, ...
    sa.Column("updated_at", sa.Float, nullable=False),
)

#: Columns added to existing tables after their first release: (table, column, SQL type).
#: A writable store adds any that are missing when it opens; readers tolerate their absence.
MIGRATIONS: tuple[tuple[str, str, str], ...] = (("episodes", "cpu_s", "FLOAT"), ("diagnostics", "n", "INTEGER"))


def _migrate(conn: Any) -> None:
    insp = sa.inspect(conn)
    for table, column, sql_type in MIGRATIONS:
        if column not in {c["name"] for c in insp.get_columns(table)}:
            conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}"))


def _migrations_due(engine: Engine) -> bool:
    with engine.connect() as c:
        insp = sa.inspect(c)
        return any(column not in {x["name"] for x in insp.get_columns(table)} for table, column, _ in MIGRATIONS)


def read_frame(conn: Any, stmt: Any):
    """``pd.read_sql(stmt, conn)``, the same frame, for the large reads (millions of episode rows):
    the driver's own cursor fills it, without SQLAlchemy's per-row objects, which cost more than the
    query itself (3M episodes of the shipped reference: 12 s through ``read_sql``, 6 s this way).

    Values stay bound parameters in the driver's own style (a suite name is typed by a user), and an
    ``IN`` list is expanded to one parameter per value (``render_postcompile``).
    """
    import pandas as pd

    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.params
    args = tuple(params[k] for k in compiled.positiontup) if compiled.positional else params
    cur = conn.connection.driver_connection.cursor()
    try:
        cur.execute(str(compiled), args)
        rows = cur.fetchall()
        names = [d[0] for d in cur.description]
    finally:
        cur.close()
    return pd.DataFrame.from_records(rows, columns=names, coerce_float=True)  # as read_sql builds it


def insert_frame(conn: Any, table: sa.Table, df: Any) -> None:
    """Insert the rows of ``df`` (columns named as ``table``'s, plain numbers and strings) into
    ``table``, skipping rows whose key is already there (ON CONFLICT DO NOTHING), NaN as NULL.

    The driver's own ``executemany`` takes the rows: SQLAlchemy's per-row parameter objects and
    pandas' per-value boxing cost four times the inserts themselves (loading the shipped
    reference's 3M episode rows: 85 s through ``execute(insert, records)``).
    """
    cols = list(df.columns)
    compiled = _insert(conn, table).on_conflict_do_nothing().compile(dialect=conn.dialect, column_keys=cols)
    values = []
    for col in cols:
        v = df[col].to_numpy(dtype=object)  # Python ints, floats and strs, which every driver binds
        v[df[col].isna().to_numpy()] = None
        values.append(v.tolist())
    if compiled.positional:
        order = [cols.index(k) for k in compiled.positiontup]
        rows: Any = list(zip(*(values[i] for i in order)))
    else:
        rows = [dict(zip(cols, r)) for r in zip(*values)]
    if not rows:
        return
    cur = conn.connection.driver_connection.cursor()
    try:
        cur.executemany(str(compiled), rows)
    finally:
        cur.close()


def has_column(conn: Any, table: str, column: str) -> bool:
    """Whether ``table`` has ``column`` (a store written before a migration may not)."""
    return column in {c["name"] for c in sa.inspect(conn).get_columns(table)}


@dataclass
class RunResult:
    """Everything one attempt recorded, written in one transaction."""

    summary: dict[str, Any]  # total_steps, episodes, wall_s, cpu_s, steps/seconds_to_threshold, final_return, auc
    episodes: dict[str, Sequence]  # columns step, wall_s, cpu_s, ret, length
    diagnostics: list[tuple]  # (step, name, value) or (step, name, mean, n): see record.downsample_diagnostics
    evaluations: list[tuple[int, float, float, float, int]]
    meta: dict[str, Any]


# --------------------------------------------------------------------------- #
# Owners: who is running a claimed run, and are they still alive?
# --------------------------------------------------------------------------- #
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


# --------------------------------------------------------------------------- #
# The store
# --------------------------------------------------------------------------- #
def _sqlite_path(url: str) -> Path | None:
    u = sa.engine.make_url(url)
    if u.get_backend_name() != "sqlite" or is_in_memory(url):
        return None
    return Path(u.database)


def is_in_memory(url: str) -> bool:
    """Whether a SQLite URL names an in-memory database (``sqlite://``, ``:memory:``, ``mode=memory``)."""
    u = sa.engine.make_url(url)
    if u.get_backend_name() != "sqlite":
        return False
    db = u.database or ""
    return not db or ":memory:" in db or "mode=memory" in str(url)


#: ``scheme://user:`` at the start of a URL: what follows, up to the URL's last ``@``, is its password.
_USER_PART = re.compile(r"([A-Za-z0-9+.\-]*://[^:/@]*:)(.*)", re.DOTALL)
#: A URL with a user part inside a line of text (it runs to the next white space).
_URL_IN_TEXT = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.\-]*)?://[^:/@\s]*:\S*")
MASK = "***"
#: Shorter passwords are not replaced wherever they appear (a password "a" would blank every "a" of a
#: line); the URL pattern still hides them inside URLs.
MIN_SECRET = 4


def hide_password(url: str) -> str:
    """``url`` with its password replaced by ``***``, whether or not SQLAlchemy can parse it.

    The password is everything between ``scheme://user:`` and the URL's *last* ``@``: SQLAlchemy ends it
    at the first, but a password typed with a raw ``@``, ``/`` or ``:`` in it is still a password. With no
    ``@`` at all, what follows ``user:`` is shown only if it is a port (digits) and a database name:
    ``postgresql://postgres:secret/db`` is a password whose host was left out more often than a port, and
    a password may hold ``/`` and ``:``, so all up to the last ``/`` is hidden.
    A string with an ``@`` but no ``://`` shows only what follows its last ``@``.
    """
    m = _USER_PART.match(url)
    if m is None:  # not even scheme:// to go by: hide all before the last '@' (a user part, if any)
        return MASK + url[url.rfind("@"):] if "@" in url and "://" not in url else url
    head, rest = m.groups()
    at = rest.rfind("@")
    if at >= 0:
        return head + MASK + rest[at:]
    if _shown_as_port(rest):
        return head + rest
    last = rest.rfind("/")
    return head + MASK + (rest[last:] if last >= 0 else "")


def _shown_as_port(rest: str) -> bool:
    """Whether what follows ``scheme://user:`` in a URL with no ``@`` is shown: nothing, or a port (digits)
    and a database name. Anything else may be a password whose ``@host`` was left out, and a password may
    hold ``/`` and ``:``, so all of it up to the last ``/`` is hidden."""
    port, _, tail = rest.partition("/")
    return not rest or port.isdigit() and "/" not in tail


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the password of every URL in it hidden (:func:`hide_password`), and every string of
    ``secrets`` (passwords the command was given) replaced wherever it appears: the one net every line
    bench prints passes through, for messages that quote a URL in a form :func:`hide_password` cannot see
    whole (escaped, or cut at a space)."""
    text = _URL_IN_TEXT.sub(lambda m: hide_password(m.group(0)), text)
    for s in secrets:
        if len(s) >= MIN_SECRET:
            text = text.replace(s, MASK)
    return text


def url_secret(url: str) -> str | None:
    """The password part of ``url`` as :func:`hide_password` reads it (None: there is none)."""
    m = _USER_PART.match(url)
    if m is None:
        return None
    rest = m.group(2)
    at = rest.rfind("@")
    if at >= 0:
        secret = rest[:at]
    elif _shown_as_port(rest):
        return None
    else:
        secret = rest[:rest.rfind("/")] if "/" in rest else rest
    return secret or None


def describe_url(url: str) -> str:
    """The URL with any password hidden, for messages; any string, parsed or not."""
    try:
        shown = sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: hide what looks like a password
        return hide_password(url)
    return hide_password(shown) if url_secret(url) and url_secret(url) in shown else shown


def normalise_url(url: str) -> str:
    """Accept ``postgresql://`` and use the psycopg 3 driver the project installs."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


#: What a SQLite URL's path may not hold: SQLAlchemy reads ``?`` as the start of query parameters (the
#: file would be named by what comes before it) and decodes ``%XX`` (``%20`` names another folder).
_SQLITE_RESERVED = {"?": "a '?' (SQLAlchemy would take what follows as query parameters, which bench does not "
                         "allow for SQLite stores, and name the file by what comes before it)",
                    "%": "a '%' (SQLAlchemy would decode %XX escapes, so the store would land in another file)"}


def check_url(url: str) -> str:
    """The normalised URL of a usable store, or :class:`StoreError` (one line, password hidden) saying why not.

    A SQLite path is taken literally or refused: one holding ``?`` or ``%`` is refused
    (:data:`_SQLITE_RESERVED`), never silently read as another path.
    """
    url = normalise_url(url)
    shown = hide_password(url)
    try:
        u = sa.engine.make_url(url)
        backend = u.get_backend_name()
    except Exception:  # noqa: BLE001 - any parse failure is the same user error
        backend = None
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(f"{shown!r} is not a usable store URL; allowed: sqlite:///PATH or postgresql://USER@HOST:PORT/DB")
    if "@" in (url_secret(url) or ""):
        # SQLAlchemy ends the password at the first '@' and takes the rest for the host, which its errors then show.
        raise StoreError(f"{shown!r} has more than one '@' before its host; allowed: a password with each '@' "
                         "written as %40")
    if is_in_memory(url):
        raise StoreError(
            f"{shown!r} is an in-memory SQLite database: every worker process would get its own empty one and "
            "nothing would be kept; allowed: a file, sqlite:///PATH, or postgresql://USER@HOST:PORT/DB"
        )
    if backend == "sqlite" and (u.username or u.password or u.host or u.port):
        raise StoreError(f"{shown!r} names a user, password or host, which a SQLite file has none of; allowed: "
                         "sqlite:///PATH (three slashes, then the path)")
    if backend == "postgresql" and "connect_timeout" in u.query:
        value = u.query["connect_timeout"]
        if not (isinstance(value, str) and value.isascii() and value.isdigit()):
            raise StoreError(f"{shown!r} has connect_timeout={value!r}; allowed: one whole number of seconds, "
                             "e.g. ?connect_timeout=10")
    if backend == "sqlite":
        for ch, why in _SQLITE_RESERVED.items():
            if ch in url:
                raise StoreError(f"{shown!r} has {why}; allowed: sqlite:///PATH with a path that has no '?' or '%' "
                                 "(rename the folder or file)")
    return url


def engine_kwargs(url: str, *, readonly: bool = False) -> dict[str, Any]:
    """``create_engine`` arguments for a store URL (also Optuna's storage on it): a connect
    timeout on PostgreSQL, read-only sessions when asked; a busy timeout on SQLite."""
    u = sa.engine.make_url(url)
    if u.get_backend_name() == "sqlite":
        return {"connect_args": {"timeout": 60}}
    args: dict[str, Any] = {"connect_timeout": int(u.query.get("connect_timeout", CONNECT_TIMEOUT_S))}
    if readonly:
        args["options"] = "-c default_transaction_read_only=on"
    return {"connect_args": args, "pool_pre_ping": True}


def readonly_engine_args(url: str) -> tuple[str, dict[str, Any]]:
    """``(url, create_engine kwargs)`` that read a store without changing anything beside it.

    SQLite: ``mode=ro`` when a ``-wal`` file lies beside the database (a writer has it
    open: share its WAL index, read-only), else ``immutable=1``: no writer has it open,
    so it is read as it is on disk and no ``-wal``/``-shm`` files are created (a
    read-only mount could not hold them). A writer that starts during such a read is
    not seen by it. PostgreSQL: read-only transactions, with the connect timeout.
    """
    path = _sqlite_path(url)
    if path is None:
        return url, engine_kwargs(url, readonly=True)
    wal = path.with_name(path.name + "-wal").exists()
    uri = path.absolute().as_uri() + ("?mode=ro" if wal else "?immutable=1")
    return "sqlite://", {
        "poolclass": sa.pool.NullPool,
        "creator": lambda: sqlite3.connect(uri, uri=True, timeout=60, check_same_thread=False),
    }


def _one_line(e: BaseException) -> str:
    orig = getattr(e, "orig", None) or e
    text = " ".join(str(orig).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _check_sqlite_file(path: Path) -> bool:
    """Whether ``path`` holds a SQLite database (False: no file, or an empty one); StoreError when it
    is a directory, unreadable, not SQLite, or truncated or otherwise corrupt.

    The file is read through SQLite only, never through a file descriptor of bench's own: closing any
    descriptor of a file drops every POSIX lock the process holds on it, SQLite's included ("How To Corrupt
    An SQLite Database File", https://www.sqlite.org/howtocorrupt.html, section 2.2). A ``bench run`` that
    opened a second :class:`Store` while its first held a connection (as its pool did for each worker that
    died) lost its lock on the database that way; the next worker to close its connection cleanly (a plugin's
    ``sys.exit()``) then took itself for the last connection, checkpointed and deleted the WAL under the
    parent, and the store was corrupt ("database disk image is malformed", then "disk I/O error"). SQLite
    itself keeps a descriptor open while another connection of the process holds a lock on the file.
    """
    if not path.exists():
        return False
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a SQLite store file")
    try:
        size = path.stat().st_size
    except OSError as e:
        raise StoreError(f"cannot read the store {path}: {e.strerror or e}") from None
    if size == 0:
        return False  # SQLite's own empty database: nothing there yet
    if not os.access(path, os.R_OK):
        raise StoreError(f"cannot read the store {path}: permission denied")
    _, kwargs = readonly_engine_args(f"sqlite:///{path}")
    try:
        con = kwargs["creator"]()
        try:
            # Reads page 1: SQLite checks the header (magic, sizes) and that the file holds as many pages as
            # the header says (lockBtree), and parses the schema.
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            con.close()
    except sqlite3.Error as e:
        code = getattr(e, "sqlite_errorname", "")
        if code == "SQLITE_NOTADB":
            raise StoreError(f"{path} is not a SQLite database, so not a bench results store; bench leaves it as it "
                             "is (give --store another path)") from None
        if code == "SQLITE_CORRUPT":
            raise StoreError(f"{path} is truncated or corrupt (SQLite: {_one_line(e)}; the file has {size:,} bytes); "
                             "bench leaves it as it is") from None
        raise StoreError(f"cannot read the store {path}: {_one_line(e)}") from None
    return True


def _tables(conn: Any) -> set[str]:
    return set(sa.inspect(conn).get_table_names())


def _foreign(path_or_url: Any, tables: set[str]) -> StoreError:
    shown = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
    return StoreError(f"{path_or_url} is a database of something else, not a bench results store (its tables: {shown}); "
                      "bench will not write to it (give --store another path)")


def _refuse_foreign(path: Path, tables: set[str]) -> None:
    """StoreError unless the tables are none, or bench's (or its tuner's, Optuna's)."""
    if tables and not tables & (set(metadata.tables) | {"studies", "version_info", "alembic_version"}):
        raise _foreign(path, tables)


def _sqlite_tables(path: Path) -> set[str]:
    """The tables of a SQLite file, read without changing it or leaving files beside it."""
    _, kwargs = readonly_engine_args(f"sqlite:///{path}")
    try:
        con = kwargs["creator"]()
        try:
            return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.Error as e:
        raise StoreError(f"{path} cannot be read as a SQLite database ({_one_line(e)}); bench leaves it as it is") from None


def store_exists(url: str) -> bool:
    """Whether a store is there to read, without creating anything.

    False when there is none yet (no file, an empty file, a database without bench's
    tables); :class:`StoreError` when it cannot be reached, is not SQLite, is corrupt,
    or is another program's database.
    """
    url = check_url(url)
    path = _sqlite_path(url)
    if path is not None and not _check_sqlite_file(path):
        return False
    try:
        st = Store(url, readonly=True)
    except StoreMissing:
        return False
    st.dispose()
    return True


class StoreMissing(StoreError):
    """There is no results store at the URL yet (read-only opening only)."""


#: Any fixed 64-bit number: the PostgreSQL advisory lock taken while creating the schema.
_SCHEMA_LOCK = 0x62656E6368  # "bench"


def _insert(conn: Any, table: sa.Table):
    """INSERT with ON CONFLICT support, in the connection's dialect (SQLite or PostgreSQL)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table)


def create_schema(conn: Any) -> None:
    """Create bench's tables and indexes that are missing; safe when several processes do it at once.

    ``IF NOT EXISTS`` on every statement: ``metadata.create_all`` checks first and
    creates after, so two processes on a fresh SQLite file could both find a table
    missing and the second CREATE failed ("table suites already exists").
    """
    from sqlalchemy.schema import CreateIndex, CreateTable

    if conn.dialect.name == "postgresql":
        # Concurrent CREATE TABLEs collide in PostgreSQL's catalog (a unique
        # violation on pg_type) even with IF NOT EXISTS: one creator at a time.
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
    else:
        # One transaction holding the write lock (Python's sqlite3 would run each DDL
        # statement on its own): other openers see no tables or all of them.
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    for table in metadata.sorted_tables:
        conn.execute(CreateTable(table, if_not_exists=True))
        for index in table.indexes:
            conn.execute(CreateIndex(index, if_not_exists=True))


def _write_run_data(c: Any, key: str, result: RunResult) -> None:
    """Replace a run's episodes, diagnostics and evaluations with ``result``'s (inside the caller's transaction)."""
    for t in (episodes, diagnostics, evaluations):
        c.execute(sa.delete(t).where(t.c.key == key))
    ep = result.episodes
    cpu = ep.get("cpu_s")
    if cpu is None:  # a writer that does not measure per-episode CPU seconds
        cpu = [None] * len(ep["ret"])
    if len(ep["ret"]):
        c.execute(
            episodes.insert(),
            [
                dict(key=key, idx=i, step=int(s), wall_s=round(float(w), CLOCK_DECIMALS),
                     cpu_s=None if u is None else round(float(u), CLOCK_DECIMALS), ret=float(r), length=int(n))
                for i, (s, w, u, r, n) in enumerate(zip(ep["step"], ep["wall_s"], cpu, ep["ret"], ep["length"]))
            ],
        )
    if result.diagnostics:
        c.execute(
            diagnostics.insert(),
            [dict(key=key, step=int(d[0]), name=d[1], value=_finite_or_none(d[2]), n=int(d[3]) if len(d) > 3 else 1)
             for d in result.diagnostics],
        )
    if result.evaluations:
        c.execute(
            evaluations.insert(),
            [
                dict(key=key, idx=i, step=s, wall_s=w, mean_return=m, std_return=sd, n=n)
                for i, (s, w, m, sd, n) in enumerate(result.evaluations)
            ],
        )


class Store:
    """A results store at a SQLAlchemy URL.

    :param readonly: open for reading only (see the module docstring); raises
        :class:`StoreMissing` when there is no store at ``url``. Otherwise the schema
        is created when missing.
    :raises StoreError: the URL is in-memory SQLite, the server does not answer, the
        file is not a bench store (one line, see the module docstring).
    """

    def __init__(self, url: str = DEFAULT_URL, *, readonly: bool = False):
        self.url = check_url(url)
        self.readonly = readonly
        where = describe_url(self.url)
        path = _sqlite_path(self.url)
        if path is not None:
            exists = _check_sqlite_file(path)
            if readonly:
                if not exists:
                    raise StoreMissing(f"no results store at {where}")
                ro_url, kw = readonly_engine_args(self.url)
                self.engine: Engine = sa.create_engine(ro_url, **kw)
            else:
                if exists:  # looked at read-only first: the WAL switch below would already change another program's file
                    _refuse_foreign(path, _sqlite_tables(path))
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise StoreError(f"cannot create the store's folder {path.parent}: {e.strerror or e}") from None
                self.engine = sa.create_engine(self.url, **engine_kwargs(self.url))

                @sa.event.listens_for(self.engine, "connect")
                def _pragmas(dbapi_conn, _record):  # pragma: no cover - exercised through every SQLite test
                    cur = dbapi_conn.cursor()
                    # WAL lets readers (bench status, reports) work while workers write;
                    # FULL sync keeps committed runs through a power loss.
                    cur.execute("PRAGMA busy_timeout=60000")
                    cur.execute("PRAGMA journal_mode=WAL")
                    cur.execute("PRAGMA synchronous=FULL")
                    cur.close()
        else:
            self.engine = sa.create_engine(self.url, **engine_kwargs(self.url, readonly=readonly))
        deadline = time.monotonic() + 60
        while True:
            try:
                self._open(path, where)
                return
            except StoreError:
                self.engine.dispose()
                raise
            except sa.exc.OperationalError as e:
                # Switching a fresh SQLite file to WAL, or two first CREATEs, can answer "database is
                # locked" at once rather than through the busy timeout: the other opener is nearly done.
                if path is not None and "locked" in str(e) and time.monotonic() < deadline:
                    time.sleep(0.05 + 0.1 * random.random())
                    continue
                self.engine.dispose()
                raise StoreError(f"cannot open the results store at {where}: {_one_line(e)}") from None
            except sa.exc.SQLAlchemyError as e:
                self.engine.dispose()
                raise StoreError(f"cannot open the results store at {where}: {_one_line(e)}") from None

    def _open(self, path: Path | None, where: str) -> None:
        with self.engine.connect() as c:
            tables = _tables(c)
        if "runs" not in tables:
            if path is not None:
                _refuse_foreign(path, tables)  # SQLite: another program's file is never written to
            if self.readonly:
                raise StoreMissing(f"no results store at {where}")
            with self.engine.begin() as c:
                create_schema(c)
        elif not self.readonly and (set(metadata.tables) - tables or _migrations_due(self.engine)):
            # A store from an earlier version: its missing tables and columns are added (never by a reader).
            with self.engine.begin() as c:
                create_schema(c)
                _migrate(c)

    def dispose(self) -> None:
        self.engine.dispose()

    # -- suites and cells ----------------------------------------------------
    def register(self, name: str, path: str, spec: dict, env_meta: dict, cells: Iterable[Any], *,
                 replace: bool = False) -> None:
        """Record the suite and make sure every cell has a run row (pending if new).

        A suite of the same name already in the store with another grid (another set
        of cells or labels, e.g. a second file with the same ``name:``) is refused with
        :class:`SuiteConflict`, unless ``replace``: then this grid replaces the stored
        one (the runs themselves are kept; they are shared by key).
        """
        now = time.time()
        cells = list(cells)
        links = sorted({x.key: x.label for x in cells}.items())
        with self.engine.begin() as c:
            row = dict(path=path, spec=json.dumps(spec), env_meta=json.dumps(env_meta), updated_at=now)
            before = c.execute(sa.select(suites.c.path).where(suites.c.name == name)).first()
            c.execute(_insert(c, suites).values(name=name, **row).on_conflict_do_update(index_elements=["name"], set_=row))
            if before is not None and not replace:
                # Read after the upsert, which holds the suite's row: a concurrent registration
                # of the same name has committed its grid by now.
                had = sorted((r.key, r.label) for r in c.execute(
                    sa.select(suite_cells.c.key, suite_cells.c.label).where(suite_cells.c.suite == name)))
                if had and had != links:
                    raise SuiteConflict(
                        f"suite {name!r} is already in the store with another grid ({len(had)} cells, from "
                        f"{before.path}; {path} has {len(links)}, {len(set(had) ^ set(links))} differ); give this "
                        "suite its own name:, or pass --replace to replace the stored grid")
            new = [
                dict(
                    key=x.key, env_id=x.env_id, algo=x.algo, impl=x.impl, seed=x.seed, timesteps=x.timesteps,
                    threshold=x.threshold, window=x.window, config=json.dumps(x.identity(), sort_keys=True),
                    status="pending", attempt=0, created_at=now,
                )
                for _, x in sorted({x.key: x for x in cells}.items())
            ]
            if new:
                c.execute(_insert(c, runs).on_conflict_do_nothing(index_elements=["key"]), new)
            c.execute(sa.delete(suite_cells).where(suite_cells.c.suite == name))
            if links:
                c.execute(
                    _insert(c, suite_cells).on_conflict_do_nothing(index_elements=["suite", "key"]),
                    [dict(suite=name, key=k, label=v) for k, v in links],
                )

    def rows(self, keys: Sequence[str]) -> dict[str, Any]:
        """Run rows by key (only those that exist)."""
        out: dict[str, Any] = {}
        with self.engine.connect() as c:
            for i in range(0, len(keys), 500):
                chunk = list(keys[i : i + 500])
                for r in c.execute(sa.select(runs).where(runs.c.key.in_(chunk))):
                    out[r.key] = r
        return out

    # -- the life of one attempt ----------------------------------------------
    def claim(self, key: str, owner: str) -> int | None:
        """Take a run for ``owner`` if it should be run; returns the new attempt or None."""
        now = time.time()
        with self.engine.begin() as c:
            row = c.execute(sa.select(runs).where(runs.c.key == key)).first()
            if row is None or not is_claimable(row, now, owner):
                return None
            res = c.execute(
                runs.update()
                .where(runs.c.key == key, runs.c.attempt == row.attempt, runs.c.status == row.status)
                .values(
                    status="running", attempt=row.attempt + 1, owner=owner, error=None,
                    started_at=now, heartbeat_at=now, finished_at=None, total_steps=None, cpu_s=None,
                )
            )
            return row.attempt + 1 if res.rowcount == 1 else None

    def heartbeat(self, key: str, attempt: int, steps: int | None = None, cpu_s: float | None = None,
                  stalled: str | None = None) -> None:
        """The attempt is alive; with ``steps``, also how far it is: a running run's ``total_steps`` is
        its env steps so far (``bench status`` and ``bench run``'s progress read it; an interrupted run
        keeps the last count), and ``finish`` writes the final one. ``cpu_s`` likewise: its training
        CPU seconds so far, how far a run with an equal-compute budget (``cpu_seconds``) is.

        With ``steps``, ``stalled`` is the run's ``error`` while it runs: a note that it has made no progress
        for a while (:class:`bench.run.progress.StallWatch`), or None, which clears it once it moves again."""
        values: dict[str, Any] = {"heartbeat_at": time.time()}
        if steps is not None:
            values["total_steps"] = int(steps)
            values["error"] = stalled
        if cpu_s is not None:
            values["cpu_s"] = float(cpu_s)
        with self.engine.begin() as c:
            c.execute(
                runs.update()
                .where(runs.c.key == key, runs.c.attempt == attempt, runs.c.status == "running")
                .values(**values)
            )

    def finish(self, key: str, attempt: int, status: str, result: RunResult, error: str | None = None) -> bool:
        """Write an attempt's data and final status in one transaction.

        Returns False (and writes nothing) if the attempt no longer owns the run.
        """
        assert status in ("done", "failed")
        with self.engine.begin() as c:
            res = c.execute(
                runs.update()
                .where(runs.c.key == key, runs.c.attempt == attempt, runs.c.status == "running")
                .values(status=status, error=error, finished_at=time.time(), meta=json.dumps(result.meta, default=str),
                        **result.summary)
            )
            if res.rowcount != 1:
                return False  # someone else owns the run now; this attempt changed nothing
            _write_run_data(c, key, result)
        return True

    def replace_done(self, key: str, attempt: int, result: RunResult, started_at: float) -> bool:
        """Replace a done run's data with a new measurement of the same cell, in one transaction
        (``bench run --remeasure``). The done run stays as it is until this commits, so a
        re-measurement that dies loses nothing. Returns False (and writes nothing) unless the run is
        still done at ``attempt``: another runner replaced or re-ran it meanwhile."""
        with self.engine.begin() as c:
            res = c.execute(
                runs.update()
                .where(runs.c.key == key, runs.c.attempt == attempt, runs.c.status == "done")
                .values(attempt=attempt + 1, error=None, started_at=started_at, finished_at=time.time(),
                        meta=json.dumps(result.meta, default=str), **result.summary)
            )
            if res.rowcount != 1:
                return False
            _write_run_data(c, key, result)
        return True

    def release(self, owner: str, status: str = "interrupted", error: str | None = None) -> int:
        """Mark every run this owner still has running as interrupted (or failed)."""
        with self.engine.begin() as c:
            res = c.execute(
                runs.update()
                .where(runs.c.owner == owner, runs.c.status == "running")
                .values(status=status, error=error, finished_at=time.time())
            )
            return res.rowcount

    # -- reading -------------------------------------------------------------
    def suite_names(self) -> list[str]:
        with self.engine.connect() as c:
            return [r.name for r in c.execute(sa.select(suites.c.name).order_by(suites.c.name))]

    def suite_env_meta(self, name: str) -> dict[str, dict[str, Any]] | None:
        """The registered suite's env facts as validated (env key → threshold, traits, ...), ``None`` if absent."""
        with self.engine.connect() as c:
            raw = c.execute(sa.select(suites.c.env_meta).where(suites.c.name == name)).scalar_one_or_none()
        return None if raw is None else json.loads(raw)

    def suite_specs(self) -> dict[str, dict[str, Any]]:
        """Suite name → its stored spec (the validated suite, as JSON)."""
        with self.engine.connect() as c:
            return {r.name: json.loads(r.spec) for r in c.execute(sa.select(suites.c.name, suites.c.spec))}

    def suite_env_metas(self, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Each named suite's ``env_meta`` (suite name → env key → facts), in the order of ``names``."""
        names = list(names)
        with self.engine.connect() as c:
            got = {r.name: json.loads(r.env_meta)
                   for r in c.execute(sa.select(suites.c.name, suites.c.env_meta).where(suites.c.name.in_(names)))}
        return {n: got[n] for n in names if n in got}

    def episodes_for(self, keys: Sequence[str]):
        """``key, step, wall_s, cpu_s, ret`` of the runs ``keys``, by key and episode (``cpu_s`` NULL in a
        store written before per-episode CPU seconds were)."""
        import pandas as pd

        parts, keys = [], sorted(keys)  # chunks in key order: the whole frame is ordered by key, as a pack's read
        with self.engine.connect() as c:
            cpu_col = episodes.c.cpu_s if has_column(c, "episodes", "cpu_s") else sa.null().label("cpu_s")
            for i in range(0, len(keys), 500):  # bounded IN lists (SQLite's variable limit)
                parts.append(read_frame(c, sa.select(episodes.c.key, episodes.c.step, episodes.c.wall_s, cpu_col,
                                                     episodes.c.ret)
                                        .where(episodes.c.key.in_(keys[i:i + 500]))
                                        .order_by(episodes.c.key, episodes.c.idx)))
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["key", "step", "wall_s", "cpu_s", "ret"])

    def diagnostics_for(self, keys: Sequence[str], names: Sequence[str]):
        """``key, step, name, value`` of the runs ``keys`` for the diagnostics ``names``, in stored order."""
        import pandas as pd

        parts, keys = [], sorted(keys)  # as episodes_for
        with self.engine.connect() as c:
            for i in range(0, len(keys) if names else 0, 500):
                parts.append(read_frame(c, sa.select(diagnostics.c.key, diagnostics.c.step, diagnostics.c.name,
                                                     diagnostics.c.value)
                                        .where(diagnostics.c.key.in_(keys[i:i + 500]), diagnostics.c.name.in_(list(names)))
                                        .order_by(diagnostics.c.key, diagnostics.c.id)))
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["key", "step", "name", "value"])

    def has_studies(self) -> bool:
        """Whether the store holds Optuna's tables (``bench tune`` keeps its studies beside the runs)."""
        try:
            with self.engine.connect() as c:
                return sa.inspect(c).has_table("studies")
        except sa.exc.SQLAlchemyError:
            return False

    def studies_url(self) -> str:
        """Where Optuna reads this store's studies: the store itself."""
        return self.url

    def runs_frame(self, suite: str | None = None):
        """One row per (suite, run): the export table."""
        import pandas as pd

        q = (
            sa.select(
                suite_cells.c.suite, runs.c.env_id.label("env"), runs.c.algo, runs.c.impl, suite_cells.c.label,
                runs.c.seed, runs.c.status, runs.c.attempt, runs.c.timesteps, runs.c.threshold, runs.c.window,
                runs.c.total_steps, runs.c.episodes, runs.c.wall_s, runs.c.cpu_s, runs.c.steps_to_threshold,
                runs.c.seconds_to_threshold, runs.c.final_return, runs.c.auc, runs.c.error, runs.c.key,
                runs.c.started_at, runs.c.finished_at, runs.c.config, runs.c.meta,
            )
            .select_from(suite_cells.join(runs, suite_cells.c.key == runs.c.key))
            .order_by(suite_cells.c.suite, runs.c.env_id, suite_cells.c.label, runs.c.seed)
        )
        if suite is not None:
            q = q.where(suite_cells.c.suite == suite)
        with self.engine.connect() as c:
            return pd.read_sql(q, c)

    def episodes_frame(self, suite: str | None = None):
        """One row per (suite, run, finished training episode): the run's identity (suite, env, algo, impl,
        label, seed, status, key), then the episode's ``idx, step, wall_s, cpu_s, ret, length``, in order.
        ``cpu_s`` is empty for stores written before per-episode CPU seconds were recorded."""
        return self._per_run_frame(episodes, ("idx", "step", "wall_s", "cpu_s", "ret", "length"), episodes.c.idx, suite)

    def diagnostics_frame(self, suite: str | None = None):
        """One row per (suite, run, stored diagnostic point): the run's identity, then ``step, name, value, n``
        (``n``: the updates the stored value is the mean of; empty in stores written before downsampling)."""
        return self._per_run_frame(diagnostics, ("step", "name", "value", "n"), diagnostics.c.id, suite)

    def _per_run_frame(self, table: sa.Table, columns: Sequence[str], order: Any, suite: str | None):
        import pandas as pd

        with self.engine.connect() as c:
            cols = [table.c[k] if has_column(c, table.name, k) else sa.null().label(k) for k in columns]
            q = (
                sa.select(suite_cells.c.suite, runs.c.env_id.label("env"), runs.c.algo, runs.c.impl,
                          suite_cells.c.label, runs.c.seed, runs.c.status, runs.c.key, *cols)
                .select_from(suite_cells.join(runs, suite_cells.c.key == runs.c.key)
                             .join(table, table.c.key == runs.c.key))
                .order_by(suite_cells.c.suite, runs.c.env_id, suite_cells.c.label, runs.c.seed, order)
            )
            if suite is not None:
                q = q.where(suite_cells.c.suite == suite)
            return read_frame(c, q)

    def anchors(self) -> dict[tuple[str, float, int, int], Any]:
        """Normalisation anchor rows by ``(env_id, threshold, episodes, seed)`` (see :mod:`bench.analysis.anchors`),
        with the legacy per-env rows (table ``env_anchors``) where no new row has the same key."""
        with self.engine.connect() as c:
            have = _tables(c)  # a store read-only from before either table existed may lack it
            out = {(r.env_id, r.threshold, r.episodes, r.seed): r for r in c.execute(sa.select(anchors))} \
                if "anchors" in have else {}
            legacy = {(r.env_id, r.threshold, r.episodes, r.seed): r for r in c.execute(sa.select(env_anchors))} \
                if "env_anchors" in have else {}
        return {**legacy, **out}

    def env_facts(self) -> dict[str, dict[str, Any]]:
        """Env key → its recorded facts (table ``env_facts``); empty for a store written before it."""
        with self.engine.connect() as c:
            if "env_facts" not in _tables(c):
                return {}
            return {r.env_id: json.loads(r.facts) for r in c.execute(sa.select(env_facts))}

    def put_env_facts(self, facts: dict[str, dict[str, Any]]) -> None:
        """Record (or replace) what is known of each env key in ``facts`` (JSON-able values)."""
        if not facts:
            return
        now = time.time()
        with self.engine.begin() as c:
            for env_id, f in facts.items():
                row = dict(facts=json.dumps(f, sort_keys=True, default=str), updated_at=now)
                c.execute(_insert(c, env_facts).values(env_id=env_id, **row)
                          .on_conflict_do_update(index_elements=["env_id"], set_=row))

    def put_anchor(self, env_id: str, random_return: float, threshold: float, episodes: int, seed: int) -> bool:
        """Store an anchor unless one with the same key is there (they are never overwritten).

        Returns True if this call wrote it, False if it was there (a concurrent writer may have won)
        or could not be written: a read-only store writes it through a short-lived writer, and
        where that fails (a read-only mount) it is not stored.
        """
        if self.readonly:
            try:
                writer = Store(self.url)
            except StoreError:
                return False
            try:
                return writer.put_anchor(env_id, random_return, threshold, episodes, seed)
            except sa.exc.OperationalError:
                return False
            finally:
                writer.dispose()
        key = dict(env_id=env_id, threshold=float(threshold), episodes=int(episodes), seed=int(seed))
        try:
            with self.engine.begin() as c:
                if c.execute(sa.select(anchors.c.env_id).where(*(anchors.c[k] == v for k, v in key.items()))).first():
                    return False
                c.execute(anchors.insert().values(**key, random_return=float(random_return), created_at=time.time()))
            return True
        except sa.exc.IntegrityError:
            return False

    def episodes_of(self, key: str):
        import pandas as pd

        with self.engine.connect() as c:
            return pd.read_sql(sa.select(episodes).where(episodes.c.key == key).order_by(episodes.c.idx), c)

    def diagnostics_of(self, key: str):
        import pandas as pd

        with self.engine.connect() as c:
            return pd.read_sql(sa.select(diagnostics).where(diagnostics.c.key == key).order_by(diagnostics.c.id), c)

    def evaluations_of(self, key: str):
        import pandas as pd

        with self.engine.connect() as c:
            return pd.read_sql(sa.select(evaluations).where(evaluations.c.key == key).order_by(evaluations.c.idx), c)

    def last_evaluations(self, keys: list[str]) -> dict[str, float]:
        """Run key → the mean return of its last periodic evaluation, for those of ``keys`` that have one."""
        out: dict[str, float] = {}
        with self.engine.connect() as c:
            for i in range(0, len(keys), 500):  # bounded IN lists (SQLite's variable limit)
                chunk = keys[i:i + 500]
                last = (sa.select(evaluations.c.key, sa.func.max(evaluations.c.idx).label("idx"))
                        .where(evaluations.c.key.in_(chunk)).group_by(evaluations.c.key).subquery())
                q = sa.select(evaluations.c.key, evaluations.c.mean_return).join(
                    last, sa.and_(evaluations.c.key == last.c.key, evaluations.c.idx == last.c.idx))
                out.update({k: float(v) for k, v in c.execute(q)})
        return out


def _finite_or_none(v: float) -> float | None:
    v = float(v)
    return v if v == v and v not in (float("inf"), float("-inf")) else None
