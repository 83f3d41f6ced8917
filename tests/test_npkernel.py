"""The NumPy kernel computes exactly the torch path's losses and gradients.

Reference: torch autograd on ``ppo.ppo_losses`` / ``a2c.a2c_losses`` and the
policy's own ``dist``/``value``, the code each algorithm reads as.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from bench.algos.a2c.a2c import a2c_losses
from bench.algos.common import FlatParams
from bench.algos.npkernel import ActorCriticKernel, use_kernel
from bench.algos.policy import ActorCritic
from bench.algos.ppo.ppo import ppo_losses

B = 64


def _policy(discrete: bool, activation: str = "tanh", seed: int = 0) -> tuple[ActorCritic, FlatParams]:
    torch.manual_seed(seed)
    obs_space = gym.spaces.Box(-1, 1, (5,), np.float32)
    act_space = gym.spaces.Discrete(3) if discrete else gym.spaces.Box(-1, 1, (2,), np.float32)
    pol = ActorCritic(obs_space, act_space, net_arch=[16, 8], activation=activation, log_std_init=-0.3)
    # Larger-than-init head weights, so the gradients are not dominated by the 0.01 policy-head gain.
    with torch.no_grad():
        for p in pol.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return pol, FlatParams(list(pol.parameters()))


def _batch(pol: ActorCritic, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(B, 5)).astype(np.float32)
    if pol.discrete:
        actions = rng.integers(0, 3, size=B)
    else:
        actions = rng.normal(size=(B, 2)).astype(np.float32)
    with torch.no_grad():
        logp = pol.dist(torch.from_numpy(obs)).log_prob(torch.from_numpy(actions)).numpy()
        values = pol.value(torch.from_numpy(obs)).numpy()
    return dict(
        obs=obs, actions=actions,
        adv=rng.normal(size=B).astype(np.float32),
        returns=rng.normal(size=B).astype(np.float32),
        # Old log-probs spread so that some ratios fall outside [1 − ε, 1 + ε] on both sides.
        old_logp=(logp + rng.normal(scale=0.3, size=B)).astype(np.float32),
        old_values=(values + rng.normal(scale=0.5, size=B)).astype(np.float32),
    )


def _torch_grads(pol, flat, b, *, algo, clip_range, clip_range_vf, vf_coef, ent_coef):
    t = {k: torch.from_numpy(v) for k, v in b.items()}
    pd = pol.dist(t["obs"])
    logp = pd.log_prob(t["actions"])
    values = pol.value(t["obs"])
    if algo == "ppo":
        pg, vl, cf = ppo_losses(logp, t["old_logp"], t["adv"], values, t["old_values"], t["returns"],
                                clip_range, clip_range_vf)
    else:
        (pg, vl), cf = a2c_losses(logp, t["adv"], values, t["returns"]), torch.tensor(0.0)
    ent = pd.entropy().mean()
    flat.zero_grad()
    (pg + vf_coef * vl - ent_coef * ent).backward()
    return flat.grad.clone().numpy(), tuple(float(x.detach()) for x in (pg, vl, ent, cf))


CASES = [
    # (discrete, activation, algo, clip_range_vf, ent_coef)
    (True, "tanh", "ppo", None, 0.0),
    (True, "tanh", "ppo", 0.2, 0.01),
    (True, "relu", "ppo", None, 0.05),
    (True, "tanh", "a2c", None, 0.01),
    (False, "tanh", "ppo", None, 0.0),
    (False, "tanh", "ppo", 0.2, 0.01),
    (False, "relu", "a2c", None, 0.001),
]


@pytest.mark.parametrize("discrete,activation,algo,clip_range_vf,ent_coef", CASES)
def test_loss_and_gradient_match_torch_autograd(discrete, activation, algo, clip_range_vf, ent_coef):
    pol, flat = _policy(discrete, activation)
    b = _batch(pol)
    ref, (pg, vl, ent, cf) = _torch_grads(pol, flat, b, algo=algo, clip_range=0.2, clip_range_vf=clip_range_vf,
                                          vf_coef=0.5, ent_coef=ent_coef)
    kern = ActorCriticKernel(pol)
    flat.grad.fill_(123.0)  # the kernel must overwrite, not accumulate
    kw = dict(old_logp=b["old_logp"], clip_range=0.2, old_values=b["old_values"],
              clip_range_vf=clip_range_vf) if algo == "ppo" else {}
    st = kern.pg_step(b["obs"], b["actions"], b["adv"], b["returns"], vf_coef=0.5, ent_coef=ent_coef, **kw)
    got = flat.grad.numpy()
    assert np.abs(ref).max() > 1e-3  # a real gradient, not zeros on both sides
    np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-6)
    assert st.policy_loss == pytest.approx(pg, rel=1e-5, abs=1e-7)
    assert st.value_loss == pytest.approx(vl, rel=1e-5)
    assert st.entropy == pytest.approx(ent, rel=1e-5)
    if algo == "ppo":
        assert st.clip_fraction == pytest.approx(cf)
        assert 0.0 < st.clip_fraction < 1.0  # both sides of the clip boundary are exercised


@pytest.mark.parametrize("discrete", [True, False])
def test_acting_matches_the_torch_policy(discrete):
    pol, _ = _policy(discrete)
    kern = ActorCriticKernel(pol)
    b = _batch(pol)
    obs = torch.from_numpy(b["obs"])
    with torch.no_grad():
        pd = pol.dist(obs)
        np.testing.assert_allclose(kern.value(b["obs"]), pol.value(obs).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(kern.log_prob(b["obs"], b["actions"]),
                                   pd.log_prob(torch.from_numpy(b["actions"])).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(kern.mode(b["obs"]), pd.mode().numpy()) if discrete else \
            np.testing.assert_allclose(kern.mode(b["obs"]), pd.mode().numpy(), rtol=1e-5, atol=1e-6)
        a, logp, v = kern.act(b["obs"], np.random.default_rng(0))
        np.testing.assert_allclose(logp, pd.log_prob(torch.from_numpy(a)).numpy(), rtol=1e-5, atol=1e-5)


def test_categorical_sampling_has_the_policy_frequencies():
    pol, _ = _policy(True)
    kern = ActorCriticKernel(pol)
    obs = np.repeat(np.random.default_rng(2).normal(size=(1, 5)).astype(np.float32), 40_000, axis=0)
    a, _, _ = kern.act(obs, np.random.default_rng(3))
    with torch.no_grad():
        probs = pol.dist(torch.from_numpy(obs[:1])).logp.exp().numpy()[0]
    freq = np.bincount(a, minlength=3) / len(a)
    np.testing.assert_allclose(freq, probs, atol=4 * np.sqrt(0.25 / len(a)))


def test_views_follow_optimizer_steps():
    pol, flat = _policy(True)
    kern = ActorCriticKernel(pol)
    opt = torch.optim.Adam([flat.param], lr=0.1, fused=True)
    flat.grad.normal_()
    opt.step()
    x = np.ones((1, 5), np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(kern.value(x), pol.value(torch.from_numpy(x)).numpy(), rtol=1e-6)


def test_kernel_choice():
    pol, _ = _policy(True)
    cpu = torch.device("cpu")
    assert use_kernel("auto", pol, cpu) and use_kernel("numpy", pol, cpu)
    assert not use_kernel("torch", pol, cpu)
    assert not use_kernel("auto", pol, torch.device("cuda"))
    with pytest.raises(ValueError, match="kernel 'numpy' needs an MLP policy on the CPU"):
        use_kernel("numpy", pol, torch.device("cuda"))


def test_views_follow_trpo_in_place_parameter_updates():
    from bench.algos.trpo.trpo import set_parameters_

    pol, _ = _policy(False)
    kern = ActorCriticKernel(pol)
    params = pol.actor_parameters()
    new = torch.cat([q.detach().reshape(-1) for q in params]) + 0.5
    set_parameters_(params, new)
    x = np.ones((3, 5), np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(kern.mode(x), pol.dist(torch.from_numpy(x)).mode().numpy(), rtol=1e-5)
        np.testing.assert_allclose(kern.log_std, new[-2:].numpy())  # log_std is the last actor parameter


def test_standardize_is_torchs_unbiased_standardisation():
    from bench.algos.npkernel import standardize

    x = np.random.default_rng(4).normal(3.0, 2.0, size=37).astype(np.float32)
    t = torch.from_numpy(x)
    np.testing.assert_allclose(standardize(x), ((t - t.mean()) / (t.std() + 1e-8)).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("algo", ["ppo", "a2c", "trpo"])
def test_pixel_runs_fall_back_to_torch_and_numpy_is_refused(algo):
    """Atari (Nature CNN): ``auto`` runs on the torch path; asking for ``numpy`` is a clear error."""
    from bench.algos import TRAIN
    from bench.algos.hyperparams import resolve
    from bench.storage.record import Recorder

    over = {"n_envs": 2, "n_steps": 16}
    over |= {"ppo": {"batch_size": 16, "n_epochs": 1}, "trpo": {"batch_size": 16, "n_critic_updates": 1}}.get(algo, {})
    rec = Recorder()
    TRAIN[algo]("ALE/Pong-v5", resolve(algo, "ALE/Pong-v5", over), seed=0, timesteps=32, recorder=rec)
    assert rec.steps == 32 and rec.updates == 1
    assert all(np.isfinite(v) for _, k, v in rec.diag if k.startswith("loss/"))
    with pytest.raises(ValueError, match="kernel 'numpy' needs an MLP policy on the CPU"):
        TRAIN[algo]("ALE/Pong-v5", resolve(algo, "ALE/Pong-v5", over | {"kernel": "numpy"}), seed=0, timesteps=32,
                    recorder=Recorder())


def test_row_reductions_are_numpy_s_own_floats():
    # The column-by-column sums and maxima give exactly what NumPy's axis-1 reductions give (rows of
    # fewer than 8 are summed left to right; wider rows go to NumPy itself), for every head width.
    from bench.algos.npkernel import _row_max, _row_sum

    rng = np.random.default_rng(3)
    for k in range(1, 12):
        for _ in range(20):
            x = (rng.standard_normal((257, k)) * 10.0 ** rng.uniform(-4, 4, (257, k))).astype(np.float32)
            assert np.array_equal(_row_sum(x), x.sum(axis=1)), k
            assert np.array_equal(_row_max(x), x.max(axis=1)), k
            assert _row_sum(x).dtype == np.float32
            # One row (acting in one env) sums as that row does among many (training): the same log-prob.
            assert all(_row_sum(x[i:i + 1])[0] == _row_sum(x)[i] for i in (0, 100, 256)), k
