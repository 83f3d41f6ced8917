"""Own A2C, PPO and TRPO against SB3's A2C and PPO and sb3-contrib's TRPO, update for update (issue 19; PPO issue 67).

Each test builds both implementations from the same hyperparameters (SB3's model exactly as
:mod:`bench.algos.sb3` builds it), gives them the same weights and the same rollout, runs the
update of each, and compares the parameters after it. A difference in the loss, its scaling,
advantage normalisation, gradient clipping, the optimizer's settings, the critic's fitting or
TRPO's line search shows up here as a parameter mismatch. Where the two differ on purpose
(docs/parity.md, "Differences, line by line"), the test says so and neutralises that one
difference, so that everything else is still compared.
"""

from __future__ import annotations

import copy
import math
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
import torch

from bench.algos.a2c import a2c
from bench.algos.npg import npg
from bench.algos.trpo import trpo
from bench.algos.collect import Collector, Rollout
from bench.algos.common import FlatParams, Normalizer, gae
from bench.algos.hyperparams import resolve
from bench.algos.npkernel import ActorCriticKernel
from bench.algos.policy import ActorCritic, GaussianPd, make_policy
from bench.algos.sb3 import _algo_kwargs, policy_kwargs
from bench.envs import make_env, make_vec_env

#: Own ActorCritic module → the SB3 ActorCriticPolicy module holding the same layer.
LAYERS = {
    "pi.0": "mlp_extractor.policy_net.0", "pi.2": "mlp_extractor.policy_net.2", "pi.4": "action_net",
    "vf.0": "mlp_extractor.value_net.0", "vf.2": "mlp_extractor.value_net.2", "vf.4": "value_net",
}


def _sb3_model(algo: str, env_id: str, p, n_envs: int):
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import DummyVecEnv
    from sb3_contrib import TRPO

    venv = DummyVecEnv([partial(gym.make, env_id) for _ in range(n_envs)])
    cls = {"a2c": A2C, "ppo": PPO, "trpo": TRPO}[algo]
    continuous = isinstance(venv.action_space, gym.spaces.Box)
    model = cls("MlpPolicy", venv, policy_kwargs=policy_kwargs(p, continuous=continuous), seed=0,
                device="cpu", **_algo_kwargs(algo, p))
    model.set_logger(configure(folder=None, format_strings=[]))
    return model


def _own_policy(env_id: str, p) -> ActorCritic:
    envs = gym.vector.SyncVectorEnv([partial(gym.make, env_id)])
    pol = make_policy(envs, p, share_features=False)
    envs.close()
    return pol


def _copy_weights(own: ActorCritic, sb3_policy) -> None:
    with torch.no_grad():
        for mine, theirs in LAYERS.items():
            src, dst = own.get_submodule(mine), sb3_policy.get_submodule(theirs)
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)
        if not own.discrete:
            sb3_policy.log_std.copy_(own.log_std)


def _assert_same_weights(own: ActorCritic, sb3_policy, *, atol: float, rtol: float = 1e-4) -> None:
    for mine, theirs in LAYERS.items():
        src, dst = own.get_submodule(mine), sb3_policy.get_submodule(theirs)
        torch.testing.assert_close(src.weight.detach(), dst.weight.detach(), atol=atol, rtol=rtol, msg=lambda m: f"{mine}: {m}")
        torch.testing.assert_close(src.bias.detach(), dst.bias.detach(), atol=atol, rtol=rtol, msg=lambda m: f"{mine}: {m}")
    if not own.discrete:
        torch.testing.assert_close(own.log_std.detach(), sb3_policy.log_std.detach(), atol=atol, rtol=rtol)


def _rollout(pol: ActorCritic, T: int, N: int, gamma: float, rng: np.random.Generator, *, adv_favours=None):
    """A made-up rollout in both layouts, with one termination and one truncation in it.

    Returns ``(own Rollout, fill)``; ``fill(buffer)`` writes the same transitions into an SB3
    ``RolloutBuffer`` the way ``OnPolicyAlgorithm.collect_rollouts`` does (γ·V(final obs) added to
    the reward on truncation, ``episode_starts`` marking the step after an episode ended).
    """
    d = pol.pi[0].in_features
    obs = torch.as_tensor(rng.normal(size=(T, N, d)), dtype=torch.float32)
    if pol.use_sde:
        pol.reset_noise(N)
    with torch.no_grad():
        pd = pol.dist(obs.reshape(T * N, d))
        actions = pd.sample()
        logp = pd.log_prob(actions).reshape(T, N)
        values = pol.value(obs.reshape(T * N, d)).reshape(T, N)
    actions = actions.reshape(T, N, *actions.shape[1:])
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    if adv_favours is not None:  # rewards that favour some actions, so the surrogate has a clear direction
        rewards = adv_favours(actions).numpy().astype(np.float32)
    terminated = np.zeros((T, N), np.float32)
    ended = np.zeros((T, N), np.float32)
    terminated[1, 0] = ended[1, 0] = 1.0  # env 0's episode terminates at t = 1
    ended[T - 2, N - 1] = 1.0  # env N-1's episode is truncated at t = T-2
    v_final = np.float32(rng.normal())  # V of that truncated episode's final observation
    last_values = rng.normal(size=N).astype(np.float32)
    next_values = np.concatenate([values[1:].numpy(), last_values[None]], axis=0)
    next_values[T - 2, N - 1] = v_final
    ro = Rollout(obs=obs, actions=actions, logp=logp, values=values, rewards=rewards, terminated=terminated,
                 ended=ended, next_values=next_values)

    def fill(buffer) -> None:
        buffer.reset()
        starts = np.zeros(N, np.float32)
        for t in range(T):
            r = rewards[t].copy()
            r[N - 1] += gamma * v_final if t == T - 2 else 0.0
            act = actions[t].numpy()
            buffer.add(obs[t].numpy(), act.reshape(N, -1) if act.ndim == 1 else act, r, starts, values[t].reshape(N, 1),
                       logp[t])
            starts = ended[t].copy()
        buffer.compute_returns_and_advantage(last_values=torch.as_tensor(last_values), dones=ended[T - 1])

    return ro, fill


def test_gae_equals_sb3_rollout_buffer_with_termination_and_truncation():
    """Own GAE on (terminated, ended, V(s')) equals SB3's on (episode_starts, γ·V(final) added on truncation)."""
    from stable_baselines3.common.buffers import RolloutBuffer

    p = resolve("a2c", "CartPole-v1", {"n_envs": 3, "n_steps": 6, "gae_lambda": 0.9})
    pol = _own_policy("CartPole-v1", p)
    ro, fill = _rollout(pol, 6, 3, p.gamma, np.random.default_rng(0))
    env = gym.make("CartPole-v1")
    buf = RolloutBuffer(6, env.observation_space, env.action_space, gamma=p.gamma, gae_lambda=p.gae_lambda, n_envs=3)
    fill(buf)
    adv, ret = gae(ro.rewards, ro.values.numpy(), ro.next_values, ro.terminated, ro.ended, p.gamma, p.gae_lambda)
    np.testing.assert_allclose(adv, buf.advantages, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ret, buf.returns, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- #
# A2C
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("kernel", ["numpy", "torch"])
@pytest.mark.parametrize("over", [{}, {"normalize_advantage": True, "ent_coef": 0.01, "max_grad_norm": 0.05},
                                  {"use_rms_prop": False, "ent_coef": 0.01}],
                         ids=["sb3-defaults", "normadv-ent-clip", "adam"])
def test_a2c_updates_equal_sb3s(env_id, kernel, over):
    """Three A2C updates (so RMSprop's running average matters) on the same rollouts: same weights as SB3's."""
    _three_a2c_updates(env_id, {"kernel": kernel, **over})


def _three_a2c_updates(env_id: str, over: dict, T: int = 5, N: int = 4) -> tuple[ActorCritic, object]:
    p = resolve("a2c", env_id, {"n_envs": N, "n_steps": T, "normalize": False}, over)
    torch.manual_seed(0)
    pol = _own_policy(env_id, p)
    model = _sb3_model("a2c", env_id, p, N)
    _copy_weights(pol, model.policy)
    flat = FlatParams(list(pol.parameters()))
    opt = a2c.make_optimizer([flat.param], p)
    kern = ActorCriticKernel(pol) if p.kernel == "numpy" else None
    rng = np.random.default_rng(1)
    for _ in range(3):
        ro, fill = _rollout(pol, T, N, p.gamma, rng)
        fill(model.rollout_buffer)
        model.train()
        a2c.a2c_gradient(ro, pol, flat, kern, p, torch.device("cpu"))
        flat.clip_grad_norm(p.max_grad_norm)
        opt.step()
        _assert_same_weights(pol, model.policy, atol=2e-6)
    return pol, model


# Own A2C's whole loop against SB3's, in lockstep (scripts/a2c_lockstep.py runs it from the command line).
def a2c_lockstep(env_id: str, updates: int, *, tol: float = 1e-4, over: dict | None = None,
                 verbose: bool = False, start: dict | None = None, history: list | None = None,
                 replay: bool = False) -> tuple[dict[str, int], dict[str, float], int]:
    """Own A2C (torch path) and SB3's A2C from the same initial weights, on envs reset with the same seeds,
    every action's Gaussian noise drawn from one shared table: each side runs its own collection, time-limit
    handling, normalisation, returns and update, and the two are compared after every update.

    Runs ``updates`` updates (or until every compared quantity has differed by more than ``tol``). Returns
    ``(first, worst, n)``: the first update at which each quantity (normalised observations, actions,
    advantages, returns, the Linear layers' weights, the log-std) differed by more than ``tol``, the largest
    gap each reached, and the number of updates run. ``over``: hyperparameters over the zoo's (``resolve``);
    ``kernel`` in it picks the own side's path, ``torch`` unless given (``numpy`` is what ``auto`` runs on
    MuJoCo: acting and the gradient through :class:`ActorCriticKernel`).

    ``start``: a trained state (:func:`a2c_trained_state`) both sides start from instead of the initial
    weights: the policy's weights, the observation and reward normalisers' running statistics, each env's
    running discounted return (set after the first reset, which zeroes SB3's) and the RMSprop state, loaded
    into own A2C and SB3's ``VecNormalize`` and policy optimizer alike (:func:`_load_start`). The envs are
    still reset with the same seeds, so the trained policy starts new episodes. ``history``: a list that
    gets one entry per update, ``{"gaps": ..., "terminated": n, "truncated": n, "own_obs": ..., "sb3_obs": ...}``
    (the own side's episode ends and both sides' normalised observations in that update's rollout), to tell a
    jump from a slow growth, and to compare runs with each other. ``replay``: SB3's envs replay the own envs'
    transitions (raw observations, rewards, terminations, truncations, final observations; SB3's actions are
    ignored), so the two see the same data however their actions part: MuJoCo's chaos is taken out, and what
    is left to part them is their handling of that data (normalisation, bootstrapping, returns, the update)
    and the slow growth of rounding in the weights (:class:`_Replay`)."""
    over = over or {}
    from stable_baselines3.common.distributions import DiagGaussianDistribution

    p = resolve("a2c", env_id, {"kernel": "torch", **over})
    assert p.kernel in ("torch", "numpy"), p.kernel
    envs = make_vec_env(env_id, p.n_envs)
    d = int(np.prod(envs.single_action_space.shape))
    table = torch.from_numpy(np.random.default_rng(123).standard_normal((updates * p.n_steps + 1, p.n_envs, d))
                             .astype(np.float32))
    k = {"own": 0, "sb3": 0}

    def own_sample(self: GaussianPd) -> torch.Tensor:
        z = table[k["own"]].reshape(self.mean.shape)
        k["own"] += 1
        return self.mean + self.log_std.exp() * z

    class TableRNG:  # what the NumPy kernel's real act() draws its Gaussian noise from
        def standard_normal(self, shape, dtype):
            k["own"] += 1
            return table[k["own"] - 1].numpy().reshape(shape).astype(dtype, copy=False)

    def sb3_sample(self: DiagGaussianDistribution) -> torch.Tensor:
        z = table[k["sb3"]].reshape(self.distribution.mean.shape)
        k["sb3"] += 1
        return self.distribution.mean + self.distribution.stddev * z

    saved = GaussianPd.sample, DiagGaussianDistribution.sample
    GaussianPd.sample = own_sample  # type: ignore[method-assign]
    DiagGaussianDistribution.sample = sb3_sample  # type: ignore[method-assign]
    try:
        return _lockstep_run(env_id, updates, tol, p, envs, verbose, TableRNG(), start, history, replay)
    finally:
        GaussianPd.sample, DiagGaussianDistribution.sample = saved
        envs.close()


def _lockstep_run(env_id: str, updates: int, tol: float, p, envs, verbose: bool, rng, start: dict | None = None,
                  history: list | None = None, replay: bool = False) -> tuple[dict[str, int], dict[str, float], int]:
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    torch.manual_seed(0)
    norm = Normalizer(envs.single_observation_space.shape, p.n_envs, p.gamma, obs=p.normalize_obs,
                      reward=p.normalize_reward)
    pol = make_policy(envs, p)
    if start is not None:
        pol.load_state_dict(start["policy"])
    flat = FlatParams(list(pol.parameters()))
    opt = a2c.make_optimizer([flat.param], p)
    kern = ActorCriticKernel(pol) if p.kernel == "numpy" else None

    if replay:
        queues = _Replay.record(envs)
        venv = DummyVecEnv([partial(_Replay, make_env(env_id), q) for q in queues])
    else:
        venv = DummyVecEnv([partial(make_env, env_id) for _ in range(p.n_envs)])
    vn = None
    if p.normalize_obs or p.normalize_reward:
        venv = vn = VecNormalize(venv, norm_obs=p.normalize_obs, norm_reward=p.normalize_reward, gamma=p.gamma)
    model = A2C("MlpPolicy", venv, policy_kwargs=policy_kwargs(p, continuous=True), seed=0, device="cpu",
                **_algo_kwargs("a2c", p))
    model.set_logger(configure(folder=None, format_strings=[]))
    _copy_weights(pol, model.policy)
    if start is not None:  # before the first reset, which both sides count in the observation statistics
        _load_start(start, pol, flat, opt, norm, model, vn)
    col = Collector(envs, pol, norm, seed=0, kernel=kern, rng=rng)
    _, callback = model._setup_learn(updates * p.n_steps * p.n_envs, None)
    callback.on_training_start(locals(), globals())
    if start is not None and p.normalize_reward:  # VecNormalize.reset zeroed its returns: both get the trained ones
        norm.ret = np.array(start["ret"], np.float64)
        vn.returns = np.array(start["ret"], np.float64)
    buf = model.rollout_buffer

    first: dict[str, int] = {}
    worst: dict[str, float] = {}
    for u in range(updates):
        ro = col.collect(p.n_steps)
        adv, ret = gae(ro.rewards, ro.values.numpy(), ro.next_values, ro.terminated, ro.ended, p.gamma, p.gae_lambda)
        a2c.a2c_gradient(ro, pol, flat, kern, p, torch.device("cpu"))
        flat.clip_grad_norm(p.max_grad_norm)
        opt.step()
        model.collect_rollouts(model.env, callback, buf, n_rollout_steps=p.n_steps)
        model.train()
        gaps = {
            "obs": float(np.abs(ro.obs.numpy() - buf.observations.reshape(ro.obs.shape)).max()),
            "actions": float(np.abs(ro.actions.numpy() - buf.actions.reshape(ro.actions.shape)).max()),
            "advantages": float(np.abs(adv - buf.advantages).max()),
            "returns": float(np.abs(ret - buf.returns).max()),
            "weights": max(float((pol.get_submodule(m).weight - model.policy.get_submodule(t).weight).detach().abs().max())
                           for m, t in LAYERS.items()),
            "log_std": float((pol.log_std - model.policy.log_std).detach().abs().max()),
        }
        if history is not None:
            history.append({"gaps": gaps, "terminated": int(ro.terminated.sum()),
                            "truncated": int((ro.ended - ro.terminated).sum()),
                            "own_obs": ro.obs.numpy().copy(), "sb3_obs": buf.observations.reshape(ro.obs.shape).copy()})
        for name, g in gaps.items():
            worst[name] = max(worst.get(name, 0.0), g)
            if g > tol and name not in first:
                first[name] = u
                if verbose:
                    print(f"update {u}: {name} differ by {g:.3g}", flush=True)
        if len(first) == len(gaps):
            break
    venv.close()
    return first, worst, u + 1


class _Replay(gym.Wrapper):
    """One SB3 env that returns what one own sub-env did, from a queue :meth:`record` fills: ``reset``
    its reset observation, ``step`` its transition (the final observation where the episode ended; SB3's
    ``DummyVecEnv`` then calls ``reset``, which returns the own env's next first observation)."""

    def __init__(self, env: gym.Env, queue) -> None:
        super().__init__(env)
        self.queue = queue

    def reset(self, *, seed=None, options=None):
        return self.queue.popleft(), {}

    def step(self, action):
        return self.queue.popleft()

    @staticmethod
    def record(envs) -> list:
        """Wrap the own vector env's ``reset`` and ``step`` so they queue their raw results per sub-env."""
        from collections import deque

        queues = [deque() for _ in range(envs.num_envs)]
        reset, step = envs.reset, envs.step

        def recording_reset(**kwargs):
            raw, info = reset(**kwargs)
            for i, q in enumerate(queues):
                q.append(raw[i].copy())
            return raw, info

        def recording_step(actions):
            raw, r, te, tr, info = step(actions)
            for i, q in enumerate(queues):
                done = bool(te[i] or tr[i])
                q.append(((info["final_obs"][i] if done else raw[i]).copy(), float(r[i]), bool(te[i]), bool(tr[i]), {}))
                if done:
                    q.append(raw[i].copy())
            return raw, r, te, tr, info

        envs.reset, envs.step = recording_reset, recording_step
        return queues


def _load_start(start: dict, pol: ActorCritic, flat: FlatParams, opt, norm: Normalizer, model, vn) -> None:
    """A trained state into both sides: the weights are already in ``pol`` (and copied into SB3's policy);
    here the normalisers' running statistics and the RMSprop state (own: one flat parameter; SB3: one state
    per parameter, the same slices of it)."""
    for mine, theirs_of in (("obs_rms", lambda v: v.obs_rms), ("ret_rms", lambda v: v.ret_rms)):
        mean, var, count = start[mine]
        for rms in [getattr(norm, mine)] + ([theirs_of(vn)] if vn is not None else []):
            rms.mean, rms.var, rms.count = np.array(mean, np.float64), np.array(var, np.float64), float(count)
    if start.get("optimizer") is None:
        return
    opt.load_state_dict(copy.deepcopy(start["optimizer"]))  # load_state_dict keeps the very tensors: a copy
    (state,) = opt.state.values()
    theirs = dict(model.policy.named_parameters())
    o = 0
    for name, q in pol.named_parameters():
        k = q.numel()
        mod, _, leaf = name.rpartition(".")
        dst = theirs[f"{LAYERS[mod]}.{leaf}" if mod else name]
        assert dst.shape == q.shape, (name, dst.shape, q.shape)
        model.policy.optimizer.state[dst] = {key: (v.clone() if v.dim() == 0 else v[o:o + k].view_as(q).clone())
                                             for key, v in state.items()}
        o += k
    assert o == flat.param.numel()


def a2c_trained_state(env_id: str, steps: int, *, seed: int = 0, over: dict | None = None) -> dict:
    """Train own A2C (``a2c.train``, the zoo's settings over ``over``, ``kernel: auto`` as the reference's
    runs) for ``steps`` env steps and return what :func:`a2c_lockstep`'s ``start`` takes: the policy's
    ``state_dict``, the normalisers' ``(mean, var, count)``, each env's running discounted return, the
    optimizer's ``state_dict``, and the episodes seen (``(return, length)``). The state is read off the
    recorder's hooks: the optimizer from ``note_models``, the normaliser from the collector that
    ``after_update``'s evaluation policy closes over."""
    p = resolve("a2c", env_id, over or {})

    class Capture:
        steps = 0

        def __init__(self) -> None:
            self.episodes: list[tuple[float, int]] = []
            self.params: list = []
            self.optimizers: list = []
            self.policy_fn = None

        def episode(self, ret: float, length: int) -> None:
            self.episodes.append((ret, length))

        def diagnostics(self, values, step=None) -> None:
            pass

        def note_models(self, params, optimizers=(), *, other=()) -> None:
            self.params, self.optimizers = list(params), list(optimizers)

        def after_update(self, policy=None) -> None:
            self.policy_fn = policy

    rec = Capture()
    torch.manual_seed(seed)
    a2c.train(env_id, p, seed=seed, timesteps=steps, recorder=rec)
    act = getattr(rec.policy_fn, "act", rec.policy_fn)  # a SavablePolicy wraps the collector's policy function
    (col,) = [c.cell_contents for c in act.__closure__ if isinstance(c.cell_contents, Collector)]
    pol, norm = col.policy, col.norm
    return {
        "policy": {k: v.detach().clone() for k, v in pol.state_dict().items()},
        "obs_rms": (norm.obs_rms.mean.copy(), norm.obs_rms.var.copy(), norm.obs_rms.count),
        "ret_rms": (np.array(norm.ret_rms.mean), np.array(norm.ret_rms.var), norm.ret_rms.count),
        "ret": norm.ret.copy(),
        "optimizer": rec.optimizers[0].state_dict(),
        "episodes": rec.episodes,
        "steps": rec.steps,
        "env_id": env_id, "seed": seed, "over": dict(over or {}),
    }


@pytest.mark.parametrize("kernel", ["torch", "numpy"])
def test_a2c_whole_loop_in_lockstep_with_sb3s_through_time_limits(kernel):
    """Collection, time-limit bootstrapping, n-step returns and the update together, not only the update:
    from the same weights with the same action noise, on HalfCheetah cut to 7-step episodes (14 truncations
    in 100 updates of 5 steps), own A2C and SB3's stay together, on the torch path and on the NumPy kernel
    (which ``kernel: auto`` picks for the MuJoCo reference's runs). What grows is MuJoCo's float32 rounding
    (measured: weights 3e-6 on torch, 1e-6 on the kernel, advantages 1e-4, after 100 updates); a truncation
    bootstrapped differently moves the advantages by the order of V(s'), 0.1 and more."""
    first, worst, n = a2c_lockstep("HalfCheetah-v5[max_episode_steps=7]", 100, tol=1e-5,
                                   over={"normalize": False, "kernel": kernel})
    assert n == 100, first  # every compared quantity parted: the loop stopped early
    assert worst["weights"] < 5e-5 and worst["log_std"] < 5e-6, worst
    assert worst["advantages"] < 5e-3 and worst["returns"] < 5e-3, worst


@pytest.mark.parametrize("kernel", ["torch", "numpy"])
def test_a2c_whole_loop_in_lockstep_with_sb3s_through_terminations(kernel):
    """The same on Hopper-v5, whose episodes end by falling (terminated: no bootstrap), about 85 of them in
    the 300 updates (1,500 steps) from a near-random policy. Measured: weights within 4e-7, advantages
    within 1e-5, on both paths. Bootstrapping a termination moves the advantages by the order of V(s').
    Without normalisation: with it, rounding in the first normalised observations parts the torch path's
    observations by 1e-4 at about update 180 (the kernel's at 290), and the runs are chaotic after that."""
    first, worst, n = a2c_lockstep("Hopper-v5", 300, tol=1e-4, over={"normalize": False, "kernel": kernel})
    assert n == 300, first
    assert worst["weights"] < 1e-5 and worst["log_std"] < 1e-6, worst
    assert worst["advantages"] < 1e-3 and worst["returns"] < 1e-3, worst


def test_a2c_lockstep_shows_the_documented_normaliser_order():
    """With VecNormalize-style normalisation the one documented difference shows, and only it: a truncated
    episode's final observation is normalised with the statistics before the step's update (own) or after it
    (SB3). Update 0 (steps 0-4, no truncation) agrees; update 1 holds the first truncation (step 6), where so
    few observations have been seen that the two normalised final observations, and so the advantages,
    differ by 0.047 (docs/parity.md, "Differences, line by line")."""
    first, worst, _ = a2c_lockstep("HalfCheetah-v5[max_episode_steps=7]", 2, tol=1e-5, over={"normalize": True})
    assert "advantages" not in first or first["advantages"] == 1, first
    assert worst["advantages"] > 1e-2, worst


@pytest.fixture(scope="module")
def trained_hopper() -> dict:
    return a2c_trained_state("Hopper-v5", 5_000)


@pytest.mark.parametrize("kernel", ["torch", "numpy"])
def test_a2c_lockstep_from_a_trained_state_replayed(kernel, trained_hopper):
    """From a trained state (5,000 steps of own A2C: weights, normaliser statistics, running return, RMSprop
    state, loaded into both), SB3's envs replaying the own envs' transitions: the normalised observations are
    bit for bit the same, and the weights stay within rounding (measured: 5e-7 after 300 updates, on both
    paths; without the replay MuJoCo's chaos parts the two at about update 190)."""
    first, worst, n = a2c_lockstep("Hopper-v5", 300, over={"kernel": kernel}, start=trained_hopper, replay=True)
    assert n == 300 and not first, first
    assert worst["obs"] == 0.0, worst
    assert worst["weights"] < 1e-5 and worst["advantages"] < 1e-4, worst


@pytest.mark.parametrize("sample_freq", [-1, 4])
def test_gsde_a2c_updates_equal_sb3s(sample_freq):
    """With gSDE the update's log-probabilities and entropy come from the state-dependent variance
    Σ_i z_i² σ_ij²; three A2C updates land on SB3's weights, the (64, 1) noise log-std matrix included."""
    pol, model = _three_a2c_updates("Pendulum-v1", {"use_sde": True, "sde_sample_freq": sample_freq,
                                                     "ent_coef": 0.01, "log_std_init": -1.0})
    assert model.policy.log_std.shape == pol.log_std.shape == (64, 1)


def test_a2c_rmsprop_step_equals_sb3s_on_the_same_gradients():
    """One step of each optimizer on the same gradient, the state included (no policy involved)."""
    p = resolve("a2c", "CartPole-v1")
    model = _sb3_model("a2c", "CartPole-v1", p, 1)
    theirs = list(model.policy.parameters())
    mine = [torch.nn.Parameter(q.detach().clone()) for q in theirs]
    flat = FlatParams(mine)
    opt = a2c.make_optimizer([flat.param], p)
    g = torch.Generator().manual_seed(0)
    for scale in (1.0, 1e-3, 10.0):
        for a, b in zip(mine, theirs):
            a.grad.copy_(torch.randn(a.shape, generator=g) * scale)
            b.grad = a.grad.clone()
        opt.step()
        model.policy.optimizer.step()
        for a, b in zip(mine, theirs):
            torch.testing.assert_close(a.detach(), b.detach(), atol=1e-7, rtol=1e-6)


# --------------------------------------------------------------------------- #
# TRPO
# --------------------------------------------------------------------------- #
def _sharpen(pol: ActorCritic):
    """Rewards for actions near the policy's mean (``-z²``): the surrogate then wants a smaller std,
    the case where KL(π_old ‖ π_θ) and KL(π_θ ‖ π_old) disagree most at the trust region's edge."""

    def rewards(actions: torch.Tensor) -> torch.Tensor:
        return -(actions[..., 0] / pol.log_std.detach().exp()[0]).pow(2) * 20.0

    return rewards


def _own_trpo_update(pol: ActorCritic, ro: Rollout, p, critic: FlatParams, opt, kern) -> trpo.StepResult:
    """One iteration of :func:`bench.algos.npg.npg.train_natural` with TRPO's step (sub_sampling_factor 1)."""
    B = ro.rewards.size
    adv, ret = gae(ro.rewards, ro.values.numpy(), ro.next_values, ro.terminated, ro.ended, p.gamma, p.gae_lambda)
    adv, ret = torch.from_numpy(adv.reshape(B)), torch.from_numpy(ret.reshape(B))
    obs, actions = ro.obs.reshape(B, -1), ro.actions.reshape(B, *ro.actions.shape[2:])
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    res = trpo.policy_step(pol, obs, actions, ro.logp.reshape(B), adv, target_kl=p.target_kl,
                           cg_max_steps=p.cg_max_steps, cg_damping=p.cg_damping,
                           shrink=p.line_search_shrinking_factor, max_iter=p.line_search_max_iter,
                           kl_per_dim=p.kl_action_dims == "mean")
    npg.fit_critic(pol, critic, opt, kern, obs, ret, epochs=p.n_critic_updates, batch_size=p.batch_size,
                   generator=torch.Generator().manual_seed(0))
    return res


@pytest.mark.parametrize("env_id, over", [
    # cg_damping 0.1 (sb3-contrib's default, not the zoo's 1e-3 for CartPole): with 1e-3 CG amplifies
    # float32 rounding (the two compute the same Fisher-vector products in a different order) to ~1e-3.
    ("CartPole-v1", {"cg_damping": 0.1}),
    ("Pendulum-v1", {}),
    # The planted case: a step that sharpens a Gaussian, with a trust region large enough for the
    # cubic term to matter. Under KL(π_old ‖ π_θ) (this module before issue 19) the full step is
    # rejected and the line search shrinks it; under sb3-contrib's KL(π_θ ‖ π_old) it is accepted.
    # Measured on the first update: KL(π_old ‖ π_θ) 0.055 > δ = 0.05 > KL(π_θ ‖ π_old) 0.041.
    ("Pendulum-v1", {"target_kl": 0.05, "cg_damping": 0.1}),
    # Two action dimensions: sb3-contrib's KL is the mean over them (SB3's per-dimension Normal, then
    # .mean()), half the KL between the action distributions. Own TRPO summed them before issue 19's
    # LunarLanderContinuous-v3 finding; with the sum this case fails (the steps differ by about √2).
    ("LunarLanderContinuous-v3", {}),
    # gSDE: the KL of the trust region and the surrogate use the state-dependent variance.
    ("Pendulum-v1", {"use_sde": True, "log_std_init": -1.0}),
    ("LunarLanderContinuous-v3", {"use_sde": True, "sde_sample_freq": 4}),
], ids=["cartpole", "pendulum", "pendulum-sharpening", "lunarcontinuous-2d", "pendulum-gsde", "lunarcontinuous-gsde"])
@pytest.mark.parametrize("kernel", ["numpy", "torch"])
def test_trpo_updates_equal_sb3_contribs(env_id, over, kernel, monkeypatch):
    """Two TRPO updates on the same rollouts: same actor (line search included) and critic as sb3-contrib's.

    sb3-contrib starts CG from 1e-4·N(0, I) where own CG starts from 0 (deliberate, see trpo.py);
    here its ``randn_like`` returns zeros, so that every other step is compared exactly. The critic
    fits one minibatch per epoch (``batch_size`` = the rollout), so the shuffling order cannot matter.
    """
    import sb3_contrib.trpo.trpo as sb3_trpo

    if over.get("use_sde") and kernel == "numpy":
        pytest.skip("gSDE runs on the torch path only (validated: kernel numpy is refused)")
    cg = sb3_trpo.conjugate_gradient_solver

    def cg_from_zero(*args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(torch, "randn_like", torch.zeros_like)
            return cg(*args, **kwargs)

    monkeypatch.setattr(sb3_trpo, "conjugate_gradient_solver", cg_from_zero)
    T, N = 32, 2
    p = resolve("trpo", env_id, {"n_envs": N, "n_steps": T, "batch_size": T * N, "n_critic_updates": 3,
                                 "normalize": False, "kernel": kernel, "gamma": 0.5}, over)
    torch.manual_seed(0)
    pol = _own_policy(env_id, p)
    model = _sb3_model("trpo", env_id, p, N)
    _copy_weights(pol, model.policy)
    critic = FlatParams(pol.critic_parameters())
    opt = torch.optim.Adam([critic.param], lr=p.learning_rate, eps=1e-5)
    kern = ActorCriticKernel(pol) if kernel == "numpy" else None
    rng = np.random.default_rng(3)
    fractions = []
    for _ in range(2):
        ro, fill = _rollout(pol, T, N, p.gamma, rng,
                            adv_favours=None if pol.discrete or pol.use_sde else _sharpen(pol))
        fill(model.rollout_buffer)
        model.train()
        res = _own_trpo_update(pol, ro, p, critic, opt, kern)
        fractions.append(res.fraction)
        _assert_same_weights(pol, model.policy, atol=1e-5, rtol=1e-3)
    assert all(f > 0 for f in fractions)  # steps were taken (a rejected step would compare nothing)
    if "target_kl" in over:
        assert fractions[0] == 1.0  # the full step: accepted under KL(π_θ ‖ π_old), not under KL(π_old ‖ π_θ)


def test_kl_action_dims_sum_bounds_the_kl_between_action_distributions():
    """``kl_action_dims: sum`` (the paper's): a step's KL between the d-dimensional action distributions stays
    below δ, where the default (sb3-contrib's mean over dimensions) lets it reach up to d·δ."""
    space = gym.spaces.Box(-1, 1, (4,), np.float32)
    d = 3
    kls = {}
    for mode in ("mean", "sum"):
        torch.manual_seed(0)
        pol = ActorCritic(space, gym.spaces.Box(-1, 1, (d,), np.float32), share_features=False)
        obs = torch.randn(256, 4)
        with torch.no_grad():
            pd = pol.dist(obs)
            a = pd.sample()
            logp = pd.log_prob(a)
        adv = a[:, 0] - a[:, 1] + 0.5 * a[:, 2]  # a clear direction in every dimension
        adv = (adv - adv.mean()) / adv.std()
        old = npg.frozen_dist(pol, obs)
        res = trpo.policy_step(pol, obs, a, logp, adv, target_kl=0.01, cg_max_steps=15, cg_damping=0.1,
                               shrink=0.8, max_iter=10, kl_per_dim=mode == "mean")
        assert res.accepted
        with torch.no_grad():
            kls[mode] = float(pol.dist(obs).kl(old).mean())  # the KL between the action distributions
        assert res.kl == pytest.approx(kls[mode] / (d if mode == "mean" else 1), rel=1e-5)
    assert kls["sum"] < 0.01 < kls["mean"] < d * 0.01
    assert npg.mean_kl(old, old, per_dim=True) == 0.0


def test_sb3_trpo_refuses_kl_action_dims_sum(tmp_path):
    from bench.suites.suite import SuiteError, load_suite

    f = tmp_path / "s.yaml"
    f.write_text("name: s\nseeds: 1\ndefaults: {timesteps: 2048}\nenvs: [{id: Pendulum-v1}]\n"
                 "algorithms: [{algo: trpo, impl: sb3, hyperparams: {kl_action_dims: sum}}]\n")
    with pytest.raises(SuiteError, match=r"algorithms\[0\]\.hyperparams\.kl_action_dims.*allowed for impl sb3: mean"):
        load_suite(f)


def test_trpo_line_search_bounds_the_kl_sb3_contrib_bounds():
    """A planted step that only lowers a Gaussian's log-std by Δ with Δ² = δ: KL(π_old ‖ π_θ) ≈ Δ² + ⅔Δ³ > δ
    rejects it, KL(π_θ ‖ π_old) ≈ Δ² − ⅔Δ³ < δ (sb3-contrib's, and now ours) accepts it whole."""
    torch.manual_seed(0)
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    pol = ActorCritic(space, gym.spaces.Box(-1, 1, (1,), np.float32), share_features=False)
    obs = torch.randn(64, 3)
    with torch.no_grad():
        pd = pol.dist(obs)
        a = pd.mean + 0.1 * torch.randn(64, 1)  # actions near the mean: a smaller std improves the surrogate
        logp = pd.log_prob(a)
    adv = torch.ones(64)
    delta = 0.05
    n = sum(q.numel() for q in pol.actor_parameters())
    x = torch.zeros(n)
    x[-1] = -1.0  # log_std is the last actor parameter
    step = trpo.NaturalStep(x=x, beta=delta ** 0.5, theta0=torch.cat([q.detach().reshape(-1) for q in
                                                                     pol.actor_parameters()]),
                            old=npg.frozen_dist(pol, obs), surrogate=1.0, grad_norm=1.0)
    d = delta ** 0.5
    assert -d + math.exp(2 * d) / 2 - 0.5 > delta > d + math.exp(-2 * d) / 2 - 0.5  # KL(old ‖ new), KL(new ‖ old)
    orig = trpo.natural_step
    try:
        trpo.natural_step = lambda *args, **kw: step
        res = trpo.policy_step(pol, obs, a, logp, adv, target_kl=delta, cg_max_steps=1, cg_damping=0.0, shrink=0.5,
                               max_iter=5)
    finally:
        trpo.natural_step = orig
    assert res.accepted and res.fraction == 1.0 and res.line_search_iters == 1
    assert res.kl == pytest.approx(d + math.exp(-2 * d) / 2 - 0.5, rel=1e-4)
    assert float(pol.log_std.detach()[0]) == pytest.approx(-d, rel=1e-6)


# --------------------------------------------------------------------------- #
# Deliberate differences, pinned (docs/parity.md, "Differences, line by line")
# --------------------------------------------------------------------------- #
def test_conjugate_gradient_from_zero_is_sb3_contribs_from_its_random_start():
    """sb3-contrib starts CG at 1e-4·N(0, I), own at 0: after the same iterations the solutions agree to ~1e-4."""
    from sb3_contrib.common.utils import conjugate_gradient_solver

    g = torch.Generator().manual_seed(0)
    M = torch.randn(50, 50, generator=g)
    A = M.T @ M / 50 + 0.1 * torch.eye(50)
    b = torch.randn(50, generator=g)
    for iters in (5, 15):
        mine = trpo.conjugate_gradient(lambda v: A @ v, b, iters)
        torch.manual_seed(1)
        theirs = conjugate_gradient_solver(lambda v: A @ v, b, max_iter=iters)
        assert float((mine - theirs).norm() / mine.norm()) < 1e-3
        with pytest.MonkeyPatch.context() as m:  # from the same start, the same solver
            m.setattr(torch, "randn_like", torch.zeros_like)
            torch.testing.assert_close(mine, conjugate_gradient_solver(lambda v: A @ v, b, max_iter=iters))


def test_linear_schedules_run_one_update_ahead_of_sb3s():
    """Own schedules use the progress at the start of the update (1 − k/n); SB3's, the progress after its
    rollout (1 − (k+1)·batch/budget): own update k gets SB3's value of update k−1, and never 0."""
    from stable_baselines3.common.callbacks import BaseCallback

    from bench.storage.record import Recorder

    p = resolve("a2c", "CartPole-v1", {"n_envs": 2, "n_steps": 5, "lr_schedule": "linear", "kernel": "torch"})
    rec = Recorder()
    a2c.train("CartPole-v1", p, seed=0, timesteps=50, recorder=rec)
    own = [v for _, k, v in rec.diag if k == "train/learning_rate"]

    class LearningRates(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.lrs: list[float] = []

        def _on_step(self) -> bool:
            return True

        def _after_update(self) -> None:
            self.lrs.append(self.model.policy.optimizer.param_groups[0]["lr"])

        def _on_rollout_start(self) -> None:
            if self.model._n_updates:
                self._after_update()

        def _on_training_end(self) -> None:
            self._after_update()

    cb = LearningRates()
    _sb3_model("a2c", "CartPole-v1", p, 2).learn(50, callback=cb)
    lr, n = p.learning_rate, 5
    assert own == pytest.approx([lr * (1 - k / n) for k in range(n)])
    assert cb.lrs == pytest.approx([lr * (1 - (k + 1) / n) for k in range(n)])


def test_normalizer_equals_vecnormalize_step_by_step_but_for_the_final_observation():
    """Own Normalizer, in the Collector's order, against SB3's VecNormalize on the same raw stream: observations
    and rewards equal; a truncated episode's final observation is normalised with the statistics before the
    step's update (own) or after it (SB3), a difference of one batch in the running statistics."""
    from stable_baselines3.common.vec_env import DummyVecEnv, VecEnvWrapper, VecNormalize

    from bench.algos.common import Normalizer

    class KeepRaw(VecEnvWrapper):
        def reset(self):
            return self.venv.reset()

        def step_wait(self):
            obs, r, d, infos = self.venv.step_wait()
            self.raw = (obs.copy(), r.copy(), d.copy(), [i.get("terminal_observation") for i in infos])
            return obs, r, d, infos

    n = 3
    venv = KeepRaw(DummyVecEnv([partial(gym.make, "MountainCar-v0", max_episode_steps=7) for _ in range(n)]))
    venv.seed(0)
    vn = VecNormalize(venv, gamma=0.99)
    mine = Normalizer((2,), n, 0.99, obs=True, reward=True)
    obs0 = vn.reset()
    raw0 = vn.get_original_obs()
    np.testing.assert_allclose(mine.obs(raw0, update=True), obs0, rtol=1e-6)
    rng = np.random.default_rng(0)
    gaps = []
    for _ in range(30):
        obs, r, d, infos = vn.step(rng.integers(0, 3, n))
        raw_obs, raw_r, done, raw_final = venv.raw
        np.testing.assert_allclose(mine.reward(raw_r, done), r, rtol=1e-6)
        for i in np.flatnonzero(done):  # all truncations here (7 steps never reach the flag)
            gaps.append(np.abs(mine.obs(raw_final[i][None], update=False)[0] - infos[i]["terminal_observation"]).max())
        np.testing.assert_allclose(mine.obs(raw_obs, update=True), obs, rtol=1e-5, atol=1e-6)
    assert len(gaps) == 12 and 0 < max(gaps) < 0.5


# --------------------------------------------------------------------------- #
# PPO
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("env_id, over", [
    ("CartPole-v1", {}),
    # Value clipping, an entropy bonus and a gradient norm small enough to clip every step.
    ("CartPole-v1", {"clip_range_vf": 0.1, "ent_coef": 0.01, "max_grad_norm": 0.05}),
    ("Pendulum-v1", {"ent_coef": 0.01}),
    # Target-KL early stop (SB3's rule, 1.5 × target_kl before the step): a large step size makes the
    # second epoch's KL pass it, so both stop after the first step of the update.
    ("CartPole-v1", {"learning_rate": 0.05, "target_kl": 0.001}),
], ids=["cartpole", "cartpole-vfclip-ent-gradclip", "pendulum", "cartpole-target-kl"])
@pytest.mark.parametrize("kernel", ["numpy", "torch"])
def test_ppo_updates_equal_sb3s(env_id, over, kernel, monkeypatch):
    """Two updates of own PPO's training loop (``ppo.train``: epochs, clipping, the early stop, Adam) on
    made-up rollouts, each followed by SB3's PPO ``train()`` on the same rollout: same weights after each.

    The rollout is the whole minibatch (``batch_size`` = ``n_steps × n_envs``), so that the two shuffles
    (own torch's, SB3's NumPy's) cannot matter; the epochs are several, so that Adam's state and the
    clipped ratios of later epochs count.
    """
    from bench.algos.ppo import ppo
    from bench.storage.record import Recorder

    T, N = 16, 2
    p = resolve("ppo", env_id, {"n_envs": N, "n_steps": T, "batch_size": T * N, "n_epochs": 4, "normalize": False,
                                "kernel": kernel, "clip_range_schedule": "constant", "lr_schedule": "constant"}, over)
    model = _sb3_model("ppo", env_id, p, N)
    rng = np.random.default_rng(5)
    real_collector = ppo.rollout_collector
    own: dict = {}

    def collector(envs, policy, normalizer, p_, **kw):
        col = real_collector(envs, policy, normalizer, p_, **kw)
        _copy_weights(policy, model.policy)
        own["policy"] = policy

        def collect(n_steps):
            ro, fill = _rollout(policy, n_steps, N, p.gamma, rng)
            fill(model.rollout_buffer)
            return ro

        col.collect = collect
        return col

    class Compare(Recorder):
        def after_update(self, policy=None):
            super().after_update(policy)
            model.train()
            _assert_same_weights(own["policy"], model.policy, atol=1e-5, rtol=1e-3)
            self.compared = getattr(self, "compared", 0) + 1

    steps = []
    real_adam_step = ppo.fused_adam_step

    def counting_adam_step(optimizer):
        step = real_adam_step(optimizer)

        def counted():
            steps.append(1)
            step()
        return counted

    monkeypatch.setattr(ppo, "rollout_collector", collector)
    monkeypatch.setattr(ppo, "fused_adam_step", counting_adam_step)
    rec = Compare()
    ppo.train(env_id, p, seed=0, timesteps=2 * T * N, recorder=rec)
    assert rec.compared == 2
    # One Adam step per epoch, or, stopped early, one per update; SB3 counts the epochs it began, the stopping
    # one included. Equal weights then say that SB3 stopped at the same step.
    stopped = "target_kl" in over
    assert len(steps) == (2 if stopped else 2 * p.n_epochs)
    assert model.logger.name_to_value["train/n_updates"] == (4 if stopped else 2 * p.n_epochs)
