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

import hashlib
import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from bench.suites.overrides import Override, OverrideError, apply_overrides, parse_override
from bench.suites.problems import Problem, SeedsMixin
from bench.suites.spaces import TuneSpec, check_tune

ALGOS = ("reinforce", "ac_mc", "ac_td", "a2c", "a3c", "npg", "trpo", "ppo", "grpo", "rloo", "dqn", "sac", "td3")
IMPLS = ("bench", "sb3", "numpy")
#: Which implementations exist for each algorithm. SB3 and sb3-contrib have no REINFORCE, NPG, A3C
#: or GRPO; AC-MC and AC-TD are names for the project's own modules (see bench.algos.MODULES);
#: ``numpy`` is the pure-NumPy REINFORCE (bench.algos.reinforce_numpy).
AVAILABLE: dict[str, tuple[str, ...]] = {
    "reinforce": ("bench", "numpy"),
    "ac_mc": ("bench",),
    "ac_td": ("bench",),
    "a3c": ("bench",),
    "grpo": ("bench",),
    "rloo": ("bench",),
    "a2c": ("bench", "sb3"),
    "npg": ("bench",),
    "trpo": ("bench", "sb3"),
    "ppo": ("bench", "sb3"),
    # Off-policy reference points (bench.algos.offpolicy_params): SB3's only, never the project's answers.
    "dqn": ("sb3",),
    "sac": ("sb3",),
    "td3": ("sb3",),
}
#: The action space each off-policy algorithm acts in (SB3's DQN is discrete-only, SAC and TD3 continuous-only).
OFF_POLICY_ACTIONS = {"dqn": "discrete", "sac": "continuous", "td3": "continuous"}
#: Why an implementation is missing, where there is more to say than the allowed list.
_MISSING: dict[tuple[str, str], str] = {
    ("reinforce", "sb3"): "Stable-Baselines3 has no REINFORCE",
    ("npg", "sb3"): "Stable-Baselines3 and sb3-contrib have no NPG",
    ("a3c", "sb3"): "Stable-Baselines3 has no A3C",
    ("grpo", "sb3"): "Stable-Baselines3 has no GRPO",
    ("rloo", "sb3"): "Stable-Baselines3 has no RLOO",
    ("ac_mc", "sb3"): "Stable-Baselines3 has no REINFORCE with a value baseline (ac_mc)",
    ("ac_td", "sb3"): "ac_td is the project's name for one-env A2C; for SB3 use algo a2c with n_envs 1",
    **{(a, i): f"bench has no {a.upper()} of its own: off-policy algorithms are SB3's reference points"
       for a in ("dqn", "sac", "td3") for i in ("bench", "numpy")},
}
#: Hyperparameters only the project's own implementations understand.
BENCH_ONLY = ("grad_noise_chunks", "kernel", "policy", "kl_coef", "kl_in", "critic")
#: What the pure-NumPy REINFORCE does not use (it has no network: see bench.algos.reinforce_numpy).
NUMPY_UNUSED = ("grad_noise_chunks", "kernel", "device", "net_arch", "activation", "ortho_init")
#: Bumped whenever what a key covers changes, so old runs are never mistaken for new ones.
KEY_VERSION = 1
#: Default stored points per diagnostics key per run (see ``defaults.diag_points``).
DIAG_POINTS = 500

# What a suite file may hold. The integer and length bounds are what both store
# backends hold (PostgreSQL enforces them; a suite beyond them used to fail at
# registration, after the SQLite file had been created).
#: Largest suite file read (suites are a few KB).
MAX_FILE_BYTES = 1_000_000
#: Deepest nesting of mappings and lists (a suite needs 5).
MAX_DEPTH = 20
#: Most YAML nodes with aliases expanded (the largest shipped suite has about 100).
MAX_NODES = 20_000
#: Longest string anywhere in a suite, and longest label and env id (columns of 128 characters).
MAX_STRING = 10_000
MAX_LABEL = 128
#: A budget is 64-bit on both backends, a window 32-bit (seeds: bench.suites.problems.MAX_SEED).
MAX_TIMESTEPS = 2**63 - 1
MAX_INT32 = 2**31 - 1
#: Most cells one suite may expand into.
MAX_CELLS = 100_000
#: Largest per-run limits a suite may set (``max_wall_minutes``: one year; ``max_memory_mb``: 1 PiB).
MAX_WALL_MINUTES = 525_600
MAX_MEMORY_MB = 2**30


# --------------------------------------------------------------------------- #
# Schema (pydantic, extra keys forbidden)
# --------------------------------------------------------------------------- #
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EvalSpec(_Strict):
    """Periodic evaluation of the deterministic policy on a separate environment."""

    every: int = Field(gt=0, le=MAX_TIMESTEPS, description="Evaluate each time this many env steps have passed.")
    episodes: int = Field(5, gt=0, le=MAX_INT32, description="Episodes per evaluation.")


class Resources(_Strict):
    """What one run of a cell asks a Ray cluster for (``bench run --executor ray``).

    Scheduling only: resources are not part of a cell's key, because they change
    where a run goes, not what it does. The local process pool ignores them (one
    cell per worker process, ``--workers`` of them).
    """

    num_cpus: float | None = Field(None, gt=0, description="CPUs reserved per run (Ray `num_cpus`); default 1.")
    num_gpus: float | None = Field(
        None, ge=0, description="GPUs reserved per run (Ray `num_gpus`, fractions allowed); default 0. Pair with hyperparams device: cuda."
    )


def merge_resources(*parts: Resources | None) -> dict[str, float]:
    """Field by field, the largest of the requests given; unset fields fall back to 1 CPU, 0 GPUs.

    A cell is an algorithm on an env and needs what either asks for (the env may
    need CPUs for many Atari emulators, the algorithm a GPU), so the larger
    value wins rather than one side overriding the other.
    """
    out = {"num_cpus": 1.0, "num_gpus": 0.0}
    for name in out:
        asked = [getattr(p, name) for p in parts if p is not None and getattr(p, name) is not None]
        if asked:
            out[name] = float(max(asked))
    return out


#: Env stepping modes (bench.envs.vector.VEC_ENV_MODES; a test keeps the two equal).
VecEnvMode = Literal["sync", "async", "vector", "envpool"]
#: Which policies a run keeps (``defaults.save``, ``algorithms[j].save``): none, the one after its last update,
#: or also the one at its best periodic evaluation (bench.run.saving).
SaveMode = Literal["none", "final", "best"]


class Defaults(_Strict):
    """Values every env inherits unless it sets its own."""

    timesteps: int | None = Field(None, gt=0, le=MAX_TIMESTEPS, description="Training budget in env steps (agent steps for Atari).")
    cpu_seconds: float | None = Field(
        None, gt=0, le=1e9, allow_inf_nan=False,
        description="An equal-compute budget: a run also stops, at the end of an update, once its training process "
                    "has used this many CPU seconds (whichever of timesteps and cpu_seconds comes first).",
    )
    window: int = Field(
        20,
        gt=0,
        le=MAX_INT32,
        description="Episodes in the trailing mean used for threshold crossing and final return.",
    )
    eval: EvalSpec | None = Field(None, description="Periodic deterministic evaluation; off by default.")
    vec_env: VecEnvMode = Field(
        "sync",
        description="How every implementation steps the training envs: sync (in-process, one after another), async "
                    "(subprocesses), vector (the env's NumPy-vectorised implementation, Gymnasium's "
                    "vector_entry_point: CartPole), envpool (envpool's C++ envs; its dynamics may differ). A "
                    "value other than sync is part of the cell key.",
    )
    save: SaveMode = Field(
        "none",
        description="Keep trained policies beside the store for `bench eval` and `bench.api.load_policy`: none, "
                    "final (after the last update) or best (also the one at the best periodic evaluation; needs "
                    "eval). Not part of the cell key: saving changes nothing a run computes.",
    )
    diag_points: int = Field(
        DIAG_POINTS, ge=0, le=1_000_000,
        description="Per-update diagnostics are stored as at most this many points per key per run, each the mean "
                    "over its stretch of updates (the stretch's length is stored too); 0 keeps every update.",
    )
    max_wall_minutes: float | None = Field(
        None, gt=0, le=MAX_WALL_MINUTES, allow_inf_nan=False,
        description="A run still going after this many wall-clock minutes is stopped and recorded as failed "
                    "(\"stopped: wall-clock limit of 10 min reached\"). Not part of the cell key.",
    )
    max_memory_mb: int | None = Field(
        None, gt=0, le=MAX_MEMORY_MB,
        description="A run whose worker (with its child processes) holds more than this many MiB resident is "
                    "stopped and recorded as failed, naming the limit. Not part of the cell key.",
    )


class Traits(_Strict):
    """An env's problem profile, as a suite states it; each field left out is inferred (``bench envs``)."""

    action: Literal["discrete", "continuous"] | None = Field(
        None, description="Must agree with the action space (Discrete or Box).")
    obs: Literal["vector", "pixels", "sequence"] | None = Field(
        None, description="pixels needs an image-like Box observation (2 or more dimensions), sequence a "
                          "MultiDiscrete one (token ids); it sets the profile in reports, while the networks are "
                          "still chosen from the observation space (and policy: sequence).")
    reward: Literal["dense", "sparse"] | None = Field(
        None, description="Sparsity cannot be read off a space; inferred envs count as dense unless this says sparse.")
    horizon: int | None = Field(None, gt=0, le=MAX_INT32, description="Agent steps per episode at most; must equal "
                                "the env's time limit when it has one (change that with kwargs max_episode_steps).")


class EnvEntry(_Strict):
    """One environment of the grid."""

    id: str = Field(min_length=1, max_length=MAX_LABEL,
                    description="A Gymnasium id; `bench envs` lists the registry, any registered id works, and "
                                "`module:EnvId` imports `module` first (for an env your package registers).")
    kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments for `gym.make` (JSON values). They are part of the env's key "
                    "(`LunarLander-v3[continuous=true]`), so each variant is its own env in the store and reports.",
    )
    traits: Traits | None = Field(None, description="State or override the traits inference cannot see (checked "
                                                    "against the env's spaces where they can be).")
    threshold: float | None = Field(None, allow_inf_nan=False,
                                    description="Return that counts as solved (a finite number); required outside the registry.")
    timesteps: int | None = Field(None, gt=0, le=MAX_TIMESTEPS, description="Budget for this env; overrides defaults.timesteps.")
    cpu_seconds: float | None = Field(None, gt=0, le=1e9, allow_inf_nan=False, description="Overrides defaults.cpu_seconds.")
    window: int | None = Field(None, gt=0, le=MAX_INT32, description="Overrides defaults.window.")
    time_scale_us: float | None = Field(
        None, gt=0, le=1e9, allow_inf_nan=False,
        description="CPU microseconds per env step that fix this env's time axis in reports (horizon = budget × "
                    "time_scale_us); the registry has measured values for some envs (`bench envs`).",
    )
    eval: EvalSpec | None = Field(None, description="Overrides defaults.eval.")
    vec_env: VecEnvMode | None = Field(None, description="Overrides defaults.vec_env.")
    resources: Resources | None = Field(None, description="Ray resources per run on this env; not part of the key.")


    @property
    def key(self) -> str:
        """The env's key: its id, with its kwargs in brackets when it has any (:func:`bench.envs.env_key`).

        :raises ValueError: a kwargs name or value that cannot be in a key (suite validation reports it).
        """
        from bench.envs.registry import env_key  # lazy: the schema alone does not need gymnasium

        return env_key(self.id, self.kwargs)

    @field_validator("id")
    @classmethod
    def _plain_id(cls, v: str) -> str:
        if re.search(r"[\x00-\x1f\x7f]", v):
            raise ValueError("control characters are not allowed in an env id")
        if "[" in v or "]" in v:
            raise ValueError("brackets are not allowed in an env id; allowed: the id alone, with gym.make arguments "
                             "under kwargs: (bench writes the key LunarLander-v3[continuous=true] itself)")
        return v


class AlgoEntry(_Strict):
    """One algorithm implementation of the grid."""

    impl: Literal["bench", "sb3", "numpy", "python"] = Field(
        description="`bench`: the project's own; `sb3`: Stable-Baselines3 / sb3-contrib; `numpy`: the pure-NumPy "
                    "REINFORCE (reinforce only); `python`: a plugin (see `entry`)."
    )
    algo: str = Field(min_length=1, max_length=32, pattern=r"^[a-z][a-z0-9_]*$",
                      description="A built-in algorithm (reinforce | ac_mc | ac_td | a2c | a3c | npg | trpo | ppo | "
                                  "grpo | rloo; off-policy reference points, impl sb3 only: dqn | sac | td3), or the "
                                  "name of a plugin (impl: python).")
    entry: str | None = Field(
        None, min_length=1, max_length=300,
        description="impl python: the plugin's `module.path:function`; without it, the entry point named `algo` "
                    "in the group `bench.algorithms` of an installed package.",
    )
    label: str | None = Field(None, min_length=1, max_length=MAX_LABEL, pattern=r"^[^\x00-\x1f\x7f]*$",
                              description="Display name (no control characters); defaults to `<algo>-<impl>`.")
    hyperparams: dict[str, Any] = Field(
        default_factory=dict, description="SB3 / rl-baselines3-zoo names (see bench/algos/hyperparams.py)."
    )
    env_hyperparams: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-env overrides, keyed by env id."
    )
    resources: Resources | None = Field(None, description="Ray resources per run of this algorithm; not part of the key.")
    save: SaveMode | None = Field(None, description="Overrides defaults.save for this label (none | final | best).")
    max_wall_minutes: float | None = Field(None, gt=0, le=MAX_WALL_MINUTES, allow_inf_nan=False,
                                           description="Overrides defaults.max_wall_minutes for this entry's runs.")
    max_memory_mb: int | None = Field(None, gt=0, le=MAX_MEMORY_MB,
                                      description="Overrides defaults.max_memory_mb for this entry's runs.")

    def env_overrides(self, env: EnvEntry) -> dict[str, Any]:
        """This entry's ``env_hyperparams`` for ``env``: keyed by its key (one kwargs variant) before its id (all)."""
        return self.env_hyperparams.get(env.key, self.env_hyperparams.get(env.id, {}))

    @field_validator("algo")
    @classmethod
    def _builtin_or_plugin(cls, v: str, info: ValidationInfo) -> str:
        # impl is declared (so validated) first: whether a name is allowed depends on it.
        impl = info.data.get("impl")
        if impl == "python" and v in ALGOS:
            raise ValueError(f"{v} is a built-in algorithm; give a plugin (impl: python) its own name, not one of "
                             f"{', '.join(ALGOS)}")
        if impl is not None and impl != "python" and v not in ALGOS:
            raise ValueError(f"unknown algorithm; allowed: {', '.join(ALGOS)}, or a plugin's own name with impl: python")
        return v

    @property
    def display(self) -> str:
        return self.label or f"{self.algo}-{self.impl}"


#: What a claim's expectation can compare, by the name a suite writes (see :mod:`bench.analysis.claims`).
CLAIM_MEASURES = ("sample efficiency", "time efficiency", "final performance", "success rate", "final return",
                  "CPU seconds per million steps", "gradient noise", "model memory", "exact match", "reward hacking")
_EXPECTATION = re.compile(r"^\s*(\S+)\s*([<>≈~])\s*(\S+)\s+on\s+(.+?)\s*$")


class Expectation(_Strict):
    """``A > B on MEASURE``: A's measure is higher than B's (``<``: lower; ``≈`` or ``~``: equivalent within
    a margin of 0.05, for measures on a 0-1 scale). Written as that one line."""

    a: str
    op: Literal[">", "<", "≈"]
    b: str
    measure: Literal[CLAIM_MEASURES]  # type: ignore[valid-type]

    @model_validator(mode="before")
    @classmethod
    def _from_line(cls, v: Any) -> Any:
        if not isinstance(v, str):
            return v
        m = _EXPECTATION.match(v)
        if not m:
            raise ValueError(f"{v!r} is not an expectation; write `A > B on MEASURE`, `A < B on MEASURE` or "
                             "`A ≈ B on MEASURE`")
        if m.group(4) not in CLAIM_MEASURES:
            raise ValueError(f"{v!r}: unknown measure {m.group(4)!r}; allowed: {', '.join(CLAIM_MEASURES)}")
        return {"a": m.group(1), "op": "≈" if m.group(2) in "≈~" else m.group(2), "b": m.group(3), "measure": m.group(4)}

    @property
    def line(self) -> str:
        return f"{self.a} {self.op} {self.b} on {self.measure}"


class Claim(_Strict):
    """A claim from the literature that the suite's runs test (``bench report``'s claims section).

    Each expectation is one line, ``A > B on MEASURE`` or ``A < B on MEASURE``: A and B are
    algorithms (their implementations pooled) or labels of this suite, MEASURE one of
    :data:`CLAIM_MEASURES`.
    """

    text: str = Field(min_length=1, max_length=500, description="The claim, quoted or paraphrased in one line.")
    source: str | None = Field(None, max_length=500, description="Where the claim comes from.")
    expect: list[Expectation] = Field(min_length=1, description="One line each: `A > B on MEASURE` or `A < B on MEASURE`.")


class Suite(SeedsMixin, _Strict):
    """A benchmark suite: environments × algorithms × seeds."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)
    description: str | None = Field(None, max_length=MAX_STRING)
    seeds: list[int] | int = Field(description="A list of seeds, or n meaning 0..n-1.")
    defaults: Defaults = Field(default_factory=Defaults)
    envs: list[EnvEntry] = Field(min_length=1)
    algorithms: list[AlgoEntry] = Field(min_length=1)
    tune: TuneSpec | None = Field(
        None, description="Hyperparameter tuning for `bench tune SUITE.yaml` (see bench/suites/spaces.py); ignored by `bench run`."
    )
    claim: Claim | None = Field(None, description="A claim this suite's runs test; `bench report` gives its verdict.")
    variant: str | None = Field(
        None, min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$",
        description="Names a variant of other suites' runs (`bench tune --export` writes `tuned`): its labels are "
                    "shown beside theirs in the report's own section, and kept out of the answers by algorithm.")


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a suite file (printed by ``bench schema``)."""
    schema = Suite.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "bench suite"
    return schema


# --------------------------------------------------------------------------- #
# Errors: one line per problem
# --------------------------------------------------------------------------- #
class SuiteError(Exception):
    """One or more problems with a suite file; ``lines`` has one line each."""

    def __init__(self, file: str, problems: list[Problem], lines_of: dict[str, int] | None = None,
                 overridden: Iterable[str] = ()):
        self.file = file
        self.problems = problems
        seen: set[str] = set()
        self.lines: list[str] = []
        set_paths = tuple(overridden)
        for p in problems:
            if p.path and any(p.path == o or p.path.startswith((o + ".", o + "[")) for o in set_paths):
                where = f"{file}: --set"  # the value came from the command line: named as it was given there
            else:
                where = f"{file}:{_line_for(p.path, lines_of or {})}:" if p.path else f"{file}:"
            got = f" (got {_show(p.value)})" if p.has_value else ""
            text = one_line(f"{where} {p.path + ': ' if p.path else ''}{p.message}{got}")
            if text not in seen:
                seen.add(text)
                self.lines.append(text)
        super().__init__("\n".join(self.lines))


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with control characters and line breaks escaped (``\\r``, ``\\x00``): one line, whatever a key held."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


def _show(value: Any) -> str:
    s = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return s if len(s) <= 80 else s[:77] + "..."


_LAST_PART = re.compile(r"(\.[^.\[]+|\[\d+\])$")


def _line_for(path: str, lines_of: dict[str, int]) -> str:
    # A missing key is reported at the line of its nearest ancestor in the file.
    p = path
    while p:
        if p in lines_of:
            return str(lines_of[p])
        q = _LAST_PART.sub("", p)
        if q == p:
            break
        p = q
    return str(lines_of.get("", 1))


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


# --------------------------------------------------------------------------- #
# YAML with line numbers and duplicate-key detection
# --------------------------------------------------------------------------- #
def _malformed(file: str, e: yaml.YAMLError) -> SuiteError:
    mark = getattr(e, "problem_mark", None)
    line = mark.line + 1 if mark is not None else 1
    what = getattr(e, "problem", None) or str(e).splitlines()[0]
    return SuiteError(file, [Problem("", f"line {line}: malformed YAML: {what}")])


def _check_shape(text: str, file: str) -> None:
    """Nesting and node count from the event stream: linear, and no recursion (PyYAML's composer recurses)."""
    depth = nodes = 0
    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise SuiteError(file, [Problem("", f"line {ev.start_mark.line + 1}: nested {depth} levels deep; "
                                                        f"allowed: at most {MAX_DEPTH}")])
            elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if isinstance(ev, yaml.NodeEvent):
                nodes += 1
                if nodes > MAX_NODES:
                    raise SuiteError(file, [Problem("", f"line {ev.start_mark.line + 1}: more than {MAX_NODES:,} "
                                                        f"YAML nodes; allowed: at most {MAX_NODES:,}")])
    except yaml.YAMLError as e:
        raise _malformed(file, e) from None


def _children(n: yaml.Node) -> list[yaml.Node]:
    if isinstance(n, yaml.MappingNode):
        return [x for kv in n.value for x in kv]
    if isinstance(n, yaml.SequenceNode):
        return list(n.value)
    return []


def _check_aliases(root: yaml.Node, file: str) -> None:
    """Size and depth of the document with its aliases expanded, computed on the alias graph
    (each node once, iteratively), so a "billion laughs" costs microseconds, not gigabytes."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        n, leaving = stack.pop()
        k = id(n)
        if leaving:
            kids = _children(n)
            size[k] = 1 + sum(size[id(c)] for c in kids)
            height[k] = 1 + max((height[id(c)] for c in kids), default=0)
            continue
        if k in size:
            continue
        if k in height:  # entered and not left: an alias inside the node it refers to
            raise SuiteError(file, [Problem("", f"line {n.start_mark.line + 1}: a YAML alias refers to a node that "
                                                "contains it (recursive YAML); allowed: aliases of finished nodes only")])
        height[k] = -1  # entered
        stack.append((n, True))
        for c in _children(n):
            if id(c) not in size:
                if height.get(id(c)) == -1:
                    raise SuiteError(file, [Problem("", f"line {c.start_mark.line + 1}: a YAML alias refers to a node "
                                                        "that contains it (recursive YAML); allowed: aliases of finished nodes only")])
                stack.append((c, False))
    if size[id(root)] > MAX_NODES:
        raise SuiteError(file, [Problem("", f"its YAML aliases expand to {size[id(root)]:,} nodes; allowed: at most "
                                            f"{MAX_NODES:,} (aliases are for sharing a block, not for multiplying it)")])
    if height[id(root)] > MAX_DEPTH:
        raise SuiteError(file, [Problem("", f"its YAML aliases expand to {height[id(root)]} levels of nesting; "
                                            f"allowed: at most {MAX_DEPTH}")])


def _check_values(data: Any) -> list[Problem]:
    """Every string printable by the terminal and storable by both backends, every number finite and 64-bit."""
    problems: list[Problem] = []
    stack: list[tuple[str, Any]] = [("", data)]
    while stack and len(problems) < 20:
        path, v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(k, str) and (why := _bad_string(k)):
                    problems.append(Problem(path or "", f"a key {why}", _show_key(k), True))
                    continue
                stack.append((_join(path, k), x))
        elif isinstance(v, list):
            stack.extend((_join(path, i), x) for i, x in enumerate(v))
        elif isinstance(v, str) and (why := _bad_string(v)):
            problems.append(Problem(path, why, _show_key(v), True))
        elif isinstance(v, bool):
            pass
        elif isinstance(v, int) and abs(v) > MAX_TIMESTEPS:
            problems.append(Problem(path, f"integer out of range; allowed: -{MAX_TIMESTEPS:,} to {MAX_TIMESTEPS:,} "
                                          "(64 bits, what the store holds)", v, True))
        elif isinstance(v, float) and not math.isfinite(v):
            problems.append(Problem(path, "not a finite number; allowed: a finite number", v, True))
    return problems


def _bad_string(v: str) -> str | None:
    if len(v) > MAX_STRING:
        return f"string of {len(v):,} characters; allowed: at most {MAX_STRING:,}"
    if "\x00" in v:
        return "string contains a NUL character; allowed: text without NUL (PostgreSQL cannot store it)"
    if any("\ud800" <= ch <= "\udfff" for ch in v):
        return "string contains a lone UTF-16 surrogate (a \\ud800-\\udfff escape); allowed: valid Unicode text"
    return None


def _show_key(v: str) -> str:
    return v.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")[:60]


def _read_yaml(text: str, file: str) -> tuple[Any, dict[str, int]]:
    _check_shape(text, file)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        raise _malformed(file, e) from None
    if node is None:
        raise SuiteError(file, [Problem("", "the file is empty; a suite needs name, seeds, envs and algorithms")])
    _check_aliases(node, file)
    lines: dict[str, int] = {}
    dups: list[Problem] = []

    def walk(n: yaml.Node, path: str) -> None:
        lines[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            seen: set[str] = set()
            for k, v in n.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                child = _join(path, key)
                if key in seen:
                    dups.append(Problem(child, "duplicate key (YAML would silently keep only the last one)"))
                seen.add(key)
                walk(v, child)
                lines[child] = k.start_mark.line + 1  # the key's line, not its value's
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                walk(v, _join(path, i))

    walk(node, "")
    if dups:
        raise SuiteError(file, dups, lines)
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, OverflowError) as e:  # e.g. a timestamp out of range
        if isinstance(e, yaml.YAMLError):
            raise _malformed(file, e) from None
        raise SuiteError(file, [Problem("", f"a value cannot be read: {e}")]) from None
    if problems := _check_values(data):
        raise SuiteError(file, problems, lines)
    return data, lines


# --------------------------------------------------------------------------- #
# Cells
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class Outputs:
    """Where a run writes besides the store, as ``bench run``'s options say; never part of a key.

    :param policies: the folder of saved policies (``--artifacts``); ``None``: beside a SQLite store
        (``results/bench.db`` → ``results/bench.policies``), else ``results/policies``.
    :param tensorboard: mirror the run's scalars to TensorBoard event files under this folder (``--tensorboard``).
    :param wandb: mirror them to this Weights & Biases project (``--wandb``).
    """

    policies: str | None = None
    tensorboard: str | None = None
    wandb: str | None = None


@dataclass(frozen=True)
class Cell:
    """One run to do: an (env, algorithm, seed) point of the grid, fully resolved."""

    suite: str
    env_id: str
    algo: str
    impl: str
    label: str
    seed: int
    timesteps: int
    threshold: float | None
    window: int
    eval: dict[str, int] | None
    hyperparams: dict[str, Any] = field(hash=False)
    key: str = ""
    #: Stored diagnostics points per key (0 = every update); in the key only when not the default.
    diag_points: int = DIAG_POINTS
    #: Equal-compute budget in training CPU seconds (``None``: env steps only); in the key only when set.
    cpu_seconds: float | None = None
    #: impl python: the plugin's ``module:function`` and its package version, in the key when set.
    entry: str | None = None
    plugin_version: str | None = None
    #: Ray scheduling request (``num_cpus``, ``num_gpus``); deliberately not in :meth:`identity`.
    resources: dict[str, float] = field(default_factory=lambda: merge_resources(), hash=False, compare=False)
    #: Which policies to keep (:data:`SaveMode`); deliberately not in :meth:`identity`: saving reads the policy
    #: and changes nothing the run computes or records, so a run is the same experiment with it on or off.
    save: str = field(default="none", compare=False)
    #: Where the run's files go besides the store (``bench run``'s options); not in :meth:`identity` either.
    outputs: Outputs = field(default_factory=Outputs, compare=False)
    #: Per-run limits (:mod:`bench.run.limits`), enforced by every executor; not in :meth:`identity` either: they
    #: decide whether a run may finish, not what it does, so setting them keeps every key.
    max_wall_minutes: float | None = field(default=None, compare=False)
    max_memory_mb: int | None = field(default=None, compare=False)
    #: The ``--set`` overrides (as typed) that reach this cell, for its run's provenance. Not in
    #: :meth:`identity`: what an override changes (a budget, a hyperparameter) is already there, so one
    #: that changes the experiment changes the key and one that does not (a description) leaves it.
    overrides: tuple[str, ...] = field(default=(), hash=False, compare=False)

    def identity(self) -> dict[str, Any]:
        """What the key covers: everything that changes what the run does or records."""
        return {
            "v": KEY_VERSION,
            "env_id": self.env_id,
            "algo": self.algo,
            "impl": self.impl,
            "hyperparams": self.hyperparams,
            "seed": self.seed,
            "timesteps": self.timesteps,
            "threshold": self.threshold,
            "window": self.window,
            "eval": self.eval,
            # Only when it differs from the default, so adding the option left every existing key as it was.
            **({"diag_points": self.diag_points} if self.diag_points != DIAG_POINTS else {}),
            **({"cpu_seconds": self.cpu_seconds} if self.cpu_seconds is not None else {}),
            **({"entry": self.entry, "plugin_version": self.plugin_version} if self.entry is not None else {}),
        }


def cell_key(identity: dict[str, Any]) -> str:
    """Stable hash of a cell's identity (sorted JSON, SHA-256, 20 hex digits)."""
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class LoadedSuite:
    suite: Suite
    path: str
    cells: list[Cell]
    #: Per env key: threshold and its source, traits, time scale, for the store (report anchors, profiles).
    env_meta: dict[str, dict[str, Any]]
    #: The suite's plugins (impl: python), loaded: algorithm name → :class:`bench.algos.plugins.Plugin`.
    plugins: dict[str, Any] = field(default_factory=dict)
    #: The command line's ``--set PATH=VALUE`` overrides, applied before validation (:mod:`.overrides`).
    overrides: tuple[Override, ...] = ()


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #
_PYDANTIC_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "missing required key",
}


def _allowed_keys(model: type[BaseModel]) -> str:
    return ", ".join(model.model_fields)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the last key of ``loc`` (for 'allowed keys' hints)."""
    model: Any = Suite
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        f = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if f is None:
            return None
        ann = f.annotation
        inner = getattr(ann, "__args__", None) or (ann,)
        nxt = next((a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if nxt is None:
            # list[Model]
            for a in inner:
                for b in getattr(a, "__args__", ()) or ():
                    if isinstance(b, type) and issubclass(b, BaseModel):
                        nxt = b
            if nxt is None:
                return None
        model = nxt
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _problems_from_pydantic(err: ValidationError, prefix: str = "", owner: type[BaseModel] | None = None) -> list[Problem]:
    out: list[Problem] = []
    for e in err.errors(include_url=False):
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and ("[" in p or p in ("int", "list[int]"))))
        path = prefix
        for part in loc:
            path = _join(path, part)
        msg = _PYDANTIC_MESSAGES.get(e["type"], e["msg"])
        if e["type"] == "string_pattern_mismatch" and str(e.get("ctx", {}).get("pattern", "")).startswith("^[^\\x00-\\x1f"):
            msg = "control characters are not allowed; allowed: printable text"  # the pattern, in words
        if e["type"] == "extra_forbidden":
            model = owner if owner is not None else _model_at(loc)
            if model is not None:
                last = loc[-1] if loc else ""
                msg += f"; allowed: {_allowed_keys(model)}{did_you_mean(str(last), model.model_fields)}"
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        msg = msg[0].lower() + msg[1:] if msg else msg
        has_value = e["type"] != "missing"
        out.append(Problem(path, msg, e.get("input"), has_value))
    return out


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
    data, lines = _read_yaml(text, file)
    if not isinstance(data, dict):
        raise SuiteError(
            file, [Problem("", f"a suite must be a mapping with name, seeds, envs and algorithms, not a {type(data).__name__}")]
        )
    try:
        sets = tuple(parse_override(o) for o in overrides)
    except OverrideError as e:
        raise SuiteError(file, [Problem("", str(e))]) from None
    set_paths = [o.path for o in sets]
    if sets:
        if bad := apply_overrides(data, list(sets)):
            raise SuiteError(file, bad, lines, set_paths)
        if problems := _check_values(data):
            raise SuiteError(file, problems, lines, set_paths)
    try:
        suite = Suite.model_validate(data)
    except ValidationError as e:
        # Go on past the schema's errors to what can still be checked, so that one pass names them all.
        raise SuiteError(file, _problems_from_pydantic(e) + _unvalidated_problems(data), lines, set_paths) from None
    n_cells = len(suite.envs) * len(suite.algorithms) * len(suite.seed_list)
    if n_cells > MAX_CELLS:
        raise SuiteError(file, [Problem("seeds", f"the grid has {len(suite.envs)} envs × {len(suite.algorithms)} "
                                                 f"algorithms × {len(suite.seed_list)} seeds = {n_cells:,} cells; "
                                                 f"allowed: at most {MAX_CELLS:,}")], lines)
    problems: list[Problem] = []
    cells, env_meta, plugins = _expand(suite, problems)
    if suite.tune is not None:
        from bench.algos.hyperparams import PARAMS

        problems.extend(check_tune(suite, {**PARAMS, **{n: p.params for n, p in plugins.items()}}))
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


def _unvalidated_problems(data: dict[str, Any]) -> list[Problem]:
    """What can be checked of a suite the schema refused: the hyperparameter names of each algorithm
    entry (an unknown algorithm elsewhere must not hide a typo such as ``learning_rat``), each against
    its algorithm's names, or against every algorithm's where its own is unknown. The schema's own
    checks stay the schema's; this adds only what it cannot see (hyperparameters are free-form there)."""
    from bench.algos.hyperparams import PARAMS

    problems: list[Problem] = []
    algos = data.get("algorithms")
    for j, a in enumerate(algos if isinstance(algos, list) else []):
        if not isinstance(a, dict) or a.get("impl") == "python":
            continue  # a plugin's names are its own model's, checked once it loads
        algo = a.get("algo")
        names = list(PARAMS[algo].model_fields) if isinstance(algo, str) and algo in PARAMS else \
            sorted({n for m in PARAMS.values() for n in m.model_fields})
        blocks = [("hyperparams", a.get("hyperparams"))]
        env_hp = a.get("env_hyperparams")
        if isinstance(env_hp, dict):
            blocks += [(f"env_hyperparams.{k}", v) for k, v in env_hp.items()]
        for where, block in blocks:
            for key in block if isinstance(block, dict) else []:
                if isinstance(key, str) and key not in names:
                    whose = f"for {algo}" if isinstance(algo, str) and algo in PARAMS else "for any algorithm"
                    problems.append(Problem(f"algorithms[{j}].{where}.{key}",
                                            f"unknown hyperparameter {whose}; allowed: {', '.join(names)}"
                                            f"{did_you_mean(key, names)}"))
    return problems


def did_you_mean(word: str, allowed: Iterable[str]) -> str:
    """``"; did you mean X?"`` for the closest of ``allowed`` to a mistyped ``word`` (difflib), else ``""``."""
    import difflib

    near = difflib.get_close_matches(word, list(allowed), n=1, cutoff=0.6)
    return f"; did you mean {near[0]}?" if near else ""


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
        try:
            exists = envs.env_exists(ek)
        except KeyError as err:  # the module of module:EnvId cannot be imported
            problems.append(Problem(f"{path}.id", str(err.args[0]), e.id, True))
            continue
        if not exists:
            extra = envs.missing_extra(ek)
            if extra is not None:
                problems.append(Problem(f"{path}.id", extra, e.id, True))
                continue
            near = envs.close_matches(ek)
            hint = f"did you mean {', '.join(near)}? " if near else ""
            problems.append(
                Problem(
                    f"{path}.id",
                    f"unknown environment; {hint}allowed: a registered Gymnasium id (`bench envs` lists the built-in "
                    "registry), or module:EnvId for an env that your module registers",
                    e.id,
                    True,
                )
            )
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
        elif a.impl not in AVAILABLE[a.algo]:
            why = _MISSING.get((a.algo, a.impl)) or (
                "impl numpy is the pure-NumPy REINFORCE only" if a.impl == "numpy" else None)
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

    if problems:
        return [], env_meta, {}

    cells: list[Cell] = []
    for j, a in enumerate(suite.algorithms):
        for i, e in enumerate(suite.envs):
            ek = keys[i]
            assert ek is not None  # no problems so far: every env has its key
            # A variant's own entry wins over its id's (which applies to every variant of the id).
            over = a.env_overrides(e)
            over_name = ek if ek in a.env_hyperparams else e.id
            plugin = plugins.get(j)
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
                        from bench.algos.hyperparams import PARAMS

                        model = plugin.params if plugin is not None else PARAMS[a.algo]
                        msg = (f"unknown hyperparameter for {a.algo}; allowed: {', '.join(model.model_fields)}"
                               f"{did_you_mean(key, model.model_fields)}")
                    problems.append(Problem(where, f"{msg} [for {ek}]" if not key else msg, p.value, p.has_value))
                continue
            resolved = key_view(params)
            timesteps = e.timesteps or suite.defaults.timesteps
            assert timesteps is not None
            # Off-policy algorithms have no rollout: their unit is one training phase, train_freq steps per env.
            per_env = "train_freq" if a.algo in OFF_POLICY_ACTIONS else "n_steps"
            rollout = int(resolved.get("n_envs", 1)) * int(resolved.get(per_env, 1))
            if timesteps < rollout:
                src = f"envs[{i}].timesteps" if e.timesteps else "defaults.timesteps"
                what = "one training phase" if per_env == "train_freq" else "one rollout"
                problems.append(
                    Problem(
                        src,
                        f"budget is smaller than {what} of {a.display} on {ek} "
                        f"(n_envs × {per_env} = {rollout}); allowed: >= {rollout}",
                        timesteps,
                        True,
                    )
                )
                continue
            if a.impl == "bench" and resolved.get("kernel") == "numpy" and (
                    env_meta[ek]["obs"] == "pixels" or resolved.get("device") != "cpu"):
                where = (f"algorithms[{j}].env_hyperparams.{over_name}.kernel" if "kernel" in over
                         else f"algorithms[{j}].hyperparams.kernel")
                why = f"{ek} has pixel observations" if env_meta[ek]["obs"] == "pixels" \
                    else f"device is {resolved.get('device')}"
                problems.append(Problem(where, f"the NumPy kernel needs an MLP policy on the CPU, and {why}; "
                                               f"allowed here: auto, torch", "numpy", True))
                continue
            need = OFF_POLICY_ACTIONS.get(a.algo)
            if need is not None and env_meta[ek]["action"] != need:
                # One grid holds DQN beside SAC and TD3: each off-policy algorithm runs on the envs it can act in
                # (an entry that can act in none is refused below).
                continue
            if need is not None and env_meta[ek]["obs"] == "pixels":
                problems.append(Problem(f"envs[{i}].id", f"{a.algo} ({a.display}) runs on vector observations only "
                                        f"(a replay buffer of frames does not fit the reference's machines), and {ek} "
                                        "has pixel observations; allowed: a vector env", e.id, True))
                continue
            if need is not None and timesteps <= int(resolved.get("learning_starts", 0)):
                src = f"envs[{i}].timesteps" if e.timesteps else "defaults.timesteps"
                problems.append(Problem(src, f"budget ends before {a.display} takes its first gradient step on {ek} "
                                        f"(learning_starts = {resolved['learning_starts']}); allowed: > "
                                        f"{resolved['learning_starts']}", timesteps, True))
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
                    resources=merge_resources(a.resources, e.resources),
                    diag_points=suite.defaults.diag_points,
                    cpu_seconds=e.cpu_seconds if e.cpu_seconds is not None else suite.defaults.cpu_seconds,
                    entry=plugin.entry if plugin is not None else None,
                    plugin_version=plugin.version if plugin is not None else None,
                    save=save,
                    max_wall_minutes=(a.max_wall_minutes if a.max_wall_minutes is not None
                                      else suite.defaults.max_wall_minutes),
                    max_memory_mb=a.max_memory_mb if a.max_memory_mb is not None else suite.defaults.max_memory_mb,
                )
                cells.append(_with_key(cell))
    for j, a in enumerate(suite.algorithms):
        need = OFF_POLICY_ACTIONS.get(a.algo)
        if need is not None and env_meta and not any(c.label == a.display for c in cells) and not any(
                p.path.startswith(f"algorithms[{j}]") for p in problems):
            kinds = sorted({m["action"] for m in env_meta.values()})
            problems.append(Problem(f"algorithms[{j}].algo", f"{a.algo} acts in {need} action spaces, and this suite's "
                                    f"envs have {' and '.join(kinds)} actions only; allowed for {a.algo}: a suite with "
                                    f"an env of {need} actions", a.algo, True))
    problems.extend(_same_cells(suite.algorithms, cells))
    return cells, env_meta, {suite.algorithms[j].algo: p for j, p in plugins.items()}


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


def _with_key(cell: Cell) -> Cell:
    from dataclasses import replace

    return replace(cell, key=cell_key(cell.identity()))


# --------------------------------------------------------------------------- #
# --only filters
# --------------------------------------------------------------------------- #
FILTER_KEYS = ("env", "algo", "impl", "label", "seed")


def parse_only(text: str | None) -> dict[str, set[str]]:
    """Parse ``env=CartPole-v1,algo=ppo`` (repeat a key for alternatives). Raises ValueError."""
    out: dict[str, set[str]] = {}
    if not text:
        return out
    for part in text.split(","):
        if "=" not in part:
            raise ValueError(f"--only: {part!r} is not key=value; allowed keys: {', '.join(FILTER_KEYS)}")
        k, v = (s.strip() for s in part.split("=", 1))
        if k not in FILTER_KEYS:
            raise ValueError(f"--only: unknown key {k!r}; allowed keys: {', '.join(FILTER_KEYS)}")
        out.setdefault(k, set()).add(v)
    return out


def matches_only(only: dict[str, set[str]], values: dict[str, Any]) -> bool:
    """Does a point with these ``values`` (key → its value: env, algo, impl, label, seed) match every key
    of ``only`` (any of its values)? The one rule of ``bench run --only`` and ``bench tune --only``."""

    def names(k: str) -> set[str]:
        v = str(values[k])
        # env=LunarLander-v3 picks every kwargs variant of the id (a key with kwargs holds commas,
        # which --only cannot spell); env=<the whole key> picks one.
        return {v, v.split("[", 1)[0]} if k == "env" else {v}

    return all(names(k) & vs for k, vs in only.items())


def select(cells: list[Cell], only: dict[str, set[str]]) -> list[Cell]:
    """Cells matching every given key (any of its values)."""
    return [c for c in cells if matches_only(only, {"env": c.env_id, "algo": c.algo, "impl": c.impl,
                                                    "label": c.label, "seed": c.seed})]
