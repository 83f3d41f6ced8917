"""bench: which on-policy RL algorithm should I use? Measured, with the evidence.

The package follows the data flow, one folder a stage::

    suites/    suite files → validated cells (schema, grid, search spaces)
    envs/      env families (one declaration each), the registry read off them, traits, the one env factory
    algos/     the project's own algorithms, their typed hyperparameters
    baselines  Stable-Baselines3 / sb3-contrib adapters
    storage/   results store, schema, packs, recorder, the vocabulary writers and readers share
    run/       execution: runner, local pool, Ray executor, provenance, saved policies, anchors, `bench speed`
    tune/      Optuna targets, trials, studies, export
    stats/     the pure statistics: metrics, intervals, tests, meta-analysis (numpy, scipy, pandas only)
    analysis/  the read model (reads only), scoring, answers, sensitivity, report
    api/       one public function per everyday job
    cli/       the `bench` command: parse, call bench.api, render

The folders are the layers. Imports run only downward (``cli`` → ``api`` → ``tune`` → ``run``, ``analysis`` →
``suites`` → ``algos`` → ``storage``, ``envs``, ``stats``); ``analysis`` reads ``storage`` and the env traits,
never the runner, the tuner or an algorithm; ``stats`` imports nothing of bench. No import cycles, package
``__init__`` files included. ``tests/test_layers.py`` enforces all of it; docs/architecture.md has the table.

The old flat module names (``bench.store``, ``bench.runner``, ``bench.suite``, …) were retired (CHANGELOG.md, "Unreleased"):
CHANGELOG.md lists each one's new place.
"""

from __future__ import annotations

__version__ = "0.1.0"

import importlib

#: The public API a plugin needs (``from bench import HyperParams, RecorderProtocol``), imported on
#: first use so that ``import bench`` stays cheap: name → ``module:attribute``.
PUBLIC = {
    "HyperParams": "bench.algos.hyperparams:HyperParams",
    "RecorderProtocol": "bench.storage.record:RecorderProtocol",
    "PluginError": "bench.algos.plugins:PluginError",
}


def __getattr__(name: str):
    if name in PUBLIC:
        module, attr = PUBLIC[name].split(":")
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'bench' has no attribute {name!r}")
