"""Adding an env family is one declaration (issue 65): docs/architecture.md, "Adding an env family", done here.

The package is copied to ``tmp_path`` and a toy family is declared in its one place, ``bench/envs/families.py``,
exactly as the docs say: one :class:`~bench.envs.families.EnvFamily` added to ``FAMILIES``. Its envs live in a
module of their own (``toy_envs``, which registers them with Gymnasium on import, as the optional families'
packages do): that is the env, not bench. Nothing else of bench changes, and a fresh process that imports the
copy finds the family everywhere: the registry and traits, ``bench envs``, suite validation, the env factory (with
the family's observation adapter) and a short run of a suite into a store.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "bench"

#: The toy envs: a corridor of 10 cells; action 1 steps right (+1), action 0 stays (0); 20 steps at most. Its
#: observation is a (1, 2) box, which bench's adapter for the family flattens to (2,).
TOY_ENVS = '''
import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    observation_space = gym.spaces.Box(0.0, 1.0, (1, 2), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return self._obs(), {}

    def step(self, action):
        moved = int(action) == 1
        self.pos += moved
        return self._obs(), float(moved), self.pos >= 9, False, {}

    def _obs(self):
        return np.array([[self.pos / 9, 1.0]], np.float32)


gym.register("Toy/Corridor-v0", entry_point="toy_envs:Corridor", max_episode_steps=20)
gym.register("Toy/LongCorridor-v0", entry_point="toy_envs:Corridor", max_episode_steps=40)
'''

#: The one declaration, as docs/architecture.md ("Adding an env family") writes it in bench/envs/families.py.
TOY_FAMILY = '''

TOY = EnvFamily(
    "toy", "Toy corridors", prefixes=("Toy/",), entry_point="toy_envs", module="toy_envs",
    adapter=gym.wrappers.FlattenObservation, envs=(
        # Dense: +1 for each step right. 8.0 is a chosen bar: 8 of the 9 steps to the end.
        EnvSpec("Toy/Corridor-v0", "toy", "discrete", "vector", "dense", 20, 8.0, "chosen: 8 of 9 steps right",
                time_scale_us=100.0),
    ))
FAMILIES = (*FAMILIES, TOY)
'''

SUITE = """\
name: toy-family
seeds: 1
defaults: {timesteps: 400, window: 5}
envs: [{id: Toy/Corridor-v0}]
algorithms:
  - {algo: reinforce, impl: numpy, hyperparams: {n_envs: 2, n_steps: 20}}
"""

#: Run in a fresh process on the copy: what bench makes of the toy family, as JSON.
PROBE = '''
import json
from typer.testing import CliRunner
from bench import api
from bench.cli import app
from bench.envs import REGISTRY, get_spec, make_env, space_facts
from bench.suites.suite import load_suite

out = {"bench": __import__("bench").__file__}
s = get_spec("Toy/Corridor-v0")
out["registry"] = list(REGISTRY)[-1]
out["spec"] = [s.family, s.action, s.obs, s.reward, s.horizon, s.threshold, s.threshold_source, s.time_scale_us]
out["inferred_family"] = get_spec("Toy/LongCorridor-v0").family  # not declared: known by its entry point
out["envs_command"] = CliRunner().invoke(app, ["envs"], terminal_width=300).output
env = make_env("Toy/Corridor-v0")
out["learner_obs"] = list(env.observation_space.shape)
out["space_facts"] = space_facts("Toy/Corridor-v0")
loaded = load_suite("suite.yaml")
out["cells"] = [[c.env_id, c.threshold] for c in loaded.cells]  # validated, threshold from the family
api.run_suite("suite.yaml", "sqlite:///toy.db", workers=1)
runs = api.runs("sqlite:///toy.db")
out["runs"] = runs[["env", "status", "total_steps"]].to_dict("records")
print("PROBE " + json.dumps(out))
'''


def test_a_toy_env_family_is_one_declaration(tmp_path: Path):
    copy = tmp_path / "bench"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    families = copy / "envs" / "families.py"
    families.write_text(families.read_text() + TOY_FAMILY)  # the one place
    (tmp_path / "toy_envs.py").write_text(TOY_ENVS)
    (tmp_path / "suite.yaml").write_text(SUITE)

    cmp = filecmp.dircmp(ROOT, copy, ignore=["__pycache__"])
    changed = []

    def walk(d: filecmp.dircmp, rel: str) -> None:
        changed.extend(f"{rel}{f}" for f in d.diff_files + d.left_only + d.right_only)
        for name, sub in d.subdirs.items():
            walk(sub, f"{rel}{name}/")

    walk(cmp, "")
    assert changed == ["envs/families.py"]

    env = {**os.environ, "PYTHONPATH": str(tmp_path), "BENCH_NO_PROGRESS": "1"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("PROBE "))[6:])
    assert out["bench"] == str(copy / "__init__.py")  # the copy, with the toy family, is what ran
    assert out["registry"] == "Toy/Corridor-v0"
    assert out["spec"] == ["toy", "discrete", "vector", "dense", 20, 8.0, "chosen: 8 of 9 steps right", 100.0]
    assert out["inferred_family"] == "toy"
    assert "Toy/Corridor-v0" in out["envs_command"] and "chosen: 8 of 9 steps right" in out["envs_command"]
    assert out["learner_obs"] == [2]  # the family's adapter: (1, 2) flattened
    assert out["space_facts"]["obs_ndim"] == 1 and out["space_facts"]["action"] == "discrete"
    assert out["cells"] == [["Toy/Corridor-v0", 8.0]]
    [run] = out["runs"]
    assert run["env"] == "Toy/Corridor-v0" and run["status"] == "done" and run["total_steps"] >= 400
