"""The project's own TRPO: CG and Fisher-vector products, the trust region, determinism, learning."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.func import functional_call

from bench.algos.trpo import trpo
from bench.algos.policy import ActorCritic
from bench.algos.hyperparams import resolve
from bench.stats.metrics import first_crossing, summarize
from bench.storage.record import Recorder


def run(env_id, steps, seed=0, recorder=None, **over):
    rec = recorder or Recorder()
    trpo.train(env_id, resolve("trpo", env_id, over), seed=seed, timesteps=steps, recorder=rec)
    return rec


def diag(rec, key):
    return [v for _, k, v in rec.diag if k == key]


# --------------------------------------------------------------------------- #
# Conjugate gradient and Fisher-vector products
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conjugate_gradient_solves_spd_systems(seed):
    g = torch.Generator().manual_seed(seed)
    M = torch.randn(20, 20, generator=g, dtype=torch.float64)
    A = M.T @ M + torch.eye(20, dtype=torch.float64)
    b = torch.randn(20, generator=g, dtype=torch.float64)
    calls = []

    def Avp(v):
        calls.append(1)
        return A @ v

    x = trpo.conjugate_gradient(Avp, b, iters=100)
    exact = torch.linalg.solve(A, b)
    assert float((x - exact).norm() / exact.norm()) < 1e-5
    assert len(calls) <= 100
    # Few iterations give a partial solution, still a descent on the residual.
    x3 = trpo.conjugate_gradient(lambda v: A @ v, b, iters=3)
    assert (A @ x3 - b).norm() < b.norm()


def test_conjugate_gradient_stops_at_zero_residual():
    x = trpo.conjugate_gradient(lambda v: 2 * v, torch.zeros(5), iters=10)
    assert torch.equal(x, torch.zeros(5))


def _tiny_policy(discrete: bool) -> ActorCritic:
    torch.manual_seed(0)
    obs_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    act_space = gym.spaces.Discrete(2) if discrete else gym.spaces.Box(-1, 1, (2,), np.float32)
    pol = ActorCritic(obs_space, act_space, net_arch=[4], ortho_init=False, log_std_init=-0.3,
                      share_features=False).double()
    return pol


def _explicit_kl_hessian(pol: ActorCritic, obs: torch.Tensor) -> torch.Tensor:
    """Hessian of mean KL(π_old ‖ π_θ) w.r.t. the flattened actor parameters at θ = θ_old."""
    params = pol.actor_parameters()
    names = {id(p): n for n, p in pol.named_parameters()}
    keys = [names[id(p)] for p in params]
    shapes, sizes = [p.shape for p in params], [p.numel() for p in params]
    with torch.no_grad():
        old = pol.dist(obs)
    theta0 = torch.cat([p.detach().reshape(-1) for p in params])

    def kl_of(theta):
        ps = {k: t.view(s) for k, t, s in zip(keys, theta.split(sizes), shapes)}
        pi_out = functional_call(pol.pi, {k[len("pi."):]: v for k, v in ps.items() if k.startswith("pi.")}, (obs,))
        new = type(old)(pi_out) if pol.discrete else type(old)(pi_out, ps["log_std"])
        return old.kl(new).mean()

    return torch.autograd.functional.hessian(kl_of, theta0)


@pytest.mark.parametrize("discrete", [True, False], ids=["categorical", "gaussian"])
def test_fisher_vector_product_equals_kl_hessian_times_v(discrete):
    pol = _tiny_policy(discrete)
    obs = torch.randn(32, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    params = pol.actor_parameters()
    H = _explicit_kl_hessian(pol, obs)
    n = sum(p.numel() for p in params)
    assert H.shape == (n, n)
    grad_kl = trpo.kl_gradient(pol, obs, params)
    assert float(grad_kl.detach().abs().max()) < 1e-10  # KL is minimal at θ_old
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        v = torch.randn(n, dtype=torch.float64, generator=g)
        fv = trpo.fisher_vector_product(grad_kl, params, v, damping=0.0)
        torch.testing.assert_close(fv, H @ v, rtol=1e-8, atol=1e-10)
        damped = trpo.fisher_vector_product(grad_kl, params, v, damping=0.1)
        torch.testing.assert_close(damped, H @ v + 0.1 * v, rtol=1e-8, atol=1e-10)
    # The Fisher is positive semi-definite.
    assert float(torch.linalg.eigvalsh((H + H.T) / 2).min()) > -1e-10


# --------------------------------------------------------------------------- #
# The trust region
# --------------------------------------------------------------------------- #
def _fixed_batch(discrete: bool, n: int = 256):
    torch.manual_seed(0)
    obs_space = gym.spaces.Box(-1, 1, (4,), np.float32)
    act_space = gym.spaces.Discrete(3) if discrete else gym.spaces.Box(-1, 1, (2,), np.float32)
    pol = ActorCritic(obs_space, act_space, share_features=False)
    obs = torch.randn(n, 4)
    with torch.no_grad():
        pd = pol.dist(obs)
        a = pd.sample()
        logp = pd.log_prob(a)
    # Advantages that favour one action region, so the surrogate has a clear ascent direction.
    adv = (a.float() - a.float().mean()) if discrete else a[:, 0] - a[:, 0].mean()
    adv = (adv - adv.mean()) / (adv.std() + 1e-8) + 0.1 * torch.randn(n)
    return pol, obs, a, logp, adv


@pytest.mark.parametrize("discrete", [True, False], ids=["categorical", "gaussian"])
@pytest.mark.parametrize("delta", [0.001, 0.01, 0.05])
def test_policy_step_respects_the_trust_region(discrete, delta):
    pol, obs, a, logp, adv = _fixed_batch(discrete)
    with torch.no_grad():
        old = pol.dist(obs)
        if not discrete:  # the Gaussian's log-std is the live parameter: snapshot it
            old = type(old)(old.mean, old.log_std.clone())
    critic_before = [p.detach().clone() for p in pol.critic_parameters()]
    res = trpo.policy_step(pol, obs, a, logp, adv, target_kl=delta, cg_max_steps=15, cg_damping=0.01,
                           shrink=0.8, max_iter=10)
    with torch.no_grad():
        new = pol.dist(obs)
        kl = float(new.kl(old).mean())  # KL(π_new ‖ π_old): the direction sb3-contrib bounds
        surr = float((torch.exp(new.log_prob(a) - logp) * adv).mean())
    assert res.accepted
    assert 0 < kl < delta
    assert kl == pytest.approx(res.kl, rel=1e-5)
    assert surr > res.surrogate
    assert 0 < res.fraction <= 1 and 1 <= res.line_search_iters <= 10
    assert all(torch.equal(b, p) for b, p in zip(critic_before, pol.critic_parameters()))


def test_rejected_step_restores_the_policy():
    pol, obs, a, logp, adv = _fixed_batch(True)
    before = [p.detach().clone() for p in pol.actor_parameters()]
    # Zero advantages: g = 0, so no step can improve the surrogate and the line search must fail.
    res = trpo.policy_step(pol, obs, a, logp, torch.zeros_like(adv), target_kl=0.01, cg_max_steps=5,
                           cg_damping=0.01, shrink=0.5, max_iter=3)
    assert not res.accepted and res.kl == 0.0 and res.fraction == 0.0
    assert all(torch.equal(b, p) for b, p in zip(before, pol.actor_parameters()))


# --------------------------------------------------------------------------- #
# Whole runs
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("kernel", ["numpy", "torch"])
def test_same_seed_same_returns_and_different_seed_differs(kernel):
    a, b, c = (run("CartPole-v1", 3000, s, n_steps=256, kernel=kernel) for s in (0, 0, 1))
    assert len(a.ep_return) > 10
    assert a.ep_return == b.ep_return and a.ep_step == b.ep_step
    assert a.ep_return != c.ep_return


def test_budget_and_diagnostics():
    rec = run("CartPole-v1", 1500, n_steps=256, grad_noise_chunks=4)  # 2 envs × 256 = 512 per rollout
    assert rec.steps == 1536 and rec.updates == 3
    keys = {k for _, k, _ in rec.diag}
    assert {"loss/policy", "loss/value", "policy/entropy", "policy/approx_kl", "trpo/step_accepted",
            "trpo/step_fraction", "trpo/line_search_iters", "value/explained_variance", "grad/norm",
            "grad/noise_ratio"} <= keys
    assert all(np.isfinite(v) for _, k, v in rec.diag if k != "value/explained_variance")
    delta = resolve("trpo", "CartPole-v1").target_kl
    for acc, kl, frac in zip(diag(rec, "trpo/step_accepted"), diag(rec, "policy/approx_kl"),
                             diag(rec, "trpo/step_fraction")):
        assert (acc == 1 and 0 < kl <= delta and 0 < frac <= 1) or (acc == 0 and kl == 0 and frac == 0)


def test_pendulum_smoke_with_normalisation():
    rec = run("Pendulum-v1", 3000, normalize=True)
    keys = {k for _, k, _ in rec.diag}
    assert {"policy/log_std", "trpo/step_accepted"} <= keys
    assert rec.steps >= 3000 and len(rec.ep_return) >= 10
    assert all(np.isfinite(v) for _, k, v in rec.diag if k != "value/explained_variance")


def test_sub_sampling_gives_the_policy_step_a_random_kth_of_the_rollout(monkeypatch):
    """sub_sampling_factor k: the policy step sees every k-th transition of a shuffled rollout (as
    sb3-contrib), distinct rows of it, neither its first ones nor a fixed stride; the critic still fits the
    whole rollout."""
    from bench.algos.npg import npg

    steps, fits = [], []
    real_step, real_fit = trpo.policy_step, npg.fit_critic

    def step_spy(policy, obs, actions, old_logp, adv, **kw):
        steps.append(obs.clone())
        return real_step(policy, obs, actions, old_logp, adv, **kw)

    def fit_spy(policy, critic, optimizer, kern, obs, returns, **kw):
        fits.append(obs.clone())
        return real_fit(policy, critic, optimizer, kern, obs, returns, **kw)

    monkeypatch.setattr(trpo, "policy_step", step_spy)
    monkeypatch.setattr(npg, "fit_critic", fit_spy)
    rec = run("CartPole-v1", 1024, n_steps=256, sub_sampling_factor=4)  # 2 envs × 256 = 512 per rollout
    assert rec.updates == 2 and diag(rec, "trpo/step_accepted")
    assert [len(o) for o in steps] == [128, 128] and [len(o) for o in fits] == [512, 512]
    for sub, whole in zip(steps, fits):
        rows = {tuple(r) for r in whole.tolist()}
        assert len(rows) > 500 and len({tuple(r) for r in sub.tolist()}) == 128  # CartPole's states are continuous
        assert all(tuple(r) in rows for r in sub.tolist())
        assert not torch.equal(sub, whole[:128]) and not torch.equal(sub, whole[::4])
    steps.clear()
    run("CartPole-v1", 1024, n_steps=256)  # the default factor 1: the whole rollout
    assert [len(o) for o in steps] == [512, 512]


@pytest.mark.heavy
def test_trpo_solves_cartpole_fast():
    """Fast learning check (one seed): zoo hyperparameters (2 envs × 512 steps), 475 within 100k steps."""
    rec = run("CartPole-v1", 100_000, seed=0)
    i = first_crossing(np.array(rec.ep_return), 475.0, 20)
    assert i is not None, f"final 20-episode mean {np.mean(rec.ep_return[-20:]):.1f}"
    assert rec.ep_step[i] <= 100_000


@pytest.mark.learning
def test_trpo_cartpole_bar_five_seeds(learning_record):
    """Learning bar: 475 within 100k steps on at least 4 of 5 seeds (zoo hyperparameters)."""
    hits = []
    for seed in range(5):
        rec = run("CartPole-v1", 100_000, seed=seed)
        s = summarize(np.array(rec.ep_step), np.array(rec.ep_wall), np.array(rec.ep_return), threshold=475.0, window=20)
        hits.append(s.steps_to_threshold if s.steps_to_threshold is not None and s.steps_to_threshold <= 100_000
                    else None)
    ok = sum(h is not None for h in hits) >= 4
    learning_record(bar="TRPO CartPole-v1: 475 within 100k steps on >= 4/5 seeds (steps-to-475 per seed)",
                    values=hits, passed=ok)
    assert ok, hits
