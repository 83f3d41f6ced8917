"""One folder per algorithm (issue 65): ``bench/algos/<name>/spec.py`` exports its ``SPEC``, the registry lists the
folders, and reading it imports no torch and no SB3."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from bench.algos.registry import ALGOS, FOLDERS

ALGOS_DIR = Path(__file__).resolve().parents[1] / "bench" / "algos"


def test_every_algorithm_folder_is_listed_once_and_names_its_algorithm():
    on_disk = sorted(d.name for d in ALGOS_DIR.iterdir() if (d / "spec.py").exists())
    assert sorted(FOLDERS) == on_disk and len(set(FOLDERS)) == len(FOLDERS)
    assert [s.name for s in ALGOS.values()][:len(FOLDERS)] == list(FOLDERS)


def test_a_folders_init_imports_nothing():
    """The registry imports ``<name>.spec``, whose package ``__init__`` runs first: it must stay free of torch."""
    for f in FOLDERS:
        tree = ast.parse((ALGOS_DIR / f / "__init__.py").read_text())
        assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))], f


def test_reading_the_registry_imports_no_torch_and_no_sb3():
    code = ("import sys, bench.algos.registry as r; r.ALGOS['ppo'].params(); "
            "print(sorted(m for m in ('torch', 'stable_baselines3', 'sb3_contrib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", [n for n, s in ALGOS.items() if "sb3" in s.impls])
def test_each_sb3_mapping_names_arguments_its_sb3_class_takes(name):
    """A spec's ``sb3_kwargs`` are constructor arguments of its ``sb3_class`` (a typo would fail only at run time)."""
    import gymnasium as gym
    import numpy as np

    spec = ALGOS[name]
    module, _, cls = spec.sb3_class.partition(":")
    taken = set(inspect.signature(getattr(__import__(module, fromlist=[cls]), cls).__init__).parameters)
    space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    own = spec.sb3_kwargs(spec.params(), space)
    assert set(own) - {"policy_kwargs"} <= taken, set(own) - taken
