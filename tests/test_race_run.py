"""``bench race``: a run paused at a rung continues from its checkpoint to the uninterrupted run's returns, and
the command races labels rung by rung (docs/race.md, "Running a race")."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from bench.storage.urls import StoreURL

from tests.test_checkpoints import TIMESTEPS, _cell


def test_a_run_paused_at_a_third_continues_to_the_uninterrupted_runs_returns(tmp_path):
    from bench.run.runner import checkpoints_of, record_cell, run_cell
    from bench.storage.owners import this_owner
    from bench.storage.store import Store

    url = f"sqlite:///{tmp_path / 's.db'}"
    cell = _cell(tmp_path, url=url)
    whole, err = record_cell(cell)  # the same seed, uninterrupted
    assert err is None
    third = TIMESTEPS // 3
    paused = run_cell(StoreURL.parse(url), replace(cell, pause_at=third), this_owner())
    assert paused.status == "paused", paused.error
    row = Store(url).rows([cell.key])[cell.key]
    assert row.status == "interrupted" and "paused at step" in row.error
    assert third <= row.total_steps < TIMESTEPS and paused.summary["total_steps"] == row.total_steps
    assert checkpoints_of(cell, StoreURL.parse(url)).load() is not None  # kept, to continue from
    n = len(paused.episodes["ret"])
    assert 0 < n < len(whole.ep_return)
    assert paused.episodes["ret"] == whole.ep_return[:n] and paused.episodes["step"] == whole.ep_step[:n]
    again = run_cell(StoreURL.parse(url), replace(cell, pause_at=third), this_owner())  # already there: paused again at once
    assert again.status == "paused" and again.summary["total_steps"] == row.total_steps
    assert again.episodes == paused.episodes
    done = run_cell(StoreURL.parse(url), cell, this_owner())  # no pause: on to the full budget, from the checkpoint
    assert done.status == "done", done.error
    ep = Store(url).episodes_of(cell.key)
    assert ep["ret"].tolist() == whole.ep_return and ep["step"].tolist() == whole.ep_step
    meta = json.loads(Store(url).rows([cell.key])[cell.key].meta)
    assert meta["checkpoints"]["resumed_from_step"] == row.total_steps  # continued, not started again


def _in_process(monkeypatch):
    """The pool's workers run in this process (spawning them costs seconds each rung; the pool has its own tests)."""
    from bench.run import pool
    from bench.run.runner import run_cell

    def run_local(store_url, todo, owner, workers, on_done, remeasure=frozenset()):
        for c in todo:
            on_done(c, run_cell(store_url, c, owner))

    monkeypatch.setattr(pool, "run_local", run_local)


def test_bench_race_shows_its_rungs_and_answers_with_the_cpu_it_spent(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from bench.cli import app

    _in_process(monkeypatch)
    url = f"sqlite:///{tmp_path / 's.db'}"
    got = CliRunner().invoke(app, ["race", "CartPole-v1", "--algos", "ppo,a2c", "--seeds", "2", "--budget", "1500",
                                   "--rungs", "1/3,1", "--store", url])
    assert got.exit_code == 0, got.output
    lines = [x for x in got.output.splitlines() if not x.startswith("computing the random-policy anchor")]
    assert lines[0].startswith("rung 1: 1/3 of the budget (500 steps): leader ")
    assert lines[1].startswith("rung 2: the full budget (1,500 steps): leader ")
    assert any(x.startswith("answer: ") and "ppo-bench" in x for x in lines)
    cpu = next(x for x in lines if x.startswith("CPU: "))
    assert " s spent, against an estimated " in cpu and "4 runs × 1,500 steps" in cpu
    from bench.storage.store import Store

    rows = Store(url).runs_frame()
    assert len(rows) == 4 and set(rows["status"]) == {"done"}  # nothing ruled out: every run went to the end
    assert all(json.loads(m)["checkpoints"]["resumed_from_step"] >= 500 for m in rows["meta"])  # continued


def test_a_label_stopped_at_a_rung_stays_paused_and_the_rest_continue(tmp_path, monkeypatch):
    from bench import api
    from bench.analysis import race as decide
    from bench.cli.racing import _rung_lines
    from bench.storage.store import Store

    _in_process(monkeypatch)
    # The decision is race.py's (tests/test_race.py); here a rung that rules a2c out, whatever the scores.
    monkeypatch.setattr(decide, "race_step", lambda scores, alpha: decide.RaceStep(
        "ppo-bench", ("ppo-bench",), (decide.Stop("a2c-bench", 0.001, 0.002),), alpha))
    url = f"sqlite:///{tmp_path / 's.db'}"
    seen, printed = [], []

    def on_rung(report, so_far):
        seen.append((report.ran, {k: v.copy() for k, v in report.scores.items()}))
        printed.extend(_rung_lines(report, so_far))

    result = api.race("CartPole-v1", algos="ppo,a2c", seeds=2, budget=1500, rungs="1/3,1", store=url, on_rung=on_rung)
    assert printed[:2] == ["rung 1: 1/3 of the budget (500 steps): leader ppo-bench; go on: ppo-bench",
                           "  stopped a2c-bench: behind ppo-bench (one-sided Welch p = 0.001, Holm-adjusted 0.002, "
                           "below 0.05)"]
    assert [ran for ran, _ in seen] == [("ppo-bench", "a2c-bench"), ("ppo-bench",)]
    assert result.kept == ("ppo-bench",) and result.pick == "ppo-bench"
    rows = Store(url).runs_frame().set_index("label")
    a2c, ppo = rows.loc["a2c-bench"], rows.loc["ppo-bench"]
    assert set(a2c["status"]) == {"interrupted"} and (a2c["total_steps"] < 1500).all()  # paused, not run on
    assert set(ppo["status"]) == {"done"}
    assert all(500 <= json.loads(m)["checkpoints"]["resumed_from_step"] < 1500 for m in ppo["meta"])  # continued
    assert 0 < result.cpu_s < result.grid_cpu_s  # a2c's last two thirds were not run
    lines = api.race_answer_lines(result)
    assert lines[0].startswith("answer: ppo-bench wins on CartPole-v1")


@pytest.mark.parametrize("flags, line", [
    (["--algos", "ppo-sb3"], "--algos: 'ppo-sb3' cannot race: SB3's runs take no checkpoints"),
    (["--algos", "a3c"], "--algos: 'a3c' cannot race: its runs take no checkpoints"),
    (["--algos", "ppo,nope"], "--algos: 'nope' is not a registered algorithm; allowed: "),
    (["--algos", "ppo,ppo-bench"], "--algos: 'ppo-bench' is given twice"),
    (["--rungs", "1/3,1/9,1"], "--rungs: '1/3,1/9,1'; allowed: increasing fractions"),
    (["--rungs", "1/3,x"], "--rungs: '1/3,x' is not a list of fractions"),
    (["--rungs", "1/3"], "--rungs: '1/3'; allowed:"),
    (["--seeds", "1"], "--seeds: 1 is too few"),
    (["--budget", "0"], "--budget: 0; allowed: a positive number of env steps"),
    (["--cpu-hours", "-1"], "--cpu-hours: -1.0; allowed: a positive number"),
    (["--priority", "fast"], "--priority: 'fast' is not allowed; allowed: "),
])
def test_bad_race_flags_get_one_line_and_exit_2_writing_nothing(tmp_path, flags, line):
    from typer.testing import CliRunner

    from bench.cli import app

    base = {"--algos": "ppo,a2c", "--budget": "3000"}
    args = ["race", "CartPole-v1", "--store", f"sqlite:///{tmp_path / 's.db'}"]
    for k, v in base.items():
        if k not in flags:
            args += [k, v]
    got = CliRunner().invoke(app, args + flags)
    assert got.exit_code == 2 and got.output.startswith(line) and got.output.count("\n") == 1, got.output
    assert list(tmp_path.iterdir()) == []


def test_default_algos_are_the_references_candidates_that_can_race(monkeypatch):
    from bench.api import _race, _recommend

    rows = [{"candidates": ["ppo-sb3 = ppo-bench", "trpo-sb3", "a3c-bench", "a2c-numpy"],
             "label_parts": {"ppo-sb3": ["ppo", "sb3"], "ppo-bench": ["ppo", "bench"], "trpo-sb3": ["trpo", "sb3"],
                             "a3c-bench": ["a3c", "bench"], "a2c-numpy": ["a2c", "numpy"]}}]
    seen = {}

    def recommend(source, **kw):
        seen.update(kw)
        return type("A", (), {"rows": rows})()

    monkeypatch.setattr(_recommend, "recommend", recommend)
    assert _race.default_algos("CartPole-v1", "time") == "ppo,a2c-numpy"  # ppo-sb3's twin ppo-bench; not trpo-sb3, a3c
    assert seen == {"action": "discrete", "obs": "vector", "reward": "dense", "priority": "time", "log": None}
    rows[0]["candidates"] = ["trpo-sb3"]
    assert _race.default_algos("CartPole-v1", None) == "ppo,a2c,trpo"  # none can race: the fallback


@pytest.mark.heavy  # `bench race` through the process pool: worker processes start at each rung, about 2.5 minutes
def test_bench_race_end_to_end_on_the_pool_then_report_reads_it(tmp_path):
    import subprocess
    import sys

    from bench.storage.store import Store

    url = f"sqlite:///{tmp_path / 's.db'}"
    cmd = [sys.executable, "-m", "bench", "race", "CartPole-v1", "--algos", "ppo,a2c", "--seeds", "2", "--budget",
           "4000", "--rungs", "1/9,1/3,1", "--store", url, "--workers", "2"]
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert [x.split(":")[0] for x in lines[:3]] == ["rung 1", "rung 2", "rung 3"]
    assert any(x.startswith("answer: ") for x in lines) and any(x.startswith("CPU: ") for x in lines)
    rows = Store(url).runs_frame()
    assert len(rows) == 4 and (rows["status"] == "done").all()
    suite = rows["suite"].iloc[0]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # all done: the same answer, no run
    assert again.returncode == 0 and [x for x in again.stdout.splitlines() if x.startswith("answer")] == \
        [x for x in lines if x.startswith("answer")]
    report = subprocess.run([sys.executable, "-m", "bench", "report", suite, "--store", url, "--out",
                             str(tmp_path / "report"), "--workers", "0"], capture_output=True, text=True, timeout=600)
    assert report.returncode == 0, report.stderr


def test_cpu_hours_ends_the_race_after_the_rung_that_spent_them(tmp_path, monkeypatch):
    from bench import api
    from bench.storage.store import Store

    _in_process(monkeypatch)
    url = f"sqlite:///{tmp_path / 's.db'}"
    result = api.race("CartPole-v1", algos="ppo,a2c", seeds=2, budget=1500, rungs="1/3,1", store=url, cpu_hours=1e-9)
    assert len(result.rungs) == 1 and result.cut.startswith("--cpu-hours 1e-09: ")
    assert set(Store(url).runs_frame()["status"]) == {"interrupted"}  # paused at the rung, not run on
    assert api.race_answer_lines(result)[0].startswith("ended early: --cpu-hours")
