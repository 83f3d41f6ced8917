"""`bench export`: episodes and diagnostics for notebooks, rliable-style score arrays that rebuild the
report's across-env IQM and interval, and one line with exit 2 for bad input."""

from __future__ import annotations

import contextlib
import html as html_lib
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from bench import analysis
from bench.stats import aggregate as stats
from bench.storage.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402

ENVS = ["CartPole-v1", "MountainCar-v0", "Pendulum-v1"]
FULL = [Planted("ppo-sb3", "ppo", "sb3", skill=0.9, tau=0.2, noise=0.2),
        Planted("a2c-bench", "a2c", "bench", skill=0.6, tau=0.3, noise=0.2)]
#: Fewer seeds and fewer envs: a range instead of a CI, and a NaN column in its score matrix.
PARTIAL = Planted("trpo-bench", "trpo", "bench", skill=0.7, tau=0.2, noise=0.2)


def bench(*args, cwd):
    """``bench ARGS`` run from ``cwd``, in this process (a subprocess each would pay Python's and torch's
    start-up, seconds per call): exit status, stdout and stderr as a finished process has them."""
    from typer.testing import CliRunner

    from bench.cli import app

    with contextlib.chdir(cwd):
        res = CliRunner().invoke(app, [str(a) for a in args], prog_name="bench")
    return SimpleNamespace(returncode=res.exit_code, stdout=res.stdout, stderr=res.stderr)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('export') / 's.db'}"
    write_store(url, ENVS, FULL, seeds=6).dispose()
    write_store(url, ENVS[:2], [PARTIAL], seeds=3, suite="partial").dispose()
    return url


@pytest.fixture(scope="module")
def report_table(store, tmp_path_factory):
    """label → the IQM cell of the report's "Across environments" table, as the page shows it."""
    out = tmp_path_factory.mktemp("report")
    p = bench("report", "--store", store, "--out", out, cwd=out)
    assert p.returncode == 0, p.stderr
    page = (out / "index.html").read_text()
    across = page[page.index('<section id="across">'):]
    across = across[:across.index("</section>")]
    rows = re.findall(r'<tr><td class="\w+">([^<]+)</td><td>\w+</td><td class="num">(\d+)</td>'
                      r'<td class="num">(\d+)</td><td class="num">([^<]+)</td></tr>', across)
    return {html_lib.unescape(lb): (int(envs), int(runs), html_lib.unescape(iqm)) for lb, envs, runs, iqm in rows}


def _rebuild(matrix: np.ndarray) -> stats.Interval:
    """What docs/statistics.md tells a user to do with an exported matrix: drop the padding, then the
    report's aggregate (mean over envs of each env's IQM) and interval rule."""
    tasks = [c[~np.isnan(c)] for c in matrix.T if (~np.isnan(c)).any()]
    return stats.interval(tasks, stats.aggregate_task_mean_iqm, n_boot=analysis.N_BOOT, rng=0)


def _as_report_shows(ci: stats.Interval) -> str:
    return f"{ci.point:.2f} (range {ci.lo:.2f}–{ci.hi:.2f})" if ci.kind == "range" else \
        f"{ci.point:.2f} [{ci.lo:.2f}, {ci.hi:.2f}]"


# --------------------------------------------------------------------------- #
# rliable-style scores
# --------------------------------------------------------------------------- #
def test_rliable_arrays_rebuild_the_reports_iqm_and_interval(store, report_table, tmp_path):
    assert set(report_table) == {"ppo-sb3", "a2c-bench", "trpo-bench"}, report_table
    npz, js = tmp_path / "scores.npz", tmp_path / "scores.json"
    for fmt, path in (("rliable-npz", npz), ("rliable-json", js)):
        p = bench("export", "--store", store, "--format", fmt, "--out", path, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    z = np.load(npz)
    envs = [str(e) for e in z["__envs__"]]
    assert envs == ENVS and str(z["__score__"]) == "final_norm"
    scores = {k: z[k] for k in z.files if not k.startswith("__")}
    doc = json.loads(js.read_text())
    assert doc["envs"] == envs and set(doc["scores"]) == set(scores)
    for label, m in scores.items():
        # npz and JSON hold the same numbers (JSON's null is the npz's NaN padding)
        np.testing.assert_array_equal(np.array(doc["scores"][label], dtype=float), m)
        n_envs, n_runs, shown = report_table[label]
        assert m.shape[1] == len(ENVS) and int((~np.isnan(m)).sum()) == n_runs
        assert int((~np.isnan(m)).any(axis=0).sum()) == n_envs
        assert _as_report_shows(_rebuild(m)) == shown, label
    # the partial label: 3 runs on 2 envs, so a range and an all-NaN column for the env it did not run
    assert scores["trpo-bench"].shape == (3, 3) and np.isnan(scores["trpo-bench"][:, 2]).all()
    assert "range" in report_table["trpo-bench"][2] and "[" in report_table["ppo-sb3"][2]


def test_rliable_arrays_match_the_scoring_figures_exactly(store):
    scored = analysis.score(analysis.load(store, anchors=False))
    envs, mats = analysis.score_matrices(scored)
    agg = analysis.across_envs(scored).set_index("label")
    for label, m in mats.items():
        ci = _rebuild(m)
        assert (ci.point, ci.lo, ci.hi, ci.kind) == tuple(agg.loc[label, ["iqm", "lo", "hi", "kind"]]), label
    # capped at 1 as the report's scores, and the time-efficiency column is another matrix
    assert all(np.nanmax(m) <= 1.0 for m in mats.values())
    _, time_mats = analysis.score_matrices(scored, "auc_time_norm")
    assert set(time_mats) == set(mats) and not np.allclose(np.nan_to_num(time_mats["ppo-sb3"]),
                                                           np.nan_to_num(mats["ppo-sb3"]))


def test_rliable_export_of_one_suite_and_another_score(store, tmp_path):
    out = tmp_path / "p.json"
    p = bench("export", "--store", store, "--suite", "partial", "--format", "rliable-json", "--score", "samples",
              "--out", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["score"] == "auc_steps_norm" and doc["envs"] == ENVS[:2] and list(doc["scores"]) == ["trpo-bench"]
    scored = analysis.score(analysis.load(store, ["partial"], anchors=False))
    want = scored.runs.sort_values(["env", "seed"]).groupby("env")["auc_steps_norm"].apply(list)
    got = np.array(doc["scores"]["trpo-bench"])
    for j, e in enumerate(doc["envs"]):
        assert sorted(got[:, j]) == sorted(want[e])


# --------------------------------------------------------------------------- #
# Episodes and diagnostics
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_episodes_and_diagnostics_round_trip(store, tmp_path, fmt):
    db = Store(store, readonly=True)
    runs = db.runs_frame("synthetic")
    key = runs["key"].iloc[4]
    want_ep, want_dg = db.episodes_of(key), db.diagnostics_of(key)
    db.dispose()
    read = {"csv": pd.read_csv, "parquet": pd.read_parquet, "json": lambda f: pd.read_json(f, orient="records")}[fmt]
    got = {}
    for what in ("episodes", "diagnostics"):
        out = tmp_path / f"{what}.{fmt}"
        p = bench("export", "--store", store, "--suite", "synthetic", "--what", what, "--format", fmt, "--out", out,
                  cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        got[what] = read(out)
    ep, dg = got["episodes"], got["diagnostics"]
    assert list(ep.columns[:8]) == ["suite", "env", "algo", "impl", "label", "seed", "status", "key"]
    assert set(ep["suite"]) == {"synthetic"} and ep["key"].nunique() == len(runs)
    assert len(ep) == 120 * len(runs)  # every episode of every run (write_store plays 120 each)
    mine = ep[ep["key"] == key].reset_index(drop=True)
    np.testing.assert_array_equal(mine["step"], want_ep["step"])
    np.testing.assert_allclose(mine["ret"], want_ep["ret"], rtol=1e-12)
    np.testing.assert_allclose(mine["cpu_s"], want_ep["cpu_s"], rtol=1e-12)
    assert mine["label"].iloc[0] == runs["label"].iloc[4] and mine["seed"].iloc[0] == runs["seed"].iloc[4]
    d = dg[dg["key"] == key].reset_index(drop=True)
    assert list(d["name"]) == list(want_dg["name"])
    np.testing.assert_allclose(d["value"], want_dg["value"], rtol=1e-12)


# --------------------------------------------------------------------------- #
# Bad input: one line, exit 2, nothing written
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("args, says", [
    (["--what", "curves"], "--what: 'curves' is not allowed; allowed: runs, episodes, evaluations, diagnostics"),
    (["--format", "xlsx"], "--format: 'xlsx' is not allowed; allowed: csv, parquet, json, pack, rliable-npz"),
    (["--format", "rliable-npz", "--score", "auc"], "--score: 'auc' is not allowed; allowed: final, samples, time"),
    (["--format", "rliable-json", "--what", "episodes"], "--what: --format rliable-json exports whole runs"),
    (["--format", "pack", "--suite", "synthetic", "--what", "diagnostics"], "--what: --format pack exports whole runs"),
    (["--format", "rliable-npz", "--suite", "nope"], "--suite: no suite named 'nope' in the store"),
])
def test_bad_export_input_is_one_line_exit_2_and_writes_nothing(store, tmp_path, args, says):
    out = tmp_path / "out" / "x.bin"
    p = bench("export", "--store", store, *args, "--out", out, cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and says in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "out").exists()
