"""The results store: one schema on SQLite (default) or PostgreSQL (clusters).

Its tables are :mod:`bench.storage.schema`'s; its URLs :mod:`bench.storage.urls`'s; its owners
:mod:`bench.storage.owners`'s.

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
``Store(store_url)`` is a writer: it creates the schema (SQLite: in WAL mode) when it
is missing. ``Store(store_url, readonly=True)`` is what the read-only commands
(status, report, recommend, export) use: it changes nothing, creates no table
and no file. On SQLite it opens the file with ``mode=ro``, or, when no ``-wal``
file lies beside it (no writer has the database open), as ``immutable=1``, so
that no ``-wal``/``-shm`` files are created either and a store on a read-only
mount can be read. On PostgreSQL its sessions are read-only transactions.

Dropped connections
-------------------
A connection that drops while a run's row is written (a PostgreSQL server restarted or failed over, a proxy or
firewall cutting idle links, ``pg_terminate_backend``) is retried with a bounded backoff
(:data:`RETRY_DELAYS_S`) before the error reaches the cell: every write is one transaction, which the server
rolls back when its connection dies, so a retry writes it once. Where the connection died during ``COMMIT``
itself, after the server had committed, the retry finds the attempt already finished (or re-measured) as it
would have written it and writes nothing again. Other errors are not retried.

Whatever cannot be used is a :class:`StoreError` with one line: an in-memory
SQLite URL (every worker would get its own empty database), a server that does
not answer within :data:`CONNECT_TIMEOUT_S` seconds (PostgreSQL; a URL's own
``?connect_timeout=N`` wins), a file that is not SQLite, is truncated, or is a
SQLite database of something else. A file bench did not make is never written to.
"""
from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from bench.storage.owners import is_claimable
from bench.storage.schema import (RunResult, StoreError, StoreMissing, SuiteConflict, anchors, create_schema, diagnostics,
                                  dialect_insert, env_anchors, env_facts, episodes, evaluations, has_column, metadata,
                                  migrate, migrations_due, read_frame, runs, suite_cells, suites, write_run_data)
from bench.storage.urls import (DEFAULT_URL, StoreURL, check_sqlite_file, engine_kwargs, one_line_error,
                                readonly_engine_args, refuse_foreign, sqlite_tables, table_names)

#: Seconds to wait before each retry of a write whose connection dropped (module docstring); about 8 s in all,
#: long enough for a server's restart or a failover to a standby, bounded so a server that is gone fails the cell.
RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 4.0)


def _retried(write: Any) -> Any:
    """``write(retry)`` (``retry``: 0 on the first try) again after each :data:`RETRY_DELAYS_S` while it fails
    with a dropped connection (SQLAlchemy's ``connection_invalidated``); the last such error, or any other, is
    raised."""
    for retry, delay in enumerate((*RETRY_DELAYS_S, None)):
        try:
            return write(retry)
        except sa.exc.DBAPIError as e:
            if not e.connection_invalidated or delay is None:
                raise
            time.sleep(delay)


class Store:
    """A results store at a SQLAlchemy URL.

    :param store: where it is: a :class:`StoreURL`, used as it is, or its URL as text (default
        :data:`DEFAULT_URL`), checked here, once (:meth:`StoreURL.parse`), for callers that start here.
    :param readonly: open for reading only (see the module docstring); raises
        :class:`StoreMissing` when there is no store at ``url``. Otherwise the schema
        is created when missing.
    :raises StoreError: the URL is in-memory SQLite, the server does not answer, the
        file is not a bench store (one line, see the module docstring).
    """

    def __init__(self, store: StoreURL | str = DEFAULT_URL, *, readonly: bool = False):
        self.store_url = StoreURL.parse(store)
        #: The normalised URL as text, for the engine (and callers that read ``Store.url``).
        self.url = self.store_url.text
        self.readonly = readonly
        where = self.store_url.shown
        path = self.store_url.sqlite_path
        if path is not None:
            exists = check_sqlite_file(path)
            if readonly:
                if not exists:
                    raise StoreMissing(f"no results store at {where}")
                ro_url, kw = readonly_engine_args(self.url)
                self.engine: Engine = sa.create_engine(ro_url, **kw)
            else:
                if exists:  # looked at read-only first: the WAL switch below would already change another program's file
                    refuse_foreign(path, sqlite_tables(path))
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
                raise StoreError(f"cannot open the results store at {where}: {one_line_error(e)}") from None
            except sa.exc.SQLAlchemyError as e:
                self.engine.dispose()
                raise StoreError(f"cannot open the results store at {where}: {one_line_error(e)}") from None

    def _open(self, path: Path | None, where: str) -> None:
        with self.engine.connect() as c:
            tables = table_names(c)
        if "runs" not in tables:
            if path is not None:
                refuse_foreign(path, tables)  # SQLite: another program's file is never written to
            if self.readonly:
                raise StoreMissing(f"no results store at {where}")
            with self.engine.begin() as c:
                create_schema(c)
        elif not self.readonly and (set(metadata.tables) - tables or migrations_due(self.engine)):
            # A store from an earlier version: its missing tables and columns are added (never by a reader).
            with self.engine.begin() as c:
                create_schema(c)
                migrate(c)

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
            c.execute(dialect_insert(c, suites).values(name=name, **row).on_conflict_do_update(index_elements=["name"], set_=row))
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
                c.execute(dialect_insert(c, runs).on_conflict_do_nothing(index_elements=["key"]), new)
            c.execute(sa.delete(suite_cells).where(suite_cells.c.suite == name))
            if links:
                c.execute(
                    dialect_insert(c, suite_cells).on_conflict_do_nothing(index_elements=["suite", "key"]),
                    [dict(suite=name, key=k, label=v) for k, v in links],
                )

    def grid(self, name: str) -> list[tuple[str, str]] | None:
        """The stored grid of suite ``name``, sorted ``(key, label)`` pairs as :meth:`register` compares them;
        ``None`` where the store holds no suite of that name."""
        with self.engine.connect() as c:
            if c.execute(sa.select(suites.c.name).where(suites.c.name == name)).first() is None:
                return None
            return sorted((r.key, r.label) for r in c.execute(
                sa.select(suite_cells.c.key, suite_cells.c.label).where(suite_cells.c.suite == name)))

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
        def write(retry: int) -> int | None:
            now = time.time()
            with self.engine.begin() as c:
                row = c.execute(sa.select(runs).where(runs.c.key == key)).first()
                if retry and row is not None and row.status == "running" and row.owner == owner:
                    return row.attempt  # the dropped try had committed its claim
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

        return _retried(write)

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

        def write(retry: int) -> None:
            with self.engine.begin() as c:
                c.execute(
                    runs.update()
                    .where(runs.c.key == key, runs.c.attempt == attempt, runs.c.status == "running")
                    .values(**values)
                )

        _retried(write)

    def finish(self, key: str, attempt: int, status: str, result: RunResult, error: str | None = None) -> bool:
        """Write an attempt's data and final status in one transaction.

        Returns False (and writes nothing) if the attempt no longer owns the run.
        """
        assert status in ("done", "failed")

        def write(retry: int) -> bool:
            with self.engine.begin() as c:
                res = c.execute(
                    runs.update()
                    .where(runs.c.key == key, runs.c.attempt == attempt, runs.c.status == "running")
                    .values(status=status, error=error, finished_at=time.time(),
                            meta=json.dumps(result.meta, default=str), **result.summary)
                )
                if res.rowcount != 1:
                    if retry:  # the dropped try may have committed: then the run is finished as it wrote it
                        row = c.execute(sa.select(runs.c.attempt, runs.c.status, runs.c.error)
                                        .where(runs.c.key == key)).first()
                        return row is not None and tuple(row) == (attempt, status, error)
                    return False  # someone else owns the run now; this attempt changed nothing
                write_run_data(c, key, result)
            return True

        return _retried(write)

    def pause(self, key: str, attempt: int, steps: int, cpu_s: float, note: str) -> bool:
        """The attempt stopped at a race's rung with a checkpoint (:class:`bench.algos.resume.Paused`): the run is
        ``interrupted`` (claimable: the next run of its cell continues it from the checkpoint), its ``error`` the
        ``note``, its steps and CPU seconds so far kept. No run data is written: a paused run is not a result.
        Returns False (and changes nothing) if the attempt no longer owns the run."""
        with self.engine.begin() as c:
            res = c.execute(
                runs.update()
                .where(runs.c.key == key, runs.c.attempt == attempt, runs.c.status == "running")
                .values(status="interrupted", error=note, finished_at=time.time(), total_steps=int(steps),
                        cpu_s=float(cpu_s))
            )
            return res.rowcount == 1

    def replace_done(self, key: str, attempt: int, result: RunResult, started_at: float) -> bool:
        """Replace a done run's data with a new measurement of the same cell, in one transaction
        (``bench run --remeasure``). The done run stays as it is until this commits, so a
        re-measurement that dies loses nothing. Returns False (and writes nothing) unless the run is
        still done at ``attempt``: another runner replaced or re-ran it meanwhile."""
        def write(retry: int) -> bool:
            with self.engine.begin() as c:
                res = c.execute(
                    runs.update()
                    .where(runs.c.key == key, runs.c.attempt == attempt, runs.c.status == "done")
                    .values(attempt=attempt + 1, error=None, started_at=started_at, finished_at=time.time(),
                            meta=json.dumps(result.meta, default=str), **result.summary)
                )
                if res.rowcount != 1:
                    if retry:  # the dropped try may have committed this very re-measurement
                        row = c.execute(sa.select(runs.c.attempt, runs.c.status, runs.c.started_at)
                                        .where(runs.c.key == key)).first()
                        return row is not None and tuple(row) == (attempt + 1, "done", started_at)
                    return False
                write_run_data(c, key, result)
            return True

        return _retried(write)

    def release(self, owner: str, status: str = "interrupted", error: str | None = None) -> int:
        """Mark every run this owner still has running as interrupted (or failed)."""
        def write(retry: int) -> int:
            with self.engine.begin() as c:
                res = c.execute(
                    runs.update()
                    .where(runs.c.owner == owner, runs.c.status == "running")
                    .values(status=status, error=error, finished_at=time.time())
                )
                return res.rowcount

        return _retried(write)

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

    def studies(self) -> list:
        """The store's ``bench tune`` studies, read-only (:func:`bench.storage.studies.read_studies`)."""
        from bench.storage.studies import read_studies

        return read_studies(self.store_url)

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

    def evaluations_frame(self, suite: str | None = None):
        """One row per (suite, run, periodic evaluation, ``eval:``): the run's identity, then ``idx, step, wall_s,
        mean_return, std_return, n`` (the env step it was taken at, wall seconds since the run started, and the
        mean and standard deviation of the returns of its ``n`` deterministic episodes)."""
        return self._per_run_frame(evaluations, ("idx", "step", "wall_s", "mean_return", "std_return", "n"),
                                   evaluations.c.idx, suite)

    def _per_run_frame(self, table: sa.Table, columns: Sequence[str], order: Any, suite: str | None):

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
        """Normalisation anchor rows by ``(env_id, threshold, episodes, seed)`` (see :mod:`bench.envs.anchors`),
        with the legacy per-env rows (table ``env_anchors``) where no new row has the same key."""
        with self.engine.connect() as c:
            have = table_names(c)  # a store read-only from before either table existed may lack it
            out = {(r.env_id, r.threshold, r.episodes, r.seed): r for r in c.execute(sa.select(anchors))} \
                if "anchors" in have else {}
            legacy = {(r.env_id, r.threshold, r.episodes, r.seed): r for r in c.execute(sa.select(env_anchors))} \
                if "env_anchors" in have else {}
        return {**legacy, **out}

    def env_facts(self) -> dict[str, dict[str, Any]]:
        """Env key → its recorded facts (table ``env_facts``); empty for a store written before it."""
        with self.engine.connect() as c:
            if "env_facts" not in table_names(c):
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
                c.execute(dialect_insert(c, env_facts).values(env_id=env_id, **row)
                          .on_conflict_do_update(index_elements=["env_id"], set_=row))

    def put_anchor(self, env_id: str, random_return: float, threshold: float, episodes: int, seed: int) -> bool:
        """Store an anchor unless one with the same key is there (they are never overwritten).

        Returns True if this call wrote it, False if it was there (a concurrent writer may have won)
        or could not be written: a read-only store writes it through a short-lived writer, and
        where that fails (a read-only mount) it is not stored.
        """
        if self.readonly:
            try:
                writer = Store(self.store_url)
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


def store_exists(store_url: StoreURL) -> bool:
    """Whether a store is there to read, without creating anything.

    False when there is none yet (no file, an empty file, a database without bench's
    tables); :class:`StoreError` when it cannot be reached, is not SQLite, is corrupt,
    or is another program's database.
    """
    path = store_url.sqlite_path
    if path is not None and not check_sqlite_file(path):
        return False
    try:
        st = Store(store_url, readonly=True)
    except StoreMissing:
        return False
    st.dispose()
    return True
