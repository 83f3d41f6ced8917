"""bench.analysis.stats against values computed by hand, and bootstrap coverage on data with a known mean."""

from __future__ import annotations

import numpy as np
import pytest

from bench.analysis import stats


# --------------------------------------------------------------------------- #
# Point statistics
# --------------------------------------------------------------------------- #
def test_iqm_is_the_mean_of_the_middle_half():
    # sorted: -50 1 2 3 4 5 6 100 → cut 2 each end → mean(2, 3, 4, 5) = 3.5; the outliers do not matter
    assert stats.iqm(np.array([5, 1, 100, 2, 3, 4, -50, 6])) == pytest.approx(3.5)
    # n = 5: floor(5/4) = 1 cut each end → mean(2, 3, 4) = 3
    assert stats.iqm(np.array([1, 2, 3, 4, 1000])) == pytest.approx(3.0)
    # n < 4: nothing is cut
    assert stats.iqm(np.array([1.0, 2.0, 6.0])) == pytest.approx(3.0)


def test_iqm_along_an_axis_keeps_the_other_axes():
    x = np.array([[1, 2, 3, 4, 5, 6, 7, 8], [8, 7, 6, 5, 4, 3, 2, 100]], dtype=float)
    # row 0: mean(3,4,5,6) = 4.5; row 1 sorted 2..8,100 → mean(4,5,6,7) = 5.5
    np.testing.assert_allclose(stats.iqm(x), [4.5, 5.5])
    np.testing.assert_allclose(stats.iqm(x.T, axis=0), [4.5, 5.5])


def test_aggregate_iqm_pools_the_runs_of_every_task():
    # pooled: 1..8 → 4.5, whichever task each value came from (rliable's IQM of a score matrix)
    assert stats.aggregate_iqm([np.array([1.0, 8.0, 2.0]), np.array([7.0, 3.0, 6.0, 4.0, 5.0])]) == pytest.approx(4.5)
    m = np.arange(1, 9, dtype=float).reshape(4, 2)  # (n_runs=4, n_tasks=2)
    assert stats.stratified_bootstrap_ci(m, n_boot=10).point == pytest.approx(4.5)


def test_cvar_and_iqr_by_hand():
    x = np.arange(1, 9, dtype=float)
    assert stats.cvar_lower(x, 0.25) == pytest.approx(1.5)  # worst 2 of 8
    assert stats.cvar_lower(x, 0.1) == pytest.approx(1.0)  # ceil(0.8) = 1
    assert stats.cvar_lower(np.array([3.0]), 0.25) == pytest.approx(3.0)
    assert stats.iqr(np.array([1, 2, 3, 4, 5.0])) == pytest.approx(2.0)  # q75 = 4, q25 = 2
    assert stats.aggregate_cvar([x, x + 10], 0.25) == pytest.approx((1.5 + 11.5) / 2)


def test_normalise_and_its_anchors():
    np.testing.assert_allclose(stats.normalise(np.array([20.0, 247.5, 475.0]), 20.0, 475.0), [0.0, 0.5, 1.0])
    np.testing.assert_allclose(stats.normalise(np.array([-1200.0, -200.0]), -1200.0, -200.0), [0.0, 1.0])
    with pytest.raises(ValueError, match="anchors"):
        stats.normalise(np.array([1.0]), 5.0, 5.0)


def test_wilson_interval_known_values():
    w = stats.wilson_interval(0, 10)
    assert w.point == 0.0 and w.lo == pytest.approx(0.0, abs=1e-12)
    assert w.hi == pytest.approx(0.2775, abs=1e-4)  # the textbook 0/10 Wilson bound
    w = stats.wilson_interval(5, 10)
    assert (w.lo, w.hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))


# --------------------------------------------------------------------------- #
# Probability of improvement
# --------------------------------------------------------------------------- #
def test_probability_of_improvement_by_hand():
    # x=[1,3] vs y=[2,2]: pairs 1>2 no, 1>2 no, 3>2 yes, 3>2 yes → 2/4
    assert stats.probability_of_improvement([np.array([1.0, 3.0])], [np.array([2.0, 2.0])], n_boot=10).point == 0.5
    # ties count one half: x=[2,3] vs y=[2,1]: (2,2)=½, (2,1)=1, (3,2)=1, (3,1)=1 → 3.5/4
    assert stats.probability_of_improvement([np.array([2.0, 3.0])], [np.array([2.0, 1.0])], n_boot=10).point == 0.875
    # averaged over tasks: (0.5 + 0.875) / 2; tasks may have different run counts
    p = stats.probability_of_improvement([np.array([1.0, 3.0]), np.array([2.0, 3.0])],
                                         [np.array([2.0, 2.0]), np.array([2.0, 1.0])], n_boot=10)
    assert p.point == pytest.approx(0.6875)


def test_probability_of_improvement_interval_and_symmetry():
    rng = np.random.default_rng(1)
    x, y = rng.normal(1.0, 1.0, (10, 3)), rng.normal(0.0, 1.0, (10, 3))
    pxy = stats.probability_of_improvement(x, y, n_boot=500)
    pyx = stats.probability_of_improvement(y, x, n_boot=500)
    assert pxy.point + pyx.point == pytest.approx(1.0)  # continuous data: no ties
    assert pxy.lo <= pxy.point <= pxy.hi and pxy.lo > 0.5  # a shift of one sd over 30 runs is clear
    same = stats.probability_of_improvement(x, x, n_boot=500)
    assert same.point == 0.5 and same.lo < 0.5 < same.hi
    with pytest.raises(ValueError, match="same tasks"):
        stats.probability_of_improvement([np.ones(2)], [np.ones(2), np.ones(2)])


# --------------------------------------------------------------------------- #
# Kaplan-Meier with censoring
# --------------------------------------------------------------------------- #
def test_kaplan_meier_by_hand():
    # times 1..4, the run at 2 never solved (censored at its end, 2).
    # t=1: 4 at risk, 1 solved → S = 3/4.  t=2: censored, S unchanged.
    # t=3: 2 at risk, 1 solved → S = 3/4 · 1/2 = 3/8.  t=4: 1 at risk, 1 solved → S = 0.
    t, f = stats.kaplan_meier(np.array([1, 2, 3, 4]), np.array([True, False, True, True]))
    np.testing.assert_allclose(t, [1, 2, 3, 4])
    np.testing.assert_allclose(f, [0.25, 0.25, 0.625, 1.0])
    # on a grid: 0 before the first solve, right-continuous steps
    _, g = stats.kaplan_meier(np.array([1, 2, 3, 4]), np.array([True, False, True, True]), grid=np.array([0, 0.5, 1, 2.9, 3, 10]))
    np.testing.assert_allclose(g, [0, 0, 0.25, 0.25, 0.625, 1.0])


def test_kaplan_meier_keeps_censored_runs_instead_of_dropping_them():
    # 2 of 4 runs solved (at 10 and 20); 2 ran to 100 without solving.
    times, solved = np.array([10, 20, 100, 100]), np.array([True, True, False, False])
    _, f = stats.kaplan_meier(times, solved, grid=np.array([5, 15, 50, 100]))
    np.testing.assert_allclose(f, [0, 0.25, 0.5, 0.5])  # dropping the unsolved runs would say 1.0
    _, none = stats.kaplan_meier(np.array([5, 7]), np.array([False, False]), grid=np.array([1, 10]))
    np.testing.assert_allclose(none, [0, 0])
    # censored at the same time as a solve: still at risk there (2 at risk at t=5, 1 solved → ½)
    _, tie = stats.kaplan_meier(np.array([5, 5]), np.array([True, False]), grid=np.array([5]))
    np.testing.assert_allclose(tie, [0.5])


def test_kaplan_meier_band_brackets_the_estimate():
    times = np.array([10, 20, 30, 40, 100, 100, 100, 100], dtype=float)
    solved = np.array([True] * 4 + [False] * 4)
    grid = np.linspace(0, 100, 11)
    f, lo, hi = stats.kaplan_meier_band(times, solved, grid, n_boot=400)
    assert np.all(lo <= f + 1e-12) and np.all(f <= hi + 1e-12)
    assert f[-1] == pytest.approx(0.5) and lo[-1] < 0.5 < hi[-1]
    assert lo[0] == hi[0] == 0.0  # nothing can be solved at step 0


# --------------------------------------------------------------------------- #
# Bootstrap intervals and performance profiles
# --------------------------------------------------------------------------- #
def test_bootstrap_is_seedable_and_stratified():
    tasks = [np.array([0.0, 1.0, 2.0]), np.array([100.0, 101.0])]
    a = stats.stratified_bootstrap_ci(tasks, stats.aggregate_mean, n_boot=300, rng=7)
    b = stats.stratified_bootstrap_ci(tasks, stats.aggregate_mean, n_boot=300, rng=np.random.default_rng(7))
    assert a == b
    reps = stats.stratified_resample(tasks, 50, rng=0)
    assert reps[0].shape == (50, 3) and reps[1].shape == (50, 2)
    assert set(np.unique(reps[0])) <= {0.0, 1.0, 2.0} and set(np.unique(reps[1])) <= {100.0, 101.0}  # never across tasks


@pytest.mark.parametrize("which", ["iqm, one task", "mean over tasks, stratified"])
def test_bootstrap_coverage_on_data_with_a_known_mean(which):
    """The 95% interval should contain the true value in roughly 95% of repeated experiments.

    The percentile bootstrap undercovers a little with few runs, so the band is
    [0.88, 0.99] over 200 repetitions (binomial sd of the coverage ≈ 0.015).
    """
    rng = np.random.default_rng(2024)
    hits = 0
    reps = 200
    for _ in range(reps):
        if which == "iqm, one task":
            # The IQM of a symmetric distribution is its centre: 3.0.
            x = rng.normal(3.0, 2.0, 30)
            ci = stats.bootstrap_ci(x, stats.iqm, n_boot=1000, rng=rng)
            truth = 3.0
        else:
            means = np.array([0.0, 5.0, -2.0])
            tasks = [rng.normal(m, 1.0, 12) for m in means]
            ci = stats.stratified_bootstrap_ci(tasks, stats.aggregate_mean, n_boot=1000, rng=rng)
            truth = means.mean()
        hits += ci.lo <= truth <= ci.hi
    assert 0.88 <= hits / reps <= 0.99, f"coverage {hits / reps:.3f}"


def test_performance_profile_by_hand():
    # task 0: [0.2, 0.6, 1.0], task 1: [0.5]; τ = 0.4 → (2/3 + 1) / 2; τ = 0.8 → (1/3 + 0) / 2
    prof, lo, hi = stats.performance_profile([np.array([0.2, 0.6, 1.0]), np.array([0.5])], np.array([0.4, 0.8]), n_boot=200)
    np.testing.assert_allclose(prof, [(2 / 3 + 1) / 2, (1 / 3) / 2])
    assert np.all(lo <= prof) and np.all(prof <= hi)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="no runs"):
        stats.as_tasks([np.array([])])
    with pytest.raises(ValueError, match="non-finite"):
        stats.as_tasks([np.array([1.0, np.nan])])
    with pytest.raises(ValueError, match="n_runs, n_tasks"):
        stats.as_tasks(np.ones(3))
    assert stats.intervals_overlap((0, 1), (1, 2)) and not stats.intervals_overlap((0, 1), (1.01, 2))
