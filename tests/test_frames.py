"""Results as pandas frames (issue 66): `bench.api.runs`, `episodes`, `evaluations`, `diagnostics` and `scores`
read a store as `bench export` writes it, and `bench export --what evaluations` writes the periodic evaluations."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import analysis, api
from bench.storage.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402

ENVS = ["CartPole-v1", "Pendulum-v1"]
LABELS = [Planted("ppo-sb3", "ppo", "sb3", skill=0.9, tau=0.2), Planted("a2c-bench", "a2c", "bench", skill=0.5)]
EVAL_OFFSET = 7.0  # each run's one evaluation: its final training return plus this


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('frames') / 's.db'}"
    write_store(url, ENVS, LABELS, seeds=3, episodes=30, eval_offset=EVAL_OFFSET).dispose()
    write_store(url, ENVS[:1], [Planted("trpo-bench", "trpo", "bench", skill=0.7)], seeds=2, episodes=30,
                suite="other").dispose()
    return url


def test_runs_episodes_and_diagnostics_are_the_stores_tables(store):
    runs = api.runs(store, "synthetic")
    assert len(runs) == 12 and set(runs["suite"]) == {"synthetic"} and (runs["status"] == "done").all()
    assert list(runs.columns[:7]) == ["suite", "env", "algo", "impl", "label", "seed", "status"]
    assert len(api.runs(store)) == 14  # every suite
    ep = api.episodes(store, "synthetic")
    assert len(ep) == 30 * 12 and set(ep["key"]) == set(runs["key"])
    db = Store(store, readonly=True)
    key = runs["key"].iloc[5]
    want = db.episodes_of(key)
    db.dispose()
    mine = ep[ep["key"] == key].reset_index(drop=True)
    np.testing.assert_array_equal(mine["step"], want["step"])
    np.testing.assert_allclose(mine["ret"], want["ret"], rtol=1e-12)
    dg = api.diagnostics(store, "synthetic")
    assert set(dg["name"]) == {"policy/entropy", "policy/approx_kl"} and set(dg["key"]) == set(runs["key"])


def test_evaluations_frame_holds_each_runs_periodic_evaluations(store):
    ev = api.evaluations(store, "synthetic")
    runs = api.runs(store, "synthetic").set_index("key")
    assert list(ev.columns) == ["suite", "env", "algo", "impl", "label", "seed", "status", "key", "idx", "step",
                                "wall_s", "mean_return", "std_return", "n"]
    assert len(ev) == 12 and set(ev["key"]) == set(runs.index)
    ev = ev.set_index("key")
    np.testing.assert_allclose(ev["mean_return"], runs.loc[ev.index, "final_return"] + EVAL_OFFSET, rtol=1e-12)
    assert (ev["step"] == runs.loc[ev.index, "total_steps"]).all() and (ev["n"] == 5).all()
    assert api.evaluations(store, "other").empty  # runs without eval: have no rows


def test_scores_frame_is_the_reports_scores(store):
    sc = api.scores(store, "synthetic")
    assert list(sc.columns) == api.SCORE_FRAME_COLUMNS and len(sc) == 12
    assert set(sc["label"]) == {"ppo-sb3", "a2c-bench"}  # the suite's own runs only
    assert len(api.scores(store)) == 14  # every suite
    # the rows of the rliable matrices bench export writes, each label's column per env
    envs, mats = analysis.score_matrices(analysis.score(analysis.load(store, ["synthetic"], anchors=False)))
    for label, m in mats.items():
        for j, e in enumerate(envs):
            got = sc.loc[(sc["label"] == label) & (sc["env"] == e)].sort_values("seed")["final_norm"].to_numpy()
            np.testing.assert_array_equal(np.sort(got), np.sort(m[:, j][~np.isnan(m[:, j])]))
    assert sc["final_norm"].between(-1, 1).all() and sc["final_norm"].notna().all()
    # planted skills: ppo-sb3 near 0.9 of the way to the threshold, a2c-bench near 0.5
    means = sc.groupby("label")["final_norm"].mean()
    assert means["ppo-sb3"] > means["a2c-bench"] + 0.2, means


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_what_evaluations_writes_the_frame(store, tmp_path, fmt):
    from typer.testing import CliRunner

    from bench.cli import app

    out = tmp_path / f"ev.{fmt}"
    with contextlib.chdir(tmp_path):
        res = CliRunner().invoke(app, ["export", "--store", store, "--suite", "synthetic", "--what", "evaluations",
                                       "--format", fmt, "--out", str(out)])
    assert res.exit_code == 0, res.stderr
    assert "wrote 12 evaluation rows" in res.stderr, res.stderr
    got = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    want = api.evaluations(store, "synthetic")
    assert list(got.columns) == list(want.columns)
    np.testing.assert_allclose(got["mean_return"], want["mean_return"], rtol=1e-12)


def test_a_missing_store_or_suite_is_bad_input(store, tmp_path):
    for read in (api.runs, api.episodes, api.evaluations, api.diagnostics, api.scores):
        with pytest.raises(api.BadInput) as e:
            read(store, "nope")
        assert e.value.lines == ["suite: no suite named 'nope' in the store; allowed: other, synthetic"], read
        with pytest.raises(api.BadInput) as e:
            read(f"sqlite:///{tmp_path / 'none.db'}")
        assert e.value.lines[0].startswith("store: no results store at"), read
    assert not (tmp_path / "none.db").exists()
