"""SB3 baselines recorded through the bench's Recorder (bench.algos.sb3). Seconds, not minutes."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from bench.algos.sb3 import SB3_KEYS, policy_kwargs, schedule, train_sb3
from bench.algos.hyperparams import resolve
from bench.storage.record import EvalConfig, Recorder

# Small rollouts so each smoke run is a handful of updates on 2 cores.
SMALL = {
    "ppo": {"n_envs": 2, "n_steps": 128, "batch_size": 64, "n_epochs": 2},
    "a2c": {"n_envs": 2, "n_steps": 16},
    "trpo": {"n_envs": 2, "n_steps": 256, "batch_size": 128, "n_critic_updates": 2},
}


def _run(algo: str, env_id: str = "CartPole-v1", *, seed: int = 0, timesteps: int = 2000, recorder=None, **over):
    rec = recorder if recorder is not None else Recorder()
    params = resolve(algo, env_id, SMALL[algo], over)
    train_sb3(env_id, algo, params, seed=seed, timesteps=timesteps, recorder=rec)
    return rec, params


def test_schedule_and_policy_kwargs():
    import torch.nn as nn

    assert schedule(0.2, "constant") == 0.2
    lin = schedule(1e-3, "linear")
    assert lin(1.0) == pytest.approx(1e-3) and lin(0.5) == pytest.approx(5e-4) and lin(0.0) == 0.0
    kw = policy_kwargs(resolve("ppo", "HalfCheetah-v5"), continuous=True)
    assert kw == {"activation_fn": nn.ReLU, "ortho_init": False, "log_std_init": -2.0,
                  "net_arch": {"pi": [256, 256], "vf": [256, 256]}}
    kw = policy_kwargs(resolve("ppo", "CartPole-v1", {"net_arch": [32]}), continuous=False)
    assert kw == {"activation_fn": nn.Tanh, "ortho_init": True, "net_arch": [32]}  # no log_std_init for discrete


@pytest.mark.parametrize("algo", ["ppo", "a2c", "trpo"])
def test_smoke_cartpole(algo):
    rec, params = _run(algo, timesteps=2000)
    rollout = params.n_steps * params.n_envs
    assert rec.steps >= 2000 and rec.steps == math.ceil(2000 / rollout) * rollout  # whole rollouts
    assert len(rec.ep_return) > 0 and all(r > 0 for r in rec.ep_return)
    keys = Counter(k for _, k, _ in rec.diag)
    assert keys["loss/value"] == rec.updates == rec.steps // rollout  # one per update, the last one too
    assert keys["loss/policy"] == rec.updates
    assert all(math.isfinite(v) for _, _, v in rec.diag)
    assert set(keys) <= {name for name, _ in SB3_KEYS.values()}
    assert max(s for s, _, _ in rec.diag) == rec.steps  # final update recorded at the final step
    steps = [s for s, k, _ in rec.diag if k == "loss/value"]
    assert steps == [rollout * (i + 1) for i in range(rec.updates)]  # at the step each update happened
    if algo == "trpo":
        assert keys["trpo/step_accepted"] == rec.updates and keys["policy/approx_kl"] == rec.updates
    else:
        ent = [v for _, k, v in rec.diag if k == "policy/entropy"]
        assert all(0 < v <= math.log(2) + 1e-6 for v in ent)  # entropy, not SB3's minus entropy
    assert "policy/log_std" not in keys  # discrete actions


def test_pendulum_normalized_records_log_std_and_evaluates():
    from bench.envs import evaluate_policy

    rec = Recorder(eval=EvalConfig(every=500, episodes=1),
                   evaluate=lambda policy, n: evaluate_policy("Pendulum-v1", policy, n, seed=10_000))
    _, params = _run("ppo", "Pendulum-v1", timesteps=2000, recorder=rec, normalize=True, n_steps=256)
    assert params.normalize is True
    log_std = [v for _, k, v in rec.diag if k == "policy/log_std"]
    assert len(log_std) == rec.updates and all(math.isfinite(v) for v in log_std)
    assert rec.steps >= 2000 and len(rec.ep_return) > 0
    assert len(rec.evals) >= 2 and all(math.isfinite(e[2]) for e in rec.evals)


def test_deterministic_per_seed():
    a, _ = _run("ppo", seed=3, timesteps=1024)
    b, _ = _run("ppo", seed=3, timesteps=1024)
    c, _ = _run("ppo", seed=4, timesteps=1024)
    assert a.ep_return == b.ep_return and a.ep_step == b.ep_step
    assert [d for d in a.diag] == [d for d in b.diag]
    assert a.ep_return != c.ep_return


def test_eval_hook_records_evaluations():
    from bench.envs import evaluate_policy

    calls = []

    def evaluate(policy, n):
        calls.append(n)
        return evaluate_policy("CartPole-v1", policy, n, seed=1_000_000)

    rec = Recorder(eval=EvalConfig(every=500, episodes=2), evaluate=evaluate)
    _run("a2c", timesteps=1500, recorder=rec)
    # after_update runs after each 32-step update; evaluations fall due at 500, 1000, 1500.
    assert [e[0] for e in rec.evals] == [512, 1024, 1504]
    assert calls == [2, 2, 2] and all(e[4] == 2 for e in rec.evals)
    assert all(1 <= e[2] <= 500 for e in rec.evals)
