"""``bench race``: a run paused at a rung continues from its checkpoint to the uninterrupted run's returns, and
the command races labels rung by rung (docs/race.md, "Running a race")."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

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
    paused = run_cell(url, replace(cell, pause_at=third), this_owner())
    assert paused.status == "paused", paused.error
    row = Store(url).rows([cell.key])[cell.key]
    assert row.status == "interrupted" and "paused at step" in row.error
    assert third <= row.total_steps < TIMESTEPS and paused.summary["total_steps"] == row.total_steps
    assert checkpoints_of(cell, url).load() is not None  # kept, to continue from
    n = len(paused.episodes["ret"])
    assert 0 < n < len(whole.ep_return)
    assert paused.episodes["ret"] == whole.ep_return[:n] and paused.episodes["step"] == whole.ep_step[:n]
    done = run_cell(url, cell, this_owner())  # no pause: on to the full budget, from the checkpoint
    assert done.status == "done", done.error
    ep = Store(url).episodes_of(cell.key)
    assert ep["ret"].tolist() == whole.ep_return and ep["step"].tolist() == whole.ep_step
    meta = json.loads(Store(url).rows([cell.key])[cell.key].meta)
    assert meta["checkpoints"]["resumed_from_step"] == row.total_steps  # continued, not started again


def _in_process(monkeypatch):
    """The pool's workers run in this process (spawning them costs seconds each rung; the pool has its own tests)."""
    from bench.run import pool
    from bench.run.runner import run_cell

    def run_local(url, todo, owner, workers, on_done, remeasure=frozenset()):
        for c in todo:
            on_done(c, run_cell(url, c, owner))

    monkeypatch.setattr(pool, "run_local", run_local)


def test_bench_race_shows_its_rungs_and_answers_with_the_cpu_it_spent(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from bench.cli import app

    _in_process(monkeypatch)
    url = f"sqlite:///{tmp_path / 's.db'}"
    got = CliRunner().invoke(app, ["race", "CartPole-v1", "--algos", "ppo,a2c", "--seeds", "2", "--budget", "3000",
                                   "--rungs", "1/3,1", "--store", url])
    assert got.exit_code == 0, got.output
    lines = [x for x in got.output.splitlines() if not x.startswith("computing the random-policy anchor")]
    assert lines[0].startswith("rung 1: 1/3 of the budget (1,000 steps): leader ")
    assert lines[1].startswith("rung 2: the full budget (3,000 steps): leader ")
    assert any(x.startswith("answer: ") and "ppo-bench" in x for x in lines)
    cpu = next(x for x in lines if x.startswith("CPU: "))
    assert " s spent, against an estimated " in cpu and "4 runs × 3,000 steps" in cpu
    from bench.storage.store import Store

    rows = Store(url).runs_frame()
    assert len(rows) == 4 and set(rows["status"]) == {"done"}  # nothing ruled out: every run went to the end
    assert all(json.loads(m)["checkpoints"]["resumed_from_step"] >= 1000 for m in rows["meta"])  # continued


def test_a_label_stopped_at_a_rung_stays_paused_and_the_rest_continue(tmp_path, monkeypatch):
    from bench import api
    from bench.analysis import race as decide
    from bench.storage.store import Store

    _in_process(monkeypatch)
    # The decision is race.py's (tests/test_race.py); here a rung that rules a2c out, whatever the scores.
    monkeypatch.setattr(decide, "race_step", lambda scores, alpha: decide.RaceStep(
        "ppo-bench", ("ppo-bench",), (decide.Stop("a2c-bench", 0.001, 0.002),), alpha))
    url = f"sqlite:///{tmp_path / 's.db'}"
    seen = []
    result = api.race("CartPole-v1", algos="ppo,a2c", seeds=2, budget=3000, rungs="1/3,1", store=url,
                      on_rung=lambda r, _: seen.append((r.ran, {k: v.copy() for k, v in r.scores.items()})))
    assert [ran for ran, _ in seen] == [("ppo-bench", "a2c-bench"), ("ppo-bench",)]
    assert result.kept == ("ppo-bench",) and result.pick == "ppo-bench"
    rows = Store(url).runs_frame().set_index("label")
    a2c, ppo = rows.loc["a2c-bench"], rows.loc["ppo-bench"]
    assert set(a2c["status"]) == {"interrupted"} and (a2c["total_steps"] < 3000).all()  # paused, not run on
    assert set(ppo["status"]) == {"done"}
    assert all(1000 <= json.loads(m)["checkpoints"]["resumed_from_step"] < 3000 for m in ppo["meta"])  # continued
    assert 0 < result.cpu_s < result.grid_cpu_s  # a2c's last two thirds were not run
    lines = api.race_answer_lines(result)
    assert lines[0].startswith("answer: ppo-bench wins on CartPole-v1")
