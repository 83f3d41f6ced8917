"""bench.api's services, as a notebook calls them: no CLI, no printing, one exception type for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import api
from bench.storage.store import Store

SUITE = """name: api-tiny
seeds: 2
defaults: {timesteps: 400}
envs: [{id: CartPole-v1}]
algorithms:
  - {algo: a2c, impl: bench, hyperparams: {n_envs: 1, n_steps: 8}}
"""


def _suite(tmp_path: Path) -> Path:
    p = tmp_path / "tiny.yaml"
    p.write_text(SUITE)
    return p


def test_plan_run_writes_nothing_and_names_the_cells(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    plan = api.plan_run(_suite(tmp_path), url, workers=1)
    assert plan.name == "api-tiny" and [c.seed for c in plan.cells] == [0, 1]
    assert {c.env_id for c in plan.cells} == {"CartPole-v1"} and plan.cost.line()
    assert not (tmp_path / "a.db").exists()
    only = api.plan_run(_suite(tmp_path), url, only="seed=1")
    assert [c.seed for c in only.cells] == [1]


@pytest.mark.parametrize("kwargs, words", [
    ({"only": "seed=7"}, "--only: 'seed=7' matches none"),
    ({"store": "sqlite://"}, "in-memory SQLite"),
    ({"executor": "dask"}, "--executor: 'dask' is not allowed"),
    ({"address": "auto"}, "--address: only used with --executor ray"),
    ({"overrides": ["defaults.timesteps=-3"]}, "timesteps"),
])
def test_bad_input_is_one_exception_with_one_line_each(tmp_path, kwargs, words):
    kwargs = {"store": f"sqlite:///{tmp_path / 'a.db'}", **kwargs}
    with pytest.raises(api.BadInput) as e:
        api.plan_run(_suite(tmp_path), **kwargs)
    assert words in str(e.value) and all("\n" not in ln for ln in e.value.lines)
    assert not (tmp_path / "a.db").exists()


def test_run_suite_runs_then_resumes_and_reports_through_callbacks(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    started, ended = [], []
    run = api.run_suite(_suite(tmp_path), url, workers=1, on_start=lambda r, todo: started.append(len(todo)),
                        on_done=lambda c, o: ended.append((c.seed, o.status)))
    assert started == [2] and sorted(ended) == [(0, "done"), (1, "done")]
    assert run.interrupted is None and not run.failed and run.seconds > 0
    df = run.frame()
    assert list(df["status"]) == ["done", "done"] and df["final_return"].notna().all()
    assert (Store(url).runs_frame("api-tiny")["status"] == "done").all()

    again = api.run_suite(_suite(tmp_path), url, workers=1)  # a second call runs nothing: the cells are done
    assert (again.done_before, again.results, again.busy) == (2, [], 0)
