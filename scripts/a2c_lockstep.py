"""Own A2C and SB3's A2C in lockstep: the same weights, env seeds and action noise, compared update by update.

    .venv/bin/python scripts/a2c_lockstep.py HalfCheetah-v5 300 normalize=false
    .venv/bin/python scripts/a2c_lockstep.py 'HalfCheetah-v5[max_episode_steps=7]' 300
    .venv/bin/python scripts/a2c_lockstep.py HalfCheetah-v5 300 'kernel="numpy"'
    .venv/bin/python scripts/a2c_lockstep.py Hopper-v5 2000 --from-trained 300000
    .venv/bin/python scripts/a2c_lockstep.py Hopper-v5 2000 normalize=false --from-trained 300000 --history h.json
    .venv/bin/python scripts/a2c_lockstep.py 'Hopper-v5[max_episode_steps=100]' 3000 --from-trained 450000 \
        --train-env Hopper-v5 --replay

Both start from the own policy's initial weights (copied into SB3's policy), reset their envs with the
same seeds, and draw every action's Gaussian noise from one shared table, so the two runs see the same
data for as long as their updates agree. It prints the first update at which the rollout (normalised
observations, actions, advantages, returns) or the weights differ by more than 1e-4, which localises a
difference that the three hand-made updates of tests/test_sb3_parity.py cannot show. MuJoCo is chaotic:
float32 rounding alone parts the two within tens to hundreds of updates, so what matters is what
differs first, and by how much. The function is ``a2c_lockstep`` in tests/test_sb3_parity.py, whose tests
run it. Trailing ``name=JSON`` arguments override the zoo's hyperparameters; ``kernel="numpy"`` runs the
own side on the NumPy kernel (what the reference's MuJoCo runs use), ``torch`` by default.

``--from-trained STEPS`` starts both sides from a trained state instead: own A2C trained for STEPS env steps
with the zoo's settings (``kernel: auto``, seed ``--train-seed``; the ``name=JSON`` overrides apply to the
lockstep only; ``--train-env`` trains on another env key, e.g. without the lockstep's time limit), its
weights, observation and reward normaliser statistics, running discounted returns and RMSprop state loaded
into both (``a2c_trained_state`` and ``a2c_lockstep(start=...)``). The trained state is kept in ``--state
PATH`` (a file in the temp folder by default) and reused when it is there. ``--history PATH`` writes every
update's gaps, episode ends and normalised observations as JSON. ``--replay``: SB3's envs replay the own
envs' transitions, so both see the same data however far their actions part (``a2c_lockstep(replay=True)``).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_sb3_parity import a2c_lockstep, a2c_trained_state  # noqa: E402


def trained(env: str, steps: int, seed: int, path: str | None) -> dict:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in env)
    f = Path(path or Path(tempfile.gettempdir()) / f"a2c_trained_{safe}_{steps}_seed{seed}.pt")
    if f.exists():
        state = torch.load(f, weights_only=False)
        print(f"trained state from {f}")
    else:
        t0 = time.perf_counter()
        state = a2c_trained_state(env, steps, seed=seed)
        torch.save(state, f)
        print(f"trained {state['steps']} steps in {time.perf_counter() - t0:.0f} s, kept in {f}")
    eps = state["episodes"]
    last = eps[-20:]
    print(f"  {len(eps)} episodes; last {len(last)}: mean return {np.mean([r for r, _ in last]):.0f}, "
          f"mean length {np.mean([n for _, n in last]):.0f}; obs count {state['obs_rms'][2]:.0f}, "
          f"ret_rms var {float(state['ret_rms'][1]):.4g}, running return {state['ret']}")
    return state


def describe(first: dict[str, int], history: list[dict], tol: float) -> None:
    """For each quantity's first parting: its gap in the updates before (a jump or a growth), and episode ends."""
    ends = [u for u, h in enumerate(history) if h["terminated"] or h["truncated"]]
    print(f"episode ends in {len(ends)} updates (terminations {sum(h['terminated'] for h in history)}, "
          f"truncations {sum(h['truncated'] for h in history)}), at updates {ends[:30]}"
          + (" ..." if len(ends) > 30 else ""))
    for name, u in sorted(first.items(), key=lambda kv: kv[1]):
        before = [history[v]["gaps"][name] for v in range(max(0, u - 8), u + 1)]
        ratio = before[-1] / max(before[-2], 1e-12) if len(before) > 1 else float("inf")
        near = [v for v in ends if u - 3 <= v <= u]
        print(f"  {name}: first over {tol:g} at update {u}, gap {before[-1]:.3g}; the 8 updates before: "
              + " ".join(f"{g:.1e}" for g in before[:-1]) + f" (x{ratio:.3g} in the last); episode ends in updates "
              f"{max(0, u - 3)}..{u}: {near or 'none'}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("env")
    ap.add_argument("updates", type=int)
    ap.add_argument("over", nargs="*", help="name=JSON hyperparameter overrides")
    ap.add_argument("--from-trained", type=int, metavar="STEPS", help="start from own A2C trained this many steps")
    ap.add_argument("--train-seed", type=int, default=0)
    ap.add_argument("--train-env", help="the env to train on (the lockstep's by default), e.g. Hopper-v5 for a "
                                        "lockstep on 'Hopper-v5[max_episode_steps=100]'")
    ap.add_argument("--state", help="file that keeps the trained state")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--replay", action="store_true",
                    help="SB3's envs replay the own envs' transitions: the same data, MuJoCo's chaos taken out")
    ap.add_argument("--history", help="write every update's gaps and episode ends here (JSON)")
    a = ap.parse_args()
    over = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in a.over)}
    start = trained(a.train_env or a.env, a.from_trained, a.train_seed, a.state) if a.from_trained else None
    history: list[dict] = []
    first, worst, done = a2c_lockstep(a.env, a.updates, tol=a.tol, over=over, verbose=True, start=start,
                                      history=history, replay=a.replay)
    print(f"{done} updates; largest gaps: " + ", ".join(f"{k} {g:.2g}" for k, g in worst.items()))
    print("first update over the tolerance:", first or "none")
    describe(first, history, a.tol)
    if a.history:
        Path(a.history).write_text(json.dumps([{k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in h.items()}
                                                for h in history]))
