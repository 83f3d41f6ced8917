"""User algorithms as plugins: a ``train`` callable from the user's own package.

A plugin has the built-in algorithms' contract (see :mod:`bench.algos`)::

    def train(env_id: str, params: MyParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None

where ``MyParams`` subclasses :class:`bench.HyperParams` (a pydantic model: its fields are the
plugin's typed hyperparameters, with defaults) and the annotation of ``params`` names it. A suite
declares it with ``impl: python`` and either ``entry: my_package.my_module:train`` or, with no
``entry``, an entry point of the installed package in the group ``bench.algorithms`` whose name is
the suite's ``algo``. The module must be importable (installed, or on ``PYTHONPATH``) in the
process that runs ``bench`` and in its workers.

Every way a declaration can be wrong raises :class:`PluginError`, one line naming the entry, what
was wrong and what is allowed: the suite layer turns it into its one-line error.
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel

from bench.algos.hyperparams import HyperParams
from bench.algos.registry import AlgoSpec

__all__ = ["ENTRY_GROUP", "Plugin", "PluginError", "entry_of", "load", "run"]

#: The entry-point group a package declares its algorithms in (``[project.entry-points."bench.algorithms"]``).
ENTRY_GROUP = "bench.algorithms"
_ENTRY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
#: The contract's parameters: two positional, three keyword.
_POSITIONAL = ("env_id", "params")
_KEYWORD = ("seed", "timesteps", "recorder")


class PluginError(ValueError):
    """A plugin declaration that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Plugin:
    """A loaded plugin: its entry string, ``train`` callable, hyperparameter model and version.

    :param version: the installed distribution's version where the module belongs to one, else ``None``;
        stored with every run, so runs of different plugin versions are told apart.
    """

    entry: str
    train: Callable[..., None]
    params: type[BaseModel]
    version: str | None

    def spec(self, name: str) -> AlgoSpec:
        """The plugin as the suite's algorithm ``name``: one implementation, ``python``, with no zoo table and
        no default search space (``bench tune`` reads the model's ``search_space``)."""
        return AlgoSpec(name, self.params, {"python": self.entry})


def entry_of(name: str) -> str:
    """The ``module:attr`` string the entry point ``name`` of group :data:`ENTRY_GROUP` names."""
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=ENTRY_GROUP) if ep.name == name]
    if not found:
        have = sorted(ep.name for ep in entry_points(group=ENTRY_GROUP))
        raise PluginError(f"no entry point {name!r} in group {ENTRY_GROUP!r}; installed: {', '.join(have) or 'none'} "
                          f"(or give entry: module:function)")
    return found[0].value


def _version(module: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    top = module.split(".")[0]
    for dist in packages_distributions().get(top, []):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def load(entry: str) -> Plugin:
    """Import ``entry`` (``module:function``) and check it against the contract."""
    if not isinstance(entry, str) or not _ENTRY.match(entry):
        raise PluginError(f"entry {entry!r} is not module.path:function (Python identifiers)")
    module_name, attr = entry.split(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import failure of user code is one line
        raise PluginError(f"cannot import module {module_name!r}: {type(e).__name__}: {' '.join(str(e).split())}") from None
    fn = getattr(module, attr, None)
    if fn is None:
        raise PluginError(f"module {module_name!r} has no attribute {attr!r}")
    if not callable(fn):
        raise PluginError(f"{entry} is not callable")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise PluginError(f"{entry}: cannot read its signature") from None
    ps = sig.parameters
    positional = [n for n, p in ps.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keyword_ok = {n for n, p in ps.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    missing = [n for n in _KEYWORD if n not in keyword_ok]
    if positional[:2] != list(_POSITIONAL) or missing:
        raise PluginError(f"{entry}({', '.join(ps)}) does not have the contract's signature; allowed: "
                          f"train(env_id, params, *, seed, timesteps, recorder)")
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # noqa: BLE001 - a bad annotation in user code is one line
        raise PluginError(f"{entry}: cannot resolve its annotations: {type(e).__name__}: {e}") from None
    model = hints.get("params")
    if not (isinstance(model, type) and issubclass(model, HyperParams)):
        raise PluginError(f"{entry}: the annotation of params must be a subclass of bench.HyperParams "
                          f"(the plugin's typed hyperparameters), got {model!r}")
    return Plugin(entry, fn, model, _version(module_name))


def run(entry: str, env_id: str, hyperparams: dict[str, Any], **kwargs: Any) -> None:
    """Load ``entry``, validate ``hyperparams`` with its model and train (how a worker runs a plugin cell
    whose typed parameters did not travel with it)."""
    p = load(entry)
    p.train(env_id, p.params.model_validate(hyperparams), **kwargs)
