"""Natural Policy Gradient (Kakade 2001, "A Natural Policy Gradient"; in the form of
Rajeswaran et al. 2017, "Towards Generalization and Simplicity in Continuous Control",
Algorithm 1, with a normalised step size).

Per iteration: collect ``n_steps`` on each of ``n_envs`` envs, compute GAE(λ)
advantages (Schulman et al. 2016), then

1. **Policy step**: with g = ∇θ E[π_θ(a|s)/π_old(a|s) · Â] at θ_old (the vanilla policy
   gradient) and F the Fisher matrix (the Hessian of the mean KL(π_old ‖ π_θ) at
   θ_old), take x ≈ F⁻¹g from ``cg_max_steps`` conjugate-gradient iterations on
   Fisher-vector products F·v = ∇(∇KL · v) + ``cg_damping``·v, and step

       θ ← θ_old + sqrt(2δ / xᵀFx) · x          (Rajeswaran et al. 2017, eq. 5)

   where δ = ``target_kl`` is the normalised step size: the KL of the step under the
   quadratic model ½ ΔθᵀFΔθ. (xᵀFx = gᵀF⁻¹g once CG has converged; with CG's
   approximate x it is the quadratic model's KL of the direction actually taken.)
   There is no line search: the step is taken whatever its measured KL and
   surrogate. TRPO (:mod:`bench.algos.trpo.trpo`) is exactly this step followed by the
   KL-checked backtracking line search; it calls :func:`natural_step` below.
2. **Critic**: ``n_critic_updates`` epochs of shuffled minibatches of ``batch_size``
   minimising E[(V − R)²] with Adam over the critic's own parameters, as TRPO.

The training loop (:func:`train_natural`) is shared with TRPO; only the policy
step differs. NPG has no entropy term (neither has sb3-contrib's TRPO), and no SB3
or sb3-contrib counterpart: it runs as ``impl: bench`` only.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import numpy as np
import torch
from torch.nn.utils import parameters_to_vector

from bench.algos.checkpoint import savable
from bench.algos.collect import rollout_collector
from bench.algos.common import (
    FlatParams,
    explained_variance,
    fused_adam_step,
    gae,
    grad_noise_ratio,
    setup,
    standardized,
)
from bench.algos.loop import Rollouts, ScheduleValues, drive, torch_generator
from bench.algos.resume import TrainState
from bench.algos.npkernel import ActorCriticKernel
from bench.algos.policy import ActorCritic, CategoricalPd, GaussianPd, Pd
from bench.algos.npg.spec import NPGParams
from bench.storage.record import RecorderProtocol


# --------------------------------------------------------------------------- #
# Natural-gradient pieces (TRPO uses the same ones)
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
    log-std block of the Fisher), and a line search would compare θ with itself."""
    with torch.no_grad():
        pd = policy.dist(obs)
    return pd if isinstance(pd, CategoricalPd) else GaussianPd(pd.mean, pd.log_std.detach().clone())


def mean_kl(p: Pd, q: Pd, *, per_dim: bool = False) -> torch.Tensor:
    """E[KL(p ‖ q)] over the batch (a scalar). A diagonal Gaussian's KL is the sum of its ``d`` per-dimension
    KLs; with ``per_dim`` it is their mean instead, as sb3-contrib's TRPO measures it (``kl_divergence`` of
    SB3's per-dimension ``Normal`` then ``.mean()`` over samples and dimensions). Categorical KLs are unchanged."""
    kl = p.kl(q)
    if per_dim and isinstance(p, GaussianPd):
        kl = kl / p.mean.shape[-1]
    return kl.mean()


def kl_gradient(policy: ActorCritic, obs: torch.Tensor, params: list[torch.nn.Parameter]) -> torch.Tensor:
    """Flat ∇θ E[KL(π_old ‖ π_θ)] at θ = θ_old, with its graph kept for Fisher-vector products."""
    old = frozen_dist(policy, obs)
    kl = old.kl(policy.dist(obs)).mean()
    return flat_grad(kl, params, create_graph=True)


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


class NaturalStep(NamedTuple):
    """The natural-gradient step on one batch, before it is applied."""

    x: torch.Tensor  # direction ≈ F⁻¹g
    beta: float  # sqrt(2δ / xᵀFx): the full step is β·x; 0 when xᵀFx is not positive and finite
    theta0: torch.Tensor  # θ_old, flat
    old: Pd  # π_old on the batch, frozen
    surrogate: float  # L(θ_old) (the advantage mean, as the ratio is 1)
    grad_norm: float  # ‖g‖


def natural_step(policy: ActorCritic, obs: torch.Tensor, actions: torch.Tensor, old_logp: torch.Tensor,
                 adv: torch.Tensor, *, target_kl: float, cg_max_steps: int, cg_damping: float,
                 kl_per_dim: bool = False) -> NaturalStep:
    """Direction and size of the natural-gradient step of ``policy.actor_parameters()`` (nothing applied).
    ``kl_per_dim``: the Fisher is that of :func:`mean_kl` with ``per_dim`` (TRPO's ``kl_action_dims: mean``)."""
    params = policy.actor_parameters()
    old = frozen_dist(policy, obs)
    pd = policy.dist(obs)
    surr = (torch.exp(pd.log_prob(actions) - old_logp) * adv).mean()
    g = flat_grad(surr, params, retain_graph=True)
    x, xFx = natural_direction(flat_grad(mean_kl(old, pd, per_dim=kl_per_dim), params, create_graph=True), params, g,
                               cg_damping=cg_damping, cg_max_steps=cg_max_steps)
    surr0, gnorm = float(surr.detach()), float(g.norm())
    del pd  # free the graph (natural_direction's double-backward graph is gone)
    beta = math.sqrt(2.0 * target_kl / xFx) if (xFx > 0 and math.isfinite(xFx)) else 0.0
    theta0 = parameters_to_vector(params).detach()
    return NaturalStep(x, beta, theta0, old, surr0, gnorm)


class StepResult(NamedTuple):
    """What one policy step did (NPG's and TRPO's alike)."""

    surrogate: float  # L(θ_old) (the advantage mean, as the ratio is 1)
    grad_norm: float  # ‖g‖
    accepted: bool  # NPG: whether a step was taken at all (xᵀFx positive and finite)
    kl: float  # measured mean KL(π_new ‖ π_old) of the step taken (sb3-contrib's direction), 0 when none
    fraction: float  # step taken / β (TRPO's shrinkᵏ; NPG's 1), 0 when none
    line_search_iters: int  # surrogate/KL evaluations made (NPG: 0)


def npg_step(policy: ActorCritic, obs: torch.Tensor, actions: torch.Tensor, old_logp: torch.Tensor,
             adv: torch.Tensor, *, target_kl: float, cg_max_steps: int, cg_damping: float) -> StepResult:
    """One NPG update of ``policy.actor_parameters()`` on a fixed batch (in place): θ_old + β·x."""
    params = policy.actor_parameters()
    st = natural_step(policy, obs, actions, old_logp, adv, target_kl=target_kl, cg_max_steps=cg_max_steps,
                      cg_damping=cg_damping)
    if st.beta == 0.0:
        return StepResult(st.surrogate, st.grad_norm, False, 0.0, 0.0, 0)
    set_parameters_(params, st.theta0 + st.beta * st.x)
    with torch.no_grad():
        kl = float(policy.dist(obs).kl(st.old).mean())  # measured, for the record only (TRPO's direction)
    return StepResult(st.surrogate, st.grad_norm, True, kl, 1.0, 0)


# --------------------------------------------------------------------------- #
# Training loop (shared with TRPO)
# --------------------------------------------------------------------------- #
def fit_critic(policy: ActorCritic, critic: FlatParams, optimizer: torch.optim.Optimizer,
               kern: ActorCriticKernel | None, obs: torch.Tensor, returns: torch.Tensor, *, epochs: int,
               batch_size: int, generator: torch.Generator) -> list[float]:
    """``epochs`` passes of shuffled minibatches of ``batch_size`` (the last one shorter when it does not
    divide ``B``) minimising E[(V(s) − R)²] with ``optimizer`` over the critic's parameters ``critic``,
    as sb3-contrib's TRPO fits its critic. ``obs (B, ...)``, ``returns (B,)``; returns each minibatch's loss."""
    losses = []
    batch = returns.shape[0]
    adam_step = fused_adam_step(optimizer)  # optimizer.step(), bit for bit, without its per-call Python layer
    obs_np, ret_np = (obs.numpy(), returns.numpy()) if kern is not None else (None, None)  # the kernel is CPU-only
    for _epoch in range(epochs):
        for idx in torch.randperm(batch, generator=generator).split(batch_size):
            if kern is None:
                v_loss = (policy.value(obs[idx]) - returns[idx]).pow(2).mean()
                critic.zero_grad()
                v_loss.backward()
                losses.append(float(v_loss.detach()))
            else:  # the same loss and gradient through the NumPy kernel
                i = idx.numpy()
                losses.append(kern.value_step(obs_np[i], ret_np[i]))
            adam_step()
    return losses


#: ``step(policy, obs, actions, old_logp, adv) -> StepResult``: the policy update on one batch.
PolicyStep = Callable[[ActorCritic, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], StepResult]


def sub_sample(rollout: tuple[torch.Tensor, ...], p: Any, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """(obs, actions, log π_old, Â) of the policy step: every ``sub_sampling_factor``-th sample of a shuffle, as
    sb3-contrib sub-samples its shuffled buffer (all of them, in order, at 1); Â standardised where asked."""
    obs, actions, old_logp, advantages = rollout
    batch = len(advantages)
    sub = torch.randperm(batch, generator=gen)[::p.sub_sampling_factor] if p.sub_sampling_factor > 1 \
        else torch.arange(batch)
    s_adv = advantages[sub]
    if p.normalize_advantage and len(sub) > 1:
        s_adv = standardized(s_adv)
    return obs[sub], actions[sub], old_logp[sub], s_adv


def train_natural(env_id: str, p: Any, step_fn: PolicyStep, prefix: str, *, seed: int, timesteps: int,
                  recorder: RecorderProtocol) -> None:
    """The NPG / TRPO loop: rollout, GAE, ``step_fn`` on the actor, critic epochs, diagnostics.

    ``prefix`` namespaces the step's own diagnostics (``npg/…`` or ``trpo/…``).
    """
    device, rng, envs, norm, policy = setup(env_id, p, seed, recorder, share_features=False)
    actor_params = policy.actor_parameters()
    # Adam with eps 1e-5, as SB3's ActorCriticPolicy (the critic's optimizer in sb3-contrib's TRPO),
    # on the critic's parameters re-homed in one flat buffer (one fused step).
    critic = FlatParams(policy.critic_parameters())
    optimizer = torch.optim.Adam([critic.param], lr=p.learning_rate, eps=1e-5, fused=True)
    recorder.note_models(policy.parameters(), [optimizer])
    # Small MLPs on the CPU act and fit the critic through NumPy (npkernel.py says why). The
    # policy step stays in torch: the Fisher-vector products need double backward.
    collector = rollout_collector(envs, policy, norm, p, seed=seed, device=device, rng=rng)
    kern = collector.kernel

    # Derived sizes, in one place.
    budget = Rollouts(timesteps, p.n_steps * p.n_envs)
    batch = budget.batch
    n_sub = len(range(0, batch, p.sub_sampling_factor))  # samples in the policy step
    gen = torch_generator(rng)

    def update(s: ScheduleValues) -> dict[str, float]:
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
        s_obs, s_act, s_logp, s_adv = sub_sample((obs, actions, old_logp, advantages), p, gen)
        noise = None
        if p.grad_noise_chunks:
            # Noise of the surrogate's gradient g at θ_old (the one CG is given), over the actor.
            def surrogate_loss_of(idx: torch.Tensor) -> torch.Tensor:
                return -(torch.exp(policy.dist(s_obs[idx]).log_prob(s_act[idx]) - s_logp[idx]) * s_adv[idx]).mean()

            noise = grad_noise_ratio(surrogate_loss_of, actor_params, n_sub, p.grad_noise_chunks, gen)
        step = step_fn(policy, s_obs, s_act, s_logp, s_adv)

        # -- 2. critic: n_critic_updates epochs of shuffled minibatches -----------
        v_losses = fit_critic(policy, critic, optimizer, kern, obs, returns, epochs=p.n_critic_updates,
                              batch_size=p.batch_size, generator=gen)

        # -- diagnostics ---------------------------------------------------------
        with torch.no_grad():
            entropy = float(policy.dist(s_obs).entropy().mean())
        diag = {
            "loss/policy": -step.surrogate,
            "loss/value": float(np.mean(v_losses)),
            "policy/entropy": entropy,
            "policy/approx_kl": step.kl,
            f"{prefix}/step_accepted": float(step.accepted),
            f"{prefix}/step_fraction": step.fraction,
            **({"trpo/line_search_iters": float(step.line_search_iters)} if prefix == "trpo" else {}),
            "value/explained_variance": explained_variance(values_np, ret_np),
            "grad/norm": step.grad_norm,
            **s.diagnostics(p),
        }
        if not policy.discrete:
            diag["policy/log_std"] = float(policy.log_std.detach().mean())
        if noise is not None:
            diag["grad/noise_ratio"] = noise
        return diag

    state = TrainState(modules={"policy": policy}, optimizers={"critic": optimizer}, norm=norm, rng=rng,
                       generators={"minibatch": gen}, envs=envs, holder=collector)  # for checkpoints (resume.py)
    drive(budget, p, update, recorder, policy=lambda: savable(collector.policy_fn(), policy, norm),
          optimizers=[optimizer], state=state)
    envs.close()


def train(env_id: str, params: NPGParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    """Train NPG on ``env_id`` for at least ``timesteps`` env steps (whole rollouts)."""
    p = params

    def step(policy: ActorCritic, obs: torch.Tensor, actions: torch.Tensor, old_logp: torch.Tensor,
             adv: torch.Tensor) -> StepResult:
        return npg_step(policy, obs, actions, old_logp, adv, target_kl=p.target_kl, cg_max_steps=p.cg_max_steps,
                        cg_damping=p.cg_damping)

    train_natural(env_id, p, step, "npg", seed=seed, timesteps=timesteps, recorder=recorder)
