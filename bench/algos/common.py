"""Parts the project's own algorithms share, because they use them identically.

- :func:`setup`: the start of every run (device, seeded RNGs, env, normaliser,
  policy; the policy itself is :mod:`bench.algos.policy`).
- :class:`FlatParams`: parameters and gradients as views of two flat buffers.
- :class:`Normalizer`: running observation / reward normalisation, VecNormalize's
  algorithm (SB3), so ``normalize:`` means the same for both implementations.
- :func:`episode_cap` and :func:`clip`: what the collectors (:mod:`bench.algos.collect`) share with them.
- :func:`gae`: generalised advantage estimation (Schulman et al. 2016).
- :func:`explained_variance` and :func:`grad_noise_ratio`: diagnostics.

Shapes: ``T`` rollout steps, ``N`` envs, ``B = T * N`` samples.
"""

from __future__ import annotations

import os
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from bench.envs import make_vec_env

from bench.algos.policy import ActorCritic, make_policy
from bench.algos.resume import tape_envs

def pin_one_thread() -> None:
    """One torch thread and one BLAS thread (NumPy's, which the NumPy kernel uses) for
    this process: runs are parallel across processes, and speed comparisons are only
    fair at a fixed thread count."""
    from threadpoolctl import threadpool_limits

    # A BLAS library loaded later (SciPy ships its own OpenBLAS and is imported lazily) reads its thread
    # count from the environment when it loads: `bench speed` found SciPy's at 2 threads beside NumPy's 1.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    torch.set_num_threads(1)
    threadpool_limits(limits=1)  # kept until restored; NumPy's OpenBLAS defaults to every core


def seed_everything(seed: int) -> np.random.Generator:
    """Seed torch and return a NumPy generator: the same seed gives the same run (one thread)."""
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def pick_device(device: str) -> torch.device:
    """``cpu``, ``cuda`` (an error if absent: a benchmark must not fall back silently), or ``auto``."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for but CUDA is not available on this host; allowed here: cpu")
    return torch.device(device)


class FlatParams:
    """The policy's parameters re-homed as views into one flat buffer, their gradients
    into another, so that gradient clipping and the optimizer step are a handful of
    ops on one tensor instead of a handful per parameter (at A2C's batch of 40 these
    per-tensor ops cost a large share of the update; in PPO's CartPole update,
    measured side by side in one process, about 16% of a minibatch step). Backward accumulates into the
    existing ``.grad`` views in place, so ``zero_grad`` is one ``zero_()``.
    """

    def __init__(self, params: list[nn.Parameter]):
        self.param = nn.Parameter(torch.cat([q.detach().reshape(-1) for q in params]))
        self.grad = torch.zeros_like(self.param)
        self.param.grad = self.grad
        o = 0
        for q in params:
            k = q.numel()
            q.data = self.param.data[o:o + k].view_as(q)
            q.grad = self.grad[o:o + k].view_as(q)
            o += k

    def zero_grad(self) -> None:
        self.grad.zero_()

    def clip_grad_norm(self, max_norm: float) -> float:
        """``nn.utils.clip_grad_norm_``'s rule on the flat gradient; returns the norm before clipping.

        The coefficient min(1, max_norm / (‖g‖ + 1e-6)) is computed in float32 scalars with the
        very roundings torch's tensor expression makes (``max_norm / t`` is ``t.reciprocal() *
        max_norm``), so the result is bit for bit that of ``clip_grad_norm_``
        (``tests/test_algos_common.py``), in one torch op instead of five: ~10 µs less per minibatch
        step of a small MLP, where every op's dispatch counts (docs/performance.md).
        """
        norm = np.float32(torch.linalg.vector_norm(self.grad).item())
        coef = (np.float32(1.0) / (norm + np.float32(1e-6))) * np.float32(max_norm)
        if not coef >= 1.0:  # clamp(max=1): a factor of exactly 1 leaves the gradient as it is; NaN still multiplies
            self.grad.mul_(float(coef))
        return float(norm)


def fused_adam_step(optimizer: torch.optim.Optimizer) -> Callable[[], None]:
    """``optimizer.step`` for a fused torch Adam over one flat parameter (:class:`FlatParams`),
    without ``torch.optim``'s per-call Python layer (hooks, profiler record, grouping tensors by
    device), which on a small MLP costs several times the update itself: ~40 µs against ~10 µs
    for the fused kernel on the ~9k parameters of CartPole's two 64-64 MLPs, on one thread.

    It calls the same kernel with the same arguments as ``Adam.step`` (torch 2.13's
    ``torch/optim/adam.py``, ``_fused_adam``), so the parameters are bit for bit those of
    ``optimizer.step()`` (``tests/test_algos_common.py``); learning-rate changes through
    ``param_groups`` are read at every call. Any other optimizer or setting gets
    ``optimizer.step`` itself, as does the first call, which creates the state.
    """
    groups = optimizer.param_groups
    g = groups[0]
    plain = (isinstance(optimizer, torch.optim.Adam) and len(groups) == 1 and len(g["params"]) == 1
             and g.get("fused") and not g["amsgrad"] and not g["maximize"] and g["weight_decay"] == 0
             and not g["capturable"] and not g["differentiable"] and not g.get("decoupled_weight_decay")
             and not isinstance(g["lr"], torch.Tensor) and g["params"][0].device.type == "cpu")
    if not plain:
        return optimizer.step
    param = g["params"][0]
    data = param.detach()  # the same storage, outside autograd (Adam.step runs under no_grad)
    bound: list[tuple] = []

    def step() -> None:
        if not bound:
            optimizer.step()  # creates exp_avg, exp_avg_sq and step
            st = optimizer.state[param]
            bound.append(([data], [st["exp_avg"]], [st["exp_avg_sq"]], [st["step"]]))
            return
        ps, m, v, steps = bound[0]
        b1, b2 = g["betas"]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(ps, [param.grad], m, v, [], steps, amsgrad=False, lr=g["lr"], beta1=b1, beta2=b2,
                           weight_decay=0.0, eps=g["eps"], maximize=False, grad_scale=None, found_inf=None)

    return step


class Setup(NamedTuple):
    """What every algorithm's ``train`` starts from (see :func:`setup`)."""

    device: torch.device
    rng: np.random.Generator
    envs: gym.vector.VectorEnv
    norm: "Normalizer"
    policy: "ActorCritic"


def setup(env_id: str, p: Any, seed: int, recorder: Any, *, share_features: bool = True) -> "Setup":
    """The common start of a run, in one fixed order (so a seed fixes every random stream):
    device, seeded RNGs, the vector env (recording through ``recorder``), the
    normaliser and the policy, built from the shared hyperparameter fields of ``p``."""
    device = pick_device(p.device)
    rng = seed_everything(seed)
    envs = make_vec_env(env_id, p.n_envs, recorder=recorder, vec_env=p.vec_env)
    if getattr(recorder, "checkpoints", None) is not None:  # the episodes in progress, for a checkpoint
        tape_envs(envs)
    norm = Normalizer(envs.single_observation_space.shape, p.n_envs, p.gamma,
                      obs=p.normalize_obs, reward=p.normalize_reward)
    policy = make_policy(envs, p, share_features=share_features).to(device)
    return Setup(device, rng, envs, norm, policy)


def step_sub_envs(subs: Any, idx: np.ndarray, actions: np.ndarray) -> tuple[list, np.ndarray, np.ndarray, list]:
    """Step the sub-envs ``subs[i]`` for ``i`` in ``idx`` (one action each, in order), resetting each that ends.

    Returns ``(raws, rewards, dones, finals)`` per stepped env: its next raw observation (the reset one where it
    ended), reward, whether it ended, and the final observation of a truncated episode (``None`` otherwise), which
    bootstraps the value of an episode cut by a time limit. The episode collectors step only their active envs.
    """
    raws, rews, dones, finals = [], np.empty(len(idx)), np.zeros(len(idx), bool), []
    for j, i in enumerate(idx):
        raw, r, te, tr, _ = subs[i].step(actions[j])
        rews[j], dones[j] = r, te or tr
        finals.append(raw if tr and not te else None)
        if dones[j]:
            raw, _ = subs[i].reset()
        raws.append(raw)
    return raws, rews, dones, finals


def episode_cap(envs: Any, steps_left: int, rollout: int, episodes_per_env: int = 1) -> int:
    """The most env steps one batch of whole episodes may take (REINFORCE, AC-MC, GRPO) before the episodes
    still in flight are cut: the budget left plus one rollout (``rollout``, the batch's least size), or plus
    ``episodes_per_env × n_envs`` episodes of the env's time limit where that is more (GRPO's sub-envs each
    play ``groups_per_update`` episodes an update, REINFORCE's finish one past its least size).

    Why: these algorithms finish every episode they start, so on an env whose episodes never end they never
    stopped (issue 44: 14M steps on a 2,000-step budget). An env with a time limit ends every episode within
    it, and a batch then stays below this cap (it stops starting episodes at ``steps_left`` at the latest, and
    each env finishes at most one more): no episode is ever cut there and runs are what they were. Only
    where episodes need not end is one cut, and then only in the run's last batch, since the cap is past
    the budget. How a cut episode is used is each algorithm's own choice (its module says which).

    :param envs: the training vector env (its sub-envs' ``spec.max_episode_steps`` is the time limit).
    """
    subs = getattr(envs, "envs", None) or []
    horizon = getattr(getattr(subs[0], "spec", None), "max_episode_steps", None) if subs else None
    return steps_left + max(rollout, episodes_per_env * envs.num_envs * (horizon or 0))


def clip(x: np.ndarray, low: Any, high: Any) -> np.ndarray:
    """``np.clip(x, low, high)``'s values (NaN stays NaN) as two ufunc calls: ``np.clip`` spends ~2 µs
    a call in Python-level dispatch, which the rollout loop pays several times per env step."""
    return np.minimum(np.maximum(x, low), high)


# --------------------------------------------------------------------------- #
# Normalisation (VecNormalize's algorithm)
# --------------------------------------------------------------------------- #
class RunningMeanStd:
    """Running mean and variance over batches (Chan et al.'s parallel update)."""

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 1e-4

    def update(self, x: np.ndarray) -> None:
        if x.shape[0] == 1:
            # One env (MuJoCo's zoo settings) updates every step: a one-row batch's mean is the row and its
            # variance 0 (NaN where the row is not finite), the very floats mean() and var() return, without
            # their ~30 µs of Python-level work per call, about a tenth of own PPO's HalfCheetah step. The
            # general update below with a count of 1 is this, less its multiplications by 1 (exact).
            row = x[0]
            delta, total = row - self.mean, self.count + 1
            self.mean = self.mean + delta / total
            self.var = (self.var * self.count + row * 0 + delta**2 * self.count / total) / total
            self.count = total
            return
        bm, bv, bc = x.mean(axis=0), x.var(axis=0), x.shape[0]
        delta, total = bm - self.mean, self.count + bc
        self.mean = self.mean + delta * bc / total
        m2 = self.var * self.count + bv * bc + delta**2 * self.count * bc / total
        self.var, self.count = m2 / total, total


class Normalizer:
    """Observation and reward normalisation as SB3's ``VecNormalize`` does it.

    Observations: ``clip((o - mean) / sqrt(var + eps), ±10)`` with running stats.
    Rewards: divided by the running std of the discounted return (not centred),
    clipped to ±10. Recorded episode returns are unaffected: the monitor sits
    below, on the raw env.
    """

    def __init__(self, obs_shape: tuple[int, ...], n_envs: int, gamma: float, *, obs: bool, reward: bool):
        self.do_obs, self.do_reward, self.gamma = obs, reward, gamma
        self.obs_rms = RunningMeanStd(obs_shape)
        self.ret_rms = RunningMeanStd(())
        self.ret = np.zeros(n_envs)

    def obs_state(self) -> dict[str, Any] | None:
        """A copy of the observation statistics (``mean``, ``var``, ``count``), for a saved policy;
        ``None`` when observations are not normalised."""
        if not self.do_obs:
            return None
        rms = self.obs_rms
        return {"mean": np.array(rms.mean), "var": np.array(rms.var), "count": float(rms.count)}

    @classmethod
    def frozen(cls, obs_shape: tuple[int, ...], state: dict[str, Any] | None) -> "Normalizer":
        """A normaliser with saved observation statistics (:meth:`obs_state`), to call with ``update=False``."""
        norm = cls(obs_shape, 1, 0.99, obs=state is not None, reward=False)
        if state is not None:
            norm.obs_rms.mean, norm.obs_rms.var = np.asarray(state["mean"]), np.asarray(state["var"])
            norm.obs_rms.count = float(state["count"])
        return norm

    def obs(self, o: np.ndarray, update: bool) -> np.ndarray:
        if not self.do_obs:
            return o
        if update:
            self.obs_rms.update(o)
        return clip((o - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + 1e-8), -10, 10).astype(np.float32)

    def reward(self, r: np.ndarray, ended: np.ndarray) -> np.ndarray:
        if not self.do_reward:
            return r
        self.ret = self.ret * self.gamma + r
        self.ret_rms.update(self.ret)
        self.ret[ended] = 0.0
        return clip(r / np.sqrt(self.ret_rms.var + 1e-8), -10, 10)

    def reward_of(self, r: np.ndarray, ended: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """:meth:`reward` for the sub-envs ``idx`` only (``r`` and ``ended`` are theirs): whole-episode
        collectors step only the envs still needed, and idle ones must not decay their running return."""
        if not self.do_reward:
            return r
        self.ret[idx] = self.ret[idx] * self.gamma + r
        self.ret_rms.update(self.ret[idx])
        self.ret[idx[ended]] = 0.0
        return clip(r / np.sqrt(self.ret_rms.var + 1e-8), -10, 10)


# --------------------------------------------------------------------------- #
# Advantages and diagnostics
# --------------------------------------------------------------------------- #
def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    ended: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16), all ``(T, N)``.

    δ_t = r_t + γ (1 − terminated_t) V(s'_t) − V(s_t)
    A_t = δ_t + γ λ (1 − ended_t) A_{t+1}

    ``next_values[t]`` is V of the true next state, so a truncated episode
    bootstraps from V(s') and a terminated one does not; the recursion never
    crosses an episode boundary. Returns ``(advantages, returns = A + V)``.
    λ = 1 gives discounted returns minus V; λ = 0 gives one-step TD errors.
    """
    T = rewards.shape[0]
    adv = np.zeros_like(rewards, dtype=np.float32)
    last = np.zeros(rewards.shape[1:], dtype=np.float32)
    delta = rewards + gamma * (1.0 - terminated) * next_values - values
    carry = gamma * lam * (1.0 - ended)
    for t in range(T - 1, -1, -1):
        last = delta[t] + carry[t] * last
        adv[t] = last
    return adv, adv + values


def explained_variance(pred: np.ndarray | torch.Tensor, target: np.ndarray | torch.Tensor) -> float:
    """1 − Var(target − pred) / Var(target); NaN when the target is constant."""
    p, y = np.asarray(pred, dtype=np.float64).ravel(), np.asarray(target, dtype=np.float64).ravel()
    vy = y.var()
    return float("nan") if vy == 0 else float(1.0 - (y - p).var() / vy)


def standardized(x: torch.Tensor) -> torch.Tensor:
    """``(x − mean) / (std + 1e-8)``, std with Bessel's correction (torch's default): advantages per batch."""
    return (x - x.mean()) / (x.std() + 1e-8)


def policy_gradient_loss(logp: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """−mean(Â · log π(a|s)): its gradient is minus the policy-gradient estimate of ∇J (Williams 1992)."""
    return -(logp * advantages).mean()


def grad_noise_ratio(loss_of: Callable[[torch.Tensor], torch.Tensor], params: list[nn.Parameter], batch_size: int,
                     chunks: int, generator: torch.Generator | None = None) -> float:
    """Gradient noise: split the batch into ``chunks`` random chunks, take each chunk's
    gradient g_k, and return  mean_k ‖g_k − ḡ‖² / ‖ḡ‖²  (variance across chunks over
    the squared norm of their mean). High values mean a noisy gradient estimate:
    it shows how baselines and critics reduce REINFORCE's variance.

    ``loss_of(idx)`` computes the (mean) loss on the samples ``idx``. Gradients
    already on ``params`` are left as they were.
    """
    if chunks < 2:
        raise ValueError(f"grad noise needs at least 2 chunks, got {chunks}")
    perm = torch.randperm(batch_size, generator=generator)
    grads = []
    for idx in perm.chunk(chunks):
        g = torch.autograd.grad(loss_of(idx), params, allow_unused=True)
        grads.append(torch.cat([(x if x is not None else torch.zeros_like(p)).reshape(-1) for x, p in zip(g, params)]))
    G = torch.stack(grads)
    mean = G.mean(0)
    var = (G - mean).pow(2).sum(1).mean()
    return float(var / mean.pow(2).sum().clamp_min(1e-20))
