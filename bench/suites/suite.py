"""Suite files: load, validate, expand into cells.

A suite is a YAML grid of environments × algorithms × seeds::

    name: smoke
    seeds: [0, 1]                 # or an integer n, meaning 0..n-1
    defaults: {timesteps: 20000, window: 20}
    envs:
      - id: CartPole-v1
        threshold: 475            # optional where the registry has one
    algorithms:
      - algo: ppo                 # reinforce | ac_mc | ac_td | a2c | a3c | npg | trpo | ppo | grpo | rloo
                                  # (off-policy reference points, impl sb3 only: dqn | sac | td3)
        impl: sb3                 # bench | sb3 | numpy (reinforce only)
        hyperparams: {n_envs: 8}
        env_hyperparams:
          CartPole-v1: {n_steps: 32}
        resources: {num_cpus: 1}  # Ray only (also on envs); not part of the key

Everything is checked before anything runs, and what a suite may hold is bounded:
the file's size (:data:`MAX_FILE_BYTES`), its nesting (:data:`MAX_DEPTH`) and its
size with YAML aliases expanded (:data:`MAX_NODES`: a "billion laughs" of nested
aliases is refused in linear time instead of being expanded), every string's
length and characters, every integer to what both store backends hold, and
thresholds to finite numbers. Every problem becomes one line
naming the file, the line, the path inside the file, the bad value and what is
allowed (:class:`SuiteError`). The CLI prints them and exits with status 2.

Hyperparameters resolve in layers, as in rl-baselines3-zoo: the algorithm's
defaults, then the zoo's tuned values for the env, then the suite's
``hyperparams``, then its ``env_hyperparams`` for that env. The resolved values
are part of each cell's key and are stored with each run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from bench.algos.registry import ALGOS, AVAILABLE, IMPLS, OFF_POLICY_ACTIONS, PARAMS, CellFacts, names
from bench.suites.cells import FILTER_KEYS, Cell, LoadedSuite, Outputs, _with_key, cell_key, matches_only, parse_only, select
from bench.suites.errors import (
    SuiteError,
    _check_values,
    _problems_from_pydantic,
    _read_yaml,
    did_you_mean,
    one_line,
)
from bench.suites.cost import default_wall_minutes
from bench.suites.overrides import Override, OverrideError, apply_overrides, parse_override
from bench.suites.partial import env_id_problem, hyperparam_problems, unvalidated_problems
from bench.suites.problems import Problem
from bench.suites.race import check_race
from bench.suites.schema import (
    BENCH_ONLY,
    CLAIM_MEASURES,
    DIAG_POINTS,
    KEY_VERSION,
    MAX_CELLS,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_INT32,
    MAX_LABEL,
    MAX_MEMORY_MB,
    MAX_NODES,
    MAX_STRING,
    MAX_TIMESTEPS,
    MAX_WALL_MINUTES,
    NUMPY_UNUSED,
    AlgoEntry,
    Claim,
    Defaults,
    EnvEntry,
    EvalSpec,
    Expectation,
    Resources,
    SaveMode,
    Suite,
    Traits,
    VecEnvMode,
    json_schema,
    merge_resources,
)
from bench.suites.spaces import check_tune

# What this module has always offered, now defined beside it (schema, errors, cells) or read from the
# algorithm registry: importers keep ``from bench.suites.suite import ...``.
__all__ = ["ALGOS", "AVAILABLE", "IMPLS", "OFF_POLICY_ACTIONS", "BENCH_ONLY", "NUMPY_UNUSED", "CLAIM_MEASURES",
           "DIAG_POINTS", "KEY_VERSION", "MAX_CELLS", "MAX_DEPTH", "MAX_FILE_BYTES", "MAX_INT32", "MAX_LABEL",
           "MAX_MEMORY_MB", "MAX_NODES", "MAX_STRING", "MAX_TIMESTEPS", "MAX_WALL_MINUTES", "FILTER_KEYS",
           "AlgoEntry", "Cell", "Claim", "Defaults", "EnvEntry", "EvalSpec", "Expectation", "LoadedSuite",
           "Outputs", "Resources", "SaveMode", "Suite", "SuiteError", "Traits", "VecEnvMode", "cell_key",
           "did_you_mean", "json_schema", "load_suite", "load_suite_text", "matches_only", "merge_resources", "one_line",
           "parse_only", "select", "names"]


def load_suite(path: str | Path, overrides: Sequence[str] = ()) -> LoadedSuite:
    """Read, validate and expand a suite file, with ``overrides`` (``PATH=VALUE``, as ``bench run --set``
    takes them) applied to it first. Raises :class:`SuiteError` naming every problem found."""
    file = str(path)
    p = Path(path)
    if not p.exists():
        raise SuiteError(file, [Problem("", "no such suite file")])
    if not p.is_file():  # a folder, /dev/null or a FIFO exists but holds no suite: say so, not "no such file"
        what = "a folder" if p.is_dir() else "not a regular file"
        raise SuiteError(file, [Problem("", f"{what}; allowed: a suite YAML file")])
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise SuiteError(file, [Problem("", f"the file is larger than {MAX_FILE_BYTES:,} bytes; allowed: at most "
                                                f"{MAX_FILE_BYTES:,} (a suite is a few KB)")])
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SuiteError(file, [Problem("", f"cannot read the file: {e}")]) from None
    return load_suite_text(text, file, overrides)


def load_suite_text(text: str, file: str, overrides: Sequence[str] = ()) -> LoadedSuite:
    """:func:`load_suite` of a suite's YAML ``text``, named ``file`` in its problems (a file not written yet:
    ``bench run --env ... --algo ...``'s)."""
    data, lines = _read_yaml(text, file)
    if not isinstance(data, dict):
        raise SuiteError(
            file, [Problem("", f"a suite must be a mapping with name, seeds, envs and algorithms, not a {type(data).__name__}")]
        )
    # Every stage goes on past the problems of the one before, so that one pass names them all: an
    # override that cannot be read or names no place is left out, and the rest is checked without it.
    unread: list[Problem] = []
    parsed: list[Override] = []
    for o in overrides:
        try:
            parsed.append(parse_override(o))
        except OverrideError as e:
            unread.append(Problem("", str(e)))
    sets = tuple(parsed)
    set_paths = [o.path for o in sets]
    if sets:
        unread += apply_overrides(data, list(sets))
        if problems := _check_values(data):  # NaN, 2^70: named here once, not again by the schema
            raise SuiteError(file, unread + problems, lines, set_paths)
    try:
        suite = Suite.model_validate(data)
    except ValidationError as e:
        # Go on past the schema's errors to what can still be checked (env ids, hyperparameters).
        raise SuiteError(file, unread + _problems_from_pydantic(e) + unvalidated_problems(data), lines,
                         set_paths) from None
    n_cells = len(suite.envs) * len(suite.algorithms) * len(suite.seed_list)
    if n_cells > MAX_CELLS:
        raise SuiteError(file, [Problem("seeds", f"the grid has {len(suite.envs)} envs × {len(suite.algorithms)} "
                                                 f"algorithms × {len(suite.seed_list)} seeds = {n_cells:,} cells; "
                                                 f"allowed: at most {MAX_CELLS:,}")], lines)
    problems: list[Problem] = list(unread)
    cells, env_meta, plugins = _expand(suite, problems)
    if suite.tune is not None:
        problems.extend(check_tune(suite, {**PARAMS, **{n: p.params for n, p in plugins.items()}}))
    if suite.race is not None:
        problems.extend(check_race(suite))
    if suite.claim is not None:
        names = {a.algo for a in suite.algorithms} | {a.display for a in suite.algorithms}
        for i, ex in enumerate(suite.claim.expect):
            for side in (ex.a, ex.b):
                if side not in names:
                    problems.append(Problem(f"claim.expect[{i}]", f"{side!r} is neither an algorithm nor a label of this "
                                            f"suite; allowed: {', '.join(sorted(names))}", ex.line, True))
    if problems:
        raise SuiteError(file, problems, lines, set_paths)
    if sets:
        cells = [replace(c, overrides=_reaching(sets, suite, c)) for c in cells]
    return LoadedSuite(suite=suite, path=file, cells=cells, env_meta=env_meta, plugins=plugins, overrides=sets)


def _reaching(sets: tuple[Override, ...], suite: Suite, cell: Cell) -> tuple[str, ...]:
    """The overrides that can change ``cell``: those under its own ``algorithms[j]`` and ``envs[i]``, and
    every one elsewhere (defaults, seeds, ...)."""
    out = []
    for o in sets:
        head, idx = o.parts[0], o.parts[1] if len(o.parts) > 1 else None
        if head == "algorithms" and isinstance(idx, int) and idx < len(suite.algorithms):
            if suite.algorithms[idx].display != cell.label:
                continue
        elif head == "envs" and isinstance(idx, int) and idx < len(suite.envs):
            if suite.envs[idx].key != cell.env_id:
                continue
        out.append(o.text)
    return tuple(out)


def _expand(suite: Suite, problems: list[Problem]) -> tuple[list[Cell], dict[str, dict[str, Any]], dict[str, Any]]:
    # Imported here: the env registry pulls in gymnasium, which the schema alone does not need.
    from bench import envs
    from bench.algos.hyperparams import key_view, resolve

    env_meta: dict[str, dict[str, Any]] = {}
    seen_ids: dict[str, int] = {}  # env key → its envs[i]
    keys: list[str | None] = []  # envs[i] → its env key (None where it is unusable)
    for i, e in enumerate(suite.envs):
        path = f"envs[{i}]"
        keys.append(None)
        try:
            ek = e.key
        except ValueError as err:
            problems.append(Problem(f"{path}.kwargs", str(err)))
            continue
        if len(ek) > MAX_LABEL:
            problems.append(Problem(f"{path}.kwargs", f"the env's key {ek[:40]}… is {len(ek)} characters with its "
                                    f"kwargs; allowed: at most {MAX_LABEL}"))
            continue
        if ek in seen_ids:
            what = "with the same kwargs " if e.kwargs else ""
            problems.append(Problem(f"{path}.id", f"listed twice {what}(also envs[{seen_ids[ek]}])", e.id, True))
            continue
        seen_ids[ek] = i
        if (unknown := env_id_problem(path, ek, e.id)) is not None:
            problems.append(unknown)
            continue
        try:
            spec = envs.get_spec(ek)
            facts = envs.space_facts(ek) if e.traits is not None else {}
            obs_problem = envs.obs_supported(ek)
        except (KeyError, ValueError) as err:
            where = f"{path}.kwargs" if e.kwargs else f"{path}.id"
            problems.append(Problem(where, f"cannot be used: {err}", e.id if not e.kwargs else None, not e.kwargs))
            continue
        if obs_problem is not None:
            problems.append(Problem(f"{path}.id", obs_problem, e.id, True))
            continue
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
                continue
            meta.update(declared)
            meta["traits_declared"] = sorted(declared)  # so reports can say which traits the suite stated
        env_meta[ek] = meta
        keys[i] = ek

    labels: dict[str, int] = {}
    plugins: dict[int, Any] = {}  # algorithms[j] → its loaded bench.algos.plugins.Plugin
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
        if a.impl == "sb3":
            for where, block in [("hyperparams", a.hyperparams)] + [
                (f"env_hyperparams.{k}", v) for k, v in a.env_hyperparams.items()
            ]:
                if block.get("ent_schedule", "constant") != "constant":
                    problems.append(Problem(f"{path}.{where}.ent_schedule",
                                            "Stable-Baselines3 has no entropy-coefficient schedule; allowed for "
                                            "impl sb3: constant", block["ent_schedule"], True))
                if a.algo == "trpo" and block.get("kl_action_dims", "mean") != "mean":
                    problems.append(Problem(f"{path}.{where}.kl_action_dims",
                                            "sb3-contrib's TRPO averages the KL over action dimensions; allowed for "
                                            "impl sb3: mean", block["kl_action_dims"], True))
        if a.impl in ("sb3", "numpy"):
            for where, block in [("hyperparams", a.hyperparams)] + [
                (f"env_hyperparams.{k}", v) for k, v in a.env_hyperparams.items()
            ]:
                for key in (BENCH_ONLY if a.impl == "sb3" else NUMPY_UNUSED):
                    if key in block:
                        problems.append(
                            Problem(f"{path}.{where}.{key}", "only the project's own implementations (impl: bench) use this"
                                    + ("" if a.impl == "sb3" else "; the NumPy REINFORCE is a linear policy without "
                                                                  "torch"), block[key], True)
                        )
        env_names = list(seen_ids) + [e.id for e in suite.envs if e.id not in seen_ids]
        for env_key in a.env_hyperparams:
            if env_key not in env_names:
                problems.append(
                    Problem(
                        f"{path}.env_hyperparams.{env_key}",
                        f"not an env of this suite; allowed: {', '.join(env_names) or 'none'} (an id applies to all "
                        "its kwargs variants)",
                    )
                )

    for j, a in enumerate(suite.algorithms):
        for i, e in enumerate(suite.envs):
            mode = e.vec_env or suite.defaults.vec_env
            where = f"envs[{i}].vec_env" if e.vec_env else "defaults.vec_env"
            if mode != "sync" and a.impl == "python":
                problems.append(Problem(where, f"a plugin (algorithms[{j}], impl python) steps its own envs; allowed for "
                                               f"{a.display}: sync", mode, True))
            elif mode == "async" and a.algo == "a3c":
                problems.append(Problem(where, f"A3C's workers are daemon processes, which cannot start async envs' "
                                               f"subprocesses (algorithms[{j}]); allowed for a3c: sync, vector, envpool",
                                        mode, True))
        for where, block in [("hyperparams", a.hyperparams)] + [
            (f"env_hyperparams.{k}", v) for k, v in a.env_hyperparams.items()
        ]:
            if "vec_env" in block:
                problems.append(Problem(f"algorithms[{j}].{where}.vec_env", "env stepping is set per env, the same "
                                        "for every implementation; allowed: envs[i].vec_env or defaults.vec_env",
                                        block["vec_env"], True))

    # Cells are resolved past the problems above, for every env and entry that can still be resolved, so
    # that a bad hyperparameter value shows in the same pass as an unknown env beside it.
    cells: list[Cell] = []
    for j, a in enumerate(suite.algorithms):
        if a.impl == "python" and j not in plugins:
            continue  # its plugin did not load (named above): nothing to resolve it with
        usable = [i for i, e in enumerate(suite.envs) if keys[i] is not None
                  and (e.timesteps or suite.defaults.timesteps) is not None]
        if not usable:  # every env is named above as unusable: what its hyperparameters show alone
            problems.extend(hyperparam_problems(j, a.model_dump()))
        for i in usable:
            e, ek = suite.envs[i], keys[i]
            assert ek is not None
            # A variant's own entry wins over its id's (which applies to every variant of the id).
            over = a.env_overrides(e)
            over_name = ek if ek in a.env_hyperparams else e.id
            plugin = plugins.get(j)
            spec = plugin.spec(a.algo) if plugin is not None else ALGOS[a.algo]
            mode = e.vec_env or suite.defaults.vec_env
            # Only a mode other than sync enters the hyperparameters (and hence the key): sync is a late default.
            stepping = {"vec_env": mode} if mode != "sync" else {}
            try:
                # A plugin has no zoo layer: its model's defaults, then the suite's values.
                params = (plugin.params.model_validate({**a.hyperparams, **over}) if plugin is not None
                          else resolve(a.algo, ek, {**a.hyperparams, **stepping}, over))
            except ValidationError as err:
                for p in _problems_from_pydantic(err):
                    key = p.path.split(".")[0] if p.path else ""
                    if key and key in over:
                        where = f"algorithms[{j}].env_hyperparams.{over_name}.{p.path}"
                    elif key and key in a.hyperparams:
                        where = f"algorithms[{j}].hyperparams.{p.path}"
                    else:
                        where = f"algorithms[{j}].hyperparams"
                    msg = p.message
                    if p.message.startswith("unknown key"):
                        model = spec.params
                        msg = (f"unknown hyperparameter for {a.algo}; allowed: {', '.join(model.model_fields)}"
                               f"{did_you_mean(key, model.model_fields)}")
                    problems.append(Problem(where, f"{msg} [for {ek}]" if not key else msg, p.value, p.has_value))
                continue
            resolved = key_view(params)
            timesteps = e.timesteps or suite.defaults.timesteps
            assert timesteps is not None
            if a.impl == "bench" and resolved.get("kernel") == "numpy" and (
                    env_meta[ek]["obs"] == "pixels" or resolved.get("device") != "cpu"):
                where = (f"algorithms[{j}].env_hyperparams.{over_name}.kernel" if "kernel" in over
                         else f"algorithms[{j}].hyperparams.kernel")
                why = f"{ek} has pixel observations" if env_meta[ek]["obs"] == "pixels" \
                    else f"device is {resolved.get('device')}"
                problems.append(Problem(where, f"the NumPy kernel needs an MLP policy on the CPU, and {why}; "
                                               f"allowed here: auto, torch", "numpy", True))
                continue
            if env_meta[ek]["action"] not in spec.actions:
                # One grid holds DQN beside SAC and TD3: each algorithm runs on the envs it can act in
                # (an entry that can act in none is refused below).
                continue
            facts = CellFacts(algo=a.algo, label=a.display, env=ek, action=env_meta[ek]["action"],
                              obs=env_meta[ek]["obs"], timesteps=timesteps, hyperparams=resolved)
            refusal = next((r for r in (check(facts) for check in spec.checks) if r is not None), None)
            if refusal is not None:
                if refusal.at == "env":
                    problems.append(Problem(f"envs[{i}].id", refusal.message, e.id, True))
                else:
                    src = f"envs[{i}].timesteps" if e.timesteps else "defaults.timesteps"
                    problems.append(Problem(src, refusal.message, refusal.value, True))
                continue
            if resolved.get("use_sde") and env_meta[ek]["action"] != "continuous":
                where = (f"algorithms[{j}].env_hyperparams.{over_name}.use_sde" if "use_sde" in over
                         else f"algorithms[{j}].hyperparams.use_sde")
                problems.append(Problem(where, f"gSDE needs continuous actions, and {ek}'s are "
                                               f"{env_meta[ek]['action']}; allowed here: false", True, True))
                continue
            if resolved.get("policy") == "sequence" and not envs.is_sequence_task(ek):
                where = (f"algorithms[{j}].env_hyperparams.{over_name}.policy" if "policy" in over
                         else f"algorithms[{j}].hyperparams.policy")
                problems.append(Problem(where, f"{ek} is not a sequence task; policy sequence reads tokens; allowed "
                                               "here: mlp (sequence tasks: bench/Sort-v0, bench/Add-v0, "
                                               "bench/Preference-v0)", "sequence", True))
                continue
            if a.impl == "numpy" and env_meta[ek]["obs"] == "pixels":
                problems.append(Problem(f"algorithms[{j}].impl", f"the pure-NumPy REINFORCE is a linear policy on vector "
                                        f"observations, and {ek} has pixel observations; allowed here: impl bench",
                                        "numpy", True))
                continue
            ev = e.eval or suite.defaults.eval
            save = a.save or suite.defaults.save
            save_at = f"algorithms[{j}].save" if a.save else "defaults.save"
            if save == "best" and ev is None:
                problems.append(Problem(save_at, f"best keeps the policy at the best periodic evaluation, and "
                                        f"{a.display} on {ek} has none; allowed: final, or set defaults.eval or "
                                        f"envs[{i}].eval", save, True))
                continue
            if save != "none" and resolved.get("policy") == "sequence":
                problems.append(Problem(save_at, f"a sequence policy ({a.display} on {ek}) is built from its task's "
                                        "SFT reference, which a saved policy does not carry; allowed here: none",
                                        save, True))
                continue
            wall = a.max_wall_minutes if a.max_wall_minutes is not None else suite.defaults.max_wall_minutes
            for seed in suite.seed_list:
                cell = Cell(
                    suite=suite.name,
                    env_id=ek,
                    algo=a.algo,
                    impl=a.impl,
                    label=a.display,
                    seed=seed,
                    timesteps=timesteps,
                    threshold=env_meta[ek]["threshold"],
                    window=e.window or suite.defaults.window,
                    eval=ev.model_dump() if ev else None,
                    hyperparams=resolved,
                    params=params,
                    spec=spec,
                    resources=merge_resources(a.resources, e.resources),
                    diag_points=suite.defaults.diag_points,
                    cpu_seconds=e.cpu_seconds if e.cpu_seconds is not None else suite.defaults.cpu_seconds,
                    entry=plugin.entry if plugin is not None else None,
                    plugin_version=plugin.version if plugin is not None else None,
                    save=save,
                    checkpoint_every=a.checkpoint_every or suite.defaults.checkpoint_every,
                    max_wall_minutes=wall or None,  # 0: no limit
                    max_memory_mb=a.max_memory_mb if a.max_memory_mb is not None else suite.defaults.max_memory_mb,
                    time_scale_us=env_meta[ek].get("time_scale_us"),
                )
                if wall is None:  # the suite sets none: the default, from the run's estimated CPU time
                    default = default_wall_minutes(cell, cell.time_scale_us)
                    cell = replace(cell, max_wall_minutes=default, wall_limit_default=default is not None)
                cells.append(_with_key(cell))
    for j, a in enumerate(suite.algorithms):
        acts = ALGOS[a.algo].actions if a.algo in ALGOS and a.impl != "python" else ()
        need = " or ".join(acts)
        # Refused for what it acts in, not for having no cells: another problem (a budget, a kernel) can leave
        # an entry without cells in a suite whose envs it does act in.
        if acts and env_meta and not any(m["action"] in acts for m in env_meta.values()) and not any(
                p.path.startswith(f"algorithms[{j}]") for p in problems):
            kinds = sorted({m["action"] for m in env_meta.values()})
            problems.append(Problem(f"algorithms[{j}].algo", f"{a.algo} acts in {need} action spaces, and this suite's "
                                    f"envs have {' and '.join(kinds)} actions only; allowed for {a.algo}: a suite with "
                                    f"an env of {need} actions", a.algo, True))
    problems.extend(_same_cells(suite.algorithms, cells))
    return [] if problems else cells, env_meta, {suite.algorithms[j].algo: p for j, p in plugins.items()}


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
