"""Equal-compute budgets: a run with a CPU-seconds limit stops at an update boundary at or after it, and says so."""

from __future__ import annotations

import pytest

from bench.algos.hyperparams import resolve
from bench.run.runner import record_cell, result_of
from bench.suites.suite import Cell, cell_key


def _cell(algo: str, impl: str, cpu_seconds: float | None, **hp) -> Cell:
    params = resolve(algo, "CartPole-v1", hp).model_dump(mode="json")
    c = Cell("budget", "CartPole-v1", algo, impl, f"{algo}-{impl}", 0, 10_000_000, 475.0, 10, None, params,
             cpu_seconds=cpu_seconds)
    return Cell(**{**c.__dict__, "key": cell_key(c.identity())})


@pytest.mark.parametrize("impl", ["bench", "sb3"])
def test_a_cpu_budget_stops_the_run_at_an_update_boundary_and_records_why(impl):
    cell = _cell("ppo", impl, 1.0, n_envs=4, n_steps=128, batch_size=256)
    rec, err = record_cell(cell)
    assert err is None
    rollout = 4 * 128
    assert rec.stopped_by == "cpu_seconds"
    assert rec.cpu_seconds() >= 1.0  # at or after the limit ...
    assert 0 < rec.steps < cell.timesteps and rec.steps % rollout == 0  # ... at the end of an update
    assert rec.updates == rec.steps // rollout
    res = result_of(cell, rec, 0.0)
    assert res.meta["stopped_by"] == "cpu_seconds" and res.summary["total_steps"] == rec.steps


def test_without_a_cpu_budget_the_step_budget_ends_the_run():
    cell = _cell("a2c", "bench", None, n_envs=2, n_steps=5)
    cell = Cell(**{**cell.__dict__, "timesteps": 2000})
    rec, err = record_cell(cell)
    assert err is None and rec.stopped_by == "timesteps" and rec.steps >= 2000


def test_the_budget_is_part_of_the_key_only_when_set():
    assert "cpu_seconds" not in _cell("ppo", "bench", None).identity()
    assert _cell("ppo", "bench", 3600.0).identity()["cpu_seconds"] == 3600.0
    assert _cell("ppo", "bench", 3600.0).key != _cell("ppo", "bench", 1800.0).key


def test_runs_at_an_equal_cpu_budget_are_compared_at_equal_compute(tmp_path):
    # Two labels, one twice as fast per step, both stopped at 5 CPU seconds of a 20k-step budget: the fast
    # one runs 10k steps, the slow one 5k. Over env steps they have nothing in common, so the sample
    # criterion is not scored; the time axis is the 5 CPU seconds each had. Runs of another CPU budget in
    # the same store are set aside, as runs of another step budget are.
    from synthetic import Planted, write_store

    from bench.analysis import scoring

    fast = Planted("fast", "ppo", "bench", 0.8, sec_per_kstep=0.5)
    slow = Planted("slow", "trpo", "bench", 0.8, sec_per_kstep=1.0)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    write_store(url, ["CartPole-v1"], [fast, slow], seeds=5, timesteps=20_000, cpu_seconds=5.0).dispose()
    write_store(url, ["CartPole-v1"], [fast], seeds=2, timesteps=20_000, cpu_seconds=2.5, suite="other").dispose()

    data = scoring.load(url, anchors=False)
    assert data.cpu_budgets == {"CartPole-v1": 5.0} and data.budgets == {"CartPole-v1": 20_000}
    assert data.runs["pooled"].sum() == 10  # the 2 runs at 2.5 CPU seconds are set aside ...
    assert any("2 done run(s) set aside, at CPU budget 2.5 s" in n and "or 5 CPU seconds" in n for n in data.notes)
    assert any("equal-compute budget of 5 training CPU seconds" in n for n in data.notes)
    scored = scoring.score(data)
    r = scored.runs
    assert scored.horizons["CartPole-v1"] == 5.0  # not budget x time scale (20 CPU s here)
    assert r["auc_steps_norm"].isna().all() and r["auc_time_norm"].notna().all()
    steps = r.groupby("label")["total_steps"].median()
    assert steps["fast"] > 1.8 * steps["slow"]  # what the same CPU time bought each
    assert (r["cpu_s"] >= 5.0).all() and (r["cpu_s"] < 5.0 + 0.5).all()  # stopped at the first episode past it
    # The figures' step axis ends where the longest run ended, not at the unreached 20k-step budget.
    assert scored.curves["CartPole-v1"].steps[-1] == r["total_steps"].max() < 20_000

    # The same runs without a CPU budget keep the step axis and the time scale's horizon.
    url2 = f"sqlite:///{tmp_path / 'c.db'}"
    write_store(url2, ["CartPole-v1"], [fast, slow], seeds=5, timesteps=20_000).dispose()
    d2 = scoring.load(url2, anchors=False)
    s2 = scoring.score(d2)
    assert d2.cpu_budgets == {} and s2.horizons["CartPole-v1"] == 20_000 * 1000.0 * 1e-6
    assert s2.runs["auc_steps_norm"].notna().all()
