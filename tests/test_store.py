"""The results store on SQLite and PostgreSQL: claims, atomic finishes, takeovers."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest
import sqlalchemy as sa

from bench.storage.owners import is_claimable, owner_alive, this_owner
from bench.storage.schema import RunResult, runs
from bench.storage.store import Store
from bench.suites.suite import Cell, cell_key

ME = this_owner()
DEAD = f"{socket.gethostname()}:999999999:0"  # this host, a pid that cannot exist
ELSEWHERE = "some-other-host:123:456"


def make_cells(n=3, suite="s"):
    out = []
    for seed in range(n):
        c = Cell(suite, "CartPole-v1", "ppo", "sb3", "ppo-sb3", seed, 1000, 475.0, 5, None, {"n_envs": 1})
        out.append(replace(c, key=cell_key(c.identity())))
    return out


def result(n_eps=3, summary_extra=None):
    return RunResult(
        summary={"total_steps": 1000, "episodes": n_eps, "wall_s": 1.5, "cpu_s": 1.4, "steps_to_threshold": None,
                 "seconds_to_threshold": None, "final_return": 20.0, "auc": 15.0, **(summary_extra or {})},
        episodes={"step": list(range(10, 10 * n_eps + 1, 10)), "wall_s": [0.1] * n_eps, "ret": [float(i) for i in range(n_eps)],
                  "length": [10] * n_eps},
        diagnostics=[(100, "loss/value", 0.5), (100, "loss/policy", float("nan"))],
        evaluations=[(500, 0.7, 10.0, 1.0, 5)],
        meta={"host": "h"},
    )


def test_register_is_idempotent_and_links_suites(store_url):
    db = Store(store_url)
    cells = make_cells()
    db.register("s", "s.yaml", {"name": "s"}, {}, cells)
    db.register("s", "s.yaml", {"name": "s"}, {}, cells)
    db.register("t", "t.yaml", {"name": "t"}, {}, cells[:1])  # a second suite sharing a cell
    rows = db.rows([c.key for c in cells])
    assert len(rows) == 3 and {r.status for r in rows.values()} == {"pending"}
    assert sorted(db.suite_names()) == ["s", "t"]
    assert len(db.runs_frame("s")) == 3 and len(db.runs_frame("t")) == 1
    assert len(db.runs_frame()) == 4  # one row per (suite, run)


def test_claim_finish_and_skip_done(store_url):
    db = Store(store_url)
    (c,) = make_cells(1)
    db.register("s", "s.yaml", {}, {}, [c])
    assert db.claim(c.key, ME) == 1
    assert db.claim(c.key, ME) is None  # running and its owner (this process) is alive
    assert db.finish(c.key, 1, "done", result())
    row = db.rows([c.key])[c.key]
    assert (row.status, row.attempt, row.final_return) == ("done", 1, 20.0)
    assert db.claim(c.key, ME) is None  # done is never re-run
    eps = db.episodes_of(c.key)
    assert list(eps["ret"]) == [0.0, 1.0, 2.0]
    diag = db.diagnostics_of(c.key)
    assert diag["value"].isna().sum() == 1  # non-finite diagnostics stored as NULL, not dropped
    assert len(db.evaluations_of(c.key)) == 1


def test_dead_owner_is_taken_over_and_late_writer_is_refused(store_url):
    db = Store(store_url)
    (c,) = make_cells(1)
    db.register("s", "s.yaml", {}, {}, [c])
    assert db.claim(c.key, DEAD) == 1
    assert owner_alive(DEAD) is False
    assert db.claim(c.key, ME) == 2  # the dead runner's attempt is taken over at once
    # The first attempt's writer turns up late: it must change nothing.
    assert not db.finish(c.key, 1, "done", result(n_eps=7))
    assert db.finish(c.key, 2, "done", result(n_eps=3))
    assert len(db.episodes_of(c.key)) == 3


def test_other_host_waits_for_stale_heartbeat(store_url):
    db = Store(store_url)
    (c,) = make_cells(1)
    db.register("s", "s.yaml", {}, {}, [c])
    assert db.claim(c.key, ELSEWHERE) == 1
    row = db.rows([c.key])[c.key]
    assert owner_alive(ELSEWHERE) is None
    assert not is_claimable(row)  # fresh heartbeat from another host: leave it alone
    assert is_claimable(row, now=row.heartbeat_at + 10_000)  # stale: interrupted
    with db.engine.begin() as conn:
        conn.execute(runs.update().where(runs.c.key == c.key).values(heartbeat_at=row.heartbeat_at - 10_000))
    assert db.claim(c.key, ME) == 2


def test_failed_run_keeps_its_partial_data_until_retried(store_url):
    db = Store(store_url)
    (c,) = make_cells(1)
    db.register("s", "s.yaml", {}, {}, [c])
    a = db.claim(c.key, ME)
    assert db.finish(c.key, a, "failed", result(n_eps=2), error="Diverged: non-finite loss/value")
    row = db.rows([c.key])[c.key]
    assert row.status == "failed" and "Diverged" in row.error
    assert len(db.episodes_of(c.key)) == 2
    a2 = db.claim(c.key, ME)
    assert a2 == 2
    assert db.finish(c.key, a2, "done", result(n_eps=4))
    assert len(db.episodes_of(c.key)) == 4  # replaced, never appended to
    assert db.rows([c.key])[c.key].error is None


def test_a_crash_inside_finish_leaves_no_trace(store_url):
    db = Store(store_url)
    (c,) = make_cells(1)
    db.register("s", "s.yaml", {}, {}, [c])
    a = db.claim(c.key, ME)
    bad = result(n_eps=3)
    bad.episodes["ret"][2] = "not a number"  # fails half-way through the episode insert
    with pytest.raises(ValueError):
        db.finish(c.key, a, "done", bad)
    row = db.rows([c.key])[c.key]
    assert row.status == "running" and row.final_return is None
    assert len(db.episodes_of(c.key)) == 0


def test_release_marks_only_this_owners_runs(store_url):
    db = Store(store_url)
    c1, c2 = make_cells(2)
    db.register("s", "s.yaml", {}, {}, [c1, c2])
    db.claim(c1.key, ME)
    db.claim(c2.key, ELSEWHERE)
    assert db.release(ME, "interrupted", "Ctrl-C") == 1
    rows = db.rows([c1.key, c2.key])
    assert rows[c1.key].status == "interrupted" and rows[c2.key].status == "running"
    assert db.claim(c1.key, ME) == 2


def test_sqlite_store_uses_wal(tmp_path):
    db = Store(f"sqlite:///{tmp_path / 'x.db'}")
    with db.engine.connect() as c:
        assert c.execute(sa.text("PRAGMA journal_mode")).scalar() == "wal"


def test_heartbeats_report_steps_and_a_new_attempt_starts_without_them(store_url):
    db = Store(store_url)
    (c,) = make_cells(1)
    db.register("s", "s.yaml", {}, {}, [c])
    a = db.claim(c.key, ME)
    db.heartbeat(c.key, a, 412)
    assert db.rows([c.key])[c.key].total_steps == 412
    db.heartbeat(c.key, a)  # a beat without a count keeps the last one
    assert db.rows([c.key])[c.key].total_steps == 412
    db.heartbeat(c.key, a + 1, 999)  # not this attempt's: nothing changes
    assert db.rows([c.key])[c.key].total_steps == 412
    db.heartbeat(c.key, a, 500, 12.5)  # training CPU seconds so far, beside the steps
    assert (db.rows([c.key])[c.key].total_steps, db.rows([c.key])[c.key].cpu_s) == (500, 12.5)
    assert db.release(ME) == 1  # an interrupted run keeps how far it got
    row = db.rows([c.key])[c.key]
    assert row.status == "interrupted" and row.total_steps == 500 and row.cpu_s == 12.5
    b = db.claim(c.key, ME)
    assert b == a + 1 and db.rows([c.key])[c.key].total_steps is None and db.rows([c.key])[c.key].cpu_s is None
    assert db.finish(c.key, b, "done", result())
    assert db.rows([c.key])[c.key].total_steps == 1000


def test_read_frame_is_read_sql(store_url):
    # The fast reader behind reports and packs gives pandas' own frame: values, NULLs, dtypes, order.
    import pandas as pd

    from bench.storage.schema import episodes, read_frame

    db = Store(store_url)
    cells = make_cells(2)
    suite = "it's 100% \\ a suite"  # bound, not inlined: quotes, percent and backslash stay text
    db.register(suite, "s.yaml", {}, {}, cells)
    for i, c in enumerate(cells):
        a = db.claim(c.key, ME)
        r = result(n_eps=4 + i)
        r.episodes["cpu_s"] = [None, 0.5, 1.25, 2.0, 3.0][: 4 + i]
        assert db.finish(c.key, a, "done", r)
    q = sa.select(episodes).where(episodes.c.key.in_([c.key for c in cells])).order_by(episodes.c.key, episodes.c.idx)
    with db.engine.connect() as conn:
        fast, slow = read_frame(conn, q), pd.read_sql(q, conn)
        empty = read_frame(conn, q.where(episodes.c.key == "none"))
    pd.testing.assert_frame_equal(fast, slow)
    assert len(fast) == 9 and fast["cpu_s"].isna().sum() == 2
    assert list(empty.columns) == list(slow.columns) and len(empty) == 0
    assert len(db.episodes_frame(suite)) == 9 and db.episodes_frame("it").empty


def test_insert_frame_binds_plain_values_nan_as_null_and_skips_rows_already_there(store_url):
    # The bulk loader behind bench import and the shipped reference's cache.
    import numpy as np
    import pandas as pd

    from bench.storage.schema import episodes, insert_frame, read_frame

    db = Store(store_url)
    cells = make_cells(1)
    db.register("s", "s.yaml", {}, {}, cells)
    k = cells[0].key
    df = pd.DataFrame({"key": [k, k, k], "idx": np.array([0, 1, 2], dtype="int64"), "step": [10, 20, 30],
                       "wall_s": [0.5, 1.0, 1.5], "ret": [1.0, -2.25, 3.0], "length": [10, 10, 10],
                       "cpu_s": [np.nan, 0.75, 1.25]})
    q = sa.select(episodes.c.key, episodes.c.idx, episodes.c.step, episodes.c.wall_s, episodes.c.ret,
                  episodes.c.length, episodes.c.cpu_s).where(episodes.c.key == k).order_by(episodes.c.idx)
    with db.engine.begin() as conn:
        insert_frame(conn, episodes, df.iloc[:2])
        insert_frame(conn, episodes, df.assign(ret=[9.0, 9.0, 3.0]))  # rows 0 and 1 are there: kept as they are
        insert_frame(conn, episodes, df.iloc[:0])
    with db.engine.connect() as conn:
        back = read_frame(conn, q)
        nulls = conn.execute(sa.select(sa.func.count()).select_from(episodes)
                             .where(episodes.c.key == k, episodes.c.cpu_s.is_(None))).scalar()
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    assert nulls == 1  # NULL, not a stored NaN (PostgreSQL keeps NaN as a value)


# --------------------------------------------------------------------------- #
# Dropped connections (issue 67): retried with a bounded backoff, never written twice
# --------------------------------------------------------------------------- #
def _terminate_mid_write(db, pg_url, *, times):
    """Each of the first ``times`` episode inserts of ``db`` (inside ``finish``'s transaction, after its UPDATE)
    first has its own server process ended by ``pg_terminate_backend`` from a second connection."""
    import psycopg

    admin = psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)
    killed = []

    @sa.event.listens_for(db.engine, "before_cursor_execute")
    def _kill(conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith("INSERT INTO EPISODES") and len(killed) < times:
            pid = conn.connection.dbapi_connection.info.backend_pid
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                pass  # gone before the insert is sent
            killed.append(pid)

    return admin, killed


@pytest.mark.postgres
def test_a_connection_ended_mid_write_is_retried_and_the_run_written_once(pg_url, monkeypatch):
    from bench.storage import store

    monkeypatch.setattr(store, "RETRY_DELAYS_S", (0.05, 0.05, 0.05))
    db = Store(pg_url)
    (c,) = make_cells(1)
    db.register("s", "s.yaml", {}, {}, [c])
    a = db.claim(c.key, ME)
    admin, killed = _terminate_mid_write(db, pg_url, times=2)
    try:
        assert db.finish(c.key, a, "done", result(n_eps=3))
    finally:
        admin.close()
    assert len(killed) == 2  # two tries ended mid-write; the third wrote
    row = db.rows([c.key])[c.key]
    assert (row.status, row.attempt, row.episodes) == ("done", 1, 3)
    assert list(db.episodes_of(c.key)["ret"]) == [0.0, 1.0, 2.0]  # once
    assert len(db.evaluations_of(c.key)) == 1
    db.dispose()


@pytest.mark.postgres
def test_a_connection_that_keeps_dropping_fails_after_the_bounded_retries(pg_url, monkeypatch):
    from bench.storage import store

    monkeypatch.setattr(store, "RETRY_DELAYS_S", (0.05, 0.05))
    db = Store(pg_url)
    (c,) = make_cells(1)
    db.register("s", "s.yaml", {}, {}, [c])
    a = db.claim(c.key, ME)
    admin, killed = _terminate_mid_write(db, pg_url, times=99)
    try:
        with pytest.raises(sa.exc.OperationalError) as e:
            db.finish(c.key, a, "done", result(n_eps=3))
    finally:
        admin.close()
    assert e.value.connection_invalidated and len(killed) == 3  # the try and its 2 retries
    row = db.rows([c.key])[c.key]
    assert row.status == "running" and len(db.episodes_of(c.key)) == 0  # nothing of it written
    db.dispose()


def test_a_commit_whose_answer_was_lost_is_not_written_again(store_url, monkeypatch):
    """The connection drops after the server committed ``finish``'s transaction, before the client heard so:
    the retry finds the attempt finished as it wrote it, writes nothing again, and reports it written."""
    from contextlib import contextmanager

    db = Store(store_url)
    (c,) = make_cells(1)
    db.register("s", "s.yaml", {}, {}, [c])
    a = db.claim(c.key, ME)
    real_begin, lost = db.engine.begin, []

    @contextmanager
    def begin():
        with real_begin() as conn:
            yield conn
        if not lost:  # committed; then the answer is lost
            lost.append(1)
            raise sa.exc.OperationalError("COMMIT", {}, Exception("server closed the connection unexpectedly"),
                                          connection_invalidated=True)

    monkeypatch.setattr(db.engine, "begin", begin)
    assert db.finish(c.key, a, "done", result(n_eps=3))
    assert lost and list(db.episodes_of(c.key)["ret"]) == [0.0, 1.0, 2.0]
    assert db.rows([c.key])[c.key].status == "done"
    db.dispose()
