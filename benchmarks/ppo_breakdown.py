"""Where own PPO's time goes on an MLP env, and how far each part is from its floor.

Usage: ``python benchmarks/ppo_breakdown.py [--env CartPole-v1] [--rounds 3] [--timesteps 20480] [--json FILE]``

One process, one torch and one BLAS thread, the zoo's settings for the env (CartPole: 8 envs x 32
steps, 20 epochs of one 256-sample minibatch, two 64-64 tanh MLPs; HalfCheetah: 1 env x 512
steps, 20 epochs of minibatches of 64, two 256-256 ReLU MLPs, normalisation). Every round times,
in turn:

- whole ``train`` calls of own PPO and SB3 PPO (``timesteps`` env steps each, set-up included);
- the parts of own PPO's loop on fixed data: one minibatch step of the NumPy kernel (loss and
  gradient), the gradient clip, the fused Adam step, one acting call on ``n_envs`` observations,
  one step of the envs as a run makes them (``make_vec_env``, sync), and one product of a
  (batch x width) by a (width x width) matrix, the unit of the update's arithmetic floor.

Per env step, the update costs ``n_epochs / batch_size`` minibatch steps (clip and Adam included),
acting ``1 / n_envs`` of an acting call and stepping ``1 / n_envs`` of a vector step; what the whole
run costs beyond these (rollout buffers, normalisation, GAE, the episode recorder, minibatch
indexing) is the rest. The floor is the update's multiply-adds (each layer's forward and
weight-gradient products, and its input-gradient product but for the first layer) at the rate the
unit product runs. Times are process CPU seconds, medians over rounds. Run it on a quiet machine:
the JSON keeps the load averages.
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
    ap.add_argument("--env", default="CartPole-v1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timesteps", type=int, default=20_480)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import torch

    from bench.algos import TRAIN
    from bench.algos.common import FlatParams, fused_adam_step, pin_one_thread
    from bench.algos.hyperparams import resolve
    from bench.algos.npkernel import ActorCriticKernel, standardize
    from bench.algos.policy import make_policy
    from bench.baselines import train_sb3
    from bench.envs import make_vec_env
    from bench.run.record import Recorder
    from bench.run.runner import run_metadata

    pin_one_thread()
    env_id = args.env
    params = resolve("ppo", env_id, {})
    n_envs, batch, epochs = params.n_envs, params.batch_size, params.n_epochs
    minibatches_per_step = epochs / batch
    load_before = os.getloadavg()

    # Fixed data for the parts: a policy as ppo.train builds it, a batch of plausible samples.
    probe = make_vec_env(env_id, n_envs, recorder=None, vec_env="sync")
    torch.manual_seed(0)
    policy = make_policy(probe, params)
    probe.close()
    flat = FlatParams(list(policy.parameters()))
    opt = torch.optim.Adam([flat.param], lr=params.learning_rate, eps=1e-5, fused=True)
    adam = fused_adam_step(opt)
    kern = ActorCriticKernel(policy)
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((batch, kern.pi.W[0].shape[1])).astype(np.float32)  # what the first layer takes
    act = kern.act(obs, rng)[0]
    adv = standardize(rng.standard_normal(batch).astype(np.float32))
    ret = rng.standard_normal(batch).astype(np.float32)
    old_logp = kern.log_prob(obs, act)
    old_v = kern.value(obs)
    obs_act = obs[:n_envs].copy()
    width = kern.pi.W[1].shape[1] if len(kern.pi.W) > 2 else kern.pi.W[0].shape[0]
    h = rng.standard_normal((batch, width)).astype(np.float32)
    w = rng.standard_normal((width, width)).astype(np.float32)
    # Multiply-adds of one minibatch step: forward and weight gradient for every layer, input gradient
    # for all but the first.
    macs = sum(batch * W.shape[0] * W.shape[1] * (2 if i == 0 else 3)
               for net in (kern.pi, kern.vf) for i, W in enumerate(net.W))

    class _Tape:
        steps = 0

        def episode(self, ret: float, length: int) -> None:
            pass

    venv = make_vec_env(env_id, n_envs, recorder=_Tape(), vec_env="sync")
    venv.reset(seed=0)
    actions = [venv.action_space.sample() for _ in range(4000)]
    it = iter(range(10**9))

    def env_step() -> None:
        venv.step(actions[next(it) % len(actions)])

    parts = {
        "minibatch_grad_us": lambda: kern.pg_step(obs, act, adv, ret, vf_coef=params.vf_coef, ent_coef=params.ent_coef,
                                                  old_logp=old_logp, clip_range=params.clip_range, old_values=old_v,
                                                  clip_range_vf=None),
        "clip_us": lambda: flat.clip_grad_norm(params.max_grad_norm),
        "adam_us": adam,
        "act_us": lambda: kern.act(obs_act, rng),
        "env_step_us": env_step,
        "matmul_unit_us": lambda: h @ w.T,
    }
    adam()  # creates Adam's state
    own = lambda **kw: TRAIN["ppo"](env_id, params, **kw)  # noqa: E731
    sb3 = lambda **kw: train_sb3(env_id, "ppo", params, **kw)  # noqa: E731
    for fn in (own, sb3):  # warm-up: imports, allocator growth
        fn(seed=0, timesteps=n_envs * getattr(params, 'n_steps', 1), recorder=Recorder())
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
    floor = minibatches_per_step * macs * med["matmul_unit_us"] / (batch * width * width)
    acting, stepping = med["act_us"] / n_envs, med["env_step_us"] / n_envs
    per_step = {
        "update": update, "update_matmul_floor": floor, "acting": acting, "env_stepping": stepping,
        "rest": med["own_us_per_step"] - update - acting - stepping,
    }
    out = {
        "env_id": env_id, "timesteps": args.timesteps, "n_envs": n_envs, "batch_size": batch, "n_epochs": epochs,
        "unit_matmul": [batch, width, width], "macs_per_minibatch": macs, "rounds": rounds, "medians": med,
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
