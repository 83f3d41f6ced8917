"""Issue 44, per-run limits: a run past its ``max_wall_minutes`` or ``max_memory_mb`` is failed with the limit
named, under the local pool and under Ray alike, and keeps what it recorded before it was stopped (episodes,
diagnostics, evaluations, its step count).

The plugin records a few updates and episodes, then misbehaves in one of the ways a watchdog must cope with:
a Python loop that never ends, a sleep no exception can cut short (only the hard stop ends it), memory that
grows, and a loop that swallows every exception. Each test costs seconds of that plugin's time, plus the start
of a worker (and of Ray).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.storage.urls import StoreURL

PLUGIN = '''
import os, time
from pathlib import Path

import numpy as np

from bench import HyperParams


class Params(HyperParams):
    then: str = "hang"
    updates: int = 5


def _act(obs):
    return np.zeros(len(obs), dtype=np.int64)


def train(env_id, params: Params, *, seed, timesteps, recorder):
    # What the run records before it misbehaves: an episode, a diagnostic and an update (with its periodic
    # evaluation, every 20 steps) per 10 steps.
    for i in range(params.updates):
        recorder.steps += 10
        recorder.episode(float(i), 10)
        recorder.diagnostics({"loss/policy": 0.5 + i})
        recorder.after_update(_act)
    Path(os.environ["LIMITS_MARK"] + f".{seed}").write_text(str(os.getpid()))
    if params.then == "hang":  # a Python loop that never ends
        while True:
            time.sleep(0.05)
    if params.then == "sleep":  # one call that does not return for an hour: no exception reaches it
        time.sleep(3600)
    if params.then == "deaf":  # swallows whatever it is sent
        while True:
            try:
                time.sleep(0.05)
            except BaseException:
                pass
    if params.then == "nowatch":  # a process whose own watch cannot act (as in C code that holds the GIL)
        import bench.run.limits
        bench.run.limits.limit_reached = lambda *args: None
        while True:
            time.sleep(0.05)
    if params.then == "hog":  # 50 MiB more every 20 ms, up to 3 GiB
        held = []
        for _ in range(60):
            held.append(bytearray(50 << 20))
            time.sleep(0.02)
        while True:
            time.sleep(0.05)
'''

#: 3 seconds: the shortest wall-clock limit that leaves the plugin time to record its updates under load.
WALL = 0.05


def _suite(tmp_path: Path, algos: str, seeds: str = "[0]") -> Path:
    (tmp_path / "limplug.py").write_text(PLUGIN)
    f = tmp_path / "s.yaml"
    f.write_text(f"name: lim\nseeds: {seeds}\ndefaults: {{timesteps: 3000, window: 5, eval: {{every: 20, episodes: 1}}}}\n"
                 f"envs: [{{id: CartPole-v1}}]\nalgorithms:\n{algos}")
    return f


#: An entry that sets no limit.
NO_LIMIT = '  - {algo: limplug, impl: python, entry: "limplug:train", label: hang, hyperparams: {then: hang}}\n'


def _entry(label: str, then: str, limits: str) -> str:
    return (f'  - {{algo: limplug, impl: python, entry: "limplug:train", label: {label}, '
            f'hyperparams: {{then: {then}}}, {limits}}}\n')


def _bench(*args: str, tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LIMITS_MARK": str(tmp_path / "mark")}
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=timeout)


def _recorded(db: Path) -> dict[str, dict]:
    """label → what the store holds of its run: status, error, steps, and the rows it kept."""
    c = sqlite3.connect(db)
    try:
        out = {}
        for label, key, status, error, steps, episodes, meta in c.execute(
                "select s.label, r.key, r.status, r.error, r.total_steps, r.episodes, r.meta "
                "from runs r join suite_cells s using (key)"):
            out[label] = {
                "key": key, "status": status, "error": error, "total_steps": steps, "episodes": episodes,
                "returns": [r for (r,) in c.execute("select ret from episodes where key = ? order by idx", (key,))],
                "diagnostics": c.execute("select count(*) from diagnostics where key = ?", (key,)).fetchone()[0],
                "evaluations": c.execute("select count(*) from evaluations where key = ?", (key,)).fetchone()[0],
                "meta": json.loads(meta) if meta else None,
            }
        return out
    finally:
        c.close()


def _kept_its_records(run: dict, limit: str = "max_wall_minutes") -> None:
    """The five updates the plugin made before it misbehaved are all in the store."""
    assert run["returns"] == [0.0, 1.0, 2.0, 3.0, 4.0], run
    assert run["episodes"] == 5 and run["total_steps"] == 50
    assert run["diagnostics"] == 5 and run["evaluations"] == 2  # at steps 20 and 40
    assert run["meta"]["stopped_by"] == limit


def _load(tmp_path: Path, monkeypatch, algos: str):
    """The suite's cells, registered in a fresh SQLite store; the plugin importable here and in spawned workers."""
    from bench.storage.store import Store
    from bench.suites.suite import load_suite

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LIMITS_MARK", str(tmp_path / "mark"))
    f = _suite(tmp_path, algos)
    loaded = load_suite(f)
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = Store(url)
    db.register(loaded.suite.name, str(f), loaded.suite.model_dump(mode="json"), loaded.env_meta, loaded.cells)
    db.dispose()
    return url, {c.label: c for c in loaded.cells}


# --------------------------------------------------------------------------- #
# The watch inside the run
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("limits, reason", [
    ({"max_wall_minutes": 0.005}, "stopped: wall-clock limit of 0.005 min reached"),
    ({"max_memory_mb": 1}, "stopped: memory limit of 1 MB reached ("),  # this process holds more than that
])
def test_the_watch_stops_training_in_its_own_thread(limits, reason):
    from bench.run.limits import LimitStop, LimitWatch

    cell = SimpleNamespace(**{"max_wall_minutes": None, "max_memory_mb": None, **limits})
    watch = LimitWatch(cell, lambda why: pytest.fail(f"gave up: {why}"), every=0.02, grace=60).start()
    t0 = time.monotonic()
    with pytest.raises(LimitStop):
        try:
            while time.monotonic() - t0 < 30:  # a training loop that would run for half a minute
                time.sleep(0.01)
        finally:
            watch.disarm()
    assert time.monotonic() - t0 < 10
    assert watch.reason.startswith(reason)


def test_the_watch_raises_nothing_once_disarmed():
    from bench.run.limits import LimitWatch

    watch = LimitWatch(SimpleNamespace(max_wall_minutes=0.002, max_memory_mb=None), lambda why: pytest.fail(why),
                       every=0.02).start()
    watch.disarm()  # training returned within its limit
    time.sleep(0.4)  # past the limit: no LimitStop arrives here
    assert watch.reason is None


GIVE_UP = """
import subprocess, sys, time, types
from bench.run.limits import LimitWatch

watch = LimitWatch(types.SimpleNamespace(max_wall_minutes=0.005, max_memory_mb=None),
                   lambda why: open(sys.argv[1], "w").write(why), every=0.05, grace=0.5).start()
child = subprocess.Popen(["sleep", "60"])  # what the run starts: an async env's worker
print(child.pid, flush=True)
try:
    try:
        time.sleep(60)  # one blocking call: the stop cannot reach it
    finally:
        watch.disarm()
except BaseException:
    pass
print("training returned", flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals and /proc")
def test_a_run_that_does_not_stop_is_given_up_written_and_killed(tmp_path):
    from bench.storage.owners import pid_alive

    out = tmp_path / "written"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", GIVE_UP, str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert time.monotonic() - t0 < 60
    assert out.read_text() == "stopped: wall-clock limit of 0.005 min reached"
    assert "training returned" not in p.stdout
    assert not pid_alive(int(p.stdout.split()[0]))  # its child went with it


def test_measure_cell_keeps_what_a_stopped_run_recorded(tmp_path, monkeypatch):
    from bench.run.runner import measure_cell

    _, cells = _load(tmp_path, monkeypatch, _entry("hang", "hang", f"max_wall_minutes: {WALL}"))
    result, error, _ = measure_cell(cells["hang"])
    assert error == f"stopped: wall-clock limit of {WALL} min reached"
    assert result.episodes["ret"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert result.summary["total_steps"] == 50 and result.summary["episodes"] == 5
    assert [v for _, k, v, _ in result.diagnostics if k == "loss/policy"] == [0.5, 1.5, 2.5, 3.5, 4.5]
    assert [e[0] for e in result.evaluations] == [20, 40]
    assert result.meta["stopped_by"] == "max_wall_minutes"


def test_a_run_without_a_limit_of_its_suite_s_is_stopped_by_the_default_one(tmp_path, monkeypatch):
    """A run that never ends stops at the default wall-clock limit, which says so; here the default is made
    0.05 min (its multiple 1, its floor 0.05 min) instead of 20 times the estimate and at least 60 min."""
    from bench.run.runner import measure_cell
    from bench.suites import cost

    monkeypatch.setattr(cost, "DEFAULT_WALL_MULTIPLE", 1)
    monkeypatch.setattr(cost, "DEFAULT_WALL_FLOOR_MIN", WALL)
    _, cells = _load(tmp_path, monkeypatch, NO_LIMIT)
    cell = cells["hang"]
    assert (cell.max_wall_minutes, cell.wall_limit_default) == (WALL, True)
    result, error, _ = measure_cell(cell)
    assert error == (f"stopped: wall-clock limit of {WALL} min reached (the default: 1 times the run's estimated CPU "
                     f"time, at least {WALL} min; set max_wall_minutes in the suite to change it, 0 for no limit)")
    assert result.summary["total_steps"] == 50 and result.meta["stopped_by"] == "max_wall_minutes"


def test_the_default_wall_clock_limit_and_how_a_suite_sets_or_removes_it(tmp_path, monkeypatch):
    from bench.run.limits import needs_own_worker
    from bench.suites.cost import default_wall_minutes

    scale = SimpleNamespace(timesteps=1_000_000, cpu_seconds=None, algo="ppo", hyperparams={})
    assert default_wall_minutes(scale, 6900.0) == 2300.0  # ALE/Breakout-v5, 1M steps: 20 × 115 min
    assert default_wall_minutes(scale, 300.0) == 100.0  # CartPole-v1, 1M steps: 20 × 5 min
    short = SimpleNamespace(timesteps=100_000, cpu_seconds=None, algo="ppo", hyperparams={})
    assert default_wall_minutes(short, 300.0) == 60.0  # 100k steps: 20 × 0.5 min, below the floor
    budget = SimpleNamespace(timesteps=10**9, cpu_seconds=3600.0, algo="ppo", hyperparams={})
    assert default_wall_minutes(budget, 300.0) == 1200.0  # a CPU budget caps the estimate: 20 × 1 h
    assert default_wall_minutes(scale, None) is None  # no time scale, no CPU budget: no estimate, no default
    entries = (NO_LIMIT.replace("label: hang", "label: unset") + _entry("nolimit", "sleep", "max_wall_minutes: 0")
               + _entry("own", "deaf", "max_wall_minutes: 30"))
    _, cells = _load(tmp_path, monkeypatch, entries)
    got = {k: (c.max_wall_minutes, c.wall_limit_default, needs_own_worker(c)) for k, c in cells.items()}
    assert got == {"unset": (60.0, True, False), "nolimit": (None, False, False), "own": (30, False, True)}


def test_the_backstop_fires_only_after_a_run_stayed_past_its_limit():
    from bench.run.limits import Backstop

    cell = SimpleNamespace(max_wall_minutes=1.0, max_memory_mb=None)
    b = Backstop(after_s=0.3)
    assert b.check(cell, 59.0, None) is None
    assert b.check(cell, 61.0, None) is None  # past it: its own watch has BACKSTOP_S to act
    time.sleep(0.35)
    assert b.check(cell, 62.0, None) == "stopped: wall-clock limit of 1 min reached"
    mem = Backstop(after_s=0.0)
    assert mem.check(SimpleNamespace(max_wall_minutes=None, max_memory_mb=1), 1.0, os.getpid()).startswith(
        "stopped: memory limit of 1 MB reached (")
    assert mem.check(SimpleNamespace(max_wall_minutes=None, max_memory_mb=1), 1.0, None) is None  # another host


# --------------------------------------------------------------------------- #
# The Ray driver's part
# --------------------------------------------------------------------------- #
def test_a_retried_task_returns_the_run_its_given_up_attempt_recorded(tmp_path, monkeypatch):
    """A watch that gives training up writes the run and kills its Ray worker; Ray retries the task (or, out of
    retries, reports it lost). Neither may run the cell again, nor overwrite what the attempt recorded."""
    from bench.run.ray_executor import _give_up, _recorded, _task
    from bench.storage.owners import this_owner
    from bench.storage.store import Store

    url, cells = _load(tmp_path, monkeypatch, _entry("hang", "hang", f"max_wall_minutes: {WALL}"))
    cell = cells["hang"]
    db = Store(url)
    db.claim(cell.key, this_owner("ray-aaaa"))
    why = f"stopped: wall-clock limit of {WALL} min reached"
    db.release(this_owner("ray-aaaa"), "failed", why)  # what the given-up attempt wrote (here without its rows)
    assert _recorded(url, cell, "ray-bbbb") is None  # another task's run: not this task's record
    again = _task(url, cell, "ray-aaaa")  # the retry: returns at once, without training
    assert (again.status, again.error) == ("failed", why)
    lost = _give_up(url, [(cell, "ray-aaaa")], "failed", "the Ray task was lost 1 time(s)")
    assert [(o.status, o.error) for o in lost] == [("failed", why)]
    row = db.rows([cell.key])[cell.key]
    assert (row.status, row.error, row.attempt) == ("failed", why, 1)
    db.dispose()


def test_the_driver_cancels_a_task_whose_run_stayed_past_its_limit(tmp_path, monkeypatch):
    from bench.run import limits
    from bench.run.ray_executor import _backstop
    from bench.storage.owners import this_owner
    from bench.storage.store import Store

    monkeypatch.setattr(limits, "BACKSTOP_S", 0.0)
    url, cells = _load(tmp_path, monkeypatch, _entry("late", "hang", "max_wall_minutes: 1")
                       + _entry("fat", "deaf", "max_memory_mb: 1") + _entry("fine", "sleep", "max_wall_minutes: 5"))
    db = Store(url)
    for label, cell in cells.items():
        db.claim(cell.key, this_owner(f"ray-{label}"))  # this host and process: its memory can be read
    with db.engine.begin() as c:  # claimed two minutes ago
        c.exec_driver_sql("update runs set started_at = started_at - 120")
    db.dispose()

    class FakeRay:
        cancelled: list = []

        def cancel(self, ref, force):
            assert force
            self.cancelled.append(ref)

    ray = FakeRay()
    in_flight = {label: (cell, f"ray-{label}") for label, cell in cells.items()}
    stopped: dict = {}
    _backstop(ray, url, in_flight, {}, stopped)
    assert sorted(ray.cancelled) == ["fat", "late"]
    assert stopped["late"] == "stopped: wall-clock limit of 1 min reached"
    assert stopped["fat"].startswith("stopped: memory limit of 1 MB reached (")


# --------------------------------------------------------------------------- #
# End to end: the local pool and Ray
# --------------------------------------------------------------------------- #
def _check(outcomes: dict, db: Path, wall: tuple[str, ...]) -> dict:
    """Every run failed with its limit named, in its outcome and in the store, and kept its five updates."""
    got = _recorded(db)
    for label in wall:
        assert (got[label]["status"], got[label]["error"]) == ("failed", f"stopped: wall-clock limit of {WALL} min reached")
        assert outcomes[label] == got[label]["error"]
        _kept_its_records(got[label])
    assert got["hog"]["status"] == "failed"
    assert got["hog"]["error"].startswith("stopped: memory limit of 1,200 MB reached ("), got["hog"]
    assert outcomes["hog"].startswith("stopped: memory limit of 1,200 MB reached (")
    _kept_its_records(got["hog"], "max_memory_mb")
    return got


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals and /proc")
@pytest.mark.heavy
def test_runs_stopped_by_their_limits_on_the_local_pool_keep_what_they_recorded(tmp_path, monkeypatch):
    """Before: the pool killed the worker past a limit, and the run's episodes, diagnostics and evaluations went
    with it. Now the run stops itself and writes them: ``hog`` unwinds at the stop, ``deaf`` swallows it, so its
    watch gives training up. Only ``nowatch``, whose watch cannot act, is killed by the pool and loses them."""
    from bench.run import limits
    from bench.run.pool import run_local
    from bench.storage.owners import this_owner

    monkeypatch.setattr(limits, "BACKSTOP_S", 15.0)  # the pool's backstop; deaf's watch gives up after 5 s
    wall = f"max_wall_minutes: {WALL}"
    url, cells = _load(tmp_path, monkeypatch, _entry("deaf", "deaf", wall)
                       + _entry("hog", "hog", "max_memory_mb: 1200, max_wall_minutes: 5")
                       + _entry("nowatch", "nowatch", wall))
    outcomes: dict = {}
    run_local(StoreURL.parse(url), list(cells.values()), this_owner(), 2, lambda c, o: outcomes.setdefault(c.label, o.error))
    got = _check(outcomes, tmp_path / "s.db", ("deaf",))
    assert (got["nowatch"]["status"], got["nowatch"]["error"]) == ("failed", f"stopped: wall-clock limit of {WALL} min reached")
    assert outcomes["nowatch"] == got["nowatch"]["error"] and got["nowatch"]["returns"] == []


@pytest.mark.heavy
def test_runs_stopped_by_their_limits_under_ray_keep_what_they_recorded(tmp_path):
    """Before: Ray's tasks ignored the limits. ``sleep`` never returns from one call, so its watch gives it up
    and kills its Ray worker; Ray's retry of the task finds the run recorded and returns it."""
    pytest.importorskip("ray", reason="ray is not installed (pip install 'onpolicy-bench[ray]')")
    wall = f"max_wall_minutes: {WALL}"
    f = _suite(tmp_path, _entry("sleep", "sleep", wall) + _entry("hog", "hog", "max_memory_mb: 1200, max_wall_minutes: 5"))
    db = tmp_path / "s.db"
    p = _bench("run", str(f), "--store", f"sqlite:///{db}", "--executor", "ray", "--workers", "2", tmp_path=tmp_path,
               timeout=400)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert "0 done, 2 failed" in p.stdout
    got = _recorded(db)
    _check({label: got[label]["error"] for label in got}, db, ("sleep",))
    printed = " ".join(p.stdout.split())  # the console wraps long lines
    assert all(f"{label} seed 0 [{got[label]['key']}]: {got[label]['error']}" in printed for label in got), printed
    c = sqlite3.connect(db)
    assert [a for (a,) in c.execute("select attempt from runs")] == [1, 1]  # the retry did not run it again
    c.close()
