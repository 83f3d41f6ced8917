"""bench.stats.distributions against scipy.stats: the same special functions, so the same values to the bit."""

import numpy as np
from scipy import stats as st

from bench.stats import distributions as dist


def test_same_values_as_scipy_stats():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 4, 300), [0.0, -np.inf, np.inf, 1e-9, 40.0]])
    q = np.concatenate([rng.random(300), [0.0, 1.0, 0.5, 0.025, 0.975]])
    for df in (1, 2, 3.5, 4, 9, 29, 200):
        assert np.array_equal(dist.t_cdf(x, df), st.t.cdf(x, df))
        assert np.array_equal(dist.t_sf(x, df), st.t.sf(x, df))
        assert np.array_equal(dist.t_ppf(q, df), st.t.ppf(q, df))
        assert np.array_equal(dist.chi2_sf(np.abs(x), df), st.chi2.sf(np.abs(x), df))
        assert dist.t_sf(2.0, df) == st.t.sf(2.0, df)  # scalars too
    assert np.array_equal(dist.norm_ppf(q), st.norm.ppf(q))


def test_hand_values():
    # Textbook table values: t(0.975; 4) = 2.776, the normal's 1.960, and P(chi2_1 > 3.841) = 0.05.
    assert round(float(dist.t_ppf(0.975, 4)), 3) == 2.776
    assert round(float(dist.norm_ppf(0.975)), 3) == 1.960
    assert abs(float(dist.chi2_sf(3.841459, 1)) - 0.05) < 1e-6
    assert dist.t_sf(0.0, 7) == 0.5
