"""Trust Region Policy Optimization (Schulman et al. 2015, "Trust Region Policy Optimization").

Per iteration: collect ``n_steps`` on each of ``n_envs`` envs, compute GAE(λ)
advantages (Schulman et al. 2016), then

1. **Policy step** (the paper's practical algorithm, its section 6 and appendix C):
   maximise the surrogate  L(θ) = E[π_θ(a|s) / π_old(a|s) · Â]  subject to
   E[KL(π_old ‖ π_θ)] ≤ δ (``target_kl``). With g = ∇L and F the Fisher matrix
   (the Hessian of the mean KL at θ_old), the direction x ≈ F⁻¹g comes from
   ``cg_max_steps`` conjugate-gradient iterations on Fisher-vector products
   F·v = ∇(∇KL · v) + damping·v; the largest step is β = sqrt(2δ / xᵀFx); a
   backtracking line search over β·shrinkᵏ accepts the first step that improves
   the surrogate and keeps the mean KL within δ, or restores θ_old.
2. **Critic**: ``n_critic_updates`` epochs of shuffled minibatches of
   ``batch_size`` minimising E[(V − R)²] with Adam over the critic's own
   parameters (the policy is built with ``share_features=False``, so fitting the
   critic never moves the policy).

Options and names follow sb3-contrib 2.9's TRPO (``sub_sampling_factor``,
``line_search_*``, ``cg_*``, advantage normalisation over the (sub-sampled)
batch, Adam with eps 1e-5), so ``impl: bench`` and ``impl: sb3`` with the same
hyperparameters run the same algorithm. One difference: the line search bounds
KL(π_old ‖ π_θ), the paper's direction, where sb3-contrib bounds KL(π_θ ‖ π_old);
both have the same Hessian at θ_old, so the direction and β are the same.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
import torch
from torch.nn.utils import parameters_to_vector

from bench.algos.common import Collector, FlatParams, explained_variance, gae, grad_noise_ratio, linear, setup
from bench.algos.npkernel import ActorCriticKernel, use_kernel
from bench.algos.policy import ActorCritic, CategoricalPd, GaussianPd, Pd
from bench.algos.hyperparams import TRPOParams
from bench.run.record import RecorderProtocol


# --------------------------------------------------------------------------- #
# Natural-gradient pieces
# --------------------------------------------------------------------------- #
def flat_grad(y: torch.Tensor, params: list[torch.nn.Parameter], *, create_graph: bool = False,
              retain_graph: bool | None = None) -> torch.Tensor:
    """∂y/∂params as one flat vector (zeros for parameters y does not depend on)."""
    gs = torch.autograd.grad(y, params, create_graph=create_graph, retain_graph=retain_graph, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(gs, params)])


def conjugate_gradient(Avp: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor, iters: int,
                       residual_tol: float = 1e-10) -> torch.Tensor:
    """Approximately solve A x = b for symmetric positive-definite A, given only v ↦ A v.

    Plain CG from x₀ = 0 (Nocedal & Wright, algorithm 5.2): at most ``iters``
    products, stopping early once the squared residual ‖b − A x‖² < ``residual_tol``.
    """
    x = torch.zeros_like(b)
    r = b.clone()
    d = b.clone()
    rr = torch.dot(r, r)
    for _ in range(iters):
        if float(rr) < residual_tol:
            break
        Ad = Avp(d)
        alpha = rr / torch.dot(d, Ad)
        x.add_(alpha * d)
        r.sub_(alpha * Ad)
        rr_new = torch.dot(r, r)
        d = r + (rr_new / rr) * d
        rr = rr_new
    return x


def fisher_vector_product(grad_kl: torch.Tensor, params: list[torch.nn.Parameter], v: torch.Tensor,
                          damping: float = 0.0) -> torch.Tensor:
    """(F + damping·I) v, with F the Hessian of the mean KL w.r.t. the flattened ``params``.

    ``grad_kl`` is the flat gradient of the mean KL computed once with
    ``create_graph=True`` (see :func:`kl_gradient`); each product is then a single
    backward pass of ``grad_kl · v`` (Pearlmutter's trick), reusing that graph.
    """
    return flat_grad(torch.dot(grad_kl, v), params, retain_graph=True) + damping * v


def frozen_dist(policy: ActorCritic, obs: torch.Tensor) -> Pd:
    """π_old(·|obs) as constants. A Gaussian's log-std is the parameter itself, so it is
    copied: otherwise KL(π_old ‖ π_θ) would move with θ on both sides (and lose the
    log-std block of the Fisher), and the line search would compare θ with itself."""
    with torch.no_grad():
        pd = policy.dist(obs)
    return pd if isinstance(pd, CategoricalPd) else GaussianPd(pd.mean, pd.log_std.detach().clone())


def kl_gradient(policy: ActorCritic, obs: torch.Tensor, params: list[torch.nn.Parameter]) -> torch.Tensor:
    """Flat ∇θ E[KL(π_old ‖ π_θ)] at θ = θ_old, with its graph kept for Fisher-vector products."""
    old = frozen_dist(policy, obs)
    kl = old.kl(policy.dist(obs)).mean()
    return flat_grad(kl, params, create_graph=True)


class StepResult(NamedTuple):
    """What one policy step did."""

    surrogate: float  # L(θ_old) (the advantage mean, as the ratio is 1)
    grad_norm: float  # ‖g‖
    accepted: bool
    kl: float  # mean KL(π_old ‖ π_new) of the accepted step, 0 when rejected
    fraction: float  # accepted step / β (shrinkᵏ), 0 when rejected
    line_search_iters: int  # surrogate/KL evaluations made


def set_parameters_(params: list[torch.nn.Parameter], vec: torch.Tensor) -> None:
    """Copy the flat ``vec`` into ``params`` in place. (torch's ``vector_to_parameters``
    re-binds ``.data`` instead, which would leave views of the old storage, such as
    the NumPy kernel's, reading stale weights.)"""
    o = 0
    with torch.no_grad():
        for q in params:
            n = q.numel()
            q.copy_(vec[o:o + n].view_as(q))
            o += n


def natural_direction(grad_kl: torch.Tensor, params: list[torch.nn.Parameter], g: torch.Tensor, *,
                      cg_damping: float, cg_max_steps: int) -> tuple[torch.Tensor, float]:
    """x ≈ F⁻¹g by conjugate gradient on Fisher-vector products, and xᵀFx (for the step size)."""

    def Fv(v: torch.Tensor) -> torch.Tensor:
        return fisher_vector_product(grad_kl, params, v, cg_damping)

    x = conjugate_gradient(Fv, g, cg_max_steps)
    return x, float(torch.dot(x, Fv(x)))


def policy_step(policy: ActorCritic, obs: torch.Tensor, actions: torch.Tensor, old_logp: torch.Tensor,
                adv: torch.Tensor, *, target_kl: float, cg_max_steps: int, cg_damping: float,
                shrink: float, max_iter: int) -> StepResult:
    """One TRPO update of ``policy.actor_parameters()`` on a fixed batch (in place)."""
    params = policy.actor_parameters()
    old = frozen_dist(policy, obs)
    pd = policy.dist(obs)
    surr = (torch.exp(pd.log_prob(actions) - old_logp) * adv).mean()
    g = flat_grad(surr, params, retain_graph=True)
    x, xFx = natural_direction(flat_grad(old.kl(pd).mean(), params, create_graph=True), params, g,
                               cg_damping=cg_damping, cg_max_steps=cg_max_steps)
    surr0, gnorm = float(surr.detach()), float(g.norm())
    del pd  # free the graph before the line search (natural_direction's double-backward graph is gone)
    if not (xFx > 0 and math.isfinite(xFx)):
        return StepResult(surr0, gnorm, False, 0.0, 0.0, 0)
    beta = math.sqrt(2.0 * target_kl / xFx)

    theta0 = parameters_to_vector(params).detach()
    frac = 1.0
    with torch.no_grad():
        for k in range(max_iter):
            set_parameters_(params, theta0 + (frac * beta) * x)
            new = policy.dist(obs)
            new_surr = float((torch.exp(new.log_prob(actions) - old_logp) * adv).mean())
            kl = float(old.kl(new).mean())
            if kl <= target_kl and new_surr > surr0:
                return StepResult(surr0, gnorm, True, kl, frac, k + 1)
            frac *= shrink
        set_parameters_(params, theta0)
    return StepResult(surr0, gnorm, False, 0.0, 0.0, max_iter)


# --------------------------------------------------------------------------- #
# Training loop
# --------------------------------------------------------------------------- #
def train(env_id: str, params: TRPOParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    """Train TRPO on ``env_id`` for at least ``timesteps`` env steps (whole rollouts, as sb3-contrib)."""
    p = params
    device, rng, envs, norm, policy = setup(env_id, p, seed, recorder, share_features=False)
    actor_params = policy.actor_parameters()
    # Adam with eps 1e-5, as SB3's ActorCriticPolicy (the critic's optimizer in sb3-contrib's TRPO),
    # on the critic's parameters re-homed in one flat buffer (one fused step).
    critic = FlatParams(policy.critic_parameters())
    optimizer = torch.optim.Adam([critic.param], lr=p.learning_rate, eps=1e-5, fused=True)
    recorder.note_models(policy.parameters(), [optimizer])
    # Small MLPs on the CPU act and fit the critic through NumPy (npkernel.py says why). The
    # policy step stays in torch: the Fisher-vector products need double backward.
    kern = ActorCriticKernel(policy) if use_kernel(p.kernel, policy, device) else None
    collector = Collector(envs, policy, norm, seed=seed, device=device, kernel=kern, rng=rng)

    # Derived sizes, in one place.
    batch = p.n_steps * p.n_envs
    n_iters = math.ceil(timesteps / batch)
    n_sub = len(range(0, batch, p.sub_sampling_factor))  # samples in the policy step
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))

    for it in range(n_iters):
        lr = linear(p.learning_rate, p.lr_schedule, 1.0 - it / n_iters)
        for group in optimizer.param_groups:
            group["lr"] = lr

        # -- rollout and advantages -------------------------------------------
        ro = collector.collect(p.n_steps)
        values_np = ro.values.cpu().numpy()
        adv_np, ret_np = gae(ro.rewards, values_np, ro.next_values, ro.terminated, ro.ended, p.gamma, p.gae_lambda)
        adv_np, ret_np = adv_np.reshape(batch), ret_np.reshape(batch)
        obs = ro.obs.reshape(batch, *ro.obs.shape[2:])
        actions = ro.actions.reshape(batch, *ro.actions.shape[2:])
        old_logp = ro.logp.reshape(batch)
        advantages = torch.from_numpy(adv_np).to(device)
        returns = torch.from_numpy(ret_np).to(device)

        # -- 1. policy step on (a sub-sample of) the rollout ----------------------
        # sb3-contrib sub-samples every k-th transition of its shuffled buffer: a random subset.
        sub = torch.randperm(batch, generator=gen)[::p.sub_sampling_factor] if p.sub_sampling_factor > 1 \
            else torch.arange(batch)
        s_obs, s_act, s_logp, s_adv = obs[sub], actions[sub], old_logp[sub], advantages[sub]
        if p.normalize_advantage and n_sub > 1:
            s_adv = (s_adv - s_adv.mean()) / (s_adv.std() + 1e-8)
        noise = None
        if p.grad_noise_chunks:
            # Noise of the surrogate's gradient g at θ_old (the one CG is given), over the actor.
            def surrogate_loss_of(idx: torch.Tensor) -> torch.Tensor:
                return -(torch.exp(policy.dist(s_obs[idx]).log_prob(s_act[idx]) - s_logp[idx]) * s_adv[idx]).mean()

            noise = grad_noise_ratio(surrogate_loss_of, actor_params, n_sub, p.grad_noise_chunks, gen)
        step = policy_step(policy, s_obs, s_act, s_logp, s_adv, target_kl=p.target_kl,
                           cg_max_steps=p.cg_max_steps, cg_damping=p.cg_damping,
                           shrink=p.line_search_shrinking_factor, max_iter=p.line_search_max_iter)

        # -- 2. critic: n_critic_updates epochs of shuffled minibatches -----------
        v_losses = []
        obs_np = obs.numpy() if kern is not None else None  # the kernel runs on the CPU only
        for _epoch in range(p.n_critic_updates):
            for idx in torch.randperm(batch, generator=gen).split(p.batch_size):
                if kern is None:
                    v_loss = (policy.value(obs[idx]) - returns[idx]).pow(2).mean()
                    critic.zero_grad()
                    v_loss.backward()
                    v_losses.append(float(v_loss.detach()))
                else:  # the same loss and gradient through the NumPy kernel
                    i = idx.numpy()
                    v_losses.append(kern.value_step(obs_np[i], ret_np[i]))
                optimizer.step()

        # -- diagnostics ---------------------------------------------------------
        with torch.no_grad():
            entropy = float(policy.dist(s_obs).entropy().mean())
        diag = {
            "loss/policy": -step.surrogate,
            "loss/value": float(np.mean(v_losses)),
            "policy/entropy": entropy,
            "policy/approx_kl": step.kl,
            "trpo/step_accepted": float(step.accepted),
            "trpo/step_fraction": step.fraction,
            "trpo/line_search_iters": float(step.line_search_iters),
            "value/explained_variance": explained_variance(values_np, ret_np),
            "grad/norm": step.grad_norm,
            "train/learning_rate": lr,
        }
        if not policy.discrete:
            diag["policy/log_std"] = float(policy.log_std.detach().mean())
        if noise is not None:
            diag["grad/noise_ratio"] = noise
        recorder.diagnostics(diag)
        recorder.after_update(collector.policy_fn())
    envs.close()
