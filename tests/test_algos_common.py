"""Tier 1 for the shared algorithm parts and PPO's loss: against plain loops and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.algos.common import (FlatParams, Normalizer, RunningMeanStd, explained_variance, fused_adam_step, gae,
                                grad_noise_ratio)
from bench.algos.policy import CategoricalPd, GaussianPd
from bench.algos.ppo.ppo import ppo_losses


def _episodes(rng, T=64, N=3):
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    values = rng.normal(size=(T, N)).astype(np.float32)
    next_values = rng.normal(size=(T, N)).astype(np.float32)
    terminated = (rng.random((T, N)) < 0.08).astype(np.float32)
    truncated = ((rng.random((T, N)) < 0.05) & (terminated == 0)).astype(np.float32)
    ended = np.maximum(terminated, truncated)
    return rewards, values, next_values, terminated, ended


def gae_reference(r, v, nv, term, ended, gamma, lam):
    """Plain loops over each env and step: the textbook recursion."""
    T, N = r.shape
    adv = np.zeros((T, N))
    for i in range(N):
        running = 0.0
        for t in reversed(range(T)):
            delta = r[t, i] + gamma * nv[t, i] * (1 - term[t, i]) - v[t, i]
            running = delta + (0.0 if ended[t, i] else gamma * lam * running)
            adv[t, i] = running
    return adv


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
def test_gae_matches_plain_loop(lam):
    rng = np.random.default_rng(1)
    r, v, nv, term, ended = _episodes(rng)
    adv, ret = gae(r, v, nv, term, ended, 0.97, lam)
    np.testing.assert_allclose(adv, gae_reference(r, v, nv, term, ended, 0.97, lam), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, adv + v, rtol=1e-6)


def test_gae_lambda_one_is_discounted_return_minus_value():
    rng = np.random.default_rng(2)
    r, v, nv, term, ended = _episodes(rng, T=40, N=2)
    # In a real rollout V(s'_t) is V(s_{t+1}) unless the episode ended at t.
    nv[:-1] = np.where(ended[:-1] > 0, nv[:-1], v[1:])
    gamma = 0.9
    adv, _ = gae(r, v, nv, term, ended, gamma, 1.0)
    # Discounted return from t to the end of its episode (or of the rollout), bootstrapped
    # with V(s') where the episode was cut without terminating.
    T, N = r.shape
    for i in range(N):
        for t in range(T):
            g, disc = 0.0, 1.0
            for k in range(t, T):
                g += disc * r[k, i]
                if term[k, i]:
                    break
                if ended[k, i] or k == T - 1:
                    g += disc * gamma * nv[k, i]
                    break
                disc *= gamma
            assert adv[t, i] == pytest.approx(g - v[t, i], rel=1e-4, abs=1e-4)


def test_gae_lambda_zero_is_one_step_td_error():
    rng = np.random.default_rng(3)
    r, v, nv, term, ended = _episodes(rng)
    adv, _ = gae(r, v, nv, term, ended, 0.99, 0.0)
    np.testing.assert_allclose(adv, r + 0.99 * nv * (1 - term) - v, rtol=1e-5, atol=1e-6)


def test_truncation_bootstraps_but_termination_does_not():
    # One env, 2 steps: step 0 truncated (time limit), step 1 terminated.
    r = np.array([[1.0], [1.0]], np.float32)
    v = np.array([[0.0], [0.0]], np.float32)
    nv = np.array([[10.0], [10.0]], np.float32)
    adv, _ = gae(r, v, nv, np.array([[0.0], [1.0]], np.float32), np.array([[1.0], [1.0]], np.float32), 0.5, 0.9)
    assert adv[0, 0] == pytest.approx(1 + 0.5 * 10)  # bootstraps from V(s') = 10
    assert adv[1, 0] == pytest.approx(1.0)  # terminal: no bootstrap


@pytest.mark.parametrize("adv_sign", [1.0, -1.0])
def test_ppo_clipped_loss_by_hand(adv_sign):
    eps = 0.2
    # Ratios 0.5, 0.9, 1.1, 1.5: outside below, inside, inside, outside above the clip range.
    ratios = torch.tensor([0.5, 0.9, 1.1, 1.5])
    old = torch.zeros(4)
    logp = torch.log(ratios)
    adv = torch.full((4,), adv_sign)
    pg, _, clip_frac = ppo_losses(logp, old, adv, torch.zeros(4), torch.zeros(4), torch.zeros(4), eps, None)
    # By hand: min(r·A, clip(r)·A) per sample.
    if adv_sign > 0:
        per = [min(0.5, 0.8), 0.9, 1.1, min(1.5, 1.2)]  # → 0.5, 0.9, 1.1, 1.2
    else:
        per = [min(-0.5, -0.8), -0.9, -1.1, min(-1.5, -1.2)]  # → -0.8, -0.9, -1.1, -1.5
    assert float(pg) == pytest.approx(-sum(per) / 4, rel=1e-6)
    assert float(clip_frac) == pytest.approx(0.5)
    # Where the clip binds, no gradient flows through the ratio.
    logp = logp.clone().requires_grad_(True)
    pg, _, _ = ppo_losses(logp, old, adv, torch.zeros(4), torch.zeros(4), torch.zeros(4), eps, None)
    pg.backward()
    g = logp.grad.numpy()
    zero = [3] if adv_sign > 0 else [0]  # r·A above the clip (A>0) or below it (A<0) is cut
    for i in range(4):
        if i in zero:
            assert g[i] == 0.0
        else:
            assert g[i] == pytest.approx(-adv_sign * float(ratios[i]) / 4, rel=1e-5)


def test_value_clipping_by_hand():
    values, old, ret = torch.tensor([2.0, 0.05]), torch.tensor([0.0, 0.0]), torch.tensor([1.0, 1.0])
    _, v_loss, _ = ppo_losses(torch.zeros(2), torch.zeros(2), torch.zeros(2), values, old, ret, 0.2, 0.1)
    # Clipped predictions: 0.1 and 0.05 → errors 0.9 and 0.95.
    assert float(v_loss) == pytest.approx((0.9**2 + 0.95**2) / 2)
    _, v_plain, _ = ppo_losses(torch.zeros(2), torch.zeros(2), torch.zeros(2), values, old, ret, 0.2, None)
    assert float(v_plain) == pytest.approx((1.0**2 + 0.95**2) / 2)


def test_distributions_match_torch_distributions():
    torch.manual_seed(0)
    logits, logits2 = torch.randn(5, 3), torch.randn(5, 3)
    a = torch.tensor([0, 1, 2, 1, 0])
    ref, ref2 = torch.distributions.Categorical(logits=logits), torch.distributions.Categorical(logits=logits2)
    pd, pd2 = CategoricalPd(logits), CategoricalPd(logits2)
    torch.testing.assert_close(pd.log_prob(a), ref.log_prob(a))
    torch.testing.assert_close(pd.entropy(), ref.entropy())
    torch.testing.assert_close(pd.kl(pd2), torch.distributions.kl_divergence(ref, ref2))

    mean, mean2, ls, ls2 = torch.randn(5, 2), torch.randn(5, 2), torch.randn(2), torch.randn(2)
    ga, gb = GaussianPd(mean, ls), GaussianPd(mean2, ls2)
    na = torch.distributions.Independent(torch.distributions.Normal(mean, ls.exp()), 1)
    nb = torch.distributions.Independent(torch.distributions.Normal(mean2, ls2.exp()), 1)
    x = torch.randn(5, 2)
    torch.testing.assert_close(ga.log_prob(x), na.log_prob(x))
    torch.testing.assert_close(ga.entropy(), na.entropy())
    torch.testing.assert_close(ga.kl(gb), torch.distributions.kl_divergence(na, nb))


def test_gumbel_max_sampling_has_the_right_frequencies():
    torch.manual_seed(0)
    probs = torch.tensor([0.1, 0.6, 0.3])
    pd = CategoricalPd(torch.log(probs).expand(200_000, 3))
    freq = torch.bincount(pd.sample(), minlength=3).float() / 200_000
    torch.testing.assert_close(freq, probs, atol=5e-3, rtol=0)


def test_running_mean_std_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(1000, 4))
    rms = RunningMeanStd((4,))
    for chunk in np.array_split(data, 17):
        rms.update(chunk)
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-4)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-3)


def test_normalizer_matches_sb3_vecnormalize_rule():
    # Reward scaling: r / sqrt(Var[discounted return] + eps); the running return resets at episode ends.
    n = Normalizer((1,), 1, 0.9, obs=False, reward=True)
    rs, out = [1.0, 2.0, 3.0], []
    for i, r in enumerate(rs):
        out.append(float(n.reward(np.array([r]), np.array([i == 1]))[0]))
    # By hand: returns seen by the running std are 1, 2.9, then (after the reset) 3.
    rms = RunningMeanStd(())
    ret = 0.0
    for i, r in enumerate(rs):
        ret = ret * 0.9 + r
        rms.update(np.array([ret]))
        assert out[i] == pytest.approx(min(r / math.sqrt(rms.var + 1e-8), 10.0))  # clipped at ±10
        if i == 1:
            ret = 0.0


def test_explained_variance():
    y = np.array([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(y, y) == 1.0
    assert explained_variance(np.full(4, y.mean()), y) == pytest.approx(0.0)
    assert math.isnan(explained_variance(y, np.ones(4)))


def test_grad_noise_ratio_on_a_known_case():
    # Loss mean((w - x_i)^2 / 2): each chunk gradient is w - mean(x_chunk).
    torch.manual_seed(0)
    x = torch.randn(4000) * 3.0 + 1.0
    w = torch.nn.Parameter(torch.tensor([5.0]))
    ratio = grad_noise_ratio(lambda idx: ((w - x[idx]) ** 2 / 2).mean(), [w], 4000, 40)
    # Chunk means of 100 samples have variance 9/100 (the population variance over 40 chunks
    # has expectation 39/40 of that); the mean gradient is about 5 - 1 = 4.
    assert ratio == pytest.approx((9 / 100) * (39 / 40) / 16, rel=0.3)
    assert w.grad is None  # the diagnostic leaves gradients alone
    with pytest.raises(ValueError):
        grad_noise_ratio(lambda idx: w.sum(), [w], 10, 1)


@pytest.mark.parametrize("scale", [1e-4, 0.3, 1.0, 7.0, 1e3])
def test_flat_clip_is_bit_for_bit_clip_grad_norm(scale):
    """The float32 scalar coefficient makes the same roundings as torch's tensor expression, on
    gradients below, near and far above the limit."""
    rng = np.random.default_rng(0)
    for trial in range(50):
        g = torch.from_numpy((rng.standard_normal(9219) * scale * rng.uniform(0.5, 2)).astype(np.float32))
        if trial == 7:
            g[3] = float("nan")  # a diverged step: torch multiplies every entry by NaN, and so must this
        if trial == 8:
            g[3] = float("inf")
        p = torch.nn.Parameter(torch.zeros(9219))
        flat = FlatParams([p])
        flat.grad.copy_(g)
        ref = torch.nn.Parameter(torch.zeros(9219))
        ref.grad = g.clone()
        want = torch.nn.utils.clip_grad_norm_([ref], 0.5)
        got = flat.clip_grad_norm(0.5)
        assert got == float(want) or (math.isnan(got) and math.isnan(float(want)))
        assert torch.equal(flat.grad, ref.grad) or torch.equal(flat.grad.isnan(), ref.grad.isnan()) and torch.equal(
            flat.grad.nan_to_num(), ref.grad.nan_to_num()), trial


@pytest.mark.parametrize("schedule", [False, True])
def test_fused_adam_step_is_bit_for_bit_optimizer_step(schedule):
    """The direct call gives the parameters and state that ``Adam.step`` gives, step after step,
    with the learning rate changed through param_groups between steps."""
    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(500)), None
    b = torch.nn.Parameter(a.detach().clone())
    opt_a = torch.optim.Adam([a], lr=3e-3, eps=1e-5, fused=True)
    opt_b = torch.optim.Adam([b], lr=3e-3, eps=1e-5, fused=True)
    fast = fused_adam_step(opt_b)
    assert fast != opt_b.step  # the direct path, not the fallback
    for k in range(30):
        g = torch.randn(500) * (k + 1)
        a.grad, b.grad = g.clone(), g.clone()
        if schedule:
            for o in (opt_a, opt_b):
                o.param_groups[0]["lr"] = 3e-3 * (1 - k / 30)
        opt_a.step()
        fast()
        assert torch.equal(a, b), k
    sa, sb = opt_a.state[a], opt_b.state[b]
    assert all(torch.equal(sa[key], sb[key]) for key in ("step", "exp_avg", "exp_avg_sq"))


def test_fused_adam_step_falls_back_to_step_where_it_does_not_apply():
    p = torch.nn.Parameter(torch.zeros(3))
    for opt in (torch.optim.Adam([p], lr=1e-3), torch.optim.Adam([p], lr=1e-3, fused=True, amsgrad=True),
                torch.optim.RMSprop([p], lr=1e-3)):
        assert fused_adam_step(opt) == opt.step


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_running_mean_std_one_row_batches_are_bit_for_bit_mean_and_var(dtype):
    """The one-env shortcut gives exactly what x.mean(0) and x.var(0) give, non-finite rows included."""
    rng = np.random.default_rng(1)
    fast, ref = RunningMeanStd((5,)), RunningMeanStd((5,))
    for k in range(200):
        x = (rng.standard_normal((1, 5)) * 10 ** rng.uniform(-3, 3)).astype(dtype)
        if k == 150:
            x[0, 2] = np.inf
        with np.errstate(invalid="ignore"):  # inf − inf in the variance of the non-finite row
            fast.update(x)
            bm, bv, bc = x.mean(axis=0), x.var(axis=0), 1  # the general rule, by hand
            delta, total = bm - ref.mean, ref.count + bc
            ref.mean = ref.mean + delta * bc / total
            ref.var, ref.count = (ref.var * ref.count + bv * bc + delta**2 * ref.count * bc / total) / total, total
        np.testing.assert_array_equal(fast.mean, ref.mean)
        np.testing.assert_array_equal(fast.var, ref.var)
