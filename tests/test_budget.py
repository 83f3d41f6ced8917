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
