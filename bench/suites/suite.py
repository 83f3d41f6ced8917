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
from typing import Sequence

from pydantic import ValidationError

from bench.algos.registry import ALGOS, AVAILABLE, IMPLS, OFF_POLICY_ACTIONS, PARAMS, names
from bench.suites.cells import FILTER_KEYS, Cell, LoadedSuite, Outputs, cell_key, matches_only, parse_only, select
from bench.suites.errors import (
    SuiteError,
    _check_values,
    _problems_from_pydantic,
    _read_yaml,
    did_you_mean,
    one_line,
)
from bench.suites.expand import expand
from bench.suites.overrides import Override, OverrideError, apply_overrides, parse_override
from bench.suites.partial import unvalidated_problems
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
    cells, env_meta, plugins = expand(suite, problems)
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
