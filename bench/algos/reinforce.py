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

from typing import Callable, NamedTuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from bench.algos.checkpoint import savable
from bench.algos.common import (Normalizer, ent_coef_at, episode_cap, explained_variance, grad_noise_ratio, linear,
                                setup)
from bench.algos.policy import ActorCritic
from bench.algos.hyperparams import REINFORCEParams
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


def policy_gradient_loss(logp: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """−mean(Â · log π(a|s)): its gradient is minus the REINFORCE estimate of ∇J."""
    return -(logp * advantages).mean()


# --------------------------------------------------------------------------- #
# Whole-episode collection
# --------------------------------------------------------------------------- #
class EpisodeBatch(NamedTuple):
    """Whole episodes, concatenated in the order they finished; ``B`` steps in all."""

    obs: torch.Tensor  # (B, *obs_shape), as the policy saw them
    actions: torch.Tensor  # (B,) discrete, (B, d) continuous (unclipped samples)
    rewards: np.ndarray  # (B,) as trained on (normalised if enabled)
    ends: np.ndarray  # (B,) bool: an episode's last step
    truncated_at: np.ndarray  # (K,) positions of the ends that are truncations (time limits)
    final_obs: torch.Tensor  # (K, *obs_shape) the observation after each of them
    n_episodes: int
    steps: int  # env steps the batch took: B, plus those of episodes cut at the budget and dropped


class EpisodeCollector:
    """Plays whole episodes on a vector env's sub-envs with the current policy.

    Sub-envs are stepped directly (``envs.envs``), so idle ones take no steps;
    the policy still sees all active envs in one batch. A finished sub-env is
    reset at once, so its final observation is the one ``step`` returned.
    """

    def __init__(self, envs: gym.vector.SyncVectorEnv, policy: ActorCritic, normalizer: Normalizer, *, seed: int,
                 device: torch.device = torch.device("cpu")):
        self.envs, self.policy, self.norm, self.device = envs, policy, normalizer, device
        space = envs.single_action_space
        self.continuous = isinstance(space, gym.spaces.Box)
        self.low = space.low if self.continuous else None
        self.high = space.high if self.continuous else None
        raw, _ = envs.reset(seed=seed)  # sub-env i gets seed + i; later resets continue its own stream
        self.obs = normalizer.obs(raw, update=True)

    def _t(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(x, device=self.device)

    def collect(self, min_steps: int, max_steps: int | None = None, keep_cut: bool = True) -> EpisodeBatch | None:
        """Whole episodes until at least ``min_steps`` steps. At ``max_steps`` (:func:`episode_cap`) the episodes
        still in flight are cut: kept as truncations (their final observation is the current one) with
        ``keep_cut``, else dropped. None when nothing is left (every episode was cut and dropped)."""
        n = self.envs.num_envs
        subs = self.envs.envs
        running: list[list[tuple[np.ndarray, torch.Tensor, float]]] = [[] for _ in range(n)]
        done_eps: list[tuple[list[tuple[np.ndarray, torch.Tensor, float]], np.ndarray | None]] = []
        active = np.ones(n, dtype=bool)
        steps = 0
        with torch.inference_mode():
            while active.any():
                idx = np.flatnonzero(active)
                a = self.policy.dist(self._t(self.obs[idx])).sample().cpu()
                a_np = a.numpy()
                env_a = np.clip(a_np, self.low, self.high) if self.continuous else a_np
                raws, rews, dones, finals = [], np.empty(len(idx)), np.zeros(len(idx), bool), []
                for j, i in enumerate(idx):
                    raw, r, te, tr, _ = subs[i].step(env_a[j])
                    rews[j], dones[j] = r, te or tr
                    finals.append(raw if tr and not te else None)
                    if dones[j]:
                        raw, _ = subs[i].reset()
                    raws.append(raw)
                steps += len(idx)
                rews = self.norm.reward_of(rews, dones, idx)
                for j, i in enumerate(idx):
                    running[i].append((self.obs[i].copy(), a[j], float(rews[j])))
                    if dones[j]:
                        fo = None if finals[j] is None else self.norm.obs(finals[j][None], update=False)[0]
                        done_eps.append((running[i], fo))
                        running[i] = []
                        if steps >= min_steps:
                            active[i] = False
                self.obs[idx] = self.norm.obs(np.stack(raws), update=True)
                if max_steps is not None and steps >= max_steps:  # the budget cuts what is still in flight
                    for i in np.flatnonzero(active):
                        if running[i] and keep_cut:
                            done_eps.append((running[i], self.obs[i].copy()))
                        running[i] = []
                    break
        if not done_eps:
            return None

        obs, acts, rews_all, ends, trunc_at, finals_all, pos = [], [], [], [], [], [], 0
        for ep, fo in done_eps:
            obs += [o for o, _, _ in ep]
            acts += [x for _, x, _ in ep]
            rews_all += [r for _, _, r in ep]
            e = np.zeros(len(ep), bool)
            e[-1] = True
            ends.append(e)
            pos += len(ep)
            if fo is not None:
                trunc_at.append(pos - 1)
                finals_all.append(fo)
        shape = self.obs.shape[1:]
        return EpisodeBatch(
            obs=self._t(np.stack(obs)),
            actions=torch.stack(acts).to(self.device),
            rewards=np.asarray(rews_all, dtype=np.float64),
            ends=np.concatenate(ends),
            truncated_at=np.asarray(trunc_at, dtype=np.int64),
            final_obs=self._t(np.stack(finals_all) if finals_all else np.empty((0, *shape), self.obs.dtype)),
            n_episodes=len(done_eps),
            steps=steps,
        )

    def policy_fn(self) -> Callable[[np.ndarray], np.ndarray]:
        """The deterministic policy on raw observations, for evaluation (stats frozen)."""

        def act(raw: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                o = self._t(self.norm.obs(raw, update=False))
                a = self.policy.dist(o).mode().cpu().numpy()
            return np.clip(a, self.low, self.high) if self.continuous else a

        return act


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
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))

    done = 0
    while done < timesteps:
        lr = linear(p.learning_rate, p.lr_schedule, 1.0 - done / timesteps)
        ent_coef = ent_coef_at(p, 1.0 - done / timesteps)
        for g in optimizer.param_groups:
            g["lr"] = lr

        # -- episodes and returns ---------------------------------------------
        # A cut episode bootstraps from the critic where there is one, else it is dropped (module docstring).
        batch = collector.collect(min(min_batch, timesteps - done), episode_cap(envs, timesteps - done, min_batch),
                                  keep_cut=use_value)
        if batch is None:  # every episode was cut at the budget and dropped: the run is over
            break
        done += batch.steps
        obs, actions = batch.obs, batch.actions
        bootstrap = np.zeros(len(batch.rewards))
        with torch.no_grad():
            old_pd = policy.dist(obs)
            old_logp = old_pd.log_prob(actions)
            values = policy.value(obs) if use_value else None
            if use_value and len(batch.truncated_at):
                bootstrap[batch.truncated_at] = policy.value(batch.final_obs).cpu().numpy()
        ret_np = discounted_returns(batch.rewards, batch.ends, p.gamma, bootstrap)
        returns = torch.as_tensor(ret_np, dtype=torch.float32, device=device)
        adv = reinforce_advantages(returns, values, p.baseline, normalize_returns=p.normalize_returns,
                                   normalize_advantage=p.normalize_advantage)

        # -- one gradient step ------------------------------------------------
        pd = policy.dist(obs)
        logp = pd.log_prob(actions)
        pg_loss = policy_gradient_loss(logp, adv)
        entropy = pd.entropy().mean()
        loss = pg_loss - ent_coef * entropy
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
            "train/learning_rate": lr,
            "train/episodes": float(batch.n_episodes),
            "train/batch_steps": float(len(adv)),
        })
        if p.ent_schedule != "constant":
            diag["train/ent_coef"] = ent_coef
        if use_value:
            diag["loss/value"] = float(v_loss.detach())
            diag["value/explained_variance"] = explained_variance(values.cpu().numpy(), ret_np)
        if not policy.discrete:
            diag["policy/log_std"] = float(policy.log_std.detach().mean())
        recorder.diagnostics(diag)
        recorder.after_update(savable(collector.policy_fn(), policy, norm))
    envs.close()
