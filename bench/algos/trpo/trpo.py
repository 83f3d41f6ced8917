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
hyperparameters run the same algorithm; ``tests/test_sb3_parity.py`` checks it update
for update. Compared with sb3-contrib, line by line (docs/parity.md, "Differences, line
by line"):

- **The line search measures KL(π_θ ‖ π_old)**, sb3-contrib's direction, and accepts a
  step only when it is strictly below δ (``kl < target_kl``) and the surrogate strictly
  improves, as sb3-contrib does. The paper (its eq. 12) and the reference code (modular_rl,
  OpenAI Baselines) bound KL(π_old ‖ π_θ) instead. Both KLs have the Fisher as their Hessian
  at θ_old, so the direction x and the full step β are the same; but β is sized so that the
  quadratic model's KL of the full step is about δ, so whether the full step is accepted is
  decided by the cubic term, whose sign flips with the direction (a Gaussian whose log-std
  drops by Δ: KL(old ‖ new) ≈ Δ² + ⅔|Δ|³, KL(new ‖ old) ≈ Δ² − ⅔|Δ|³). On CartPole the
  two directions disagreed on the first accepted step in 11% of updates (own measurement,
  docs/parity.md), so the benchmark follows sb3-contrib, whose runs it pools with these.
- **The KL of a d-dimensional Gaussian policy is averaged over its action dimensions**
  (``kl_action_dims: mean``, the default), as sb3-contrib measures it: SB3's diagonal Gaussian
  is a per-dimension torch ``Normal``, and sb3-contrib takes ``kl_divergence(...).mean()`` over
  samples *and* dimensions. So δ bounds the KL per dimension, and one step may move the policy by
  up to d·δ in the KL between action distributions (the paper's quantity, ``kl_action_dims:
  sum``). The Fisher used by CG is that of the same averaged KL (F/d), so the damping weighs d
  times more against it. One-dimensional and discrete policies are unaffected. Own TRPO used the
  paper's sum until issue 19's parity check: on LunarLanderContinuous-v3 (d = 2) it solved 0/5
  seeds against sb3-contrib's 4/5, its log-std falling half as fast; the zoo's ``target_kl``
  values were tuned under the mean, and pooling own with sb3-contrib needs the same trust region.
- **CG starts from x₀ = 0** (plain CG); sb3-contrib starts from 1e-4·N(0, I) to avoid a
  0/0 when g is tiny, which :func:`~bench.algos.npg.npg.conjugate_gradient` guards against by
  stopping on a zero residual. Deliberate: it moves x by about 1e-4 relative.

TRPO is NPG (:mod:`bench.algos.npg.npg`) plus the line search: the direction x, β and
the training loop are NPG's (:func:`bench.algos.npg.npg.natural_step`,
:func:`bench.algos.npg.npg.train_natural`); this module adds only the KL-checked
backtracking line search on β·x.
"""

from __future__ import annotations

import torch

from bench.algos.trpo.spec import TRPOParams
from bench.algos.npg.npg import (  # noqa: F401  (re-exported: TRPO's natural-gradient pieces are NPG's)
    NaturalStep, StepResult, conjugate_gradient, fisher_vector_product, flat_grad, frozen_dist, kl_gradient,
    mean_kl, natural_direction, natural_step, set_parameters_, train_natural,
)
from bench.algos.policy import ActorCritic
from bench.storage.record import RecorderProtocol


def policy_step(policy: ActorCritic, obs: torch.Tensor, actions: torch.Tensor, old_logp: torch.Tensor,
                adv: torch.Tensor, *, target_kl: float, cg_max_steps: int, cg_damping: float,
                shrink: float, max_iter: int, kl_per_dim: bool = False) -> StepResult:
    """One TRPO update of ``policy.actor_parameters()`` on a fixed batch (in place):
    NPG's full step β·x, then backtracking β·shrinkᵏ until the surrogate improves
    and the mean KL(π_θ ‖ π_old) < δ (sb3-contrib's rule; the module docstring says why),
    else θ_old is restored. ``kl_per_dim``: a Gaussian's KL is averaged over its action
    dimensions, in the Fisher and the line search alike (``kl_action_dims: mean``)."""
    params = policy.actor_parameters()
    st = natural_step(policy, obs, actions, old_logp, adv, target_kl=target_kl, cg_max_steps=cg_max_steps,
                      cg_damping=cg_damping, kl_per_dim=kl_per_dim)
    if st.beta == 0.0:
        return StepResult(st.surrogate, st.grad_norm, False, 0.0, 0.0, 0)

    frac = 1.0
    with torch.no_grad():
        for k in range(max_iter):
            set_parameters_(params, st.theta0 + (frac * st.beta) * st.x)
            new = policy.dist(obs)
            new_surr = float((torch.exp(new.log_prob(actions) - old_logp) * adv).mean())
            kl = float(mean_kl(new, st.old, per_dim=kl_per_dim))
            if kl < target_kl and new_surr > st.surrogate:
                return StepResult(st.surrogate, st.grad_norm, True, kl, frac, k + 1)
            frac *= shrink
        set_parameters_(params, st.theta0)
    return StepResult(st.surrogate, st.grad_norm, False, 0.0, 0.0, max_iter)


def train(env_id: str, params: TRPOParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    """Train TRPO on ``env_id`` for at least ``timesteps`` env steps (whole rollouts, as sb3-contrib)."""
    p = params

    def step(policy: ActorCritic, obs: torch.Tensor, actions: torch.Tensor, old_logp: torch.Tensor,
             adv: torch.Tensor) -> StepResult:
        return policy_step(policy, obs, actions, old_logp, adv, target_kl=p.target_kl,
                           cg_max_steps=p.cg_max_steps, cg_damping=p.cg_damping,
                           shrink=p.line_search_shrinking_factor, max_iter=p.line_search_max_iter,
                           kl_per_dim=p.kl_action_dims == "mean")

    train_natural(env_id, p, step, "trpo", seed=seed, timesteps=timesteps, recorder=recorder)
