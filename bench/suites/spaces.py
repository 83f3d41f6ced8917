"""Search spaces for ``bench tune``: typed dimensions, per-algorithm defaults, the suite's ``tune:`` block.

A search space maps a hyperparameter name (a field of
:data:`bench.algos.registry.PARAMS` ``[algo]``) to a :class:`Dim`. Values are
always written as the hyperparameter's own readable values; the dimension's
``type`` says how the tuner searches between them:

=================  ======================================================  ===========================
type               samples                                                 Optuna parameter
=================  ======================================================  ===========================
``float``          uniform in [low, high] (``log: true``: log-uniform)     ``<name>``
``int``            integers in [low, high] (``step``, ``log`` optional)    ``<name>``
``categorical``    one of ``choices`` (scalars, lists or mappings)         ``<name>``
``pow2``           a power of two in [low, high] (``2**k``, k uniform)     ``log2_<name>`` (k)
``one_minus_log``  ``1 - x`` with x log-uniform in [1 - high, 1 - low]     ``one_minus_<name>`` (x)
=================  ======================================================  ===========================

``one_minus_log`` is how rl-baselines3-zoo searches γ and GAE λ (``one_minus_gamma``):
the interesting values 0.99, 0.999, 0.9999 are evenly spaced in log(1 − γ).
``pow2`` is its ``n_steps`` / ``batch_size`` grid as an ordered integer, which
TPE models better than an unordered categorical. The readable value of every
transformed parameter is kept as a trial user attribute (as the zoo does with
``trial.set_user_attr("gamma", ...)``).

Default spaces (:data:`DEFAULT_SPACES`, each algorithm's :class:`bench.algos.registry.AlgoSpec` ``space``,
defined in :mod:`bench.algos.search`) follow rl-baselines3-zoo's
``rl_zoo3/hyperparams_opt.py`` (``sample_ppo_params``, ``sample_a2c_params``,
``sample_trpo_params``; read at commit 0a9df503b03016562b74c517c663fdb6d3805bdb)
range for range, with the deviations noted beside each entry. The zoo has no
REINFORCE; its space is this project's own choice, centred on the PyTorch
example's values.

Invalid combinations are fixed by construction rather than rejected, so no
trial is wasted on them: ``batch_size`` is clamped to one rollout
(``n_steps × n_envs``; the zoo's ``if batch_size > n_steps: batch_size = n_steps``),
and a default space's ``n_steps`` range is capped so one rollout fits in a
checkpoint's share of the budget.

This module is pydantic and plain Python only; the Optuna ``trial`` object is
duck-typed, so importing it costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from bench.algos.registry import DEFAULT_SPACES, PARAMS
from bench.algos.search import Dim, _label
from bench.suites.problems import Issue, Problem, SeedsMixin

KINDS = ("float", "int", "categorical", "pow2", "one_minus_log")
OBJECTIVES = ("auc", "steps_to_threshold", "final_return")
#: Keys a dimension may have in YAML.
DIM_KEYS = ("type", "low", "high", "log", "step", "choices")


# --------------------------------------------------------------------------- #
# The suite's tune: block
# --------------------------------------------------------------------------- #
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PrunerSpec(_Strict):
    """Which Optuna pruner stops unpromising trials early."""

    type: Literal["median", "percentile", "none"] = Field(
        "median", description="median (Optuna's MedianPruner, the default), percentile, or none."
    )
    n_startup_trials: int = Field(5, ge=0, description="Trials that finish before any trial may be pruned.")
    n_warmup_checkpoints: int = Field(
        1, ge=0, description="Checkpoints of a trial's first seed before it may be pruned."
    )
    percentile: float = Field(25.0, gt=0, lt=100, description="percentile pruner only: prune below this percentile.")


class TuneSpec(SeedsMixin, _Strict):
    """Hyperparameter tuning of every (algorithm, env) of the suite with the same budget."""

    trials: int = Field(20, ge=1, description="Finished (complete or pruned) trials wanted per study, in total.")
    timesteps: int | None = Field(
        None, gt=0, description="Env steps per seed per trial; default: each env's suite budget."
    )
    seeds: list[int] | int = Field(3, description="Seeds every trial trains on: a list, or n meaning 0..n-1.")
    objective: Literal["auc", "steps_to_threshold", "final_return"] = Field(
        "auc", description="auc and final_return are maximised; steps_to_threshold is minimised (censored = 2 × budget)."
    )
    checkpoints: int = Field(4, ge=1, le=100, description="Intermediate values reported per seed, at equal budget fractions.")
    pruner: PrunerSpec = Field(default_factory=PrunerSpec)
    sampler_seed: int = Field(0, ge=0, description="Seed of the TPE sampler.")
    default_space: bool = Field(
        True, description="Start from the algorithm's default search space (false: search only `space`)."
    )
    space: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "hyperparameter → {type: float|int|categorical|pow2|one_minus_log, low, high, log, step, choices}, "
            "or null to drop a default dimension; an algorithm name (ppo, a2c, trpo, reinforce) maps to a space "
            "for that algorithm only."
        ),
    )


# --------------------------------------------------------------------------- #
# Parsing and checking user spaces (one problem per line, with its YAML path)
# --------------------------------------------------------------------------- #


#: Hyperparameter models by algorithm name: the built-ins (:data:`PARAMS`), plus a suite's plugins.
Models = Mapping[str, type[BaseModel]]


def _field_adapter(algo: str, name: str, models: Models) -> TypeAdapter:
    f = models[algo].model_fields[name]
    return TypeAdapter(Annotated[(f.annotation, *f.metadata)]) if f.metadata else TypeAdapter(f.annotation)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def parse_dim(raw: Any, path: str, algos: list[str], name: str,
              models: Models = PARAMS) -> tuple[Dim | None, list[Issue]]:
    """Check one YAML dimension of hyperparameter ``name`` for each of ``algos``; ``(dim, issues)``."""
    if raw is None:
        return None, []
    if not isinstance(raw, dict):
        return None, [(path, "a dimension must be a mapping like {type: float, low: 0.0001, high: 0.01, log: true}, or null", raw, True)]
    issues: list[Issue] = []
    for k in raw:
        if k not in DIM_KEYS:
            issues.append((f"{path}.{k}", f"unknown key; allowed: {', '.join(DIM_KEYS)}", raw[k], True))
    kind = raw.get("type")
    if "type" not in raw:
        return None, issues + [(f"{path}.type", f"missing required key; allowed: {', '.join(KINDS)}", None, False)]
    if kind not in KINDS:
        return None, issues + [(f"{path}.type", f"unknown distribution; allowed: {', '.join(KINDS)}", kind, True)]
    if kind == "categorical":
        choices = raw.get("choices")
        for k in ("low", "high", "log", "step"):
            if k in raw:
                issues.append((f"{path}.{k}", "not used by a categorical dimension; allowed: choices", raw[k], True))
        if not isinstance(choices, list) or not choices:
            return None, issues + [(f"{path}.choices", "a categorical dimension needs a non-empty list of choices", choices, "choices" in raw)]
        if len({_label(c) for c in choices}) != len(choices):
            issues.append((f"{path}.choices", "choices must not repeat", choices, True))
        for i, c in enumerate(choices):
            issues += _check_value(algos, name, c, f"{path}.choices[{i}]", models)
        return (None if issues else Dim("categorical", choices=tuple(choices))), issues

    if "choices" in raw:
        issues.append((f"{path}.choices", f"only a categorical dimension has choices; {kind} takes low and high", raw["choices"], True))
    for k in ("low", "high"):
        if k not in raw:
            issues.append((f"{path}.{k}", f"missing required key for a {kind} dimension", None, False))
        elif not _number(raw[k]):
            issues.append((f"{path}.{k}", "must be a finite number", raw[k], True))
    log, step = raw.get("log", False), raw.get("step")
    if not isinstance(log, bool):
        issues.append((f"{path}.log", "must be true or false", log, True))
    if step is not None and (not _number(step) or step <= 0):
        issues.append((f"{path}.step", "must be a positive number", step, True))
    if issues:
        return None, issues
    low, high = raw["low"], raw["high"]
    if low > high:
        return None, [(f"{path}.low", f"low must be <= high ({high})", low, True)]
    if kind in ("pow2", "one_minus_log") and ("log" in raw or "step" in raw):
        issues.append((path, f"a {kind} dimension takes only low and high (its spacing is fixed)", raw, True))
    if kind == "int" and not (float(low).is_integer() and float(high).is_integer() and (step is None or float(step).is_integer())):
        issues.append((path, "an int dimension needs integer low, high and step", raw, True))
    if kind == "pow2":
        for k, v in (("low", low), ("high", high)):
            if not (float(v).is_integer() and v >= 1 and (int(v) & (int(v) - 1)) == 0):
                issues.append((f"{path}.{k}", "must be a power of two (1, 2, 4, 8, ...)", v, True))
    if kind == "one_minus_log" and not (0 < low and high < 1):
        issues.append((path, "one_minus_log searches 1 - x on a log scale: needs 0 < low <= high < 1", raw, True))
    if log and step is not None:
        issues.append((f"{path}.step", "step cannot be combined with log: true (Optuna samples one or the other)", step, True))
    if log and low <= 0:
        issues.append((f"{path}.low", "a log-scaled dimension needs low > 0", low, True))
    for k, v in (("low", low), ("high", high)):
        issues += _check_value(algos, name, int(v) if kind in ("int", "pow2") else v, f"{path}.{k}", models)
    if issues:
        return None, issues
    conv = int if kind in ("int", "pow2") else float
    return Dim(kind, conv(low), conv(high), bool(log), None if step is None else conv(step)), []


def _check_value(algos: list[str], name: str, value: Any, path: str, models: Models) -> list[Issue]:
    for algo in algos:
        try:
            _field_adapter(algo, name, models).validate_python(value)
        except ValidationError as e:
            msg = e.errors(include_url=False)[0]["msg"]
            return [(path, f"not a valid {name} for {algo}: {msg[0].lower() + msg[1:]}", value, True)]
    return []


def parse_space(raw: dict[str, Any], algos: list[str], path: str = "tune.space",
                models: Models = PARAMS) -> tuple[dict[str, dict[str, Dim | None]], list[Issue]]:
    """Check a YAML ``space`` for the suite's ``algos``; ``({algo: {name: Dim | None}}, issues)``.

    A top-level key is a hyperparameter (for every algorithm of the suite, each of
    which must have it) or an algorithm name with a space of its own. ``None``
    drops a default dimension.
    """
    out: dict[str, dict[str, Dim | None]] = {a: {} for a in algos}
    issues: list[Issue] = []
    for key, val in raw.items():
        kpath = f"{path}.{key}"
        if key in models:
            if key not in algos:
                issues.append((kpath, f"not an algorithm of this suite; allowed: {', '.join(algos)}", None, False))
                continue
            if not isinstance(val, dict):
                issues.append((kpath, f"must be a mapping of {key} hyperparameters to dimensions", val, True))
                continue
            for name, d in val.items():
                issues += _add(out, [key], name, d, f"{kpath}.{name}", models)
            continue
        issues += _add(out, algos, key, val, kpath, models)
    return out, issues


def _add(out: dict[str, dict[str, Dim | None]], algos: list[str], name: str, raw: Any, path: str,
         models: Models) -> list[Issue]:
    lacking = [a for a in algos if name not in models[a].model_fields]
    if lacking:
        allowed = ", ".join(models[lacking[0]].model_fields)
        where = "" if len(algos) == 1 else " (put it under tune.space.<algo> for the algorithms that have it)"
        return [(path, f"unknown hyperparameter for {lacking[0]}{where}; allowed: {allowed}", raw, True)]
    dim, issues = parse_dim(raw, path, algos, name, models)
    if not issues:
        for a in algos:
            out[a][name] = dim
    return issues


def suite_algos(suite: Any, models: Models) -> list[str]:
    """The suite's algorithm names in a stable order: built-ins in registry order, then plugins by name."""
    order = list(PARAMS)
    return sorted({a.algo for a in suite.algorithms if a.algo in models},
                  key=lambda n: (order.index(n) if n in order else len(order), n))


def plugin_space(name: str, model: type[BaseModel]) -> tuple[dict[str, Dim], list[Issue]]:
    """A plugin's default search space: its hyperparameter model's ``search_space`` class attribute,
    dimensions in the suite's YAML form (``{"learning_rate": {"type": "float", "low": ..., "log": true}}``),
    checked like a suite's ``tune.space``; empty when it declares none."""
    raw = getattr(model, "search_space", None) or {}
    if not isinstance(raw, Mapping):
        return {}, [(f"{name}.search_space", "must be a mapping of hyperparameter to dimension", raw, True)]
    out, issues = parse_space(dict(raw), [name], path=f"{name}.search_space", models={name: model})
    return {k: d for k, d in out[name].items() if d is not None}, issues


def check_tune(suite: Any, models: Models = PARAMS) -> list[Any]:
    """Semantic checks of ``suite.tune`` (a validated :class:`bench.suites.suite.Suite`) as ``Problem`` lines.

    ``models`` maps every algorithm name of the suite to its hyperparameter model (the built-ins'
    :data:`PARAMS` and the suite's loaded plugins)."""
    tune: TuneSpec = suite.tune
    algos = suite_algos(suite, models)
    off = [a for a in algos if a in PARAMS and a not in DEFAULT_SPACES]
    if off:  # DQN, SAC, TD3: the zoo's values only (bench.algos.offpolicy_params)
        return [Problem("tune", f"{off[0]} is an off-policy reference point, run with the zoo's values and not "
                                f"tuned (no search space); allowed in a tuned suite: {', '.join(DEFAULT_SPACES)}, or a "
                                "plugin", off[0], True)]
    _, issues = parse_space(tune.space, algos, models=models)
    for name in algos:
        if name not in PARAMS:
            issues += plugin_space(name, models[name])[1]
    if not issues:
        issues += _budget_issues(suite, models)
    return [Problem(p, m, v, h) for p, m, v, h in issues]


def _budget_issues(suite: Any, models: Models) -> list[Issue]:
    # One rollout of the largest n_steps of a user space must fit in a trial's budget,
    # as `bench run` demands of a suite's own n_steps.
    from bench.algos.hyperparams import resolve

    tune: TuneSpec = suite.tune
    algos = suite_algos(suite, models)
    spaces, _ = parse_space(tune.space, algos, models=models)
    issues: list[Issue] = []
    for a in suite.algorithms:
        if a.algo not in spaces:
            continue
        dim = spaces[a.algo].get("n_steps")
        if dim is None:
            continue
        for e in suite.envs:
            budget = tune.timesteps or e.timesteps or suite.defaults.timesteps
            try:
                n_envs = (resolve(a.algo, e.key, a.hyperparams, a.env_overrides(e)) if a.algo in PARAMS else
                          models[a.algo].model_validate({**a.hyperparams, **a.env_overrides(e)})).n_envs  # type: ignore[attr-defined]
            except (ValidationError, ValueError, KeyError):
                continue  # a bad value or env key: reported by the suite's own checks
            top = max(dim.choices) if dim.kind == "categorical" else dim.high
            if budget is not None and n_envs * top > budget:
                where = "tune.space.n_steps" if "n_steps" in tune.space else f"tune.space.{a.algo}.n_steps"
                issues.append(
                    (f"{where}.high" if dim.kind != "categorical" else where,
                     f"one rollout of {a.display} on {e.key} (n_envs {n_envs} × n_steps {top}) exceeds a trial's budget "
                     f"of {budget} steps; allowed: n_steps <= {budget // n_envs}", top, True)
                )
    return issues


# --------------------------------------------------------------------------- #
# The space of one (algorithm, env) and sampling it
# --------------------------------------------------------------------------- #
def build_space(
    algo: str,
    user: dict[str, Dim | None],
    *,
    fixed: dict[str, Any],
    use_defaults: bool,
    n_envs: int,
    timesteps: int,
    checkpoints: int,
    defaults: dict[str, Dim] | None = None,
) -> dict[str, Dim]:
    """The searched dimensions of one algorithm: defaults (minus what ``fixed`` sets) ← ``user``.

    The defaults are :data:`DEFAULT_SPACES` ``[algo]``, or ``defaults`` when given (a plugin's own
    :func:`plugin_space`).

    A hyperparameter the suite sets explicitly (``fixed``) is a choice, not
    searched, unless ``user`` names it. A default ``n_steps`` range is capped so
    one rollout (``n_steps × n_envs``) fits in ``timesteps / checkpoints``, so
    every checkpoint sees at least one update.
    """
    space: dict[str, Dim] = {}
    if use_defaults:
        for name, dim in (DEFAULT_SPACES[algo] if defaults is None else defaults).items():
            if name in fixed:
                continue
            if name == "n_steps" and dim.kind == "pow2":
                cap = max(1, timesteps // (checkpoints * max(n_envs, 1)))
                high = 2 ** int(math.floor(math.log2(cap)))
                high = min(int(dim.high), high)
                dim = Dim("pow2", min(int(dim.low), high), high)
            space[name] = dim
    for name, dim in user.items():
        if dim is None:
            space.pop(name, None)
        else:
            space[name] = dim
    return space


def sample(trial: Any, space: dict[str, Dim], *, rollout_of: Any) -> dict[str, Any]:
    """Sample every dimension of ``space`` on ``trial``; the readable values.

    :param rollout_of: ``rollout_of(values) -> n_steps × n_envs`` for the sampled
        values (the caller knows the fixed and zoo layers); ``batch_size`` is
        clamped to it, and the clamp is recorded as a user attribute.
    """
    values = {name: dim.suggest(trial, name) for name, dim in space.items()}
    for name, dim in space.items():
        if dim.optuna_name(name) != name:
            trial.set_user_attr(name, values[name])
    if "batch_size" in values:
        rollout = int(rollout_of(values))
        if values["batch_size"] > rollout:
            trial.set_user_attr("batch_size_sampled", values["batch_size"])
            values["batch_size"] = rollout
            trial.set_user_attr("batch_size", rollout)
    return values
