"""Suite validation past the schema, by stage: the envs (:func:`check_envs`), the algorithm entries
(:func:`check_entries`), env stepping (:func:`check_stepping`), then the cells (:func:`resolve_cells`), whose
per-algorithm rules are each algorithm's spec's (``AlgoSpec.checks``, ``sb3_fixed``, ``vec_env_refused``).

Every stage goes on past the problems of the one before, so that one pass of :func:`expand` names them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from bench.algos.registry import ALGOS, AVAILABLE, AlgoSpec, CellFacts, names
from bench.suites.cells import Cell, _with_key
from bench.suites.cost import default_wall_minutes
from bench.suites.errors import _problems_from_pydantic, did_you_mean
from bench.suites.partial import env_id_problem, hyperparam_problems
from bench.suites.problems import Problem
from bench.suites.schema import (
    BENCH_ONLY,
    MAX_LABEL,
    NUMPY_UNUSED,
    AlgoEntry,
    EnvEntry,
    Suite,
    VecEnvMode,
    merge_resources,
)

__all__ = ["expand", "Envs"]


@dataclass
class Envs:
    """What the env stage found: ``meta`` env key → its traits and threshold; ``keys`` ``envs[i]`` → its key
    (``None`` where it is unusable); ``seen`` env key → the first ``envs[i]`` that names it."""

    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    keys: list[str | None] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)


def expand(suite: Suite, problems: list[Problem]) -> tuple[list[Cell], dict[str, dict[str, Any]], dict[str, Any]]:
    """(the suite's cells, env key → its meta, algorithm → its loaded plugin), adding every problem found to
    ``problems``; no cells where there is a problem."""
    envs = check_envs(suite, problems)
    plugins = check_entries(suite, envs, problems)
    check_stepping(suite, problems)
    cells = resolve_cells(suite, envs, plugins, problems)
    problems.extend(_acts_in_none(suite, envs, problems))
    problems.extend(_same_cells(suite.algorithms, cells))
    return [] if problems else cells, envs.meta, {suite.algorithms[j].algo: p for j, p in plugins.items()}


# --------------------------------------------------------------------------- #
# Stage 1: the envs
# --------------------------------------------------------------------------- #
def check_envs(suite: Suite, problems: list[Problem]) -> Envs:
    """Each ``envs[i]``: a key that is not too long nor listed twice, an env bench can make, a threshold, a budget,
    a stepping mode it supports and traits that agree with the env."""
    found = Envs()
    for i, e in enumerate(suite.envs):
        found.keys.append(None)
        ek = _env_key(i, e, found.seen, problems)
        if ek is None:
            continue
        meta = _env_meta(i, e, ek, suite, problems)
        if meta is not None:
            found.meta[ek] = meta
            found.keys[i] = ek
    return found


def _env_key(i: int, e: EnvEntry, seen: dict[str, int], problems: list[Problem]) -> str | None:
    """``envs[i]``'s key, registered in ``seen``; ``None`` (and a problem) where it cannot be one."""
    path = f"envs[{i}]"
    try:
        ek = e.key
    except ValueError as err:
        problems.append(Problem(f"{path}.kwargs", str(err)))
        return None
    if len(ek) > MAX_LABEL:
        problems.append(Problem(f"{path}.kwargs", f"the env's key {ek[:40]}… is {len(ek)} characters with its "
                                f"kwargs; allowed: at most {MAX_LABEL}"))
        return None
    if ek in seen:
        what = "with the same kwargs " if e.kwargs else ""
        problems.append(Problem(f"{path}.id", f"listed twice {what}(also envs[{seen[ek]}])", e.id, True))
        return None
    seen[ek] = i
    if (unknown := env_id_problem(path, ek, e.id)) is not None:
        problems.append(unknown)
        return None
    return ek


def _env_meta(i: int, e: EnvEntry, ek: str, suite: Suite, problems: list[Problem]) -> dict[str, Any] | None:
    """The traits, threshold and time scale of env ``ek`` (``envs[i]``); ``None`` where it cannot be used."""
    # Imported here: the env registry pulls in gymnasium, which the schema alone does not need.
    from bench import envs

    path = f"envs[{i}]"
    try:
        spec = envs.get_spec(ek)
        facts = envs.space_facts(ek) if e.traits is not None else {}
        obs_problem = envs.obs_supported(ek)
    except (KeyError, ValueError) as err:
        where = f"{path}.kwargs" if e.kwargs else f"{path}.id"
        problems.append(Problem(where, f"cannot be used: {err}", e.id if not e.kwargs else None, not e.kwargs))
        return None
    if obs_problem is not None:
        problems.append(Problem(f"{path}.id", obs_problem, e.id, True))
        return None
    threshold = e.threshold if e.threshold is not None else spec.threshold
    if threshold is None:
        problems.append(
            Problem(f"{path}.threshold", f"{ek} is not in bench's registry and has no reward_threshold; set a threshold")
        )
    if (e.timesteps or suite.defaults.timesteps) is None:
        problems.append(Problem(f"{path}.timesteps", "no budget; set envs[i].timesteps or defaults.timesteps"))
    mode = e.vec_env or suite.defaults.vec_env
    why = envs.vec_env_problem(ek, mode)
    if why is not None:
        problems.append(Problem(f"{path}.vec_env" if e.vec_env else "defaults.vec_env", why, mode, True))
    meta = {
        "threshold": threshold,
        "threshold_source": "suite" if e.threshold is not None else spec.threshold_source,
        "action": spec.action,
        "obs": spec.obs,
        "reward": spec.reward,
        "family": spec.family,
        "horizon": spec.horizon,
        "time_scale_us": e.time_scale_us if e.time_scale_us is not None else spec.time_scale_us,
    }
    if e.traits is not None:
        declared = e.traits.model_dump(exclude_none=True)
        bad = _trait_conflicts(declared, facts, ek)
        problems.extend(Problem(f"{path}.traits.{name}", why, declared[name], True) for name, why in bad)
        if bad:
            return None
        meta.update(declared)
        meta["traits_declared"] = sorted(declared)  # so reports can say which traits the suite stated
    return meta


def _trait_conflicts(declared: dict[str, Any], facts: dict[str, Any], key: str) -> list[tuple[str, str]]:
    """``(trait, why)`` for each declared trait that the env's spaces contradict (``facts``:
    :func:`bench.envs.space_facts`). Reward density cannot be checked; it is taken as stated."""
    bad = []
    if "action" in declared and declared["action"] != facts["action"]:
        space = "Discrete" if facts["action"] == "discrete" else "Box"
        bad.append(("action", f"{key} has a {space} action space; allowed: {facts['action']}"))
    if declared.get("obs") == "pixels" and not (facts["obs_box"] and (facts["obs_ndim"] or 0) >= 2):
        shape = f"a {facts['obs_ndim']}-dimensional Box" if facts["obs_box"] else "a non-Box space"
        bad.append(("obs", f"{key}'s observations are {shape}; pixels needs an image (a Box of 2 or more "
                           "dimensions); allowed: vector"))
    if declared.get("obs") == "sequence" and not facts.get("obs_tokens"):
        bad.append(("obs", f"{key}'s observations are not token ids (a MultiDiscrete space); allowed: vector"
                           + (" or pixels" if facts["obs_box"] and (facts["obs_ndim"] or 0) >= 2 else "")))
    if "horizon" in declared and facts["horizon"] is not None and declared["horizon"] != facts["horizon"]:
        bad.append(("horizon", f"{key} is truncated at {facts['horizon']} steps; allowed: {facts['horizon']}, or "
                               "kwargs max_episode_steps to change its time limit"))
    return bad


# --------------------------------------------------------------------------- #
# Stage 2: the algorithm entries
# --------------------------------------------------------------------------- #
def check_entries(suite: Suite, envs: Envs, problems: list[Problem]) -> dict[int, Any]:
    """Each ``algorithms[j]``: its own label, a plugin that loads, an implementation the algorithm has, and
    hyperparameters that implementation uses. Returns ``algorithms[j]`` → its loaded plugin."""
    labels: dict[str, int] = {}
    plugins: dict[int, Any] = {}  # algorithms[j] → its loaded bench.algos.plugins.Plugin
    env_names = list(envs.seen) + [e.id for e in suite.envs if e.id not in envs.seen]
    for j, a in enumerate(suite.algorithms):
        path = f"algorithms[{j}]"
        if a.display in labels:
            problems.append(
                Problem(f"{path}.label", f"label used twice (also algorithms[{labels[a.display]}]); give each entry its own label", a.display, True)
            )
        labels[a.display] = j
        save = a.save or suite.defaults.save
        if save != "none" and a.impl == "python":
            problems.append(Problem(f"{path}.save" if a.save else "defaults.save", f"a plugin (impl python, "
                                    f"{a.display}) builds its own policy, which bench cannot save; allowed for it: none",
                                    save, True))
        _check_impl(j, a, plugins, problems)
        problems.extend(_unused_hyperparams(j, a))
        for env_key in a.env_hyperparams:
            if env_key not in env_names:
                problems.append(
                    Problem(
                        f"{path}.env_hyperparams.{env_key}",
                        f"not an env of this suite; allowed: {', '.join(env_names) or 'none'} (an id applies to all "
                        "its kwargs variants)",
                    )
                )
    return plugins


def _check_impl(j: int, a: AlgoEntry, plugins: dict[int, Any], problems: list[Problem]) -> None:
    """An ``entry`` only with ``impl: python``, whose plugin must load (into ``plugins``); any other
    implementation must be one the algorithm has."""
    path = f"algorithms[{j}]"
    if a.impl != "python" and a.entry is not None:
        problems.append(Problem(f"{path}.entry", f"entry names a plugin's function; only with impl: python (this "
                                f"entry has impl {a.impl})", a.entry, True))
    elif a.impl == "python":
        from bench.algos.plugins import PluginError, entry_of, load

        try:
            plugins[j] = load(a.entry if a.entry is not None else entry_of(a.algo))
        except PluginError as err:
            where, value = (f"{path}.entry", a.entry) if a.entry is not None else (f"{path}.algo", a.algo)
            problems.append(Problem(where, str(err), value, True))
    elif a.impl not in ALGOS[a.algo].impls:
        numpy = [n.upper() for n in names() if "numpy" in ALGOS[n].impls]
        why = ALGOS[a.algo].missing.get(a.impl) or (
            f"impl numpy is the pure-NumPy {', '.join(numpy)} only" if a.impl == "numpy" else None)
        allowed = f"allowed for {a.algo}: impl {', '.join(AVAILABLE[a.algo])}"
        problems.append(Problem(f"{path}.impl", f"{why}; {allowed}" if why else allowed, a.impl, True))


def _blocks(a: AlgoEntry) -> list[tuple[str, dict[str, Any]]]:
    """An entry's hyperparameter blocks: ``hyperparams``, then each ``env_hyperparams.<env>``."""
    return [("hyperparams", a.hyperparams)] + [(f"env_hyperparams.{k}", v) for k, v in a.env_hyperparams.items()]


def _unused_hyperparams(j: int, a: AlgoEntry) -> list[Problem]:
    """Values that ``impl: sb3`` has no counterpart for (its spec's ``sb3_fixed`` among them), and those only the
    project's own torch implementations use (under ``impl: sb3`` or ``numpy``)."""
    out: list[Problem] = []
    path = f"algorithms[{j}]"
    spec = ALGOS.get(a.algo)
    if a.impl == "sb3":
        fixed = spec.sb3_fixed if spec is not None else {}
        for where, block in _blocks(a):
            if block.get("ent_schedule", "constant") != "constant":
                out.append(Problem(f"{path}.{where}.ent_schedule", "Stable-Baselines3 has no entropy-coefficient "
                                   "schedule; allowed for impl sb3: constant", block["ent_schedule"], True))
            for key, (only, why) in fixed.items():
                if block.get(key, only) != only:
                    out.append(Problem(f"{path}.{where}.{key}", f"{why}; allowed for impl sb3: {only}", block[key], True))
    if a.impl in ("sb3", "numpy"):
        for where, block in _blocks(a):
            for key in (BENCH_ONLY if a.impl == "sb3" else NUMPY_UNUSED):
                if key in block:
                    out.append(
                        Problem(f"{path}.{where}.{key}", "only the project's own implementations (impl: bench) use this"
                                + ("" if a.impl == "sb3" else "; the NumPy REINFORCE is a linear policy without "
                                                              "torch"), block[key], True)
                    )
    return out


# --------------------------------------------------------------------------- #
# Stage 3: env stepping
# --------------------------------------------------------------------------- #
def check_stepping(suite: Suite, problems: list[Problem]) -> None:
    """Each env's stepping mode suits each entry (a plugin steps its own envs; a spec's ``vec_env_refused``), and no
    entry sets it in its hyperparameters."""
    for j, a in enumerate(suite.algorithms):
        spec = ALGOS.get(a.algo) if a.impl != "python" else None
        refused = spec.vec_env_refused if spec is not None else {}
        for i, e in enumerate(suite.envs):
            mode = e.vec_env or suite.defaults.vec_env
            where = f"envs[{i}].vec_env" if e.vec_env else "defaults.vec_env"
            if mode != "sync" and a.impl == "python":
                problems.append(Problem(where, f"a plugin (algorithms[{j}], impl python) steps its own envs; allowed for "
                                               f"{a.display}: sync", mode, True))
            elif mode in refused:
                allowed = ", ".join(m for m in get_args(VecEnvMode) if m not in refused)
                problems.append(Problem(where, f"{refused[mode]} (algorithms[{j}]); allowed for {a.algo}: {allowed}",
                                        mode, True))
        for where, block in _blocks(a):
            if "vec_env" in block:
                problems.append(Problem(f"algorithms[{j}].{where}.vec_env", "env stepping is set per env, the same "
                                        "for every implementation; allowed: envs[i].vec_env or defaults.vec_env",
                                        block["vec_env"], True))


# --------------------------------------------------------------------------- #
# Stage 4: the cells
# --------------------------------------------------------------------------- #
def resolve_cells(suite: Suite, envs: Envs, plugins: dict[int, Any], problems: list[Problem]) -> list[Cell]:
    """Every (entry, env, seed) cell, resolved past the problems above for every env and entry that can still be
    resolved, so that a bad hyperparameter value shows in the same pass as an unknown env beside it."""
    cells: list[Cell] = []
    for j, a in enumerate(suite.algorithms):
        if a.impl == "python" and j not in plugins:
            continue  # its plugin did not load (named above): nothing to resolve it with
        usable = [i for i, e in enumerate(suite.envs) if envs.keys[i] is not None
                  and (e.timesteps or suite.defaults.timesteps) is not None]
        if not usable:  # every env is named above as unusable: what its hyperparameters show alone
            problems.extend(hyperparam_problems(j, a.model_dump()))
        for i in usable:
            cells.extend(_cells_of(suite, envs, j, i, plugins.get(j), problems))
    return cells


@dataclass(frozen=True)
class _At:
    """Where one (entry, env) pair sits in the suite: ``algorithms[j]`` on ``envs[i]`` (key ``ek``), the env's own
    hyperparameter block ``over`` and the name it is written under."""

    j: int
    i: int
    ek: str
    over: dict[str, Any]
    over_name: str

    def field(self, name: str) -> str:
        """The suite path of hyperparameter ``name``: the env's own block where it sets it, else the entry's."""
        if name in self.over:
            return f"algorithms[{self.j}].env_hyperparams.{self.over_name}.{name}"
        return f"algorithms[{self.j}].hyperparams.{name}"


def _cells_of(suite: Suite, envs: Envs, j: int, i: int, plugin: Any, problems: list[Problem]) -> list[Cell]:
    """The cells of ``algorithms[j]`` on ``envs[i]``, one per seed; none (and its problem) where it cannot run."""
    a, e = suite.algorithms[j], suite.envs[i]
    ek = envs.keys[i]
    assert ek is not None
    # A variant's own entry wins over its id's (which applies to every variant of the id).
    at = _At(j, i, ek, a.env_overrides(e), ek if ek in a.env_hyperparams else e.id)
    spec = plugin.spec(a.algo) if plugin is not None else ALGOS[a.algo]
    params = _params(suite, a, e, at, spec, plugin, problems)
    if params is None:
        return []
    from bench.algos.hyperparams import key_view

    resolved = key_view(params)
    timesteps = e.timesteps or suite.defaults.timesteps
    assert timesteps is not None
    meta = envs.meta[ek]
    problem = _kernel_problem(a, at, meta, resolved)
    if problem is None and meta["action"] not in spec.actions:
        # One grid holds DQN beside SAC and TD3: each algorithm runs on the envs it can act in
        # (an entry that can act in none is refused below).
        return []
    problem = problem or _refusal(suite, a, e, at, spec, meta, resolved, timesteps)
    if problem is not None:
        problems.append(problem)
        return []
    ev = e.eval or suite.defaults.eval
    save = a.save or suite.defaults.save
    wall = a.max_wall_minutes if a.max_wall_minutes is not None else suite.defaults.max_wall_minutes
    out = []
    for seed in suite.seed_list:
        cell = Cell(
            suite=suite.name, env_id=ek, algo=a.algo, impl=a.impl, label=a.display, seed=seed, timesteps=timesteps,
            threshold=meta["threshold"], window=e.window or suite.defaults.window,
            eval=ev.model_dump() if ev else None, hyperparams=resolved, params=params, spec=spec,
            resources=merge_resources(a.resources, e.resources), diag_points=suite.defaults.diag_points,
            cpu_seconds=e.cpu_seconds if e.cpu_seconds is not None else suite.defaults.cpu_seconds,
            entry=plugin.entry if plugin is not None else None,
            plugin_version=plugin.version if plugin is not None else None,
            save=save, checkpoint_every=a.checkpoint_every or suite.defaults.checkpoint_every,
            max_wall_minutes=wall or None,  # 0: no limit
            max_memory_mb=a.max_memory_mb if a.max_memory_mb is not None else suite.defaults.max_memory_mb,
            time_scale_us=meta.get("time_scale_us"),
        )
        if wall is None:  # the suite sets none: the default, from the run's estimated CPU time
            default = default_wall_minutes(cell, cell.time_scale_us)
            cell = replace(cell, max_wall_minutes=default, wall_limit_default=default is not None)
        out.append(_with_key(cell))
    return out


def _params(suite: Suite, a: AlgoEntry, e: EnvEntry, at: _At, spec: AlgoSpec, plugin: Any,
            problems: list[Problem]) -> BaseModel | None:
    """The cell's typed hyperparameters, resolved in layers; ``None`` (and its problems) where they do not validate."""
    from bench.algos.hyperparams import resolve

    mode = e.vec_env or suite.defaults.vec_env
    # Only a mode other than sync enters the hyperparameters (and hence the key): sync is a late default.
    stepping = {"vec_env": mode} if mode != "sync" else {}
    try:
        # A plugin has no zoo layer: its model's defaults, then the suite's values.
        return (plugin.params.model_validate({**a.hyperparams, **at.over}) if plugin is not None
                else resolve(a.algo, at.ek, {**a.hyperparams, **stepping}, at.over))
    except ValidationError as err:
        for p in _problems_from_pydantic(err):
            key = p.path.split(".")[0] if p.path else ""
            if key and key in at.over:
                where = f"algorithms[{at.j}].env_hyperparams.{at.over_name}.{p.path}"
            elif key and key in a.hyperparams:
                where = f"algorithms[{at.j}].hyperparams.{p.path}"
            else:
                where = f"algorithms[{at.j}].hyperparams"
            msg = p.message
            if p.message.startswith("unknown key"):
                model = spec.params
                msg = (f"unknown hyperparameter for {a.algo}; allowed: {', '.join(model.model_fields)}"
                       f"{did_you_mean(key, model.model_fields)}")
            problems.append(Problem(where, f"{msg} [for {at.ek}]" if not key else msg, p.value, p.has_value))
        return None


def _kernel_problem(a: AlgoEntry, at: _At, meta: dict[str, Any], resolved: dict[str, Any]) -> Problem | None:
    """The NumPy kernel asked for where it cannot run (checked before the action space: an entry that asks for it
    is told so on every env)."""
    if not (a.impl == "bench" and resolved.get("kernel") == "numpy" and (
            meta["obs"] == "pixels" or resolved.get("device") != "cpu")):
        return None
    why = f"{at.ek} has pixel observations" if meta["obs"] == "pixels" else f"device is {resolved.get('device')}"
    return Problem(at.field("kernel"), f"the NumPy kernel needs an MLP policy on the CPU, and {why}; "
                                       f"allowed here: auto, torch", "numpy", True)


def _refusal(suite: Suite, a: AlgoEntry, e: EnvEntry, at: _At, spec: AlgoSpec, meta: dict[str, Any],
             resolved: dict[str, Any], timesteps: int) -> Problem | None:
    """Why the cell cannot run, the first reason found: the algorithm's own checks (its spec's), gSDE's and the
    sequence policy's needs, and what ``save`` needs."""
    from bench import envs

    ek, j, i = at.ek, at.j, at.i
    facts = CellFacts(algo=a.algo, label=a.display, env=ek, action=meta["action"], obs=meta["obs"],
                      timesteps=timesteps, hyperparams=resolved, impl=a.impl)
    refusal = next((r for r in (check(facts) for check in spec.checks) if r is not None), None)
    if refusal is not None:
        if refusal.at == "env":
            return Problem(f"envs[{i}].id", refusal.message, e.id, True)
        if refusal.at == "impl":
            return Problem(f"algorithms[{j}].impl", refusal.message, refusal.value, True)
        src = f"envs[{i}].timesteps" if e.timesteps else "defaults.timesteps"
        return Problem(src, refusal.message, refusal.value, True)
    if resolved.get("use_sde") and meta["action"] != "continuous":
        return Problem(at.field("use_sde"), f"gSDE needs continuous actions, and {ek}'s are {meta['action']}; "
                                            "allowed here: false", True, True)
    if resolved.get("policy") == "sequence" and not envs.is_sequence_task(ek):
        return Problem(at.field("policy"), f"{ek} is not a sequence task; policy sequence reads tokens; allowed "
                                           "here: mlp (sequence tasks: bench/Sort-v0, bench/Add-v0, "
                                           "bench/Preference-v0)", "sequence", True)
    save = a.save or suite.defaults.save
    save_at = f"algorithms[{j}].save" if a.save else "defaults.save"
    if save == "best" and (e.eval or suite.defaults.eval) is None:
        return Problem(save_at, f"best keeps the policy at the best periodic evaluation, and {a.display} on {ek} has "
                                f"none; allowed: final, or set defaults.eval or envs[{i}].eval", save, True)
    if save != "none" and resolved.get("policy") == "sequence":
        return Problem(save_at, f"a sequence policy ({a.display} on {ek}) is built from its task's SFT reference, "
                                "which a saved policy does not carry; allowed here: none", save, True)
    return None


# --------------------------------------------------------------------------- #
# Stage 5: the grid as a whole
# --------------------------------------------------------------------------- #
def _acts_in_none(suite: Suite, envs: Envs, problems: list[Problem]) -> list[Problem]:
    """An entry whose algorithm acts in none of the suite's envs' action spaces."""
    out = []
    for j, a in enumerate(suite.algorithms):
        acts = ALGOS[a.algo].actions if a.algo in ALGOS and a.impl != "python" else ()
        need = " or ".join(acts)
        # Refused for what it acts in, not for having no cells: another problem (a budget, a kernel) can leave
        # an entry without cells in a suite whose envs it does act in.
        if acts and envs.meta and not any(m["action"] in acts for m in envs.meta.values()) and not any(
                p.path.startswith(f"algorithms[{j}]") for p in problems):
            kinds = sorted({m["action"] for m in envs.meta.values()})
            out.append(Problem(f"algorithms[{j}].algo", f"{a.algo} acts in {need} action spaces, and this suite's "
                               f"envs have {' and '.join(kinds)} actions only; allowed for {a.algo}: a suite with "
                               f"an env of {need} actions", a.algo, True))
    return out


def _same_cells(algorithms: list[AlgoEntry], cells: list[Cell]) -> list[Problem]:
    """One problem per pair of labels whose cells are the very same runs (one key): the runner would run
    the cell once, skip the other as taken, and the export would keep one of them."""
    index = {a.display: j for j, a in enumerate(algorithms)}
    first: dict[str, Cell] = {}
    pairs: dict[tuple[str, str], Cell] = {}
    for c in cells:
        other = first.setdefault(c.key, c)
        if other.label != c.label:
            pairs.setdefault((other.label, c.label), c)
    return [Problem(f"algorithms[{index[b]}]",
                    f"labels {a!r} (algorithms[{index[a]}]) and {b!r} (algorithms[{index[b]}]) resolve to the same "
                    f"cells (same algorithm, implementation and resolved hyperparameters, e.g. on {c.env_id}), so "
                    f"only one would run; allowed: labels that differ in what they run, or one of them")
            for (a, b), c in pairs.items()]
