"""The project's own on-policy algorithms, one folder each (``bench/algos/<name>/``: its ``spec.py`` and its
implementation), and the SB3 adapters (:mod:`bench.algos.sb3`).

Every implementation exposes ``train(env_id, params, *, seed, timesteps, recorder)``:
an algorithm sees an env id, its typed hyperparameters, a seed, a budget and a
recorder, and nothing of suites, stores or the CLI. Shared parts that two or
more algorithms use identically live in :mod:`bench.algos.common`. Which module
runs which algorithm is its :class:`bench.algos.spec.AlgoSpec`'s ``impls``;
the tables here are read from the registry.
"""

from __future__ import annotations

from typing import Callable, Mapping

from bench.algos.registry import View

#: algorithm name → the module that runs it (``impl: bench``); several names can share one
#: (``ac_mc`` is REINFORCE's module, ``ac_td`` A2C's, ``rloo`` GRPO's: see :data:`bench.algos.registry.ALGOS`).
MODULES: Mapping[str, str] = View(lambda s: str(s.module).rpartition(".")[2], lambda s: "bench" in s.impls)

#: algorithm name → its ``train`` function (modules are imported on first use).
TRAIN: Mapping[str, Callable[..., None]] = View(lambda s: s.trainer("bench"), lambda s: "bench" in s.impls)

#: ``impl: numpy`` (the pure-NumPy implementations, no torch) → algorithm name → ``train``.
TRAIN_NUMPY: Mapping[str, Callable[..., None]] = View(lambda s: s.trainer("numpy"), lambda s: "numpy" in s.impls)
