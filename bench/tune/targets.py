"""What a study tunes: one *target* is an (algorithm, implementation, env) with its search space, seeds,
budget and objective, made from ``bench tune``'s flags or from a suite's ``tune:`` block, and given the
env's random-policy anchor before any trial runs."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

# A study scored under another objective version is refused; studies from before versions were kept count as 1.
from bench.storage.vocabulary import OBJECTIVE_VERSIONS
from bench.suites.spaces import DEFAULT_SPACES, Dim, TuneSpec, build_space, parse_space, plugin_space, suite_algos
from bench.suites.suite import AVAILABLE, Cell, cell_key, matches_only

if TYPE_CHECKING:  # annotations only
    from bench.storage.urls import StoreURL

#: Optimisation direction of each objective.
DIRECTIONS = {"auc": "maximize", "final_return": "maximize", "steps_to_threshold": "minimize"}
#: What each version of an objective meant, for the refusal message.
OBJECTIVE_MEANINGS = {
    ("auc", 1): "the mean training return per episode",
    ("auc", 2): "the report's per-step AUC, normalised from the random-policy return (0) to the threshold (1)",
}
#: Objectives whose target resolves the env's random-policy anchor before tuning: ``auc``
#: is scored with it, and ``final_return`` is put on its scale by the sensitivity table.
ANCHORED = ("auc", "final_return")
#: A censored seed's steps_to_threshold, in budgets (PAR-2).
CENSORED_PENALTY = 2.0


class BadInput(ValueError):
    """A user error in flags or settings: one line, exit status 2, nothing runs."""


# --------------------------------------------------------------------------- #
# Targets
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class Target:
    """One (algorithm, implementation, env) to tune, with everything a trial needs."""

    study: str
    algo: str
    impl: str
    label: str
    env_id: str
    threshold: float
    window: int
    timesteps: int
    seeds: tuple[int, ...]
    objective: str
    checkpoints: int
    space: dict[str, Dim]
    fixed: dict[str, Any] = field(default_factory=dict)
    pruner: dict[str, Any] = field(default_factory=dict)
    sampler_seed: int = 0
    suite: str | None = None
    #: impl python: the plugin's ``module:function`` and its package version (as in :class:`Cell`).
    entry: str | None = None
    plugin_version: str | None = None
    #: The env's random-policy return (the report's anchor at ``threshold``); set by
    #: :func:`with_anchor` before trials run, ``None`` until then.
    random_return: float | None = None

    @property
    def direction(self) -> str:
        return DIRECTIONS[self.objective]

    def identity(self) -> dict[str, Any]:
        """What a study's trials were scored under; adding trials requires the same.

        ``random_return`` is part of it only for ``auc``, the one objective it changes.
        """
        ident = {
            "algo": self.algo, "impl": self.impl, "env_id": self.env_id, "fixed": self.fixed,
            "threshold": self.threshold, "window": self.window, "timesteps": self.timesteps,
            "seeds": list(self.seeds), "objective": self.objective,
            "objective_version": OBJECTIVE_VERSIONS[self.objective], "checkpoints": self.checkpoints,
            "space": {k: d.describe() for k, d in self.space.items()},
        }
        if self.objective == "auc":
            ident["random_return"] = self.random_return
        if self.entry is not None:  # only for plugins, so every earlier study keeps its identity
            ident["entry"] = self.entry
        return json.loads(json.dumps(ident))

    def params(self, hyperparams: dict[str, Any]) -> Any:
        """The typed hyperparameters of ``hyperparams`` on this target: the built-in's layers
        (defaults ← zoo ← these), or a plugin's own model (defaults ← these)."""
        if self.entry is not None:
            from bench.algos.plugins import load

            return load(self.entry).params.model_validate(hyperparams)
        from bench.algos.hyperparams import resolve

        return resolve(self.algo, self.env_id, hyperparams)

    def cell(self, hyperparams: dict[str, Any], seed: int) -> Cell:
        """The cell ``bench run`` would make for these resolved hyperparameters and seed."""
        c = Cell(
            suite=self.suite or "tune", env_id=self.env_id, algo=self.algo, impl=self.impl, label=self.label,
            seed=seed, timesteps=self.timesteps, threshold=self.threshold, window=self.window, eval=None,
            hyperparams=hyperparams, entry=self.entry, plugin_version=self.plugin_version,
        )
        from dataclasses import replace

        return replace(c, key=cell_key(c.identity()))

    def marks(self) -> list[int]:
        """Env steps of a seed at which intermediate values are reported, shape ``(checkpoints,)``."""
        return [math.ceil(k * self.timesteps / self.checkpoints) for k in range(1, self.checkpoints + 1)]


def _n_envs(algo: str, env_id: str, fixed: dict[str, Any]) -> int:
    from bench.algos.hyperparams import resolve

    return int(resolve(algo, env_id, fixed).n_envs)  # type: ignore[attr-defined]


def _for_impl(space: dict[str, Dim], impl: str) -> dict[str, Dim]:
    """``space`` without the dimensions ``impl`` does not use (the NumPy REINFORCE has no network)."""
    from bench.suites.suite import NUMPY_UNUSED

    return {k: v for k, v in space.items() if not (impl == "numpy" and k in NUMPY_UNUSED)}


def target_from_flags(
    algo: str,
    impl: str,
    env_id: str,
    *,
    timesteps: int | None = None,
    seeds: int = 3,
    objective: str = "auc",
    study: str | None = None,
) -> Target:
    """A target from ``bench tune --algo --impl --env``: the default space, the registry's threshold."""
    from bench.envs import env_exists, get_spec
    from bench.algos.hyperparams import PARAMS, ZOO_TIMESTEPS

    if algo not in PARAMS:
        raise BadInput(f"--algo: unknown algorithm {algo!r}; allowed: {', '.join(PARAMS)}")
    if algo not in DEFAULT_SPACES:
        raise BadInput(f"--algo: {algo} is an off-policy reference point, run with the zoo's values and not tuned (no "
                       f"search space); allowed: {', '.join(DEFAULT_SPACES)}")
    if impl not in AVAILABLE[algo]:
        raise BadInput(f"--impl: {impl!r} is not available for {algo}; allowed: {', '.join(AVAILABLE[algo])}")
    if not env_exists(env_id):
        raise BadInput(f"--env: unknown environment {env_id!r}; allowed: a registered Gymnasium id (see `bench envs`)")
    threshold = get_spec(env_id).threshold
    if threshold is None:
        raise BadInput(f"--env: {env_id} has no threshold; tune it from a suite file that sets envs[i].threshold")
    if objective not in DIRECTIONS:
        raise BadInput(f"--objective: unknown objective {objective!r}; allowed: {', '.join(DIRECTIONS)}")
    if timesteps is None:
        timesteps = ZOO_TIMESTEPS.get(algo, {}).get(env_id)
        if timesteps is None:
            raise BadInput(f"--timesteps: rl-baselines3-zoo has no budget for {algo} on {env_id}; give --timesteps")
    spec = TuneSpec(seeds=seeds, objective=objective, timesteps=timesteps)  # type: ignore[arg-type]
    n_envs = _n_envs(algo, env_id, {})
    if n_envs > timesteps:
        raise BadInput(f"--timesteps: {timesteps} is smaller than one rollout of {algo} on {env_id} (n_envs {n_envs})")
    space = _for_impl(build_space(algo, {}, fixed={}, use_defaults=True, n_envs=n_envs, timesteps=timesteps,
                                  checkpoints=spec.checkpoints), impl)
    return Target(
        study=study or f"{algo}-{impl}-{env_id}", algo=algo, impl=impl, label=f"{algo}-{impl}", env_id=env_id,
        threshold=float(threshold), window=20, timesteps=timesteps, seeds=tuple(spec.seed_list), objective=objective,
        checkpoints=spec.checkpoints, space=space, pruner=spec.pruner.model_dump(), sampler_seed=spec.sampler_seed,
    )


def targets_from_suite(
    loaded: Any,
    *,
    timesteps: int | None = None,
    seeds: int | None = None,
    objective: str | None = None,
    study: str | None = None,
    only: dict[str, set[str]] | None = None,
) -> list[Target]:
    """One target per (algorithm entry, env) of a loaded suite; flags override its ``tune:`` block.

    ``only`` (``bench tune --only``, parsed by :func:`bench.suites.suite.parse_only`) keeps the targets that
    match every key given (env, algo, impl, label; any of a key's values), as ``bench run --only`` keeps
    cells: a long tuning suite then runs in chunks, each study resuming where it stopped. A study's name
    depends only on its suite, algorithm and env, so a chunk's studies are the whole suite's.
    """
    suite = loaded.suite
    spec: TuneSpec = suite.tune or TuneSpec()
    over: dict[str, Any] = {}
    if seeds is not None:
        over["seeds"] = seeds
    if objective is not None:
        over["objective"] = objective
    if over:
        spec = TuneSpec.model_validate({**spec.model_dump(), **over})
    from bench.algos.hyperparams import PARAMS

    plugins = getattr(loaded, "plugins", {})
    models = {**PARAMS, **{n: p.params for n, p in plugins.items()}}
    algos = suite_algos(suite, models)
    user, issues = parse_space(spec.space, algos, models=models)
    assert not issues, issues  # load_suite already reported these
    pairs = [(a, e) for a in suite.algorithms for e in suite.envs]
    if only:
        if "seed" in only:
            raise BadInput("--only: seed= picks runs, and a study tunes on the suite's tune seeds; allowed keys here: "
                           "env, algo, impl, label")
        n = len(pairs)
        pairs = [(a, e) for a, e in pairs
                 if matches_only(only, {"env": e.key, "algo": a.algo, "impl": a.impl, "label": a.display})]
        if not pairs:
            given = ",".join(f"{k}={v}" for k, vs in only.items() for v in sorted(vs))
            raise BadInput(f"--only: {given!r} matches none of the {n} (algorithm, env) targets of {loaded.path}")
    if study is not None and len(pairs) > 1:
        raise BadInput(f"--study: names one study, but {loaded.path} has {len(pairs)} (algorithm, env) targets; leave it out")
    out = []
    for a, e in pairs:
        fixed = {**a.hyperparams, **a.env_overrides(e)}
        mode = e.vec_env or suite.defaults.vec_env
        if mode != "sync":  # env stepping, as bench run steps this env (sync stays out: earlier studies keep their identity)
            fixed["vec_env"] = mode
        budget = timesteps or spec.timesteps or e.timesteps or suite.defaults.timesteps
        plugin = plugins.get(a.algo) if a.impl == "python" else None
        n_envs = int(plugin.params.model_validate(fixed).n_envs) if plugin is not None else _n_envs(a.algo, e.key, fixed)
        if budget < n_envs:
            raise BadInput(f"--timesteps: {budget} is smaller than one rollout of {a.display} on {e.key} (n_envs {n_envs})")
        space = _for_impl(build_space(
            a.algo, user[a.algo], fixed=fixed, use_defaults=spec.default_space, n_envs=n_envs,
            timesteps=budget, checkpoints=spec.checkpoints,
            defaults=plugin_space(a.algo, plugin.params)[0] if plugin is not None else None,
        ), a.impl)
        if not space:
            hint = (" (the plugin declares no search_space on its hyperparameter model)" if plugin is not None else "")
            raise BadInput(f"{loaded.path}: tune.space: nothing to search for {a.display}{hint}; set default_space: "
                           "true or name a dimension")
        out.append(
            Target(
                study=study or f"{suite.name}-{a.display}-{e.key}", algo=a.algo, impl=a.impl, label=a.display,
                env_id=e.key, threshold=float(loaded.env_meta[e.key]["threshold"]), window=e.window or suite.defaults.window,
                timesteps=int(budget), seeds=tuple(spec.seed_list), objective=spec.objective,
                checkpoints=spec.checkpoints, space=space, fixed=fixed, pruner=spec.pruner.model_dump(),
                sampler_seed=spec.sampler_seed, suite=suite.name,
                entry=plugin.entry if plugin is not None else None,
                plugin_version=plugin.version if plugin is not None else None,
            )
        )
    return out


# --------------------------------------------------------------------------- #
# The random-policy anchor
# --------------------------------------------------------------------------- #
def with_anchor(target: Target, store_url: StoreURL, log: Callable[[str], None] | None = None) -> Target:
    """``target`` with its env's random-policy return, the low anchor of the report's scores.

    Read from the store at ``store_url``, where the report keeps it; computed (a few
    seconds of random play) and stored the first time an env and threshold need it
    (:func:`bench.run.anchors.ensure_anchors`). A target whose objective does
    not use the anchor, or that has it already, is returned as it is.
    """
    if target.objective not in ANCHORED or target.random_return is not None:
        return target
    if target.threshold is None:
        if target.objective == "auc":
            raise BadInput(f"--objective auc: {target.env_id} has no threshold, and the normalised AUC runs from the "
                           "random-policy return to the threshold; set envs[i].threshold or use --objective final_return")
        return target
    from dataclasses import replace

    from bench.run.anchors import ensure_anchors
    from bench.storage.store import Store

    db = Store(store_url)
    try:
        anchor = ensure_anchors(db, {target.env_id: float(target.threshold)}, log=log)[target.env_id]
    finally:
        db.dispose()
    if target.objective == "auc" and not target.threshold > anchor.random_return:
        raise BadInput(
            f"--objective auc: the threshold of {target.env_id} ({target.threshold:g}) is not above its random-policy "
            f"return ({anchor.random_return:.6g}), so the normalised AUC has no scale; set a higher envs[i].threshold "
            "or use --objective final_return"
        )
    return replace(target, random_return=float(anchor.random_return))
