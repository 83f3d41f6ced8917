"""A race written as a suite file (``race:``, ``bench race SUITE.yaml``), and a race on Ray with a PostgreSQL store
(``bench race --executor ray``): docs/race.md, "A race in a suite file" and "On Ray"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.test_race_run import _in_process

RACE = """\
name: my-race
race: {rungs: "1/3,1", priority: samples}
seeds: 2
defaults: {timesteps: 1500}
envs: [{id: CartPole-v1}]
algorithms: [{algo: ppo, impl: bench}, {algo: a2c, impl: bench}]
"""
#: The same race as flags of `bench race ENV`.
FLAGS = dict(algos="ppo,a2c", seeds=2, budget=1500, rungs="1/3,1")


def _write(tmp_path: Path, text: str, name: str = "my-race.yaml") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def test_a_race_suite_runs_the_cells_of_bench_race_with_the_same_flags_and_gives_its_answer(tmp_path, monkeypatch):
    from bench import api
    from bench.storage.store import Store

    _in_process(monkeypatch)
    f = _write(tmp_path, RACE)
    url = f"sqlite:///{tmp_path / 's.db'}"
    by_file = api.race_file(f, store=url)
    rows = Store(url).runs_frame()
    assert len(rows) == 4 and set(rows["suite"]) == {"my-race"}  # under the file's name, for `bench report my-race`
    # The paused runs continued from the checkpoints the race gave them (the file sets no checkpoint_every).
    assert all(json.loads(m)["checkpoints"]["resumed_from_step"] >= 500 for m in rows["meta"])
    # `bench race ENV` with the same settings into the same store: the very same runs (keys), all done, so it runs
    # nothing and decides every rung on the same curves.
    by_flags = api.race("CartPole-v1", store=url, **FLAGS)
    again = Store(url).runs_frame()  # a row per suite that holds a run
    assert set(again["suite"]) == {"my-race", by_flags.suite} and len(again) == 8
    assert again.groupby("key")["cpu_s"].agg(["count", "nunique"]).values.tolist() == [[2, 1]] * 4
    assert set(again["key"]) == set(rows["key"])
    assert [(r.fraction, r.steps, r.ran) for r in by_file.rungs] == [(r.fraction, r.steps, r.ran) for r in by_flags.rungs]
    assert [{k: v.tolist() for k, v in r.scores.items()} for r in by_file.rungs] == \
        [{k: v.tolist() for k, v in r.scores.items()} for r in by_flags.rungs]
    assert len(by_file.rungs) == 2 and (by_file.kept, by_file.pick, by_file.intervals) == \
        (by_flags.kept, by_flags.pick, by_flags.intervals)
    assert api.race_answer_lines(by_file)[-1].endswith(
        f"(`bench run {f} --set race=null --set defaults.checkpoint_every=150` completes the grid); "
        "`bench report my-race` reads the runs")


def _race_cli(tmp_path, *args):
    db = tmp_path / "results" / "bench.db"
    got = CliRunner().invoke(__import__("bench.cli", fromlist=["app"]).app,
                             ["race", *args, "--store", f"sqlite:///{db}"])
    return got, db


BAD = [
    # (what, the file's text, the one line's start after "FILE:LINE: ")
    ("rungs out of order", RACE.replace('"1/3,1"', '"1/3,1/9,1"'),
     "race.rungs: allowed: increasing fractions of the budget in (0, 1], the last 1, e.g. 1/9,1/3,1 (got '1/3,1/9,1')"),
    ("rungs not numbers", RACE.replace('"1/3,1"', "[1/3, x, 1]"), "race.rungs: not a list of fractions; allowed: "),
    ("rungs not ending at 1", RACE.replace('"1/3,1"', "[0.5]"), "race.rungs: allowed: increasing fractions"),
    ("cpu hours not positive", RACE.replace("priority: samples", "cpu_hours: -1"),
     "race.cpu_hours: input should be greater than 0 (got -1)"),
    ("unknown priority", RACE.replace("priority: samples", "priority: fast"), "race.priority: input should be 'samples' or 'time' (got 'fast')"),
    ("unknown key", RACE.replace("priority: samples", "alpha: 0.1"), "race.alpha: unknown key; allowed: rungs, "
                                                                     "cpu_hours, priority"),
    ("two envs", RACE.replace("envs: [{id: CartPole-v1}]", "envs: [{id: CartPole-v1}, {id: Acrobot-v1}]")
     .replace("timesteps: 1500", "timesteps: 100000"), "envs: a race is on one env, and this suite has 2; allowed: "
                                                        "one env (a race suite per env, or `bench race ENV` for each)"),
    ("one seed", RACE.replace("seeds: 2", "seeds: 1"), "seeds: too few to rule a label out in a race"),
    ("sb3", RACE.replace("{algo: a2c, impl: bench}", "{algo: a2c, impl: sb3}"),
     "algorithms[1].impl: cannot race: SB3's runs take no checkpoints"),
    ("a3c", RACE.replace("{algo: a2c, impl: bench}", "{algo: a3c, impl: bench}"),
     "algorithms[1].algo: cannot race: its runs take no checkpoints"),
]


@pytest.mark.parametrize("what, text, line", BAD, ids=[b[0] for b in BAD])
def test_a_bad_race_block_is_one_line_naming_file_path_value_and_what_is_allowed(tmp_path, what, text, line):
    f = _write(tmp_path, text)
    got, db = _race_cli(tmp_path, str(f))
    assert got.exit_code == 2, got.output
    lines = got.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{f}:") and line in lines[0], lines
    assert what == "unknown key" or lines[0].endswith(")") and "(got " in lines[0]  # the bad value, shown
    assert not db.parent.exists()  # nothing written: no store, no suites folder


def test_the_race_file_and_bench_run_point_to_each_other_in_one_line(tmp_path):
    f = _write(tmp_path, RACE)
    db = tmp_path / "results" / "bench.db"
    ran = CliRunner().invoke(__import__("bench.cli", fromlist=["app"]).app, ["run", str(f), "--store", f"sqlite:///{db}"])
    assert ran.exit_code == 2 and ran.output == (
        f"{f}: race: this suite is a race; run it with `bench race {f}` (docs/race.md), or its whole grid with "
        f"`bench run {f} --set race=null`\n"), ran.output
    got, _ = _race_cli(tmp_path, str(f), "--algos", "ppo")
    assert got.exit_code == 2 and got.output.startswith(f"--algos: {f} is a suite file, which sets it itself "
                                                        "(algorithms); allowed beside a suite file: --store")
    plain = _write(tmp_path, RACE.replace('race: {rungs: "1/3,1", priority: samples}\n', ""), "plain.yaml")
    got, _ = _race_cli(tmp_path, str(plain))
    assert got.exit_code == 2 and got.output.startswith(f"{plain}: race: the suite has no race block")
    assert got.output.count("\n") == 1 and not db.parent.exists()
    # Its whole grid, as the hint says: the same cells as the race's (the race block is not part of a key).
    from bench import api

    whole = api.plan_run(f, f"sqlite:///{db}", overrides=["race=null"])
    assert [c.key for c in whole.cells] == [c.key for c in api.plan_run(plain, f"sqlite:///{db}").cells]
    assert not db.parent.exists()


# --------------------------------------------------------------------------- #
# On Ray, into PostgreSQL
# --------------------------------------------------------------------------- #
@pytest.mark.heavy  # a local Ray instance and its workers (each imports torch) at each rung: about a minute
@pytest.mark.xdist_group("ray")
def test_a_race_on_ray_with_postgresql_continues_each_run_from_its_checkpoint_in_the_artifacts(tmp_path, pg_url):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'onpolicy-bench[ray]')")
    from bench import api
    from bench.run.ray_executor import connect
    from bench.storage.owners import owner_tag
    from bench.storage.store import Store

    started = connect(None, 2)  # as `bench race --executor ray` starts its own, unless one is running here
    try:
        art = tmp_path / "artifacts"
        seen = []  # per rung: the labels that ran to it, and the checkpoints then in the artifacts folder

        def on_rung(report, _):
            seen.append((report.ran, len(list(art.glob("*/checkpoint/checkpoint.json")))))

        result = api.race_file(_write(tmp_path, RACE), store=pg_url, executor="ray", artifacts=art, on_rung=on_rung)
    finally:
        if started:
            ray.shutdown()
    assert seen[0] == (("ppo-bench", "a2c-bench"), 4) and len(seen) == 2  # every run paused there, its checkpoint kept
    assert not result.failed and result.pick is not None
    rows = Store(pg_url).runs_frame()
    assert len(rows) == 4 and set(rows["status"]) == {"done"}
    owners = [r.owner for r in Store(pg_url).rows(list(rows["key"])).values()]
    assert all((owner_tag(o) or "").startswith("ray-") for o in owners), owners  # each rung's runs were Ray tasks
    metas = [json.loads(m) for m in rows["meta"]]
    assert all(m["checkpoints"]["resumed_from_step"] >= 500 for m in metas)  # continued, never started again
    assert not list(art.glob("*/checkpoint/checkpoint.json"))  # a done run's checkpoint is removed
    lines = api.race_answer_lines(result)
    assert any(x.startswith("answer: ") for x in lines) and any(x.startswith("CPU: ") for x in lines)
