"""Where own PPO's time goes on an MLP or pixel env, and how far each part is from its floor.

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

Pixel envs (``ALE/Pong-v5`` with the Nature CNN, MinAtar with its small CNN) run through torch: the
minibatch step is the torch loss and its backward, and acting is a torch forward. Their floor is
the CNN torso alone, forward and backward over a minibatch and forward over an acting batch: work
SB3 does with the very same torch kernels. ``shared_floor_bound`` is then the most any PPO on these
kernels and this stepping could run against SB3: SB3's time over (that floor + env stepping).
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
    from bench.algos.ppo.ppo import ppo_losses
    from bench.algos.sb3 import train_sb3
    from bench.envs import make_vec_env
    from bench.storage.record import Recorder
    from bench.run.provenance import run_metadata

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
    obs_shape = probe.single_observation_space.shape
    probe.close()
    flat = FlatParams(list(policy.parameters()))
    opt = torch.optim.Adam([flat.param], lr=params.learning_rate, eps=1e-5, fused=True)
    adam = fused_adam_step(opt)
    rng = np.random.default_rng(0)
    adv = standardize(rng.standard_normal(batch).astype(np.float32))
    ret = rng.standard_normal(batch).astype(np.float32)
    if policy.pixels:
        parts_fixed = _pixel_parts(policy, obs_shape, params, flat, batch, n_envs, rng, ppo_losses, torch)
        unit_desc, macs, floor_of = None, None, None
    else:
        kern = ActorCriticKernel(policy)
        obs = rng.standard_normal((batch, kern.pi.W[0].shape[1])).astype(np.float32)  # what the first layer takes
        act = kern.act(obs, rng)[0]
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
        unit_desc = [batch, width, width]
        parts_fixed = {
            "minibatch_grad_us": lambda: kern.pg_step(obs, act, adv, ret, vf_coef=params.vf_coef,
                                                      ent_coef=params.ent_coef, old_logp=old_logp,
                                                      clip_range=params.clip_range, old_values=old_v,
                                                      clip_range_vf=None),
            "act_us": lambda: kern.act(obs_act, rng),
            "matmul_unit_us": lambda: h @ w.T,
        }

        def floor_of(med: dict[str, float]) -> float:
            return minibatches_per_step * macs * med["matmul_unit_us"] / (batch * width * width)

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

    parts = {**parts_fixed, "clip_us": lambda: flat.clip_grad_norm(params.max_grad_norm), "adam_us": adam,
             "env_step_us": env_step}
    heavy = policy.pixels  # a pixel minibatch step takes ~100 ms: fewer calls
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
            calls = 2000 if "env" in name or "act" in name else 500
            rounds[name].append(_per_call(fn, max(calls // 100, 5) if heavy and name != "env_step_us" else calls))
        print(f"round {r + 1}: own {rounds['own_us_per_step'][-1]:.1f} µs/step, sb3 {rounds['sb3_us_per_step'][-1]:.1f}",
              file=sys.stderr)
    venv.close()
    med = {k: statistics.median(v) for k, v in rounds.items()}
    update = minibatches_per_step * (med["minibatch_grad_us"] + med["clip_us"] + med["adam_us"])
    acting, stepping = med["act_us"] / n_envs, med["env_step_us"] / n_envs
    per_step = {"update": update, "acting": acting, "env_stepping": stepping,
                "rest": med["own_us_per_step"] - update - acting - stepping}
    out = {"env_id": env_id, "timesteps": args.timesteps, "n_envs": n_envs, "batch_size": batch, "n_epochs": epochs}
    if policy.pixels:
        per_step["update_torso_floor"] = minibatches_per_step * med["torso_grad_us"]
        per_step["acting_torso_floor"] = med["torso_act_us"] / n_envs
        shared = per_step["update_torso_floor"] + per_step["acting_torso_floor"] + stepping
        out["shared_floor_bound"] = med["sb3_us_per_step"] / shared
    else:
        per_step["update_matmul_floor"] = floor_of(med)
        out |= {"unit_matmul": unit_desc, "macs_per_minibatch": macs}
    out |= {"rounds": rounds, "medians": med, "own_per_env_step_us": per_step,
            "ratio_own_vs_sb3": med["sb3_us_per_step"] / med["own_us_per_step"],
            "meta": {**run_metadata(), "load_before": load_before, "load_after": os.getloadavg()}}
    print(json.dumps({k: round(v, 2) for k, v in per_step.items()}), file=sys.stderr)
    print(f"own {med['own_us_per_step']:.1f} µs/step, SB3 {med['sb3_us_per_step']:.1f}: {out['ratio_own_vs_sb3']:.2f}x"
          + (f"; bound on shared kernels {out['shared_floor_bound']:.2f}x" if policy.pixels else ""), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str) + "\n")


def _pixel_parts(policy, obs_shape, params, flat, batch: int, n_envs: int, rng, ppo_losses, torch) -> dict:
    """The timed parts of a pixel policy: the torch minibatch step as ``ppo.train``'s ``torch_grads``
    states it, acting, and the CNN torso alone (forward and backward, forward only), the shared floor."""
    frames = torch.from_numpy(rng.integers(0, 256, (batch, *obs_shape), dtype=np.uint8))  # random, as good as any
    with torch.no_grad():
        pd, v = policy.dist_value(frames)
        actions = pd.sample()
        old_logp, old_v = pd.log_prob(actions), v
    adv, ret = (torch.from_numpy(rng.standard_normal(batch).astype(np.float32)) for _ in range(2))
    act_frames = frames[:n_envs].clone()

    def minibatch() -> None:
        pd, values = policy.dist_value(frames)
        logp = pd.log_prob(actions)
        a = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg, vl, _ = ppo_losses(logp, old_logp, a, values, old_v, ret, params.clip_range, params.clip_range_vf)
        loss = pg + params.vf_coef * vl - params.ent_coef * pd.entropy().mean()
        flat.zero_grad()
        loss.backward()

    def act() -> None:
        with torch.inference_mode():
            pd, v = policy.dist_value(act_frames)
            a = pd.sample()
            pd.log_prob(a).numpy(), v.numpy(), a.numpy()

    def torso_grad() -> None:
        flat.zero_grad()
        policy.pi_features(frames).sum().backward()

    def torso_act() -> None:
        with torch.inference_mode():
            policy.pi_features(act_frames)

    return {"minibatch_grad_us": minibatch, "act_us": act, "torso_grad_us": torso_grad, "torso_act_us": torso_act}


if __name__ == "__main__":
    main()
