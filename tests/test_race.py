"""The race's decision function (bench.analysis.race) on tiny arrays checked by hand.

The replay on the shipped reference is scripts/race_replay.py (docs/race.md); here only the pure functions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.analysis import race as rc
from bench.stats.metrics import normalised_auc

LEADER = np.array([1.0, 1.1, 0.9, 1.0])


def test_welch_below_matches_the_closed_form_of_student_t_on_two_degrees_of_freedom():
    # x = [0, 1], leader = [2, 3]: variances 1/2 each, se = sqrt(1/4 + 1/4), t = -2 / se = -2 sqrt 2, and the
    # Welch-Satterthwaite df = (1/2)^2 / (2 (1/4)^2) = 2, where the t CDF is 1/2 + t / (2 sqrt(2 + t^2)):
    # p = 1/2 - 2 sqrt 2 / (2 sqrt 10) = 1/2 - 1/sqrt 5.
    assert rc.welch_below(np.array([0.0, 1.0]), np.array([2.0, 3.0])) == pytest.approx(0.5 - 1 / math.sqrt(5))
    # The other direction is the other tail.
    assert rc.welch_below(np.array([2.0, 3.0]), np.array([0.0, 1.0])) == pytest.approx(0.5 + 1 / math.sqrt(5))


def test_welch_below_without_spread_or_with_one_seed():
    assert rc.welch_below(np.zeros(3), np.ones(3)) == 0.0  # every seed lower, no spread: the difference is exact
    assert rc.welch_below(np.ones(3), np.ones(3)) == 1.0  # equal (every seed capped at 1, say): never ruled out
    assert rc.welch_below(np.array([0.0]), np.ones(5)) == 1.0  # one seed: no spread to test with
    assert rc.welch_below(np.array([0.0, np.nan]), np.ones(5)) == 1.0  # NaN (no episode yet) is no seed


def test_race_step_stops_a_label_ruled_out_against_the_leader_and_keeps_the_rest():
    scores = {"b": np.array([0.0, 0.1, -0.1, 0.0]), "a": LEADER, "c": np.array([0.9, 1.2, 0.8, 1.1])}
    step = rc.race_step(scores, alpha=0.05)
    assert step.leader == "a"
    assert step.kept == ("a", "c")
    (stop,) = step.stopped
    assert stop.label == "b"
    # Holm over the two labels tested: the smaller raw p is doubled.
    assert stop.p_adjusted == pytest.approx(2 * stop.p)
    assert stop.p == pytest.approx(rc.welch_below(scores["b"], LEADER))


def test_race_step_never_stops_a_label_for_ranking_low_only():
    # Far below the leader on average, but its two seeds spread so widely that the test cannot rule it out.
    step = rc.race_step({"a": LEADER, "d": np.array([-5.0, 5.0])}, alpha=0.2)
    assert step.kept == ("a", "d") and not step.stopped


def test_race_step_adjusts_over_labels_with_holm():
    # Two labels each at raw p = 1/2 - 3 sqrt 2 / (2 sqrt 20) = 1/2 - 3 / (2 sqrt 10) = 0.0257 against the leader
    # (t = -3 sqrt 2 on 2 df, as above): each alone is below 0.05, but Holm doubles the smaller (0.051), so both stay.
    raw = 0.5 - 3 / (2 * math.sqrt(10))
    scores = {"a": np.array([3.0, 4.0]), "x": np.array([0.0, 1.0]), "y": np.array([0.0, 1.0])}
    assert rc.welch_below(scores["x"], scores["a"]) == pytest.approx(raw)
    step = rc.race_step(scores, alpha=0.05)
    assert not step.stopped and step.kept == ("a", "x", "y")
    assert [s.label for s in rc.race_step(scores, alpha=0.06).stopped] == ["x", "y"]


def test_race_step_with_a_margin_asks_for_a_label_to_be_that_far_behind():
    behind = LEADER - 0.5  # the leader's spread, half a point lower: ruled out at once without a margin
    assert rc.race_step({"a": LEADER, "b": behind}, alpha=0.05).kept == ("a",)
    # With a margin of 0.6 the test is of b + 0.6 (mean 1.1) below the leader's 1.0: it is not, so b stays.
    assert rc.race_step({"a": LEADER, "b": behind}, alpha=0.05, margin=0.6).kept == ("a", "b")
    r = rc.race({"a": np.stack([LEADER, LEADER]), "b": np.stack([behind, behind])}, (0.05, 0.05), margins=(0.6, 0.0))
    assert r.reached == {"a": 1, "b": 1} and r.kept == ("a",)


def test_rung_alphas_share_alpha_over_the_rungs():
    assert rc.rung_alphas(0.05, 3, "none") == (0.05, 0.05, 0.05)
    assert rc.rung_alphas(0.06, 3, "equal") == pytest.approx((0.02, 0.02, 0.02))
    assert rc.rung_alphas(0.08, 3, "last-half") == pytest.approx((0.02, 0.02, 0.04))
    assert sum(rc.rung_alphas(0.2, 5, "last-half")) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="spending must be one of"):
        rc.rung_alphas(0.05, 3, "pocock")


def _rungs(*rows: list[float]) -> np.ndarray:
    return np.array(rows, dtype=float)


def test_race_runs_labels_rung_by_rung_and_picks_by_iqm_at_the_last_rung():
    scores = {
        "a": _rungs([1.0, 1.1, 0.9, 1.0], [1.0, 1.1, 0.9, 1.0], [0.5, 0.6, 0.4, 0.5]),
        "b": _rungs([0.0, 0.1, -0.1, 0.0], [9.0, 9.0, 9.0, 9.0], [9.0, 9.0, 9.0, 9.0]),  # out at rung 0
        "c": _rungs([0.9, 1.2, 0.8, 1.1], [0.9, 1.2, 0.8, 1.1], [0.6, 0.5, 0.55, 0.6]),
    }
    r = rc.race(scores, (0.05, 0.05, 0.05))
    assert r.reached == {"a": 2, "b": 0, "c": 2}
    assert r.seeds == {"a": (4, 4, 4), "b": (4,), "c": (4, 4, 4)}
    assert r.kept == ("c", "a")  # the last rung's leader first; a is not ruled out
    assert r.pick == "c"  # IQM 0.575 against a's 0.5
    cpu = {k: np.tile([[1.0], [3.0], [9.0]], (1, 4)) for k in scores}
    assert rc.spent(r, cpu) == 4 * 1.0 + 2 * 4 * 9.0


def test_race_with_fewer_seeds_before_the_last_rung():
    scores = {"a": _rungs([1.0, 1.5, 0.0, 0.0], [1.0, 0.9, 1.0, 1.1]),
              "b": _rungs([0.0, 0.5, 9.0, 9.0], [0.0, 0.1, 0.0, 0.1])}
    # Two seeds first (the later two, which would make b the leader, are not run yet): b's are below a's, but two
    # seeds a side cannot rule it out at 0.05 (p = 1/2 - 1/sqrt 5 = 0.053, the first test's case); at the last rung
    # all four seeds run and b is out.
    r = rc.race(scores, (0.05, 0.05), first_seeds=2)
    assert r.seeds == {"a": (2, 4), "b": (2, 4)}
    assert r.steps[0].kept == ("a", "b") and r.kept == ("a",)
    cpu = {k: np.array([[1.0] * 4, [3.0] * 4]) for k in scores}
    assert rc.spent(r, cpu) == 2 * 4 * 3.0


def test_race_until_one_ends_where_one_label_is_left():
    scores = {"a": _rungs([1.0, 1.1, 0.9, 1.0], [0.0] * 4, [0.0] * 4),
              "b": _rungs([0.0, 0.1, -0.1, 0.0], [5.0] * 4, [5.0] * 4)}
    r = rc.race(scores, (0.05,) * 3, until_one=True)
    assert len(r.steps) == 1 and r.pick == "a" and r.reached == {"a": 0, "b": 0}
    # Run on, the later rungs see b's late lead (it was out already) and a is the pick all the same.
    assert rc.race(scores, (0.05,) * 3).reached == {"a": 2, "b": 0}


def test_race_rejects_scores_of_the_wrong_shape():
    with pytest.raises(ValueError, match="n_rungs=2"):
        rc.race({"a": np.zeros((3, 4))}, (0.05, 0.05))


# Four episodes ending at steps 10..40 of a 40-step budget, returns 0, 1, 1, 1, window 1, anchors 0 and 1.
STEPS, RETURNS = np.array([10.0, 20.0, 30.0, 40.0]), np.array([0.0, 1.0, 1.0, 1.0])


def test_prefix_scores_by_hand():
    kw = dict(budget=40, low=0.0, high=1.0)
    last = rc.prefix_scores(STEPS, RETURNS, 1, fractions=(0.2, 0.25, 0.5, 1.0), kind="last", **kw)
    np.testing.assert_allclose(last, [np.nan, 0.0, 1.0, 1.0])  # no episode by step 8
    # held at 1/2: the curve is 0 to step 10, rises linearly to 1 at step 20 and is held there to step 40. On the
    # 100-point grid 0.4, 0.8, ..., 40: 25 zeros, sum over i = 26..50 of (0.4 i - 10) / 10 = 13, and 50 ones.
    held = rc.prefix_scores(STEPS, RETURNS, 1, fractions=(0.25, 0.5, 1.0), kind="held", **kw)
    np.testing.assert_allclose(held, [0.0, 0.63, 0.63])
    # so far at 1/2: the grid 0.2, ..., 20: 50 zeros and sum over i = 51..100 of (0.2 i - 10) / 10 = 25.5.
    so_far = rc.prefix_scores(STEPS, RETURNS, 1, fractions=(0.5, 1.0), kind="so_far", **kw)
    np.testing.assert_allclose(so_far, [0.255, 0.63])
    # At the full budget both are the run's sample score.
    assert held[-1] == pytest.approx(normalised_auc(STEPS, RETURNS, 1, upto=40, low=0.0, high=1.0))
    with pytest.raises(ValueError, match="kind must be one of"):
        rc.prefix_scores(STEPS, RETURNS, 1, fractions=(1.0,), kind="final", **kw)


def test_prefix_cpu_interpolates_the_stamps_and_ends_at_the_run_s_cpu():
    cpu = rc.prefix_cpu(STEPS, np.array([1.0, 2.0, 3.0, 4.0]), 5.0, budget=40, fractions=(0.125, 0.5, 0.75, 1.0))
    np.testing.assert_allclose(cpu, [0.5, 2.0, 3.0, 5.0])


@pytest.mark.heavy
def test_docs_race_tables_are_what_the_replay_prints():
    """docs/race.md's tables are scripts/race_replay.py's output on the shipped reference (about 30 s of CPU)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "scripts/race_replay.py"], capture_output=True, text=True, cwd=root,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    doc = (root / "docs" / "race.md").read_text().splitlines()
    rows = [line for line in p.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) > 30
    missing = [r for r in rows if r not in doc]
    assert not missing, missing
