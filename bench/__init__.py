"""bench: which on-policy RL algorithm should I use? Measured, with the evidence.

The package follows the data flow, one folder a stage::

    suites/    suite files → validated cells (schema, grid, search spaces)
    envs/      registry and traits, the one env factory
    algos/     the project's own algorithms, their typed hyperparameters
    baselines  Stable-Baselines3 / sb3-contrib adapters
    run/       runner, Ray executor, recorder, results store, `bench speed`
    tune/      Optuna studies, export, sensitivity
    analysis/  per-run metrics, statistics, anchors, scoring, report
    cli        the `bench` command

Layers (an arrow is "may import"): ``cli`` → everything; ``run``, ``tune`` →
``suites``, ``envs``, ``algos``, ``baselines``, ``run``; ``analysis`` → the store,
``envs`` (traits) and the tuner's sensitivity table, never the runner or an
algorithm; ``algos`` → ``envs`` and the recorder, never a suite, a store or the
CLI; ``analysis.stats`` and ``analysis.metrics`` are pure NumPy. No import cycles.
``tests/test_layers.py`` enforces all of it.

Modules that moved when the flat package was regrouped (2026-11) still import
from their old names, with a :class:`DeprecationWarning` naming the new one
(:data:`MOVED`). ``bench.envs``, ``bench.tune`` and ``bench.analysis`` became
packages that re-export what the old modules offered.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__version__ = "0.1.0"

#: old module name → where it lives now.
MOVED: dict[str, str] = {
    "bench.suite": "bench.suites.suite",
    "bench.spaces": "bench.suites.spaces",
    "bench.hyperparams": "bench.algos.hyperparams",
    "bench.record": "bench.run.record",
    "bench.store": "bench.run.store",
    "bench.runner": "bench.run.runner",
    "bench.executors_ray": "bench.run.ray_executor",
    "bench.speed": "bench.run.speed",
    "bench.metrics": "bench.analysis.metrics",
    "bench.stats": "bench.analysis.stats",
    "bench.anchors": "bench.analysis.anchors",
    "bench.report": "bench.analysis.report",
}


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):  # noqa: ANN001 - importlib's protocol
        # The module object of the new name itself, so old and new names share one state.
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:  # noqa: ANN001 - already executed under its new name
        pass


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Resolves an old module name of :data:`MOVED` to the module at its new name."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001 - importlib's protocol
        new = MOVED.get(fullname)
        if new is None:
            return None
        warnings.warn(f"{fullname} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        return importlib.util.spec_from_loader(fullname, _MovedLoader(new))


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())


#: The public API a plugin needs (``from bench import HyperParams, RecorderProtocol``), imported on
#: first use so that ``import bench`` stays cheap: name → ``module:attribute``.
PUBLIC = {
    "HyperParams": "bench.algos.hyperparams:HyperParams",
    "RecorderProtocol": "bench.run.record:RecorderProtocol",
    "PluginError": "bench.algos.plugins:PluginError",
}


def __getattr__(name: str):
    if name in PUBLIC:
        module, attr = PUBLIC[name].split(":")
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'bench' has no attribute {name!r}")
