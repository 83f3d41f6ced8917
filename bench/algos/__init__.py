"""The project's own on-policy algorithms, one module each.

Every module exposes ``train(env_id, params, *, seed, timesteps, recorder)``:
an algorithm sees an env id, its typed hyperparameters, a seed, a budget and a
recorder, and nothing of suites, stores or the CLI. Shared parts that two or
more algorithms use identically live in :mod:`bench.algos.common`.
"""

from __future__ import annotations

from typing import Any, Callable


def _lazy(module: str) -> Callable[..., None]:
    def train(env_id: str, params: Any, *, seed: int, timesteps: int, recorder: Any) -> None:
        import importlib

        importlib.import_module(f"bench.algos.{module}").train(env_id, params, seed=seed, timesteps=timesteps,
                                                                recorder=recorder)

    return train


#: algorithm name → the module that runs it. Two names are rungs of the textbook ladder
#: REINFORCE → AC-MC → AC-TD → A2C → NPG → TRPO → PPO that another algorithm's module runs
#: exactly, with their own defaults (bench.algos.hyperparams says which):
#: ``ac_mc`` is REINFORCE with ``baseline: value``; ``ac_td`` is A2C with one env. ``rloo``
#: (REINFORCE with a leave-one-out baseline over a group) is GRPO's module with ``advantage: rloo``.
MODULES: dict[str, str] = {
    "reinforce": "reinforce", "ac_mc": "reinforce", "ac_td": "a2c", "a2c": "a2c",
    "a3c": "a3c", "npg": "npg", "trpo": "trpo", "ppo": "ppo", "grpo": "grpo",
    "rloo": "grpo",
}

#: algorithm name → its ``train`` function (modules are imported on first use).
TRAIN: dict[str, Callable[..., None]] = {name: _lazy(module) for name, module in MODULES.items()}

#: ``impl: numpy`` (the pure-NumPy implementations, no torch) → algorithm name → ``train``.
TRAIN_NUMPY: dict[str, Callable[..., None]] = {"reinforce": _lazy("reinforce_numpy")}
