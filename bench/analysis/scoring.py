"""From the results store to scores, a decision matrix and recommendations.

This is the numbers half of ``bench report`` and all of ``bench recommend``; it
draws nothing (figures and HTML are :mod:`bench.analysis.report`). It reads the
store only, and leans on the pure statistics of :mod:`bench.analysis.stats`.

What counts
-----------
- Statistics use runs whose status is ``done``. Failed, interrupted and pending
  runs are listed in the report's inventory with their errors, never silently
  averaged in or out.
- A run belongs to a *task* (its env), an *algorithm* (``ppo``, ``trpo``, …) and a
  *label* (``ppo-sb3``, ``ppo-bench``, or the suite's own label: one
  implementation and configuration of the algorithm).
- One comparison, one budget and one threshold per env: each env is compared at
  the budget most of its done runs have (ties: the larger), and at the threshold of the first suite
  that names it. Runs at another budget or threshold are set aside, with a note
  saying so, never held flat to a longer budget or mixed into another scale.
- Scores are normalised per env with fixed anchors (:mod:`bench.analysis.anchors`):
  0 = a uniform-random policy's mean return, 1 = the env's threshold, capped at 1
  (past the threshold counts as solved, so envs with headroom do not dominate).

Per-run scores (the inputs of every criterion); none depends on other runs
---------------------------------------------------------------------------
- ``final_norm``: the normalised final return (mean of the last ``window`` episodes),
  capped at 1;
- ``auc_steps_norm``: the mean of the normalised learning curve over the env's
  budget in env steps (:func:`bench.analysis.metrics.normalised_auc`): high when a
  run learns early, so it measures *sample efficiency*;
- ``auc_time_norm``: the same over the env's fixed time horizon in training
  **process CPU seconds** (budget × the env's ``time_scale_us``; a run that ended
  holds its final value, as a user would stop and keep the policy): *time
  efficiency*. Where the compared runs had an equal-compute budget (a suite's
  ``cpu_seconds``: a run stops at whichever budget comes first), the horizon is that
  CPU budget, and ``auc_steps_norm`` is not scored: each algorithm ran as many steps
  as its speed allowed, so there is no common step axis. Runs are single-threaded, so CPU seconds do not count the time a
  shared machine gives to other work, but they do grow with it (caches and memory
  bandwidth are shared: SB3 PPO on CartPole-v1 took 35.5 CPU seconds beside other
  work and 22.7 on a quiet core, 2026-11-26); wall seconds are recorded too, and a
  run whose wall time exceeds its CPU time by more than :data:`CONTENTION_RATIO` is flagged;
- ``solved`` and the censored times ``t_steps`` / ``t_cpu`` (crossing time, or the
  run's total when it never crossed).

Across runs
-----------
- Every aggregate weights each environment once, whatever its number of runs
  (the mean over envs of each env's IQM, CVaR or success fraction).
- Intervals: a 95% stratified bootstrap interval with at least
  :data:`bench.analysis.stats.MIN_CI_RUNS` runs on every env; below that the
  observed range, labelled so. Success rates use Wilson intervals. The CVaR gets
  no interval below :data:`bench.analysis.stats.MIN_CVAR_CI_RUNS` runs per env.
- Winners: only from the answers of :mod:`bench.analysis.answers` (one headline test per profile and
  priority, Holm-adjusted over the call), whose p-value is shown; interval overlap alone never decides.
  The decision matrix (:mod:`bench.analysis.matrix`) takes its marks from those same answers.
- Time by design (:mod:`bench.analysis.machines`): a time comparison uses, on each env, only runs that
  had their core to themselves and whose machine is known (speed-probe class), on the one machine both
  sides share most. No store-wide correction factor: nothing depends on other labels' runs.
- Answers generalise over envs (:mod:`bench.analysis.generalise`): from
  :data:`bench.analysis.generalise.MIN_ENVS_GENERALISE` envs on, a profile's winner comes from a
  random-effects test of per-env effects (HKSJ); below that, the answer names the envs it was measured
  on. The headline p-values of one call are Holm-adjusted.
- Recommendations answer by algorithm first, with its implementations pooled
  (every run of every label of the algorithm, each run once, each env weighted
  once), then say which implementation of it did better, or that they tie.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from bench.analysis import generalise, machines, stats
# The problem vocabulary lives apart so the command line checks options without importing this module.
from bench.traits import ACTIONS, OBS, PRIORITIES, REWARDS
from bench.analysis.metrics import GRID, axis_grid, curve_on_grid, first_crossing, normalised_auc, running_mean
# One rule: the analysis flags what --remeasure re-runs, and reads a run's CPU budget as the run layer does.
from bench.storage.vocabulary import CONTENTION_RATIO, cpu_budget, is_contended

__all__ = [
    "ACTIONS", "ALPHA", "CONTENTION_RATIO", "CRITERIA", "CVAR_ALPHA", "DIAGNOSTICS", "GRID",
    "MIN_ENVS", "MIN_SEEDS", "N_BOOT", "OBS", "PROBE_CLASS", "PROBE_SPAN", "PRIORITIES",
    "PRIORITY_CRITERION", "REWARDS", "SENSITIVITY", "Criterion", "Data", "EnvCurves",
    "SCORE_COLUMNS", "Scored", "across_envs", "categories", "category_of",
    "final_table", "hardware_line", "hardware_of", "hardware_warnings",
    "improvement_matrix", "load", "normalised_envs",
    "probe_class_ms", "probe_classes", "running_mean", "score", "score_matrices",
]

#: Bootstrap replicates for intervals in tables, the decision matrix and recommendations.
N_BOOT = 2000
#: The off-policy algorithms (SB3's DQN, SAC, TD3: bench.algos.offpolicy_params.OFF_POLICY; a test keeps the two
#: equal). Their runs are reference points beside the answers, never candidates in them (see :class:`Data`).
OFF_POLICY = ("dqn", "sac", "td3")
#: Level of the permutation tests that decide winners and ties.
ALPHA = 0.05
#: Least runs per candidate on each env, and least envs, for a profile's winner (else "leaning").
MIN_SEEDS = 5
MIN_ENVS = 2
#: Lower-tail fraction for the reliability criterion (CVaR of the worst 25% of runs).
CVAR_ALPHA = 0.25
#: The criterion each priority ranks by.
PRIORITY_CRITERION = {"samples": "sample efficiency", "time": "time efficiency"}


@dataclass(frozen=True)
class Criterion:
    """One column of the decision matrix: a per-run score, an aggregate over envs, and its interval rule."""

    column: str
    aggregate: Callable[[list[np.ndarray]], np.ndarray]
    meaning: str
    #: Least runs on every env for a bootstrap interval; below it, ``small_n`` says what is shown instead.
    min_ci_runs: int = stats.MIN_CI_RUNS
    small_n: str = "range"


CRITERIA: dict[str, Criterion] = {
    "sample efficiency": Criterion(
        "auc_steps_norm", stats.aggregate_task_mean_iqm,
        "mean over envs of the IQM over runs of the normalised area under the learning curve vs env steps "
        "(0 to the env's budget)"),
    "time efficiency": Criterion(
        "auc_time_norm", stats.aggregate_task_mean_iqm,
        "mean over envs of the IQM over runs of the normalised area under the learning curve vs training CPU "
        "seconds (0 to the env's fixed time horizon)"),
    "final performance": Criterion(
        "final_norm", stats.aggregate_task_mean_iqm,
        "mean over envs of the IQM over runs of the normalised final return, capped at 1 (the threshold)"),
    "reliability": Criterion(
        "final_norm", lambda ts: stats.aggregate_task_cvar(ts, CVAR_ALPHA),
        "mean over envs of the CVaR of the worst 25% of runs' normalised final return",
        min_ci_runs=stats.MIN_CVAR_CI_RUNS, small_n="none"),
    "success rate": Criterion(
        "solved_f", stats.aggregate_task_mean,
        "mean over envs of the fraction of runs reaching the threshold (Wilson interval)"),
}
SENSITIVITY = "hyperparameter sensitivity"
#: Diagnostics the report plots, in this order, where a run recorded them.
DIAGNOSTICS = ("policy/entropy", "policy/approx_kl", "grad/noise_ratio", "policy/log_std")
#: Diagnostics read for the collapse detector (:mod:`bench.analysis.collapse`) besides those.
COLLAPSE_DIAGNOSTICS = ("grad/norm", "grad/norm_max")
#: Read for the language-model track's claim measures (exact match, reward hacking; bench.analysis.claims).
SEQUENCE_DIAGNOSTICS = ("seq/exact_match", "seq/proxy_score", "seq/true_score")
_EPISODE_COLUMNS = ["key", "step", "wall_s", "cpu_s", "ret"]


# --------------------------------------------------------------------------- #
# Loading
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
    :param anchors: env id → :class:`bench.analysis.anchors.Anchor` at the env's comparison threshold.
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


def suite_specs(db: Any) -> dict[str, dict[str, Any]]:
    """Every suite in the store ``db`` (a :class:`bench.storage.store.Store` or a pack set) → its stored spec."""
    return db.suite_specs()


def variant_suites(source: Any) -> dict[str, str]:
    """The store's variant suites (``variant:``, e.g. each one's best after equal tuning) → their variant.
    ``source``: a store URL, or an open reader (:func:`bench.storage.packread.open_reader`)."""
    from bench.storage.packread import open_reader, owned

    db = open_reader(source)
    try:
        specs = suite_specs(db)
    finally:
        if owned(source):
            db.dispose()  # a short read: no connection left open on the store
    return {n: str(s["variant"]) for n, s in sorted(specs.items()) if s.get("variant") and not s.get("claim")}


def load(source: Any, suites: Iterable[str] | None = None, *, anchors: bool = True,
         diagnostics: Iterable[str] | None = None, log: Callable[[str], None] | None = None,
         sensitivity: bool = True) -> Data:
    """Read runs, episodes, diagnostics, env traits and anchors of ``suites`` (default: all but the
    suites that test a claim, see below), once, as frames.

    :param source: a store URL (SQLite or PostgreSQL, read through SQLAlchemy), a ``packs:FOLDER`` URL,
        or a reader already open (:class:`bench.storage.packread.PackSet`, :class:`bench.storage.store.Store`):
        packs are read straight from their Parquet files. Every query is the reader's own: no SQL here.
    :param anchors: compute missing env anchors (a few seconds of random play per
        env, stored once; a pack set keeps them for this read only). With ``False`` only stored anchors are used.
    :param diagnostics: the diagnostic names to read (default: every one the report uses,
        :data:`DIAGNOSTICS`, :data:`COLLAPSE_DIAGNOSTICS` and :data:`SEQUENCE_DIAGNOSTICS`). Fewer
        is faster: :func:`score` reads none, the recommendation table only the sequence tasks'.
    :param sensitivity: read the tuner's studies (the decision matrix's sensitivity criterion; the
        recommendation table does not use them).
    :raises KeyError: a named suite is not in the store.
    """
    from bench.storage.packread import open_reader, owned

    diag_names = list(DIAGNOSTICS + COLLAPSE_DIAGNOSTICS + SEQUENCE_DIAGNOSTICS if diagnostics is None else diagnostics)
    db = open_reader(source)  # reads only (missing anchors go through a short-lived writer)
    try:
        return _load(db, suites, anchors=anchors, diag_names=diag_names, log=log, sensitivity=sensitivity)
    finally:
        if owned(source):
            db.dispose()


def _load(db: Any, suites: Iterable[str] | None, *, anchors: bool, diag_names: list[str],
          log: Callable[[str], None] | None, sensitivity: bool) -> Data:
    from bench.analysis.anchors import ensure_anchors, stored_anchors

    names = db.suite_names()
    if suites:
        chosen = list(suites)
    else:
        # A suite with a claim: block is an experiment (PPO with gae_lambda 0, REINFORCE without a
        # baseline, ...): the report's claims section reads it, but its deliberately varied runs must
        # not be pooled into the answers by algorithm. Nor may a variant's (`variant: tuned`, each
        # one's best after equal tuning): the answers compare algorithms at one effort, the zoo's
        # defaults, and the report sets the variant beside them in a section of its own. Named
        # explicitly, either is read like any suite.
        specs = suite_specs(db)
        chosen = [n for n in names if not specs.get(n, {}).get("claim") and not specs.get(n, {}).get("variant")]
    missing = [s for s in chosen if s not in names]
    if missing:
        raise KeyError(", ".join(missing))
    frames = [db.runs_frame(s) for s in chosen]
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    traits: dict[str, dict[str, Any]] = {}
    for env_meta in db.suite_env_metas(sorted(chosen)).values():
        for env_id, m in env_meta.items():
            traits.setdefault(env_id, m)
    empty_ep, empty_dg = pd.DataFrame(columns=_EPISODE_COLUMNS), pd.DataFrame(columns=["key", "step", "name", "value"])
    if runs.empty:
        return Data(db.url, chosen, runs, empty_ep, empty_dg, traits, {})
    runs = runs.drop_duplicates("key", keep="first").reset_index(drop=True)
    runs["meta"] = [json.loads(m) if isinstance(m, str) and m else {} for m in runs["meta"]]
    # Machines are told apart over the runs read together (probe_classes), and every reader of a run's
    # hardware (scores, claims, the report's provenance) sees the same class.
    for m, c in zip(runs["meta"], probe_classes(list(runs["meta"]))):
        if c is not None:
            m[PROBE_CLASS_KEY] = c
    # A store describes its envs (the suites' env_meta, and env_facts recorded by `bench run`), so it is
    # read without importing a user's env package; the registry is asked only where a store written
    # before env_facts lacks something (a run whose suite row is gone, a time scale measured later).
    facts = db.env_facts()
    for env_id in runs["env"].unique():
        if env_id not in traits and env_id in facts:  # a run whose suite row is gone: what the store recorded
            traits[env_id] = dict(facts[env_id])
        elif env_id not in traits:  # nor recorded (an old store): the registry, which may build the env
            from bench.envs import get_spec

            s = get_spec(env_id)
            traits[env_id] = dict(threshold=s.threshold, action=s.action, obs=s.obs, reward=s.reward, family=s.family,
                                  time_scale_us=s.time_scale_us)
        elif traits[env_id].get("time_scale_us") is None:
            # Registered before the registry measured one: its table, read without building the env.
            from bench.envs import registered_time_scale

            traits[env_id]["time_scale_us"] = registered_time_scale(env_id)
    notes: list[str] = []
    off = runs["algo"].isin(OFF_POLICY)
    on_flags, budgets, cpu_budgets = _pool(runs[~off], traits, notes)
    off_flags, off_budgets, _ = _pool(runs[off], traits, notes)
    runs["pooled"] = on_flags.reindex(runs.index, fill_value=False).astype(bool)
    runs["pooled_off"] = off_flags.reindex(runs.index, fill_value=False).astype(bool)
    keys = runs.loc[runs["pooled"] | runs["pooled_off"], "key"].tolist()

    ep = db.episodes_for(keys) if keys else empty_ep
    dg = db.diagnostics_for(keys, diag_names) if keys and diag_names else empty_dg

    thresholds = {e: traits[e].get("threshold") for e in {**off_budgets, **budgets}}
    families = {e: traits[e].get("family") for e in thresholds}
    anch = (ensure_anchors(db, thresholds, log=log, families=families) if anchors
            else stored_anchors(db, thresholds, families=families))
    for e in thresholds:
        a = anch.get(e)
        if a is None:
            notes.append(f"{e}: no normalisation anchors, so it is left out of cross-env scores")
        elif not a.threshold > a.random_return:
            notes.append(f"{e}: threshold {a.threshold:g} is not above the random return {a.random_return:g}; "
                         "left out of cross-env scores")
            anch.pop(e)
        elif traits[e].get("time_scale_us") is None and e not in cpu_budgets:
            notes.append(f"{e}: no time scale (time_scale_us), so it has no time-efficiency score; "
                         "set time_scale_us for it in the suite")
    for e, cpu in cpu_budgets.items():
        notes.append(f"{e}: runs stop at an equal-compute budget of {cpu:,g} training CPU seconds (or "
                     f"{budgets[e]:,} steps, whichever comes first), so it is compared at equal compute: time "
                     f"efficiency over those {cpu:,g} CPU seconds, final performance and success at the end. "
                     "Sample efficiency (over env steps) is not scored there: each algorithm ran as many steps "
                     "as its speed allowed.")
    sens = _sensitivity(db) if sensitivity else None
    return Data(db.url, chosen, runs, ep, dg, traits, anch, budgets, sens, notes, cpu_budgets, off_budgets)


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

        df = sensitivity_table(db.studies_url())
    except (ImportError, AttributeError):
        return None
    except Exception:  # noqa: BLE001 - an older or foreign study schema: treat as no tuning data
        return None
    return df if df is not None and len(df) else None


# --------------------------------------------------------------------------- #
# Per-run scores and curves
# --------------------------------------------------------------------------- #
@dataclass
class EnvCurves:
    """One env's learning curves on its fixed grids.

    :param steps: shape ``(G,)`` env steps, over the env's budget.
    :param cpu: shape ``(G,)`` CPU seconds, over the env's time horizon (empty without a time scale).
    :param by_steps: label → raw-return curves ``(n_runs, G)`` against ``steps``.
    :param by_cpu: label → raw-return curves ``(n_runs, G)`` against ``cpu``.
    """

    steps: np.ndarray
    cpu: np.ndarray
    by_steps: dict[str, np.ndarray]
    by_cpu: dict[str, np.ndarray]


@dataclass
class Scored:
    """Per-run scores of the pooled done runs, and per-env curves.

    ``runs`` columns: key, env, label, algo, impl, seed, timesteps, total_steps, wall_s, cpu_s,
    final_return, solved (bool), solved_f (0/1), t_steps, t_cpu, final_norm, auc_steps_norm,
    auc_time_norm (NaN where the env has no anchors or time scale), cpu_estimated, contended, hardware
    (:func:`hardware_of`), machine (the hardware string where the run has a speed-probe class, else ``None``:
    an unknown machine, :mod:`bench.analysis.machines`), meta.
    """

    runs: pd.DataFrame
    curves: dict[str, EnvCurves]
    traits: dict[str, dict[str, Any]]
    horizons: dict[str, float] = field(default_factory=dict)
    _cells: dict[tuple[str, str], dict[tuple[str, str], np.ndarray]] = field(default_factory=dict, repr=False)

    def cells(self, col: str, by: str = "label") -> dict[tuple[str, str], np.ndarray]:
        """``(label or algo, env) → (n_runs,)`` values of ``col`` (runs with normalised scores only), computed once."""
        if (col, by) not in self._cells:
            r = self.runs[self.runs["final_norm"].notna() & self.runs[col].notna()]
            self._cells[(col, by)] = {(k, e): g.to_numpy(float) for (k, e), g in r.groupby([by, "env"], sort=True)[col]}
        return self._cells[(col, by)]

    def tasks(self, name: str, col: str, envs: list[str], by: str = "label") -> list[np.ndarray]:
        """Per-task arrays of ``col`` for a label (``by="label"``) or algorithm (``by="algo"``) on ``envs``."""
        c = self.cells(col, by)
        return [c.get((name, e), np.empty(0)) for e in envs]

    def covers(self, name: str, col: str, envs: list[str], by: str = "label") -> bool:
        """Whether ``name`` has scored runs of ``col`` on every one of ``envs``."""
        return all(t.size for t in self.tasks(name, col, envs, by))

    def pair(self, x: str, y: str, col: str, envs: list[str], by_x: str = "label",
             by_y: str | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per env of ``envs``, the runs of ``x`` and ``y`` that a test of the two compares: every scored
        run, except on a time measure, where only the runs of the one machine both share most on each env
        (:func:`bench.analysis.machines.one_machine`; empty where they share none)."""
        by_y = by_y or by_x
        if col not in machines.TIME_COLUMNS:
            return self.tasks(x, col, envs, by_x), self.tasks(y, col, envs, by_y)
        r = self.runs[self.runs["final_norm"].notna() & self.runs[col].notna()]
        xt, yt, _ = machines.one_machine(r[r[by_x] == x], r[r[by_y] == y], col, envs)
        return xt, yt


def score(data: Data) -> Scored:
    """Curves on fixed grids and normalised per-run scores (see the module docstring)."""
    cols = ["key", "env", "label", "algo", "impl", "seed", "timesteps", "total_steps", "wall_s", "cpu_s", "window",
            "final_return", "steps_to_threshold", "meta"]
    runs = data.runs.loc[data.runs["pooled"].astype(bool), cols].copy() if not data.runs.empty \
        else pd.DataFrame(columns=cols)
    runs = runs.reset_index(drop=True)
    # Split the (key-ordered) episode table into one array per run without a Python-level groupby.
    ep = data.episodes
    keys = ep["key"].to_numpy()
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.array([], dtype=int)
    bounds = dict(zip(keys[starts], zip(starts, np.r_[starts[1:], len(keys)])))
    step_a, wall_a, ret_a = (ep[c].to_numpy(dtype=float) for c in ("step", "wall_s", "ret"))
    cpu_a = pd.to_numeric(ep["cpu_s"], errors="coerce").to_numpy(dtype=float)

    for c in ("final_norm", "auc_steps_norm", "auc_time_norm", "t_cpu"):
        runs[c] = np.nan
    runs["solved"] = runs["steps_to_threshold"].notna()
    runs["solved_f"] = runs["solved"].astype(float)
    runs["t_steps"] = runs["steps_to_threshold"].where(runs["solved"], runs["total_steps"]).astype(float)
    runs["cpu_estimated"] = False
    ratio = runs["wall_s"].astype(float) / runs["cpu_s"].astype(float).where(runs["cpu_s"] > 0)
    runs["contended"] = (ratio > CONTENTION_RATIO).fillna(False).astype(bool)
    runs["hardware"] = [hardware_of(m if isinstance(m, dict) else {}) for m in runs["meta"]]
    runs["machine"] = [h if isinstance(m, dict) and probe_class_ms(m) is not None else None
                       for h, m in zip(runs["hardware"], runs["meta"])]

    curves: dict[str, EnvCurves] = {}
    horizons: dict[str, float] = {}
    for env_id, g in runs.groupby("env", sort=True):
        budget = data.budgets.get(env_id, int(g["timesteps"].max()))
        scale = data.traits.get(env_id, {}).get("time_scale_us")
        # At equal compute the time axis is the CPU budget every run had, and there is no common step
        # axis: a faster algorithm ran more steps, so sample efficiency is not scored (NaN).
        equal_compute = env_id in data.cpu_budgets
        horizon = data.cpu_budgets[env_id] if equal_compute else budget * float(scale) * 1e-6 if scale else None
        if horizon:
            horizons[env_id] = horizon
        # At equal compute the step budget is out of reach: the step axis (figures only) ends where the
        # longest run ended, rather than holding every curve flat to the unreached budget.
        steps_grid = axis_grid(int(g["total_steps"].max()) if equal_compute else budget)
        cpu_grid = axis_grid(horizon) if horizon else np.empty(0)
        a = data.anchors.get(env_id)
        thr = data.traits.get(env_id, {}).get("threshold")
        by_steps: dict[str, list] = {}
        by_cpu: dict[str, list] = {}
        for idx, r in g.iterrows():
            s0, s1 = bounds.get(r["key"], (0, 0))
            if s1 <= s0:
                continue
            steps, ret, window = step_a[s0:s1], ret_a[s0:s1], int(r["window"])
            cpu = cpu_a[s0:s1]
            if np.isnan(cpu).any():
                # Recorded before per-episode CPU seconds: the run's own CPU/wall ratio scales its wall clock.
                cpu = wall_a[s0:s1] * (float(r["cpu_s"]) / float(r["wall_s"]) if r["wall_s"] and r["cpu_s"] else 1.0)
                runs.at[idx, "cpu_estimated"] = True
            crossing = None if thr is None else first_crossing(ret, float(thr), window)
            runs.at[idx, "t_cpu"] = float(cpu[crossing]) if crossing is not None else float(r["cpu_s"] or cpu[-1])
            by_steps.setdefault(r["label"], []).append(curve_on_grid(steps, ret, window, steps_grid))
            if horizon:
                by_cpu.setdefault(r["label"], []).append(curve_on_grid(cpu, ret, window, cpu_grid))
            if a is not None:
                lo, hi = a.random_return, a.threshold
                runs.at[idx, "final_norm"] = min(float(stats.normalise(r["final_return"], lo, hi)), 1.0)
                if not equal_compute:
                    runs.at[idx, "auc_steps_norm"] = normalised_auc(steps, ret, window, upto=budget, low=lo, high=hi)
                if horizon:
                    runs.at[idx, "auc_time_norm"] = normalised_auc(cpu, ret, window, upto=horizon, low=lo, high=hi)
        curves[env_id] = EnvCurves(steps_grid, cpu_grid, {k: np.array(v) for k, v in by_steps.items()},
                                   {k: np.array(v) for k, v in by_cpu.items()})
    return Scored(runs, curves, data.traits, horizons)


# --------------------------------------------------------------------------- #
# Intervals and tests, with the small-sample rules
# --------------------------------------------------------------------------- #
def estimate(tasks: list[np.ndarray], crit: Criterion, *, n_boot: int = N_BOOT) -> stats.Interval:
    """The criterion's aggregate with the interval its run counts support (see the module docstring)."""
    if crit.column == "solved_f":
        return stats.wilson_pooled([int(t.sum()) for t in tasks], [t.size for t in tasks])
    if crit.small_n == "none" and min(t.size for t in tasks) < crit.min_ci_runs:
        # A lower-tail mean of a few runs is one or two runs: no interval can be honest about it.
        return stats.Interval(float(crit.aggregate(tasks)), float("nan"), float("nan"), kind="none")
    return stats.interval(tasks, crit.aggregate, n_boot=n_boot, rng=0, min_runs=crit.min_ci_runs)


def compare(x: list[np.ndarray], y: list[np.ndarray], crit: Criterion) -> stats.PermutationTest:
    """Stratified permutation test of ``x`` against ``y`` on the criterion's aggregate (two-sided)."""
    return stats.permutation_test(x, y, crit.aggregate, alternative="two-sided", rng=0)


def _enough(scored: Scored, names: list[str], col: str, envs: list[str], by: str) -> bool:
    return len(envs) >= MIN_ENVS and all(t.size >= MIN_SEEDS for n in names for t in scored.tasks(n, col, envs, by))


def _counts(scored: Scored, name: str, col: str, envs: list[str], by: str) -> str:
    n = [t.size for t in scored.tasks(name, col, envs, by)]
    return f"{min(n)}" if min(n) == max(n) else f"{min(n)}–{max(n)}"


# --------------------------------------------------------------------------- #
# Tables
# --------------------------------------------------------------------------- #
def final_table(scored: Scored, env_id: str, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per label on one env: runs, IQM final return with its interval (a CI from 5 runs, else the
    observed range), success rate with Wilson CI, Kaplan-Meier median steps and CPU seconds to threshold
    (censored runs kept; ``NaN`` when fewer than half the runs are known to have solved), median wall and CPU
    seconds of a whole run, how many runs were contended, and the memory the label's models held
    (``meta["model_memory"]``: parameters, other copies and optimiser state; ``None`` where not recorded)."""
    rows = []
    g = scored.runs[scored.runs["env"] == env_id]
    for label, r in g.groupby("label", sort=True):
        fr = r["final_return"].to_numpy(float)
        ci = stats.interval([fr], stats.aggregate_iqm, n_boot=n_boot, rng=0)
        k, n = int(r["solved"].sum()), len(r)
        sr = stats.wilson_interval(k, n)
        solved = r["solved"].to_numpy(bool)
        rows.append(dict(label=label, impl=r["impl"].iloc[0], runs=n, iqm=ci.point, lo=ci.lo, hi=ci.hi, kind=ci.kind,
                         median=float(np.median(fr)), solved=k, success=sr.point, success_lo=sr.lo, success_hi=sr.hi,
                         median_steps=stats.kaplan_meier_median(r["t_steps"].to_numpy(float), solved),
                         median_cpu=stats.kaplan_meier_median(r["t_cpu"].to_numpy(float), solved),
                         run_wall=float(r["wall_s"].median()), run_cpu=float(r["cpu_s"].median()),
                         memory=_memory(r["meta"]),
                         contended=int(r["contended"].sum())))
    return pd.DataFrame(rows)


def _memory(metas: pd.Series) -> dict[str, int] | None:
    """The median bytes of each part of ``model_memory`` over runs that recorded it (the same for every seed)."""
    got = [m["model_memory"] for m in metas if isinstance(m, dict) and m.get("model_memory")]
    if not got:
        return None
    return {k: int(np.median([g.get(k, 0) for g in got])) for k in got[0]}


def normalised_envs(scored: Scored) -> list[str]:
    """Envs whose runs have normalised scores (they have anchors)."""
    r = scored.runs
    return sorted(r.loc[r["final_norm"].notna(), "env"].unique())


def across_envs(scored: Scored, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per label: normalised final performance over all its envs (each env once), with its interval."""
    r = scored.runs[scored.runs["final_norm"].notna()]
    crit = CRITERIA["final performance"]
    rows = []
    for label, g in r.groupby("label", sort=True):
        envs = sorted(g["env"].unique())
        ci = estimate(scored.tasks(label, "final_norm", envs), crit, n_boot=n_boot)
        rows.append(dict(label=label, impl=g["impl"].iloc[0], envs=len(envs), runs=len(g), iqm=ci.point, lo=ci.lo,
                         hi=ci.hi, kind=ci.kind))
    return pd.DataFrame(rows)


#: Per-run score columns :func:`score_matrices` can export, by the name ``bench export --score`` gives them.
SCORE_COLUMNS = {"final": "final_norm", "samples": "auc_steps_norm", "time": "auc_time_norm"}


def score_matrices(scored: Scored, column: str = "final_norm") -> tuple[list[str], dict[str, np.ndarray]]:
    """Normalised per-run scores as rliable's score dict: label → ``(n_runs, n_envs)`` array.

    The values are the report's own (:func:`score`: the same anchors, the same cap at 1, the
    same pooled runs). Column ``j`` is env ``envs[j]`` (the envs with normalisation anchors,
    sorted); it holds that label's runs on it in the order :meth:`Scored.tasks` gives them,
    padded with NaN to the longest column; a label that did not run an env has an all-NaN
    column there. So the report's across-env figure for a label is
    ``stats.interval([c[~np.isnan(c)] for c in m.T if (~np.isnan(c)).any()],
    stats.aggregate_task_mean_iqm, n_boot=N_BOOT, rng=0)`` with ``column="final_norm"``.

    :param column: ``final_norm`` (the report's "across environments" IQM), ``auc_steps_norm`` or ``auc_time_norm``.
    :returns: ``(envs, {label: (n_runs, n_envs)})``.
    """
    if column not in SCORE_COLUMNS.values():
        raise ValueError(f"column must be one of {sorted(SCORE_COLUMNS.values())}, got {column!r}")
    envs = normalised_envs(scored)
    labels = sorted(scored.runs.loc[scored.runs["final_norm"].notna(), "label"].unique())
    out: dict[str, np.ndarray] = {}
    for lb in labels:
        tasks = scored.tasks(lb, column, envs)
        if not any(t.size for t in tasks):
            continue
        m = np.full((max(t.size for t in tasks), len(envs)), np.nan)
        for j, t in enumerate(tasks):
            m[: t.size, j] = t
        out[lb] = m
    return envs, out


def improvement_matrix(scored: Scored, *, n_boot: int = 1000) -> pd.DataFrame:
    """P(row > column) on normalised final return, over the envs both labels ran; long form.

    Columns: x, y, p, lo, hi, envs.
    """
    r = scored.runs[scored.runs["final_norm"].notna()]
    labels = sorted(r["label"].unique())
    envs_of = {lb: set(r.loc[r["label"] == lb, "env"]) for lb in labels}
    rows = []
    for x, y in itertools.permutations(labels, 2):
        common = sorted(envs_of[x] & envs_of[y])
        if not common:
            continue
        ci = stats.probability_of_improvement(scored.tasks(x, "final_norm", common), scored.tasks(y, "final_norm", common),
                                              n_boot=n_boot, rng=0)
        rows.append(dict(x=x, y=y, p=ci.point, lo=ci.lo, hi=ci.hi, envs=len(common)))
    return pd.DataFrame(rows, columns=["x", "y", "p", "lo", "hi", "envs"])


# --------------------------------------------------------------------------- #
# Decision matrix
# --------------------------------------------------------------------------- #
def category_of(traits: dict[str, Any]) -> str:
    return f"{traits['action']} · {traits['obs']} · {traits['reward']}"


def categories(scored: Scored) -> dict[str, list[str]]:
    """Category name → its measured envs (with anchors); plus "all environments" when there are several."""
    out: dict[str, list[str]] = {}
    for e in normalised_envs(scored):
        out.setdefault(category_of(scored.traits[e]), []).append(e)
    if len(out) > 1:
        out = {"all environments": normalised_envs(scored), **out}
    return out


def _mark(rows: list[dict], tasks: dict[str, list[np.ndarray]], crit: Criterion, scored: Scored, envs: list[str],
          lower_is_better: bool = False, enough: bool | None = None) -> None:
    """The language-model track's marks (:func:`bench.analysis.claims.lm_criteria`; the decision matrix's
    other marks are the answers', :mod:`bench.analysis.matrix`). Marks by test, never by interval overlap: the top point estimate is ``best`` when every other
    label is significantly worse (permutation test at :data:`ALPHA`) and the evidence is enough
    (:data:`MIN_SEEDS`, :data:`MIN_ENVS`), ``lead`` when it is ahead without that evidence; labels the
    test cannot tell from it are ``tie`` (the top one too). ``p`` is each label's p-value against the top.
    ``enough`` overrides the evidence check, for a measure that is not a column of ``scored.runs``."""
    live = [r for r in rows if np.isfinite(r["point"])]
    if len(live) < 2:
        return
    top = (min if lower_is_better else max)(live, key=lambda r: r["point"])
    tied = []
    for r in live:
        if r is top:
            continue
        if crit.column in machines.TIME_COLUMNS:  # time: each env's one shared machine, quiet cores only
            xt, yt = scored.pair(top["label"], r["label"], crit.column, envs)
            both = [i for i, (a, b) in enumerate(zip(xt, yt)) if a.size and b.size]
            if len(both) < len(envs):
                r["note"] = (r["note"] + "; " if r["note"] else "") + (
                    f"time compared on {len(both)} of {len(envs)} envs (the rest share no known machine with "
                    f"{top['label']} on quiet cores)")
            xt, yt = [xt[i] for i in both], [yt[i] for i in both]
        else:
            xt, yt = tasks[top["label"]], tasks[r["label"]]
        r["p"] = compare(xt, yt, crit).p_value if xt else float("nan")
        if not r["p"] < ALPHA:
            tied.append(r)
    for r in tied:
        r["mark"] = "tie"
    if enough is None:
        enough = _enough(scored, [r["label"] for r in live], crit.column, envs, "label")
    top["mark"] = "tie" if tied else ("best" if enough else "lead")


# --------------------------------------------------------------------------- #
# Provenance
# --------------------------------------------------------------------------- #
#: Speed-probe classes (:mod:`bench.run.probe`). A run alone is rounded to a power of this factor. Runs read
#: together (:func:`probe_classes`) are grouped instead: sorted by probe, a new machine starts where the next
#: probe is more than this factor slower. A fixed grid split one machine whose probes straddled a grid line:
#: the 18 Atari reference runs of one VM (least probes 12.0-13.0 ms, 2026-11-27) fell into two classes.
PROBE_CLASS = 2 ** 0.25
#: A group of probes wider than this (max / min) is not one machine's noise (the widest seen on one CPUID in
#: one session: 1.20, least probes 11.4-13.7 ms over the 210 tuned-variant runs, 2026-11-27): it is split at
#: its widest gap until no group is wider.
PROBE_SPAN = 2 ** 0.5
#: Where :func:`load` puts each run's class (its group's median least probe, 3 significant figures).
PROBE_CLASS_KEY = "probe_class_ms"


def _least_probe(meta: dict[str, Any]) -> float | None:
    p = meta.get("cpu_probe_ms")
    vals = [float(v) for v in (p.values() if isinstance(p, dict) else ()) if v and v > 0]
    return min(vals) if vals else None


def probe_class_ms(meta: dict[str, Any]) -> float | None:
    """The run's speed-probe class in ms: where :func:`probe_classes` gave it one (every run :func:`load`
    reads), that; else its least probe time rounded to a power of :data:`PROBE_CLASS`; ``None`` where the
    run recorded no probe (runs from before 2026-11-26)."""
    if meta.get(PROBE_CLASS_KEY) is not None:
        return float(meta[PROBE_CLASS_KEY])
    least = _least_probe(meta)
    if least is None:
        return None
    return float(PROBE_CLASS ** round(np.log(least) / np.log(PROBE_CLASS)))


def _split_probes(vals: np.ndarray) -> list[np.ndarray]:
    """Sorted probe times (n,) → runs of indices into them, one per machine (see :data:`PROBE_CLASS`)."""
    if len(vals) == 0:
        return []
    gaps = np.diff(np.log(vals))
    cuts = np.flatnonzero(gaps > np.log(PROBE_CLASS)) + 1
    out = []
    for part in np.split(np.arange(len(vals)), cuts):
        stack = [part]
        while stack:  # too wide for one machine: cut at the widest gap inside
            q = stack.pop()
            if vals[q[-1]] / vals[q[0]] <= PROBE_SPAN:
                out.append(q)
                continue
            k = int(np.argmax(np.diff(np.log(vals[q])))) + 1
            stack += [q[k:], q[:k]]
    return sorted(out, key=lambda q: q[0])


def probe_classes(metas: list[dict[str, Any]]) -> list[float | None]:
    """Each run's speed-probe class in ms, the runs read together: within each CPU name and thread,
    stepping and GPU setting, runs whose least probes lie close (:data:`PROBE_CLASS`, :data:`PROBE_SPAN`)
    are one machine, labelled by their median least probe (3 significant figures). ``None`` where a run
    recorded no probe. ``metas``: (n_runs,) → (n_runs,)."""
    least = [_least_probe(m) for m in metas]
    groups: dict[str, list[int]] = {}
    for i, m in enumerate(metas):
        if least[i] is not None:
            groups.setdefault(_hardware(m, None), []).append(i)
    out: list[float | None] = [None] * len(metas)
    for idx in groups.values():
        order = sorted(idx, key=lambda i: least[i])
        vals = np.array([least[i] for i in order])
        for part in _split_probes(vals):
            label = float(f"{np.median(vals[part]):.3g}")
            for j in part:
                out[order[j]] = label
    return out


def _hardware(meta: dict[str, Any], probe_ms: float | None) -> str:
    probe = f" (probe ≈{probe_ms:.3g} ms)" if probe_ms is not None else ""
    blas = f" · {meta['blas_threads']} BLAS thread(s)" if meta.get("blas_threads") is not None else ""
    stepping = f" · {meta['vec_env']} env stepping" if meta.get("vec_env", "sync") != "sync" else ""
    acc = meta.get("accelerator")
    gpu = f" · GPU {acc.get('name', '?')}" if isinstance(acc, dict) else ""
    return (f"{meta.get('cpu_model', '?')}{probe} · {meta.get('torch_threads', '?')} torch thread(s){blas}"
            f"{stepping}{gpu}")


def hardware_of(meta: dict[str, Any]) -> str:
    """What time figures depend on: the CPU model and (where recorded) its speed-probe class
    (:func:`probe_class_ms`), torch threads, (where recorded) BLAS threads, the env stepping where it is not
    the default sync (runs from before the option have none: sync), and the GPU of a run whose networks were
    on one (``meta.accelerator``: its CPU seconds include the wait for the GPU,
    bench.run.provenance.accelerator_meta)."""
    return _hardware(meta, probe_class_ms(meta))


def hardware_line(scored: Scored, envs: list[str] | None = None) -> str:
    """One line for every time figure: the machines the runs' CPU seconds come from (of ``envs``' runs, where
    given), how time comparisons use them (:mod:`bench.analysis.machines`), and how many runs were contended
    or have no speed probe (both left out of time comparisons)."""
    r = scored.runs if envs is None else scored.runs[scored.runs["env"].isin(envs)]
    if r.empty:
        return ""
    hw = sorted({hardware_of(m) for m in r["meta"]})
    n = int(r["contended"].sum())
    unknown = int(r["machine"].isna().sum())
    est = int(r["cpu_estimated"].sum())
    line = "CPU seconds on " + "; ".join(hw)
    if len(hw) > 1:
        line += "; a time comparison uses, on each env, the one machine both sides share most"
    if n:
        line += (f"; {n} of {len(r)} runs contended (wall > {CONTENTION_RATIO:g} × CPU), left out of time comparisons "
                 "until `bench run --remeasure contended` measures them again")
    if unknown:
        line += f"; {unknown} of {len(r)} runs have no speed probe (an unknown machine), left out of time comparisons"
    if est:
        line += f"; {est} runs' CPU time estimated from wall time (recorded before per-episode CPU seconds)"
    return line


def hardware_warnings(data: Data) -> dict[str, list[str]]:
    """Env id → the distinct hardware/thread settings of its pooled runs, where there is more than one.

    Time figures compared across such runs mix machines, so the report warns.
    """
    r = data.runs[data.runs["pooled"]] if not data.runs.empty else data.runs
    out = {}
    for env_id, g in r.groupby("env", sort=True):
        hw = sorted({hardware_of(m) for m in g["meta"]})
        if len(hw) > 1:
            out[env_id] = hw
    return out
