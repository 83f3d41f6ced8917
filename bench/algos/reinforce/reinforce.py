"""REINFORCE (Williams 1992, "Simple Statistical Gradient-Following Algorithms for
Connectionist Reinforcement Learning"), the Monte-Carlo policy gradient.

Per update: play whole episodes with the current policy, compute each step's
discounted return G_t, and take one gradient step on

    L = −E[(G_t − b(s_t)) · log π(a_t|s_t)] − c_e·E[H(π)]  (+ c_v·E[(V(s_t) − G_t)²])

with the baseline b (``baseline``): none (Williams' plain estimator), mean (the
batch's mean return, a constant baseline), or value (a learned V(s) fitted to
G_t by MSE in the same loss: "REINFORCE with baseline", Sutton & Barto 2018 §13.4).

Batches are whole episodes. :class:`EpisodeCollector` steps the vector env's
sub-envs itself, only those still needed: every env plays episodes until the
batch holds at least ``n_steps × n_envs`` steps, then an env whose episode ends
sits idle until the others' in-flight episodes are over. No episode is cut at an
update boundary, none spans two policies, and no env step is thrown away.

Time limits (Pardo et al. 2018): an episode *truncated* by a time limit is not a
terminal state. With ``baseline: value`` its last return bootstraps from the
critic, G_{T−1} = r_{T−1} + γ V(s_T); without a critic it is used as it is (the
return of the steps seen), which under-estimates the returns near the limit.

The budget: on an env whose episodes need not end (no time limit), a batch stops
once it is one rollout past the budget (:func:`~bench.algos.common.episode_cap`),
and the episodes in flight are cut there. A cut is a truncation too, and no time
limit of the env's: with a critic (``baseline: value``, AC-MC) it bootstraps as above
(Pardo et al.'s partial-episode bootstrapping); without one it is dropped from the
update, since Williams' estimator needs the return to the episode's end and the
steps seen would count as one. Its steps still count against the budget, and the
run ends with that batch.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn as nn

from bench.algos.checkpoint import savable
from bench.algos.collect import EpisodeCollector
from bench.algos.common import episode_cap, explained_variance, grad_noise_ratio, policy_gradient_loss, setup
from bench.algos.loop import ScheduleValues, Steps, drive, torch_generator
from bench.algos.resume import TrainState
from bench.algos.reinforce.spec import REINFORCEParams
from bench.storage.record import RecorderProtocol


# --------------------------------------------------------------------------- #
# The estimator, as pure functions
# --------------------------------------------------------------------------- #
def discounted_returns(rewards: np.ndarray, ends: np.ndarray, gamma: float,
                       bootstrap: np.ndarray | None = None) -> np.ndarray:
    """G_t = r_t + γ·G_{t+1} within an episode, all ``(B,)`` in time order, episodes contiguous.

    ``ends[t]`` marks an episode's last step; there ``G_t = r_t + γ·bootstrap[t]``
    (V(s') for a truncated episode, 0 for a terminated one or without a critic).
    """
    out = np.empty(len(rewards), dtype=np.float64)
    g = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        if ends[t]:
            g = 0.0 if bootstrap is None else float(bootstrap[t])
        g = float(rewards[t]) + gamma * g
        out[t] = g
    return out


def reinforce_advantages(returns: torch.Tensor, values: torch.Tensor | None, kind: str, *,
                         normalize_returns: bool = False, normalize_advantage: bool = False) -> torch.Tensor:
    """Â_t = G_t − b(s_t) for ``kind`` none (b = 0), mean (b = mean G) or value (b = ``values``).

    ``normalize_returns`` standardises G per batch first (and b with the same
    statistics, so with a learned baseline it only rescales); ``normalize_advantage``
    standardises Â afterwards. A batch of one sample is left as it is.
    """
    g = returns
    b = {"none": None, "mean": g.mean(), "value": values}[kind]
    if kind == "value" and values is None:
        raise ValueError("baseline 'value' needs values")
    if normalize_returns and g.numel() > 1:
        mu, sd = g.mean(), g.std() + 1e-8
        g = (g - mu) / sd
        b = None if b is None else (b - mu) / sd
    adv = g if b is None else g - b
    if normalize_advantage and adv.numel() > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    return adv


class Returns(NamedTuple):
    """One batch's estimator inputs: log π_old(a|s) and V(s) at collection (``values`` ``None`` without a critic),
    the discounted returns G (NumPy and tensor) and the advantages Â."""

    old_logp: torch.Tensor
    values: torch.Tensor | None
    ret_np: np.ndarray
    returns: torch.Tensor
    adv: torch.Tensor


def batch_returns(policy: Any, batch: Any, p: REINFORCEParams, use_value: bool, device: torch.device) -> Returns:
    """G_t and Â_t of a batch of whole episodes; a cut episode bootstraps from the critic where there is one."""
    obs, actions = batch.obs, batch.actions
    bootstrap = np.zeros(len(batch.rewards))
    with torch.no_grad():
        old_logp = policy.dist(obs).log_prob(actions)
        values = policy.value(obs) if use_value else None
        if use_value and len(batch.truncated_at):
            bootstrap[batch.truncated_at] = policy.value(batch.final_obs).cpu().numpy()
    ret_np = discounted_returns(batch.rewards, batch.ends, p.gamma, bootstrap)
    returns = torch.as_tensor(ret_np, dtype=torch.float32, device=device)
    adv = reinforce_advantages(returns, values, p.baseline, normalize_returns=p.normalize_returns,
                               normalize_advantage=p.normalize_advantage)
    return Returns(old_logp, values, ret_np, returns, adv)


# --------------------------------------------------------------------------- #
# Training
# --------------------------------------------------------------------------- #
def train(env_id: str, params: REINFORCEParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    """Train REINFORCE on ``env_id`` until at least ``timesteps`` env steps (whole batches of episodes)."""
    p = params
    device, rng, envs, norm, policy = setup(env_id, p, seed, recorder)
    use_value = p.baseline == "value"
    trained = policy.parameters() if use_value else policy.actor_parameters()
    params_list = list(trained)
    optimizer = torch.optim.Adam(params_list, lr=p.learning_rate)
    # Every parameter the policy holds counts, the critic too when no baseline trains it.
    recorder.note_models(policy.parameters(), [optimizer])
    collector = EpisodeCollector(envs, policy, norm, seed=seed, device=device)

    # Derived sizes, in one place.
    min_batch = p.n_steps * p.n_envs  # steps per batch at least; the last batch is cut to the budget left
    gen = torch_generator(rng)

    budget = Steps(timesteps)

    def update(s: ScheduleValues) -> dict[str, float] | None:
        # -- episodes and returns ---------------------------------------------
        # A cut episode bootstraps from the critic where there is one, else it is dropped (module docstring).
        batch = collector.collect(min(min_batch, budget.left), episode_cap(envs, budget.left, min_batch),
                                  keep_cut=use_value)
        if batch is None:  # every episode was cut at the budget and dropped: the run is over
            return None
        budget.spend(batch.steps)
        obs, actions = batch.obs, batch.actions
        old_logp, values, ret_np, returns, adv = batch_returns(policy, batch, p, use_value, device)

        # -- one gradient step ------------------------------------------------
        pd = policy.dist(obs)
        logp = pd.log_prob(actions)
        pg_loss = policy_gradient_loss(logp, adv)
        entropy = pd.entropy().mean()
        loss = pg_loss - s.ent_coef * entropy
        if use_value:
            v_loss = (policy.value(obs) - returns).pow(2).mean()
            loss = loss + p.vf_coef * v_loss
        diag: dict[str, float] = {}
        if p.grad_noise_chunks and len(adv) >= p.grad_noise_chunks:
            # On the pre-update parameters: the noise of the gradient this step actually follows.
            def pg_loss_of(idx: torch.Tensor) -> torch.Tensor:
                return policy_gradient_loss(policy.dist(obs[idx]).log_prob(actions[idx]), adv[idx])

            diag["grad/noise_ratio"] = grad_noise_ratio(pg_loss_of, policy.actor_parameters(), len(adv),
                                                        p.grad_noise_chunks, gen)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        max_norm = p.max_grad_norm if p.max_grad_norm is not None else float("inf")
        gnorm = float(nn.utils.clip_grad_norm_(params_list, max_norm))
        optimizer.step()

        # -- diagnostics ------------------------------------------------------
        with torch.no_grad():
            # k3 estimator of KL(π_old ‖ π_new) on the batch (Schulman 2020, "Approximating KL divergence").
            log_ratio = policy.dist(obs).log_prob(actions) - old_logp
            approx_kl = float((log_ratio.exp() - 1 - log_ratio).mean())
        diag.update({
            "loss/policy": float(pg_loss.detach()),
            "policy/entropy": float(entropy.detach()),
            "policy/approx_kl": approx_kl,
            "grad/norm": gnorm,
            "train/episodes": float(batch.n_episodes),
            "train/batch_steps": float(len(adv)),
            **s.diagnostics(p),
        })
        if use_value:
            diag["loss/value"] = float(v_loss.detach())
            diag["value/explained_variance"] = explained_variance(values.cpu().numpy(), ret_np)
        if not policy.discrete:
            diag["policy/log_std"] = float(policy.log_std.detach().mean())
        return diag

    state = TrainState(modules={"policy": policy}, optimizers={"adam": optimizer}, norm=norm, rng=rng,
                       generators={"minibatch": gen}, envs=envs, holder=collector)  # for checkpoints (resume.py)
    drive(budget, p, update, recorder, policy=lambda: savable(collector.policy_fn(), policy, norm),
          optimizers=[optimizer], state=state)
    envs.close()
