"""The collector family: how the project's own on-policy algorithms gather experience with the current
policy. Every collector shares :class:`Acting` (the action space's bounds, observations as the networks take
them, the deterministic policy for evaluation); each gathers in the shape its algorithms update on:

- :class:`Collector` → :class:`Rollout`: ``n_steps`` on every env of a vector env (A2C, A3C, PPO, NPG,
  TRPO), telling termination from truncation so that a truncated episode bootstraps from V(s');
- :class:`EpisodeCollector` → :class:`EpisodeBatch`: whole episodes until a batch holds enough steps
  (REINFORCE, AC-MC), stepping only the sub-envs still needed;
- :class:`GroupCollector` → :class:`Group`: G whole episodes from one initial state (GRPO, RLOO).

The pure-NumPy REINFORCE (:mod:`bench.algos.reinforce.reinforce_numpy`) plays its episodes without torch, in its own
module. Shapes: ``T`` rollout steps, ``N`` envs, ``B`` samples.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from bench.algos.common import Normalizer, clip, step_sub_envs
from bench.algos.npkernel import ActorCriticKernel, use_kernel
from bench.algos.policy import ActorCritic


class Acting:
    """What every collector shares: the env's action space (continuous actions reach the env clipped to
    its bounds, their log-probabilities stay those of the unclipped sample), observations as the networks
    take them, and the deterministic policy on raw observations (:meth:`policy_fn`) for evaluation."""

    def __init__(self, envs: gym.vector.VectorEnv, policy: Any, normalizer: Normalizer,
                 device: torch.device = torch.device("cpu")):
        self.envs, self.policy, self.norm, self.device = envs, policy, normalizer, device
        space = envs.single_action_space
        self.continuous = isinstance(space, gym.spaces.Box)
        self.low = space.low if self.continuous else None
        self.high = space.high if self.continuous else None
        self.act_shape = space.shape if self.continuous else ()

    def _prep(self, obs: np.ndarray) -> np.ndarray:
        # Vector observations are float32 for the networks (MuJoCo returns float64); pixels stay uint8.
        return obs if obs.dtype == np.uint8 else obs.astype(np.float32, copy=False)

    def _t(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(x, device=self.device)

    def _mode(self, obs: np.ndarray) -> np.ndarray:
        """The most likely action of π(·|obs)."""
        with torch.inference_mode():
            return self.policy.dist(self._t(obs)).mode().cpu().numpy()

    def policy_fn(self) -> Callable[[np.ndarray], np.ndarray]:
        """The deterministic policy on raw observations, for evaluation (normalisation statistics frozen)."""

        def act(raw: np.ndarray) -> np.ndarray:
            a = self._mode(self._prep(self.norm.obs(raw, update=False)))
            return np.clip(a, self.low, self.high) if self.continuous else a

        return act


# --------------------------------------------------------------------------- #
# n-step rollouts
# --------------------------------------------------------------------------- #
class Rollout(NamedTuple):
    """``T`` steps of ``N`` envs. Rewards are as trained on (normalised if enabled)."""

    obs: torch.Tensor  # (T, N, *obs_shape), as the policy saw them
    actions: torch.Tensor  # (T, N) discrete, (T, N, d) continuous (unclipped samples)
    logp: torch.Tensor  # (T, N) log π(a|s) at collection time
    values: torch.Tensor  # (T, N) V(s)
    rewards: np.ndarray  # (T, N)
    terminated: np.ndarray  # (T, N) true terminal state: no bootstrap
    ended: np.ndarray  # (T, N) terminated or truncated: the episode ends here
    next_values: np.ndarray  # (T, N) V(s') of the true next state (final obs when an episode ended)


class Collector(Acting):
    """Steps a vector env with the current policy, ``n_steps`` at a time.

    The env must use ``AutoresetMode.SAME_STEP`` (:func:`bench.envs.make_vec_env`'s
    default): a finished sub-env is reset inside ``step()`` and its last
    observation is in ``info["final_obs"]``, which we need to bootstrap
    V(s') on truncation (Pardo et al. 2018, "Time Limits in RL").

    With a ``kernel`` (:class:`bench.algos.npkernel.ActorCriticKernel`) the policy
    acts through NumPy on the same parameters, sampling from ``rng``; otherwise
    through torch, sampling from torch's generator.

    A gSDE policy (``policy.use_sde``) gets new noise matrices at the start of every rollout and, with
    ``sde_sample_freq`` k > 0, before every k-th step of it, as SB3's ``collect_rollouts``; it acts
    through torch (the NumPy kernel has no gSDE).

    One known difference from SB3's ``VecNormalize`` + ``collect_rollouts`` (kept, see
    docs/parity.md, "Differences, line by line"): a truncated episode's final observation is
    normalised with the statistics *before* this step's update, SB3's after it. The two
    differ by one batch of ``n_envs`` observations in a running count of every observation
    seen, at least a time limit's worth per env at the first truncation: the normalised
    final observation moves by about 1/(time limit) of the batch's deviation from the running
    mean then (MountainCar 1/200, MuJoCo 1/1000), and less at every later one. Changing it
    would change every seed of every normalised run with time limits.
    """

    def __init__(self, envs: gym.vector.VectorEnv, policy: ActorCritic, normalizer: Normalizer, *, seed: int,
                 device: torch.device = torch.device("cpu"), kernel: "ActorCriticKernel | None" = None,
                 rng: np.random.Generator | None = None, sde_sample_freq: int = -1):
        super().__init__(envs, policy, normalizer, device)
        self.kernel = kernel
        self.sde = getattr(policy, "use_sde", False)
        if self.sde and kernel is not None:
            raise ValueError("a gSDE policy acts through torch; the NumPy kernel has no state-dependent noise")
        self.sde_sample_freq = sde_sample_freq
        self.rng = rng if rng is not None else np.random.default_rng(seed)
        raw, _ = envs.reset(seed=seed)  # sub-env i gets seed + i, as SB3's DummyVecEnv
        self.obs = self._prep(normalizer.obs(raw, update=True))

    def _act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample from π(·|obs): ``(actions, log π, V)`` as NumPy arrays."""
        if self.kernel is not None:
            return self.kernel.act(obs, self.rng)
        pd, v = self.policy.dist_value(self._t(obs))
        a = pd.sample()
        return a.cpu().numpy(), pd.log_prob(a).cpu().numpy(), v.cpu().numpy()

    def _value(self, obs: np.ndarray) -> np.ndarray:
        if self.kernel is not None:
            return self.kernel.value(obs)
        return self.policy.value(self._t(obs)).cpu().numpy()

    def collect(self, n_steps: int) -> Rollout:
        n = self.envs.num_envs
        obs_buf = np.empty((n_steps, *self.obs.shape), dtype=self.obs.dtype)
        act_buf = np.empty((n_steps, n, *self.act_shape), dtype=np.float32 if self.continuous else np.int64)
        logp_buf = np.empty((n_steps, n), dtype=np.float32)
        val_buf = np.empty((n_steps + 1, n), dtype=np.float32)
        rew = np.empty((n_steps, n), dtype=np.float32)
        term = np.empty((n_steps, n), dtype=np.float32)
        ended = np.empty((n_steps, n), dtype=np.float32)
        final_values: list[tuple[int, np.ndarray, np.ndarray]] = []  # (t, env mask, V(final_obs))
        with torch.inference_mode():
            for t in range(n_steps):
                if self.sde and (t == 0 or (self.sde_sample_freq > 0 and t % self.sde_sample_freq == 0)):
                    self.policy.reset_noise(n)
                obs_buf[t] = self.obs
                a, logp_buf[t], val_buf[t] = self._act(self.obs)
                act_buf[t] = a
                # The env gets actions clipped to its bounds; the log-prob stays that of the unclipped sample.
                env_a = clip(a, self.low, self.high) if self.continuous else a
                raw, r, te, tr, info = self.envs.step(env_a)
                done = te | tr
                rew[t] = self.norm.reward(r, done)
                term[t], ended[t] = te, done
                if tr.any():
                    mask = tr & ~te
                    if mask.any():
                        fo = self._prep(self.norm.obs(np.stack(info["final_obs"][mask]), update=False))
                        final_values.append((t, mask, self._value(fo)))
                self.obs = self._prep(self.norm.obs(raw, update=True))
            val_buf[n_steps] = self._value(self.obs)
        next_values = val_buf[1:].copy()
        for t, mask, v in final_values:
            next_values[t, mask] = v
        dev = self.device
        return Rollout(
            obs=torch.from_numpy(obs_buf).to(dev),
            actions=torch.from_numpy(act_buf).to(dev),
            logp=torch.from_numpy(logp_buf).to(dev),
            values=torch.from_numpy(val_buf[:-1]).to(dev),
            rewards=rew,
            terminated=term,
            ended=ended,
            next_values=next_values,
        )

    def _mode(self, obs: np.ndarray) -> np.ndarray:
        return self.kernel.mode(obs) if self.kernel is not None else super()._mode(obs)


def rollout_collector(envs: gym.vector.VectorEnv, policy: ActorCritic, normalizer: Normalizer, p: Any, *, seed: int,
                      device: torch.device, rng: np.random.Generator) -> Collector:
    """The n-step collector of A2C, A3C, PPO, NPG and TRPO: small MLPs on the CPU act through the NumPy
    kernel (``p.kernel``; npkernel.py says why), sampling from ``rng``; gSDE resamples every
    ``p.sde_sample_freq`` steps. Its ``kernel`` is the algorithm's too, for the update."""
    kern = ActorCriticKernel(policy) if use_kernel(p.kernel, policy, device) else None
    return Collector(envs, policy, normalizer, seed=seed, device=device, kernel=kern, rng=rng,
                     sde_sample_freq=p.sde_sample_freq)


# --------------------------------------------------------------------------- #
# Whole episodes
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


class EpisodeCollector(Acting):
    """Plays whole episodes on a vector env's sub-envs with the current policy.

    Sub-envs are stepped directly (``envs.envs``), so idle ones take no steps;
    the policy still sees all active envs in one batch. A finished sub-env is
    reset at once, so its final observation is the one ``step`` returned.
    """

    def __init__(self, envs: gym.vector.SyncVectorEnv, policy: ActorCritic, normalizer: Normalizer, *, seed: int,
                 device: torch.device = torch.device("cpu")):
        super().__init__(envs, policy, normalizer, device)
        raw, _ = envs.reset(seed=seed)  # sub-env i gets seed + i; later resets continue its own stream
        self.obs = normalizer.obs(raw, update=True)

    def collect(self, min_steps: int, max_steps: int | None = None, keep_cut: bool = True) -> EpisodeBatch | None:
        """Whole episodes until at least ``min_steps`` steps. At ``max_steps`` (:func:`~bench.algos.common.episode_cap`) the episodes
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
                raws, rews, dones, finals = step_sub_envs(subs, idx, env_a)
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


# --------------------------------------------------------------------------- #
# Groups of episodes from one initial state
# --------------------------------------------------------------------------- #
class Group(NamedTuple):
    """G whole episodes from one reset seed; step arrays are concatenated episode after episode."""

    obs: np.ndarray  # (B, *obs_shape), as the policy saw them
    actions: np.ndarray  # (B,) or (B, d), unclipped samples
    rewards: list[np.ndarray]  # G arrays (T_i,), raw env rewards
    lengths: np.ndarray  # (G,)


class GroupCollector(Acting):
    """Plays a group: every sub-env of a G-env vector env is reset with one seed, then the active
    ones step together (the policy sees them as one batch) until every episode has ended."""

    def __init__(self, envs: gym.vector.SyncVectorEnv, policy: ActorCritic, normalizer: Normalizer,
                 device: torch.device):
        super().__init__(envs, policy, normalizer, device)

    def play(self, seed: int, max_steps: int | None = None) -> Group | None:
        """A group from reset seed ``seed``; None when its episodes are still going after ``max_steps`` steps in
        all (:func:`~bench.algos.common.episode_cap`): cut at the budget, it is dropped
        (:func:`bench.algos.grpo.grpo.train` says why)."""
        subs = self.envs.envs
        taken = 0
        n = len(subs)
        raw = np.stack([e.reset(seed=seed)[0] for e in subs])  # the same initial state G times
        obs = self.norm.obs(raw, update=True)
        steps: list[list[tuple[np.ndarray, np.ndarray, float]]] = [[] for _ in range(n)]
        active = np.ones(n, dtype=bool)
        with torch.inference_mode():
            while active.any():
                idx = np.flatnonzero(active)
                o = obs[idx].astype(np.float32, copy=False)
                a = self.policy.dist(torch.as_tensor(o, device=self.device)).sample().cpu().numpy()
                env_a = np.clip(a, self.low, self.high) if self.continuous else a
                for j, i in enumerate(idx):
                    r_obs, r, te, tr, _ = subs[i].step(env_a[j])
                    steps[i].append((o[j], a[j], float(r)))
                    raw[i] = r_obs
                    if te or tr:
                        active[i] = False
                taken += len(idx)
                if max_steps is not None and taken >= max_steps and active.any():
                    return None
                if active.any():
                    live = np.flatnonzero(active)
                    obs[live] = self.norm.obs(raw[live], update=True)
        return Group(
            obs=np.stack([s[0] for ep in steps for s in ep]),
            actions=np.stack([s[1] for ep in steps for s in ep]),
            rewards=[np.array([s[2] for s in ep]) for ep in steps],
            lengths=np.array([len(ep) for ep in steps]),
        )

    def _prep(self, obs: np.ndarray) -> np.ndarray:
        return obs.astype(np.float32, copy=False)
