"""Packs read in place (bench.storage.packread) give what a store unpacked from them gives, and the shipped
reference's answer is computed once per pack content (bench.api.recommend)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bench import api
from bench.analysis import answers, scoring
from bench.cli import app
from bench.storage import packed, packload
from bench.storage.packread import PackSet, open_reader
from bench.storage.store import Store

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import Planted, write_store  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SMALL_PACK = ROOT / "results" / "reference" / "claim-reinforce-baseline"


def _by_key(df: pd.DataFrame) -> pd.DataFrame:
    """A frame in key order (a store's order; a pack set's groups runs by pack), NULLs as NaN."""
    return df.sort_values("key", kind="mergesort").reset_index(drop=True).astype(object).where(df.notna(), None)


def _same_data(a: scoring.Data, b: scoring.Data) -> None:
    pd.testing.assert_frame_equal(a.runs.astype(object).where(a.runs.notna(), None),
                                  b.runs.astype(object).where(b.runs.notna(), None), check_dtype=False)
    for name in ("episodes", "diagnostics"):
        pd.testing.assert_frame_equal(_by_key(getattr(a, name)), _by_key(getattr(b, name)), check_dtype=False)
    assert (a.traits, a.anchors, a.budgets, a.notes, a.cpu_budgets, a.suites) == \
        (b.traits, b.anchors, b.budgets, b.notes, b.cpu_budgets, b.suites)


@pytest.fixture
def two_packs(tmp_path) -> tuple[str, Path]:
    """A store with a suite and a claim sharing its runs, packed as two sibling packs."""
    url = f"sqlite:///{tmp_path / 'full.db'}"
    labs = [Planted("a", "ppo", "bench", 0.9), Planted("b", "a2c", "sb3", 0.5)]
    write_store(url, ["CartPole-v1"], labs, seeds=5, suite="ref")
    write_store(url, ["CartPole-v1"], labs[:1], seeds=5, suite="claim")
    root = tmp_path / "packs"
    packed.pack(url, "ref", root / "ref")
    packed.pack(url, "claim", root / "claim", beside=packed.packs_under(root))
    return url, root


def test_a_pack_set_reads_what_the_store_unpacked_from_it_reads(two_packs, tmp_path):
    _, root = two_packs
    cache = packload.unpack(packed.packs_under(root), tmp_path / "cache.db")
    packs = PackSet(packed.packs_under(root))
    for suites in (None, ["claim"]):
        _same_data(scoring.load(cache, suites, anchors=False), scoring.load(packs, suites, anchors=False))
    assert packs.suite_names() == ["claim", "ref"]
    a, b = scoring.score(scoring.load(cache, anchors=False)), scoring.score(scoring.load(packs, anchors=False))
    assert answers.recommendation_rows(answers.recommend(a)) == answers.recommendation_rows(answers.recommend(b))


def test_a_shipped_pack_reads_the_same_in_place_as_unpacked(tmp_path):
    cache = packload.unpack([SMALL_PACK], tmp_path / "cache.db")
    reader = open_reader(f"packs:{SMALL_PACK}")
    for suites in (None, [packed.read_manifest(SMALL_PACK)["suite"]]):
        _same_data(scoring.load(cache, suites, anchors=False, diagnostics=scoring.SEQUENCE_DIAGNOSTICS + scoring.DIAGNOSTICS),
                   scoring.load(reader, suites, anchors=False, diagnostics=scoring.SEQUENCE_DIAGNOSTICS + scoring.DIAGNOSTICS))


def test_last_evaluations_read_in_place_as_unpacked_with_an_empty_evaluations_table(tmp_path):
    # mujoco-reinforce holds evaluations; the claim pack's table is empty, its key column typed null (the
    # report's published-number rows ask both at once).
    packs = [SMALL_PACK, ROOT / "results" / "reference" / "mujoco-reinforce"]
    assert pq.read_schema(packs[0] / "evaluations.parquet").field("key").type == pa.null()
    cache = Store(packload.unpack(packs, tmp_path / "cache.db"), readonly=True)
    keys = list(cache.runs_frame()["key"])[::2]  # some runs of each pack: read by filtering on key
    want = cache.last_evaluations(keys)
    cache.dispose()
    got = PackSet(packs).last_evaluations(keys)
    assert want and got == want


def test_the_packs_tuning_studies_give_the_sensitivity_table_in_place(tmp_path):
    # The report's sensitivity criterion: every study of the tuning pack, each scored on its fixed scale,
    # which for a final-return objective needs its env's anchor (in the classic pack beside it). Read in
    # place from the journal, a study gives the row it gives once imported into a store.
    import gzip

    import optuna
    import pandas as pd
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from bench.analysis.sensitivity import sensitivity_table
    from bench.storage.studies import STUDIES

    tune = ROOT / "results" / "reference" / "classic-tune"
    packs = PackSet([tune, ROOT / "results" / "reference" / "classic"])
    try:
        table = sensitivity_table(packs).set_index("study")
        url = f"sqlite:///{tmp_path / 'store.db'}"
        db = Store(url)
        for (env_id, threshold, episodes, seed), a in packs.anchors().items():
            db.put_anchor(env_id, float(a.random_return), threshold, episodes, seed)
        db.dispose()
    finally:
        packs.dispose()
    assert len(table) == packed.read_manifest(tune)["studies"]["count"]
    assert table["score_iqr"].notna().all() and (table["note"] == "").all()
    # Largest importance first, ties by name (Optuna's own order among ties changes with string hashing).
    for imp in table["importances"]:
        assert list(imp) == sorted(imp, key=lambda k: (-imp[k], k))
    assert any(len(set(imp.values())) < len(imp) for imp in table["importances"])  # this pack has ties
    journal = tmp_path / "studies.journal"
    journal.write_bytes(gzip.decompress((tune / STUDIES).read_bytes()))
    src = JournalStorage(JournalFileBackend(str(journal)))
    names = list(table.index[::7])  # a few studies: Optuna copies a study trial by trial
    storage = optuna.storages.RDBStorage(url)
    for name in names:
        optuna.copy_study(from_study_name=name, from_storage=src, to_storage=storage)
    storage.engine.dispose()
    pd.testing.assert_frame_equal(sensitivity_table(url).set_index("study"), table.loc[names])


def test_a_pack_set_refuses_a_damaged_pack(two_packs):
    _, root = two_packs
    f = root / "ref" / "runs.parquet"
    f.write_bytes(f.read_bytes()[:-3] + b"xyz")
    with pytest.raises(packed.PackError, match="runs.parquet: changed or damaged"):
        PackSet([root / "ref"])


@pytest.fixture
def reference(tmp_path, monkeypatch) -> Path:
    """One small shipped pack as the whole reference, the cache folder in tmp_path."""
    ref = tmp_path / "ref"
    shutil.copytree(SMALL_PACK, ref / SMALL_PACK.name)
    monkeypatch.setenv(packed.REFERENCE_ENV, str(ref))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return ref


def test_the_reference_answer_is_kept_per_pack_content_and_options(reference, tmp_path):
    ref = api.reference()
    first = api.recommend(ref)
    again = api.recommend(ref)
    assert not first.cached and again.cached and (again.rows, again.left_out, again.lm) == \
        (first.rows, first.left_out, first.lm)
    kept = sorted((tmp_path / "cache" / "bench" / "answers").glob("*.json"))
    assert len(kept) == 1
    assert not (tmp_path / "cache" / "bench" / "reference.db").exists()  # nothing unpacked
    # Another option is another answer (the Holm correction runs over the rows asked for).
    assert not api.recommend(ref, priority="time").cached
    assert len(list((tmp_path / "cache" / "bench" / "answers").glob("*.json"))) == 2
    # A file whose recorded key is not its name's is not trusted: computed again, and rewritten.
    doc = json.loads(kept[0].read_text())
    kept[0].write_text(json.dumps(dict(doc, key="0" * 64, rows=[])))
    redone = api.recommend(ref)
    assert not redone.cached and redone.rows == first.rows
    # Another pack content is another key.
    other = api.Reference(ref.url, ref.folder, ref.packs, (("x", "0" * 64),))
    assert not api.recommend(other).cached


def test_recommend_prints_the_same_computed_or_cached(reference):
    runner = CliRunner()
    outs = [runner.invoke(app, ["recommend", *args]) for args in ([], [], ["--format", "json"], ["--format", "json"])]
    assert all(r.exit_code == 0 for r in outs), [r.stderr for r in outs]
    assert outs[0].stdout == outs[1].stdout and outs[2].stdout == outs[3].stdout
    assert json.loads(outs[2].stdout)  # rows


def test_a_pack_of_whole_envs_then_the_staged_pack_read_in_place_as_loaded(tmp_path):
    """The reference's `--keep envs` pack read before the staged `--keep done` pack of the same suite: the cells the
    first holds as pending and untried take the second's runs, in place as in a store the two were loaded into."""
    import sqlalchemy as sa

    from bench.storage import schema

    url = f"sqlite:///{tmp_path / 'full.db'}"
    write_store(url, ["CartPole-v1", "LunarLander-v3"], [Planted("a", "ppo", "bench", 0.9)], seeds=3, suite="s")
    db = Store(url)
    key = db.runs_frame("s").query("env == 'LunarLander-v3'")["key"].iloc[0]
    with db.engine.begin() as c:
        c.execute(sa.update(schema.runs).where(schema.runs.c.key == key).values(status="running", owner="h:1"))
    db.dispose()
    packed.pack(url, "s", tmp_path / "ref" / "s", keep="envs")
    packed.pack(url, "s", tmp_path / "staged" / "s", keep="done")
    order = [tmp_path / "ref" / "s", tmp_path / "staged" / "s"]
    cache = packload.unpack(order, tmp_path / "cache.db")
    _same_data(scoring.load(cache, anchors=False), scoring.load(PackSet(order), anchors=False))
    runs = PackSet(order).runs_frame("s")
    assert (runs["status"] == "done").sum() == 5 and runs.set_index("key").loc[key, "status"] == "pending"
