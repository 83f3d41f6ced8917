"""Own A2C and SB3's A2C in lockstep: the same weights, env seeds and action noise, compared update by update.

    .venv/bin/python scripts/a2c_lockstep.py HalfCheetah-v5 300 normalize=false
    .venv/bin/python scripts/a2c_lockstep.py 'HalfCheetah-v5[max_episode_steps=7]' 300
    .venv/bin/python scripts/a2c_lockstep.py HalfCheetah-v5 300 'kernel="numpy"'

Both start from the own policy's initial weights (copied into SB3's policy), reset their envs with the
same seeds, and draw every action's Gaussian noise from one shared table, so the two runs see the same
data for as long as their updates agree. It prints the first update at which the rollout (normalised
observations, actions, advantages, returns) or the weights differ by more than 1e-4, which localises a
difference that the three hand-made updates of tests/test_sb3_parity.py cannot show. MuJoCo is chaotic:
float32 rounding alone parts the two within tens to hundreds of updates, so what matters is what
differs first, and by how much. The function is ``a2c_lockstep`` in tests/test_sb3_parity.py, whose tests
run it. Trailing ``name=JSON`` arguments override the zoo's hyperparameters; ``kernel="numpy"`` runs the
own side on the NumPy kernel (what the reference's MuJoCo runs use), ``torch`` by default.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_sb3_parity import a2c_lockstep  # noqa: E402

if __name__ == "__main__":
    env, n = sys.argv[1], int(sys.argv[2])
    over = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in sys.argv[3:])}
    first, worst, done = a2c_lockstep(env, n, over=over, verbose=True)
    print(f"{done} updates; largest gaps: " + ", ".join(f"{k} {g:.2g}" for k, g in worst.items()))
    print("first update over the tolerance:", first or "none")
