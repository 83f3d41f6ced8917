"""A suite file's schema: its bounds and the pydantic models a suite validates against (extra keys forbidden).

Which algorithms and implementations a suite may name is read from the registry
(:data:`bench.algos.registry.ALGOS`); the trait values from :mod:`bench.envs.traits`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from bench.algos.registry import ALGOS, names
from bench.suites.problems import SeedsMixin
from bench.suites.race import RaceSpec
from bench.suites.spaces import TuneSpec
from bench.envs.traits import Action, Obs, Reward

#: Hyperparameters only the project's own implementations understand.
BENCH_ONLY = ("grad_noise_chunks", "kernel", "policy", "kl_coef", "kl_in", "critic")
#: What the pure-NumPy REINFORCE does not use (it has no network: see bench.algos.reinforce.reinforce_numpy).
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
    checkpoint_every: int | None = Field(
        None, gt=0, le=MAX_TIMESTEPS,
        description="Save a run's training state every this many env steps (at the end of an update), beside the "
                    "store's saved policies, so that a run killed midway continues from it with the returns it would "
                    "have had (the project's own algorithms, A3C excepted: docs/recorded.md); off when absent. Not "
                    "part of the cell key.",
    )
    diag_points: int = Field(
        DIAG_POINTS, ge=0, le=1_000_000,
        description="Per-update diagnostics are stored as at most this many points per key per run, each the mean "
                    "over its stretch of updates (the stretch's length is stored too); 0 keeps every update.",
    )
    max_wall_minutes: float | None = Field(
        None, ge=0, le=MAX_WALL_MINUTES, allow_inf_nan=False,
        description="A run still going after this many wall-clock minutes is stopped and recorded as failed "
                    "(\"stopped: wall-clock limit of 10 min reached\"); 0: no limit. Unset: 20 times the run's "
                    "estimated CPU time from its env's time scale, at least 60 min (none where the env has no time "
                    "scale). Not part of the cell key.",
    )
    max_memory_mb: int | None = Field(
        None, gt=0, le=MAX_MEMORY_MB,
        description="A run whose worker (with its child processes) holds more than this many MiB resident is "
                    "stopped and recorded as failed, naming the limit. Not part of the cell key.",
    )


class Traits(_Strict):
    """An env's problem profile, as a suite states it; each field left out is inferred (``bench envs``)."""

    action: Action | None = Field(
        None, description="Must agree with the action space (Discrete or Box).")
    obs: Obs | None = Field(
        None, description="pixels needs an image-like Box observation (2 or more dimensions), sequence a "
                          "MultiDiscrete one (token ids); it sets the profile in reports, while the networks are "
                          "still chosen from the observation space (and policy: sequence).")
    reward: Reward | None = Field(
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
                      description=f"A registered algorithm ({' | '.join(names('on'))}; off-policy reference points, "
                                  f"impl sb3 only: {' | '.join(names('off'))}), or the name of a plugin (impl: python).")
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
    checkpoint_every: int | None = Field(None, gt=0, le=MAX_TIMESTEPS,
                                         description="Overrides defaults.checkpoint_every for this label's runs.")
    max_wall_minutes: float | None = Field(None, ge=0, le=MAX_WALL_MINUTES, allow_inf_nan=False,
                                           description="Overrides defaults.max_wall_minutes for this entry's runs "
                                                       "(0: no limit).")
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
    race: RaceSpec | None = Field(
        None, description="Race the labels on the suite's one env with `bench race SUITE.yaml` (docs/race.md): rung by "
                          "rung, those the statistics rule out stop; `bench run` refuses such a file with a hint.")
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
