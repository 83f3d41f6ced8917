"""`bench status` of a large suite: a summary per env × label (counts per state, when the running cells end,
failures named), every cell with ``--cells`` or when there are few."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import write_status_suite  # noqa: E402

ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0"]
ALGOS = [("ppo", "bench"), ("a2c", "bench")]


def bench(*args):
    from typer.testing import CliRunner

    from bench.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], prog_name="bench")


def test_status_of_a_large_suite_is_a_summary_per_env_and_label(tmp_path):
    # 3 envs × 2 labels × 50 seeds = 300 cells: 20 done, 12 failed, 3 running, the rest pending.
    f, url = write_status_suite(tmp_path, seeds=50, envs=ENVS, algos=ALGOS, done=20, failed=12, running=3)
    res = bench("status", f, "--store", url)
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) <= 60, res.stdout
    assert "300 cells in 6 env × label groups" in res.stdout
    rows = [ln for ln in lines if ln.startswith("│")]
    assert len(rows) == 6, res.stdout  # one row per env × label, not one per cell
    head = next(ln for ln in lines if ln.startswith("┃"))
    cols = [c.strip() for c in head.strip("┃").split("┃")]
    assert cols == ["env", "label", "cells", "done", "running", "failed", "pending", "running ends in"], cols
    cells = {(r[0], r[1]): r[2:] for r in ([c.strip() for c in ln.strip("│").split("│")] for ln in rows)}
    assert sum(int(v[0]) for v in cells.values()) == 300
    for i, state in enumerate(cols[3:-1], start=1):  # each state's column sums to the suite's count
        assert sum(int(v[i] or 0) for v in cells.values()) == {"done": 20, "running": 3, "failed": 12,
                                                                "pending": 265}[state], state
    # the running cells are a quarter done, so they end in about three times as long as they have run
    assert sum(bool(v[-1].startswith("~")) for v in cells.values()) >= 1
    failed = [ln for ln in lines if ln.strip().startswith("failed:")]
    assert len(failed) == 10 and "planted failure 0" in failed[0], res.stdout
    assert "… and 2 more failed" in res.stdout
    assert "done: 20, failed: 12, pending: 265, running: 3" in res.stdout


def test_status_lists_every_cell_when_asked_or_when_few(tmp_path):
    f, url = write_status_suite(tmp_path, seeds=4, envs=ENVS[:1], algos=ALGOS, done=1, failed=1)
    few = bench("status", f, "--store", url)  # 8 cells: one row each, as before
    assert few.exit_code == 0, few.stderr
    assert sum(ln.startswith("│ CartPole-v1") for ln in few.stdout.splitlines()) == 8, few.stdout
    (tmp_path / "big").mkdir()
    big, url2 = write_status_suite(tmp_path / "big", seeds=12, envs=ENVS[:1], algos=ALGOS)  # 24 cells
    summary = bench("status", big, "--store", url2)
    assert sum(ln.startswith("│ CartPole-v1") for ln in summary.stdout.splitlines()) == 2, summary.stdout
    every = bench("status", big, "--store", url2, "--cells")
    assert every.exit_code == 0, every.stderr
    assert sum(ln.startswith("│ CartPole-v1") for ln in every.stdout.splitlines()) == 24, every.stdout
