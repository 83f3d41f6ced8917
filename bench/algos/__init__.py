"""The project's own on-policy algorithms, one module each.

Every module exposes ``train(env_id, params, *, seed, timesteps, recorder)``:
an algorithm sees an env id, its typed hyperparameters, a seed, a budget and a
recorder, and nothing of suites, stores or the CLI. Shared parts that two or
more algorithms use identically live in :mod:`bench.algos.common`.
"""

from __future__ import annotations

from typing import Any, Callable


def _lazy(name: str) -> Callable[..., None]:
    def train(env_id: str, params: Any, *, seed: int, timesteps: int, recorder: Any) -> None:
        import importlib

        importlib.import_module(f"bench.algos.{name}").train(env_id, params, seed=seed, timesteps=timesteps, recorder=recorder)

    return train


#: algorithm name → its ``train`` function (modules are imported on first use).
TRAIN: dict[str, Callable[..., None]] = {name: _lazy(name) for name in ("reinforce", "a2c", "a3c", "trpo", "ppo", "grpo")}
