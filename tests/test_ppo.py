"""The project's own PPO: determinism, smoke runs, and learning checks."""

from __future__ import annotations

import numpy as np
import pytest

from bench.algos.ppo import ppo
from bench.algos.hyperparams import resolve
from bench.stats.metrics import first_crossing, summarize
from bench.storage.record import EvalConfig, Recorder


def run(env_id, steps, seed=0, recorder=None, **over):
    rec = recorder or Recorder()
    ppo.train(env_id, resolve("ppo", env_id, over), seed=seed, timesteps=steps, recorder=rec)
    return rec


@pytest.mark.parametrize("kernel", ["numpy", "torch"])
def test_same_seed_same_returns_and_different_seed_differs(kernel):
    a, b, c = (run("CartPole-v1", 3000, s, kernel=kernel) for s in (0, 0, 1))
    assert len(a.ep_return) > 10
    assert a.ep_return == b.ep_return and a.ep_step == b.ep_step
    assert a.ep_return != c.ep_return


def test_budget_is_whole_rollouts_and_diagnostics_are_recorded():
    rec = run("CartPole-v1", 1000)  # zoo: 8 envs × 32 steps = 256 per rollout
    assert rec.steps == 1024 and rec.updates == 4
    keys = {k for _, k, _ in rec.diag}
    assert {"loss/policy", "loss/value", "policy/entropy", "policy/approx_kl", "policy/clip_fraction",
            "grad/norm", "value/explained_variance"} <= keys
    assert all(np.isfinite(v) for _, k, v in rec.diag if k.startswith("loss/"))


@pytest.mark.parametrize("kernel", ["numpy", "torch"])
def test_continuous_with_normalisation_records_log_std_and_evaluates(kernel):
    ev_calls = []

    def evaluate(policy, n):
        from bench.envs import evaluate_policy

        ev_calls.append(n)
        return evaluate_policy("Pendulum-v1", policy, n, seed=123)

    rec = Recorder(eval=EvalConfig(every=1024, episodes=2), evaluate=evaluate)
    run("Pendulum-v1", 2048, recorder=rec, normalize=True, grad_noise_chunks=4, n_steps=256, kernel=kernel)  # 4 envs → 1024 a rollout
    keys = {k for _, k, _ in rec.diag}
    assert {"policy/log_std", "grad/noise_ratio"} <= keys
    assert len(rec.evals) == 2 and ev_calls == [2, 2]
    assert all(-2000 < m < 0 for _, _, m, _, _ in rec.evals)


@pytest.mark.parametrize("kernel", ["numpy", "torch"])
def test_target_kl_stops_epochs_early(monkeypatch, kernel):
    """SB3's rule: a minibatch whose KL to the rollout's policy exceeds 1.5 × target_kl ends the update's
    epochs before it steps. The first minibatch of an update is scored by the policy that collected the
    rollout (KL 0), so with a tiny target exactly one Adam step is taken per update; without a target all
    n_epochs × minibatches are."""
    steps = []
    real = ppo.fused_adam_step

    def counting(optimizer):
        step = real(optimizer)

        def counted():
            steps.append(1)
            step()
        return counted

    monkeypatch.setattr(ppo, "fused_adam_step", counting)
    rec = run("CartPole-v1", 512, target_kl=1e-6, kernel=kernel)  # zoo: 8 envs × 32 steps, one minibatch of 256
    assert rec.updates == 2 and len(steps) == 2
    kl = [v for _, k, v in rec.diag if k == "policy/approx_kl"]
    assert len(kl) == 2 and all(v <= 1.5e-6 for v in kl)  # means over the steps taken, still recorded
    steps.clear()
    rec = run("CartPole-v1", 512, kernel=kernel)
    p = resolve("ppo", "CartPole-v1", {})
    assert len(steps) == rec.updates * p.n_epochs * (p.n_envs * p.n_steps // p.batch_size) == 40


def test_ppo_solves_cartpole_fast():
    """Fast learning check (one seed): zoo hyperparameters, 475 within 60k steps."""
    rec = run("CartPole-v1", 60_000, seed=0)
    i = first_crossing(np.array(rec.ep_return), 475.0, 20)
    assert i is not None, f"final 20-episode mean {np.mean(rec.ep_return[-20:]):.1f}"
    assert rec.ep_step[i] <= 60_000


@pytest.mark.learning
def test_ppo_cartpole_bar_five_seeds(learning_record):
    """Learning bar: 475 within 100k steps on at least 4 of 5 seeds."""
    hits = []
    for seed in range(5):
        rec = run("CartPole-v1", 100_000, seed=seed)
        s = summarize(np.array(rec.ep_step), np.array(rec.ep_wall), np.array(rec.ep_return), threshold=475.0, window=20)
        hits.append(s.steps_to_threshold)
    print("PPO CartPole steps-to-475:", hits)
    ok = sum(h is not None for h in hits) >= 4
    learning_record(bar="PPO CartPole-v1: 475 within 100k steps on >= 4/5 seeds (steps-to-475 per seed)",
                    values=hits, passed=ok)
    assert ok, hits


@pytest.mark.learning
def test_ppo_pendulum_bar_five_seeds(learning_record):
    """Learning bar: final return >= -250 within 200k steps on at least 4 of 5 seeds."""
    finals = []
    for seed in range(5):
        rec = run("Pendulum-v1", 200_000, seed=seed)
        finals.append(float(np.mean(rec.ep_return[-20:])))
    print("PPO Pendulum final returns:", finals)
    ok = sum(f >= -250 for f in finals) >= 4
    learning_record(bar="PPO Pendulum-v1: final return >= -250 within 200k steps on >= 4/5 seeds "
                        "(final 20-episode mean per seed)", values=[round(f, 1) for f in finals], passed=ok)
    assert ok, finals


@pytest.mark.learning
def test_ppo_halfcheetah_once(learning_record):
    """Learning bar: HalfCheetah-v5 final return >= 1500 within 1M steps, one run."""
    rec = run("HalfCheetah-v5", 1_000_000, seed=0)
    final = float(np.mean(rec.ep_return[-20:]))
    print("PPO HalfCheetah final return:", final)
    learning_record(bar="PPO HalfCheetah-v5: final return >= 1500 within 1M steps, one run (seed 0)",
                    values=[round(final, 1)], passed=final >= 1500)
    assert final >= 1500
