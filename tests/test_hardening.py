"""Issue 14: hostile suites, odd labels, unreachable or read-only stores, and worker deaths.

One regression test (or a few) per case of the issue's table, numbered as there.
Each reproduces the case and checks the fixed behaviour: bad input is one line and
exit status 2 with nothing written; a runtime failure is one line and a non-zero
exit; no traceback anywhere (``--debug`` shows one).
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from synthetic import Planted, write_store

from bench.storage.schema import StoreError
from bench.storage.store import Store
from bench.suites.suite import SuiteError, load_suite
from bench.storage.urls import StoreURL

ROOT = Path(__file__).resolve().parent.parent
#: A small shipped pack, for `bench import` against a bad store.
A_PACK = ROOT / "results" / "reference" / "sequence"


@functools.cache
def reference_db() -> Path:
    """The shipped classic reference (results/reference/classic), unpacked once per session into a SQLite
    file that tests copy (never write)."""
    from bench.storage import packload

    out = Path(tempfile.mkdtemp(prefix="bench-ref-")) / "reference.db"
    packload.unpack([ROOT / "results" / "reference" / "classic"], out)
    return out


REFERENCE_SUITE = ROOT / "suites" / "reference" / "classic.yaml"
#: What `bench status` of that suite on the unpacked pack says: every run in the pack is done.
REFERENCE_DONE = f"done: {json.loads((ROOT / 'results' / 'reference' / 'classic' / 'pack.json').read_text())['runs']['done']}"

TINY = """\
name: {name}
seeds: {seeds}
defaults: {{timesteps: {timesteps}, window: 5}}
envs: [{{id: CartPole-v1{threshold}}}]
algorithms: [{{algo: a2c, impl: bench, label: {label}, hyperparams: {{n_envs: 1, n_steps: 8}}}}]
"""


def tiny(tmp_path: Path, *, name="tiny", seeds="[0]", timesteps=300, label="'a2c'", threshold="", file="s.yaml") -> Path:
    f = tmp_path / file
    f.write_text(TINY.format(name=name, seeds=seeds, timesteps=timesteps, label=label, threshold=threshold))
    return f


def bench(*args, cwd, timeout=300) -> SimpleNamespace:
    """``bench ARGS`` run from ``cwd``, in this process (a subprocess each would pay Python's and torch's
    start-up, seconds per call on a loaded 2-core machine): exit status, stdout and stderr as a finished
    process has them. ``timeout`` is kept for the call sites' sake: the commands under test end by themselves."""
    import contextlib

    from typer.testing import CliRunner

    from bench.cli import app

    with contextlib.chdir(cwd):
        res = CliRunner().invoke(app, [str(a) for a in args], prog_name="bench")
    return SimpleNamespace(returncode=res.exit_code, stdout=res.stdout, stderr=res.stderr)


def one_line(p, *needles: str, rc: int | None = 2) -> str:
    """The process failed with exactly one line on stderr containing every needle, and no traceback."""
    lines = p.stderr.strip().splitlines()
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    if rc is None:
        assert p.returncode != 0, p.stderr
    else:
        assert p.returncode == rc, (p.returncode, p.stderr)
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- #
# 1. YAML alias bombs, recursive aliases, deep nesting, huge files
# --------------------------------------------------------------------------- #
BOMB = "name: bomb\n" + 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi"))


def test_case01_alias_bomb_is_refused_in_bounded_time_and_memory(tmp_path):
    f = tmp_path / "bomb.yaml"
    f.write_text(BOMB)
    assert len(BOMB) < 700  # the 596-byte "billion laughs" (9^9 strings once expanded)
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(SuiteError) as e:
        load_suite(f)
    took = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert took < 2.0 and peak < 20e6, (took, peak)
    assert len(e.value.lines) == 1 and re.search(r"aliases expand to [\d,]{11,} nodes", e.value.lines[0]), e.value.lines
    p = bench("run", str(f), "--store", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path, timeout=60)
    one_line(p, "bomb.yaml", "allowed: at most")
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("text, words", [
    ("name: &x [*x]\n", "recursive YAML"),
    ("a: &x\n  b: *x\nname: n\n", "recursive YAML"),
    ("name: " + "[" * 3000 + "]" * 3000 + "\n", "nested 21 levels deep; allowed: at most 20"),
    ("name: x\nkeys: [" + ", ".join(["1"] * 25_000) + "]\n", "YAML nodes; allowed: at most 20,000"),
])
def test_case01_recursive_deep_and_huge_yaml_is_one_line(tmp_path, text, words):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(SuiteError) as e:
        load_suite(f)
    assert len(e.value.lines) == 1 and words in e.value.lines[0], e.value.lines


def test_case01_file_size_cap(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text("name: big\n" + "# padding\n" * 200_000)
    with pytest.raises(SuiteError) as e:
        load_suite(f)
    assert "larger than 1,000,000 bytes" in e.value.lines[0]


def test_case01_aliases_that_share_a_block_still_work(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: shared\nseeds: [0]\ndefaults: {timesteps: 300}\nenvs: [{id: CartPole-v1}]\n"
                 "algorithms:\n  - {algo: a2c, impl: bench, label: one, hyperparams: &hp {n_envs: 1, n_steps: 8}}\n"
                 "  - {algo: a2c, impl: sb3, label: two, hyperparams: *hp}\n")
    # Two implementations share one block (one implementation twice with one block would run the same
    # experiment twice, which a suite refuses); an alias that is not recursive is no "billion laughs".
    cells = load_suite(f).cells
    assert [(c.label, c.impl) for c in cells] == [("one", "bench"), ("two", "sb3")]
    assert all(c.hyperparams["n_envs"] == 1 and c.hyperparams["n_steps"] == 8 for c in cells)


# --------------------------------------------------------------------------- #
# 2. rich markup in labels and errors; 3. mathtext in labels
# --------------------------------------------------------------------------- #
ODD = "x[/]y [bold]$\\alpha^$"


def test_case02_and_03_markup_and_mathtext_labels_are_literal_text(tmp_path):
    f = tiny(tmp_path, label="'" + ODD.replace("'", "''") + "'")
    url = f"sqlite:///{tmp_path / 'b.db'}"
    p = bench("run", str(f), "--store", url, "--dry-run", cwd=tmp_path)
    assert p.returncode == 0 and ODD in p.stdout, p.stderr
    p = bench("run", str(f), "--store", url, "--workers", "1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert ODD in p.stderr and "Traceback" not in p.stderr  # the per-cell line and the summary
    p = bench("status", str(f), "--store", url, cwd=tmp_path)
    assert p.returncode == 0 and ODD in p.stdout and "done: 1" in p.stdout, p.stderr
    p = bench("report", "--store", url, "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    from html import escape

    assert escape(ODD) in (tmp_path / "rep" / "index.html").read_text()


def test_case02_error_texts_with_brackets_are_printed_as_they_are(capsys):
    # What `bench run` prints for a failed cell: a styled word, then the label and error as they are.
    from rich.table import Table

    from bench.cli import base as cli

    cli.err.print(cli._styled("red", "failed", " CartPole-v1 [/]lab seed 0: Diverged: loss [nan] at [bold]"))
    cli.out.print("summary [/] [nan]")
    t = Table(title="[/]title")
    t.add_column("[red]")
    t.add_row("[/]cell")
    cli.out.print(t)
    got = capsys.readouterr()
    assert "failed CartPole-v1 [/]lab seed 0: Diverged: loss [nan] at [bold]" in got.err
    assert "summary [/] [nan]" in got.out and "[/]title" in got.out and "[/]cell" in got.out


def test_case02_recommend_prints_labels_as_text(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, ["CartPole-v1"], [Planted("[/]win", "ppo", "bench", 1.0), Planted("$x^$", "a2c", "bench", 0.1)],
                seeds=5)
    p = bench("recommend", "--store", url, "--action", "discrete", cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "[/]win" in p.stdout


# --------------------------------------------------------------------------- #
# 4. Non-finite thresholds (the anchor keying itself is issue 12's)
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", ".NaN", "-.Inf"])
def test_case04_non_finite_threshold_is_refused(tmp_path, value):
    f = tiny(tmp_path, threshold=f", threshold: {value}")
    p = bench("run", str(f), "--store", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path, timeout=60)
    one_line(p, "envs[0].threshold", "finite")
    assert not (tmp_path / "x.db").exists()


# --------------------------------------------------------------------------- #
# 5. In-memory SQLite
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file::memory:?cache=shared",
                                 "sqlite:///file:x?mode=memory&uri=true"])
def test_case05_in_memory_sqlite_is_refused_everywhere(tmp_path, url):
    f = tiny(tmp_path)
    every = url == "sqlite://"  # every command with one spelling, `run` with the others
    for args in (["run", str(f)], ["status", str(f)], ["report"], ["recommend"], ["export", "--out", "x.csv"],
                 ["import", str(A_PACK)])[:6 if every else 1]:
        p = bench(*args, "--store", url, cwd=tmp_path, timeout=60)
        one_line(p, "in-memory", "allowed: a file")
    if every:
        p = bench("tune", "--algo", "ppo", "--env", "CartPole-v1", "--storage", url, cwd=tmp_path, timeout=60)
        one_line(p, "--storage", "in-memory")
    with pytest.raises(StoreError, match="in-memory"):
        Store(url)
    assert os.listdir(tmp_path) == ["s.yaml"]


# --------------------------------------------------------------------------- #
# 6. Unreachable PostgreSQL: wrong port, a host that never answers
# --------------------------------------------------------------------------- #
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_case06_wrong_postgres_port_is_an_error_within_seconds(tmp_path):
    f = tiny(tmp_path)
    url = f"postgresql://postgres@127.0.0.1:{_free_port()}/bench"
    # What starting the command costs on this machine now (imports; seconds on a loaded 2-core box),
    # so the bound below is on the store's failure, not on the interpreter's start-up.
    t0 = time.perf_counter()
    bench("status", str(f), "--store", f"sqlite:///{tmp_path / 'absent.db'}", cwd=tmp_path, timeout=60)  # no store: exit 2
    startup = time.perf_counter() - t0
    for args in (["status", str(f)], ["export", "--out", "x.csv"], ["report"], ["recommend"], ["run", str(f)],
                 ["import", str(A_PACK)]):
        t0 = time.perf_counter()
        p = bench(*args, "--store", url, cwd=tmp_path, timeout=60)
        assert time.perf_counter() - t0 < 10 + startup, (args, startup)
        line = one_line(p, "cannot open the results store at postgresql+psycopg://postgres@127.0.0.1", rc=1)
        assert "pending" not in p.stdout and "no results store" not in line
    # --debug shows the traceback instead.
    p = bench("--debug", "status", str(f), "--store", url, cwd=tmp_path, timeout=60)
    assert p.returncode == 1 and "Traceback" in p.stderr
    p = bench("status", str(f), "--store", url, "--debug", cwd=tmp_path, timeout=60)
    assert p.returncode == 1 and "Traceback" in p.stderr


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections and never says a word (a hung database host)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    conns = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    for c in conns:
        c.close()
    srv.close()


@pytest.mark.heavy
def test_case06_a_host_that_never_answers_times_out_with_one_line(tmp_path, silent_server):
    f = tiny(tmp_path)
    url = f"postgresql://postgres@127.0.0.1:{silent_server}/bench"
    # The command's bound is relative to what starting the command costs now, so that a loaded
    # machine's slow imports do not read as a slow timeout (fixed bounds failed beside other work).
    t0 = time.perf_counter()
    bench("status", str(f), "--store", f"sqlite:///{tmp_path / 'absent.db'}", cwd=tmp_path, timeout=60)
    startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = bench("run", str(f), "--store", url, cwd=tmp_path, timeout=120)
    assert time.perf_counter() - t0 < startup + 12, startup
    one_line(p, "cannot open the results store", "timeout", rc=1)
    p = bench("status", str(f), "--store", url + "?connect_timeout=2", cwd=tmp_path, timeout=120)
    one_line(p, "cannot open the results store", rc=1)
    # The timeouts themselves, timed in this process (no interpreter start-up in the measure): the
    # 5 s default, and libpq's own parameter, which wins.
    for query, lo, hi in (("", 4.0, 9.0), ("?connect_timeout=2", 1.5, 4.5)):
        t0 = time.perf_counter()
        with pytest.raises(StoreError, match="timeout"):
            Store(url + query)
        assert lo < time.perf_counter() - t0 < hi, query
    assert os.listdir(tmp_path) == ["s.yaml"]


@pytest.mark.postgres
def test_case06_status_reads_a_real_postgres_store(tmp_path, pg_url):
    f = tiny(tmp_path, seeds="[0, 1]")
    loaded = load_suite(f)
    db = Store(pg_url)
    db.register(loaded.suite.name, str(f), loaded.suite.model_dump(mode="json"), loaded.env_meta, loaded.cells)
    p = bench("status", str(f), "--store", pg_url, cwd=tmp_path, timeout=60)
    assert p.returncode == 0 and "pending: 2" in p.stdout and "no results store" not in p.stderr


# --------------------------------------------------------------------------- #
# 7. kill -9 of one worker of a --workers 2 run
# --------------------------------------------------------------------------- #
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc")
@pytest.mark.heavy
def test_case07_a_dead_worker_fails_only_its_own_run(tmp_path):
    f = tiny(tmp_path, seeds="[0, 1]", timesteps=40_000)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    proc = subprocess.Popen([sys.executable, "-m", "bench", "run", str(f), "--store", url, "--workers", "2"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    eng = sa.create_engine(url)
    owners: list[str] = []
    deadline = time.time() + 180
    while time.time() < deadline and len(owners) < 2:
        time.sleep(0.2)
        try:
            with eng.connect() as c:
                owners = [r[0] for r in c.execute(sa.text("select owner from runs where status = 'running'"))]
        except sa.exc.OperationalError:
            continue
    eng.dispose()
    assert len(owners) == 2 and len(set(owners)) == 2, owners  # each worker claims as itself
    victim = int(owners[0].rsplit(":", 2)[1])
    assert victim != proc.pid
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "Traceback" not in err, err
    with sa.create_engine(url).connect() as c:
        rows = {r.owner: r for r in c.execute(sa.text("select owner, status, attempt, error from runs"))}
    assert len(rows) == 2
    assert rows[owners[0]].status == "failed" and "worker process died" in rows[owners[0]].error
    assert rows[owners[1]].status == "done" and rows[owners[1]].attempt == 1
    assert "1 done, 1 failed" in out


# --------------------------------------------------------------------------- #
# 8. Two runners creating a fresh store at once (and bench tune)
# --------------------------------------------------------------------------- #
def _create(url: str, barrier, tune: bool) -> None:
    barrier.wait()
    if tune:
        from bench.tune import make_storage

        make_storage(StoreURL.parse(url))
    else:
        Store(url).dispose()


@pytest.mark.parametrize("tune", [False, True], ids=["store", "tune"])
def test_case08_concurrent_schema_creation_on_a_fresh_sqlite_file(tmp_path, tune):
    ctx = mp.get_context("fork")
    n, rounds = 4, 4
    for i in range(rounds):
        url = f"sqlite:///{tmp_path / f'fresh{i}.db'}"
        barrier = ctx.Barrier(n)
        procs = [ctx.Process(target=_create, args=(url, barrier, tune)) for _ in range(n)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * n, f"round {i}"
        assert {"runs", "suites"} <= set(sa.inspect(sa.create_engine(url)).get_table_names())


# --------------------------------------------------------------------------- #
# 9. Strings and integers beyond what the stores hold
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("change, words", [
    (dict(label="'" + "x" * 165 + "'"), ["algorithms[0].label", "at most 128 characters"]),
    (dict(seeds="[2147483648]"), ["seeds", "0 to 2,147,483,647"]),
    (dict(seeds="[0, 100000000000000000000]"), ["seeds[1]", "out of range; allowed:"]),
    (dict(seeds="1000000000"), ["seeds", "<= 10,000"]),
    (dict(timesteps="100000000000000000000"), ["defaults.timesteps", "9,223,372,036,854,775,807"]),
    (dict(timesteps="9223372036854775808"), ["defaults.timesteps", "9,223,372,036,854,775,807"]),
    (dict(label="'a\\0b'".replace("'", '"')), ["algorithms[0].label"]),
    (dict(label='"\\ud800"'), ["surrogate"]),
])
def test_case09_out_of_range_values_are_refused_before_any_store_exists(tmp_path, change, words):
    f = tiny(tmp_path, **change)
    p = bench("run", str(f), "--store", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path, timeout=60)
    one_line(p, *words)
    assert not (tmp_path / "x.db").exists()


@pytest.mark.postgres
def test_case09_the_largest_allowed_values_register_on_postgres(tmp_path, pg_url):
    f = tiny(tmp_path, label="'" + "é" * 128 + "'", seeds="[2147483647]", name="n" * 64)
    loaded = load_suite(f)
    Store(pg_url).register(loaded.suite.name, str(f), loaded.suite.model_dump(mode="json"), loaded.env_meta,
                           loaded.cells)
    assert Store(pg_url).runs_frame()["seed"].tolist() == [2147483647]


# --------------------------------------------------------------------------- #
# 10. Read-only stores: no WAL switch, no tables, no files left; a read-only mount
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("journal", ["wal", "delete"])
@pytest.mark.heavy
def test_case10_read_commands_leave_a_read_only_copy_of_the_reference_untouched(tmp_path, journal):
    # As root, permission bits do not stop writes: "untouched" is checked byte for byte, and
    # the "delete" copy (rollback journal) shows a WAL switch, which changes the file's header.
    ro = tmp_path / "ro"
    ro.mkdir()
    shutil.copy(reference_db(), ro / "reference.db")
    if journal != "wal":
        c = sqlite3.connect(ro / "reference.db")
        assert c.execute(f"PRAGMA journal_mode={journal}").fetchone()[0] == journal
        c.close()
    before = digest(ro / "reference.db")
    os.chmod(ro / "reference.db", 0o444)
    os.chmod(ro, 0o555)
    url = f"sqlite:///{ro / 'reference.db'}"
    try:
        p = bench("report", "--store", url, "--out", str(tmp_path / "rep"), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert (tmp_path / "rep" / "index.html").stat().st_size > 10_000
        p = bench("recommend", "--store", url, cwd=tmp_path)
        assert p.returncode == 0 and "recommend" in p.stdout, p.stderr
        p = bench("status", str(REFERENCE_SUITE), "--store", url, cwd=tmp_path)
        assert p.returncode == 0 and REFERENCE_DONE in p.stdout, p.stderr + p.stdout
        p = bench("export", "--store", url, "--out", str(tmp_path / "runs.csv"), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert sorted(os.listdir(ro)) == ["reference.db"]  # no -wal, no -shm, nothing else
        assert digest(ro / "reference.db") == before
    finally:
        os.chmod(ro, 0o755)


def test_case10_read_only_store_refuses_writes_and_makes_no_tables(tmp_path):
    url = f"sqlite:///{tmp_path / 'b.db'}"
    with pytest.raises(StoreError, match="no results store"):
        Store(url, readonly=True)
    assert not (tmp_path / "b.db").exists()
    Store(url).dispose()
    sqlite3.connect(tmp_path / "b.db").execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    for extra in ("b.db-wal", "b.db-shm"):
        (tmp_path / extra).unlink(missing_ok=True)
    ro = Store(url, readonly=True)
    assert ro.suite_names() == []
    with pytest.raises(sa.exc.OperationalError, match="readonly|read-only|read only"):
        ro.register("s", "s.yaml", {}, {}, [])
    ro.dispose()
    assert sorted(os.listdir(tmp_path)) == ["b.db"]


def _can_mount() -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    d = Path("/tmp") / f"bench-mnt-probe-{os.getpid()}"
    d.mkdir(exist_ok=True)
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["umount", str(d)], capture_output=True)
    d.rmdir()
    return ok


@pytest.fixture
def tmpfs(tmp_path):
    """Mounts tmpfs filesystems of a given size under tmp_path; unmounts them afterwards."""
    if not _can_mount():
        pytest.skip("needs root and mount (tmpfs) to make a read-only or a full filesystem")
    mounted: list[Path] = []

    def make(name: str, size: str = "100m") -> Path:
        d = tmp_path / name
        d.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)], check=True)
        mounted.append(d)
        return d

    yield make
    for d in mounted:
        # Lazily where a process the test started still holds a file there: a mount left behind keeps
        # pytest from removing its temporary folders for good.
        if subprocess.run(["umount", str(d)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(d)], capture_output=True)


@pytest.mark.heavy
def test_case10_a_store_on_a_real_read_only_mount(tmp_path, tmpfs):
    m = tmpfs("mnt")
    shutil.copy(reference_db(), m / "reference.db")
    write_store(f"sqlite:///{m / 'noanchors.db'}", ["CartPole-v1"], [Planted("ppo", "ppo", "bench", 0.9)], seeds=2,
                anchors=False).dispose()
    subprocess.run(["mount", "-o", "remount,ro", str(m)], check=True)
    # Its missing anchor cannot be stored there: computed for this report, and the report is whole.
    p = bench("report", "--store", f"sqlite:///{m / 'noanchors.db'}", "--out", str(tmp_path / "rep2"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "no normalisation anchors" not in (tmp_path / "rep2" / "index.html").read_text()
    url = f"sqlite:///{m / 'reference.db'}"
    p = bench("recommend", "--store", url, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = bench("report", "--store", url, "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = bench("status", str(REFERENCE_SUITE), "--store", url, cwd=tmp_path)
    assert p.returncode == 0 and REFERENCE_DONE in p.stdout, p.stderr
    # A writer cannot use it: one line, not a traceback.
    p = bench("run", str(tiny(tmp_path)), "--store", url, cwd=tmp_path, timeout=60)
    one_line(p, "reference.db", rc=1)


# --------------------------------------------------------------------------- #
# 11. Corrupt, truncated and foreign files; bad --out; a full disk
# --------------------------------------------------------------------------- #
def _truncated(path: Path) -> None:
    shutil.copy(reference_db(), path)
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 3)


def _foreign(path: Path) -> None:
    c = sqlite3.connect(path)
    c.execute("create table photos (id integer primary key, name text)")
    c.execute("insert into photos (name) values ('holiday')")
    c.commit()
    c.close()


@pytest.mark.parametrize("kind, make, words", [
    ("text", lambda p: p.write_text("my notes, not a database\n" * 50), "is not a SQLite database"),
    ("truncated", _truncated, "is truncated or corrupt"),
    ("foreign", _foreign, "is a database of something else"),
])
def test_case11_corrupt_or_foreign_files_are_one_line_and_never_written(tmp_path, kind, make, words):
    store = tmp_path / "store.db"
    make(store)
    before = digest(store)
    url = f"sqlite:///{store}"
    f = tiny(tmp_path)
    for args in (["run", str(f)], ["status", str(f)], ["report"], ["recommend"], ["export", "--out", "x.csv"],
                 ["import", str(A_PACK)]):
        p = bench(*args, "--store", url, cwd=tmp_path, timeout=60)
        one_line(p, str(store), words, rc=1)
    p = bench("tune", "--algo", "ppo", "--env", "CartPole-v1", "--storage", url, "--trials", "1", cwd=tmp_path, timeout=60)
    one_line(p, str(store), words, rc=1)
    assert digest(store) == before
    assert sorted(os.listdir(tmp_path)) == ["s.yaml", "store.db"]


def test_case11_bad_out_paths_are_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, ["CartPole-v1"], [Planted("ppo", "ppo", "bench", 1.0)], seeds=2)
    (tmp_path / "afile").write_text("x")
    p = bench("report", "--store", url, "--out", str(tmp_path / "afile"), cwd=tmp_path)
    one_line(p, "--out", "is a file")
    p = bench("export", "--store", url, "--out", str(tmp_path), cwd=tmp_path)
    one_line(p, "--out", "is a folder")
    # A path under a file is refused before any work, as bad input: a report, a speed measurement
    # or a tuning study must not run for minutes and then fail to write.
    under = tmp_path / "afile" / "x"
    for args, flag in [(("export", "--store", url, "--out", f"{under}.csv"), "--out"),
                       (("export", "--store", url, "--format", "pack", "--suite", "s", "--out", str(under)), "--out"),
                       (("report", "--store", url, "--out", str(under)), "--out"),
                       (("report", "--store", url, "--out", str(tmp_path / "rep"), "--screenshot", f"{under}.png"), "--screenshot"),
                       (("speed", "--timesteps", "64", "--json", f"{under}.json"), "--json"),
                       (("tune", "--algo", "ppo", "--env", "CartPole-v1", "--trials", "1",
                         "--store", f"sqlite:///{tmp_path / 't.db'}", "--export", f"{under}.yaml"), "--export")]:
        one_line(bench(*args, cwd=tmp_path), flag, "cannot be created", "afile is not a folder")
    assert (tmp_path / "afile").read_text() == "x"
    assert not (tmp_path / "rep").exists() and not (tmp_path / "t.db").exists()
    # What may be written passes, and the check creates nothing: an existing file (replaced), an
    # existing folder (filled), a new path in folders still to be made.
    from bench.cli.base import _writable

    for path, folder in [(tmp_path / "afile", False), (tmp_path, True), (tmp_path / "new" / "deeper" / "x.json", False),
                         (tmp_path / "new" / "rep", True)]:
        assert _writable("--out", path, folder=folder) == path
    assert not (tmp_path / "new").exists()


def test_case11_a_full_disk_is_one_line(tmp_path, tmpfs):
    m = tmpfs("small", size="160k")
    f = tiny(tmp_path, seeds="2000")
    p = bench("run", str(f), "--store", f"sqlite:///{m / 'b.db'}", cwd=tmp_path, timeout=120)
    # The store's path and the fix; it was "the results store at … failed: OperationalError: database or disk is full".
    one_line(p, f"the disk holding the results store at sqlite:///{m / 'b.db'} is full (database or disk is full); "
                "free space on it, or give --store a store on another disk", rc=1)


def test_case11_what_counts_as_a_full_disk():
    import errno
    from types import SimpleNamespace as NS

    import sqlalchemy as sa

    from bench.storage.urls import disk_full

    def wrapped(orig):
        return sa.exc.OperationalError("INSERT ...", {}, orig)

    assert disk_full(wrapped(Exception("database or disk is full")))  # SQLite's SQLITE_FULL
    pg = type("DiskFull", (Exception,), {"sqlstate": "53100"})("could not extend file \"base/5/16384\"")
    assert disk_full(wrapped(pg))  # PostgreSQL's disk_full (psycopg 3 names it sqlstate)
    assert disk_full(OSError(errno.ENOSPC, "No space left on device", "/x/bench.policies/a.pt"))
    assert not disk_full(wrapped(Exception("database is locked")))
    assert not disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not disk_full(wrapped(NS()))


# --------------------------------------------------------------------------- #
# 12. A store whose runs all failed still gets a report
# --------------------------------------------------------------------------- #
def test_case12_report_of_a_store_with_only_failed_runs_lists_them(tmp_path):
    from bench.storage.schema import RunResult

    f = tiny(tmp_path, seeds="[0, 1]")
    loaded = load_suite(f)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    db = Store(url)
    db.register(loaded.suite.name, str(f), loaded.suite.model_dump(mode="json"), loaded.env_meta, loaded.cells)
    for c in loaded.cells:
        a = db.claim(c.key, "elsewhere:1:1")
        empty = RunResult({}, {"step": [], "wall_s": [], "ret": [], "length": []}, [], [], {})
        db.finish(c.key, a, "failed", empty, error=f"Diverged: non-finite loss/value = nan at seed {c.seed} <b>")
    p = bench("report", "--store", url, "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "rep" / "index.html").read_text()
    for seed in (0, 1):
        assert f"non-finite loss/value = nan at seed {seed} &lt;b&gt;" in html
    p = bench("recommend", "--store", url, cwd=tmp_path)
    one_line(p, "no finished runs")


# --------------------------------------------------------------------------- #
# 13. Two suite files with the same name
# --------------------------------------------------------------------------- #
def test_case13_same_name_other_grid_is_refused_unless_replace(tmp_path):
    a = tiny(tmp_path, label="first", file="a.yaml")
    b = tiny(tmp_path, label="second", file="b.yaml")  # same name, same cell, another label
    url = f"sqlite:///{tmp_path / 'b.db'}"
    p = bench("run", str(a), "--store", url, "--workers", "1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = bench("run", str(b), "--store", url, cwd=tmp_path)
    one_line(p, "b.yaml", "suite 'tiny' is already in the store with another grid", "a.yaml", "--replace")
    assert Store(url).runs_frame("tiny")["label"].tolist() == ["first"]
    p = bench("run", str(a), "--store", url, cwd=tmp_path)  # the same grid again: fine
    assert p.returncode == 0 and "1 done already" in p.stderr, p.stderr
    p = bench("run", str(b), "--store", url, "--replace", cwd=tmp_path)
    assert p.returncode == 0 and "1 done already" in p.stderr, p.stderr
    assert Store(url).runs_frame("tiny")["label"].tolist() == ["second"]


def test_case13_store_level_conflict(store_url):
    from bench.storage.schema import SuiteConflict

    f = Path(__file__).resolve().parent.parent / "suites" / "smoke.yaml"
    loaded = load_suite(f)
    db = Store(store_url)
    db.register("s", "a.yaml", {}, loaded.env_meta, loaded.cells[:2])
    db.register("s", "a.yaml", {}, loaded.env_meta, loaded.cells[:2])
    with pytest.raises(SuiteConflict, match="another grid"):
        db.register("s", "b.yaml", {}, loaded.env_meta, loaded.cells[:3])
    assert len(db.runs_frame("s")) == 2
    db.register("s", "b.yaml", {}, loaded.env_meta, loaded.cells[:3], replace=True)
    assert len(db.runs_frame("s")) == 3


# --------------------------------------------------------------------------- #
# 14. Heartbeats during one long update
# --------------------------------------------------------------------------- #
def test_case14_heartbeats_keep_coming_during_a_long_update(tmp_path, monkeypatch):
    from bench.run import runner

    f = tiny(tmp_path)
    (cell,) = load_suite(f).cells
    url = f"sqlite:///{tmp_path / 'b.db'}"
    Store(url).register("tiny", str(f), {}, {}, [cell])
    seen: list[float] = []

    def one_long_update(c, recorder):
        t0 = time.time()
        x = 0
        while time.time() - t0 < 2.5:  # pure Python, holding the GIL as a long update does
            x += 1
        seen.append(Store(url).rows([c.key])[c.key].heartbeat_at - Store(url).rows([c.key])[c.key].started_at)
        recorder.after_update()

    monkeypatch.setattr(runner, "HEARTBEAT_EVERY_S", 0.25)
    monkeypatch.setattr(runner, "train_cell", one_long_update)
    runner._STORES.clear()
    out = runner.run_cell(StoreURL.parse(url), cell, "me:1:1")
    assert out.status == "done", out
    assert seen and seen[0] > 1.5, seen  # beats arrived while the update ran, not only after it


# --------------------------------------------------------------------------- #
# Usage errors and typed names are bad input like any other
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("args, needles", [
    (("speed", "--timesteps", "0"), ("bench speed:", "--timesteps", "greater than or equal to 1", "got '0'", "bench speed --help")),
    (("run", "s.yaml", "--workers=-3"), ("bench run:", "--workers", "got '-3'")),
    (("status",), ("bench status:", "Missing argument", "suite")),
    (("recommend", "--nope"), ("bench recommend:", "No such option: --nope")),
    (("nope",), ("bench:", "No such command 'nope'", "bench --help")),
])
def test_usage_errors_are_one_line_not_a_usage_box(tmp_path, args, needles):
    # click's own errors (an unknown option, a value out of range, a missing argument) print a boxed
    # usage text of a dozen lines; bench prints them as every other bad input: one line, exit 2.
    one_line(bench(*args, cwd=tmp_path), *needles)


def test_a_study_name_with_control_characters_is_refused_before_any_store(tmp_path):
    # Printed in every progress line (a terminal escape would be obeyed) and stored as Optuna's name.
    for name in ("a\x1b[31mb", "", "x" * 129, "tab\there"):
        p = bench("tune", "--algo", "ppo", "--env", "CartPole-v1", "--trials", "1", "--study", name,
                  "--store", f"sqlite:///{tmp_path / 't.db'}", cwd=tmp_path)
        one_line(p, "--study:", "allowed: 1 to 128 printable characters")
        assert "\x1b" not in p.stderr  # shown escaped
    assert not (tmp_path / "t.db").exists()


@pytest.mark.parametrize("args", [("schema",), ("envs",), ("--help",)])
def test_a_reader_that_goes_away_is_not_an_error(tmp_path, args):
    # `bench schema | head -1`: the pipe's reader exits first and the next write fails with EPIPE. That is
    # not bad input and not a failure of bench, so no "error:" line (schema printed one before); the exit
    # status is 1, as rich's console gives the commands that print through it. The read end is closed
    # before bench writes anything, so the first write fails every time.
    p = subprocess.Popen([sys.executable, "-m", "bench", *args], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=120) == 1, err
    assert err == "", err
