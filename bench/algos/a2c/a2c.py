"""Advantage Actor-Critic, synchronous (Mnih et al. 2016, "Asynchronous Methods for
Deep Reinforcement Learning", Algorithm S3, run on a vector env instead of
asynchronous workers, as OpenAI Baselines' and SB3's A2C do).

Per iteration: collect ``n_steps`` on each of ``n_envs`` envs, compute advantages
Â_t = R_t − V(s_t) with n-step returns (``gae_lambda`` 1, SB3's default; any λ < 1
gives GAE(λ), Schulman et al. 2016), then take ONE gradient step on the whole batch,
minimising

    L = −E[Â · log π(a|s)] + c_v · E[(R − V(s))²] − c_e · E[H(π(·|s))]

with global gradient-norm clipping. Options follow SB3's A2C, whose names the
config uses: RMSprop (α 0.99, the paper's optimizer) or Adam, linear learning-rate
decay, advantage standardisation over the rollout (off by default, not in the
paper), and VecNormalize-style observation/reward normalisation (``normalize``).

Against SB3's A2C (issue 19; ``tests/test_sb3_parity.py`` compares three updates from the
same weights and rollouts, to 2e-6): the same loss and scaling (c_v times the *mean* squared
error, c_v 0.5), the same advantage standardisation (ddof 1, + 1e-8), clipping of the global
norm before the step, and SB3's optimizer, torch's RMSprop (α 0.99, ε ``rms_prop_eps`` 1e-5,
not centred, no momentum, squared-gradient average started at 0), not the zoo's Atari
``RMSpropTFLike`` (ε inside the root, average started at 1), which neither implementation runs.
Two differences, both deliberate (docs/parity.md, "Differences, line by line"): a linear
schedule takes the progress at the start of update k (1 − k/n, so the first update gets the
full rate and none gets 0) where SB3 takes it after the rollout (1 − (k+1)/n), and the
normaliser's order (:class:`~bench.algos.collect.Collector`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn as nn

from bench.algos.checkpoint import savable
from bench.algos.collect import Rollout, rollout_collector
from bench.algos.common import FlatParams, explained_variance, gae, grad_noise_ratio, setup
from bench.algos.loop import Rollouts, ScheduleValues, drive, torch_generator
from bench.algos.npkernel import ActorCriticKernel, standardize
from bench.algos.resume import TrainState
from bench.algos.policy import ActorCritic, PGStats
from bench.algos.a2c.spec import A2CParams
from bench.storage.record import RecorderProtocol


def a2c_losses(
    logp: torch.Tensor, adv: torch.Tensor, values: torch.Tensor, returns: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Policy-gradient and value losses on one batch, all ``(B,)`` in.

    Returns ``(policy_loss, value_loss)`` = ``(−mean(Â · log π), mean((R − V)²))``;
    ``adv`` and ``returns`` are constants (no gradient flows into them).
    """
    pg_loss = -(adv * logp).mean()
    v_loss = (returns - values).pow(2).mean()
    return pg_loss, v_loss


def make_optimizer(params: list[nn.Parameter], p: A2CParams) -> torch.optim.Optimizer:
    """SB3's A2C optimizer: RMSprop(α 0.99, ε rms_prop_eps, no weight decay), or Adam(ε 1e-5)."""
    if p.use_rms_prop:
        return torch.optim.RMSprop(params, lr=p.learning_rate, alpha=0.99, eps=p.rms_prop_eps, weight_decay=0,
                                   foreach=True)
    return torch.optim.Adam(params, lr=p.learning_rate, eps=1e-5, foreach=True)


class A2CGradient(NamedTuple):
    """What :func:`a2c_gradient` leaves besides the gradient itself (in ``flat.grad``)."""

    stats: PGStats
    obs: torch.Tensor  # (B, *obs_shape)
    actions: torch.Tensor  # (B,) or (B, d)
    advantages: torch.Tensor  # (B,) as used in the loss
    values: np.ndarray  # (B,) V(s) at collection time
    returns: np.ndarray  # (B,) the critic's targets


def a2c_gradient(ro: Rollout, policy: ActorCritic, flat: FlatParams, kern: ActorCriticKernel | None,
                 p: A2CParams, device: torch.device, ent_coef: float | None = None) -> A2CGradient:
    """Advantages of one rollout and the gradient of A2C's loss on it, written into ``flat.grad``
    (unclipped). A3C's workers call this too, so both algorithms take the very same gradient.
    ``ent_coef`` is the entropy coefficient now (its schedule's value); ``p.ent_coef`` by default."""
    ent_coef = p.ent_coef if ent_coef is None else ent_coef
    batch = ro.rewards.size
    values_np = ro.values.cpu().numpy()
    adv_np, ret_np = gae(ro.rewards, values_np, ro.next_values, ro.terminated, ro.ended, p.gamma, p.gae_lambda)
    adv_np, ret_np = adv_np.reshape(batch), ret_np.reshape(batch)
    if p.normalize_advantage:  # over the whole rollout (validated: batch > 1); ddof 1 as torch's std
        adv_np = standardize(adv_np)
    obs = ro.obs.reshape(batch, *ro.obs.shape[2:])
    actions = ro.actions.reshape(batch, *ro.actions.shape[2:])
    advantages = torch.from_numpy(adv_np).to(device)
    returns = torch.from_numpy(ret_np).to(device)

    if kern is None:
        pd, values = policy.dist_value(obs)
        logp = pd.log_prob(actions)
        pg_loss, v_loss = a2c_losses(logp, advantages, values, returns)
        entropy = pd.entropy().mean()
        loss = pg_loss + p.vf_coef * v_loss - ent_coef * entropy
        flat.zero_grad()
        loss.backward()
        st = PGStats(float(pg_loss.detach()), float(v_loss.detach()), float(entropy.detach()), 0.0, 0.0)
    else:  # the same loss and gradient through the NumPy kernel
        st = kern.pg_step(obs.numpy(), actions.numpy(), adv_np, ret_np, vf_coef=p.vf_coef, ent_coef=ent_coef)
    return A2CGradient(st, obs, actions, advantages, values_np.reshape(batch), ret_np)


def train(env_id: str, params: A2CParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    """Train A2C on ``env_id`` for at least ``timesteps`` env steps (whole rollouts, as SB3)."""
    p = params
    device, rng, envs, norm, policy = setup(env_id, p, seed, recorder)
    flat = FlatParams(list(policy.parameters()))
    optimizer = make_optimizer([flat.param], p)
    recorder.note_models(policy.parameters(), [optimizer])
    # Small MLPs on the CPU act and take gradients through NumPy (npkernel.py says why);
    # the loss is the one the torch branch of the update states, checked against it in the tests.
    collector = rollout_collector(envs, policy, norm, p, seed=seed, device=device, rng=rng)
    kern = collector.kernel

    # Derived sizes, in one place.
    budget = Rollouts(timesteps, p.n_steps * p.n_envs)
    batch = budget.batch
    gen = torch_generator(rng)

    def update(s: ScheduleValues) -> dict[str, float]:
        # -- rollout, advantages and the gradient of the loss -------------------
        ro = collector.collect(p.n_steps)
        st, obs, actions, advantages, values_np, ret_np = a2c_gradient(ro, policy, flat, kern, p, device, s.ent_coef)
        gnorm = flat.clip_grad_norm(p.max_grad_norm)
        optimizer.step()

        # -- diagnostics ---------------------------------------------------------
        # k3 = E[(r − 1) − log r], r = π_new/π_old on the rollout (Schulman 2020,
        # "Approximating KL divergence"), as ppo.py; π_old is the pre-update policy,
        # whose log-probs the rollout recorded.
        if kern is None:
            with torch.no_grad():
                log_ratio = (policy.dist(obs).log_prob(actions) - ro.logp.reshape(batch)).cpu().numpy()
        else:
            log_ratio = kern.log_prob(obs.numpy(), actions.numpy()) - ro.logp.reshape(batch).numpy()
        diag = {
            "loss/policy": st.policy_loss,
            "loss/value": st.value_loss,
            "policy/entropy": st.entropy,
            "policy/approx_kl": float((np.exp(log_ratio) - 1 - log_ratio).mean()),
            "grad/norm": float(gnorm),
            "value/explained_variance": explained_variance(values_np, ret_np),
            **s.diagnostics(p),
        }
        if not policy.discrete:
            diag["policy/log_std"] = float(policy.log_std.detach().mean())
        if p.grad_noise_chunks:
            # Measured after the step, on the updated policy with this rollout's advantages (as ppo.py).
            def pg_loss_of(idx: torch.Tensor) -> torch.Tensor:
                return -(policy.dist(obs[idx]).log_prob(actions[idx]) * advantages[idx]).mean()

            diag["grad/noise_ratio"] = grad_noise_ratio(pg_loss_of, policy.actor_parameters(), batch,
                                                        p.grad_noise_chunks, gen)
        return diag

    state = TrainState(modules={"policy": policy}, optimizers={"optimizer": optimizer}, norm=norm, rng=rng,
                       generators={"minibatch": gen}, envs=envs, holder=collector)  # for checkpoints (resume.py)
    drive(budget, p, update, recorder, policy=lambda: savable(collector.policy_fn(), policy, norm),
          optimizers=[optimizer], state=state)
    envs.close()
