"""Issue 44, inputs and integrity: a shipped reference that cannot change silently, store URLs that never
show a password and are read literally, closed or broken standard streams, whole env keys in ``bench
status``, and suites whose labels run the same cells or whose budgets are past reason.

Each test reproduces a case of the issue and checks the fixed behaviour: bad input is one line and exit
status 2 with nothing written, and no traceback anywhere.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from synthetic import Planted, write_store

from bench.cli import app
from bench.envs.registry import REGISTRY
from bench.storage import packed, packload
from bench.storage.schema import StoreError
from bench.storage.store import Store
from bench.storage.urls import check_url, describe_url, hide_password, redact
from bench.suites.cost import CONFIRM_CPU_HOURS, estimate
from bench.suites.suite import SuiteError, load_suite

ROOT = Path(__file__).resolve().parent.parent
#: A small shipped pack (190 KB, 20 done runs, no sibling): the copy each test damages.
SMALL_PACK = ROOT / "results" / "reference" / "claim-reinforce-baseline"
RESTORE = "git checkout -- results/reference"


def cli(args: list[str], env: dict[str, str] | None = None):
    res = CliRunner().invoke(app, args, env=env)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.stdout + res.stderr, res.stderr
    return res


def bench(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, **kw)


def one_line(res, *needles: str, code: int = 2) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.exit_code == code and len(lines) == 1, (res.exit_code, res.stderr)
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# --------------------------------------------------------------------------- #
# 1. The shipped reference is verified
# --------------------------------------------------------------------------- #
@pytest.fixture
def reference(tmp_path, monkeypatch) -> Path:
    """A copy of one small shipped pack as the whole reference (BENCH_REFERENCE_DIR), its cache in tmp_path,
    and a working directory with no store of its own."""
    ref = tmp_path / "ref"
    shutil.copytree(SMALL_PACK, ref / SMALL_PACK.name)
    monkeypatch.setenv(packed.REFERENCE_ENV, str(ref))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return ref / SMALL_PACK.name


def flip_bit(f: Path, at: int) -> bytes:
    data = f.read_bytes()
    b = bytearray(data)
    b[at] ^= 0x01
    f.write_bytes(bytes(b))
    return data


def test_every_shipped_pack_lists_and_matches_the_sha256_of_every_file():
    packs = packed.packs_under(ROOT / "results" / "reference")
    assert len(packs) >= 18
    for p in packs:
        m = packed.verify(p)  # raises on any mismatch
        assert set(m[packed.FILES]) == {f.name for f in p.iterdir() if f.name != packed.MANIFEST}, p


def test_a_fresh_install_runs_the_mujoco_every_shipped_mujoco_and_robotics_run_recorded():
    """gymnasium[mujoco] admits any newer MuJoCo, which may change the dynamics those packs were measured on, so
    pyproject pins the version their runs recorded, and the test environment has it."""
    pin = re.search(r'"mujoco==([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    recorded: Counter[str] = Counter()
    for p in packed.packs_under(ROOT / "results" / "reference"):
        if not (p / "runs.parquet").is_file():  # a tuning pack: studies, no runs
            continue
        runs = pd.read_parquet(p / "runs.parquet", columns=["env_id", "meta"])
        for env_id, meta in zip(runs["env_id"], runs["meta"]):
            spec = REGISTRY.get(env_id)
            if spec is not None and spec.family in ("mujoco", "robotics") and meta:
                recorded[json.loads(meta)["versions"]["mujoco"]] += 1
    assert sum(recorded.values()) >= 250, recorded  # 275 in 8 packs (mujoco, continuous-dense, pointmaze, ...)
    assert set(recorded) == {pin}, (pin, recorded)
    assert importlib.metadata.version("mujoco") == pin


def test_a_flipped_bit_in_any_file_of_a_pack_makes_recommend_refuse_naming_the_file(reference):
    ok = cli(["recommend"])
    assert ok.exit_code == 0, ok.stderr
    files = sorted(reference.iterdir())
    assert {f.name for f in files} >= {"runs.parquet", "episodes.parquet", packed.MANIFEST}
    for f in files:
        for at in (0, f.stat().st_size // 2, f.stat().st_size - 2):  # header, middle, footer
            data = flip_bit(f, at)
            try:
                one_line(cli(["recommend"]), str(f), RESTORE)
            finally:
                f.write_bytes(data)
    assert cli(["recommend"]).exit_code == 0  # restored: answers again, from the cache it built


def test_a_missing_malformed_or_incomplete_manifest_or_a_truncated_table_is_one_line(reference):
    manifest = reference / packed.MANIFEST
    good = manifest.read_text()
    manifest.unlink()  # was: the pack silently dropped, the answer changed
    one_line(cli(["recommend"]), str(manifest), "missing", RESTORE)
    for bad, says in (("[1, 2]", "not a pack manifest"), ("{", "not JSON"), ('{"suite": "x"}', "sha256")):
        manifest.write_text(bad)  # was: "internal error: AttributeError"
        one_line(cli(["recommend"]), str(manifest), says, RESTORE)
    m = json.loads(good)
    del m[packed.FILES]["evaluations.parquet"]  # a file the reader would open, not listed
    manifest.write_text(json.dumps(packed.sealed(m)))
    one_line(cli(["recommend"]), str(reference / "evaluations.parquet"), "not listed", RESTORE)
    manifest.write_text(good)
    runs = reference / "runs.parquet"
    runs.write_bytes(runs.read_bytes()[:1000])  # was: "internal error: ArrowInvalid"
    one_line(cli(["report", "--out", str(reference.parent.parent / "rep")]), str(runs), RESTORE)
    assert not (reference.parent.parent / "rep").exists()
    # `bench import` checks the same way, before any store is written.
    one_line(cli(["import", str(reference), "--store", f"sqlite:///{reference.parent.parent / 'x.db'}"]), str(runs))
    assert not (reference.parent.parent / "x.db").exists()


def test_the_cache_is_trusted_only_when_it_records_the_packs_it_was_built_from(tmp_path):
    shutil.copytree(SMALL_PACK, tmp_path / "ref" / SMALL_PACK.name)
    packs = packed.packs_under(tmp_path / "ref")
    cache = tmp_path / "cache" / "reference.db"
    url = packload.unpack(packs, cache)
    assert packload.built_from(cache) == packload.fingerprint(packs)
    n_runs = sqlite3.connect(cache).execute("select count(*) from runs").fetchone()[0]
    assert n_runs == 20
    # A planted store where the cache was, with the old stamp file beside it: rebuilt, not read.
    cache.unlink()
    write_store(f"sqlite:///{cache}", ["CartPole-v1"], [Planted("reinforce", "reinforce", "bench", 0.99)], seeds=3)
    (cache.parent / "reference.db.fingerprint").write_text(packload.fingerprint(packs) + "\n")
    built = []
    assert packload.unpack(packs, cache, on_build=lambda: built.append(1)) == url and built == [1]
    assert sqlite3.connect(cache).execute("select count(*) from runs").fetchone()[0] == n_runs
    assert packload.unpack(packs, cache, on_build=lambda: built.append(2)) == url and built == [1]  # current: kept


def test_the_cache_folder_is_private_to_this_user(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")  # ~/.cache that cannot be used
    mine = packload.private_cache_dir(blocked / "bench")
    assert mine == tmp_path / "tmp" / f"bench-cache-{os.getuid()}" and (mine.stat().st_mode & 0o777) == 0o700
    # A folder that others can write (a shared temporary folder, as the fallback was) is never used.
    mine.chmod(0o777)
    other = packload.private_cache_dir(blocked / "bench")
    assert other not in (mine, blocked / "bench") and other.parent == tmp_path / "tmp"
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert packload.private_cache_dir(shared) != shared


# --------------------------------------------------------------------------- #
# 2-3. Store URLs: passwords never shown; '?' and '%' in SQLite paths refused
# --------------------------------------------------------------------------- #
SECRET = "Hunter2pw"
BAD_URLS = [f"postgresql://postgres:{SECRET}@127.0.0.1:notaport/db", f"mysql://root:{SECRET}@host/x",
            f"postgresql://u:{SECRET}@h@x/db", f"postgresql://postgres:{SECRET}", f"sqlite://u:{SECRET}@/x?y",
            # A password typed with a raw leading '@' and no '@host' after it reads as an empty password and
            # a host: nothing after 'user:@' is shown, and the form is refused (found by the fuzz test).
            f"postgresql://postgres:@{SECRET}127.0.0.1:5/db"]


def test_hide_password_works_on_urls_sqlalchemy_cannot_parse():
    for url in BAD_URLS:
        assert SECRET not in hide_password(url) and SECRET not in describe_url(url), url
        assert SECRET not in redact(f"error: '{url}' failed: {url}"), url
    assert hide_password("postgresql://u:p/w@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert hide_password("postgresql://h:5432/db") == "postgresql://h:5432/db"  # a port, not a password
    assert hide_password("sqlite:////a:b@c/d.db") == "sqlite:////a:b@c/d.db"  # a path, not a user part


@pytest.mark.parametrize("url", BAD_URLS)
def test_no_command_shows_the_password_of_a_bad_store_url(tmp_path, url):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nseeds: [0]\ndefaults: {timesteps: 300}\nenvs: [{id: CartPole-v1}]\n"
                     "algorithms: [{algo: a2c, impl: bench}]\n")
    for args in (["run", str(suite), "--dry-run"], ["status", str(suite)], ["run", str(suite)],
                 ["report", "--out", str(tmp_path / "r")], ["recommend"],
                 ["export", "--out", str(tmp_path / "o.csv")], ["import", str(SMALL_PACK)]):
        res = cli([*args, "--store", url])
        assert SECRET not in res.stdout + res.stderr, (args, res.stderr)
        assert res.exit_code == 2, (args, res.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


@pytest.mark.parametrize("path, says", [("q?mark/b.db", "'?'"), ("a%20b/b.db", "'%'"), ("c%3Fd.db", "'%'")])
def test_sqlite_paths_with_question_marks_or_percents_are_refused_not_reinterpreted(tmp_path, path, says):
    url = f"sqlite:///{tmp_path / path}"
    with pytest.raises(StoreError, match=says):
        check_url(url)
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nseeds: [0]\ndefaults: {timesteps: 300}\nenvs: [{id: CartPole-v1}]\n"
                     "algorithms: [{algo: a2c, impl: bench, hyperparams: {n_envs: 1, n_steps: 8}}]\n")
    one_line(cli(["run", str(suite), "--store", url, "--workers", "1"]), "--store", says)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]  # no file named q, no folder "a b"


# --------------------------------------------------------------------------- #
# 4. Closed or broken stdout and stderr
# --------------------------------------------------------------------------- #
def _closing(fd: int):
    return lambda: os.close(fd)


@pytest.mark.parametrize("fd", [1, 2])
def test_commands_run_with_stdout_or_stderr_closed(tmp_path, fd):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nseeds: [0]\ndefaults: {timesteps: 300}\nenvs: [{id: CartPole-v1}]\n"
                     "algorithms: [{algo: a2c, impl: bench}]\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    Store(empty).dispose()  # status needs a store to show a table; on a missing one it is one line, exit 2 (issue 43)
    for args, rc in ((["schema"], 0), (["envs"], 0), (["status", str(suite), "--store", empty], 0),
                     (["status", str(suite), "--store", url], 2), (["run", str(suite), "--dry-run", "--store", url], 0),
                     (["status", "nope.yaml"], 2)):
        p = bench(*args, cwd=tmp_path, preexec_fn=_closing(fd))  # was: 'NoneType' object has no attribute 'isatty'
        assert p.returncode == rc, (args, p.stdout, p.stderr)
        assert "Traceback" not in p.stdout + p.stderr, (args, p.stderr)
    assert not (tmp_path / "s.db").exists()


def test_a_reader_that_goes_away_stops_a_command_quietly(tmp_path):
    for args in (["schema"], ["envs"]):
        for stream in ("stdout", "stderr"):
            sh = f"{sys.executable} -m bench {' '.join(args)} {'2>&1 ' if stream == 'stderr' else ''}| head -c 1"
            p = subprocess.run(["bash", "-c", f"set -o pipefail; {sh} >/dev/null"], capture_output=True,
                               text=True, cwd=tmp_path, timeout=120)
            assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, (args, p.stderr)
            assert p.returncode in (0, 1), (args, p.returncode, p.stderr)


# --------------------------------------------------------------------------- #
# 5. `bench status` shows whole env keys
# --------------------------------------------------------------------------- #
def test_status_shows_whole_env_keys(tmp_path):
    variants = [{"max_episode_steps": 100 + i, "sutton_barto_reward": True} for i in range(7)]
    suite = tmp_path / "s.yaml"
    suite.write_text(json.dumps({"name": "s", "seeds": [0], "defaults": {"timesteps": 1000},
                                 "envs": [{"id": "CartPole-v1", "kwargs": k} for k in variants],
                                 "algorithms": [{"algo": "a2c", "impl": "bench", "label": "a-rather-long-label-x" * 3}]}))
    keys = sorted({c.env_id for c in load_suite(suite).cells})
    assert len(keys) == 7
    url = f"sqlite:///{tmp_path / 's.db'}"
    Store(url).dispose()  # an empty store: every cell pending (status refuses a store that is not there)
    res = cli(["status", str(suite), "--store", url])
    assert res.exit_code == 0, res.stderr
    text = "".join(ln.split("│")[1].strip() if "│" in ln else "" for ln in res.stdout.splitlines())
    for k in keys:  # each key read whole from its folded lines (was: cut with "…", all 7 alike)
        assert k in text, (k, res.stdout)
    assert "…" not in res.stdout


# --------------------------------------------------------------------------- #
# 6. Suites: labels that run the same cells; budgets past reason
# --------------------------------------------------------------------------- #
def test_two_labels_that_resolve_to_the_same_cells_are_refused_naming_both(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nseeds: [0, 1]\ndefaults: {timesteps: 1000}\nenvs: [{id: CartPole-v1}]\n"
                     "algorithms:\n  - {algo: ppo, impl: bench, label: first}\n"
                     "  - {algo: ppo, impl: bench, label: second}\n")
    with pytest.raises(SuiteError) as e:
        load_suite(suite)
    assert len(e.value.lines) == 1 and "'first'" in e.value.lines[0] and "'second'" in e.value.lines[0]
    res = cli(["run", str(suite), "--store", f"sqlite:///{tmp_path / 's.db'}"])
    one_line(res, "algorithms[1]", "'first'", "'second'", "same cells")
    assert not (tmp_path / "s.db").exists()


def test_a_budget_past_reason_needs_yes_after_an_estimate_of_its_cost(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nseeds: [0, 1]\ndefaults: {timesteps: 1.0e+15}\nenvs: [{id: CartPole-v1}]\n"
                     "algorithms: [{algo: a2c, impl: bench}]\n")
    loaded = load_suite(suite)
    cost = estimate(loaded.cells, loaded.env_meta)
    scale = loaded.env_meta["CartPole-v1"]["time_scale_us"]
    assert cost.cpu_hours == pytest.approx(2 * 1e15 * scale / 1e6 / 3600) and cost.needs_confirmation()
    url = f"sqlite:///{tmp_path / 's.db'}"
    one_line(cli(["run", str(suite), "--store", url]), "CPU-hours", "--yes")
    assert not (tmp_path / "s.db").exists()
    dry = cli(["run", str(suite), "--store", url, "--dry-run"])
    assert dry.exit_code == 0 and "estimated cost: about" in dry.stdout and "CPU-hours" in dry.stdout


def test_the_cost_estimate_by_hand_and_for_envs_without_a_time_scale():
    from types import SimpleNamespace as C

    cells = [C(env_id="a", timesteps=10**6, cpu_seconds=None), C(env_id="a", timesteps=10**6, cpu_seconds=60.0),
             C(env_id="b", timesteps=10**9, cpu_seconds=None)]
    cost = estimate(cells, {"a": {"time_scale_us": 300.0}, "b": {"time_scale_us": None}})
    assert cost.cpu_hours == pytest.approx((300.0 + 60.0) / 3600) and cost.unknown == ("b",)
    assert cost.needs_confirmation()  # 1e9 steps of an env never timed
    assert cost.line().startswith("about 0.1 CPU-hours for 2 cells (") and "unknown for 1 cell on b (" in cost.line()
    only_b = estimate(cells[2:], {"b": {}})
    assert only_b.line().startswith("unknown for 1 cell on b (") and "CPU-hours" not in only_b.line()
    small = estimate(cells[:2], {"a": {"time_scale_us": 300.0}})
    assert not small.needs_confirmation() and small.cpu_hours < CONFIRM_CPU_HOURS


def test_a_large_dry_run_prints_plain_lines_for_every_cell(tmp_path, monkeypatch):
    from bench.cli import running

    monkeypatch.setattr(running, "DRY_RUN_TABLE_MAX", 2)  # a 100,000-cell dry run took 40 s as a rich table
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nseeds: 3\ndefaults: {timesteps: 1000}\nenvs: [{id: CartPole-v1}]\n"
                     "algorithms: [{algo: a2c, impl: bench, label: a}]\n")
    res = cli(["run", str(suite), "--dry-run", "--store", f"sqlite:///{tmp_path / 's.db'}"])
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "s: 3 cells (dry run, nothing written)" and lines[1].split() == [
        "key", "env", "label", "seed", "timesteps", "threshold"]
    assert [ln.split()[1:4] for ln in lines[2:5]] == [["CartPole-v1", "a", str(s)] for s in range(3)]
    assert "estimated cost: about" in lines[5] and not (tmp_path / "s.db").exists()
