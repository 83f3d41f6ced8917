"""The collapse detector on hand-made runs: it fires on a collapsing std and on a gradient spike, and
stays quiet on a policy that converges or a run whose gradients are merely noisy."""

from __future__ import annotations

import numpy as np

from bench.analysis import collapse
from bench.storage.record import downsample_diagnostics


def test_log_std_collapse_before_the_return_got_anywhere_is_flagged():
    steps = np.arange(1, 101) * 1000
    log_std = np.linspace(0.0, -3.0, 100)  # falls 1.5 nats by step ~50,000
    ep_steps = np.arange(1, 201) * 500
    curve = np.minimum(ep_steps / 50_000, 1.0) * 0.3  # reaches 0.3 at 50k, flat after: stalled
    f = collapse.log_std_collapse(steps, log_std, ep_steps, curve)
    assert f is not None and f.kind == "log-std collapse"
    first = int(steps[np.flatnonzero(log_std <= -1.5)[0]])
    assert f.step == first == 51_000


def test_a_policy_that_converges_while_its_std_shrinks_is_not_flagged():
    steps = np.arange(1, 101) * 1000
    log_std = np.linspace(0.0, -3.0, 100)
    ep_steps = np.arange(1, 201) * 500
    assert collapse.log_std_collapse(steps, log_std, ep_steps, ep_steps / 100_000 * 0.9) is None  # still improving
    assert collapse.log_std_collapse(steps, log_std, ep_steps, np.full(200, 1.05)) is None  # solved
    assert collapse.log_std_collapse(steps, np.linspace(0, -1.4, 100), ep_steps, np.full(200, 0.2)) is None  # small drop


def test_gradient_spike_is_flagged_where_it_happens_and_noise_is_not():
    rng = np.random.default_rng(0)
    g = rng.lognormal(0.0, 0.5, 300)  # noisy, no spike: max/median of lognormal(0, .5) over 300 draws < 10
    steps = np.arange(1, 301) * 64
    assert collapse.gradient_spike(steps, g) is None
    g[200] = 50 * np.median(g[:200])
    f = collapse.gradient_spike(steps, g)
    assert f is not None and f.step == steps[200] and f.kind == "gradient spike"


def test_a_spike_survives_downsampling_through_its_max_row():
    rng = np.random.default_rng(1)
    g = rng.lognormal(0.0, 0.3, 20_000)
    g[12_345] = 100.0
    rows = downsample_diagnostics([(i * 8, "grad/norm", float(v)) for i, v in enumerate(g)], 500)
    mean_rows = [(s, v) for s, k, v, _ in rows if k == "grad/norm"]
    max_rows = [(s, v) for s, k, v, _ in rows if k == "grad/norm_max"]
    assert len(mean_rows) == len(max_rows) == 500
    steps, means = np.array(mean_rows).T
    assert collapse.gradient_spike(steps, means) is None  # the mean of 40 updates hides it ...
    steps, peaks = np.array(max_rows).T
    f = collapse.gradient_spike(steps, peaks)  # ... the stretch's max does not
    assert f is not None and f.step >= 12_345 * 8 and f.step - 12_345 * 8 < 40 * 8


def test_flags_for_a_report():
    import pandas as pd

    class A:
        random_return, threshold = -1200.0, -200.0

    runs = pd.DataFrame([dict(key="k1", env="Pendulum-v1", label="x", seed=0, window=5),
                         dict(key="k2", env="CartPole-v1", label="y", seed=1, window=5)])
    ep_steps = np.arange(1, 101) * 1000
    episodes = pd.concat([pd.DataFrame(dict(key="k1", step=ep_steps, ret=np.full(100, -1000.0))),
                          pd.DataFrame(dict(key="k2", step=ep_steps, ret=np.full(100, 100.0)))])
    diags = pd.DataFrame(dict(key="k1", step=ep_steps, name="policy/log_std", value=np.linspace(0, -2, 100)))
    diags = pd.concat([diags, pd.DataFrame(dict(key="k2", step=ep_steps, name="policy/log_std",
                                                value=np.linspace(0, -2, 100)))])
    out = collapse.flags(runs, episodes, diags, {"Pendulum-v1": A(), "CartPole-v1": A()},
                         {"Pendulum-v1": {"action": "continuous"}, "CartPole-v1": {"action": "discrete"}})
    assert out[["key", "kind"]].values.tolist() == [["k1", "log-std collapse"]]  # discrete actions have no log-std check
