"""REINFORCE (bench.algos.reinforce.reinforce): the estimator against the exact gradient, returns,
determinism, smoke runs of every baseline, and a learning bar."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.algos.reinforce.reinforce import discounted_returns, policy_gradient_loss, reinforce_advantages, train
from bench.algos.hyperparams import REINFORCEParams, resolve
from bench.stats.metrics import first_crossing
from bench.storage.record import Recorder


def _run(env_id: str, steps: int, seed: int = 0, **over) -> Recorder:
    rec = Recorder()
    train(env_id, resolve("reinforce", env_id, over), seed=seed, timesteps=steps, recorder=rec)
    return rec


def _diag(rec: Recorder, key: str) -> list[float]:
    return [v for _, k, v in rec.diag if k == key]


# -- the estimator on a two-armed bandit ------------------------------------------
def _bandit_grads(kind: str, n: int = 20_000, seed: int = 0):
    """Per-sample REINFORCE gradients of J(θ) = Σ π_a μ_a (one-step episodes) through the real code.

    Arms pay N(μ_a, 0.5²) with μ = (1.5, 0.5). Each sample gets its own copy of θ, so
    the gradient of the mean loss w.r.t. copy i is −g_i / n, g_i being sample i's estimate.
    """
    g = torch.Generator().manual_seed(seed)
    theta = torch.tensor([0.3, -0.2], dtype=torch.float64)
    mu = torch.tensor([1.5, 0.5], dtype=torch.float64)
    pi = torch.softmax(theta, 0)
    a = torch.multinomial(pi, n, replacement=True, generator=g)
    r = mu[a] + 0.5 * torch.randn(n, generator=g, dtype=torch.float64)
    returns = torch.as_tensor(discounted_returns(r.numpy(), np.ones(n, bool), 0.99), dtype=torch.float64)
    assert torch.allclose(returns, r)  # one-step episodes: G = r
    adv = reinforce_advantages(returns, None, kind)
    thetas = theta.expand(n, 2).clone().requires_grad_()
    logp = torch.log_softmax(thetas, -1).gather(1, a[:, None]).squeeze(1)
    policy_gradient_loss(logp, adv).backward()
    per_sample = -thetas.grad * n  # (n, 2)
    exact = pi * (mu - (pi * mu).sum())  # ∇J = π ⊙ (μ − J)
    return per_sample, exact


@pytest.mark.parametrize("kind", ["none", "mean"])
def test_bandit_gradient_is_unbiased(kind):
    g, exact = _bandit_grads(kind)
    mean, se = g.mean(0), g.std(0) / math.sqrt(len(g))
    z = ((mean - exact) / se).abs()
    assert (z < 4).all(), (mean, exact, se)


def test_bandit_mean_baseline_lowers_variance():
    g0, _ = _bandit_grads("none")
    g1, _ = _bandit_grads("mean")
    ratio = float(g1.var(0).sum() / g0.var(0).sum())
    assert ratio < 0.7, ratio


def test_advantage_kinds_and_normalisation():
    G = torch.tensor([1.0, 2.0, 3.0, 6.0])
    V = torch.tensor([0.5, 2.0, 2.5, 5.0])
    assert torch.equal(reinforce_advantages(G, None, "none"), G)
    assert torch.allclose(reinforce_advantages(G, None, "mean"), G - 3.0)
    assert torch.allclose(reinforce_advantages(G, V, "value"), G - V)
    # normalize_returns: standardised G; with a learned baseline it only rescales by std(G)
    assert torch.allclose(reinforce_advantages(G, None, "none", normalize_returns=True), (G - 3.0) / G.std(), atol=1e-6)
    assert torch.allclose(reinforce_advantages(G, V, "value", normalize_returns=True), (G - V) / G.std(), atol=1e-6)
    a = reinforce_advantages(G, V, "value", normalize_advantage=True)
    assert abs(float(a.mean())) < 1e-6 and abs(float(a.std()) - 1) < 1e-5
    with pytest.raises(ValueError):
        reinforce_advantages(G, None, "value")


# -- returns --------------------------------------------------------------------
def test_discounted_returns_match_a_plain_loop():
    rng = np.random.default_rng(3)
    r = rng.normal(size=200)
    ends = rng.random(200) < 0.1
    ends[-1] = True
    boot = np.where(ends, rng.normal(size=200), 0.0)
    gamma = 0.9
    for b in (None, boot):
        want = [0.0] * 200
        for t in reversed(range(200)):
            nxt = (0.0 if b is None else b[t]) if ends[t] else want[t + 1]
            want[t] = r[t] + gamma * nxt
        np.testing.assert_allclose(discounted_returns(r, ends, gamma, b), want, rtol=1e-12)


# -- runs -------------------------------------------------------------------------
def test_defaults_and_resolve():
    p = resolve("reinforce", "CartPole-v1")
    assert isinstance(p, REINFORCEParams) and p.baseline == "value" and p.gae_lambda == 1.0
    with pytest.raises(Exception):
        resolve("reinforce", "CartPole-v1", {"gae_lambda": 0.95})


def test_same_seed_same_episodes():
    kw = dict(n_envs=4, n_steps=64, learning_rate=3e-3)
    a, b = _run("CartPole-v1", 3000, seed=7, **kw), _run("CartPole-v1", 3000, seed=7, **kw)
    assert a.ep_return == b.ep_return and len(a.ep_return) > 20
    assert _diag(a, "loss/policy") == _diag(b, "loss/policy")


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("baseline", ["none", "mean", "value"])
def test_every_baseline_runs(env_id, baseline):
    rec = _run(env_id, 2000, n_envs=2, n_steps=200, baseline=baseline, grad_noise_chunks=4,
               normalize_returns=False, max_grad_norm=0.5)
    assert rec.steps >= 2000 and rec.ep_return
    keys = {"loss/policy", "policy/entropy", "policy/approx_kl", "grad/norm", "grad/noise_ratio"}
    if baseline == "value":
        keys |= {"loss/value", "value/explained_variance"}
    if env_id == "Pendulum-v1":
        keys.add("policy/log_std")
    seen = {k for _, k, _ in rec.diag}
    assert keys <= seen, keys - seen
    assert ("loss/value" in seen) == (baseline == "value")
    for k in keys:
        assert all(math.isfinite(v) for v in _diag(rec, k)), k
    # every batch is whole episodes of at least n_steps × n_envs steps (the last one is cut to the budget)
    assert all(s >= 1 for s in _diag(rec, "train/batch_steps"))
    if env_id == "Pendulum-v1":  # 200-step episodes, time-limited: 2 envs × 1 episode per batch
        assert set(_diag(rec, "train/episodes")) == {2.0}


def test_after_update_gets_a_deterministic_policy():
    seen = []

    class R(Recorder):
        def after_update(self, policy=None):
            seen.append(policy)
            super().after_update(policy)

    rec = R()
    train("Pendulum-v1", resolve("reinforce", "Pendulum-v1", {"n_steps": 200}), seed=0, timesteps=400, recorder=rec)
    obs = np.zeros((3, 3), np.float32)
    a = seen[-1](obs)
    assert a.shape == (3, 1) and np.all(np.abs(a) <= 2.0) and np.array_equal(a, seen[-1](obs))


# -- the variance story and the learning bar ----------------------------------------
_CARTPOLE = dict(n_envs=4, n_steps=125, learning_rate=3e-3)  # batches of ≥ 500 steps, returns standardised


class _Solved(Exception):
    pass


class _StopWhenSolved(Recorder):
    """Ends a run once the 20-episode trailing mean reaches 475 (a learning test needs no more)."""

    def after_update(self, policy=None):
        super().after_update(policy)
        if first_crossing(np.asarray(self.ep_return), 475, 20) is not None:
            raise _Solved


@pytest.mark.learning
def test_value_baseline_solves_cartpole_on_most_seeds(learning_record):
    crossed = {}
    for seed in range(5):
        rec = _StopWhenSolved()
        try:
            train("CartPole-v1", resolve("reinforce", "CartPole-v1", _CARTPOLE), seed=seed, timesteps=500_000,
                  recorder=rec)
        except _Solved:
            pass
        i = first_crossing(np.asarray(rec.ep_return), 475, 20)
        crossed[seed] = None if i is None else rec.ep_step[i]
    ok = sum(s is not None for s in crossed.values()) >= 3
    learning_record(bar="REINFORCE (value baseline; n_envs 4, n_steps 125, lr 3e-3) CartPole-v1: 475 within 500k "
                        "steps on >= 3/5 seeds (steps-to-475 per seed)", values=list(crossed.values()), passed=ok)
    assert ok, crossed
