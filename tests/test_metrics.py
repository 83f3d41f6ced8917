"""Tier 1: the per-run summary against hand-computed values."""

import numpy as np
import pytest

from bench.stats.metrics import first_crossing, summarize, trailing_mean


def test_trailing_mean_matches_plain_loop():
    rng = np.random.default_rng(0)
    r = rng.normal(size=57)
    for w in (1, 3, 10, 57):
        ref = [r[i : i + w].mean() for i in range(len(r) - w + 1)]
        np.testing.assert_allclose(trailing_mean(r, w), ref)
    assert trailing_mean(r, 58).size == 0
    with pytest.raises(ValueError, match="window must be >= 1"):
        trailing_mean(r, 0)


def test_first_crossing_needs_a_full_window():
    r = np.array([10.0, 0, 0, 9, 9, 9, 0])
    # Window 3: means are 3.33, 3, 6, 9, 6 -> first >= 9 ends at episode index 5.
    assert first_crossing(r, 9.0, 3) == 5
    # A lone early 10 cannot count with window 3, but does with window 1.
    assert first_crossing(r, 10.0, 3) is None
    assert first_crossing(r, 10.0, 1) == 0


def test_summarize_hand_computed():
    steps = np.array([100, 250, 400, 600, 800])
    wall = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    rets = np.array([1.0, 2.0, 5.0, 7.0, 9.0])
    s = summarize(steps, wall, rets, threshold=6.0, window=2)
    # Trailing means: 1.5, 3.5, 6.0, 8.0 -> first >= 6 at episode index 3 (step 600, 4 s).
    assert s.steps_to_threshold == 600
    assert s.seconds_to_threshold == 4.0
    assert s.final_return == pytest.approx(8.0)
    assert s.auc == pytest.approx(24.0 / 5)
    assert s.episodes == 5


def test_summarize_censored_and_empty():
    s = summarize(np.array([10, 20]), np.array([0.1, 0.2]), np.array([1.0, 2.0]), threshold=100.0, window=2)
    assert s.steps_to_threshold is None and s.seconds_to_threshold is None
    assert s.final_return == pytest.approx(1.5)  # censored runs still report their returns
    none = summarize(np.array([]), np.array([]), np.array([]), threshold=1.0, window=5)
    assert none.episodes == 0 and none.final_return is None and none.auc is None
    # Fewer episodes than the window: final return is the mean of all of them.
    few = summarize(np.array([1]), np.array([0.1]), np.array([3.0]), threshold=None, window=5)
    assert few.final_return == 3.0 and few.steps_to_threshold is None


def test_summarize_rejects_ragged_input():
    with pytest.raises(ValueError, match="equal length"):
        summarize(np.array([1, 2]), np.array([0.1]), np.array([1.0, 2.0]), threshold=None, window=1)
