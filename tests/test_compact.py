"""The compact reference: diagnostics stored downsampled with exact means, and packed stores that
read back to the very same report numbers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import analysis
from bench.storage import packed, packload, studies
from bench.storage.record import downsample_diagnostics
from bench.suites.suite import DIAG_POINTS, Cell
from bench.storage.urls import StoreURL

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402


def test_downsampling_keeps_every_key_s_mean_exact():
    rng = np.random.default_rng(0)
    rows = [(40 * (i + 1), "loss/policy", float(v)) for i, v in enumerate(rng.normal(size=2503))]
    rows += [(40 * (i + 1), "policy/entropy", float(v)) for i, v in enumerate(rng.uniform(size=2503))]
    rows.insert(700, (28_000, "loss/policy", float("nan")))  # a NaN diagnostic stays out of the means
    out = downsample_diagnostics(rows, 500)
    for key in ("loss/policy", "policy/entropy"):
        mine = [r for r in out if r[1] == key]
        assert len(mine) == 500
        raw = np.array([v for _, k, v in rows if k == key], dtype=float)
        raw = raw[np.isfinite(raw)]
        n = np.array([r[3] for r in mine])
        means = np.array([r[2] for r in mine])
        assert n.sum() == raw.size
        assert (n * means).sum() / n.sum() == pytest.approx(raw.mean(), rel=1e-12, abs=1e-12)
        assert set(n) <= {4, 5, 6}  # stretches as equal as 2503 / 500 allows (the NaN leaves one at 4)
        steps = [r[0] for r in mine]
        assert steps == sorted(steps) and steps[-1] == 40 * 2503  # each row at its stretch's last update
    # Short runs and diag_points 0 keep every update, n = 1.
    assert downsample_diagnostics(rows[:10], 500) == [(s, k, v, 1) for s, k, v in rows[:10]]
    assert len(downsample_diagnostics(rows, 0)) == len(rows)


def test_the_default_resolution_leaves_existing_keys_unchanged():
    args = ("s", "CartPole-v1", "ppo", "bench", "ppo-bench", 0, 1000, 475.0, 10, None, {"n_envs": 1})
    default, full = Cell(*args), Cell(*args, diag_points=0)
    assert "diag_points" not in default.identity() and default.diag_points == DIAG_POINTS
    assert full.identity()["diag_points"] == 0


def test_a_packed_store_reads_back_to_the_same_report(tmp_path):
    url = f"sqlite:///{tmp_path / 'full.db'}"
    labs = [Planted("a", "ppo", "bench", 0.9), Planted("b", "a2c", "sb3", 0.5, wall_per_cpu=2.0)]
    write_store(url, ["CartPole-v1", "LunarLander-v3"], labs, seeds=5, suite="one")
    write_store(url, ["Pendulum-v1"], labs, seeds=3, suite="two")
    m1 = packed.pack(url, "one", tmp_path / "ref" / "one")
    packed.pack(url, "two", tmp_path / "ref" / "two")
    assert m1["runs"] == {"done": 20} and m1["rows"]["anchors"] == 2
    # The category's cost, from its runs: the planted CPU seconds summed by hand.
    fr = analysis.load(url, ["one"], anchors=False).runs
    assert m1["cpu_hours"] == round(fr["cpu_s"].sum() / 3600, 3) > 0
    assert m1["wall_hours"] == round(fr["wall_s"].sum() / 3600, 3) > m1["cpu_hours"]  # label b shared its core
    cache = tmp_path / "cache" / "reference.db"
    got = packload.unpack(packed.packs_under(tmp_path / "ref"), cache)
    full = analysis.score(analysis.load(url, anchors=False))
    back = analysis.score(analysis.load(got, anchors=False))
    cols = ["key", "final_norm", "auc_steps_norm", "auc_time_norm", "t_cpu", "contended"]
    assert full.runs[cols].sort_values("key").reset_index(drop=True).equals(
        back.runs[cols].sort_values("key").reset_index(drop=True))
    rec = lambda s: analysis.recommendation_rows(analysis.recommend(s, n_boot=200))  # noqa: E731
    assert rec(full) == rec(back)
    dm = lambda s: analysis.decision_matrix(s, n_boot=200).fillna(-1)  # noqa: E731
    assert dm(full).equals(dm(back))
    # Built once: a second read reuses the cache; a changed pack rebuilds it.
    stamp = cache.stat().st_mtime_ns
    assert packload.unpack(packed.packs_under(tmp_path / "ref"), cache) == got and cache.stat().st_mtime_ns == stamp
    # A regenerated pack: same rows, but a file's bytes differ (a repack within the same second
    # writes the same manifest, so change one byte-for-byte rather than rely on the clock).
    manifest = tmp_path / "ref" / "two" / packed.MANIFEST
    m = json.loads(manifest.read_text())
    manifest.write_text(json.dumps(packed.sealed({**m, "packed_at": "0" + m["packed_at"]})))
    abandoned = cache.with_name(f"{cache.name}.999999999-1.building")  # its builder was killed
    abandoned.write_bytes(b"half")
    packload.unpack(packed.packs_under(tmp_path / "ref"), cache)
    assert cache.stat().st_mtime_ns != stamp
    assert sorted(p.name for p in cache.parent.iterdir()) == ["reference.db"]
    # Two builders at once (two first `bench recommend`s) each end with the whole store.
    from concurrent.futures import ThreadPoolExecutor

    from bench.storage import store as st
    from bench.storage import schema

    cache.unlink()
    with ThreadPoolExecutor(2) as ex:
        urls = list(ex.map(lambda _: packload.unpack(packed.packs_under(tmp_path / "ref"), cache), range(2)))
    assert sorted(p.name for p in cache.parent.iterdir()) == ["reference.db"]
    assert urls == [got, got] and len(st.Store(got).runs_frame()) == len(full.runs)


def test_episode_clocks_are_kept_to_the_millisecond_and_packed_as_exact_integers(tmp_path):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.storage import store as st
    from bench.storage import schema

    url = f"sqlite:///{tmp_path / 'full.db'}"
    write_store(url, ["CartPole-v1"], [Planted("a", "ppo", "bench", 0.9, wall_per_cpu=1.7)], seeds=2, suite="one")
    ep = st.Store(url).episodes_frame("one")
    # The synthetic clocks have every float digit; the store keeps three decimals.
    for col in ("wall_s", "cpu_s"):
        v = ep[col].to_numpy(dtype=float)
        assert np.array_equal(v, np.round(v, 3)) and (np.diff(v) != 0).any()
    packed.pack(url, "one", tmp_path / "one")
    schema = pq.read_schema(tmp_path / "one" / "episodes.parquet")
    assert pa.types.is_integer(schema.field("wall_ms").type) and pa.types.is_integer(schema.field("cpu_ms").type)
    assert "wall_s" not in schema.names
    back = st.Store(packload.unpack([tmp_path / "one"], tmp_path / "cache.db")).episodes_frame("one")
    cols = ["key", "idx", "step", "wall_s", "cpu_s", "ret", "length"]
    pd.testing.assert_frame_equal(ep[cols].reset_index(drop=True), back[cols].reset_index(drop=True), check_exact=True)
    # A NULL CPU clock (a store from before it was recorded) stays NULL; finer digits are rounded.
    raw = pd.DataFrame({"wall_s": [0.0004, 1.2345678, 2.0], "cpu_s": [None, 1.0006, 3.0]})
    ms = packed.clocks_to_ms(raw)
    assert ms["wall_ms"].tolist() == [0, 1235, 2000] and ms["cpu_ms"].isna().tolist() == [True, False, False]
    again = packed.clocks_to_s(ms)
    assert again["wall_s"].tolist() == [0.0, 1.235, 2.0] and np.isnan(again["cpu_s"][0]) and again["cpu_s"][1] == 1.001


def test_packing_an_unknown_suite_says_so(tmp_path):
    url = f"sqlite:///{tmp_path / 'full.db'}"
    write_store(url, ["CartPole-v1"], [Planted("a", "ppo", "bench", 0.9)], seeds=1, suite="one")
    with pytest.raises(KeyError):
        packed.pack(url, "nope", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _study(url: str, name: str, suite: str, values: list[float], cpu_s: float = 60.0) -> None:
    """A ``bench tune`` study of tuning suite ``suite``: complete trials of ``values``, one pruned and one failed."""
    import optuna
    from optuna.distributions import FloatDistribution
    from optuna.trial import TrialState, create_trial

    from bench.storage.vocabulary import STUDY_ATTR
    from bench.tune.study import make_storage

    study = optuna.create_study(storage=make_storage(StoreURL.parse(url)), study_name=name)
    study.set_user_attr(STUDY_ATTR, {"algo": "a2c", "impl": "bench", "env_id": "CartPole-v1", "threshold": 100.0,
                                     "timesteps": 1000, "objective": "auc", "objective_version": 2,
                                     "random_return": 20.0, "suite": suite})
    dist = {"learning_rate": FloatDistribution(1e-5, 1.0, log=True)}
    trials = [(TrialState.COMPLETE, v, {}) for v in values] + [(TrialState.PRUNED, None, {250: -0.2, 500: 0.05}),
                                                               (TrialState.FAIL, None, {})]
    for i, (state, value, iv) in enumerate(trials):
        study.add_trial(create_trial(state=state, value=value, intermediate_values=iv, distributions=dist,
                                     params={"learning_rate": 1e-3 * (i + 1)},
                                     user_attrs={"solved_fraction": float(state == TrialState.COMPLETE), "cpu_s": cpu_s}))


def test_a_tuning_suite_packs_its_studies_and_reads_back_to_the_same_sensitivity(tmp_path):
    import pandas as pd

    from bench.analysis.sensitivity import sensitivity_table

    url = f"sqlite:///{tmp_path / 'tune.db'}"
    write_store(url, ["CartPole-v1"], [Planted("a", "a2c", "bench", 0.9)], seeds=1, suite="runs-x")
    _study(url, "tune-x-a2c-CartPole", "tune-x", [0.1, 0.3, 0.5, 0.9], cpu_s=900.0)
    _study(url, "tune-x-ppo-CartPole", "tune-x", [0.6, 0.7], cpu_s=900.0)
    _study(url, "other-a2c-CartPole", "other", [0.2, 0.2])
    m = packed.pack(url, "tune-x", tmp_path / "packs" / "tune-x")
    # 2 studies of 6 and 4 trials at 900 CPU s each: 2.5 CPU-hours; no runs, no tables.
    assert m["studies"] == {"count": 2, "trials": {"complete": 6, "fail": 2, "pruned": 2}} and m["cpu_hours"] == 2.5
    assert m["runs"] == {} and not list((tmp_path / "packs" / "tune-x").glob("*.parquet"))
    assert studies.suite_studies(StoreURL.parse(url)) == ["other-a2c-CartPole", "tune-x-a2c-CartPole", "tune-x-ppo-CartPole"]
    assert studies.tuning_suites(StoreURL.parse(url)) == ["other", "tune-x"]
    # Packed twice, the same bytes (the reader's cache is keyed by them).
    first = (tmp_path / "packs" / "tune-x" / packed.STUDIES).read_bytes()
    packed.pack(url, "tune-x", tmp_path / "packs" / "tune-x")
    assert (tmp_path / "packs" / "tune-x" / packed.STUDIES).read_bytes() == first

    # Read back beside a runs pack: every trial, state, value and attribute as it was.
    packed.pack(url, "runs-x", tmp_path / "packs" / "runs-x")
    got = packload.unpack(packed.packs_under(tmp_path / "packs"), tmp_path / "cache" / "ref.db")
    assert studies.suite_studies(StoreURL.parse(got)) == ["tune-x-a2c-CartPole", "tune-x-ppo-CartPole"]
    want = sensitivity_table(url).set_index("study").loc[["tune-x-a2c-CartPole", "tune-x-ppo-CartPole"]]
    pd.testing.assert_frame_equal(sensitivity_table(got).set_index("study"), want)
    assert want.loc["tune-x-a2c-CartPole", "n_trials"] == 5  # 4 complete and the pruned one at its last value
    # The decision matrix reads them from the unpacked store.
    assert analysis.load(got, anchors=False).sensitivity is not None


def test_bench_import_adds_a_pack_s_studies_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    _study(url, "s1", "tune-y", [0.1, 0.2, 0.3])
    p = _bench("export", "--store", url, "--suite", "tune-y", "--format", "pack", "--out", str(tmp_path / "tune-y"),
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "packed 0 runs and 1 tuning studies (5 trials) of tune-y" in p.stderr
    p = _bench("export", "--store", url, "--suite", "tune-z", "--format", "pack", "--out", str(tmp_path / "z"),
               cwd=tmp_path)
    assert p.returncode == 2 and "no suite named 'tune-z' in the store; allowed: tune-y" in p.stderr
    mine = f"sqlite:///{tmp_path / 'mine.db'}"
    for added in ("1 tuning study", None):
        p = _bench("import", str(tmp_path / "tune-y"), "--store", mine, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert (added in p.stderr) if added else "tuning stud" not in p.stderr, p.stderr
    assert studies.suite_studies(StoreURL.parse(mine)) == ["s1"]


def test_a_trial_running_when_packed_is_failed_and_requeued_on_import(tmp_path):
    # A pack made while (or after) a tuner was cut off holds RUNNING trials whose worker and
    # heartbeats stayed behind: imported as they are, Optuna's heartbeat check never fails them, so
    # they would stay RUNNING for ever and their configuration would never be tried.
    import optuna
    from optuna.trial import TrialState

    from bench.storage.studies import CUT_OFF
    from bench.tune.study import make_storage

    url = f"sqlite:///{tmp_path / 'tune.db'}"
    _study(url, "s1", "tune-y", [0.1, 0.2])
    cut = optuna.load_study(study_name="s1", storage=make_storage(StoreURL.parse(url))).ask()
    lr = cut.suggest_float("learning_rate", 1e-5, 1.0, log=True)
    p = _bench("export", "--store", url, "--suite", "tune-y", "--format", "pack", "--out", str(tmp_path / "tune-y"),
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "tune-y" / packed.MANIFEST).read_text())["studies"]["trials"]["running"] == 1
    mine = f"sqlite:///{tmp_path / 'mine.db'}"
    p = _bench("import", str(tmp_path / "tune-y"), "--store", mine, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    study = optuna.load_study(study_name="s1", storage=make_storage(StoreURL.parse(mine)))
    trials = study.get_trials(deepcopy=False)
    was = trials[cut.number]
    assert was.state == TrialState.FAIL and was.user_attrs["error"] == CUT_OFF
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    waiting = [t for t in trials if t.state == TrialState.WAITING]
    assert len(waiting) == 1 and waiting[0].params == {"learning_rate": lr}
    assert waiting[0].system_attrs["failed_trial"] == cut.number and "error" not in waiting[0].user_attrs
    # The next trial a tuner asks for is that configuration; the finished trials are as they were.
    again = study.ask()
    assert again.number == waiting[0].number and again.suggest_float("learning_rate", 1e-5, 1.0, log=True) == lr
    assert [t.value for t in trials if t.state == TrialState.COMPLETE] == [0.1, 0.2]


def _bench(*args, cwd, env=None):
    """``bench ARGS`` run from ``cwd`` with ``env`` added, in this process (a subprocess each would pay
    Python's and torch's start-up): exit status, stdout and stderr as a finished process has them."""
    import contextlib
    import os
    from types import SimpleNamespace
    from unittest import mock

    from typer.testing import CliRunner

    from bench.cli import app

    with contextlib.chdir(cwd), mock.patch.dict(os.environ, env or {}):
        res = CliRunner().invoke(app, [str(a) for a in args], prog_name="bench")
    return SimpleNamespace(returncode=res.exit_code, stdout=res.stdout, stderr=res.stderr)


def test_export_pack_and_the_shipped_reference_fallback(tmp_path):
    url = f"sqlite:///{tmp_path / 'full.db'}"
    write_store(url, ["CartPole-v1", "LunarLander-v3"], [Planted("a", "ppo", "bench", 0.9),
                                                        Planted("b", "a2c", "sb3", 0.5)], seeds=5, suite="ref-x")
    home = tmp_path / "home"
    home.mkdir()
    p = _bench("export", "--store", url, "--suite", "ref-x", "--format", "pack", "--out", str(home / "results" / "reference" / "x"),
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "packed 20 runs of ref-x" in p.stderr and packed.is_pack(home / "results" / "reference" / "x")
    p = _bench("export", "--store", url, "--format", "pack", "--out", str(tmp_path / "y"), cwd=tmp_path)
    assert p.returncode == 2 and "--format pack: name the suite" in p.stderr
    # A fresh checkout: no store of one's own, the packs in results/reference/; the cache goes outside the tree.
    before = sorted(x.relative_to(home) for x in home.rglob("*"))
    cache = tmp_path / "xdg"
    p = _bench("recommend", "--format", "json", cwd=home, env={"XDG_CACHE_HOME": str(cache)})
    assert p.returncode == 0, p.stderr
    assert "reading the project's shipped reference results (results/reference/)" in p.stderr
    assert sorted(x.relative_to(home) for x in home.rglob("*")) == before  # nothing written in the tree
    # What it keeps there is the answer (a few KB per pack content), never an unpacked copy of the packs.
    assert list((cache / "bench" / "answers").glob("*.json")) and not (cache / "bench" / "reference.db").exists()
    import json

    dense = [r for r in json.loads(p.stdout) if r["envs"]]
    assert dense and dense[0]["algorithm"] == "ppo"


def test_the_reference_is_found_from_any_directory(tmp_path, monkeypatch, capsys):
    # `bench recommend` away from the checkout (an editable install used from one's own project)
    # reads the checkout's packs; a results/reference/ in the working directory comes first.
    from bench import api

    checkout = Path(__file__).resolve().parent.parent / "results" / "reference"
    monkeypatch.chdir(tmp_path)
    assert api.reference_dir() == checkout
    url = f"sqlite:///{tmp_path / 'full.db'}"
    write_store(url, ["CartPole-v1"], [Planted("a", "ppo", "bench", 0.9)], seeds=2, suite="ref-x")
    packed.pack(url, "ref-x", tmp_path / "results" / "reference" / "x")
    assert api.reference_dir() == Path("results/reference")
    # It is read in place, by every command: nothing is unpacked into the cache folder.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert api.reference().url == "packs:results/reference"
    url, where = api.results_store()
    assert url == "packs:results/reference" and "shipped reference" in where
    assert not (tmp_path / "cache").exists()


def test_the_shipped_reference_stays_within_60_mb_and_every_pack_reads():
    # Issue 13 capped the shipped reference (every category's pack) at 40 MB in the tree; issue 41 adds about a
    # dozen envs (MiniGrid's KeyCorridor alone is 1.4M episodes at 5e5 steps) and sets the cap at 60 MB: still a
    # small clone, and a test that fails before the tree grows without anyone deciding it (docs/reference.md, "Size").
    from bench.storage import packed

    root = Path(__file__).resolve().parent.parent / "results" / "reference"
    packs = packed.packs_under(root)
    assert packs, "no shipped reference packs under results/reference"
    total = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    assert total <= 60 * 10**6, f"shipped reference is {total / 10**6:.1f} MB"
    for p in packs:
        meta = json.loads((p / "pack.json").read_text())
        # A claim pack may hold no runs itself: its cells are a sibling pack's runs (shared_runs). A tuning
        # suite's pack holds finished trials of its studies instead.
        held = meta["runs"].get("done", 0) + sum(meta.get("shared_runs", {}).values())
        trials = meta.get("studies", {}).get("trials", {})
        assert meta["suite"] and held + trials.get("complete", 0) + trials.get("pruned", 0) > 0, p
        if "studies" in meta:
            assert (p / packed.STUDIES).is_file() and meta["studies"]["count"] > 0, p
        for sibling in meta.get("shared_runs", {}):
            assert (root / sibling / "pack.json").is_file(), f"{p} shares runs with a missing pack {sibling}"


def test_a_suite_sharing_runs_with_a_sibling_pack_stores_them_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'full.db'}"
    labs = [Planted("a", "ppo", "bench", 0.9), Planted("b", "a2c", "sb3", 0.5)]
    write_store(url, ["CartPole-v1"], labs, seeds=5, suite="ref")
    write_store(url, ["CartPole-v1"], labs[:1], seeds=5, suite="claim")  # the same 5 cells of label a, by key
    root = tmp_path / "packs"
    packed.pack(url, "ref", root / "ref")
    m = packed.pack(url, "claim", root / "claim", beside=packed.packs_under(root))
    assert m["shared_runs"] == {"ref": 5} and m["rows"]["runs"] == 0 and m["rows"]["suite_cells"] == 5
    got = packload.unpack(packed.packs_under(root), tmp_path / "cache.db")
    full, back = analysis.load(url, ["claim"], anchors=False), analysis.load(got, ["claim"], anchors=False)
    assert sorted(full.runs["key"]) == sorted(back.runs["key"]) and len(back.runs) == 5
    assert (back.runs["status"] == "done").all()
    # Packed before its sibling existed, the claim holds its runs itself; read together, the first wins.
    m2 = packed.pack(url, "claim", tmp_path / "alone" / "claim")
    assert "shared_runs" not in m2 and m2["rows"]["runs"] == 5
    both = packload.unpack([root / "ref", tmp_path / "alone" / "claim"], tmp_path / "cache2.db")
    assert len(analysis.load(both, anchors=False).runs) == 10


def test_bench_import_loads_packs_with_their_siblings_once_and_refuses_bad_input(tmp_path):
    import sqlalchemy as sa

    from bench.storage import store as st
    from bench.storage import schema

    url = f"sqlite:///{tmp_path / 'full.db'}"
    labs = [Planted("a", "ppo", "bench", 0.9), Planted("b", "a2c", "sb3", 0.5)]
    write_store(url, ["CartPole-v1"], labs, seeds=5, suite="ref")
    write_store(url, ["CartPole-v1"], labs[:1], seeds=5, suite="claim")  # label a's 5 cells, shared by key
    root = tmp_path / "packs"
    packed.pack(url, "ref", root / "ref")
    packed.pack(url, "claim", root / "claim", beside=packed.packs_under(root))

    def rows(db_url: str) -> dict[str, int]:
        eng = sa.create_engine(db_url)
        with eng.connect() as c:
            n = {t: c.execute(sa.select(sa.func.count()).select_from(schema.metadata.tables[t])).scalar_one()
                 for t in ("runs", "episodes", "diagnostics", "evaluations")}
        eng.dispose()
        return n

    # The claim's runs live in its sibling pack: importing the claim brings the sibling along.
    target = f"sqlite:///{tmp_path / 'mine.db'}"
    p = _bench("import", str(root / "claim"), "--store", target, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "imported 10 runs of claim, ref into" in p.stderr
    assert rows(target) == rows(url) and rows(url)["diagnostics"] > 0
    claim = analysis.load(target, ["claim"], anchors=False).runs
    assert len(claim) == 5 and (claim["status"] == "done").all()
    # Again: nothing new, nothing doubled (diagnostics have no natural key to stop a second copy).
    p = _bench("import", str(root), str(root / "ref"), "--store", target, cwd=tmp_path)  # a pack named twice: once
    assert p.returncode == 0 and "imported 0 runs" in p.stderr and "10 already there, kept" in p.stderr, p.stderr
    assert rows(target) == rows(url)
    # A run in two packs (one packed before its sibling held it) is loaded once, with one copy of its rows.
    packed.pack(url, "claim", tmp_path / "alone" / "claim")
    both = tmp_path / "both.db"
    n = packload.load([root / "ref", tmp_path / "alone" / "claim"], st.Store(f"sqlite:///{both}"))
    assert n == {"new": 10, "kept": 5} and rows(f"sqlite:///{both}") == rows(url)

    # Bad input: one line, exit 2, no store created.
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    import shutil

    shutil.copytree(root / "claim", lonely / "claim")
    broken = tmp_path / "broken" / "ref"
    shutil.copytree(root / "ref", broken)
    data = (broken / "episodes.parquet").read_bytes()
    (broken / "episodes.parquet").write_bytes(data[: len(data) // 2])  # truncated: its footer is gone
    for args, says in (((str(tmp_path / "nope"),), "is not a pack"),
                       ((str(broken),), "episodes.parquet: changed or damaged"),
                       ((str(lonely / "claim"),), "shares runs with the pack ref, which is not beside it"),
                       ((str(root / "ref"), "--store", "sqlite://"), "--store")):
        out = tmp_path / "never.db"
        p = _bench("import", *args, *(() if "--store" in args else ("--store", f"sqlite:///{out}")), cwd=tmp_path)
        assert p.returncode == 2 and says in p.stderr and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
        assert "Traceback" not in p.stderr and not out.exists()


def test_a_pack_of_an_unfinished_suite_keeps_what_finished_and_resumes_the_rest(tmp_path):
    """`--keep done` packs the finished runs and every other cell as pending without rows; `--keep envs` only the
    envs whose runs all finished. Either way the pack reads back to exactly the finished runs' scores, and the
    same CLI refuses a bad value in one line."""
    import sqlalchemy as sa

    from bench.storage import schema
    from bench.storage.store import Store

    url = f"sqlite:///{tmp_path / 'full.db'}"
    labs = [Planted("a", "ppo", "bench", 0.9), Planted("b", "a2c", "sb3", 0.5)]
    write_store(url, ["CartPole-v1", "LunarLander-v3"], labs, seeds=3, suite="s")
    db = Store(url)
    runs = db.runs_frame("s")
    # One LunarLander run died, another is still running: CartPole is whole, LunarLander is not.
    lunar = runs[runs["env"] == "LunarLander-v3"].sort_values("key")["key"].tolist()
    with db.engine.begin() as c:
        c.execute(sa.update(schema.runs).where(schema.runs.c.key == lunar[0]).values(status="failed", error="killed"))
        c.execute(sa.update(schema.runs).where(schema.runs.c.key == lunar[1]).values(status="running", owner="host:1"))
    db.dispose()
    whole = {"done": packed.pack(url, "s", tmp_path / "done", keep="done"),
             "envs": packed.pack(url, "s", tmp_path / "envs", keep="envs"),
             "all": packed.pack(url, "s", tmp_path / "all")}
    assert whole["all"]["runs"] == {"done": 10, "failed": 1, "running": 1}
    assert whole["done"]["runs"] == {"done": 10, "pending": 2}
    assert whole["envs"]["runs"] == {"done": 6, "pending": 6}
    assert whole["done"]["keep"] == "done" and whole["envs"]["keep"] == "envs" and "keep" not in whole["all"]
    for keep, kept in (("done", set(runs["key"]) - set(lunar[:2])),
                       ("envs", set(runs.loc[runs["env"] == "CartPole-v1", "key"]))):
        back = Store(packload.unpack([tmp_path / keep], tmp_path / f"{keep}.db"))
        r = back.runs_frame("s")
        assert len(r) == 12 and set(r.loc[r["status"] == "done", "key"]) == kept
        pend = r[r["status"] != "done"]
        assert (pend["status"] == "pending").all() and (pend["attempt"] == 0).all()
        assert pend[["error", "started_at", "cpu_s", "final_return", "meta"]].isna().all().all()
        assert set(back.episodes_frame("s")["key"]) == kept  # no rows of an unfinished attempt
        assert whole[keep]["cpu_hours"] == round(runs.loc[runs["key"].isin(kept), "cpu_s"].sum() / 3600, 3)
        full = analysis.score(analysis.load(url, anchors=False))
        got = analysis.score(analysis.load(back.url, anchors=False))
        cols = ["key", "final_norm", "auc_steps_norm", "t_cpu"]
        pick = lambda s: s.runs[s.runs["key"].isin(kept)][cols].sort_values("key").reset_index(drop=True)  # noqa: E731
        assert pick(full).equals(pick(got))
        back.dispose()
    # The reference's pack of whole envs, then the staged pack of the same suite: the staged runs fill the cells
    # the first left pending (never attempted, nothing to lose); in either order the store ends with all 10.
    for order in (("envs", "done"), ("done", "envs")):
        into = Store(f"sqlite:///{tmp_path / ('-'.join(order) + '.db')}")
        loaded = [packload.load([tmp_path / k], into) for k in order]
        r = into.runs_frame("s")
        assert (r["status"] == "done").sum() == 10 and len(r) == 12, order
        assert set(into.episodes_frame("s")["key"]) == set(r.loc[r["status"] == "done", "key"])
        assert loaded[0]["new"] == 12 and loaded[1]["kept"] == 12 - (4 if order[0] == "envs" else 0)
        into.dispose()
    # A cell that was attempted (attempt > 0) keeps its own record even when pending again.
    into = Store(f"sqlite:///{tmp_path / 'tried.db'}")
    packload.load([tmp_path / "envs"], into)
    with into.engine.begin() as c:
        c.execute(sa.update(schema.runs).where(schema.runs.c.key == lunar[2]).values(attempt=1))
    packload.load([tmp_path / "done"], into)
    r = into.runs_frame("s").set_index("key")
    assert r.loc[lunar[2], "status"] == "pending" and r.loc[lunar[3], "status"] == "done"
    into.dispose()
    p = _bench("export", "--store", url, "--suite", "s", "--format", "pack", "--keep", "done", "--out",
               str(tmp_path / "cli" / "s"), cwd=tmp_path)
    assert p.returncode == 0 and "packed 12 runs (10 done, 2 pending) of s" in p.stderr, p.stderr
    for args, says in ((["--format", "pack", "--keep", "finished"], "--keep: 'finished' is not allowed; allowed: all, done, envs"),
                       (["--format", "csv", "--keep", "done"], "--keep: says what a pack holds")):
        p = _bench("export", "--store", url, "--suite", "s", *args, "--out", str(tmp_path / "bad"), cwd=tmp_path)
        assert p.returncode == 2 and says in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert not (tmp_path / "bad").exists()
