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

import math

import numpy as np
import torch

from bench.algos.checkpoint import savable
from bench.algos.common import (Collector, FlatParams, ent_coef_at, explained_variance, fused_adam_step, gae,
                                grad_noise_ratio, linear, setup)
from bench.algos.npkernel import ActorCriticKernel, standardize, use_kernel
from bench.algos.policy import PGStats
from bench.algos.hyperparams import PPOParams
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


def train(env_id: str, params: PPOParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    """Train PPO on ``env_id`` for at least ``timesteps`` env steps (whole rollouts, as SB3)."""
    p = params
    device, rng, envs, norm, policy = setup(env_id, p, seed, recorder)
    seq = p.policy == "sequence"
    if seq:
        # The language-model setting: start from the task's SFT reference, keep it frozen for the KL.
        from bench.algos.sequence_policy import (SequenceActorCritic, drain_episode_infos, k3_kl,
                                                 reward_model_parameters, sft_reference)

        policy = SequenceActorCritic(sft_reference(env_id), separate_critic=p.critic == "separate").to(device)
    # Adam with eps 1e-5, as SB3's ActorCriticPolicy and the PPO reference code. All
    # parameters live in one flat buffer and the kernel is fused, so clipping and the
    # step are a few ops per minibatch instead of ~10 per parameter tensor.
    # Trained parameters only: a sequence policy carries frozen parts (an unused head) beside them.
    flat = FlatParams([q for q in policy.parameters() if q.requires_grad])
    optimizer = torch.optim.Adam([flat.param], lr=p.learning_rate, eps=1e-5, fused=True)
    adam_step = fused_adam_step(optimizer)  # optimizer.step(), bit for bit, without its per-call Python layer
    # Every model the run holds: the trained policy and value, Adam's state, and in the language-model setting
    # the frozen reference and the reward models of preference tasks.
    recorder.note_models([q for q in policy.parameters() if q.requires_grad], [optimizer],
                         other=[*policy.reference.parameters(), *reward_model_parameters(envs)] if seq else ())
    # Small MLPs on the CPU act and take gradients through NumPy (npkernel.py says why);
    # the loss is the one ``torch_grads`` below states, checked against it in the tests.
    kern = ActorCriticKernel(policy) if use_kernel(p.kernel, policy, device) else None
    collector = Collector(envs, policy, norm, seed=seed, device=device, kernel=kern, rng=rng,
                          sde_sample_freq=p.sde_sample_freq)

    # Derived sizes, in one place.
    batch = p.n_steps * p.n_envs
    n_iters = math.ceil(timesteps / batch)
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))

    for it in range(n_iters):
        progress_remaining = 1.0 - it / n_iters
        lr = linear(p.learning_rate, p.lr_schedule, progress_remaining)
        for g in optimizer.param_groups:
            g["lr"] = lr
        clip = linear(p.clip_range, p.clip_range_schedule, progress_remaining)
        ent_coef = ent_coef_at(p, progress_remaining)

        # -- rollout and advantages -------------------------------------------
        ro = collector.collect(p.n_steps)
        values_np = ro.values.cpu().numpy()
        rewards = ro.rewards
        if seq:
            ref_logp = policy.ref_logp(ro.obs, ro.actions)  # (T, N)
            kl_tokens = k3_kl(ro.logp, ref_logp)  # ≥ 0 per token, mean KL(π ‖ π_ref)
            if p.kl_in == "reward" and p.kl_coef > 0:
                # InstructGPT's per-token penalty, r_t − β (log π(a_t|s_t) − log π_ref(a_t|s_t)).
                rewards = rewards - p.kl_coef * (ro.logp - ref_logp).cpu().numpy()
            ref_logp_flat = ref_logp.reshape(batch)
        adv_np, ret_np = gae(rewards, values_np, ro.next_values, ro.terminated, ro.ended, p.gamma, p.gae_lambda)
        adv_np, ret_np = adv_np.reshape(batch), ret_np.reshape(batch)
        obs = ro.obs.reshape(batch, *ro.obs.shape[2:])
        actions = ro.actions.reshape(batch, *ro.actions.shape[2:])
        old_logp, old_values = ro.logp.reshape(batch), ro.values.reshape(batch)
        advantages = torch.from_numpy(adv_np).to(device)
        returns = torch.from_numpy(ret_np).to(device)

        def torch_grads(idx: torch.Tensor) -> PGStats:
            """The loss on minibatch ``idx`` and its gradient into ``flat.grad``, through autograd."""
            pd, values = policy.dist_value(obs[idx])
            logp = pd.log_prob(actions[idx])
            adv = advantages[idx]
            if p.normalize_advantage and len(idx) > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg_loss, v_loss, clip_frac = ppo_losses(
                logp, old_logp[idx], adv, values, old_values[idx], returns[idx],
                clip, p.clip_range_vf,
            )
            entropy = pd.entropy().mean()
            loss = pg_loss + p.vf_coef * v_loss - ent_coef * entropy
            if seq and p.kl_in == "loss" and p.kl_coef > 0:
                loss = loss + p.kl_coef * k3_kl(logp, ref_logp_flat[idx]).mean()  # GRPO's placement
            flat.zero_grad()
            loss.backward()
            with torch.no_grad():
                # Low-variance KL estimator k3 = E[(r − 1) − log r] (Schulman 2020, "Approximating KL
                # divergence", http://joschu.net/blog/kl-approx.html), as SB3 and CleanRL use.
                log_ratio = logp - old_logp[idx]
                approx_kl = float((log_ratio.exp() - 1 - log_ratio).mean())
            return PGStats(float(pg_loss.detach()), float(v_loss.detach()), float(entropy.detach()), approx_kl,
                           float(clip_frac))

        def numpy_grads(idx: torch.Tensor) -> PGStats:
            """The same, through the NumPy kernel on zero-copy views of the (CPU) rollout."""
            i = idx.numpy()
            adv = adv_np[i]
            if p.normalize_advantage and len(i) > 1:
                adv = standardize(adv)
            return kern.pg_step(obs_np[i], act_np[i], adv, ret_np[i], vf_coef=p.vf_coef, ent_coef=ent_coef,
                                old_logp=old_logp_np[i], clip_range=clip, old_values=old_values_np[i],
                                clip_range_vf=p.clip_range_vf)

        if kern is not None:
            obs_np, act_np, old_logp_np, old_values_np = (x.numpy() for x in (obs, actions, old_logp, old_values))

        # -- update: n_epochs of shuffled minibatches ---------------------------
        grads = numpy_grads if kern is not None else torch_grads
        steps: list[PGStats] = []
        gnorms: list[float] = []
        stop = False
        for _epoch in range(p.n_epochs):
            for idx in torch.randperm(batch, generator=gen).split(p.batch_size):
                st = grads(idx)
                if p.target_kl is not None and st.approx_kl > 1.5 * p.target_kl:
                    stop = True  # SB3's rule: stop the epochs once KL exceeds 1.5 × target, before stepping
                    break
                gnorms.append(flat.clip_grad_norm(p.max_grad_norm))
                adam_step()
                steps.append(st)
            if stop:
                break

        # -- diagnostics ---------------------------------------------------------
        # Means over the minibatch steps taken (none when target-KL stopped the first one).
        diag = {}
        if steps:
            m = np.mean(np.asarray(steps, dtype=np.float64), axis=0)
            diag = {"loss/policy": m[0], "loss/value": m[1], "policy/entropy": m[2], "policy/approx_kl": m[3],
                    "policy/clip_fraction": m[4], "grad/norm": float(np.mean(gnorms))}
            diag = {k: float(v) for k, v in diag.items()}
        diag["value/explained_variance"] = explained_variance(values_np, ret_np)
        diag["train/learning_rate"] = lr
        if p.ent_schedule != "constant":
            diag["train/ent_coef"] = ent_coef
        if not policy.discrete:
            diag["policy/log_std"] = float(policy.log_std.detach().mean())
        if seq:
            diag["kl/reference"] = float(kl_tokens.mean())
            done = drain_episode_infos(envs)
            for name in ("exact_match", "true_score", "proxy_score"):
                vals = [float(i[name]) for i in done if name in i]
                if vals:  # means over the episodes that ended in this rollout
                    diag[f"seq/{name}"] = float(np.mean(vals))
        if p.grad_noise_chunks:
            adv_n = (advantages - advantages.mean()) / (advantages.std() + 1e-8) if p.normalize_advantage else advantages

            def pg_loss_of(idx: torch.Tensor) -> torch.Tensor:
                return -(policy.dist(obs[idx]).log_prob(actions[idx]) * adv_n[idx]).mean()

            diag["grad/noise_ratio"] = grad_noise_ratio(pg_loss_of, policy.actor_parameters(), batch,
                                                        p.grad_noise_chunks, gen)
        recorder.diagnostics(diag)
        recorder.after_update(savable(collector.policy_fn(), policy, norm))
    envs.close()
