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
_NET_TINY = {"pi": [64], "vf": [64]}
_NET_SMALL = {"pi": [64, 64], "vf": [64, 64]}
_NET_MEDIUM = {"pi": [256, 256], "vf": [256, 256]}

# sample_ppo_params
SPACE_PPO: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-5, 2e-3, log=True),
    "n_steps": Dim("pow2", 32, 2048),  # zoo: categorical 32..2048
    "batch_size": Dim("pow2", 32, 512),  # zoo: categorical 32..512; clamped to one rollout
    "gamma": Dim("one_minus_log", 0.97, 0.9999),  # zoo: one_minus_gamma 1e-4..0.03, log
    "gae_lambda": Dim("one_minus_log", 0.9, 0.9999),  # zoo: one_minus_gae_lambda 1e-4..0.1, log
    "ent_coef": Dim("float", 1e-8, 0.1, log=True),
    "clip_range": Dim("categorical", choices=(0.1, 0.2, 0.3, 0.4)),
    "n_epochs": Dim("categorical", choices=(1, 5, 10, 20)),
    "max_grad_norm": Dim("float", 0.3, 2.0),
    "net_arch": Dim("categorical", choices=(_NET_TINY, _NET_SMALL, _NET_MEDIUM)),
    "activation": Dim("categorical", choices=("tanh", "relu")),
}

# sample_a2c_params
SPACE_A2C: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-5, 2e-3, log=True),
    "n_steps": Dim("pow2", 32, 2048),
    "gamma": Dim("one_minus_log", 0.97, 0.9999),
    "gae_lambda": Dim("one_minus_log", 0.9, 0.9999),
    "ent_coef": Dim("float", 1e-8, 0.1, log=True),
    "max_grad_norm": Dim("float", 0.3, 2.0),
    "net_arch": Dim("categorical", choices=(_NET_SMALL, _NET_MEDIUM)),
    "activation": Dim("categorical", choices=("tanh", "relu")),
}

# sample_trpo_params
SPACE_TRPO: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-5, 1.0, log=True),  # the critic's step size
    "n_steps": Dim("pow2", 8, 2048),
    "batch_size": Dim("pow2", 8, 512),  # clamped to one rollout
    "gamma": Dim("one_minus_log", 0.9, 0.9999),  # zoo: categorical 0.9..0.9999
    "gae_lambda": Dim("categorical", choices=(0.8, 0.9, 0.92, 0.95, 0.98, 0.99, 1.0)),
    "target_kl": Dim("float", 1e-3, 0.1, log=True),  # max-KL δ; zoo: categorical 0.001..0.1
    "n_critic_updates": Dim("categorical", choices=(5, 10, 20, 25, 30)),
    "cg_max_steps": Dim("categorical", choices=(5, 10, 20, 25, 30)),
    "cg_damping": Dim("float", 0.01, 0.5, log=True),  # zoo: commented out, categorical 0.01..0.5
    "net_arch": Dim("categorical", choices=(_NET_SMALL, _NET_MEDIUM)),
    "activation": Dim("categorical", choices=("tanh", "relu")),
}

# No zoo sampler: sample_a2c_params' space (A3C is A2C's asynchronous form) with the worker count.
SPACE_A3C: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-5, 2e-3, log=True),
    "n_steps": Dim("pow2", 4, 256),
    "gamma": Dim("one_minus_log", 0.97, 0.9999),
    "ent_coef": Dim("float", 1e-8, 0.1, log=True),
    "max_grad_norm": Dim("float", 0.3, 2.0),
    "net_arch": Dim("categorical", choices=(_NET_SMALL, _NET_MEDIUM)),
}

# No zoo sampler: this project's choice around the paper's β 0.04 and ε 0.2.
SPACE_GRPO: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-5, 3e-3, log=True),
    "group_size": Dim("categorical", choices=(4, 8, 16, 32)),
    "groups_per_update": Dim("categorical", choices=(1, 2, 4, 8)),
    "kl_coef": Dim("float", 1e-4, 0.1, log=True),
    "clip_range": Dim("categorical", choices=(0.1, 0.2, 0.3)),
    "n_epochs": Dim("categorical", choices=(1, 5, 10, 20)),
    "net_arch": Dim("categorical", choices=(_NET_TINY, _NET_SMALL)),
}

# No zoo sampler: this project's choice, around PyTorch's reinforce.py (lr 1e-2, γ 0.99).
SPACE_REINFORCE: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-4, 3e-2, log=True),
    "n_steps": Dim("pow2", 1, 256),  # 1: one episode per env per update
    "gamma": Dim("one_minus_log", 0.9, 0.9999),
    "baseline": Dim("categorical", choices=("none", "mean", "value")),
    "normalize_returns": Dim("categorical", choices=(True, False)),
    "ent_coef": Dim("float", 1e-8, 0.1, log=True),
    "net_arch": Dim("categorical", choices=(_NET_TINY, _NET_SMALL)),
}
