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

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import analysis
from bench.stats import aggregate as stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402

DENSE = ["CartPole-v1", "LunarLander-v3"]  # two envs of one profile: discrete · vector · dense
THREE = ["Acrobot-v1", "CartPole-v1", "LunarLander-v3"]  # three: enough for an answer about the next env

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
    write_store(url, THREE, PPO_IMPLS + A2C_IMPLS, seeds=5)
    for priority in ("samples", "time"):
        rec = one(url, priority)
        assert rec.verdict == "recommended", rec.message
        assert (rec.algorithm, rec.runner_up) == ("ppo", "a2c") and rec.test == "t over envs"
        assert rec.p_adjusted < analysis.ALPHA and rec.tested_envs == sorted(THREE)
        assert rec.impl[0] == "tie" and {rec.impl[1], rec.impl[2]} == {"ppo-bench", "ppo-sb3"}, rec.implementation
        assert rec.runs == {"a2c": "10", "ppo": "10"}  # both implementations pooled: 2 × 5 runs per env
        # Every env weighs the same in the headline test (issue 63, defect 7): its mean effect is the plain mean.
        assert rec.meta.mu == pytest.approx(np.mean(rec.effects)) and rec.meta.k == 3
    row = analysis.recommendation_rows([rec])[0]
    assert row["answer"] == "ppo" and row["impl"] in ("bench ≈ sb3", "sb3 ≈ bench") and row["directions"] == "+ + +"


def test_fewer_envs_than_the_simulation_needs_answer_for_the_envs_measured(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE, PPO_IMPLS + A2C_IMPLS, seeds=5)
    rec = one(url)
    assert rec.verdict == "measured" and rec.test == "permutation" and rec.p_adjusted < analysis.ALPHA, rec.message
    assert analysis.recommendation_rows([rec])[0]["answer"] == "on CartPole-v1, LunarLander-v3: ppo"
    assert "no claim about the next env" in rec.message


def test_the_better_implementation_is_named_when_the_test_separates_them(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    fast = Planted("ppo-bench", "ppo", "bench", skill=1.0, tau=0.05)
    slow = Planted("ppo-sb3", "ppo", "sb3", skill=0.7, tau=0.3)
    write_store(url, DENSE, [fast, slow, *A2C_IMPLS], seeds=5)
    rec = one(url)
    # Parity calls the two different, so they are ranked apart: the answer names the implementation.
    assert rec.algorithm == "ppo-bench" and rec.impl[0] == "apart", rec.implementation
    assert any("ppo ranked by implementation" in n and "different" in n for n in rec.pooling), rec.pooling
    assert rec.implementation.startswith("ppo-bench alone: its algorithm's implementations are ranked apart "
                                         "(parity: different on "), rec.implementation
    assert "fewer than" not in rec.implementation


def test_implementations_ranked_apart_for_too_few_runs_say_so_not_different(tmp_path):
    """Issue 66: with 3 runs a label the answers do not pool two implementations (parity's table does not call
    them different), so they are ranked apart for that reason; the sentence said "implementations differ"."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE, [*PPO_IMPLS, *A2C_IMPLS], seeds=3)
    rec = one(url)
    assert rec.impl[0] == "apart" and rec.algorithm in ("ppo-bench", "ppo-sb3"), rec.implementation
    assert rec.implementation == (f"{rec.algorithm} alone: its algorithm's implementations are ranked apart (fewer than 5 "
                                  "runs to check parity on CartPole-v1, LunarLander-v3)"), rec.implementation
    from bench.stats import parity

    verdicts = {ep.env: ep.verdict for ep in parity.parity(scored(url).runs, "ppo-bench", "ppo-sb3")}
    assert "different" not in verdicts.values() and set(verdicts) == set(DENSE), verdicts  # the parity table's


def test_two_indistinguishable_algorithms_show_no_difference_measured(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    twins = [Planted("a", "a2c", "bench", skill=0.6, tau=0.3, noise=0.15),
             Planted("b", "trpo", "bench", skill=0.6, tau=0.3, noise=0.15)]
    write_store(url, DENSE, twins, seeds=6)
    for priority in ("samples", "time"):
        rec = one(url, priority)
        assert rec.verdict == "no difference", rec.message
        assert {rec.algorithm, rec.runner_up} == {"a2c", "trpo"} and rec.p_adjusted >= analysis.ALPHA
        assert analysis.recommendation_rows([rec])[0]["answer"] == "no difference measured"  # never "leaning"


def test_three_seeds_never_make_a_winner(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE, [PPO_IMPLS[0], A2C_IMPLS[0]], seeds=3)  # one label each: 3 runs per env
    rec = one(url)
    assert rec.verdict == "leaning" and rec.algorithm == "ppo", rec.message
    assert "leaning ppo over a2c" in rec.message and "≥ 5 runs per side and env" in rec.message
    # On two envs the exact test can reach 0.05 with 3 + 3 runs each (its floor is 2 / 20² = 0.005), and
    # here it does: the minimum-evidence rule is what holds the verdict back.
    assert rec.p_adjusted < analysis.ALPHA
    dm = analysis.decision_matrix(scored(url), n_boot=200)
    cell = dm[(dm["criterion"] == "sample efficiency") & (dm["label"] == "ppo-bench")].iloc[0]
    assert cell["mark"] == "leaning" and cell["kind"] == "range"  # the answer's mark: no ★, and no CI from 3 runs


def test_one_env_answers_for_itself_only(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE[:1], PPO_IMPLS + A2C_IMPLS, seeds=8)
    rec = one(url)
    assert rec.verdict == "measured" and rec.algorithm == "ppo" and rec.tested_envs == ["CartPole-v1"]
    assert analysis.recommendation_rows([rec])[0]["answer"] == "on CartPole-v1: ppo"


def test_headline_p_values_are_holm_adjusted_across_the_call_and_the_floor_is_not_a_measurement(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE + ["Pendulum-v1"], [PPO_IMPLS[0], A2C_IMPLS[0]], seeds=12)
    recs = analysis.recommend(scored(url), n_boot=100, track_record=False)
    tested = [r for r in recs if r.p_value is not None]
    assert len(tested) == 4  # 2 profiles × 2 priorities
    from bench.stats.generalise import holm

    assert [r.p_adjusted for r in tested] == holm([r.p_value for r in tested])
    # Pendulum alone, 12 + 12 runs: C(24, 12) relabelings are too many for the exact test, so a Monte Carlo
    # one; PPO is far ahead, so its p is the floor 1 / 20,001, printed as a bound times Holm's factor.
    pend = next(r for r in recs if r.action == "continuous" and r.priority == "samples")
    assert pend.p_floor == pytest.approx(1 / 20_001) and pend.p_value == pend.p_floor
    row = analysis.recommendation_rows([pend])[0]
    assert row["p_text"].startswith("< ") and float(row["p_text"][2:]) == pytest.approx(pend.p_adjusted, rel=0.5)
    alone = analysis.recommend(scored(url), action="continuous", priority="samples", n_boot=100, track_record=False)
    # The family is every profile × priority of the store, whatever the call asks (issue 63, defect 1): a
    # narrowed question gets the very row of the full table, adjusted p included.
    full = [r for r in analysis.recommendation_rows(recs) if r["action"] == "continuous" and r["priority"] == "samples"]
    assert alone[0].p_adjusted == pend.p_adjusted and analysis.recommendation_rows(alone) == full


def test_the_same_computation_under_two_names_counts_once(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, THREE, [PPO_IMPLS[0], Planted("reinforce-bench", "reinforce", "bench", 0.5, tau=0.3),
                             Planted("ac_mc-bench", "ac_mc", "bench", 0.5, tau=0.3)], seeds=5)
    s = scored(url)
    # ac_mc is REINFORCE with its default value baseline: the same runs give the same returns. Plant that.
    r = s.runs
    cols = ["final_return", "final_norm", "auc_steps_norm", "auc_time_norm"]
    twin = r[r["algo"] == "reinforce"].set_index(["env", "seed"])[cols]
    mask = r["algo"] == "ac_mc"
    r.loc[mask, cols] = twin.loc[list(zip(r.loc[mask, "env"], r.loc[mask, "seed"]))].to_numpy()
    s._cells.clear()
    (rec,) = analysis.recommend(s, action="discrete", obs="vector", reward="dense", priority="samples", n_boot=100,
                                track_record=False)
    assert "reinforce is the same computation as ac_mc (identical returns on every env and seed): counted once" in \
        rec.pooling
    assert set(rec.runs) == {"ac_mc", "ppo"} and (rec.algorithm, rec.runner_up) == ("ppo", "ac_mc")


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
            x = crit.estimate(before.tasks(lb, crit.column, DENSE), n_boot=200)
            y = crit.estimate(after.tasks(lb, crit.column, DENSE), n_boot=200)
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
# Time by design: one machine per env, quiet cores only
# --------------------------------------------------------------------------- #
def test_one_machine_takes_the_machine_both_share_most_and_leaves_out_contended_and_unknown_runs():
    from bench.analysis.machines import one_machine

    cols = ["env", "machine", "contended", "v"]
    x = pd.DataFrame([("E", "A", False, 1.0), ("E", "A", False, 2.0), ("E", "B", False, 3.0), ("E", "B", False, 4.0),
                      ("E", "B", False, 5.0), ("E", None, False, 6.0), ("F", "A", True, 7.0), ("F", "A", False, 8.0)],
                     columns=cols)
    y = pd.DataFrame([("E", "A", False, 10.0), ("E", "A", False, 11.0), ("E", "B", False, 12.0),
                      ("E", "B", True, 13.0), ("E", None, False, 14.0), ("F", "C", False, 15.0)], columns=cols)
    xt, yt, used = one_machine(x, y, "v", ["E", "F"])
    # E: A holds 2 v 2 quiet runs, B 3 v 1 (y's other B run shared its core): A. The probe-less runs match nothing.
    assert used == ["A", None]
    np.testing.assert_array_equal(xt[0], [1.0, 2.0])
    np.testing.assert_array_equal(yt[0], [10.0, 11.0])
    assert xt[1].size == yt[1].size == 0  # F: no machine in common


def test_one_machine_classes_the_two_sides_runs_alone_so_other_labels_cannot_merge_their_machines():
    from bench.analysis.machines import one_machine

    cols = ["env", "machine", "contended", "hw_key", "probe_ms", "v"]
    # Store-wide classes: a third label's runs at 11.2 ms chained 10.0 and 12.5 (each gap < 2 ** 0.25, the
    # whole < 2 ** 0.5) into one class, so every run below carries the same store-wide label.
    merged = "CPU A (probe ≈11.2 ms)"
    x = pd.DataFrame([("E", merged, False, "CPU A", 10.0, v) for v in (1.0, 2.0, 3.0)], columns=cols)
    y = pd.DataFrame([("E", merged, False, "CPU A", p, v) for p, v in ((10.0, 10.0), (10.1, 11.0), (12.5, 20.0),
                                                                       (12.6, 21.0), (12.5, 22.0))], columns=cols)
    xt, yt, used = one_machine(x, y, "v", ["E"])
    # From these runs alone, 10.0-10.1 and 12.5-12.6 are two machines: 3 v 2 runs on the first, 0 v 3 on the other.
    np.testing.assert_array_equal(xt[0], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(yt[0], [10.0, 11.0])
    assert used == ["CPU A (probe ≈10 ms)"]
    # Frames without the probe columns keep their given machine labels: one machine, all five of y's runs.
    assert one_machine(x.drop(columns=["hw_key", "probe_ms"]), y.drop(columns=["hw_key", "probe_ms"]), "v",
                       ["E"])[1][0].size == 5


def _time_race(tmp_path: Path, ratio: float, ppo_cpu: str, envs: list[str] = THREE) -> analysis.Recommendation:
    """PPO and A2C learn alike per step; A2C takes ``ratio`` times PPO's CPU seconds per step. A2C ran on
    "CPU A", PPO on ``ppo_cpu``."""
    url = f"sqlite:///{tmp_path / f'{ratio}-{ppo_cpu}.db'}"
    ppo = Planted("ppo-bench", "ppo", "bench", skill=0.9, tau=0.2, noise=0.02, cpu_model=ppo_cpu)
    a2c = Planted("a2c-bench", "a2c", "bench", skill=0.9, tau=0.2, noise=0.02, sec_per_kstep=0.5 * ratio,
                  cpu_model="CPU A")
    write_store(url, envs, [ppo, a2c], seeds=5)
    return one(url, "time")


def test_a_time_answer_needs_both_sides_on_one_machine(tmp_path):
    rec = _time_race(tmp_path, 1.5, "CPU A")
    assert rec.verdict == "recommended" and rec.algorithm == "ppo", rec.message
    # The same runs, PPO's on another machine: no env has both on one machine, so no time verdict at all.
    rec = _time_race(tmp_path, 1.5, "CPU B")
    assert rec.verdict == "insufficient evidence" and rec.p_value is None and rec.tested_envs == [], rec.message
    assert "share no known machine" in rec.message


def test_contended_and_probe_less_runs_stay_out_of_time_verdicts(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    ppo = Planted("ppo-bench", "ppo", "bench", skill=0.9, tau=0.2, noise=0.02)
    a2c = Planted("a2c-bench", "a2c", "bench", skill=0.9, tau=0.2, noise=0.02, sec_per_kstep=1.0, wall_per_cpu=2.0)
    write_store(url, THREE, [ppo, a2c], seeds=5)
    rec = one(url, "time")
    assert rec.verdict == "insufficient evidence" and rec.p_value is None, rec.message
    s = scored(url)
    assert "15 of 30 runs contended (wall > 1.25 × CPU), left out of time comparisons" in analysis.hardware_line(s)
    url2 = f"sqlite:///{tmp_path / 'old.db'}"
    write_store(url2, THREE, [Planted("ppo-bench", "ppo", "bench", 0.9, probe_ms=None),
                              Planted("a2c-bench", "a2c", "bench", 0.9, sec_per_kstep=1.0)], seeds=5)
    rec = one(url2, "time")
    assert rec.verdict == "insufficient evidence", rec.message  # a run with no probe is an unknown machine
    assert "15 of 30 runs have no speed probe" in analysis.hardware_line(scored(url2))
    assert one(url2, "samples").verdict == "no difference"  # samples do not depend on the machine


def test_an_unrelated_label_on_two_machines_with_contended_runs_changes_no_answer_and_no_p(tmp_path):
    """Issue 40: a store-wide machine factor made one answer depend on unrelated labels. Here PPO is 1.6×
    faster per step than A2C; A2C's runs are on two machines. A label of another algorithm, far behind, is
    added on two machines 3× apart, with contended runs: every row, p-values included, stays the same."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    ppo = Planted("ppo-bench", "ppo", "bench", skill=0.9, tau=0.2, noise=0.02, cpu_model="CPU A")
    a2c = Planted("a2c-bench", "a2c", "bench", skill=0.8, tau=0.3, noise=0.02, sec_per_kstep=0.8,
                  cpu_models=("CPU A", "CPU A", "CPU A", "CPU B"))
    write_store(url, THREE + ["MountainCar-v0"], [ppo, a2c], seeds=8, suite="base")

    def rows() -> list[dict]:
        keys = ("verdict", "answer", "algorithm", "runner_up", "p_value", "p_adjusted", "p_text", "test",
                "tested_envs", "effects", "directions", "track_record", "impl", "message")
        return [{k: r[k] for k in keys} for r in analysis.recommendation_rows(
            analysis.recommend(scored(url), obs="vector", n_boot=100))]

    before = rows()
    assert any(r["verdict"] == "recommended" for r in before)
    far = Planted("far-behind", "trpo", "bench", skill=0.2, tau=0.5, sec_per_kstep=2.0, wall_per_cpu=3.0,
                  cpu_models=("CPU A", "CPU B"), cpu_speed=(("CPU B", 3.0),))
    write_store(url, THREE + ["MountainCar-v0"], [far], seeds=8, suite="unrelated")
    assert rows() == before


def test_machines_are_told_apart_by_their_speed_probe_as_well_as_their_name():
    hw = analysis.hardware_of
    base = {"cpu_model": "Xeon", "torch_threads": 1, "blas_threads": 1}
    assert hw(base) == "Xeon · 1 torch thread(s) · 1 BLAS thread(s)"  # no probe recorded: as before
    one = hw({**base, "cpu_probe_ms": {"start": 21.4, "end": 22.5}})
    assert one == hw({**base, "cpu_probe_ms": {"start": 22.0, "end": 21.7}}) == \
        "Xeon (probe ≈22.6 ms) · 1 torch thread(s) · 1 BLAS thread(s)"  # 2 ** 4.5: the class of 21.4 ms
    assert hw({**base, "cpu_probe_ms": {"start": 44.0, "end": 45.0}}) != one  # twice as slow: another machine
    assert analysis.probe_class_ms({"cpu_probe_ms": {"start": None, "end": 0}}) is None


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


def test_a_hardware_line_does_not_move_when_another_env_s_runs_are_read_beside_it():
    """A profile row's hardware line names its own runs' machines. Read with another env's runs on the same
    machine, the store-wide class of that machine moves (its median probe, 23.1 → 22.9 ms here); the line of
    the row, and the report's warnings of each env, must not."""
    from types import SimpleNamespace

    def runs(probes: dict[str, list[float]]) -> SimpleNamespace:
        metas = [{"cpu_model": "Xeon", "torch_threads": 1, "cpu_probe_ms": {"start": ms, "end": ms + 3}}
                 for env, vals in probes.items() for ms in vals]
        for m, c in zip(metas, analysis.probe_classes(metas)):  # as reading a store stamps every run
            m[analysis.PROBE_CLASS_KEY] = c
        env = [env for env, vals in probes.items() for _ in vals]
        frame = pd.DataFrame({"env": env, "meta": metas, "contended": False, "machine": "Xeon",
                              "cpu_estimated": False, "pooled": True})
        return SimpleNamespace(runs=frame)

    row = {"A": [23.0, 23.1, 23.2], "B": [23.0, 46.0]}
    alone, beside = runs(row), runs({**row, "C": [22.5, 22.6, 22.7, 22.8]})
    assert analysis.hardware_of(alone.runs["meta"][0]) != analysis.hardware_of(beside.runs["meta"][0])
    line = analysis.hardware_line(alone, ["A", "B"])
    assert line == analysis.hardware_line(beside, ["A", "B"])
    assert "Xeon (probe ≈23.1 ms)" in line and "Xeon (probe ≈46 ms)" in line, line
    assert analysis.hardware_warnings(alone) == {k: v for k, v in analysis.hardware_warnings(beside).items()
                                                  if k != "C"} == {"B": [
        "Xeon (probe ≈23 ms) · 1 torch thread(s)", "Xeon (probe ≈46 ms) · 1 torch thread(s)"]}


def test_runs_recorded_before_per_episode_cpu_are_estimated_and_said_so(tmp_path):
    import sqlalchemy as sa

    from bench.storage import schema

    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE[:1], [PPO_IMPLS[0]], seeds=2)
    eng = sa.create_engine(url)
    with eng.begin() as c:
        c.execute(sa.update(schema.episodes).values(cpu_s=None))
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


def test_one_stray_run_at_a_larger_budget_sets_aside_only_itself(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, DENSE[:1], [PPO_IMPLS[0], A2C_IMPLS[0]], seeds=5, suite="main", timesteps=10_000)
    write_store(url, DENSE[:1], [Planted("stray", "ppo", "bench", 0.9)], seeds=1, suite="stray", timesteps=20_000)
    data = analysis.load(url, anchors=False)
    assert data.budgets == {"CartPole-v1": 10_000}  # the budget of 10 runs, not the stray run's larger one
    assert int(data.runs["pooled"].sum()) == 10
    (note,) = [n for n in data.notes if "set aside" in n]
    assert note.startswith("CartPole-v1: 1 done run(s) set aside, at budget 20,000: stray (1)")


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
    est = crit.estimate(tasks)
    assert est.point == pytest.approx(np.mean([stats.iqm(t) for t in tasks]))
    assert est.kind == "range"  # LunarLander has 3 runs: no bootstrap CI


# --------------------------------------------------------------------------- #
# The track record
# --------------------------------------------------------------------------- #


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
    write_store(url, THREE, PPO_IMPLS + A2C_IMPLS, seeds=5)
    return url


def test_recommend_table_fits_100_columns_and_answers_by_algorithm(clear, tmp_path):
    p = bench("recommend", "--store", clear, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(len(x) for x in lines) <= 100, "\n".join(x for x in lines if len(x) > 100)
    rows = [x for x in lines if x.startswith(" discrete ")]
    # The three parts name algorithms (issue 63): PPO can still be best, A2C (far behind on all 3 envs) is ruled
    # out, and the default is one of PPO's implementations with its regret.
    assert len(rows) == 2 and all(" ppo (bench, sb3) " in x and " a2c (" in x and " ppo-" in x for x in rows), p.stdout
    assert all(" 3 " in x for x in rows), p.stdout  # envs
    assert "insufficient evidence (no measured env)" in p.stdout and "Can still be best: not shown worse" in \
        " ".join(p.stdout.split())


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
        # The table is titled with its source (issue 43), then a blank line, then the Markdown table.
        assert lines[0] == f"bench recommend — {clear}" and lines[1] == ""
        assert lines[2].startswith("| problem | priority | can still be best | ruled out |") and lines[3].startswith("|---|")
        assert any("| ppo (bench, sb3) |" in x for x in lines)


def test_recommend_verbose_and_the_old_priority_name(clear, tmp_path):
    p = bench("recommend", "--store", clear, "--verbose", "--priority", "wall-clock", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "priority time\n  can still be best: ppo (bench, sb3)\n" in p.stdout and "track:             0/0" not in p.stdout
    assert "runner-up:         a2c:" in p.stdout and max(len(x) for x in p.stdout.splitlines()) <= 100


def test_a_filtered_table_prints_the_full_tables_rows_character_for_character(clear, tmp_path):
    """Issue 63: one answer however the question is asked. Each row of a filtered call is, line for line, the row of
    the unfiltered table (the family and the column widths do not depend on the filter)."""
    def rows(out: str) -> list[str]:
        lines = out.splitlines()
        start = next(i for i, x in enumerate(lines) if "────" in x) + 1
        end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
        blocks: list[list[str]] = []
        for ln in lines[start:end]:  # a row starts with its action; its folded cells continue on the lines below
            if re.match(r"^ +(continuous|discrete) ", ln) or not blocks:
                blocks.append([])
            blocks[-1].append(ln)
        return ["\n".join(b) for b in blocks]

    full = bench("recommend", "--store", clear, cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    for flags in (["--priority", "time"], ["--action", "discrete", "--obs", "vector", "--reward", "dense"]):
        part = bench("recommend", "--store", clear, *flags, cwd=tmp_path)
        assert part.returncode == 0, part.stderr
        got = rows(part.stdout)
        assert got and all(r in rows(full.stdout) for r in got), part.stdout


def test_no_leader_is_named_where_the_test_puts_the_runner_up_by_score_ahead():
    """Issue 63, defect 9: the best two are ranked by score, the test decides on the mean effect over envs; where
    they disagree, swapping the two named a leader that scored below its runner-up (0.74 against 0.82 on
    discrete · vector · dense / time). Neither is named then."""
    from bench.analysis import answers
    from bench.stats import aggregate as stats

    rec = answers.Recommendation("discrete", "vector", "dense", "time", "", algorithm="ppo", runner_up="trpo",
                                 best_score=stats.Interval(0.82, 0.7, 0.9), runner_up_score=stats.Interval(0.74, 0.6, 0.8),
                                 p_value=0.01, p_adjusted=0.01, test="t over envs", enough=True,
                                 tested_envs=["a", "b", "c"], effects=[-0.1, -0.2, 0.05])
    verdict, message = answers._verdict(rec, stat=-0.083)
    assert verdict == "no difference" and (rec.algorithm, rec.runner_up) == ("ppo", "trpo")
    assert rec.best_score.point > rec.runner_up_score.point and rec.effects == [-0.1, -0.2, 0.05]
    assert message.startswith("no leader: ppo scores higher, but trpo is ahead"), message
    # The same row with the test agreeing with the ranking names the leader.
    import dataclasses
    assert answers._verdict(dataclasses.replace(rec, test="permutation"), stat=0.083)[0] == "measured"
