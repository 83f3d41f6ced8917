"""How far long runs are: heartbeats carry steps, `bench status` shows them, `bench run` follows them."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from bench.run.progress import LiveProgress, duration, fraction, progress_line, run_progress, seconds_left
from bench.storage.store import Store
from bench.suites.suite import load_suite
from bench.storage.urls import StoreURL


def test_fractions_times_and_lines():
    assert fraction(None, 1000) == 0.0 and fraction(250, 1000) == 0.25 and fraction(1100, 1000) == 1.0
    assert seconds_left(60.0, 0.0) is None and seconds_left(60.0, 0.25) == pytest.approx(180.0)
    assert [duration(s) for s in (0, 40, 89, 90, 779, 5300, 5400, 7500)] == \
        ["0 s", "40 s", "89 s", "2 min", "13 min", "88 min", "1 h 30 min", "2 h 05 min"]
    # 41% done after 9 minutes: 13 minutes left at that pace.
    assert run_progress(410_000, 1_000_000, 1000.0, 1000.0 + 540.0) == "410,000 of 1,000,000 (41%, ~13 min left)"
    assert run_progress(None, 1_000_000, 1000.0, 1600.0) == "—"
    # An equal-compute run (cpu_seconds) stops at whichever budget comes first: it is as far as the
    # further of the two, and its step budget is out of reach on purpose.
    assert fraction(1_200_000, 10_000_000, 900.0, 1200.0) == 0.75
    assert fraction(900_000, 1_000_000, 60.0, 1200.0) == 0.9 and fraction(10, 100, 5000.0, 1200.0) == 1.0
    assert fraction(500, 1000, 900.0, None) == 0.5
    assert run_progress(1_203_000, 10_000_000, 1000.0, 1000.0 + 900.0, 900.0, 1200.0) == \
        "1,203,000 steps, 900 of 1,200 CPU s (75%, ~5 min left)"
    assert run_progress(900_000, 1_000_000, 1000.0, 1000.0 + 900.0, 60.0, 1200.0) == \
        "900,000 of 1,000,000 (90%, ~2 min left)"
    line = progress_line("ref", 12, 3, [("A seed 0", 0.5), ("B seed 1", 0.25), ("C", 0.1), ("D", 0.1), ("E", 0.05)],
                         elapsed=600.0)
    # 3 + 1.0 of 12 cells in 10 minutes: 20 more at that pace.
    assert line == ("ref: 3/12 cells finished; running: A seed 0 50%, B seed 1 25%, C 10%, D 10%, +1 more; "
                    "10 min so far, ~20 min left")
    assert progress_line("ref", 2, 0, [], elapsed=5.0) == "ref: 0/2 cells finished; 5 s so far"


def test_live_progress_polls_running_cells_until_they_finish():
    rows = {"a": SimpleNamespace(status="running", total_steps=500, timesteps=1000),
            # at a CPU budget of 100 s, 80 s used: 80% done, though 1% of its steps
            "e": SimpleNamespace(status="running", total_steps=10, timesteps=1000, cpu_s=80.0,
                                 config='{"cpu_seconds": 100}'),
            "b": SimpleNamespace(status="running", total_steps=None, timesteps=1000),  # no report yet
            "c": SimpleNamespace(status="done", total_steps=1000, timesteps=1000)}
    asked: list[list[str]] = []

    def read(keys):
        asked.append(keys)
        return {k: rows[k] for k in keys if k in rows}

    polls: list[dict[str, float]] = []
    live = LiveProgress(read, ["a", "b", "c", "d", "e"], polls.append, every=0.05)
    assert live.poll() == {"a": 0.5, "e": 0.8}
    live.finished("a")
    live.finished("e")
    assert live.poll() == {} and asked[-1] == ["b", "c", "d"]
    with live:  # the thread polls on its own, and a failing read does not stop it
        rows["b"].total_steps = 250
        time.sleep(0.3)
    assert polls and polls[-1] == {"b": 0.25}

    def broken(keys):
        raise OSError("store unreachable")

    seen: list[dict[str, float]] = []
    with LiveProgress(broken, ["a"], seen.append, every=0.02):
        time.sleep(0.1)
    assert seen == []


def test_a_running_cell_reports_its_steps_through_its_heartbeats(tmp_path, monkeypatch):
    from bench.run import runner

    f = tmp_path / "s.yaml"
    f.write_text("name: s\nseeds: [0]\ndefaults: {timesteps: 4096}\nenvs: [{id: CartPole-v1}]\n"
                 "algorithms: [{algo: a2c, impl: bench}]\n")
    (cell,) = load_suite(f).cells
    url = f"sqlite:///{tmp_path / 'b.db'}"
    Store(url).register("s", str(f), {}, {}, [cell])
    beats: list[int] = []
    cpus: list[float] = []
    real = Store.heartbeat

    def spy(self, key, attempt, steps=None, cpu_s=None, stalled=None):
        beats.append(steps)
        cpus.append(cpu_s)
        real(self, key, attempt, steps, cpu_s, stalled)

    train = runner.train_cell

    def slow(c, recorder):  # a few ms per update, so that beats fall inside the run
        recorder.heartbeat = lambda: time.sleep(0.002)
        recorder.heartbeat_every = 0.0
        train(c, recorder)

    monkeypatch.setattr(Store, "heartbeat", spy)
    monkeypatch.setattr(runner, "HEARTBEAT_EVERY_S", 0.02)
    monkeypatch.setattr(runner, "train_cell", slow)
    runner._STORES.clear()
    out = runner.run_cell(StoreURL.parse(url), cell, "me:1:1")
    assert out.status == "done", out
    final = out.summary["total_steps"]
    counts = [b for b in beats if b]
    assert counts and counts == sorted(counts) and counts[-1] <= final, beats
    # ... and its training CPU seconds, how far a run with a CPU budget is
    assert all(c is not None and c >= 0 for c in cpus) and cpus == sorted(cpus), cpus
    assert cpus[-1] <= out.summary["cpu_s"]
    assert Store(url).rows([cell.key])[cell.key].total_steps == final  # the final count replaces the live one


def test_status_shows_how_far_a_running_run_is(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: s\nseeds: 2\ndefaults: {timesteps: 1000000, cpu_seconds: 1200}\nenvs: [{id: CartPole-v1}]\n"
                 "algorithms: [{algo: ppo, impl: sb3}]\n")
    loaded = load_suite(f)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    db = Store(url)
    db.register("s", str(f), {}, loaded.env_meta, loaded.cells)
    c0, c1 = loaded.cells
    a = db.claim(c0.key, "ray-abc@node-7:4242:1")  # a live run on another host
    db.heartbeat(c0.key, a, 410_000, 30.0)  # further along its steps than its CPU budget
    b = db.claim(c1.key, "ray-abc@node-7:4242:2")
    db.heartbeat(c1.key, b, 20_000, 600.0)  # further along its CPU budget
    p = subprocess.run([sys.executable, "-m", "bench", "status", str(f), "--store", url], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    row = next(m.group(0) for m in re.finditer(r"│ CartPole-v1 │ ppo-sb3 │ 0 .*", p.stdout))
    assert "410,000 of 1,000,000 (41%" in row and "left)" in row
    row = next(m.group(0) for m in re.finditer(r"│ CartPole-v1 │ ppo-sb3 │ 1 .*", p.stdout))
    assert "20,000 steps, 600 of 1,200 CPU s (50%" in row, p.stdout


@pytest.mark.heavy
def test_a_log_gets_whole_progress_lines(tmp_path, monkeypatch):
    # Where stderr is not a terminal (nohup, CI), `bench run` writes a progress line now and then; each
    # stays one line however long the names of the cells in flight (rich wrapped them at 160 columns).
    from typer.testing import CliRunner

    from bench import cli
    from bench.cli import running
    from bench.run import runner

    monkeypatch.setattr(running, "PROGRESS_LINE_EVERY_S", 0.0)
    monkeypatch.setattr(runner, "HEARTBEAT_EVERY_S", 0.2)
    # Every cell still pending reads as half done (workers beat every 10 s; these runs last about 3).
    monkeypatch.setattr(LiveProgress, "poll", lambda self: {k: 0.5 for k in self._pending})
    long = "a-label-long-enough-to-push-a-progress-line-past-the-log-width-" * 2
    f = tmp_path / "s.yaml"
    f.write_text(f"name: s\nseeds: [0, 1]\ndefaults: {{timesteps: 4096}}\nenvs: [{{id: CartPole-v1}}]\n"
                 f"algorithms:\n  - {{algo: reinforce, impl: bench, label: {long[:120]}}}\n")
    res = CliRunner().invoke(cli.app, ["run", str(f), "--store", f"sqlite:///{tmp_path / 's.db'}", "--workers", "2"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if "cells finished" in ln]
    assert any(long[:120] in ln and len(ln) > 250 for ln in lines), res.output  # long enough to have wrapped
    for ln in lines:
        assert re.fullmatch(r"s: \d/2 cells finished; .* so far(, ~.* left)?", ln), ln
