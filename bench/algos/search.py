"""Default search spaces of ``bench tune``: one per algorithm, each its :class:`bench.algos.registry.AlgoSpec`'s
``space``, in :class:`Dim` s (the dimension types are described in :mod:`bench.suites.spaces`, which reads a
suite's ``tune:`` block against them).

Plain Python only: the Optuna ``trial`` is duck-typed, so importing this costs nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Dim"]


@dataclass(frozen=True)
class Dim:
    """One searched hyperparameter. ``low``/``high``/``choices`` are readable hyperparameter values."""

    kind: Literal["float", "int", "categorical", "pow2", "one_minus_log"]
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = field(default=())

    def optuna_name(self, name: str) -> str:
        """The name Optuna stores the sampled (search-space) value under."""
        return {"pow2": f"log2_{name}", "one_minus_log": f"one_minus_{name}"}.get(self.kind, name)

    def suggest(self, trial: Any, name: str) -> Any:
        """Sample this dimension on an Optuna ``trial``; returns the readable hyperparameter value."""
        pname = self.optuna_name(name)
        if self.kind == "float":
            return trial.suggest_float(pname, self.low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            return trial.suggest_int(pname, int(self.low), int(self.high), log=self.log, step=int(self.step or 1))
        if self.kind == "pow2":
            k = trial.suggest_int(pname, int(math.log2(self.low)), int(math.log2(self.high)))
            return 2**k
        if self.kind == "one_minus_log":
            x = trial.suggest_float(pname, 1.0 - self.high, 1.0 - self.low, log=True)
            # 1 - (1 - 0.99) is 0.9900000000000001 in binary floating point; keep it readable.
            return round(1.0 - x, 12)
        # Optuna's categorical choices must be None/bool/int/float/str: structured
        # choices (net_arch lists and mappings) are searched by their JSON text.
        if all(_scalar(c) for c in self.choices):
            return trial.suggest_categorical(pname, list(self.choices))
        label = trial.suggest_categorical(pname, [_label(c) for c in self.choices])
        return next(c for c in self.choices if _label(c) == label)

    def describe(self) -> dict[str, Any]:
        """The YAML form of this dimension (stored with a study; shown in docs)."""
        out: dict[str, Any] = {"type": self.kind}
        if self.kind == "categorical":
            out["choices"] = list(self.choices)
        else:
            out.update(low=self.low, high=self.high)
            if self.log:
                out["log"] = True
            if self.step is not None:
                out["step"] = self.step
        return out


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _label(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(", ", ": "))


# --------------------------------------------------------------------------- #
# Default spaces (rl-baselines3-zoo hyperparams_opt.py @ 0a9df503)
# --------------------------------------------------------------------------- #
#: Network choices the default spaces share.
NET_TINY = {"pi": [64], "vf": [64]}
NET_SMALL = {"pi": [64, 64], "vf": [64, 64]}
NET_MEDIUM = {"pi": [256, 256], "vf": [256, 256]}






