"""`bench run --remeasure contended`: a done run that shared its core is measured again, and replaced
only by a new run that had its core to itself; the earlier run is never lost on the way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from bench.run import runner
from bench.run.runner import remeasure_cell, run_cell
from bench.storage.owners import this_owner
from bench.storage.schema import runs
from bench.storage.store import Store
from bench.storage.vocabulary import CONTENTION_RATIO, is_contended
from bench.suites.suite import load_suite
from bench.storage.urls import StoreURL

SMOKE = Path(__file__).resolve().parent.parent / "suites" / "smoke.yaml"


def _one_done_run(url, *, algo="ppo", impl="bench"):
    loaded = load_suite(SMOKE)
    cell = next(c for c in loaded.cells if c.algo == algo and c.impl == impl and c.env_id == "CartPole-v1" and c.seed == 0)
    db = Store(url)
    db.register("smoke", str(SMOKE), {}, loaded.env_meta, [cell])
    assert run_cell(StoreURL.parse(url), cell, this_owner()).status == "done"
    return db, cell


def _contend(db, key, factor=3.0):
    """Make the stored run look as if it had shared its core: wall seconds ``factor`` × its CPU seconds."""
    with db.engine.begin() as c:
        cpu = c.execute(sa.select(runs.c.cpu_s).where(runs.c.key == key)).scalar()
        c.execute(runs.update().where(runs.c.key == key).values(wall_s=factor * cpu))
    return cpu


def test_is_contended_by_the_ratio():
    assert is_contended(1.3, 1.0) and not is_contended(CONTENTION_RATIO, 1.0) and not is_contended(1.0, 1.0)
    assert not is_contended(None, 1.0) and not is_contended(1.0, None) and not is_contended(1.0, 0.0)


def test_a_contended_run_is_replaced_and_its_earlier_clocks_kept(store_url, monkeypatch):
    db, cell = _one_done_run(store_url)
    before_eps = db.episodes_of(cell.key)
    before = db.rows([cell.key])[cell.key]
    cpu = _contend(db, cell.key)

    # Whether the new run gets a core to itself depends on what else this machine runs (the tests
    # run two at a time): here it is taken as quiet; the next test takes it as contended.
    monkeypatch.setattr("bench.storage.vocabulary.is_contended", lambda wall, cpu: False)
    out = remeasure_cell(StoreURL.parse(store_url), cell)
    assert out.status == "done", out.error
    assert "re-measured" in out.note and "the same returns" in out.note
    row = db.rows([cell.key])[cell.key]
    assert row.status == "done" and row.attempt == before.attempt + 1
    assert row.wall_s < 3.0 * cpu and row.total_steps == before.total_steps
    meta = json.loads(row.meta)
    # The same seed on the same machine gives the same returns: the re-measurement checks it.
    assert meta["same_returns"] is True
    after_eps = db.episodes_of(cell.key)
    assert after_eps["ret"].tolist() == before_eps["ret"].tolist()
    assert after_eps["step"].tolist() == before_eps["step"].tolist()
    earlier = meta["earlier_measurements"]
    assert len(earlier) == 1 and earlier[0]["attempt"] == before.attempt
    assert earlier[0]["wall_s"] == 3.0 * cpu and earlier[0]["cpu_s"] == cpu
    assert earlier[0]["started_at"] == json.loads(before.meta)["started_at"]
    assert "cpu_probe_ms" in earlier[0] and "cpu_probe_ms" in meta


def test_a_failed_or_contended_remeasurement_keeps_the_earlier_run(store_url, monkeypatch):
    db, cell = _one_done_run(store_url)
    _contend(db, cell.key)
    kept = db.rows([cell.key])[cell.key]
    n_eps = len(db.episodes_of(cell.key))

    def unchanged():
        row = db.rows([cell.key])[cell.key]
        assert (row.status, row.attempt, row.wall_s, row.cpu_s, row.meta) == (
            kept.status, kept.attempt, kept.wall_s, kept.cpu_s, kept.meta)
        assert len(db.episodes_of(cell.key)) == n_eps

    real = runner.record_cell
    monkeypatch.setattr(runner, "record_cell", lambda c, recorder=None: (real(c, recorder=recorder)[0], "RuntimeError: boom"))
    out = remeasure_cell(StoreURL.parse(store_url), cell)
    assert out.status == "failed" and "earlier run is kept" in out.error and "boom" in out.error
    unchanged()
    monkeypatch.setattr(runner, "record_cell", real)

    # A re-measurement that shared its core too is no better: the earlier run stays.
    monkeypatch.setattr("bench.storage.vocabulary.is_contended", lambda wall, cpu: True)
    out = remeasure_cell(StoreURL.parse(store_url), cell)
    assert out.status == "skipped" and "contended again" in out.error
    unchanged()


def test_other_returns_are_explained_by_what_changed():
    why = runner._why_other_returns
    base = {"git_commit": "a" * 40, "cpu_model": "EPYC", "cpu_id": "25/17/1"}
    assert why(base, dict(base)) == ""
    # A run from before CPUID was recorded: the name is all there is, and it covers CPUs that round differently.
    assert why({**base, "cpu_id": None}, base) == " (perhaps another CPU of the same name (no CPUID was recorded then))"
    assert why({**base, "git_commit": "b" * 40}, base) == " (another commit (bbbbbbbb → aaaaaaaa))"
    # Another commit need not compute differently: where the earlier CPU is not known past its name, both stay open.
    assert why({**base, "git_commit": "b" * 40, "cpu_id": None}, base) == (
        " (another commit (bbbbbbbb → aaaaaaaa); or another CPU of the same name (no CPUID was recorded then))")
    assert why({**base, "cpu_model": "Xeon"}, base) == " (another CPU, whose float rounding may differ)"
    assert why({**base, "cpu_id": "6/207/2"}, {**base, "git_commit": "c" * 40}) == (
        " (another commit (aaaaaaaa → cccccccc); another CPU, whose float rounding may differ)")
    avx2 = {"cpu_simd": ["avx2", "fma"], "torch_cpu_capability": "AVX2"}
    avx512 = {"cpu_simd": ["avx2", "fma", "avx512f"], "torch_cpu_capability": "AVX512"}
    assert why({**base, "float_paths": avx2}, {**base, "float_paths": avx512}) == (
        " (another CPU, whose float rounding may differ)")
    assert why({**base, "versions": {"torch": "2.13.0", "numpy": "2.3.0"}},
               {**base, "versions": {"torch": "2.13.0", "numpy": "2.4.0"}}) == " (other package versions (numpy))"


def test_replace_done_is_refused_once_the_run_moved_on(store_url):
    db, cell = _one_done_run(store_url)
    row = db.rows([cell.key])[cell.key]
    result, error, started = runner.measure_cell(cell)
    assert error is None
    assert not db.replace_done(cell.key, row.attempt + 1, result, started)  # another runner replaced it first
    assert db.rows([cell.key])[cell.key].attempt == row.attempt
    with db.engine.begin() as c:
        c.execute(runs.update().where(runs.c.key == cell.key).values(status="failed"))
    assert not db.replace_done(cell.key, row.attempt, result, started)  # only a done run is replaced
    # A cell that is not a done run has nothing to re-measure.
    assert remeasure_cell(StoreURL.parse(store_url), cell).status == "skipped"


@pytest.mark.heavy
def test_cli_remeasures_only_the_contended_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    only = ["--only", "env=CartPole-v1,algo=ppo,seed=0"]

    def bench(*args):
        return subprocess.run([sys.executable, "-m", "bench", "run", str(SMOKE), "--store", url, *only, *args],
                              capture_output=True, text=True, cwd=tmp_path, timeout=600)

    first = bench()
    assert first.returncode == 0, first.stderr
    db = Store(url)
    df = db.runs_frame("smoke")
    df = df[df["status"] == "done"]  # the suite's other cells are registered, not run
    assert len(df) == 2  # own PPO and SB3 PPO
    contended_key, quiet_key = df["key"]
    _contend(db, contended_key)
    _contend(db, quiet_key, factor=1.0)  # whatever this machine's load was during the first run
    quiet = db.rows([quiet_key])[quiet_key]
    kept = db.rows([contended_key])[contended_key]

    status = subprocess.run([sys.executable, "-m", "bench", "status", str(SMOKE), "--store", url], capture_output=True,
                            text=True, cwd=tmp_path, timeout=600)
    assert status.returncode == 0 and "1 of the done runs shared their core" in " ".join(status.stdout.split())

    dry = bench("--remeasure", "contended", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    line = next(ln for ln in dry.stdout.splitlines() if contended_key in ln)
    assert "contended" in line
    assert "contended" not in next(ln for ln in dry.stdout.splitlines() if quiet_key in ln)

    again = bench("--remeasure", "contended")
    assert again.returncode == 0, again.stderr
    assert "2 done already (1 of them contended, to measure again)" in again.stderr and "1 to run" in again.stderr
    rows = db.rows([contended_key, quiet_key])
    assert rows[quiet_key].attempt == quiet.attempt and rows[quiet_key].meta == quiet.meta  # untouched
    # The new run replaced the contended one only if it had its core to itself (on a loaded test
    # machine it may not have: then the earlier run is kept, and says so).
    if "re-measured" in again.stderr:
        assert rows[contended_key].attempt == 2 and not is_contended(rows[contended_key].wall_s, rows[contended_key].cpu_s)
        left = 0
    else:
        assert "contended again" in again.stderr and "the earlier run is kept" in again.stderr
        assert rows[contended_key].attempt == kept.attempt and rows[contended_key].meta == kept.meta
        left = 1
    last = bench("--remeasure", "contended", "--dry-run")
    assert ("contended" in next(ln for ln in last.stdout.splitlines() if contended_key in ln)) == bool(left)

    bad = bench("--remeasure", "slow")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "'slow'" in bad.stderr
    assert "Traceback" not in bad.stderr
