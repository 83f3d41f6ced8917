"""Cluster runs: the Ray executor, a shared PostgreSQL store, status across hosts.

The Ray tests share one real local Ray instance (``ray.init(num_cpus=2)``,
module scope) and write into a real PostgreSQL server; each skips with a
message when Ray is not installed or no server is reachable (see conftest.py).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from bench.storage.owners import STALE_AFTER_S, owner_tag, this_owner
from bench.storage.store import Store
from bench.suites.suite import SuiteError, load_suite, parse_only, select
from bench.storage.urls import StoreURL

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "suites" / "smoke.yaml"
#: Both implementations of PPO, two seeds: a quarter of a minute of the smoke suite.
SMOKE_SUBSET = "env=CartPole-v1,algo=ppo"


def bench(*args, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


#: One Ray instance for the module: under pytest-xdist these tests run in one process, in turn.
pytestmark = pytest.mark.xdist_group("ray")

@pytest.fixture(scope="module")
def ray_address():
    """One local Ray instance for the module; yields its address for other drivers to connect to."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'onpolicy-bench[ray]')")
    from bench.run.ray_executor import connect

    assert connect(None, 2)  # as `bench run --executor ray` starts its private instance: workers at nice 0
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def returns_by_key(url: str, keys: list[str]) -> dict[str, list[float]]:
    db = Store(url)
    return {k: db.episodes_of(k)["ret"].tolist() for k in keys}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- #
# Suite resources: scheduling only
# --------------------------------------------------------------------------- #
def test_resources_are_scheduling_only_and_the_larger_request_wins(tmp_path):
    base = ("name: r\nseeds: [0]\ndefaults: {{timesteps: 2048}}\nenvs:\n  - id: CartPole-v1{env}\n"
            "algorithms:\n  - {{algo: ppo, impl: sb3{algo}}}\n")
    plain = load_suite(_write(tmp_path / "a.yaml", base.format(env="", algo=""))).cells
    asked = load_suite(_write(tmp_path / "b.yaml", base.format(
        env="\n    resources: {num_cpus: 4}", algo=", resources: {num_cpus: 2, num_gpus: 0.5}"))).cells
    assert [c.key for c in plain] == [c.key for c in asked]  # same runs, same keys: resources change where, not what
    assert plain[0].resources == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert asked[0].resources == {"num_cpus": 4.0, "num_gpus": 0.5}

    with pytest.raises(SuiteError) as e:
        load_suite(_write(tmp_path / "c.yaml", base.format(env="", algo=", resources: {num_cpus: 0, gpus: 1}")))
    text = "\n".join(e.value.lines)
    assert "algorithms[0].resources.num_cpus" in text and "(got 0)" in text
    assert "algorithms[0].resources.gpus: unknown key; allowed: num_cpus, num_gpus" in text


# --------------------------------------------------------------------------- #
# The CLI: refusals and status
# --------------------------------------------------------------------------- #
def test_sqlite_is_refused_with_a_remote_executor(tmp_path):
    db = tmp_path / "bench.db"
    p = bench("run", str(SMOKE), "--executor", "ray", "--address", "10.0.0.1:6379", "--store", f"sqlite:///{db}", cwd=tmp_path)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("--store: SQLite is not for several hosts") and "postgresql" in lines[0]
    assert "Traceback" not in p.stderr and not db.exists()

    p = bench("run", str(SMOKE), "--address", "auto", "--store", f"sqlite:///{db}", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip() == (
        "--address: only used with --executor ray (got --address 'auto' with --executor local)"
    )
    assert not db.exists()


def test_a_retried_task_takes_over_its_own_run_from_another_host(tmp_path):
    """Another host's pid cannot be checked, but a retry carries its task's tag: it takes over at once."""
    suite = _write(tmp_path / "t.yaml", "name: t\nseeds: 1\ndefaults: {timesteps: 2048}\n"
                   "envs: [{id: CartPole-v1}]\nalgorithms: [{algo: ppo, impl: sb3}]\n")
    loaded = load_suite(suite)
    (cell,) = loaded.cells
    db = Store(f"sqlite:///{tmp_path / 'bench.db'}")
    db.register("t", str(suite), {}, loaded.env_meta, loaded.cells)
    assert db.claim(cell.key, "ray-aaaa@node-7:4242:1") == 1  # fresh heartbeat, on a host we cannot ask
    assert db.claim(cell.key, this_owner()) is None  # an untagged runner waits for the heartbeat to go stale
    assert db.claim(cell.key, this_owner("ray-bbbb")) is None  # so does another task
    assert db.claim(cell.key, this_owner("ray-aaaa")) == 2  # the same task, retried: its earlier attempt is gone


def test_status_shows_running_stale_and_hosts(tmp_path):
    suite = _write(tmp_path / "s.yaml", "name: s\nseeds: 3\ndefaults: {timesteps: 2048}\n"
                   "envs: [{id: CartPole-v1}]\nalgorithms: [{algo: ppo, impl: sb3}]\n")
    loaded = load_suite(suite)
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    db = Store(url)
    db.register("s", str(suite), {}, loaded.env_meta, loaded.cells)
    c0, c1, _ = loaded.cells
    # A run on another host with a fresh heartbeat is running; ours, by a dead process, is stale.
    assert db.claim(c0.key, "ray-abc@node-7:4242:1") is not None
    dead = subprocess.run([sys.executable, "-c", "from bench.storage.owners import this_owner; print(this_owner('ray-x'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert db.claim(c1.key, dead) is not None
    p = bench("status", str(suite), "--store", url, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"│ CartPole-v1 │ ppo-sb3 │ (\d) .*", p.stdout)}
    assert " running " in rows[0] and " node-7 " in rows[0] and "s ago" in rows[0]
    assert " stale " in rows[1] and f" {dead.split('@')[1].split(':')[0]} " in rows[1]
    assert " pending " in rows[2]
    assert "pending: 1, running: 1, stale: 1" in p.stdout


# --------------------------------------------------------------------------- #
# Ray
# --------------------------------------------------------------------------- #
@pytest.mark.heavy  # ~50 s / ~25 s of CI's 2 cores; `nox -s heavy` (docs/testing.md)
def test_ray_gives_the_local_pools_returns(ray_address, pg_url, tmp_path):
    """The smoke suite's PPO cells on Ray into PostgreSQL equal the local pool's into SQLite, episode by episode."""
    cells = select(load_suite(SMOKE).cells, parse_only(SMOKE_SUBSET))
    assert {c.impl for c in cells} == {"sb3", "bench"} and len(cells) == 4
    on_ray = bench("run", str(SMOKE), "--only", SMOKE_SUBSET, "--executor", "ray", "--address", ray_address,
                   "--store", pg_url, cwd=tmp_path)
    assert on_ray.returncode == 0, on_ray.stderr + on_ray.stdout
    assert "4 done, 0 failed" in on_ray.stdout and f"the Ray cluster at {ray_address}" in on_ray.stderr
    local_url = f"sqlite:///{tmp_path / 'local.db'}"
    local = bench("run", str(SMOKE), "--only", SMOKE_SUBSET, "--workers", "2", "--store", local_url, cwd=tmp_path)
    assert local.returncode == 0, local.stderr

    keys = [c.key for c in cells]
    ray_returns, local_returns = returns_by_key(pg_url, keys), returns_by_key(local_url, keys)
    assert all(len(r) > 5 for r in ray_returns.values())
    assert ray_returns == local_returns

    import json

    rows = Store(pg_url).rows(keys)
    for r in rows.values():
        assert r.status == "done" and r.attempt == 1
        assert (owner_tag(r.owner) or "").startswith("ray-")  # claimed by the Ray worker itself, not the driver
        meta = json.loads(r.meta)
        assert meta["torch_threads"] == 1 and meta["blas_threads"] == 1
        # Not Ray's default niceness 15, under which a run beside any busy process all but stops.
        assert meta["nice"] == 0
    assert len({r.owner for r in rows.values()}) == 4  # one tag per task
    status = bench("status", str(SMOKE), "--store", pg_url, cwd=tmp_path)
    assert status.returncode == 0 and "done: 4" in status.stdout


def _kill_mid_run(pg_url: str, cells, victim, **run_ray_kw):
    """Run ``cells`` with ``run_ray`` in a thread; SIGKILL the worker running ``victim`` mid-run.

    Returns (outcomes, the killed owner string, when it was killed).
    """
    from bench.run.ray_executor import run_ray

    outcomes: list = []
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            run_ray(StoreURL.parse(pg_url), cells, lambda c, o: outcomes.append((c, o)), **run_ray_kw)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    driver = threading.Thread(target=drive)
    driver.start()
    eng = sa.create_engine(pg_url)
    owner = None
    deadline = time.time() + 120
    while time.time() < deadline and owner is None:
        with eng.connect() as c:
            row = c.execute(sa.text("select status, owner from runs where key = :k"), {"k": victim.key}).first()
        if row is not None and row.status == "running" and row.owner:
            owner = row.owner
        else:
            time.sleep(0.05)
    eng.dispose()
    assert owner is not None, "the cell never started running"
    pid = int(owner.rsplit("@", 1)[1].split(":")[1])  # TAG@host:pid:start: the Ray worker, not this process
    assert pid != os.getpid()
    time.sleep(0.5)  # mid-run, not mid-claim
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    # A bound on a hung driver, not a speed claim: the retry reruns 65,536 steps from the start. It took
    # over 180 s on 2 cores beside two busy processes while Ray ran its workers at niceness 15; at 0
    # (bench.run.ray_executor.WORKER_NICENESS), 13 s beside the same load.
    driver.join(timeout=600)
    assert not driver.is_alive() and not errors, errors
    return outcomes, owner, killed_at


def _suite(tmp_path: Path, pg_url: str, algos: str):
    suite = _write(tmp_path / "kill.yaml", "name: kill\nseeds: [0]\ndefaults: {timesteps: 65536, window: 10}\n"
                   "envs: [{id: CartPole-v1}]\nalgorithms:\n" + algos)
    loaded = load_suite(suite)
    Store(pg_url).register("kill", str(suite), {}, loaded.env_meta, loaded.cells)
    return loaded.cells


@pytest.mark.heavy
def test_killed_worker_is_retried_and_python_errors_are_not(ray_address, pg_url, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("the failing cell asks for CUDA, which this machine has")
    cells = _suite(tmp_path, pg_url, "  - {algo: ppo, impl: bench}\n"
                   "  - {algo: ppo, impl: sb3, label: no-gpu, hyperparams: {device: cuda}}\n")
    long, broken = cells
    outcomes, owner, killed_at = _kill_mid_run(pg_url, cells, long)

    by_key = {c.key: o for c, o in outcomes}
    assert len(outcomes) == 2 and set(by_key) == {long.key, broken.key}
    assert by_key[long.key].status == "done", by_key[long.key].error
    assert by_key[broken.key].status == "failed" and "CUDA" in (by_key[broken.key].error or "")

    db = Store(pg_url)
    rows = db.rows([long.key, broken.key])
    done = rows[long.key]
    assert done.status == "done" and done.attempt == 2  # the killed attempt, then Ray's retry
    assert owner_tag(done.owner) == owner_tag(owner) and done.owner != owner  # same task, another worker
    # Taken over at once, not after the heartbeat went stale: the retry claimed the run (its started_at) within
    # the stale window of the kill. Its finish is not the measure: on a loaded machine the rerun itself is slow.
    assert done.started_at - killed_at < STALE_AFTER_S
    assert rows[broken.key].status == "failed" and rows[broken.key].attempt == 1  # a Python error is not retried
    eng = sa.create_engine(pg_url)
    with eng.connect() as c:
        n_runs = c.execute(sa.text("select count(*) from runs")).scalar()
        n_eps, n_idx = c.execute(sa.text("select count(*), count(distinct idx) from episodes where key = :k"),
                                 {"k": long.key}).one()
    eng.dispose()
    assert n_runs == 2 and n_eps == n_idx == done.episodes > 0


def test_worker_lost_past_its_retries_is_a_failed_run(ray_address, pg_url, tmp_path):
    (cell,) = _suite(tmp_path, pg_url, "  - {algo: ppo, impl: bench}\n")
    outcomes, owner, _ = _kill_mid_run(pg_url, [cell], cell, max_retries=0)
    assert [(c.key, o.status) for c, o in outcomes] == [(cell.key, "failed")]
    assert "Ray task was lost 1 time(s)" in outcomes[0][1].error
    row = Store(pg_url).rows([cell.key])[cell.key]
    # Not left `running` under a dead owner: the driver marked it failed, and `bench run` will retry it.
    assert row.status == "failed" and row.attempt == 1 and row.owner == owner and "Ray task was lost" in row.error
    assert len(Store(pg_url).episodes_of(cell.key)) == 0


# --------------------------------------------------------------------------- #
# Several writers, one PostgreSQL store
# --------------------------------------------------------------------------- #
@pytest.mark.heavy  # ~50 s / ~25 s of CI's 2 cores; `nox -s heavy` (docs/testing.md)
def test_four_processes_one_postgres_store_lose_and_duplicate_nothing(pg_url, tmp_path):
    """Four `bench run`s of one suite start at once on a fresh database: every cell runs exactly once."""
    suite = _write(tmp_path / "four.yaml", (
        "name: four\nseeds: 4\ndefaults: {timesteps: 512, window: 5}\nenvs: [{id: CartPole-v1}]\nalgorithms:\n"
        "  - {algo: ppo, impl: bench, hyperparams: {n_envs: 1, n_steps: 64, batch_size: 64}}\n"
        "  - {algo: a2c, impl: bench}\n"
    ))
    cells = load_suite(suite).cells
    procs = [
        subprocess.Popen([sys.executable, "-m", "bench", "run", str(suite), "--store", pg_url, "--workers", "1"],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [e for _, e in results]
    done_counts = [int(re.search(r"four: (\d+) done, 0 failed", o).group(1)) for o, _ in results]
    assert sum(done_counts) == len(cells)  # each cell was run by exactly one of the four

    df = Store(pg_url).runs_frame("four")
    assert len(df) == len(cells) and df.key.is_unique and set(df.key) == {c.key for c in cells}
    assert (df.status == "done").all() and (df.attempt == 1).all()
    eng = sa.create_engine(pg_url)
    with eng.connect() as c:
        eps = dict(c.execute(sa.text("select key, count(*) from episodes group by key")).all())
        n_suites = c.execute(sa.text("select count(*) from suites")).scalar()
    eng.dispose()
    assert eps == dict(zip(df.key, df.episodes)) and min(eps.values()) > 0
    assert n_suites == 1


# --------------------------------------------------------------------------- #
# Tuning on a cluster: Optuna workers as Ray tasks on one PostgreSQL study
# --------------------------------------------------------------------------- #
@pytest.mark.postgres
@pytest.mark.heavy
def test_tuning_workers_run_as_ray_tasks_on_one_study(ray_address, pg_url):
    import optuna
    from optuna.trial import TrialState

    from bench.tune import target_from_flags, tune

    target = target_from_flags("a2c", "bench", "CartPole-v1", timesteps=2048, seeds=1, objective="auc", study="on-ray")
    seen = []
    # Each Ray task stops starting trials 6 s after its own start, so both run trials whatever
    # their start-up takes (with a small trial count the first task up could take them all).
    from bench.storage.urls import StoreURL

    out = tune(target, StoreURL.parse(pg_url), trials=10_000, timeout=6, workers=2, executor="ray",
               address=ray_address, on_trial=seen.append)
    trials = optuna.load_study(study_name="on-ray", storage=pg_url).get_trials(deepcopy=False)
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) >= 2 and len(trials) == len(finished)  # none left running
    assert len({t.user_attrs["worker"] for t in trials}) == 2  # both Ray tasks (two worker processes) ran trials
    assert out.dead_workers == 0 and len(seen) == len(finished)  # the driver reported every trial


def test_tuning_on_ray_refuses_sqlite(tmp_path):
    db = tmp_path / "bench.db"
    p = bench("tune", "--algo", "a2c", "--env", "CartPole-v1", "--executor", "ray", "--store", f"sqlite:///{db}",
              cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.strip().splitlines() if ln]
    assert len(lines) == 1 and "--executor ray" in lines[0] and "postgresql" in lines[0]
    assert "Traceback" not in p.stderr and not db.exists()
