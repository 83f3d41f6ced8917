"""Proximal Policy Optimization (Schulman et al. 2017, "Proximal Policy Optimization Algorithms").

Per iteration: collect ``n_steps`` on each of ``n_envs`` envs, compute GAE(λ)
advantages, then take ``n_epochs`` passes of shuffled minibatches over the batch,
minimising

    L = −E[min(r·Â, clip(r, 1−ε, 1+ε)·Â)] + c_v·E[(V − R)²] − c_e·E[H(π)],
    r = π(a|s) / π_old(a|s)

(the paper's eq. 7 and 9). Options follow SB3's PPO, whose names the config
uses: value clipping (``clip_range_vf``), target-KL early stop, linear learning
rate / clip-range decay, advantage normalisation per minibatch, global gradient
clipping, and VecNormalize-style observation/reward normalisation
(``normalize``; the zoo turns it on for continuous control).
Implementation details follow Huang et al. 2022, "The 37 Implementation Details
of PPO", and SB3 2.9, so that ``impl: bench`` and ``impl: sb3`` with the same
hyperparameters run the same algorithm. One deliberate difference (docs/parity.md,
"Differences, line by line"): a linear learning-rate or clip-range schedule takes the
progress at the start of update k, 1 − k/n, where SB3 takes it after the update's rollout,
1 − (k+1)·batch/budget; own PPO's schedule runs one update ahead and never reaches 0 (SB3's
last update of a budget that is a whole number of rollouts has learning rate 0).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np
import torch

from bench.algos.checkpoint import savable
from bench.algos.collect import Rollout, rollout_collector
from bench.algos.common import (
    FlatParams,
    explained_variance,
    fused_adam_step,
    gae,
    grad_noise_ratio,
    policy_gradient_loss,
    setup,
    standardized,
)
from bench.algos.loop import Rollouts, ScheduleValues, drive, scheduled, torch_generator
from bench.algos.npkernel import ActorCriticKernel, standardize
from bench.algos.resume import TrainState
from bench.algos.policy import PGStats
from bench.algos.ppo.spec import PPOParams
from bench.algos.sequence_policy import PolicyTerms, policy_terms
from bench.storage.record import RecorderProtocol


def ppo_losses(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    clip_range: float,
    clip_range_vf: float | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clipped surrogate and value losses on one minibatch, all ``(B,)`` in.

    Returns ``(policy_loss, value_loss, clip_fraction)``. The value loss is
    ``E[(V − R)²]``, or with ``clip_range_vf`` the value prediction is kept within
    ±clip_range_vf of the old one (SB3's variant of the paper's value clipping).
    """
    ratio = torch.exp(logp - old_logp)
    pg_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * adv).mean()
    if clip_range_vf is not None:
        values = old_values + torch.clamp(values - old_values, -clip_range_vf, clip_range_vf)
    v_loss = (returns - values).pow(2).mean()
    clip_frac = ((ratio - 1).abs() > clip_range).float().mean()
    return pg_loss, v_loss, clip_frac


class Batch(NamedTuple):
    """One rollout as ``B = n_steps × n_envs`` samples with its GAE(λ) advantages and returns: what the
    epochs of minibatches reuse. Tensors ``(B, ...)``; ``adv`` and ``ret`` are the same as NumPy ``(B,)``."""

    obs: torch.Tensor
    actions: torch.Tensor
    old_logp: torch.Tensor
    old_values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    adv: np.ndarray
    ret: np.ndarray
    values: np.ndarray  # (T, N) V(s) at collection time


def rollout_batch(ro: Rollout, rewards: np.ndarray, p: PPOParams, device: torch.device) -> Batch:
    """GAE(λ) on the rollout ``ro`` with ``rewards`` (``(T, N)``, as the policy's terms shape them), flattened."""
    batch = ro.rewards.size
    values_np = ro.values.cpu().numpy()
    adv_np, ret_np = gae(rewards, values_np, ro.next_values, ro.terminated, ro.ended, p.gamma, p.gae_lambda)
    adv_np, ret_np = adv_np.reshape(batch), ret_np.reshape(batch)
    return Batch(ro.obs.reshape(batch, *ro.obs.shape[2:]), ro.actions.reshape(batch, *ro.actions.shape[2:]),
                 ro.logp.reshape(batch), ro.values.reshape(batch), torch.from_numpy(adv_np).to(device),
                 torch.from_numpy(ret_np).to(device), adv_np, ret_np, values_np)


def minibatch_grads(policy: Any, flat: FlatParams, terms: PolicyTerms, b: Batch, idx: torch.Tensor, p: PPOParams, *,
                    clip: float, ent_coef: float) -> PGStats:
    """The loss on minibatch ``idx`` of ``b`` and its gradient into ``flat.grad``, through autograd:
    L = clipped surrogate + c_v · value loss − c_e · entropy (+ the policy's own term)."""
    pd, values = policy.dist_value(b.obs[idx])
    logp = pd.log_prob(b.actions[idx])
    adv = b.advantages[idx]
    if p.normalize_advantage and len(idx) > 1:
        adv = standardized(adv)
    pg_loss, v_loss, clip_frac = ppo_losses(
        logp, b.old_logp[idx], adv, values, b.old_values[idx], b.returns[idx],
        clip, p.clip_range_vf,
    )
    entropy = pd.entropy().mean()
    loss = terms.loss(pg_loss + p.vf_coef * v_loss - ent_coef * entropy, logp, idx)
    flat.zero_grad()
    loss.backward()
    with torch.no_grad():
        # Low-variance KL estimator k3 = E[(r − 1) − log r] (Schulman 2020, "Approximating KL
        # divergence", http://joschu.net/blog/kl-approx.html), as SB3 and CleanRL use.
        log_ratio = logp - b.old_logp[idx]
        approx_kl = float((log_ratio.exp() - 1 - log_ratio).mean())
    return PGStats(float(pg_loss.detach()), float(v_loss.detach()), float(entropy.detach()), approx_kl,
                   float(clip_frac))


def minibatch_grads_numpy(kern: ActorCriticKernel, views: tuple[np.ndarray, ...], b: Batch, idx: torch.Tensor,
                          p: PPOParams, *, clip: float, ent_coef: float) -> PGStats:
    """:func:`minibatch_grads` through the NumPy kernel, on ``views`` (obs, actions, old log π, old V) of ``b``."""
    obs, actions, old_logp, old_values = views
    i = idx.numpy()
    adv = b.adv[i]
    if p.normalize_advantage and len(i) > 1:
        adv = standardize(adv)
    return kern.pg_step(obs[i], actions[i], adv, b.ret[i], vf_coef=p.vf_coef, ent_coef=ent_coef,
                        old_logp=old_logp[i], clip_range=clip, old_values=old_values[i],
                        clip_range_vf=p.clip_range_vf)


def run_epochs(grads: Callable[[torch.Tensor], PGStats], batch: int, p: PPOParams, flat: FlatParams,
               adam_step: Callable[[], None], gen: torch.Generator) -> tuple[list[PGStats], list[float]]:
    """``n_epochs`` passes of shuffled minibatches over one rollout of ``batch`` samples: each minibatch's
    gradient (``grads``), clipped, then one Adam step. Returns the steps' stats and gradient norms."""
    steps: list[PGStats] = []
    gnorms: list[float] = []
    for _epoch in range(p.n_epochs):
        for idx in torch.randperm(batch, generator=gen).split(p.batch_size):
            st = grads(idx)
            if p.target_kl is not None and st.approx_kl > 1.5 * p.target_kl:
                # SB3's rule: stop the epochs once KL exceeds 1.5 × target, before stepping.
                return steps, gnorms
            gnorms.append(flat.clip_grad_norm(p.max_grad_norm))
            adam_step()
            steps.append(st)
    return steps, gnorms


def grad_noise(policy: Any, b: Batch, p: PPOParams, gen: torch.Generator) -> float:
    """The gradient noise (:func:`~bench.algos.common.grad_noise_ratio`) of the policy-gradient term on the
    rollout ``b``, with the advantages standardised over the whole rollout where PPO standardises them."""
    adv = standardized(b.advantages) if p.normalize_advantage else b.advantages

    def pg_loss_of(idx: torch.Tensor) -> torch.Tensor:
        return policy_gradient_loss(policy.dist(b.obs[idx]).log_prob(b.actions[idx]), adv[idx])

    return grad_noise_ratio(pg_loss_of, policy.actor_parameters(), len(b.advantages), p.grad_noise_chunks, gen)


def train(env_id: str, params: PPOParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    """Train PPO on ``env_id`` for at least ``timesteps`` env steps (whole rollouts, as SB3)."""
    p = params
    device, rng, envs, norm, policy = setup(env_id, p, seed, recorder)
    # The policy's own terms: none for the MLP policy; the language-model policy brings its frozen SFT
    # reference, a KL penalty to it and its episode scores (bench.algos.sequence_policy.SequenceTerms).
    terms = policy_terms(env_id, p, envs, policy, device)
    policy = terms.policy
    # Adam with eps 1e-5, as SB3's ActorCriticPolicy and the PPO reference code. All
    # parameters live in one flat buffer and the kernel is fused, so clipping and the
    # step are a few ops per minibatch instead of ~10 per parameter tensor.
    # Trained parameters only: a sequence policy carries frozen parts (an unused head) beside them.
    flat = FlatParams([q for q in policy.parameters() if q.requires_grad])
    optimizer = torch.optim.Adam([flat.param], lr=p.learning_rate, eps=1e-5, fused=True)
    adam_step = fused_adam_step(optimizer)  # optimizer.step(), bit for bit, without its per-call Python layer
    # Every model the run holds: the trained policy and value, Adam's state, and what the policy keeps frozen.
    recorder.note_models([q for q in policy.parameters() if q.requires_grad], [optimizer],
                         other=terms.frozen_parameters())
    # Small MLPs on the CPU act and take gradients through NumPy (npkernel.py says why);
    # the loss is the one ``minibatch_grads`` states, checked against it in the tests.
    collector = rollout_collector(envs, policy, norm, p, seed=seed, device=device, rng=rng)
    kern = collector.kernel

    # Derived sizes, in one place.
    budget = Rollouts(timesteps, p.n_steps * p.n_envs)
    batch = budget.batch
    gen = torch_generator(rng)

    def update(s: ScheduleValues) -> dict[str, float]:
        clip = scheduled(p.clip_range, p.clip_range_schedule, s.progress_remaining)
        # -- rollout and advantages -------------------------------------------
        ro = collector.collect(p.n_steps)
        b = rollout_batch(ro, terms.rewards(ro), p, device)
        if kern is not None:  # the kernel's minibatches are zero-copy views of the (CPU) rollout
            views = tuple(x.numpy() for x in (b.obs, b.actions, b.old_logp, b.old_values))

            def grads(idx: torch.Tensor) -> PGStats:
                return minibatch_grads_numpy(kern, views, b, idx, p, clip=clip, ent_coef=s.ent_coef)
        else:
            def grads(idx: torch.Tensor) -> PGStats:
                return minibatch_grads(policy, flat, terms, b, idx, p, clip=clip, ent_coef=s.ent_coef)

        steps, gnorms = run_epochs(grads, batch, p, flat, adam_step, gen)
        # -- diagnostics ---------------------------------------------------------
        # Means over the minibatch steps taken (none when target-KL stopped the first one).
        diag = {**PGStats.mean(steps).diagnostics(), "grad/norm": float(np.mean(gnorms))} if steps else {}
        diag["value/explained_variance"] = explained_variance(b.values, b.ret)
        diag.update(s.diagnostics(p))
        if not policy.discrete:
            diag["policy/log_std"] = float(policy.log_std.detach().mean())
        diag.update(terms.diagnostics(envs))
        if p.grad_noise_chunks:
            diag["grad/noise_ratio"] = grad_noise(policy, b, p, gen)
        return diag

    # What a mid-run checkpoint keeps (bench.algos.resume); the language-model policy's terms are not kept.
    state = TrainState(modules={"policy": policy}, optimizers={"adam": optimizer}, norm=norm, rng=rng,
                       generators={"minibatch": gen}, envs=envs, holder=collector,
                       unsupported="the sequence policy's terms are not kept" if p.policy == "sequence" else None)
    drive(budget, p, update, recorder, policy=lambda: savable(collector.policy_fn(), policy, norm),
          optimizers=[optimizer], state=state)
    envs.close()
