"""Env stepping modes (``vec_env``) side by side: raw stepping, and own and SB3 PPO, sync against vector.

Usage: ``python scripts/speed_vecenv.py [--rounds 3] [--steps 4000] [--timesteps 20000] [--out results/speed-vecenv.json]``

1. Raw stepping: 8 CartPole-v1 envs through :func:`bench.envs.make_vec_env` (with an episode
   recorder, as in a run) and uniformly random actions drawn beforehand, ``--steps`` vector
   steps per timing, every available mode once per round, rounds alternating. The time
   excludes building the envs and the first reset (subprocess start-up for async).
2. Training: own PPO and SB3 PPO on CartPole-v1 (the zoo's hyperparameters, 8 envs) with
   ``vec_env`` sync and vector, each round all four in turn, in this one process (as
   ``bench speed``), one torch and one BLAS thread. A run's time is its whole ``train`` call.

The machine may be shared: the JSON keeps the load averages before and after, and the
ratios (measured in the same rounds) are what to read, not the absolute rates.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np


class _Tape:
    steps = 0

    def episode(self, ret: float, length: int) -> None:
        pass


def raw_stepping(mode: str, actions: np.ndarray) -> float:
    """Vector env steps × envs per second of ``actions`` (``(T, n)``) on CartPole-v1 in ``mode``."""
    from bench.envs import make_vec_env

    venv = make_vec_env("CartPole-v1", actions.shape[1], recorder=_Tape(), vec_env=mode)
    try:
        venv.reset(seed=0)
        t = time.perf_counter()
        for a in actions:
            venv.step(a)
        return actions.size / (time.perf_counter() - t)
    finally:
        venv.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4000, help="vector steps per raw-stepping timing")
    ap.add_argument("--timesteps", type=int, default=20_000, help="env steps per PPO training run")
    ap.add_argument("--out", type=Path, default=Path("results/speed-vecenv.json"))
    args = ap.parse_args()

    from bench.algos import TRAIN
    from bench.algos.common import pin_one_thread
    from bench.algos.hyperparams import resolve
    from bench.algos.sb3 import train_sb3
    from bench.envs import VEC_ENV_MODES, vec_env_problem
    from bench.run.provenance import run_metadata
    from bench.run.speed import _timed

    pin_one_thread()
    load_before = os.getloadavg()
    modes = [m for m in VEC_ENV_MODES if vec_env_problem("CartPole-v1", m) is None]
    actions = np.random.default_rng(0).integers(0, 2, size=(args.steps, 8))
    raw: dict[str, list[float]] = {m: [] for m in modes}
    for m in modes:  # warm-up: imports, first subprocess spawn
        raw_stepping(m, actions[:50])
    for r in range(args.rounds):
        for m in modes:
            raw[m].append(raw_stepping(m, actions))
        print(f"raw round {r + 1}: " + ", ".join(f"{m} {raw[m][-1]:,.0f}" for m in modes), file=sys.stderr)

    runs = {f"{impl} {m}": [] for m in ("sync", "vector") for impl in ("own", "sb3")}
    fns = {}
    for m in ("sync", "vector"):
        p = resolve("ppo", "CartPole-v1", {"vec_env": m})
        fns[f"own {m}"] = lambda p=p, **kw: TRAIN["ppo"]("CartPole-v1", p, **kw)
        fns[f"sb3 {m}"] = lambda p=p, **kw: train_sb3("CartPole-v1", "ppo", p, **kw)
    warm = p.n_envs * p.n_steps
    for fn in fns.values():
        _timed(fn, seed=0, timesteps=warm)
    for r in range(args.rounds):
        for name, fn in fns.items():
            runs[name].append(_timed(fn, seed=0, timesteps=args.timesteps)[0])
        print(f"ppo round {r + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in runs.items()), file=sys.stderr)

    med = lambda xs: statistics.median(xs)  # noqa: E731
    out = {
        "what": __doc__.splitlines()[0],
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python scripts/speed_vecenv.py " + " ".join(sys.argv[1:]),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "raw_stepping": {
            "env": "CartPole-v1", "n_envs": 8, "vector_steps": args.steps, "rounds": args.rounds,
            "env_steps_per_s": raw,
            "ratio_to_sync_of_medians": {m: med(raw[m]) / med(raw["sync"]) for m in modes},
        },
        "ppo": {
            "env": "CartPole-v1", "timesteps": args.timesteps, "rounds": args.rounds,
            "hyperparameters": json.loads(resolve("ppo", "CartPole-v1").model_dump_json()),
            "env_steps_per_s": runs,
            "ratios_of_medians": {
                "own vector / own sync": med(runs["own vector"]) / med(runs["own sync"]),
                "sb3 vector / sb3 sync": med(runs["sb3 vector"]) / med(runs["sb3 sync"]),
                "own / sb3, sync": med(runs["own sync"]) / med(runs["sb3 sync"]),
                "own / sb3, vector": med(runs["own vector"]) / med(runs["sb3 vector"]),
            },
        },
        "meta": run_metadata(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({"raw": out["raw_stepping"]["ratio_to_sync_of_medians"], "ppo": out["ppo"]["ratios_of_medians"],
                      "load": [load_before, out["load_average_after"]]}, indent=2))


if __name__ == "__main__":
    main()
