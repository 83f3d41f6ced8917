

def test_cpu_hours_ends_the_race_after_the_rung_that_spent_them(tmp_path, monkeypatch):
    from bench import api
    from bench.storage.store import Store

    _in_process(monkeypatch)
    url = f"sqlite:///{tmp_path / 's.db'}"
    result = api.race("CartPole-v1", algos="ppo,a2c", seeds=2, budget=1500, rungs="1/3,1", store=url, cpu_hours=1e-9)
    assert len(result.rungs) == 1 and result.cut.startswith("--cpu-hours 1e-09: ")
    assert set(Store(url).runs_frame()["status"]) == {"interrupted"}  # paused at the rung, not run on
    assert api.race_answer_lines(result)[0].startswith("ended early: --cpu-hours")
