"""The read model: one command's read of a store or a pack set, each table read once, as frames, and
:class:`Data`, what the analysis reads from it (:func:`load`).

A command (``bench report``, ``bench recommend``, ``bench parity``, an export) opens one
:class:`ReadModel` and passes it to every section that reads: the main scores, each variant suite's
section, each claim suite, the published-number rows. The first section to ask for a table reads it
through the reader (:func:`bench.storage.packread.open_reader`: SQLAlchemy for a store, pyarrow for packs);
later sections get the frame kept here, cut to what they ask for. So the store is opened once, its
engine disposed once (:meth:`ReadModel.close`), and no SQL is written outside the storage layer.

It answers the reader's own read methods (``suite_names``, ``suite_specs``, ``suite_env_metas``,
``env_facts``, ``anchors``, ``runs_frame``, ``episodes_for``, ``diagnostics_for``,
``last_evaluations``), so :func:`bench.analysis.scoring.load` reads from either. Per-run tables
(episodes, diagnostics) are kept per run key: a second request reads only the runs not read yet.
Nothing is written to disk: the cache is this process's memory, for this command only.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from bench.analysis.criteria import COLLAPSE_DIAGNOSTICS, DIAGNOSTICS, OFF_POLICY, SEQUENCE_DIAGNOSTICS
from bench.analysis.provenance import PROBE_CLASS_KEY, probe_classes
from bench.envs.anchors import stored_anchors
from bench.storage.packread import open_reader, owned
# One rule: the analysis reads a run's CPU budget as the run layer does.
from bench.storage.vocabulary import cpu_budget

__all__ = ["AnchorSource", "Data", "ReadModel", "load", "read_model", "suite_specs", "variant_suites"]

_EPISODES = ["key", "step", "wall_s", "cpu_s", "ret"]
_DIAGNOSTICS = ["key", "step", "name", "value"]


# --------------------------------------------------------------------------- #
# The store, read once per command
# --------------------------------------------------------------------------- #
class ReadModel:
    """The store or packs at ``source`` (a URL, or an open reader), read once per table. It only reads: it has no
    method that writes, and nothing here runs an env (missing anchors are the run layer's: :func:`load`).

    :param source: a store URL, a ``packs:FOLDER`` URL, or a reader already open (then not disposed here).
    Use as a context manager, or call :meth:`close`.
    """

    readonly = True

    def __init__(self, source: Any):
        self.reader = open_reader(source)
        self._owned = owned(source)
        self._small: dict[Any, Any] = {}
        self._runs: dict[str | None, pd.DataFrame] = {}
        # One frame per read, never concatenated: a second section's runs are read apart, and a section that
        # asks for the runs of one read gets that frame itself (the main read holds millions of rows).
        self._episodes: list[_Part] = []
        self._episode_keys: set[str] = set()
        self._diagnostics: list[_Part] = []
        self._diagnostic_keys: dict[str, set[str]] = {}
        self._evaluations: dict[str, float] = {}
        self._evaluation_keys: set[str] = set()

    def __enter__(self) -> "ReadModel":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        """Dispose of the reader this model opened (its engine, a pack set's temporary studies store)."""
        if self._owned:
            self.reader.dispose()
            self._owned = False

    dispose = close

    @property
    def url(self) -> str:
        return self.reader.url

    # -- small tables ---------------------------------------------------------
    def _once(self, name: Any, read):
        if name not in self._small:
            self._small[name] = read()
        return self._small[name]

    def suite_names(self) -> list[str]:
        return list(self._once("names", self.reader.suite_names))

    def suite_specs(self) -> dict[str, dict[str, Any]]:
        return self._once("specs", self.reader.suite_specs)

    def suite_env_metas(self, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        names = list(names)
        have = self._once("env_metas", dict)
        if missing := [n for n in names if n not in have]:
            have.update(self.reader.suite_env_metas(missing))
        return {n: have[n] for n in names if n in have}

    def env_facts(self) -> dict[str, dict[str, Any]]:
        return self._once("env_facts", self.reader.env_facts)

    def anchors(self) -> dict[tuple[str, float, int, int], Any]:
        return self._once("anchors", self.reader.anchors)

    def runs_frame(self, suite: str | None = None) -> pd.DataFrame:
        if suite not in self._runs:
            self._runs[suite] = self.reader.runs_frame(suite)
        return self._runs[suite].copy()

    # -- per-run tables, kept per run key -------------------------------------
    def episodes_for(self, keys: Sequence[str]) -> pd.DataFrame:
        """``key, step, wall_s, cpu_s, ret`` of the runs ``keys``, each run's episodes in order."""
        if missing := [k for k in dict.fromkeys(keys) if k not in self._episode_keys]:
            self._episodes.append(_Part(self.reader.episodes_for(missing), set(missing)))
            self._episode_keys.update(missing)
        want = set(keys)
        for part in self._episodes:
            if part.keys == want:
                return part.frame  # the runs of one read (the common case: one read): no copy
        parts = [part.rows(want) for part in self._episodes if part.keys & want]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=_EPISODES)

    def diagnostics_for(self, keys: Sequence[str], names: Sequence[str]) -> pd.DataFrame:
        """``key, step, name, value`` of the runs ``keys`` for the diagnostics ``names``, in stored order."""
        new = {n: [k for k in dict.fromkeys(keys) if k not in self._diagnostic_keys.get(n, ())] for n in names}
        if want := sorted({n for n, ks in new.items() if ks}):
            ks = list(dict.fromkeys(k for n in want for k in new[n]))
            got = self.reader.diagnostics_for(ks, want)
            # A (key, name) read before is dropped from the new read, so no row is kept twice.
            for n in want:
                if len(got) and (again := self._diagnostic_keys.get(n, set()) & set(ks)):
                    got = got[~((got["name"] == n) & got["key"].isin(list(again)))].reset_index(drop=True)
            self._diagnostics.append(_Part(got, set(ks), set(want)))
            for n in want:
                self._diagnostic_keys.setdefault(n, set()).update(ks)
        wanted, named = set(keys), set(names)
        parts = [p.rows(wanted) for p in self._diagnostics if p.keys & wanted and p.names & named]
        if not parts:
            return pd.DataFrame(columns=_DIAGNOSTICS)
        d = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        if any(not p.names <= named for p in self._diagnostics if p.keys & wanted):
            d = d[d["name"].isin(list(names))].reset_index(drop=True)
        return d

    def last_evaluations(self, keys: list[str]) -> dict[str, float]:
        """Run key → its last periodic evaluation's mean return, for those of ``keys`` that have one."""
        if missing := [k for k in dict.fromkeys(keys) if k not in self._evaluation_keys]:
            self._evaluations.update(self.reader.last_evaluations(missing))
            self._evaluation_keys.update(missing)
        return {k: self._evaluations[k] for k in keys if k in self._evaluations}

    # -- the tuner's studies --------------------------------------------------
    def has_studies(self) -> bool:
        return bool(self._once("has_studies", self.reader.has_studies))

    def studies(self) -> list:
        """The tuner's studies (Optuna's, read-only), read once per model."""
        return self._once("studies", self.reader.studies)

    def sensitivity(self, read) -> Any:
        """``read(self)``'s table (the tuner's sensitivity summary), read once per model."""
        return self._once("sensitivity", lambda: read(self))


@contextmanager
def read_model(source: Any) -> Iterator[ReadModel]:
    """``source`` as a read model: itself where it is one (a section given its command's model), else one
    opened on it (a URL or a reader) and closed on leaving."""
    if isinstance(source, ReadModel):
        yield source
        return
    with ReadModel(source) as model:
        yield model


class _Part:
    """The frame of one read of a per-run table, the run keys it was read for (and the diagnostic names).
    The rows of some of its runs are found through its key column as integer codes, factorised on first
    use: a NumPy lookup instead of a string match over millions of rows for every later section."""

    def __init__(self, frame: pd.DataFrame, keys: set[str], names: set[str] | None = None):
        self.frame, self.keys, self.names = frame, keys, names or set()
        self._codes: np.ndarray | None = None
        self._code_of: dict[str, int] = {}

    def rows(self, keys: set[str]) -> pd.DataFrame:
        """The rows of the runs ``keys``, in the frame's order (the frame itself where it holds no other run)."""
        if self.keys <= keys:
            return self.frame
        if self._codes is None:
            codes, uniques = pd.factorize(self.frame["key"])
            self._codes, self._code_of = codes, {k: i for i, k in enumerate(uniques)}
        take = np.zeros(len(self._code_of) + 1, dtype=bool)  # the last slot: factorize's -1 (a missing key)
        take[np.fromiter((self._code_of[k] for k in keys if k in self._code_of), dtype=np.intp)] = True
        return self.frame[take[self._codes]].reset_index(drop=True)


# --------------------------------------------------------------------------- #
# What the analysis reads: the runs compared, their episodes, traits and anchors
# --------------------------------------------------------------------------- #
@dataclass
class Data:
    """What the report needs from the store.

    :param runs: every run of the chosen suites, once per key (first suite wins
        for the label), with ``meta`` parsed to a dict and a ``pooled`` flag (the
        done runs of each env's comparison budget and threshold).
    :param episodes: columns ``key, step, wall_s, cpu_s, ret`` of pooled runs, in order
        (``cpu_s`` NaN for runs recorded before per-episode CPU seconds were).
    :param diagnostics: columns ``key, step, name, value`` (the names in :data:`DIAGNOSTICS`).
    :param traits: env id → ``action, obs, reward, family, threshold, time_scale_us``.
    :param anchors: env id → :class:`bench.envs.anchors.Anchor` at the env's comparison threshold.
    :param budgets: env id → the comparison budget in env steps.
    :param cpu_budgets: env id → the equal-compute budget in training CPU seconds (a suite's
        ``cpu_seconds``), for the envs whose compared runs had one: there runs stop at whichever budget
        comes first, so they are compared at equal compute (:func:`score`).
    :param sensitivity: the tuner's sensitivity table, or ``None`` when there is none.
    :param notes: what the reader must know (runs set aside, missing anchors or time scales).
    """

    store_url: str
    suites: list[str]
    runs: pd.DataFrame
    episodes: pd.DataFrame
    diagnostics: pd.DataFrame
    traits: dict[str, dict[str, Any]]
    anchors: dict[str, Any]
    budgets: dict[str, int] = field(default_factory=dict)
    sensitivity: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    cpu_budgets: dict[str, float] = field(default_factory=dict)
    #: env id → the budget at which its off-policy runs (:data:`OFF_POLICY`) are compared, pooled apart from the
    #: rest (``runs["pooled_off"]``): they never count in ``pooled`` nor move ``budgets``, so the table's answers
    #: are the same with and without them (:mod:`bench.analysis.offpolicy` sets them beside the answers).
    off_budgets: dict[str, int] = field(default_factory=dict)
    #: env id → why it has no normalised scores (no threshold, no anchor, or a threshold the random policy
    #: already meets), for every compared env that has none.
    unanchored: dict[str, str] = field(default_factory=dict)


def suite_specs(db: Any) -> dict[str, dict[str, Any]]:
    """Every suite in the store ``db`` (a :class:`bench.storage.store.Store` or a pack set) → its stored spec."""
    return db.suite_specs()


def variant_suites(source: Any) -> dict[str, str]:
    """The store's variant suites (``variant:``, e.g. each one's best after equal tuning) → their variant.
    ``source``: a store URL, or an open reader (:func:`bench.storage.packread.open_reader`)."""
    with read_model(source) as db:  # a URL: a short read, no connection left open on the store
        specs = suite_specs(db)
    return {n: str(s["variant"]) for n, s in sorted(specs.items()) if s.get("variant") and not s.get("claim")}


#: What computes the anchors a store lacks: ``(reader, thresholds, log, families) → env id → Anchor``, where
#: ``reader`` is the store or pack set being read. The run layer's :func:`bench.run.anchors.for_reading` is the one
#: bench uses; the api passes it in, so this package never plays an env nor writes.
AnchorSource = Callable[[Any, dict[str, Any], Any, dict[str, Any]], dict[str, Any]]


def load(source: Any, suites: Iterable[str] | None = None, *, anchors: bool | AnchorSource = False,
         diagnostics: Iterable[str] | None = None, log: Callable[[str], None] | None = None,
         sensitivity: bool = True) -> Data:
    """Read runs, episodes, diagnostics, env traits and anchors of ``suites`` (default: all but the
    suites that test a claim, see below), once, as frames.

    :param source: a store URL (SQLite or PostgreSQL, read through SQLAlchemy), a ``packs:FOLDER`` URL,
        or a reader already open (a command's :class:`bench.analysis.readmodel.ReadModel`, whose frames are
        read once for all its sections; a :class:`bench.storage.packread.PackSet` or :class:`bench.storage.store.Store`):
        packs are read straight from their Parquet files. Every query is the reader's own: no SQL here.
    :param anchors: where the normalisation anchors come from: the store's (``False``, or ``True``, which
        before issue 65 also computed missing ones here), or an :data:`AnchorSource` that computes and stores
        those the store lacks (:func:`bench.run.anchors.for_reading`: a few seconds of random play per env,
        stored once; a pack set keeps them for this read only). The api passes the latter.
    :param diagnostics: the diagnostic names to read (default: every one the report uses,
        :data:`DIAGNOSTICS`, :data:`COLLAPSE_DIAGNOSTICS` and :data:`SEQUENCE_DIAGNOSTICS`). Fewer
        is faster: :func:`score` reads none, the recommendation table only the sequence tasks'.
    :param sensitivity: read the tuner's studies (the decision matrix's sensitivity criterion; the
        recommendation table does not use them).
    :raises KeyError: a named suite is not in the store.
    """
    diag_names = list(DIAGNOSTICS + COLLAPSE_DIAGNOSTICS + SEQUENCE_DIAGNOSTICS if diagnostics is None else diagnostics)
    with read_model(source) as db:  # reads only
        return _load(db, suites, anchors=anchors, diag_names=diag_names, log=log, sensitivity=sensitivity)


def _load(db: ReadModel, suites: Iterable[str] | None, *, anchors: bool | AnchorSource, diag_names: list[str],
          log: Callable[[str], None] | None, sensitivity: bool) -> Data:
    """:func:`load`'s stages: the suites, their runs, the envs' traits, the pooled runs, their episodes and
    diagnostics, the anchors."""
    chosen = _chosen_suites(db, suites)
    frames = [db.runs_frame(s) for s in chosen]
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    traits: dict[str, dict[str, Any]] = {}
    for env_meta in db.suite_env_metas(sorted(chosen)).values():
        for env_id, m in env_meta.items():
            traits.setdefault(env_id, m)
    if runs.empty:
        return Data(db.url, chosen, runs, pd.DataFrame(columns=_EPISODES), pd.DataFrame(columns=_DIAGNOSTICS), traits,
                    {})
    runs = _with_meta(runs)
    notes: list[str] = []
    _fill_traits(db, runs, traits, notes)
    off = runs["algo"].isin(OFF_POLICY)
    on_flags, budgets, cpu_budgets = _pool(runs[~off], traits, notes)
    off_flags, off_budgets, _ = _pool(runs[off], traits, notes)
    runs["pooled"] = on_flags.reindex(runs.index, fill_value=False).astype(bool)
    runs["pooled_off"] = off_flags.reindex(runs.index, fill_value=False).astype(bool)
    keys = runs.loc[runs["pooled"] | runs["pooled_off"], "key"].tolist()
    ep = db.episodes_for(keys) if keys else pd.DataFrame(columns=_EPISODES)
    dg = db.diagnostics_for(keys, diag_names) if keys and diag_names else pd.DataFrame(columns=_DIAGNOSTICS)
    thresholds = {e: traits[e].get("threshold") for e in {**off_budgets, **budgets}}
    anch, unanchored = _anchors(db, thresholds, traits, cpu_budgets, anchors, log, notes)
    for e, cpu in cpu_budgets.items():
        notes.append(f"{e}: runs stop at an equal-compute budget of {cpu:,g} training CPU seconds (or "
                     f"{budgets[e]:,} steps, whichever comes first), so it is compared at equal compute: time "
                     f"efficiency over those {cpu:,g} CPU seconds, final performance and success at the end. "
                     "Sample efficiency (over env steps) is not scored there: each algorithm ran as many steps "
                     "as its speed allowed.")
    sens = db.sensitivity(_sensitivity) if sensitivity else None
    return Data(db.url, chosen, runs, ep, dg, traits, anch, budgets, sens, notes, cpu_budgets, off_budgets,
                unanchored)


def _chosen_suites(db: ReadModel, suites: Iterable[str] | None) -> list[str]:
    """The suites read: those named, else every suite but those that test a claim or hold a variant.

    A suite with a claim: block is an experiment (PPO with gae_lambda 0, REINFORCE without a baseline, ...): the
    report's claims section reads it, but its deliberately varied runs must not be pooled into the answers by
    algorithm. Nor may a variant's (`variant: tuned`, each one's best after equal tuning): the answers compare
    algorithms at one effort, the zoo's defaults, and the report sets the variant beside them in a section of its
    own. Named explicitly, either is read like any suite.

    :raises KeyError: a named suite is not in the store.
    """
    names = db.suite_names()
    if suites:
        chosen = list(suites)
    else:
        specs = suite_specs(db)
        chosen = [n for n in names if not specs.get(n, {}).get("claim") and not specs.get(n, {}).get("variant")]
    missing = [s for s in chosen if s not in names]
    if missing:
        raise KeyError(", ".join(missing))
    return chosen


def _with_meta(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs once per key (first suite wins), ``meta`` parsed, each run's machine class in its meta."""
    runs = runs.drop_duplicates("key", keep="first").reset_index(drop=True)
    runs["meta"] = [json.loads(m) if isinstance(m, str) and m else {} for m in runs["meta"]]
    # Machines are told apart over the runs read together (probe_classes), and every reader of a run's
    # hardware (scores, claims, the report's provenance) sees the same class.
    for m, c in zip(runs["meta"], probe_classes(list(runs["meta"]))):
        if c is not None:
            m[PROBE_CLASS_KEY] = c
    return runs


def _fill_traits(db: ReadModel, runs: pd.DataFrame, traits: dict[str, dict[str, Any]], notes: list[str]) -> None:
    """The traits of every env of ``runs`` that its suites' ``env_meta`` lacks, added to ``traits``.

    A store describes its envs (the suites' env_meta, and env_facts recorded by `bench run`), so it is read
    without importing a user's env package; the registry is asked only where a store written before env_facts
    lacks something (a run whose suite row is gone, a time scale measured later)."""
    facts = db.env_facts()
    for env_id in runs["env"].unique():
        if env_id not in traits and env_id in facts:  # a run whose suite row is gone: what the store recorded
            traits[env_id] = dict(facts[env_id])
        elif env_id not in traits and _module_of(env_id):
            # Nor recorded, and a module:EnvId key: reading a store runs none of the modules it names.
            traits[env_id] = dict(threshold=None, action="unknown", obs="unknown", reward="unknown", family="other",
                                  time_scale_us=None)
            notes.append(f"{env_id}: the store records no traits for it, and bench does not import module "
                         f"{_module_of(env_id)!r} that the store names to read them; left out of cross-env scores")
        elif env_id not in traits:  # nor recorded (an old store): the registry, which may build the env
            # Lazy, as in _module_of: only an old store needs the registry (and gymnasium).
            from bench.envs.registry import get_spec

            s = get_spec(env_id)
            traits[env_id] = dict(threshold=s.threshold, action=s.action, obs=s.obs, reward=s.reward, family=s.family,
                                  time_scale_us=s.time_scale_us)
        elif traits[env_id].get("time_scale_us") is None:
            # Registered before the registry measured one: its table, read without building the env.
            from bench.envs.registry import registered_time_scale  # lazy, as in _module_of

            traits[env_id]["time_scale_us"] = registered_time_scale(env_id)


def _anchors(db: ReadModel, thresholds: dict[str, Any], traits: dict[str, dict[str, Any]],
             cpu_budgets: dict[str, float], source: bool | AnchorSource, log: Callable[[str], None] | None,
             notes: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The compared envs' anchors (stored, or from ``source``), and why each env without usable ones has none."""
    families = {e: traits[e].get("family") for e in thresholds}
    anch = (source(db.reader, thresholds, log, families) if callable(source)
            else stored_anchors(db, thresholds, families=families))
    unanchored: dict[str, str] = {}
    for e in thresholds:
        a = anch.get(e)
        if a is None:
            unanchored[e] = "no threshold" if thresholds[e] is None else "no normalisation anchor"
            notes.append(f"{e}: no normalisation anchors, so it is left out of cross-env scores")
        elif not a.threshold > a.random_return:
            unanchored[e] = (f"its anchor's threshold {a.threshold:g} is not above the random policy's return "
                             f"{a.random_return:.4g}")
            notes.append(f"{e}: threshold {a.threshold:g} is not above the random return {a.random_return:g}; "
                         "left out of cross-env scores")
            anch.pop(e)
        elif traits[e].get("time_scale_us") is None and e not in cpu_budgets:
            notes.append(f"{e}: no time scale (time_scale_us), so it has no time-efficiency score; "
                         "set time_scale_us for it in the suite")
    return anch, unanchored


def _module_of(env_id: str) -> str | None:
    """The module of a ``module:EnvId`` env key (``None`` for a plain id), read from the key alone."""
    # Lazy: the registry imports gymnasium, which reading a store (`bench recommend`) does not otherwise load.
    from bench.envs.registry import parse_env_key

    return parse_env_key(env_id)[0]


def _cpu_limit(config: Any) -> float:
    """A run's equal-compute budget in CPU seconds from its stored cell identity (``config``), inf if none."""
    v = cpu_budget(config)
    return v if v is not None else float("inf")


def _pool(runs: pd.DataFrame, traits: dict[str, dict[str, Any]],
          notes: list[str]) -> tuple[pd.Series, dict[str, int], dict[str, float]]:
    """Which runs are compared: done runs with an episode, at each env's comparison budget and threshold.

    The budget is the step budget most of the env's done runs have (ties: the larger), and with it the
    CPU-seconds budget most of those runs have (none counts as the largest; ties: the larger): runs that
    stop at an equal-compute budget are compared only with runs stopped at the same one. One stray run at
    another budget cannot move the comparison (issue 40: a largest-budget rule let one run set aside 70). Returns the pooled flags, env → step budget, and env → CPU-seconds budget
    (only the envs compared at one).
    """
    ok = (runs["status"] == "done") & runs["final_return"].notna()
    pooled = pd.Series(False, index=runs.index)
    budgets: dict[str, int] = {}
    cpu_budgets: dict[str, float] = {}
    cpu = pd.Series([_cpu_limit(c) for c in runs["config"]], index=runs.index, dtype=float) \
        if "config" in runs else pd.Series(np.inf, index=runs.index)
    for env_id, g in runs[ok].groupby("env", sort=True):
        budget = int(_most_runs(g["timesteps"]))
        limit = float(_most_runs(cpu[g.index[g["timesteps"] == budget]]))
        thr = traits[env_id].get("threshold")
        same_thr = g["threshold"].isna() if thr is None else np.isclose(g["threshold"].astype(float), float(thr))
        keep = (g["timesteps"] == budget) & same_thr & (cpu[g.index] == limit)
        pooled[g.index[keep]] = True
        budgets[env_id] = budget
        if np.isfinite(limit):
            cpu_budgets[env_id] = limit
        aside = g[~keep]
        if len(aside):
            why = ", ".join(f"{lb} ({n})" for lb, n in aside.groupby("label").size().items())
            other = sorted({f"budget {int(b):,}" for b in aside["timesteps"] if b != budget}
                           | {f"threshold {t:g}" for t in aside["threshold"].dropna() if thr is None or t != thr}
                           | {f"CPU budget {c:,g} s" if np.isfinite(c) else "no CPU budget"
                              for c in cpu[aside.index] if c != limit})
            at = f"{budget:,} steps" + (f" or {limit:,g} CPU seconds" if np.isfinite(limit) else "")
            notes.append(f"{env_id}: {len(aside)} done run(s) set aside, at {' and '.join(other)}: {why}. "
                         f"Runs are compared at one budget ({at}) and one threshold per env; "
                         "report their suites apart to see them.")
    return pooled, budgets, cpu_budgets


def _most_runs(values: pd.Series) -> float:
    """The value most runs have (``values``: one per run), ties broken towards the larger."""
    counts = values.value_counts()
    return float(max(counts.index[counts == counts.max()]))


def _sensitivity(db: Any) -> pd.DataFrame | None:
    """The tuner's per-(algo, env) sensitivity summary, if the store has any studies (:mod:`bench.analysis.sensitivity`)."""
    # Optuna keeps its studies in the same store (a pack, in its journal); without any there is nothing to
    # import optuna for.
    if not db.has_studies():
        return None
    try:
        from bench.analysis.sensitivity import sensitivity_table

        df = sensitivity_table(db)
    except (ImportError, AttributeError):
        return None
    except Exception:  # noqa: BLE001 - an older or foreign study schema: treat as no tuning data
        return None
    return df if df is not None and len(df) else None
