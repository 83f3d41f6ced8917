"""REINFORCE in plain NumPy (``impl: numpy``): a linear policy, a least-squares linear
state-value baseline and GAE(λ), with no autograd and no network framework.

It is REINFORCE (Williams 1992) as :mod:`bench.algos.reinforce.reinforce` runs it: whole-episode
batches, the same ``REINFORCEParams`` (baseline none / mean / value, returns
standardised per batch, entropy bonus and its schedule, Adam, optional gradient
clipping), on a linear policy whose gradient is written out by hand:

* **Features** φ(s) = [s, 1]: the observation (flattened, float64; with ``normalize``
  the running mean/std normaliser of :class:`bench.algos.common.Normalizer`,
  VecNormalize's algorithm, is applied first) plus a bias. Nothing else: no
  polynomial or RBF features, so the policy is as expressive as a linear
  controller of the raw state.
* **Policy**: discrete actions, softmax-linear π(a|s) = softmax(φ(s)ᵀW)_a, W of
  shape (d+1, n); continuous actions, linear-Gaussian N(φ(s)ᵀW, diag σ²) with a
  state-independent log σ (``log_std_init``). Weights start at zero (uniform
  softmax, zero mean). Score functions (per sample):
  softmax ∇_W log π(a|s) = φ(s) ⊗ (e_a − π(·|s));
  Gaussian ∇_W log π = φ ⊗ (a − μ)/σ², ∇_{log σ} log π = (a − μ)²/σ² − 1.
* **Baseline** (``baseline: value``): V(s) = φ(s)ᵀw fitted by ridge-regularised
  least squares to the Monte-Carlo returns G_t, as rllab's ``LinearFeatureBaseline``
  (Duan et al. 2016) does: each batch's advantages use the fit from the batches
  before it (so the baseline does not depend on the actions it weights), then w is
  refitted on this batch. The first batch has w = 0.
* **Advantages**: GAE(λ) (Schulman et al. 2016, eq. 16) over whole episodes,
  vectorised (:func:`gae_episodes`, no Python loop over steps); REINFORCE fixes
  λ = 1, where it is G_t − V(s_t) with G_t bootstrapped from V only at time limits.
* **Update**: ĝ = (1/B) Σ_t Â_t ∇ log π(a_t|s_t) + c_e ∇ E[H(π)], one Adam step
  (Kingma & Ba 2015; torch's defaults β 0.9 / 0.999, ε 1e-8) per batch, ascending.

``net_arch``, ``activation``, ``ortho_init``, ``device``, ``kernel``,
``grad_noise_chunks`` and ``vf_coef`` do not apply (suite validation refuses the
first six for ``impl: numpy``; ``vf_coef`` weighs a loss this fit does not have).
"""

from __future__ import annotations

import io
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np

from bench.algos.common import Normalizer, episode_cap, explained_variance, step_sub_envs
from bench.algos.loop import ScheduleValues, Steps, drive
from bench.algos.resume import TrainState, tape_envs
from bench.algos.reinforce.spec import REINFORCEParams
from bench.algos.saved_files import RESAVE, Refused, arrays
from bench.envs import make_vec_env
from bench.storage.record import RecorderProtocol, SavablePolicy

LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


# --------------------------------------------------------------------------- #
# The linear policy and its score function
# --------------------------------------------------------------------------- #
def features(obs: np.ndarray) -> np.ndarray:
    """φ(s) = [s, 1]: ``(B, *obs_shape)`` → ``(B, d + 1)`` float64."""
    x = np.asarray(obs, dtype=np.float64).reshape(len(obs), -1)
    return np.concatenate([x, np.ones((len(x), 1))], axis=1)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


class LinearPolicy:
    """Softmax-linear (``n_actions``) or linear-Gaussian (``action_dim``) policy on φ(s)."""

    def __init__(self, n_features: int, *, n_actions: int | None = None, action_dim: int | None = None,
                 log_std_init: float = 0.0):
        self.discrete = n_actions is not None
        out = n_actions if self.discrete else action_dim
        self.W = np.zeros((n_features, out))
        self.log_std = None if self.discrete else np.full(out, float(log_std_init))

    def params(self) -> list[np.ndarray]:
        return [self.W] if self.discrete else [self.W, self.log_std]

    def sample(self, phi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        z = phi @ self.W
        if self.discrete:
            p = np.exp(_log_softmax(z))
            u = rng.random((len(z), 1))
            return np.minimum((p.cumsum(axis=1) < u).sum(axis=1), p.shape[1] - 1)  # inverse-CDF sampling
        return z + np.exp(self.log_std) * rng.standard_normal(z.shape)

    def mode(self, phi: np.ndarray) -> np.ndarray:
        z = phi @ self.W
        return z.argmax(axis=1) if self.discrete else z

    def log_prob(self, phi: np.ndarray, actions: np.ndarray) -> np.ndarray:
        z = phi @ self.W
        if self.discrete:
            return _log_softmax(z)[np.arange(len(z)), actions.astype(np.int64)]
        u = (actions - z) * np.exp(-self.log_std)
        return (-0.5 * u**2 - self.log_std - LOG_SQRT_2PI).sum(axis=1)

    def entropy(self, phi: np.ndarray) -> np.ndarray:
        if self.discrete:
            logp = _log_softmax(phi @ self.W)
            return -(np.exp(logp) * logp).sum(axis=1)
        return np.full(len(phi), (self.log_std + 0.5 + LOG_SQRT_2PI).sum())

    def gradient(self, phi: np.ndarray, actions: np.ndarray, adv: np.ndarray, ent_coef: float) -> list[np.ndarray]:
        """∇θ of  J = mean(Â · log π(a|s)) + c_e · mean(H(π(·|s))), by hand; one array per :meth:`params`."""
        B = len(phi)
        z = phi @ self.W
        if self.discrete:
            logp = _log_softmax(z)
            p = np.exp(logp)
            onehot = np.zeros_like(p)
            onehot[np.arange(B), actions.astype(np.int64)] = 1.0
            dz = adv[:, None] * (onehot - p)  # ∂(Â log π)/∂z
            if ent_coef:
                H = -(p * logp).sum(axis=1, keepdims=True)
                dz = dz + ent_coef * (-p * (logp + H))  # ∂H/∂z_j = −π_j (log π_j + H)
            return [phi.T @ dz / B]
        inv_var = np.exp(-2 * self.log_std)
        diff = actions - z
        gW = phi.T @ (adv[:, None] * diff * inv_var) / B
        g_log_std = (adv[:, None] * (diff**2 * inv_var - 1.0)).mean(axis=0) + ent_coef  # ∂H/∂log σ = 1
        return [gW, g_log_std]


# --------------------------------------------------------------------------- #
# Baseline and advantages
# --------------------------------------------------------------------------- #
def fit_linear_baseline(phi: np.ndarray, returns: np.ndarray, reg: float = 1e-5) -> np.ndarray:
    """w = argmin ‖Φw − G‖² + reg·‖w‖² (ridge least squares; reg keeps it solvable for constant features)."""
    A = phi.T @ phi + reg * np.eye(phi.shape[1])
    return np.linalg.solve(A, phi.T @ returns)


def discounted_cumsum(x: np.ndarray, ends: np.ndarray, c: float) -> np.ndarray:
    """y_t = Σ_{k ≥ t, same episode} c^(k−t) x_k, all ``(B,)``, episodes contiguous, ``ends`` their last steps.

    Vectorised: episodes are laid out as the rows of an (episodes × longest) array; with k
    a step's index within its episode, y_t = c^(−k_t) · Σ_{j ≥ k_t} c^j x_j, the inner sum
    one reversed cumulative sum along the rows (no sum crosses an episode, so rounding is
    relative to the episode's own values). Exact up to rounding while c^(episode length)
    stays far above float64's underflow (for c = 0.99 · 0.95, episodes under ~10⁴ steps);
    longer episodes fall back to a loop.
    """
    B = len(x)
    if B == 0 or c == 0.0:
        return x.astype(np.float64)
    starts = np.r_[0, np.flatnonzero(ends[:-1]) + 1]
    ep = np.cumsum(np.r_[0, ends[:-1].astype(np.int64)])  # episode index of each step
    k = np.arange(B) - starts[ep]  # index within the episode
    if k.max() * np.log(c) < -600:
        y, g = np.empty(B), 0.0
        for t in range(B - 1, -1, -1):
            g = x[t] + (0.0 if ends[t] else c * g)
            y[t] = g
        return y
    w = c ** k.astype(np.float64)
    rows = np.zeros((len(starts), k.max() + 1))
    rows[ep, k] = x * w
    rev = np.cumsum(rows[:, ::-1], axis=1)[:, ::-1]  # Σ_{j ≥ k} c^j x_j within each episode
    return rev[ep, k] / w


def gae_episodes(rewards: np.ndarray, values: np.ndarray, ends: np.ndarray, bootstrap: np.ndarray,
                 gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """GAE(λ) over whole episodes (Schulman et al. 2016, eq. 16), all ``(B,)``, returns ``(advantages, returns)``.

    δ_t = r_t + γ V(s_{t+1}) − V(s_t), with V(s_{t+1}) = ``bootstrap[t]`` at an episode's last step
    (V of the final observation after a time limit, 0 after termination); Â = discounted_cumsum(δ, γλ);
    returns = Â + V. At λ = 1, Â_t = G_t − V(s_t).
    """
    nxt = np.r_[values[1:], 0.0]
    nxt = np.where(ends, bootstrap, nxt)
    delta = rewards + gamma * nxt - values
    adv = discounted_cumsum(delta, ends, gamma * lam)
    return adv, adv + values


def advantages_of(returns: np.ndarray, values: np.ndarray | None, kind: str, *, normalize_returns: bool,
                  normalize_advantage: bool) -> np.ndarray:
    """Â = G − b for ``kind`` none / mean / value, standardised as
    :func:`bench.algos.reinforce.reinforce.reinforce_advantages` does (ddof 1, ε 1e-8)."""
    g = returns
    b = {"none": None, "mean": g.mean(), "value": values}[kind]
    if normalize_returns and len(g) > 1:
        mu, sd = g.mean(), g.std(ddof=1) + 1e-8
        g = (g - mu) / sd
        b = None if b is None else (b - mu) / sd
    adv = g if b is None else g - b
    if normalize_advantage and len(adv) > 1:
        adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
    return adv


class Adam:
    """Adam (Kingma & Ba 2015) ascending on a list of arrays, in place; torch's defaults."""

    def __init__(self, params: list[np.ndarray], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def ascend(self, grads: list[np.ndarray]) -> None:
        self.t += 1
        b1, b2 = self.betas
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            p += self.lr * (m / (1 - b1**self.t)) / (np.sqrt(v / (1 - b2**self.t)) + self.eps)


# --------------------------------------------------------------------------- #
# Whole-episode collection
# --------------------------------------------------------------------------- #
class Episodes(NamedTuple):
    """Whole episodes in the order they finished; ``B`` steps."""

    phi: np.ndarray  # (B, d + 1) features, as the policy saw them
    actions: np.ndarray  # (B,) or (B, m), unclipped samples
    rewards: np.ndarray  # (B,) as trained on
    ends: np.ndarray  # (B,) bool
    final_phi: np.ndarray  # (B, d + 1) features of the observation after a truncated end, else 0
    truncated: np.ndarray  # (B,) bool: the end is a time limit (or the budget's cut)
    n_episodes: int
    steps: int  # env steps taken: B, plus those of episodes cut at the budget and dropped


def collect_episodes(envs: gym.vector.SyncVectorEnv, policy: LinearPolicy, norm: Normalizer, obs: np.ndarray,
                     min_steps: int, rng: np.random.Generator, max_steps: int | None = None,
                     keep_cut: bool = True) -> tuple[Episodes | None, np.ndarray]:
    """Play whole episodes on the sub-envs until at least ``min_steps`` steps, as
    :class:`bench.algos.reinforce.reinforce.EpisodeCollector` does (idle envs take no steps), cutting the episodes in
    flight at ``max_steps`` as it does (kept as truncations with ``keep_cut``, else dropped).
    ``obs`` is the current normalised observation per env; returns the batch (None when every episode was
    cut and dropped) and the new ``obs``."""
    space = envs.single_action_space
    cont = isinstance(space, gym.spaces.Box)
    subs, n = envs.envs, envs.num_envs
    running: list[list[tuple]] = [[] for _ in range(n)]
    done_eps: list[tuple[list[tuple], np.ndarray | None]] = []
    active = np.ones(n, dtype=bool)
    steps = 0
    while active.any():
        idx = np.flatnonzero(active)
        phi = features(obs[idx])
        a = policy.sample(phi, rng)
        env_a = np.clip(a, space.low, space.high) if cont else a
        raws, rews, dones, finals = step_sub_envs(subs, idx, env_a)
        steps += len(idx)
        rews = norm.reward_of(rews, dones, idx)
        for j, i in enumerate(idx):
            running[i].append((phi[j], a[j], float(rews[j])))
            if dones[j]:
                fo = None if finals[j] is None else features(norm.obs(finals[j][None], update=False))[0]
                done_eps.append((running[i], fo))
                running[i] = []
                if steps >= min_steps:
                    active[i] = False
        obs[idx] = norm.obs(np.stack(raws), update=True)
        if max_steps is not None and steps >= max_steps:  # the budget cuts what is still in flight
            for i in np.flatnonzero(active):
                if running[i] and keep_cut:
                    done_eps.append((running[i], features(obs[i][None])[0]))
                running[i] = []
            break
    if not done_eps:
        return None, obs

    phis, acts, rews_all, ends, finals_all, trunc = [], [], [], [], [], []
    for ep, fo in done_eps:
        phis += [p for p, _, _ in ep]
        acts += [x for _, x, _ in ep]
        rews_all += [r for _, _, r in ep]
        e = np.zeros(len(ep), bool)
        e[-1] = True
        ends.append(e)
        f = np.zeros((len(ep), len(ep[0][0])))
        t = np.zeros(len(ep), bool)
        if fo is not None:
            f[-1], t[-1] = fo, True
        finals_all.append(f)
        trunc.append(t)
    batch = Episodes(np.stack(phis), np.stack(acts), np.asarray(rews_all), np.concatenate(ends),
                     np.concatenate(finals_all), np.concatenate(trunc), len(done_eps), steps)
    return batch, obs


def linear_policy(envs: Any, p: REINFORCEParams) -> LinearPolicy:
    """The linear policy on the envs' observations and one bias feature: softmax or Gaussian by action space."""
    space = envs.single_action_space
    n_feat = int(np.prod(envs.single_observation_space.shape)) + 1
    if isinstance(space, gym.spaces.Discrete):
        return LinearPolicy(n_feat, n_actions=int(space.n))
    return LinearPolicy(n_feat, action_dim=int(np.prod(space.shape)), log_std_init=p.log_std_init)


def batch_returns(batch: Any, w_value: np.ndarray | None, p: REINFORCEParams,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(V(s) of the linear baseline ``w_value``, or zeros without one; the returns G; the advantages Â) of a batch.
    A truncated episode bootstraps from the baseline where there is one."""
    n = len(batch.rewards)
    values = batch.phi @ w_value if w_value is not None else np.zeros(n)
    bootstrap = np.where(batch.truncated, batch.final_phi @ w_value, 0.0) if w_value is not None else np.zeros(n)
    _, returns = gae_episodes(batch.rewards, values, batch.ends, bootstrap, p.gamma, p.gae_lambda)
    adv = advantages_of(returns, values if w_value is not None else None, p.baseline,
                        normalize_returns=p.normalize_returns, normalize_advantage=p.normalize_advantage)
    return values, returns, adv


def clipped(grads: list[np.ndarray], max_norm: float | None) -> tuple[list[np.ndarray], float]:
    """``grads`` scaled to global norm ``max_norm`` where they exceed it (as torch's clip_grad_norm_), and their
    norm before."""
    gnorm = float(np.sqrt(sum(float((g * g).sum()) for g in grads)))
    if max_norm is not None and gnorm > max_norm:
        grads = [g * (max_norm / (gnorm + 1e-6)) for g in grads]
    return grads, gnorm


# --------------------------------------------------------------------------- #
# Training
# --------------------------------------------------------------------------- #
def train(env_id: str, params: REINFORCEParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    """Train the NumPy REINFORCE on ``env_id`` until at least ``timesteps`` env steps (whole batches of episodes)."""
    p = params
    rng = np.random.default_rng(seed)
    envs = make_vec_env(env_id, p.n_envs, recorder=recorder, vec_env=p.vec_env)
    if getattr(recorder, "checkpoints", None) is not None:  # the episodes in progress, for a checkpoint
        tape_envs(envs)
    norm = Normalizer(envs.single_observation_space.shape, p.n_envs, p.gamma, obs=p.normalize_obs,
                      reward=p.normalize_reward)
    space = envs.single_action_space
    policy = linear_policy(envs, p)
    n_feat = policy.W.shape[0]  # the observation's features and the bias
    optimizer = Adam(policy.params(), lr=p.learning_rate)
    recorder.note_models(policy.params(), optimizer.m + optimizer.v)  # NumPy arrays: Adam's two moments
    w_value = np.zeros(n_feat)  # the linear baseline, refitted after each batch
    raw, _ = envs.reset(seed=seed)  # sub-env i gets seed + i, as the torch REINFORCE
    obs = np.asarray(norm.obs(raw, update=True), dtype=np.float64)

    # Derived sizes, in one place.
    min_batch = p.n_steps * p.n_envs
    use_value = p.baseline == "value"

    budget = Steps(timesteps)

    def update(s: ScheduleValues) -> dict[str, float] | None:
        nonlocal obs, w_value
        optimizer.lr = s.learning_rate  # this module's own Adam (no torch param_groups for the driver to set)

        # -- episodes, returns and advantages -----------------------------------
        # A cut episode (an env without a time limit) bootstraps from the linear baseline where there is one,
        # else it is dropped, as bench.algos.reinforce.reinforce does and says why.
        batch, obs = collect_episodes(envs, policy, norm, obs, min(min_batch, budget.left), rng,
                                      episode_cap(envs, budget.left, min_batch), keep_cut=use_value)
        if batch is None:  # every episode was cut at the budget and dropped: the run is over
            return None
        budget.spend(batch.steps)
        values, returns, adv = batch_returns(batch, w_value if use_value else None, p)

        # -- one gradient step (ascent), then refit the baseline ------------------
        grads, gnorm = clipped(policy.gradient(batch.phi, batch.actions, adv, s.ent_coef), p.max_grad_norm)
        old_logp = policy.log_prob(batch.phi, batch.actions)
        entropy = float(policy.entropy(batch.phi).mean())
        optimizer.ascend(grads)
        if use_value:
            w_value = fit_linear_baseline(batch.phi, returns)

        # -- diagnostics ------------------------------------------------------
        log_ratio = policy.log_prob(batch.phi, batch.actions) - old_logp
        diag = {
            "loss/policy": float(-(adv * old_logp).mean()),
            "policy/entropy": entropy,
            "policy/approx_kl": float((np.exp(log_ratio) - 1 - log_ratio).mean()),  # k3, as reinforce.py
            "grad/norm": gnorm,
            "train/episodes": float(batch.n_episodes),
            "train/batch_steps": float(len(adv)),
            **s.diagnostics(p),
        }
        if use_value:  # the baseline's error on this batch, before it is refitted to it
            diag["loss/value"] = float(((returns - values) ** 2).mean())
            diag["value/explained_variance"] = explained_variance(values, returns)
        if not policy.discrete:
            diag["policy/log_std"] = float(policy.log_std.mean())
        return diag

    def arrays() -> dict[str, np.ndarray]:  # what a checkpoint keeps of this module's own state (resume.py)
        out = {"obs": obs, "w_value": w_value, "adam_t": np.asarray(optimizer.t)}
        for i, (q, m, v) in enumerate(zip(optimizer.params, optimizer.m, optimizer.v)):
            out.update({f"param{i}": q, f"m{i}": m, f"v{i}": v})
        return out

    def put(saved: dict[str, np.ndarray]) -> None:
        nonlocal obs, w_value
        obs, w_value, optimizer.t = saved["obs"], saved["w_value"], int(saved["adam_t"])
        for i, (q, m, v) in enumerate(zip(optimizer.params, optimizer.m, optimizer.v)):
            q[...], m[...], v[...] = saved[f"param{i}"], saved[f"m{i}"], saved[f"v{i}"]  # in place: shared arrays

    state = TrainState(norm=norm, rng=rng, envs=envs, extra=(arrays, put))
    drive(budget, p, update, recorder, policy=lambda: policy_fn(policy, norm, space), state=state)
    envs.close()


def policy_fn(policy: LinearPolicy, norm: Normalizer, space: gym.Space) -> SavablePolicy:
    """The deterministic policy on raw observations, for evaluation (normaliser frozen); it can be saved."""
    W = policy.W.copy()
    frozen = LinearPolicy(W.shape[0], n_actions=W.shape[1]) if policy.discrete else \
        LinearPolicy(W.shape[0], action_dim=W.shape[1])
    frozen.W = W
    if not policy.discrete:
        frozen.log_std = policy.log_std.copy()

    def act(raw: np.ndarray) -> np.ndarray:
        a = frozen.mode(features(norm.obs(raw, update=False)))
        return np.clip(a, space.low, space.high).astype(np.float32) if not policy.discrete else a

    return SavablePolicy(act, lambda: linear_checkpoint(frozen, norm))


# --------------------------------------------------------------------------- #
# Saved policies (bench.algos.checkpoint has the torch one's)
# --------------------------------------------------------------------------- #
#: The file format of a saved linear policy.
LINEAR = "bench-linear"


def linear_checkpoint(policy: LinearPolicy, norm: Normalizer) -> dict[str, Any]:
    """``{"format", "files"}``: the weights (and log-stds), with the normaliser's observation statistics."""
    buf = io.BytesIO()
    stats = norm.obs_state() or {}
    extra = {} if policy.discrete else {"log_std": policy.log_std}
    np.savez(buf, W=policy.W, discrete=np.array(policy.discrete), normalize=np.array(bool(stats)), **extra,
             **{f"obs_{k}": np.asarray(v) for k, v in stats.items()})
    return {"format": LINEAR, "files": {"npz": buf.getvalue()}}


def restore_linear(files: dict[str, bytes], obs_space: gym.Space, action_space: gym.Space, *,
                   deterministic: bool = True) -> Callable[[np.ndarray], np.ndarray]:
    """The saved linear policy (:func:`linear_checkpoint`) on raw observations: a batch in, a batch of actions out."""
    data = arrays(files, "npz")  # arrays only: a pickle is refused
    try:
        W = data["W"]
        lin = LinearPolicy(W.shape[0], n_actions=W.shape[1]) if bool(data["discrete"]) else \
            LinearPolicy(W.shape[0], action_dim=W.shape[1])
        lin.W = W
        if not lin.discrete:
            lin.log_std = data["log_std"]
        state = ({"mean": data["obs_mean"], "var": data["obs_var"], "count": float(data["obs_count"])}
                 if bool(data["normalize"]) else None)
    except (KeyError, IndexError, TypeError, ValueError):
        raise Refused("npz", f"not bench's format (W, discrete, normalize ...); allowed: {RESAVE}") from None
    norm = Normalizer.frozen(obs_space.shape, state)
    rng = np.random.default_rng()

    def act(raw: np.ndarray) -> np.ndarray:
        phi = features(norm.obs(np.asarray(raw), update=False))
        a = lin.mode(phi) if deterministic else lin.sample(phi, rng)
        return np.clip(a, action_space.low, action_space.high).astype(np.float32) if not lin.discrete else a

    return act
