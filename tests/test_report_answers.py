"""The report's verdicts are `bench recommend`'s (issue 40): "The answer", the recommendation table and the
decision matrix's marks come from one computation, checked row for row against `bench recommend --format json`
on the same store; and no mark of the matrix moves when an unrelated label is added."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bench import analysis
from bench.analysis import matrix, report
from bench.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402

# discrete · vector · dense ×3 (an answer about the next env), discrete · vector · sparse ×1, continuous ×1.
ENVS = ["Acrobot-v1", "CartPole-v1", "LunarLander-v3", "MountainCar-v0", "Pendulum-v1"]
LABELS = [Planted("trpo-bench", "trpo", "bench", skill=1.0),
          # PPO's two implementations alike: pooled as "ppo". On MountainCar as good as TRPO: no difference there.
          Planted("ppo-bench", "ppo", "bench", skill=0.6, env_skill=(("MountainCar-v0", 1.0),)),
          Planted("ppo-sb3", "ppo", "sb3", skill=0.6, env_skill=(("MountainCar-v0", 1.0),)),
          Planted("a2c-bench", "a2c", "bench", skill=0.3)]
#: Cells a recommendation's verdict gives its winner's labels (bench.analysis.matrix).
WINNER_MARK = {"recommended": "answer", "measured": "measured", "leaning": "leaning", "no difference": "no difference"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('answers') / 's.db'}"
    write_store(url, ENVS, LABELS, seeds=6, episodes=40).dispose()
    return url


def recommend_json(url: str) -> list[dict]:
    res = CliRunner().invoke(app, ["recommend", "--store", url, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def report_view(url: str) -> dict:
    """The data that feeds the report's template for its verdicts, read as `bench report` reads the store."""
    data = analysis.load(url)
    scored = analysis.score(data)
    return report.answer_data(data, scored, analysis.recommend(scored))


def test_the_report_s_answers_and_matrix_marks_are_bench_recommend_s_row_for_row(store):
    cli = recommend_json(store)
    view = report_view(store)
    # The answer and the recommendation table: every row, every field (answer, p, envs, directions, ...).
    assert json.loads(json.dumps(view["recs"], default=str)) == cli
    # Every wording class this store can give is there, so the check below covers each.
    got = {(r["obs"], r["reward"], r["action"], r["priority"]): r for r in cli if r["envs"]}
    assert {r["verdict"] for r in got.values()} == {"recommended", "measured", "no difference"}, got
    assert got[("vector", "dense", "discrete", "samples")]["answer"] == "trpo"
    assert got[("vector", "dense", "continuous", "samples")]["answer"] == "on Pendulum-v1: trpo"

    dm = view["matrix"]
    marked = dm[dm["mark"] != ""]
    expected = set()
    for r in cli:
        if r["verdict"] not in WINNER_MARK:
            continue
        cat = f"{r['action']} · {r['obs']} · {r['reward']}"
        crit = analysis.PRIORITY_CRITERION[r["priority"]]
        cells = marked[(marked["category"] == cat) & (marked["criterion"] == crit)].set_index("label")
        win, run = r["labels"][r["algorithm"]], r["labels"][r["runner_up"]]
        assert set(cells.index) == set(win) | set(run), (cat, crit)
        for lb in win + run:
            x = cells.loc[lb]
            want = WINNER_MARK[r["verdict"]] if lb in win or r["verdict"] == "no difference" else "runner-up"
            assert (x["mark"], x["p_text"], x["directions"]) == (want, r["p_text"], r["directions"]), (cat, crit, lb)
            assert x["p"] == pytest.approx(r["p_adjusted"], rel=0, abs=0)
            assert r["message"] in x["note"]
            expected.add((cat, crit, lb))
    # No mark without an answer behind it: not on other criteria, other labels, nor "all environments".
    assert set(zip(marked["category"], marked["criterion"], marked["label"])) == expected
    assert got[("vector", "dense", "discrete", "samples")]["labels"] == {"trpo": ["trpo-bench"],
                                                                      "ppo": ["ppo-bench", "ppo-sb3"]}
    # The table rows the template draws carry the same marks, with the answer's p and directions.
    dense = next(d for d in view["decision"] if d["category"] == "discrete · vector · dense")
    cells = {row["label"]: row["cells"][dense["criteria"].index("sample efficiency")]["mark"] for row in dense["rows"]}
    r = got[("vector", "dense", "discrete", "samples")]
    assert cells["trpo-bench"] == f"★ answer (p {r['p_text']}; {r['directions']})"
    assert cells["ppo-sb3"].startswith("runner-up") and cells["a2c-bench"] == ""


def test_an_unrelated_label_changes_no_score_mark_or_p_value_of_the_matrix(tmp_path):
    """As recommend's own test (tests/test_recommend.py): a label far behind, on two machines 3× apart,
    with contended runs, added to the store, leaves every other row of the matrix as it was."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    envs = ["Acrobot-v1", "CartPole-v1", "LunarLander-v3", "MountainCar-v0"]
    ppo = Planted("ppo-bench", "ppo", "bench", skill=0.9, tau=0.2, noise=0.02, cpu_model="CPU A")
    a2c = Planted("a2c-bench", "a2c", "bench", skill=0.8, tau=0.3, noise=0.02, sec_per_kstep=0.8,
                  cpu_models=("CPU A", "CPU A", "CPU A", "CPU B"))
    write_store(url, envs, [ppo, a2c], seeds=6, suite="base", episodes=40).dispose()

    def dm() -> pd.DataFrame:
        return analysis.decision_matrix(analysis.score(analysis.load(url, anchors=False)), n_boot=100)

    before = dm()
    assert (before["mark"] == "answer").any()  # something to keep
    far = Planted("far-behind", "trpo", "bench", skill=0.2, tau=0.5, sec_per_kstep=2.0, wall_per_cpu=3.0,
                  cpu_models=("CPU A", "CPU B"), cpu_speed=(("CPU B", 3.0),))
    write_store(url, envs, [far], seeds=6, suite="unrelated", episodes=40).dispose()
    after = dm()
    assert set(after["label"]) == {"ppo-bench", "a2c-bench", "far-behind"}
    assert (after.loc[after["label"] == "far-behind", "mark"] == "").all()
    keep = after[after["label"] != "far-behind"].reset_index(drop=True)
    pd.testing.assert_frame_equal(keep, before.reset_index(drop=True))
    assert np.isfinite(keep.loc[keep["mark"] == "answer", "p"]).all()


def test_decision_cells_are_ranked_within_their_column_and_shaded_by_rank():
    """Hand-computed: scores 0.2, 0.6, 1.0 rank 0, 0.5, 1 (min-max); a lower-is-better column the other way;
    equal scores all 0.5; a cell without a score gets no rank and no shade."""
    first, second = list(matrix.CRITERIA)[:2]
    sens = matrix.SENSITIVITY
    rows = []
    for lb, a, s in (("a", 0.2, 0.3), ("b", 0.6, 0.3), ("c", 1.0, np.nan)):
        for crit, point in ((first, a), (sens, s), (second, 0.5)):
            rows.append(dict(category="cat", label=lb, algo=lb, impl="bench", criterion=crit, point=point, lo=np.nan,
                             hi=np.nan, kind="none", n_envs=2, cat_envs=2, n_runs=10, mark="", p=np.nan, p_text="",
                             directions="", note="no tuning data" if point != point else ""))
    dm = pd.DataFrame(rows, columns=matrix.COLUMNS)
    crits = matrix.criteria_of(dm, "cat")

    def ranks(lower_better):
        out = matrix.decision_rows(dm, "cat", lower_better=lower_better)
        return {r["label"]: {c: cell["rank"] for c, cell in zip(crits, r["cells"])} for r in out}

    rank = ranks({sens})
    assert [rank[lb][first] for lb in "abc"] == pytest.approx([0.0, 0.5, 1.0])
    assert rank["a"][sens] == rank["b"][sens] == 0.5 and rank["c"][sens] is None
    assert {rank[lb][second] for lb in "abc"} == {0.5}
    assert [ranks({first})[lb][first] for lb in "abc"] == pytest.approx([1.0, 0.5, 0.0])
    assert report.shade(None) == "" and report.shade(0.0) == "background: #f7fbff"
    assert report.shade(1.0) == "background: #6baed6" and report.shade(0.5) == "background: #b1d4ea"  # 177, 212.5, 234.5 rounded half to even
