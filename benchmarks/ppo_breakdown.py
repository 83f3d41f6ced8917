"""Where own PPO's time goes on CartPole-v1, and how far each part is from its floor.

Usage: ``python benchmarks/ppo_breakdown.py [--rounds 3] [--timesteps 20480] [--json results/ppo-breakdown-cartpole.json]``

One process, one torch and one BLAS thread, the zoo's CartPole settings (8 envs x 32 steps, 20
epochs of one 256-sample minibatch, two 64-64 tanh MLPs). Every round times, in turn:

- whole ``train`` calls of own PPO and SB3 PPO (``timesteps`` env steps each, set-up included);
- the parts of own PPO's loop on fixed data: one minibatch step of the NumPy kernel (loss and
  gradient), the gradient clip, the fused Adam step, one 8-env acting call, one 8-env step of
  the envs as a run makes them (``make_vec_env``, sync), and one 256x64 by 64x64 matmul, the
  unit of the update's arithmetic floor (six per minibatch step: a forward, a weight-gradient and
  an input-gradient product in each of actor and critic).

Per env step, the update costs 20/256 of a minibatch step (its clip and Adam included), acting
1/8 of an acting call and stepping 1/8 of an 8-env step; what the whole run costs beyond these
(rollout buffers, GAE, the episode recorder, minibatch indexing) is the rest. Times are process
CPU seconds, medians over rounds. Run it on a quiet machine: the JSON keeps the load averages.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def _per_call(fn, n: int) -> float:
    """CPU µs per call of ``fn``, over ``n`` calls."""
    t = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timesteps", type=int, default=20_480)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import gymnasium as gym
    import torch

    from bench.algos import TRAIN
    from bench.algos.common import FlatParams, fused_adam_step, pin_one_thread
    from bench.algos.hyperparams import resolve
    from bench.algos.npkernel import ActorCriticKernel, standardize
    from bench.algos.policy import ActorCritic
    from bench.baselines import train_sb3
    from bench.envs import make_vec_env
    from bench.run.record import Recorder
    from bench.run.runner import run_metadata

    pin_one_thread()
    env_id = "CartPole-v1"
    params = resolve("ppo", env_id, {})
    n_envs, n_steps, batch, epochs = params.n_envs, params.n_steps, params.batch_size, params.n_epochs
    minibatches_per_step = epochs * (n_envs * n_steps // batch) / (n_envs * n_steps)
    load_before = os.getloadavg()

    # Fixed data for the parts: a policy as ppo.train builds it, a batch of plausible samples.
    env = gym.make(env_id)
    torch.manual_seed(0)
    policy = ActorCritic(env.observation_space, env.action_space)
    flat = FlatParams(list(policy.parameters()))
    opt = torch.optim.Adam([flat.param], lr=params.learning_rate, eps=1e-5, fused=True)
    adam = fused_adam_step(opt)
    kern = ActorCriticKernel(policy)
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((batch, 4)).astype(np.float32)
    act = rng.integers(0, 2, batch)
    adv = standardize(rng.standard_normal(batch).astype(np.float32))
    ret = rng.standard_normal(batch).astype(np.float32)
    old_logp = kern.log_prob(obs, act)
    old_v = kern.value(obs)
    obs8 = obs[:n_envs].copy()
    h = rng.standard_normal((batch, 64)).astype(np.float32)
    w = rng.standard_normal((64, 64)).astype(np.float32)

    class _Tape:
        steps = 0

        def episode(self, ret: float, length: int) -> None:
            pass

    venv = make_vec_env(env_id, n_envs, recorder=_Tape(), vec_env="sync")
    venv.reset(seed=0)
    actions = rng.integers(0, 2, size=(4000, n_envs))
    it = iter(range(10**9))

    def env_step() -> None:
        venv.step(actions[next(it) % len(actions)])

    parts = {
        "minibatch_grad_us": lambda: kern.pg_step(obs, act, adv, ret, vf_coef=params.vf_coef, ent_coef=params.ent_coef,
                                                  old_logp=old_logp, clip_range=params.clip_range, old_values=old_v,
                                                  clip_range_vf=None),
        "clip_us": lambda: flat.clip_grad_norm(params.max_grad_norm),
        "adam_us": adam,
        "act_8_envs_us": lambda: kern.act(obs8, rng),
        "env_step_8_envs_us": env_step,
        "matmul_256x64x64_us": lambda: h @ w.T,
    }
    adam()  # creates Adam's state
    own = lambda **kw: TRAIN["ppo"](env_id, params, **kw)  # noqa: E731
    sb3 = lambda **kw: train_sb3(env_id, "ppo", params, **kw)  # noqa: E731
    for fn in (own, sb3):  # warm-up: imports, allocator growth
        fn(seed=0, timesteps=n_envs * n_steps, recorder=Recorder())
    rounds: dict[str, list[float]] = {k: [] for k in ("own_us_per_step", "sb3_us_per_step", *parts)}
    for r in range(args.rounds):
        for name, fn in (("own_us_per_step", own), ("sb3_us_per_step", sb3)):
            t = time.process_time()
            fn(seed=0, timesteps=args.timesteps, recorder=Recorder())
            rounds[name].append((time.process_time() - t) / args.timesteps * 1e6)
        for name, fn in parts.items():
            rounds[name].append(_per_call(fn, 2000 if "env" in name or "act" in name else 500))
        print(f"round {r + 1}: own {rounds['own_us_per_step'][-1]:.1f} µs/step, sb3 {rounds['sb3_us_per_step'][-1]:.1f}",
              file=sys.stderr)
    venv.close()
    med = {k: statistics.median(v) for k, v in rounds.items()}
    update = minibatches_per_step * (med["minibatch_grad_us"] + med["clip_us"] + med["adam_us"])
    floor = minibatches_per_step * 6 * med["matmul_256x64x64_us"]
    acting, stepping = med["act_8_envs_us"] / n_envs, med["env_step_8_envs_us"] / n_envs
    per_step = {
        "update": update, "update_matmul_floor": floor, "acting": acting, "env_stepping": stepping,
        "rest": med["own_us_per_step"] - update - acting - stepping,
    }
    out = {
        "env_id": env_id, "timesteps": args.timesteps, "rounds": rounds, "medians": med,
        "own_per_env_step_us": per_step, "ratio_own_vs_sb3": med["sb3_us_per_step"] / med["own_us_per_step"],
        "meta": {**run_metadata(), "load_before": load_before, "load_after": os.getloadavg()},
    }
    print(json.dumps({k: round(v, 2) for k, v in per_step.items()}), file=sys.stderr)
    print(f"own {med['own_us_per_step']:.1f} µs/step, SB3 {med['sb3_us_per_step']:.1f}: {out['ratio_own_vs_sb3']:.2f}x",
          file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
