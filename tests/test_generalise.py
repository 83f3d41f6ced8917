"""The profile rule generalises over envs (issue 40): HKSJ, Holm, and the simulation that sizes the rule.

- the random-effects estimate matches the DerSimonian–Laird / HKSJ formulas on a hand-checkable case;
- Holm's adjusted p-values on a textbook case;
- the simulation: under an env × algorithm interaction with zero mean difference the random-effects
  rule names a winner at most 5% of the time at the env counts the reference has, where the fixed-env
  rule (a stratified test over the envs) names one far more often; and its power at the reference's
  effect sizes is reported (the full grid: scripts/simulate_generalise.py, `nox -s simulate`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from bench.stats import generalise, simulation
from bench.stats.generalise import (MIN_ENVS_GENERALISE, directions, env_effects, equal_weights, format_p, hksj,
                                   holm)


def test_env_effects_are_mean_differences_with_welch_standard_errors():
    x = [np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.5])]
    y = [np.array([0.0, 0.0, 3.0]), np.array([0.5, 0.5])]
    d, se = env_effects(x, y)
    np.testing.assert_allclose(d, [1.0, 0.0])
    assert se[0] == pytest.approx(math.sqrt(1.0 / 3 + 3.0 / 3))  # sample variances 1 and 3, 3 runs each
    assert se[1] == generalise.SE_FLOOR  # no spread at all: the floor, not an infinite weight


def test_hksj_by_hand():
    y = np.array([0.3, -0.1, 0.2])
    s = np.array([0.1, 0.1, 0.2])
    w = 1 / s**2  # 100, 100, 25
    fixed = (w * y).sum() / w.sum()
    q = (w * (y - fixed) ** 2).sum()
    tau2 = (q - 2) / (w.sum() - (w**2).sum() / w.sum())
    assert tau2 > 0
    wr = 1 / (s**2 + tau2)
    mu = (wr * y).sum() / wr.sum()
    se = math.sqrt(max(1.0, (wr * (y - mu) ** 2).sum() / 2) / wr.sum())
    m = hksj(y, s)
    assert (m.mu, m.tau, m.k) == (pytest.approx(mu), pytest.approx(math.sqrt(tau2)), 3)
    assert m.se == pytest.approx(se)
    assert m.p == pytest.approx(2 * st.t.sf(abs(mu / se), 2))
    assert m.hi - m.mu == pytest.approx(st.t.ppf(0.975, 2) * se)
    # Effects that agree closely (q < k − 1): τ = 0 and the HKSJ scale would fall below 1; the DL
    # standard error is the floor.
    m = hksj(np.array([0.1, 0.1001, 0.0999]), np.array([0.05, 0.05, 0.05]))
    assert m.tau == 0 and m.se == pytest.approx(0.05 / math.sqrt(3))
    assert math.isnan(hksj(np.array([0.2]), np.array([0.1])).p)  # one env: nothing about the next


def test_holm_by_hand():
    # m = 4: 4·0.01, 3·0.02, max(previous, 2·0.03), 1·0.5; None is no test and does not count.
    assert holm([0.03, 0.01, None, 0.5, 0.02]) == pytest.approx([0.06, 0.04, None, 0.5, 0.06])
    assert holm([0.6, 0.9]) == [1.0, 1.0]


def test_directions_and_the_monte_carlo_floor_are_printed_as_what_they_are():
    assert directions([0.1, -0.2, 0.0, 0.3]) == "+ − 0 +"
    assert format_p(1 / 20_001, 1 / 20_001) == "< 5e-05"
    assert format_p(0.0312) == "0.031" and format_p(None) == "—"


# --------------------------------------------------------------------------- #
# The simulation (small here; the full grid in scripts/simulate_generalise.py)
# --------------------------------------------------------------------------- #
#: Env counts of the reference's profiles today (1, 2, 3, 4 and 5) and soon (up to 8); one env makes no claim.
REFERENCE_KS = (2, 3, 4, 5, 8)
REPS = 6000
#: Monte Carlo slack: three standard deviations of a rate of 5% over REPS profiles.
SLACK = 3 * math.sqrt(0.05 * 0.95 / REPS)


@pytest.mark.parametrize("sd_env", [0.05, 0.1])
@pytest.mark.parametrize("n", [5, 20])
def test_the_random_effects_rule_keeps_false_winners_at_5_percent_where_fixed_envs_do_not(sd_env, n):
    for k in REFERENCE_KS:
        c = simulation.rates(k, n, sd_env, 0.15, 0.0, reps=REPS, rng=[k, n, int(sd_env * 100)])
        assert c.winner_re <= 0.05 + SLACK, (k, n, sd_env, c)
        assert c.winner_eq <= 0.05 + SLACK, (k, n, sd_env, c)  # the headline test's (equal weights)
        # The old rule asks about these envs only: under the interaction it names a winner far more often.
        assert c.winner_fixed > 0.05 + SLACK, (k, n, sd_env, c)


def test_the_power_at_the_reference_s_effect_sizes_is_what_sets_the_least_envs(record_property):
    """The reference's best two differ by 0.05-0.14 on the normalised scale (mean over envs); with 2 envs
    the t on 1 df gives the rule little power (≤ 0.25 even at 0.2), which is why fewer than MIN_ENVS_GENERALISE envs answer only
    for the envs measured. The numbers are recorded in the test report (``record_property``)."""
    power = {(k, d): simulation.rates(k, 10, 0.05, 0.15, d, reps=3000, rng=[k, int(d * 100)]).winner_eq
             for k in (2, 3, 5, 8) for d in (0.05, 0.1, 0.2)}
    for key, v in power.items():
        record_property(f"power k={key[0]} delta={key[1]}", round(v, 3))
    assert all(power[(2, d)] < 0.25 for d in (0.05, 0.1, 0.2)), power
    assert power[(MIN_ENVS_GENERALISE, 0.2)] > 0.2 and power[(5, 0.2)] > 0.8 and power[(8, 0.1)] > 0.6, power
    assert power[(5, 0.1)] > power[(3, 0.1)] > power[(2, 0.1)], power


def test_equal_weights_by_hand():
    y = np.array([0.1, 0.3, -0.1, 0.2])
    m = equal_weights(y)
    se = np.std(y, ddof=1) / 2
    half = st.t.ppf(0.975, 3) * se
    assert (m.mu, m.se, m.lo, m.hi, m.k) == pytest.approx((0.125, se, 0.125 - half, 0.125 + half, 4))
    assert m.p == pytest.approx(2 * st.t.sf(0.125 / se, 3)) and m.tau == pytest.approx(np.std(y, ddof=1))
    assert math.isnan(equal_weights(np.array([0.2])).p)


def test_one_env_that_no_algorithm_learns_cannot_carry_the_profile():
    """Issue 63, defect 7: where every run of both sides scores the same (FetchReach-v4 at the random score), the
    Welch standard error sits at SE_FLOOR and inverse-variance weights give that env all the weight: the mean
    effect is that env's 0, whatever the other envs show. Equal weights give the plain mean over envs."""
    x = [np.zeros(5), np.array([0.5, 0.7, 0.4, 0.65, 0.45]), np.array([0.6, 0.4, 0.7, 0.45, 0.6])]
    y = [np.zeros(5), np.array([0.45, 0.6, 0.5, 0.55, 0.45]), np.array([0.5, 0.45, 0.55, 0.4, 0.5])]
    eff, se = env_effects(x, y)
    assert eff[1] > 0.02 and eff[2] > 0.05 and se[0] == generalise.SE_FLOOR
    assert abs(hksj(eff, se).mu) < 0.001  # the stuck env carries it
    assert equal_weights(eff).mu == pytest.approx(eff.mean())
    # In simulation: with one stuck env among 5 and a true difference of 0.2 on the others, inverse-variance
    # weights almost never find it; equal weights do.
    c = simulation.rates(5, 10, 0.05, 0.15, 0.2, reps=3000, rng=7, stuck=1)
    assert c.winner_re < 0.01 < 0.5 < c.winner_eq, c
