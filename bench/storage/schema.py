"""The results store's schema: its tables (SQLite and PostgreSQL alike), their limits, migrations, the
errors a store raises, and how one attempt's data is written.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

STATUSES = ("pending", "running", "done", "failed", "interrupted")
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


class StoreMissing(StoreError):
    """There is no results store at the URL yet (read-only opening only)."""


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


def migrate(conn: Any) -> None:
    insp = sa.inspect(conn)
    for table, column, sql_type in MIGRATIONS:
        if column not in {c["name"] for c in insp.get_columns(table)}:
            conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}"))


def migrations_due(engine: Engine) -> bool:
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
    compiled = dialect_insert(conn, table).on_conflict_do_nothing().compile(dialect=conn.dialect, column_keys=cols)
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


#: Any fixed 64-bit number: the PostgreSQL advisory lock taken while creating the schema.
_SCHEMA_LOCK = 0x62656E6368  # "bench"


def dialect_insert(conn: Any, table: sa.Table):
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


def write_run_data(c: Any, key: str, result: RunResult) -> None:
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
            [dict(key=key, step=int(d[0]), name=d[1], value=finite_or_none(d[2]), n=int(d[3]) if len(d) > 3 else 1)
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


def finite_or_none(v: float) -> float | None:
    v = float(v)
    return v if v == v and v not in (float("inf"), float("-inf")) else None
