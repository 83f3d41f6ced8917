"""Issue 44, the run-lifecycle half: a store no dying worker corrupts, runs that always end, and the runner
that watches them (limits, stalls, interrupts, zombies).

Each test reproduces one case of the issue and checks the fixed behaviour; the plugins are tiny modules
written to ``tmp_path`` (impl: python), so a test costs seconds.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.storage.owners import is_claimable, owner_alive, pid_alive
from bench.storage.urls import StoreURL


# --------------------------------------------------------------------------- #
# Zombies and dead owners
# --------------------------------------------------------------------------- #
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_zombie_owner_is_dead():
    """A killed worker that nobody reaps (PID 1 without an init) keeps its pid and start time: the owner
    check must read its state (Z) and call it dead, or a re-run leaves its cell as "running elsewhere"."""
    from bench.storage.owners import _proc_start

    pid = os.fork()
    if pid == 0:  # the child exits at once and is not reaped until the end of the test
        os._exit(0)
    try:
        start = _proc_start(pid)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not become a zombie"
            time.sleep(0.01)
        owner = f"{socket.gethostname()}:{pid}:{start}"
        assert start is not None and _proc_start(pid) == start  # what the old check compared: still "alive"
        assert owner_alive(owner) is False
        assert pid_alive(pid) is False
        row = type("Row", (), {"status": "running", "owner": owner, "heartbeat_at": time.time()})()
        assert is_claimable(row)  # a fresh heartbeat does not keep a dead owner's run
    finally:
        os.waitpid(pid, 0)
    assert pid_alive(os.getpid()) and owner_alive(f"{socket.gethostname()}:{os.getpid()}:{_proc_start(os.getpid())}")


# --------------------------------------------------------------------------- #
# Plugins that leave, hang or hog: helpers
# --------------------------------------------------------------------------- #
PLUGIN = '''
import ctypes, os, signal, sys, time
from pathlib import Path
from bench import HyperParams


class Params(HyperParams):
    mode: str = "exits"


class Custom(BaseException):
    pass


def _mark():
    Path(os.environ["LIFECYCLE_MARK"]).write_text(str(os.getpid()))


def train(env_id, params: Params, *, seed, timesteps, recorder):
    if params.mode == "exits":  # seeds 0-4: sys.exit(); then every other way out of a process
        if seed < 5:
            sys.exit(3)
        if seed == 5:
            raise KeyboardInterrupt
        if seed == 6:
            raise Custom("mine")
        if seed == 7:
            os._exit(1)
        if seed == 8:
            os.kill(os.getpid(), signal.SIGKILL)
        ctypes.string_at(0)  # a segfault
    if params.mode == "deaf":  # ignores SIGTERM, then hangs
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _mark()
        while True:
            time.sleep(0.1)
    if params.mode == "hang":
        while True:
            time.sleep(0.1)
    if params.mode == "hog":  # 100 MiB more every 50 ms, up to 3 GiB
        held = []
        for _ in range(30):
            held.append(b"x" * (100 << 20))
            time.sleep(0.05)
        while True:
            time.sleep(0.1)
'''


def _suite(tmp_path: Path, algos: str, seeds: str = "[0]", defaults: str = "") -> Path:
    (tmp_path / "lifeplug.py").write_text(PLUGIN)
    f = tmp_path / "s.yaml"
    f.write_text(f"name: life\nseeds: {seeds}\ndefaults: {{timesteps: 3000, window: 5{defaults}}}\n"
                 f"envs: [{{id: CartPole-v1}}]\nalgorithms:\n{algos}")
    return f


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tmp_path), "LIFECYCLE_MARK": str(tmp_path / "mark")}


def _bench(*args: str, tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=_env(tmp_path), timeout=timeout)


def _rows(db: Path) -> list[tuple]:
    c = sqlite3.connect(db)
    try:
        return c.execute("select seed, status, error from runs order by seed").fetchall()
    finally:
        c.close()


# --------------------------------------------------------------------------- #
# A dying worker cannot corrupt a SQLite store
# --------------------------------------------------------------------------- #
def test_opening_a_second_store_keeps_the_process_lock_on_the_database(tmp_path):
    """The mechanism of the corruption: reading the file's header through a descriptor of its own, then closing
    it, dropped every POSIX lock of the process on the database (SQLite's among them), so another process that
    closed its connection cleanly took itself for the last one and deleted the WAL under the first."""
    from bench.storage.store import Store

    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    first = Store(url)
    first.rows(["x"])  # a pooled connection: it holds a shared lock on the file while it is open
    second = Store(url)  # the runner opened one more for each worker that died
    wal = tmp_path / "s.db-wal"
    assert wal.exists()
    closes_cleanly = f"import sqlite3; c = sqlite3.connect({str(db)!r}); c.execute('select 1 from runs'); c.close()"
    subprocess.run([sys.executable, "-c", closes_cleanly], check=True, timeout=60)
    assert wal.exists(), "another process deleted the WAL while this one had the store open"
    with first.engine.begin() as c:  # and the store is whole for both writers
        c.exec_driver_sql("insert into suites (name, spec, env_meta, updated_at) values ('a', '{}', '{}', 0)")
    with second.engine.connect() as c:
        assert c.exec_driver_sql("pragma integrity_check").scalar() == "ok"
    first.dispose()
    second.dispose()


@pytest.mark.heavy
def test_every_way_out_of_a_plugin_leaves_the_store_whole_and_each_cell_recorded(tmp_path):
    """sys.exit() in 5 consecutive cells (which corrupted the store, then aborted `bench run` with "disk I/O
    error"), then KeyboardInterrupt, a BaseException of the plugin's own, os._exit, SIGKILL and a segfault."""
    f = _suite(tmp_path, '  - {algo: lifeplug, impl: python, entry: "lifeplug:train"}\n', seeds="10")
    db = tmp_path / "s.db"
    p = _bench("run", str(f), "--store", f"sqlite:///{db}", "--workers", "1", tmp_path=tmp_path)
    assert p.returncode == 1, p.stderr  # every run failed; the command itself ended normally
    assert "Traceback" not in p.stdout + p.stderr
    assert "0 done, 10 failed" in p.stdout
    c = sqlite3.connect(db)
    assert c.execute("pragma integrity_check").fetchall() == [("ok",)]
    c.close()
    rows = _rows(db)
    assert [s for _, s, _ in rows] == ["failed"] * 10
    errors = [e for _, _, e in rows]
    assert all(e.startswith("plugin raised SystemExit(3)") for e in errors[:5]), errors
    assert errors[5].startswith("plugin raised KeyboardInterrupt()")
    assert errors[6].startswith("plugin raised Custom('mine')")
    from bench.run.pool import WORKER_DIED

    assert errors[7:] == [WORKER_DIED] * 3  # os._exit, SIGKILL, segfault: the process is gone


# --------------------------------------------------------------------------- #
# Interrupts escalate
# --------------------------------------------------------------------------- #
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals and /proc")
def test_a_worker_that_ignores_sigterm_does_not_hang_the_interrupted_run(tmp_path):
    from bench.run.pool import KILL_AFTER_S

    f = _suite(tmp_path, '  - {algo: lifeplug, impl: python, entry: "lifeplug:train", hyperparams: {mode: deaf}}\n')
    db = tmp_path / "s.db"
    p = subprocess.Popen([sys.executable, "-m", "bench", "run", str(f), "--store", f"sqlite:///{db}", "--workers", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=_env(tmp_path))
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "mark").exists():
            assert p.poll() is None and time.monotonic() < deadline, "the plugin never started"
            time.sleep(0.1)
        worker = int((tmp_path / "mark").read_text())
        p.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        _, err = p.communicate(timeout=KILL_AFTER_S + 40)  # before: hung until the worker was SIGKILLed by hand
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert time.monotonic() - t0 < KILL_AFTER_S + 30
    assert "Interrupted." in err and "Traceback" not in err
    assert not pid_alive(worker)
    assert [(s, e) for _, s, e in _rows(db)] == [("interrupted", "interrupted by SIGTERM")]


# --------------------------------------------------------------------------- #
# Per-run limits
# --------------------------------------------------------------------------- #
@pytest.mark.heavy  # the default tier has tests/test_limits.py's pool test of the same limits, records included
def test_per_run_limits_stop_a_hung_and_a_hogging_run_and_name_the_limit(tmp_path):
    f = _suite(tmp_path, '  - {algo: lifeplug, impl: python, entry: "lifeplug:train", label: hang, '
                         'hyperparams: {mode: hang}}\n'
                         '  - {algo: lifeplug, impl: python, entry: "lifeplug:train", label: hog, '
                         'hyperparams: {mode: hog}, max_memory_mb: 1200, max_wall_minutes: 5}\n',
               defaults=", max_wall_minutes: 0.1")
    db = tmp_path / "s.db"
    t0 = time.monotonic()
    p = _bench("run", str(f), "--store", f"sqlite:///{db}", "--workers", "2", tmp_path=tmp_path, timeout=240)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    c = sqlite3.connect(db)
    got = dict(c.execute("select s.label, r.status || ': ' || coalesce(r.error, '') from runs r join suite_cells s using (key)"))
    c.close()
    assert got["hang"] == "failed: stopped: wall-clock limit of 0.1 min reached", (got, p.stdout)
    assert got["hog"].startswith("failed: stopped: memory limit of 1,200 MB reached ("), got
    assert time.monotonic() - t0 < 200


def test_limits_leave_cell_keys_as_they_were(tmp_path, monkeypatch):
    from bench.suites.suite import load_suite

    monkeypatch.syspath_prepend(str(tmp_path))

    algos = '  - {algo: lifeplug, impl: python, entry: "lifeplug:train"%s}\n  - {algo: ppo, impl: bench}\n'
    plain = load_suite(_suite(tmp_path, algos % ""))
    keys = [c.key for c in plain.cells]
    limited = load_suite(_suite(tmp_path, algos % ", max_memory_mb: 500", defaults=", max_wall_minutes: 30"))
    assert [c.key for c in limited.cells] == keys
    assert [(c.max_wall_minutes, c.max_memory_mb) for c in limited.cells] == [(30, 500), (30, None)]
    # Without limits of the suite's: the default wall-clock one (CartPole-v1's 3,000 steps: the 60-min floor).
    assert [(c.max_wall_minutes, c.max_memory_mb, c.wall_limit_default) for c in plain.cells] == [(60, None, True)] * 2


@pytest.mark.parametrize("field, value", [("max_wall_minutes", -1), ("max_memory_mb", 0), ("max_memory_mb", -1), ("max_wall_minutes", ".nan"),
                                          ("max_memory_mb", "'lots'")])
def test_bad_limits_are_one_line(tmp_path, field, value):
    f = _suite(tmp_path, "  - {algo: ppo, impl: bench}\n", defaults=f", {field}: {value}")
    p = _bench("run", str(f), "--store", f"sqlite:///{tmp_path / 's.db'}", "--dry-run", tmp_path=tmp_path, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert f"defaults.{field}" in p.stderr and not (tmp_path / "s.db").exists()


# --------------------------------------------------------------------------- #
# Stalled runs are visible
# --------------------------------------------------------------------------- #
def test_the_stall_watch_notes_a_run_that_stopped_stepping():
    from bench.run.progress import STALL_AFTER_S, StallWatch

    now = [0.0]
    w = StallWatch(clock=lambda: now[0])
    assert w.note(0) is None
    now[0] = STALL_AFTER_S - 1
    assert w.note(0) is None
    now[0] = STALL_AFTER_S + 1
    assert w.note(0).startswith("stalled: no env step for 10 min (at step 0)")
    now[0] += 5
    assert w.note(100) is None  # it moves again
    now[0] += STALL_AFTER_S + 1
    assert "(at step 100)" in w.note(100)


def test_status_shows_a_live_run_without_progress_as_stalled(tmp_path):
    from bench.run.progress import StallWatch
    from bench.storage.owners import this_owner
    from bench.storage.store import Store
    from bench.suites.suite import load_suite

    f = _suite(tmp_path, "  - {algo: ppo, impl: bench}\n", seeds="2")
    loaded = load_suite(f)
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = Store(url)
    db.register(loaded.suite.name, str(f), loaded.suite.model_dump(mode="json"), loaded.env_meta, loaded.cells)
    me = this_owner()  # this process: alive, so neither run is stale
    stuck, moving = loaded.cells
    now = [0.0]
    watch = StallWatch(clock=lambda: now[0])
    for cell in (stuck, moving):
        attempt = db.claim(cell.key, me)
        db.heartbeat(cell.key, attempt, 1000, 1.0, watch.note(1000))
    now[0] = 3600.0
    db.heartbeat(stuck.key, 1, 1000, 2.0, watch.note(1000))
    db.dispose()
    p = _bench("status", str(f), "--store", url, tmp_path=tmp_path, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "running: 1, stalled: 1" in p.stdout, p.stdout
    # The note clears once the run moves again.
    db = Store(url)
    db.heartbeat(stuck.key, 1, 2000, 3.0, watch.note(2000))
    assert db.rows([stuck.key])[stuck.key].error is None
    db.dispose()


def test_the_stall_time_follows_the_env_s_time_scale(tmp_path, monkeypatch):
    from bench.run.progress import STALL_AFTER_S, stall_after_s
    from bench.suites.suite import load_suite

    assert stall_after_s(None) == stall_after_s(300.0) == STALL_AFTER_S == 600  # CartPole-v1's scale: the floor
    assert stall_after_s(19_000.0) == pytest.approx(65_536 * 0.019)  # CarRacing-v3's: 21 min
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))
    f = tmp_path / "s.yaml"
    f.write_text("name: x\nseeds: 1\ndefaults: {timesteps: 1000}\nenvs: [{id: CartPole-v1}, "
                 "{id: 'bad_envs:Sleeps-v0', threshold: 1, time_scale_us: 100000}]\nalgorithms: [{algo: a2c, impl: bench}]\n")
    cells = {c.env_id: c for c in load_suite(f).cells}
    assert cells["CartPole-v1"].time_scale_us == 300.0  # the registry's
    assert cells["bad_envs:Sleeps-v0"].time_scale_us == 100_000  # the suite's: 0.1 s a step
    assert stall_after_s(cells["bad_envs:Sleeps-v0"].time_scale_us) == pytest.approx(6553.6)


@pytest.mark.heavy  # two in-process runs of a few seconds, and a process's first run_metadata (5 s on a busy machine)
def test_a_run_stuck_in_its_env_is_stalled_while_it_is_and_not_after(tmp_path, monkeypatch):
    """An env that sleeps 3 s in its 20th step: the run's heartbeat thread beats on, so only its steps tell. Here
    the floor of the stall time is 1 s and the heartbeat 0.2 s (the runs': 10 min and 10 s). The same env with a
    time scale of 1 s a step (a stall time of 65,536 s) is never stalled: the stall time is the env's."""
    import threading

    from bench.api import status
    from bench.run import progress, runner
    from bench.storage.owners import this_owner
    from bench.storage.store import Store
    from bench.suites.suite import load_suite

    monkeypatch.setattr(progress, "STALL_AFTER_S", 1.0)
    monkeypatch.setattr(runner, "HEARTBEAT_EVERY_S", 0.2)
    f = tmp_path / "s.yaml"
    f.write_text("name: x\nseeds: 1\ndefaults: {timesteps: 64}\nenvs:\n"
                 "  - {id: 'bad_envs:Sleeps-v0', kwargs: {at: 20, sleep_s: 3}, threshold: 1}\n"
                 "  - {id: 'bad_envs:Sleeps-v0', kwargs: {at: 20, sleep_s: 3.01}, threshold: 1, time_scale_us: 1e6}\n"
                 "algorithms: [{algo: a2c, impl: bench, hyperparams: {n_envs: 1, n_steps: 8}}]\n")
    loaded = load_suite(f)
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = Store(url)
    db.register(loaded.suite.name, str(f), loaded.suite.model_dump(mode="json"), loaded.env_meta, loaded.cells)
    out: dict = {}
    threads = [threading.Thread(target=lambda c=c: out.update({c.env_id: runner.run_cell(StoreURL.parse(url), c, this_owner())}))
               for c in loaded.cells]
    for t in threads:
        t.start()
    notes: dict[str, set] = {c.env_id: set() for c in loaded.cells}
    deadline = time.monotonic() + 60
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        time.sleep(0.25)
        for c in status(f, url).cells:
            if c.state == "stalled":
                notes[c.env_id].add(c.error)
    for t in threads:
        t.join(30)
    fast, slow = (c.env_id for c in loaded.cells)
    assert any(n.startswith("stalled: no env step for ") and "(at step 19)" in n for n in notes[fast]), notes
    assert not notes[slow], notes
    assert {k: o.status for k, o in out.items()} == {fast: "done", slow: "done"}, out
    rows = db.rows([c.key for c in loaded.cells])
    assert all(r.status == "done" and r.error is None for r in rows.values())  # the note clears
    db.dispose()


# --------------------------------------------------------------------------- #
# Errors that name the cause: the env's faults are the env's
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("env, message", [
    ("NanReward-v0", "env bad_envs:NanReward-v0 returned reward nan at step 5"),
    ("InfObservation-v0", "env bad_envs:InfObservation-v0 returned observation -inf at step 5"),
    ("WrongShape-v0", "env bad_envs:WrongShape-v0 returned an observation of shape (4,) at step 5; its observation "
                      "space says (3,)"),
    ("Raises-v0", "env bad_envs:Raises-v0 raised ValueError: the simulator exploded at step 5"),
    # Strings used to end the run with NumPy's "the resolved dtypes are not compatible with add.reduce".
    ("StrObservation-v0", "env bad_envs:StrObservation-v0 returned an observation of dtype <U1 at step 5; its "
                          "observation space is Box(-10.0, 10.0, (3,), float32) (allowed: arrays of numbers: bool, "
                          "integer or float)"),
    ("StrObservationAtReset-v0", "env bad_envs:StrObservationAtReset-v0 returned an observation of dtype <U1 at its "
                                 "first reset; its observation space is Box(-10.0, 10.0, (3,), float32) (allowed: "
                                 "arrays of numbers: bool, integer or float)"),
])
def test_an_env_fault_names_the_env_the_step_and_the_quantity(env, message):
    """A NaN reward used to read "Diverged: non-finite loss/policy = nan at step 152 at record.py:164"."""
    from bench.algos.hyperparams import PARAMS
    from bench.run.runner import record_cell
    from bench.suites.suite import Cell

    cell = Cell("s", f"bad_envs:{env}", "a2c", "bench", "a2c", 0, 200, None, 5, None,
                PARAMS["a2c"]().model_dump(mode="json") | {"n_steps": 8})
    _, error = record_cell(cell)
    assert error == message


def test_the_vector_monitor_checks_the_same_in_one_batch():
    import gymnasium as gym
    import numpy as np

    import bad_envs  # noqa: F401
    from bench.envs.checks import EnvError
    from bench.envs.vector import VectorEpisodeMonitor
    from bench.storage.record import Recorder

    rec = Recorder()
    venv = VectorEpisodeMonitor(gym.vector.SyncVectorEnv([lambda: gym.make("NanReward-v0")] * 2), rec, "NanReward-v0")
    venv.reset(seed=0)
    for _ in range(4):
        venv.step(np.zeros(2, np.int64))
    with pytest.raises(EnvError, match=r"^env NanReward-v0 returned reward nan at step 9$"):
        venv.step(np.zeros(2, np.int64))


def test_the_vector_monitor_refuses_observations_that_are_not_numbers():
    """A vector env of the user's own (not gymnasium's, which would fail to batch strings) is checked too."""
    import gymnasium as gym
    import numpy as np

    from bench.envs.checks import EnvError
    from bench.envs.vector import VectorEpisodeMonitor
    from bench.storage.record import Recorder

    class Words(gym.vector.VectorEnv):
        num_envs = 2
        single_observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        single_action_space = gym.spaces.Discrete(2)
        observation_space = gym.vector.utils.batch_space(single_observation_space, 2)
        action_space = gym.vector.utils.batch_space(single_action_space, 2)

        def __init__(self, at):
            self.at, self.t = at, 0

        def obs(self):
            return np.full((2, 3), "x") if self.t == self.at else np.zeros((2, 3), np.float32)

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return self.obs(), {}

        def step(self, actions):
            self.t += 1
            return self.obs(), np.ones(2), np.zeros(2, bool), np.zeros(2, bool), {}

    venv = VectorEpisodeMonitor(Words(at=3), Recorder(), "Words-v0")
    venv.reset(seed=0)
    venv.step(np.zeros(2, np.int64))
    venv.step(np.zeros(2, np.int64))
    with pytest.raises(EnvError, match=r"^env Words-v0 returned an observation of dtype <U1 at step 5; its observation "
                                       r"space is Box\(-1.0, 1.0, \(3,\), float32\) \(allowed: arrays of numbers"):
        venv.step(np.zeros(2, np.int64))
    with pytest.raises(EnvError, match=r"^env Words-v0 returned an observation of dtype <U1 at the reset after step 4;"):
        VectorEpisodeMonitor(Words(at=0), venv.recorder, "Words-v0").reset(seed=0)


def test_a_non_finite_action_is_the_policy_s(monkeypatch):
    import numpy as np

    from bench.envs import make_env
    from bench.envs.checks import EnvError
    from bench.storage.record import Recorder

    env = make_env("Pendulum-v1", recorder=Recorder())
    env.reset(seed=0)
    env.step(np.zeros(1, np.float32))
    with pytest.raises(EnvError, match=r"^env Pendulum-v1 was given the action nan at step 2 \(the policy's output"):
        env.step(np.array([np.nan], np.float32))


@pytest.mark.parametrize("env, space", [("DictObs-v0", "Dict"), ("TupleObs-v0", "Tuple")])
def test_an_unsupported_observation_space_is_refused_at_validation(tmp_path, env, space):
    f = tmp_path / "s.yaml"
    f.write_text(f"name: x\nseeds: 1\ndefaults: {{timesteps: 1000}}\nenvs: [{{id: 'bad_envs:{env}', threshold: 1}}]\n"
                 "algorithms: [{algo: a2c, impl: bench}]\n")
    tests = str(Path(__file__).resolve().parent)
    p = subprocess.run([sys.executable, "-m", "bench", "run", str(f), "--store", f"sqlite:///{tmp_path / 's.db'}"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={**os.environ, "PYTHONPATH": tests})
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"envs[0].id: bad_envs:{env} has a {space} observation space" in lines[0]
    assert "allowed: Box observations (vectors or frames) or MultiDiscrete token ids" in lines[0]
    assert not (tmp_path / "s.db").exists()
