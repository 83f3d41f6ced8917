"""Group Relative Policy Optimization (Shao et al. 2024, "DeepSeekMath: Pushing the Limits of
Mathematical Reasoning in Open Language Models", §4.1, eq. 3), for episodic Gymnasium tasks.

Per update: ``groups_per_update`` groups; each group is ``group_size`` (G) whole episodes that
all start from the same initial state (every episode of the group is reset with the same seed,
as the paper samples G outputs for one question). There is no critic. Advantages (``advantage``):

- outcome (§4.1.2): every step of episode i gets  Â_i = (R_i − mean(R)) / std(R)  over its group;
- process (§4.1.3): step rewards are standardised over all steps of the group, r̃ = (r − mean) / std,
  and Â_{i,t} = Σ_{j ≥ t} γ^{j−t} r̃_{i,j}.

Then ``n_epochs`` full-batch Adam steps maximise eq. 3,

    J = 1/G Σ_i 1/|o_i| Σ_t [ min(ρ Â, clip(ρ, 1 − ε, 1 + ε) Â) − β D_KL ],   ρ = π(a|s) / π_old(a|s),
    D_KL = π_ref/π − log(π_ref/π) − 1   (eq. 4: the k3 estimator, Schulman 2020, unbiased for KL(π ‖ π_ref)),

averaged over the groups of the batch, with global gradient-norm clipping. π_ref is frozen: the
initial policy, or the actor of a saved bench policy (``ref_checkpoint``).

Episodes are whole: the budget is met at the end of the update that reaches it. Truncated
episodes (time limits) keep the return of the steps seen (no critic to bootstrap from). With
``normalize`` the observations are standardised by running statistics shared by policy and
reference, so the reference sees today's scaling of the inputs it was trained on.
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn as nn

from bench.algos.checkpoint import savable
from bench.algos.collect import Group, GroupCollector
from bench.algos.common import Normalizer, episode_cap, pick_device, seed_everything
from bench.algos.loop import ScheduleValues, Steps, drive
from bench.algos.resume import TrainState
from bench.algos.grpo.spec import GRPOParams
from bench.algos.policy import ActorCritic, make_policy
from bench.algos.sequence_policy import SequenceActorCritic, episode_scores, reward_model_parameters, sft_reference
from bench.envs import make_vec_env
from bench.storage.record import RecorderProtocol

#: Added to a group's std (a group whose returns are all equal gets zero advantages, not NaN).
STD_EPS = 1e-8


# --------------------------------------------------------------------------- #
# Advantages and loss, as pure functions
# --------------------------------------------------------------------------- #
def group_advantages(returns: np.ndarray) -> np.ndarray:
    """Outcome supervision: ``(K, G)`` returns of K groups → ``(R − mean) / (std + eps)`` per group (row).

    The std has ddof 1 (torch's ``std``, as TRL's GRPO trainer), so G = 2 gives ±1/√2 · sign.
    """
    r = np.asarray(returns, dtype=np.float64)
    return (r - r.mean(axis=1, keepdims=True)) / (r.std(axis=1, ddof=1, keepdims=True) + STD_EPS)


def baseline_advantages(returns: np.ndarray, kind: str) -> np.ndarray:
    """REINFORCE's baselines over a group, unscaled: ``(K, G)`` returns → advantages ``(K, G)``.

    - ``rloo``: ``R_i − 1/(G−1) Σ_{j≠i} R_j``, the leave-one-out baseline (Kool et al. 2019, "Buy 4
      REINFORCE samples, get a baseline for free!"; Ahmadian et al. 2024, RLOO): unbiased, since the
      baseline of sample i does not depend on sample i. Equal to ``G/(G−1) (R_i − mean R)``.
    - ``mean``: ``R_i − mean R``, the group mean including sample i (slightly biased by it).
    """
    r = np.asarray(returns, dtype=np.float64)
    g = r.shape[1]
    if kind == "rloo":
        return r - (r.sum(axis=1, keepdims=True) - r) / (g - 1)
    if kind == "mean":
        return r - r.mean(axis=1, keepdims=True)
    raise ValueError(f"unknown baseline {kind!r}; allowed: rloo, mean")


def process_advantages(rewards: list[np.ndarray], gamma: float) -> list[np.ndarray]:
    """Process supervision for one group: the G episodes' step rewards (each ``(T_i,)``) → Â per step.

    r̃ = (r − mean) / (std + eps) over all steps of the group (ddof 1), then Â_t = Σ_{j≥t} γ^{j−t} r̃_j.
    """
    pooled = np.concatenate(rewards).astype(np.float64)
    mu, sd = pooled.mean(), pooled.std(ddof=1) + STD_EPS
    out = []
    for r in rewards:
        z = (np.asarray(r, dtype=np.float64) - mu) / sd
        a = np.empty_like(z)
        acc = 0.0
        for t in range(len(z) - 1, -1, -1):
            acc = z[t] + gamma * acc
            a[t] = acc
        out.append(a)
    return out


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-sample k3 estimate of KL(π ‖ π_ref) from samples of π: π_ref/π − log(π_ref/π) − 1 (≥ 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def step_weights(lengths: np.ndarray) -> np.ndarray:
    """Eq. 3's averaging as a weight per step: episode i's ``lengths[i]`` steps get 1 / (|o_i| · episodes) each."""
    lengths = np.asarray(lengths)
    return np.repeat(1.0 / (lengths * len(lengths)), lengths)


class GRPOLoss(NamedTuple):
    loss: torch.Tensor  # −J, what is minimised
    surrogate: torch.Tensor  # the weighted clipped surrogate alone (J's first term)
    kl_ref: torch.Tensor  # the weighted k3 KL to the reference
    clip_fraction: torch.Tensor


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, adv: torch.Tensor,
              weights: torch.Tensor, clip_range: float, kl_coef: float) -> GRPOLoss:
    """Minus eq. 3 on a batch of steps, all ``(B,)``; ``weights`` sum to 1 (1 / (|o_i| · episodes))."""
    ratio = torch.exp(logp - old_logp)
    surr = torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * adv)
    kl = k3_kl(logp, ref_logp)
    surrogate = (weights * surr).sum()
    kl_ref = (weights * kl).sum()
    clip_frac = ((ratio - 1).abs() > clip_range).float().mean()
    return GRPOLoss(-(surrogate - kl_coef * kl_ref), surrogate, kl_ref, clip_frac)


# --------------------------------------------------------------------------- #
# The frozen reference
# --------------------------------------------------------------------------- #
def reference_policy(policy: ActorCritic, checkpoint: str | None) -> ActorCritic:
    """A frozen copy of ``policy``'s actor: the policy as it is now, or loaded from ``checkpoint``."""
    ref = copy.deepcopy(policy)
    if checkpoint is not None:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        wanted = {k for k in ref.state_dict()}
        missing = sorted(wanted - set(state))
        if missing:
            raise ValueError(f"ref_checkpoint {checkpoint!r} lacks the actor entries {missing}; it must be the "
                             f"state_dict of a bench policy with this env's spaces and net_arch")
        ref.load_state_dict({k: state[k] for k in wanted})
    for q in ref.parameters():
        q.requires_grad_(False)
    return ref


def policy_and_reference(env_id: str, p: GRPOParams, policy: ActorCritic, device: torch.device) -> tuple[Any, Any]:
    """The trained policy and its frozen reference. ``policy: mlp``: ``policy`` (from
    :func:`~bench.algos.policy.make_policy`) without its critic, which GRPO has no use for, and
    :func:`reference_policy`. ``policy: sequence`` (the language-model setting: G answers to one prompt):
    two copies of the task's SFT reference, one trained (its value head carried, never trained), one frozen."""
    if p.policy != "sequence":
        policy.vf = None  # no memory held for a critic
        return policy, reference_policy(policy, p.ref_checkpoint)
    sft = sft_reference(env_id)
    policy, ref = SequenceActorCritic(sft).to(device), SequenceActorCritic(sft).to(device)
    ref.requires_grad_(False)
    policy.net.value.requires_grad_(False)
    return policy, ref


class EpochStats(NamedTuple):
    """What one full-batch step reports: its loss, KL to the reference, clip fraction and entropy."""

    loss: float
    kl_ref: float
    clip_fraction: float
    entropy: float


def play_groups(collector: GroupCollector, rng: np.random.Generator, n: int, cap: int) -> list[Group]:
    """Up to ``n`` groups in at most ``cap`` env steps, each from a prompt (reset seed) drawn from ``rng``; fewer
    where one is cut at the cap (it is dropped, and the run ends with this update)."""
    groups: list[Group] = []
    for _ in range(n):
        g = collector.play(int(rng.integers(2**31)), cap - sum(int(x.lengths.sum()) for x in groups))
        if g is None:
            break
        groups.append(g)
    return groups


def step_advantages(groups: list[Group], p: GRPOParams) -> np.ndarray:
    """Every step's advantage, the groups' episodes in order: its episode's (outcome: standardised in the group;
    rloo / mean: minus the others' or the group's mean), or per step (process supervision)."""
    if p.advantage in ("outcome", "rloo", "mean"):
        disc = [np.array([(r * p.gamma ** np.arange(len(r))).sum() for r in g.rewards]) for g in groups]
        a_ep = (group_advantages(np.stack(disc)) if p.advantage == "outcome"
                else baseline_advantages(np.stack(disc), p.advantage))  # (K, G)
        return np.concatenate([np.repeat(a_ep[k], g.lengths) for k, g in enumerate(groups)])
    return np.concatenate([a for g in groups for a in process_advantages(g.rewards, p.gamma)])


def run_epochs(policy: Any, optimizer: torch.optim.Optimizer, trained: list[nn.Parameter], obs: torch.Tensor,
               actions: torch.Tensor, fixed: tuple[torch.Tensor, ...], p: GRPOParams,
               ) -> tuple[list[EpochStats], list[float]]:
    """``n_epochs`` full-batch steps on :func:`grpo_loss`; ``fixed`` = (log π_old, log π_ref, Â, step weights).
    Returns each step's stats and gradient norm (before clipping)."""
    old_logp, ref_logp, adv, weights = fixed
    stats, gnorms = [], []
    for _epoch in range(p.n_epochs):
        pd = policy.dist(obs)
        out = grpo_loss(pd.log_prob(actions), old_logp, ref_logp, adv, weights, p.clip_range, p.kl_coef)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        gnorms.append(float(nn.utils.clip_grad_norm_(trained, p.max_grad_norm)))
        optimizer.step()
        stats.append(EpochStats(float(out.loss.detach()), float(out.kl_ref.detach()), float(out.clip_fraction),
                                float(pd.entropy().mean().detach())))
    return stats, gnorms


# --------------------------------------------------------------------------- #
# Training
# --------------------------------------------------------------------------- #
def train(env_id: str, params: GRPOParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    """Train GRPO on ``env_id`` until at least ``timesteps`` env steps (whole groups of episodes)."""
    p = params
    # The start of every run (common.setup's order), with G training envs recording like every algorithm's.
    device = pick_device(p.device)
    rng = seed_everything(seed)
    envs = make_vec_env(env_id, p.group_size, recorder=recorder, vec_env=p.vec_env)
    norm = Normalizer(envs.single_observation_space.shape, p.group_size, p.gamma, obs=p.normalize_obs, reward=False)
    policy = make_policy(envs, p).to(device)
    policy, ref = policy_and_reference(env_id, p, policy, device)
    trained = [q for q in policy.parameters() if q.requires_grad]
    optimizer = torch.optim.Adam(trained, lr=p.learning_rate)
    recorder.note_models(trained, [optimizer],
                         other=[*ref.parameters(), *reward_model_parameters(envs)])  # a preference task's
    collector = GroupCollector(envs, policy, norm, device)

    budget = Steps(timesteps)

    def update(s: ScheduleValues) -> dict[str, float] | None:
        # -- groups and their advantages -----------------------------------------
        # On an env whose episodes need not end, the update stops one rollout past the budget. A group cut
        # there is dropped: its advantages compare whole episodes' returns (Shao et al. 2024, eq. 3), and a
        # cut one has none, nor a critic to bootstrap from. The groups completed before it make the last
        # update, and the run ends.
        cap = episode_cap(envs, budget.left, p.groups_per_update * p.group_size,
                          episodes_per_env=p.groups_per_update)
        groups = play_groups(collector, rng, p.groups_per_update, cap)
        # The recorder counts every env step taken, a dropped group's too.
        budget.spend(recorder.steps - budget.done)
        if len(groups) < p.groups_per_update:
            budget.stop()  # cut at the budget: this update is the last
        if not groups:
            return None
        adv_np = step_advantages(groups, p)
        lengths = np.concatenate([g.lengths for g in groups])
        w_np = step_weights(lengths)  # each episode weighs 1 / episodes, spread evenly over its steps
        obs = torch.as_tensor(np.concatenate([g.obs for g in groups]), device=device)
        actions = torch.as_tensor(np.concatenate([g.actions for g in groups]), device=device)
        adv = torch.as_tensor(adv_np, dtype=torch.float32, device=device)
        weights = torch.as_tensor(w_np, dtype=torch.float32, device=device)
        with torch.no_grad():
            old_logp = policy.dist(obs).log_prob(actions)
            ref_logp = ref.dist(obs).log_prob(actions)

        # -- update: n_epochs full-batch steps -------------------------------------
        stats, gnorms = run_epochs(policy, optimizer, trained, obs, actions, (old_logp, ref_logp, adv, weights), p)

        # -- diagnostics -----------------------------------------------------------
        with torch.no_grad():
            # k3 = E[(r − 1) − log r], r = π_new/π_old: how far this update moved (as ppo.py).
            log_ratio = policy.dist(obs).log_prob(actions) - old_logp
            approx_kl = float((log_ratio.exp() - 1 - log_ratio).mean())
        m = EpochStats(*np.mean(np.asarray(stats), axis=0))  # each field's mean over the epochs
        returns = [np.array([r.sum() for r in g.rewards]) for g in groups]
        diag = {
            "loss/policy": float(m.loss),
            "policy/kl_ref": float(m.kl_ref),
            "policy/clip_fraction": float(m.clip_fraction),
            "policy/entropy": float(m.entropy),
            "policy/approx_kl": approx_kl,
            "grad/norm": float(np.mean(gnorms)),
            **s.diagnostics(p),
            "train/episodes": float(len(lengths)),
            "train/batch_steps": float(len(adv_np)),
            # Mean within-group std of the returns: 0 means no group tells its episodes apart (no signal).
            "grpo/group_return_std": float(np.mean([r.std() for r in returns])),
        }
        if not policy.discrete:
            diag["policy/log_std"] = float(policy.log_std.detach().mean())
        diag.update(episode_scores(envs))  # a sequence task's exact match and scores; none elsewhere
        return diag

    # For checkpoints (resume.py): no episode is in progress between updates (each group resets with a seed).
    state = TrainState(modules={"policy": policy, "reference": ref}, optimizers={"adam": optimizer}, norm=norm,
                       rng=rng, unsupported="the sequence policy's terms are not kept" if p.policy == "sequence" else None)
    drive(budget, p, update, recorder, policy=lambda: savable(collector.policy_fn(), policy, norm),
          optimizers=[optimizer], state=state)
    envs.close()
