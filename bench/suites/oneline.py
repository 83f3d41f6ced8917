"""A one-line run's suite: ``bench run --env ID --algo NAME [--impl] [--seeds] [--timesteps]`` without a file.

The flags make the suite a file would hold (one env, one algorithm entry), written as YAML beside the store
(:func:`suites_dir`) so that ``bench run THAT.yaml`` runs it again and ``bench status`` reads it; from there
it is run like any suite. Its problems are named by the flag that gave the value (:data:`FLAGS`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

__all__ = ["DEFAULT_SEEDS", "FLAGS", "flags_suite", "suite_name", "suite_yaml", "suites_dir", "zoo_budget"]

#: Seeds of a one-line run without ``--seeds``: the quick start's three.
DEFAULT_SEEDS = 3
#: Where in the suite each flag's value goes: a problem at (or under) the path is named by the flag.
FLAGS = {"envs[0].id": "--env", "algorithms[0].algo": "--algo", "algorithms[0].impl": "--impl",
         "seeds": "--seeds", "defaults.timesteps": "--timesteps", "envs[0].timesteps": "--timesteps"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def zoo_budget(algo: str, env: str) -> int | None:
    """rl-baselines3-zoo's ``n_timesteps`` for ``algo`` on ``env`` (the budget its values were tuned for), if any:
    the default ``bench tune --algo --env`` takes too (:func:`bench.tune.targets.target_from_flags`)."""
    from bench.algos.registry import ZOO_TIMESTEPS

    return ZOO_TIMESTEPS.get(algo, {}).get(env)


def suite_name(env: str, algo: str, impl: str, timesteps: int | None, seeds: int) -> str:
    """``CartPole-v1.ppo-bench.100000x3``: what runs, its budget and seeds, in a suite name's characters. Each
    budget and seed count is a suite of its own, so one never refuses another's grid; runs they share are
    shared by key, never run twice."""
    what = _UNSAFE.sub("-", f"{env}.{algo}-{impl}").strip("-.") or "run"
    tail = f".{timesteps if timesteps is not None else 'none'}x{seeds}"
    what = what[:64 - len(tail)].rstrip("-.")
    return (what if what[:1].isalnum() else "x" + what[:63 - len(tail)]) + tail


def flags_suite(env: str, algo: str, impl: str = "bench", seeds: int = DEFAULT_SEEDS,
                timesteps: int | None = None) -> dict[str, Any]:
    """The suite the flags make, as its YAML would parse. ``timesteps`` defaults to :func:`zoo_budget`; with
    neither, the suite has no budget (its validation names ``--timesteps``)."""
    budget = timesteps if timesteps is not None else zoo_budget(algo, env)
    name = suite_name(env, algo, impl, budget, seeds)
    return {
        "name": name,
        "description": f"bench run --env {env} --algo {algo} --impl {impl} --seeds {seeds}"
                       + (f" --timesteps {budget}" if budget is not None else ""),
        "seeds": seeds,
        "defaults": {"timesteps": budget} if budget is not None else {},
        "envs": [{"id": env}],
        "algorithms": [{"algo": algo, "impl": impl}],
    }


def suite_yaml(data: dict[str, Any], made_by: str) -> str:
    """``data`` as a suite file, headed by how it was made (``made_by``: the command line, in words)."""
    return (f"# Written by {made_by}.\n# `bench run` on this file runs the same suite (resuming it); edit it "
            "to grow it (docs/suites.md).\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=False, width=1000))


def suites_dir(sqlite_path: Path | None) -> Path:
    """Where one-line runs' suite files go: beside a SQLite store whose file is ``sqlite_path`` (``results/bench.db``
    → ``results/bench.suites``), else (``None``: another database) ``results/suites``, as saved policies go
    (:func:`bench.run.saving.policies_dir`). A path, not the store's URL: suites know nothing of storage."""
    if (db := sqlite_path) is not None:
        return db.with_name(f"{db.stem}.suites")
    return Path("results") / "suites"
