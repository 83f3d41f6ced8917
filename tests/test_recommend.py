"""Recommendations a user can act on (issue 12), on planted stores whose right answer is known.

- the answer names an algorithm first (implementations pooled), then its implementations;
- a winner needs a permutation test and enough evidence: 3 seeds never make one;
- every score is on a fixed scale: adding a label changes nobody else's, for every criterion;
- time is CPU seconds, and a run that shared its core is flagged;
- a time winner whose runs mix machines must outlast the machines' possible difference in speed,
  and its challenger's contended runs taken as if on a quiet core;
- runs at another budget are set aside with a note, never stretched;
- the leave-one-env-out track record is what the rule would have said on each unseen env.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import analysis
from bench.analysis import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402

DENSE = ["CartPole-v1", "LunarLander-v3"]  # two envs of one profile: discrete · vector · dense

# PPO is far better than A2C; its two implementations are the same algorithm and tie with each other.
PPO_IMPLS = [Planted("ppo-bench", "ppo", "bench", skill=1.0, tau=0.1), Planted("ppo-sb3", "ppo", "sb3", skill=1.0, tau=0.1)]
A2C_IMPLS = [Planted("a2c-bench", "a2c", "bench", skill=0.4, tau=0.4), Planted("a2c-sb3", "a2c", "sb3", skill=0.4, tau=0.4)]


def scored(url: str) -> analysis.Scored:
    return analysis.score(analysis.load(url, anchors=False))


def one(url: str, priority: str = "samples") -> analysis.Recommendation:
    (rec,) = analysis.recommend(scored(url), action="discrete", obs="vector", reward="dense", priority=priority,
                                n_boot=200, track_record=False)
    return rec


# --------------------------------------------------------------------------- #
# Algorithm first, then implementation
# --------------------------------------------------------------------------- #
def test_a_clear_algorithm_winner_is_named_though_its_implementations_tie(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE, PPO_IMPLS + A2C_IMPLS, seeds=5)
    for priority in ("samples", "time"):
        rec = one(url, priority)
        assert rec.verdict == "recommended", rec.message
        assert (rec.algorithm, rec.runner_up) == ("ppo", "a2c")
        assert rec.p_value < analysis.ALPHA
        assert rec.impl[0] == "tie" and {rec.impl[1], rec.impl[2]} == {"ppo-bench", "ppo-sb3"}, rec.implementation
        assert rec.runs == {"a2c": "10", "ppo": "10"}  # both implementations pooled: 2 × 5 runs per env
    row = analysis.recommendation_rows([rec])[0]
    assert row["answer"] == "ppo" and row["impl"] in ("bench ≈ sb3", "sb3 ≈ bench")


def test_the_better_implementation_is_named_when_the_test_separates_them(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    fast = Planted("ppo-bench", "ppo", "bench", skill=1.0, tau=0.05)
    slow = Planted("ppo-sb3", "ppo", "sb3", skill=0.7, tau=0.3)
    write_store(url, DENSE, [fast, slow, *A2C_IMPLS], seeds=5)
    rec = one(url)
    assert rec.algorithm == "ppo" and rec.impl[:3] == ("better", "ppo-bench", "ppo-sb3"), rec.implementation


def test_two_indistinguishable_algorithms_tie(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    twins = [Planted("a", "a2c", "bench", skill=0.6, tau=0.3, noise=0.15),
             Planted("b", "trpo", "bench", skill=0.6, tau=0.3, noise=0.15)]
    write_store(url, DENSE, twins, seeds=6)
    for priority in ("samples", "time"):
        rec = one(url, priority)
        assert rec.verdict == "tie", rec.message
        assert {rec.algorithm, rec.runner_up} == {"a2c", "trpo"} and rec.p_value >= analysis.ALPHA


def test_three_seeds_never_make_a_winner(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE, [PPO_IMPLS[0], A2C_IMPLS[0]], seeds=3)  # one label each: 3 runs per env
    rec = one(url)
    assert rec.verdict == "leaning" and rec.algorithm == "ppo", rec.message
    assert "leaning ppo" in rec.message and "3 vs 3 runs per env" in rec.message
    # On two envs the exact test can reach 0.05 with 3 + 3 runs each (its floor is 2 / 20² = 0.005), and
    # here it does: the minimum-evidence rule is what holds the verdict back.
    assert rec.p_value < analysis.ALPHA
    dm = analysis.decision_matrix(scored(url), n_boot=200)
    cell = dm[(dm["criterion"] == "final performance") & (dm["label"] == "ppo-bench")].iloc[0]
    assert cell["mark"] == "lead" and cell["kind"] == "range"  # ahead, but no ★ and no CI from 3 runs


def test_one_env_is_never_enough_for_a_winner(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE[:1], PPO_IMPLS + A2C_IMPLS, seeds=8)
    rec = one(url)
    assert rec.verdict == "leaning" and rec.algorithm == "ppo" and "1 env(s)" in rec.message


# --------------------------------------------------------------------------- #
# Fixed scales
# --------------------------------------------------------------------------- #
SCORES = ["final_norm", "auc_steps_norm", "auc_time_norm", "solved_f", "t_steps", "t_cpu"]


def test_adding_or_removing_a_label_changes_no_other_label_s_score(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    base = [Planted("ppo-bench", "ppo", "bench", skill=0.9, tau=0.2, sec_per_kstep=0.5),
            Planted("trpo-sb3", "trpo", "sb3", skill=0.8, tau=0.3, sec_per_kstep=1.5)]
    write_store(url, DENSE, base, seeds=5, suite="first")
    before = scored(url)
    # Ten times slower, and on a longer horizon of its own: the old wall grid ran to the slowest run.
    write_store(url, DENSE, [Planted("slow", "a2c", "bench", skill=0.3, tau=0.6, sec_per_kstep=20.0)], seeds=5,
                suite="second")
    after = scored(url)
    assert len(after.runs) == len(before.runs) + 10
    b = before.runs.set_index("key")[SCORES]
    a = after.runs.set_index("key").loc[b.index, SCORES]
    pd.testing.assert_frame_equal(a, b)
    assert after.horizons == before.horizons  # the time axis is the env's, not the slowest run's
    # And the aggregates of each label, every criterion, are the same numbers.
    for name, crit in analysis.CRITERIA.items():
        for lb in ("ppo-bench", "trpo-sb3"):
            x = analysis.scoring.estimate(before.tasks(lb, crit.column, DENSE), crit, n_boot=200)
            y = analysis.scoring.estimate(after.tasks(lb, crit.column, DENSE), crit, n_boot=200)
            np.testing.assert_array_equal([x.point, x.lo, x.hi], [y.point, y.lo, y.hi], err_msg=name)


def test_time_uses_cpu_seconds_and_flags_a_contended_run(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    calm = Planted("calm", "ppo", "bench", skill=0.9, tau=0.2)
    busy = Planted("busy", "ppo", "sb3", skill=0.9, tau=0.2, wall_per_cpu=3.0)  # same work, a shared core
    write_store(url, DENSE[:1], [calm, busy], seeds=4)
    s = scored(url)
    r = s.runs.set_index("label")
    assert not r.loc["calm", "contended"].any() and r.loc["busy", "contended"].all()
    # CPU seconds are the same work: the time scores of the two labels are equal run for run.
    np.testing.assert_allclose(np.sort(r.loc["calm", "auc_time_norm"].to_numpy()),
                               np.sort(r.loc["busy", "auc_time_norm"].to_numpy()), atol=0.05)
    assert "4 of 8 runs contended" in analysis.hardware_line(s)
    table = analysis.final_table(s, "CartPole-v1").set_index("label")
    assert table.loc["busy", "contended"] == 4 and table.loc["calm", "contended"] == 0
    from bench.analysis.report import build

    html = build(url, tmp_path / "rep", anchors=False).read_text()
    assert "Contention:</strong> 4 run(s)" in html


# --------------------------------------------------------------------------- #
# Time across machines
# --------------------------------------------------------------------------- #
def _runs(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["env", "label", "hardware", "cpu_s", "total_steps", "contended"])


def test_machine_factor_is_the_largest_same_label_ratio_never_below_the_floor():
    f = analysis.scoring.machine_factor
    # a on E: medians 300 (EPYC, runs 200/300/400) and 200 (Xeon, 100/200/300): 1.5. b on E: 1.1 from one run each.
    # The contended EPYC run of a (2,000 µs per step) would make it 10 if it counted.
    runs = _runs([("E", "a", "EPYC", c, 1e6, False) for c in (200, 300, 400)]
                 + [("E", "a", "Xeon", c, 1e6, False) for c in (100, 200, 300)]
                 + [("E", "a", "EPYC", 2000, 1e6, True), ("E", "b", "EPYC", 110, 1e6, False),
                    ("E", "b", "Xeon", 100, 1e6, False), ("F", "a", "EPYC", 5, 1e4, False)])
    factor, pairs = f(runs)
    assert factor == pytest.approx(1.5)
    assert [(d["label"], d["slow"], d["fast"], d["runs"]) for d in pairs] == [("a", "EPYC", "Xeon", "3 v 3"),
                                                                             ("b", "EPYC", "Xeon", "1 v 1")]
    assert pairs[0]["slow_us"] == pytest.approx(300) and pairs[1]["ratio"] == pytest.approx(1.1)
    # One machine, or only a small measured difference: the floor.
    assert f(runs[runs["hardware"] == "EPYC"]) == (analysis.MACHINE_FACTOR, [])
    assert f(runs[runs["label"] == "b"])[0] == analysis.MACHINE_FACTOR
    # A run measured again with other returns counts like any other (its machine, not its code, changed them:
    # scoring.machine_factor): b's Xeon run, so marked, at 50 µs makes b's ratio 110 / 50.
    marked = _runs([("E", "b", "EPYC", 110, 1e6, False), ("E", "b", "Xeon", 50, 1e6, False)])
    marked["meta"] = [{}, {"same_returns": False, "earlier_measurements": [{"cpu_s": 200.0}]}]
    assert f(marked)[0] == pytest.approx(2.2)


def test_machine_adverse_moves_only_the_runs_off_the_common_machine_and_against_the_leader():
    cols = ["env", "hardware", "v", "lo", "hi"]
    x = pd.DataFrame([("E", "A", 1.0, 0.1, 10.0), ("E", "B", 2.0, 0.2, 20.0), ("F", "A", 3.0, 0.3, 30.0)], columns=cols)
    y = pd.DataFrame([("E", "A", 4.0, 0.4, 40.0), ("E", "A", 5.0, 0.5, 50.0), ("F", "A", 6.0, 0.6, 60.0)], columns=cols)
    xt, yt, mixed = analysis.machine_adverse(x, y, "v", ["E", "F"], ("lo", "hi"))
    assert mixed == {"E": "machines"}  # F ran on one machine: untouched
    # E: machine A has 3 of the 4 runs, so it is the reference; x's run on B takes its lowering value.
    np.testing.assert_array_equal(xt[0], [1.0, 0.2])
    np.testing.assert_array_equal(yt[0], [4.0, 5.0])
    np.testing.assert_array_equal(xt[1], [3.0])
    np.testing.assert_array_equal(yt[1], [6.0])
    # y's runs off the reference take their raising value; a tie in counts takes the first machine by name.
    x2 = pd.DataFrame([("E", "A", 1.0, 0.1, 10.0), ("E", "A", 2.0, 0.2, 20.0)], columns=cols)
    y2 = pd.DataFrame([("E", "B", 4.0, 0.4, 40.0), ("E", "A", 5.0, 0.5, 50.0)], columns=cols)
    xt, yt, _ = analysis.machine_adverse(x2, y2, "v", ["E"], ("lo", "hi"))
    np.testing.assert_array_equal(xt[0], [1.0, 2.0])
    np.testing.assert_array_equal(yt[0], [40.0, 5.0])
    x3 = pd.DataFrame([("E", "A", 1.0, 0.1, 10.0), ("E", "B", 2.0, 0.2, 20.0)], columns=cols)
    y3 = pd.DataFrame([("E", "A", 4.0, 0.4, 40.0), ("E", "B", 5.0, 0.5, 50.0)], columns=cols)
    xt, yt, _ = analysis.machine_adverse(x3, y3, "v", ["E"], ("lo", "hi"))
    np.testing.assert_array_equal(xt[0], [1.0, 0.2])
    np.testing.assert_array_equal(yt[0], [4.0, 50.0])


def test_contention_factor_is_the_largest_median_of_remeasured_runs_never_below_the_floor():
    f = analysis.contention_factor

    def run(label, cpu, earlier, cpu_model="EPYC", wall=None, same=True):
        meta = {"cpu_model": cpu_model, "cpu_id": "25/17/1", "earlier_measurements": earlier, "same_returns": same}
        return ("E", label, cpu, cpu if wall is None else wall, meta)

    contended = [{"cpu_model": "EPYC", "cpu_id": "25/17/1", "cpu_s": c, "wall_s": 3 * c} for c in (30.0, 40.0, 90.0)]
    runs = pd.DataFrame([run("a", 10.0, [contended[0]]), run("a", 20.0, [contended[1]]),   # 3.0 and 2.0: median 2.5
                         run("a", 30.0, [contended[2]]),                                      # 3.0: median of 3.0, 2.0, 3.0
                         run("b", 10.0, [{**contended[0], "wall_s": 30.0}]),                 # earlier not contended
                         run("b", 10.0, [{**contended[0], "cpu_model": "Xeon"}]),            # another CPU: a machine ratio
                         run("b", 10.0, [contended[0]], wall=40.0),                          # contended again
                         run("b", 10.0, [contended[2]], same=False),                         # other returns: other code
                         run("b", 10.0, [contended[2], {**contended[0], "wall_s": 30.0}]),   # the last was quiet
                         run("c", 20.0, [contended[0]]),                                      # 1.5
                         ("E", "d", 10.0, 10.0, {})], columns=["env", "label", "cpu_s", "wall_s", "meta"])
    factor, pairs = f(runs)
    assert factor == pytest.approx(3.0)
    assert [(d["label"], d["runs"], d["median"], d["max"]) for d in pairs] == [("a", 3, 3.0, 3.0), ("c", 1, 1.5, 1.5)]
    assert f(runs[runs["label"].isin(["b", "c", "d"])])[0] == analysis.CONTENTION_FACTOR  # 1.5: at the floor
    assert f(runs[runs["label"] == "d"]) == (analysis.CONTENTION_FACTOR, [])


def test_machine_adverse_takes_the_challengers_contended_runs_as_if_on_a_quiet_core():
    cols = ["env", "hardware", "contended", "v", "lo", "hi", "q", "hq"]
    v = analysis.Variants("lo", "hi", "y", "q", "hq")
    x = pd.DataFrame([("E", "A", True, 1.0, 0.1, 10.0, 100.0, 1000.0)], columns=cols)
    y = pd.DataFrame([("E", "A", True, 4.0, 0.4, 40.0, 400.0, 4000.0), ("E", "A", False, 5.0, 0.5, 50.0, 500.0, 5000.0),
                      ("E", "B", True, 6.0, 0.6, 60.0, 600.0, 6000.0), ("E", "B", False, 7.0, 0.7, 70.0, 700.0, 7000.0)],
                     columns=cols)
    xt, yt, doubted = analysis.machine_adverse(x, y, "v", ["E"], v)
    assert doubted == {"E": "machines, contention"}
    np.testing.assert_array_equal(xt[0], [1.0])  # the leader's contended run only makes it look slower: as measured
    np.testing.assert_array_equal(yt[0], [400.0, 5.0, 6000.0, 70.0])
    # One machine, no contended challenger run: nothing moves.
    xt, yt, doubted = analysis.machine_adverse(x, y[~y["contended"] & (y["hardware"] == "A")], "v", ["E"], v)
    assert doubted == {} and yt[0].tolist() == [5.0]


def _contended_race(tmp_path: Path, ratio: float, contended: str) -> analysis.Recommendation:
    """PPO and A2C learn alike per step, on one machine; A2C takes ``ratio`` times PPO's CPU seconds per step,
    and the runs of ``contended`` shared their cores (wall = 2 × CPU seconds)."""
    url = f"sqlite:///{tmp_path / f'c{ratio}-{contended}.db'}"
    ppo = Planted("ppo-bench", "ppo", "bench", skill=0.9, tau=0.2, noise=0.02,
                  wall_per_cpu=2.0 if contended == "ppo" else 1.0)
    a2c = Planted("a2c-bench", "a2c", "bench", skill=0.9, tau=0.2, noise=0.02, sec_per_kstep=0.5 * ratio,
                  wall_per_cpu=2.0 if contended == "a2c" else 1.0)
    write_store(url, DENSE, [ppo, a2c], seeds=5)
    return one(url, "time")


def test_a_time_winner_must_outlast_its_challengers_contended_runs(tmp_path):
    # The challenger's runs shared their cores: were they 1.5x (the floor) inflated, A2C would be faster. Leaning.
    rec = _contended_race(tmp_path, 1.2, "a2c")
    assert rec.verdict == "leaning" and rec.algorithm == "ppo" and rec.p_value < analysis.ALPHA, rec.message
    assert "CartPole-v1, LunarLander-v3 have contended runs of a2c: taken 1.50× faster" in rec.message, rec.message
    # The leader's own contended runs can only have made it look slower: it stands.
    rec = _contended_race(tmp_path, 1.2, "ppo")
    assert rec.verdict == "recommended" and rec.algorithm == "ppo" and "holds though" not in rec.message, rec.message
    # 2x is beyond what contention did: a winner, and the message says it held.
    rec = _contended_race(tmp_path, 2.0, "a2c")
    assert rec.verdict == "recommended" and "holds though" in rec.message and "contended runs" in rec.message, \
        rec.message


def test_the_time_variants_are_the_same_run_on_a_slower_and_a_faster_machine(tmp_path):
    # One machine: no comparison on the env can mix machines, so the variants are the score itself.
    one_url = f"sqlite:///{tmp_path / 'one.db'}"
    write_store(one_url, DENSE[:1], [Planted("p", "ppo", "bench", skill=0.9, tau=0.2)], seeds=3)
    r = scored(one_url).runs
    assert (r["hardware"] == "synthetic CPU · 1 torch thread(s)").all()
    assert (r["auc_time_norm_slow"] == r["auc_time_norm"]).all() and (r["auc_time_norm_fast"] == r["auc_time_norm"]).all()
    # Two machines (seeds alternate): every run gets both.
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE[:1], [Planted("p", "ppo", "bench", skill=0.9, tau=0.2, cpu_models=("A", "B"))], seeds=3)
    s = scored(url)
    r = s.runs.sort_values("seed")
    assert s.machine_factor == analysis.MACHINE_FACTOR
    assert (r["auc_time_norm_slow"] < r["auc_time_norm"]).all() and (r["auc_time_norm"] < r["auc_time_norm_fast"]).all()
    # Planted at 0.5 s per 1000 steps: a machine 1.25x faster is the same run planted at 0.4.
    fast_url = f"sqlite:///{tmp_path / 'f.db'}"
    write_store(fast_url, DENSE[:1], [Planted("p", "ppo", "bench", skill=0.9, tau=0.2, sec_per_kstep=0.4)], seeds=3)
    np.testing.assert_allclose(r["auc_time_norm_fast"], scored(fast_url).runs.sort_values("seed")["auc_time_norm"],
                               rtol=1e-4)  # clocks stored to 1 ms


def _time_race(tmp_path: Path, ratio: float, ppo_cpu: str) -> tuple[analysis.Recommendation, str]:
    """PPO and A2C learn alike per step; A2C takes ``ratio`` times PPO's CPU seconds per step. A2C ran on
    "CPU A", PPO on ``ppo_cpu``."""
    url = f"sqlite:///{tmp_path / f'{ratio}-{ppo_cpu}.db'}"
    ppo = Planted("ppo-bench", "ppo", "bench", skill=0.9, tau=0.2, noise=0.02, cpu_model=ppo_cpu)
    a2c = Planted("a2c-bench", "a2c", "bench", skill=0.9, tau=0.2, noise=0.02, sec_per_kstep=0.5 * ratio,
                  cpu_model="CPU A")
    write_store(url, DENSE, [ppo, a2c], seeds=5)
    return one(url, "time"), url


def test_a_time_winner_on_other_machines_than_its_rival_must_outlast_their_difference(tmp_path):
    # 1.2x faster per step, all on one machine: a winner.
    rec, _ = _time_race(tmp_path, 1.2, "CPU A")
    assert rec.verdict == "recommended" and rec.algorithm == "ppo", rec.message
    # The same runs, PPO's on another machine: 1.2x is within what machines differ by (1.25x), so it leans.
    rec, url = _time_race(tmp_path, 1.2, "CPU B")
    s = scored(url)
    assert rec.verdict == "leaning" and rec.algorithm == "ppo" and rec.p_value < analysis.ALPHA, rec.message
    assert "CartPole-v1, LunarLander-v3 mix machines" in rec.message and "1.25× slower or faster against ppo" in \
        rec.message
    assert analysis.recommendation_rows([rec])[0]["answer"] == "leaning ppo"
    assert "a time winner must hold with each env's runs off its most common machine 1.25×" in \
        analysis.hardware_line(s)
    # The decision matrix marks no time winner either, and says why; samples are untouched by machines.
    m = analysis.decision_matrix(s, n_boot=200).set_index(["category", "label", "criterion"])
    cat = "discrete · vector · dense"
    assert m.loc[(cat, "ppo-bench", "time efficiency"), "mark"] == "tie"
    assert "mix machines" in m.loc[(cat, "a2c-bench", "time efficiency"), "note"]
    assert one(url, "samples").verdict == "tie"
    # 2x is beyond it: still a winner, and the message says it held.
    rec, _ = _time_race(tmp_path, 2.0, "CPU B")
    assert rec.verdict == "recommended" and rec.algorithm == "ppo" and "holds though" in rec.message, rec.message


def test_implementations_on_different_machines_lean_by_time(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    own = Planted("ppo-bench", "ppo", "bench", skill=0.9, tau=0.2, noise=0.02, cpu_model="CPU B")
    sb3 = Planted("ppo-sb3", "ppo", "sb3", skill=0.9, tau=0.2, noise=0.02, sec_per_kstep=0.6, cpu_model="CPU A")
    write_store(url, DENSE, [own, sb3, *A2C_IMPLS], seeds=5)
    rec = one(url, "time")
    assert rec.algorithm == "ppo" and rec.impl[:3] == ("leaning", "ppo-bench", "ppo-sb3"), rec.implementation
    assert "mix machines" in rec.implementation and "fewer than" not in rec.implementation


def test_machines_are_told_apart_by_their_speed_probe_as_well_as_their_name():
    hw = analysis.hardware_of
    base = {"cpu_model": "Xeon", "torch_threads": 1, "blas_threads": 1}
    assert hw(base) == "Xeon · 1 torch thread(s) · 1 BLAS thread(s)"  # no probe recorded: as before
    one = hw({**base, "cpu_probe_ms": {"start": 21.4, "end": 22.5}})
    assert one == hw({**base, "cpu_probe_ms": {"start": 22.0, "end": 21.7}}) == \
        "Xeon (probe ≈22.6 ms) · 1 torch thread(s) · 1 BLAS thread(s)"  # 2 ** 4.5: the class of 21.4 ms
    assert hw({**base, "cpu_probe_ms": {"start": 44.0, "end": 45.0}}) != one  # twice as slow: another machine
    assert analysis.probe_class_ms({"cpu_probe_ms": {"start": None, "end": 0}}) is None


def test_probes_of_one_machine_straddling_a_class_boundary_are_one_machine(tmp_path):
    # 12.0 and 12.6 ms round to different powers of 2 ** 0.25 (11.3 and 13.5): a fixed grid called them two
    # machines, as it did the Atari reference's one VM. Read together they are one, and PPO's time win stands.
    url = f"sqlite:///{tmp_path / 's.db'}"
    ppo = Planted("ppo-bench", "ppo", "bench", skill=0.9, tau=0.2, noise=0.02, cpu_model="CPU A", probe_ms=12.0)
    a2c = Planted("a2c-bench", "a2c", "bench", skill=0.9, tau=0.2, noise=0.02, sec_per_kstep=0.6, cpu_model="CPU A",
                  probe_ms=12.6)
    assert analysis.hardware_of({"cpu_probe_ms": {"start": 12.0}}) != analysis.hardware_of({"cpu_probe_ms": {"start": 12.6}})
    write_store(url, DENSE, [ppo, a2c], seeds=5)
    s = scored(url)
    assert s.runs["hardware"].nunique() == 1 and "probe ≈12.3 ms" in s.runs["hardware"].iloc[0]
    rec = one(url, "time")
    assert rec.verdict == "recommended" and rec.algorithm == "ppo" and "mix machines" not in rec.message, rec.message


def test_probe_classes_split_at_gaps_and_at_spans_no_one_machine_has():
    cls = analysis.probe_classes
    m = lambda ms, cpu="A": {"cpu_model": cpu, "torch_threads": 1, "cpu_probe_ms": {"start": ms, "end": ms + 5}}
    # One machine's noise (least probes within 2 ** 0.25 of each other) is one class, labelled by its median.
    assert cls([m(37.7), m(42.5), m(39.8)]) == [39.8, 39.8, 39.8]
    # A gap wider than 2 ** 0.25 starts another machine; so does another CPU name at the same speed.
    assert cls([m(12.0), m(24.0), m(12.4), m(12.0, cpu="B")]) == [12.2, 24.0, 12.2, 12.0]
    # A chain of small steps wider than 2 ** 0.5 in all is not one machine's noise: cut at its widest gap.
    chain = cls([m(v) for v in (10.0, 10.5, 11.0, 12.9, 14.0, 15.2)])
    assert chain[0] == chain[1] == chain[2] == 10.5 != chain[3] == chain[4] == chain[5] == 14.0, chain
    assert cls([{"cpu_model": "A"}, m(12.0)]) == [None, 12.0]  # no probe recorded: no class


def test_a_time_winner_on_a_slower_machine_of_the_same_name_must_outlast_the_difference(tmp_path):
    # Both labels on "CPU A", PPO's runs on one twice as fast by the probe: machines differ, so 1.2x leans.
    url = f"sqlite:///{tmp_path / 's.db'}"
    ppo = Planted("ppo-bench", "ppo", "bench", skill=0.9, tau=0.2, noise=0.02, cpu_model="CPU A", probe_ms=11.0)
    a2c = Planted("a2c-bench", "a2c", "bench", skill=0.9, tau=0.2, noise=0.02, sec_per_kstep=0.6, cpu_model="CPU A",
                  probe_ms=22.0)
    write_store(url, DENSE, [ppo, a2c], seeds=5)
    rec = one(url, "time")
    assert rec.verdict == "leaning" and "mix machines" in rec.message, rec.message


def test_the_report_shows_the_machine_factor_and_the_same_label_measured_on_two_machines(tmp_path):
    import html as html_lib

    from bench.analysis.report import build

    url = f"sqlite:///{tmp_path / 's.db'}"
    # "own" ran seeds 0 and 2 on CPU A, 1 and 3 on CPU B, at the same speed on both.
    write_store(url, DENSE[:1], [Planted("own", "ppo", "bench", 0.9, cpu_models=("CPU A", "CPU B"))], seeds=4,
                suite="one")
    s = scored(url)
    assert s.machine_factor == analysis.MACHINE_FACTOR  # the same speed on both: the floor
    text = " ".join(html_lib.unescape(build(url, tmp_path / "rep", anchors=False).read_text()).split())
    assert "must hold with each env's runs off its most common machine taken 1.25× slower or faster" in text
    assert "own on CartPole-v1" in text and "(1.00×; 2 v 2 runs)" in text


def test_the_report_and_the_time_line_state_the_contention_factor_and_its_basis(tmp_path):
    import html as html_lib
    import json

    import sqlalchemy as sa

    from bench.analysis.report import build
    from bench.run.store import Store, runs as runs_table

    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE[:1], [Planted("own", "ppo", "bench", 0.9, wall_per_cpu=2.0)], seeds=4, suite="one")
    s = scored(url)
    assert s.contention_factor == analysis.CONTENTION_FACTOR and s.contention_pairs == []
    assert ("4 of 4 runs contended (wall > 1.25 × CPU): a time winner must hold with its challenger's contended runs "
            "1.50× faster (the least assumed; none measured again here)") in analysis.hardware_line(s)
    # One run measured again on a quiet core, 2.4x below its contended CPU seconds: the factor is measured.
    db = Store(url)
    key, cpu, meta = db.runs_frame("one")[["key", "cpu_s", "meta"]].iloc[0]
    meta = json.loads(meta)
    meta["earlier_measurements"] = [{"cpu_model": meta["cpu_model"], "cpu_s": 2.4 * cpu, "wall_s": 6.0 * cpu}]
    meta["same_returns"] = True
    with db.engine.begin() as c:
        c.execute(runs_table.update().where(runs_table.c.key == key).values(wall_s=cpu, meta=json.dumps(meta)))
    s = scored(url)
    assert s.contention_factor == pytest.approx(2.4)
    assert "3 of 4 runs contended" in analysis.hardware_line(s) and \
        "2.40× faster (the largest measured: own on CartPole-v1, median of 1 run(s) measured again" in analysis.hardware_line(s)
    text = " ".join(html_lib.unescape(build(url, tmp_path / "rep", anchors=False).read_text()).split())
    assert "taken 2.40× faster, the largest median ratio" in text and "own on CartPole-v1: 2.40× (median of 1" in text


def test_each_profile_s_time_line_names_only_its_own_machines(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, ["CartPole-v1"], [Planted("a", "ppo", "bench", 0.9, cpu_model="CPU A"),
                                       Planted("b", "a2c", "bench", 0.5, cpu_model="CPU A")], seeds=2, suite="one")
    write_store(url, ["Pendulum-v1"], [Planted("a", "ppo", "bench", 0.9, cpu_model="CPU B"),
                                       Planted("b", "a2c", "bench", 0.5, cpu_model="CPU A")], seeds=2, suite="two")
    recs = {r.action: r for r in analysis.recommend(scored(url), obs="vector", reward="dense", priority="time",
                                                    n_boot=200, track_record=False)}
    assert recs["discrete"].hardware == "CPU seconds on CPU A · 1 torch thread(s)"
    assert recs["continuous"].hardware.startswith("CPU seconds on CPU A · 1 torch thread(s); CPU B · 1 torch thread(s); "
                                                  "a time winner must hold")
    p = bench("recommend", "--store", url, "--priority", "time", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "time, discrete vector dense: CPU seconds on CPU A · 1 torch thread(s) time, continuous vector dense: " \
           "CPU seconds on CPU A" in text, p.stdout


def test_runs_recorded_before_per_episode_cpu_are_estimated_and_said_so(tmp_path):
    import sqlalchemy as sa

    from bench.run import store as st

    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE[:1], [PPO_IMPLS[0]], seeds=2)
    eng = sa.create_engine(url)
    with eng.begin() as c:
        c.execute(sa.update(st.episodes).values(cpu_s=None))
    s = scored(url)
    assert s.runs["cpu_estimated"].all() and s.runs["auc_time_norm"].notna().all()
    assert "2 runs' CPU time estimated from wall time" in analysis.hardware_line(s)


def test_mixed_budgets_are_set_aside_with_a_note(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE[:1], [PPO_IMPLS[0]], seeds=3, suite="long", timesteps=20_000)
    write_store(url, DENSE[:1], [A2C_IMPLS[0]], seeds=3, suite="short", timesteps=10_000)
    data = analysis.load(url, anchors=False)
    s = analysis.score(data)
    assert set(s.runs["label"]) == {"ppo-bench"} and (s.runs["timesteps"] == 20_000).all()
    (note,) = [n for n in data.notes if "set aside" in n]
    assert note.startswith("CartPole-v1: 3 done run(s) set aside, at budget 10,000: a2c-bench (3)")
    assert "compared at one budget (20,000 steps)" in note
    # Reported apart, the short suite is scored on its own budget.
    alone = analysis.score(analysis.load(url, ["short"], anchors=False))
    assert set(alone.runs["label"]) == {"a2c-bench"} and alone.curves["CartPole-v1"].steps[-1] == 10_000


def test_final_performance_is_capped_at_the_threshold(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE[:1], [Planted("over", "ppo", "bench", skill=1.6, tau=0.05)], seeds=3)
    r = scored(url).runs
    assert (r["final_norm"] == 1.0).all() and (r["auc_steps_norm"] <= 1.0).all()


def test_each_env_counts_once_whatever_its_run_count(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    lab = Planted("x", "ppo", "bench", skill=0.5, tau=0.2, env_skill=(("CartPole-v1", 1.0), ("LunarLander-v3", 0.2)))
    write_store(url, DENSE[:1], [lab], seeds=9, suite="many")
    write_store(url, DENSE[1:], [lab], seeds=3, suite="few")
    s = scored(url)
    tasks = s.tasks("x", "final_norm", DENSE)
    assert [t.size for t in tasks] == [9, 3]
    crit = analysis.CRITERIA["final performance"]
    est = analysis.scoring.estimate(tasks, crit)
    assert est.point == pytest.approx(np.mean([stats.iqm(t) for t in tasks]))
    assert est.kind == "range"  # LunarLander has 3 runs: no bootstrap CI


# --------------------------------------------------------------------------- #
# The track record
# --------------------------------------------------------------------------- #
THREE = ["CartPole-v1", "LunarLander-v3", "Acrobot-v1"]  # all discrete · vector · dense


def _loo_by_hand(tmp_path: Path, algos: list[Planted], seeds: int) -> tuple[int, int]:
    """The track record rebuilt from the public API: a store without each env, and one with it alone."""
    hits = trials = 0
    for held in THREE:
        rest = f"sqlite:///{tmp_path / f'rest-{held[:4]}.db'}"
        write_store(rest, [e for e in THREE if e != held], algos, seeds=seeds)
        pick = one(rest).algorithm
        alone = f"sqlite:///{tmp_path / f'alone-{held[:4]}.db'}"
        write_store(alone, [held], algos, seeds=seeds)
        there = one(alone)
        trials += 1
        tied_best = pick == there.algorithm or (pick == there.runner_up and there.p_value >= analysis.ALPHA)
        hits += int(tied_best)
    return hits, trials


def test_leave_one_env_out_hit_rate_on_a_planted_store(tmp_path):
    # X wins on CartPole and LunarLander; Y wins by far on Acrobot. Without Acrobot the rule names X,
    # which loses there; without either of the others, Y's big Acrobot margin makes it the pick, and it
    # loses on the held env: the table would have been wrong on every env it had not seen.
    x = Planted("x", "ppo", "bench", skill=0.5, tau=0.2,
                env_skill=(("CartPole-v1", 0.9), ("LunarLander-v3", 0.9), ("Acrobot-v1", 0.1)))
    y = Planted("y", "trpo", "bench", skill=0.5, tau=0.2,
                env_skill=(("CartPole-v1", 0.7), ("LunarLander-v3", 0.7), ("Acrobot-v1", 1.0)))
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, THREE, [x, y], seeds=5)
    s = scored(url)
    crit = analysis.CRITERIA["sample efficiency"]
    assert analysis.leave_one_env_out(s, crit, THREE, n_boot=100) == (0, 3)
    assert _loo_by_hand(tmp_path, [x, y], seeds=5) == (0, 3)
    (rec,) = analysis.recommend(s, action="discrete", obs="vector", reward="dense", priority="samples", n_boot=100)
    assert rec.loo == (0, 3)


def test_leave_one_env_out_counts_hits_for_a_consistent_winner(tmp_path):
    x = Planted("x", "ppo", "bench", skill=1.0, tau=0.1)
    y = Planted("y", "trpo", "bench", skill=0.4, tau=0.4)
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, THREE, [x, y], seeds=5)
    s = scored(url)
    assert analysis.leave_one_env_out(s, analysis.CRITERIA["sample efficiency"], THREE, n_boot=100) == (3, 3)
    assert _loo_by_hand(tmp_path, [x, y], seeds=5) == (3, 3)


# --------------------------------------------------------------------------- #
# The command
# --------------------------------------------------------------------------- #
def bench(*args, cwd):
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**__import__("os").environ, "COLUMNS": "100"})


@pytest.fixture(scope="module")
def clear(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('clear') / 's.db'}"
    write_store(url, DENSE, PPO_IMPLS + A2C_IMPLS, seeds=5)
    return url


def test_recommend_table_fits_100_columns_and_answers_by_algorithm(clear, tmp_path):
    p = bench("recommend", "--store", clear, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(len(x) for x in lines) <= 100, "\n".join(x for x in lines if len(x) > 100)
    rows = [x for x in lines if x.strip().startswith("discrete vector dense")]
    assert len(rows) == 2 and all(" ppo " in x and "≈" in x for x in rows)  # ppo, its implementations tie
    assert "insufficient evidence (no measured env)" in p.stdout


@pytest.mark.parametrize("fmt", ["json", "csv", "markdown"])
def test_recommend_formats_for_scripts(clear, tmp_path, fmt):
    p = bench("recommend", "--store", clear, "--format", fmt, "--priority", "samples", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    if fmt == "json":
        import json

        rows = json.loads(p.stdout)
        dense = [r for r in rows if r["envs"]]
        # 2 actions × 2 observation kinds × 2 reward kinds, and token sequences (discrete only) × 2 reward kinds.
        assert len(rows) == 10 and len(dense) == 1
        assert dense[0]["algorithm"] == "ppo" and dense[0]["verdict"] == "recommended" and dense[0]["p_value"] < 0.05
        assert dense[0]["score_kind"] == "ci" and dense[0]["score_lo"] <= dense[0]["score_point"] <= dense[0]["score_hi"]
    elif fmt == "csv":
        import io

        df = pd.read_csv(io.StringIO(p.stdout))
        assert len(df) == 10 and df.loc[df["envs"].notna(), "algorithm"].tolist() == ["ppo"]
    else:
        lines = p.stdout.splitlines()
        assert lines[0].startswith("| problem | priority | answer") and lines[1].startswith("|---|")
        assert any("| ppo |" in x for x in lines)


def test_recommend_verbose_and_the_old_priority_name(clear, tmp_path):
    p = bench("recommend", "--store", clear, "--verbose", "--priority", "wall-clock", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "priority time: ppo" in p.stdout and "track record:    0/0" not in p.stdout
    assert "runner-up:       a2c:" in p.stdout and max(len(x) for x in p.stdout.splitlines()) <= 100
