"""From the results store to scores, a decision matrix and recommendations.

This is the numbers half of ``bench report`` and all of ``bench recommend``; it
draws nothing (figures and HTML are :mod:`bench.analysis.report`). It reads the store
only, and leans on the pure statistics of :mod:`bench.analysis.stats`.

What counts
-----------
- Statistics use runs whose status is ``done``. Failed, interrupted and pending
  runs are listed in the report's inventory with their errors, never silently
  averaged in or out.
- A run belongs to a *task* (its env) and an *algorithm label* (``ppo-sb3``,
  ``ppo-bench``, …; ``impl`` says own vs SB3). When a label ran one env at
  several budgets (e.g. two suites), only its largest budget is pooled; the
  others are counted as "set aside" in the inventory.
- Scores are normalised per env with fixed anchors (:mod:`bench.analysis.anchors`):
  0 = a uniform-random policy's mean return, 1 = the env's threshold.

Per-run scores (the inputs of every criterion)
----------------------------------------------
- ``final_norm``: the normalised final return (mean of the last ``window`` episodes);
- ``auc_steps_norm``: the mean of the normalised learning curve over a grid of
  :data:`GRID` points from 0 to the env's largest budget, in env steps: high
  when a run learns early, so it measures *sample efficiency*;
- ``auc_wall_norm``: the same over training wall-clock seconds, from 0 to the
  slowest run's wall time on that env: *wall-clock efficiency*. A run that has
  finished holds its final curve value, as a user would stop and keep the policy;
- ``solved`` and the censored times ``t_steps`` / ``t_secs`` (crossing time,
  or the run's total when it never crossed).

The learning curve of a run is the running mean of its last ``window`` episode
returns (fewer at the very start), at each episode's end step, linearly
interpolated on the grid; before its first episode ends it is held at that
first value.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from bench.analysis import stats

#: Grid points per learning curve.
GRID = 100
#: Bootstrap replicates for intervals in tables, the decision matrix and recommendations.
N_BOOT = 2000
#: Lower-tail fraction for the reliability criterion (CVaR of the worst 25% of runs).
CVAR_ALPHA = 0.25
ACTIONS = ("discrete", "continuous")
OBS = ("vector", "pixels")
REWARDS = ("dense", "sparse")
PRIORITIES = ("samples", "wall-clock")
#: The criterion each priority ranks by.
PRIORITY_CRITERION = {"samples": "sample efficiency", "wall-clock": "wall-clock efficiency"}
#: Decision-matrix criteria: name → (per-run column, aggregate over tasks, what it means).
CRITERIA: dict[str, tuple[str, Callable, str]] = {
    "sample efficiency": ("auc_steps_norm", stats.aggregate_iqm,
                          "IQM over runs of the normalised area under the learning curve vs env steps"),
    "wall-clock efficiency": ("auc_wall_norm", stats.aggregate_iqm,
                              "IQM over runs of the normalised area under the learning curve vs wall-clock seconds"),
    "final performance": ("final_norm", stats.aggregate_iqm, "IQM over runs of the normalised final return"),
    "reliability": ("final_norm", lambda ts: stats.aggregate_cvar(ts, CVAR_ALPHA),
                    "mean over envs of the CVaR of the worst 25% of seeds' normalised final return"),
    "success rate": ("solved_f", stats.aggregate_mean, "mean over envs of the fraction of runs reaching the threshold"),
}
SENSITIVITY = "hyperparameter sensitivity"
#: Diagnostics the report plots, in this order, where a run recorded them.
DIAGNOSTICS = ("policy/entropy", "policy/approx_kl", "grad/noise_ratio", "policy/log_std")


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #
@dataclass
class Data:
    """What the report needs from the store.

    :param runs: every run of the chosen suites, once per key (first suite wins
        for the label), with ``meta`` parsed to a dict and a ``pooled`` flag.
    :param episodes: columns ``key, step, wall_s, ret`` of pooled done runs, in order.
    :param diagnostics: columns ``key, step, name, value`` (the names in :data:`DIAGNOSTICS`).
    :param traits: env id → ``action, obs, reward, family, threshold``.
    :param anchors: env id → :class:`bench.analysis.anchors.Anchor`.
    :param sensitivity: the tuner's sensitivity table, or ``None`` when there is none.
    """

    store_url: str
    suites: list[str]
    runs: pd.DataFrame
    episodes: pd.DataFrame
    diagnostics: pd.DataFrame
    traits: dict[str, dict[str, Any]]
    anchors: dict[str, Any]
    sensitivity: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)


def load(store_url: str, suites: Iterable[str] | None = None, *, anchors: bool = True,
         log: Callable[[str], None] | None = None) -> Data:
    """Read runs, episodes, diagnostics, env traits and anchors of ``suites`` (default: all).

    :param anchors: compute missing env anchors (a few seconds of random play per
        env, stored once). With ``False`` only stored anchors are used.
    :raises KeyError: a named suite is not in the store.
    """
    import sqlalchemy as sa

    from bench.run import store as st

    db = st.Store(store_url, readonly=True)  # reads only (missing anchors go through a short-lived writer)
    names = db.suite_names()
    chosen = list(suites) if suites else names
    missing = [s for s in chosen if s not in names]
    if missing:
        raise KeyError(", ".join(missing))
    frames = [db.runs_frame(s) for s in chosen]
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    traits: dict[str, dict[str, Any]] = {}
    with db.engine.connect() as c:
        for r in c.execute(sa.select(st.suites).where(st.suites.c.name.in_(chosen))):
            for env_id, m in json.loads(r.env_meta).items():
                traits.setdefault(env_id, m)
    if runs.empty:
        return Data(db.url, chosen, runs, pd.DataFrame(columns=["key", "step", "wall_s", "ret"]),
                    pd.DataFrame(columns=["key", "step", "name", "value"]), traits, {})
    runs = runs.drop_duplicates("key", keep="first").reset_index(drop=True)
    runs["meta"] = [json.loads(m) if isinstance(m, str) and m else {} for m in runs["meta"]]
    # Pool, per (env, label), only the largest budget's done runs.
    done = runs["status"] == "done"
    top = runs[done].groupby(["env", "label"])["timesteps"].transform("max")
    runs["pooled"] = False
    runs.loc[top.index, "pooled"] = runs.loc[top.index, "timesteps"] == top
    runs.loc[runs["final_return"].isna(), "pooled"] = False  # done but no finished episode: nothing to score
    keys = runs.loc[runs["pooled"], "key"].tolist()

    episodes, diags = [], []
    with db.engine.connect() as c:
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            episodes.append(pd.read_sql(
                sa.select(st.episodes.c.key, st.episodes.c.step, st.episodes.c.wall_s, st.episodes.c.ret)
                .where(st.episodes.c.key.in_(chunk)).order_by(st.episodes.c.key, st.episodes.c.idx), c))
            diags.append(pd.read_sql(
                sa.select(st.diagnostics.c.key, st.diagnostics.c.step, st.diagnostics.c.name, st.diagnostics.c.value)
                .where(st.diagnostics.c.key.in_(chunk), st.diagnostics.c.name.in_(DIAGNOSTICS))
                .order_by(st.diagnostics.c.key, st.diagnostics.c.id), c))
    ep = pd.concat(episodes, ignore_index=True) if episodes else pd.DataFrame(columns=["key", "step", "wall_s", "ret"])
    dg = pd.concat(diags, ignore_index=True) if diags else pd.DataFrame(columns=["key", "step", "name", "value"])

    for env_id in runs["env"].unique():
        if env_id not in traits:  # a run whose suite row is gone: fall back to the registry
            from bench.envs import get_spec

            s = get_spec(env_id)
            traits[env_id] = dict(threshold=s.threshold, action=s.action, obs=s.obs, reward=s.reward, family=s.family)
    notes: list[str] = []
    thresholds = {e: traits[e].get("threshold") for e in runs.loc[runs["pooled"], "env"].unique()}
    if anchors:
        from bench.analysis.anchors import ensure_anchors

        anch = ensure_anchors(db, thresholds, log=log)
    else:
        from bench.analysis.anchors import Anchor

        anch = {k: Anchor(k, float(r.random_return), float(r.threshold), int(r.episodes), int(r.seed))
                for k, r in db.anchors().items() if k in thresholds}
    for e in thresholds:
        a = anch.get(e)
        if a is None:
            notes.append(f"{e}: no normalisation anchors, so it is left out of cross-env scores")
        elif not a.threshold > a.random_return:
            notes.append(f"{e}: threshold {a.threshold:g} is not above the random return {a.random_return:g}; "
                         "left out of cross-env scores")
            anch.pop(e)
    sens = _sensitivity(db)
    db.dispose()
    return Data(db.url, chosen, runs, ep, dg, traits, anch, sens, notes)


def _sensitivity(db: Any) -> pd.DataFrame | None:
    """The tuner's per-(algo, env) sensitivity summary, if the store has any studies (:mod:`bench.tune.sensitivity`)."""
    import sqlalchemy as sa

    store_url = db.url
    try:
        # Optuna keeps its studies in the same store; without its tables there is nothing to import optuna for.
        with db.engine.connect() as c:
            if not sa.inspect(c).has_table("studies"):
                return None
    except sa.exc.SQLAlchemyError:
        return None
    try:
        from bench.tune.sensitivity import sensitivity_table

        df = sensitivity_table(store_url)
    except (ImportError, AttributeError):
        return None
    except Exception:  # noqa: BLE001 - an older or foreign study schema: treat as no tuning data
        return None
    return df if df is not None and len(df) else None


# --------------------------------------------------------------------------- #
# Per-run scores and curves
# --------------------------------------------------------------------------- #
def running_mean(returns: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` returns at each episode (of all so far for the first ``window - 1``).

    :param returns: shape ``(n,)``. :returns: shape ``(n,)``.
    """
    r = np.asarray(returns, dtype=float)
    c = np.concatenate([[0.0], np.cumsum(r)])
    i = np.arange(1, r.size + 1)
    lo = np.maximum(i - window, 0)
    return (c[i] - c[lo]) / (i - lo)


@dataclass
class EnvCurves:
    """One env's learning curves on common grids.

    :param steps: shape ``(G,)`` env steps; :param wall: shape ``(G,)`` seconds.
    :param by_steps: label → raw-return curves ``(n_runs, G)`` against ``steps``.
    :param by_wall: label → raw-return curves ``(n_runs, G)`` against ``wall``.
    """

    steps: np.ndarray
    wall: np.ndarray
    by_steps: dict[str, np.ndarray]
    by_wall: dict[str, np.ndarray]


@dataclass
class Scored:
    """Per-run scores of the pooled done runs, and per-env curves.

    ``runs`` columns: key, env, label, algo, impl, seed, timesteps, total_steps, wall_s,
    final_return, solved (bool), solved_f (0/1), t_steps, t_secs, final_norm,
    auc_steps_norm, auc_wall_norm (NaN where the env has no anchors).
    """

    runs: pd.DataFrame
    curves: dict[str, EnvCurves]
    traits: dict[str, dict[str, Any]]
    _cells: dict[str, dict[tuple[str, str], np.ndarray]] = field(default_factory=dict, repr=False)

    def cells(self, col: str) -> dict[tuple[str, str], np.ndarray]:
        """``(label, env) → (n_runs,)`` values of ``col`` (runs with normalised scores only), computed once."""
        if col not in self._cells:
            r = self.runs[self.runs["final_norm"].notna()]
            self._cells[col] = {(lb, e): g.to_numpy(float) for (lb, e), g in r.groupby(["label", "env"], sort=True)[col]}
        return self._cells[col]

    def tasks(self, label: str, col: str, envs: list[str]) -> list[np.ndarray]:
        """Per-task arrays of ``col`` for ``label`` on ``envs`` (for :mod:`bench.analysis.stats`)."""
        c = self.cells(col)
        return [c[(label, e)] for e in envs]


def score(data: Data) -> Scored:
    """Curves on common grids and normalised per-run scores (see the module docstring)."""
    cols = ["key", "env", "label", "algo", "impl", "seed", "timesteps", "total_steps", "wall_s", "window",
            "final_return", "steps_to_threshold", "seconds_to_threshold"]
    runs = data.runs.loc[data.runs.get("pooled", pd.Series(dtype=bool)).astype(bool), cols].copy() \
        if not data.runs.empty else pd.DataFrame(columns=cols)
    runs = runs.reset_index(drop=True)
    # Split the (key-ordered) episode table into one array per run without a Python-level groupby.
    ep = data.episodes
    keys = ep["key"].to_numpy()
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.array([], dtype=int)
    bounds = dict(zip(keys[starts], zip(starts, np.r_[starts[1:], len(keys)])))
    step_a, wall_a, ret_a = (ep[c].to_numpy(dtype=float) for c in ("step", "wall_s", "ret"))

    runs["solved"] = runs["steps_to_threshold"].notna()
    runs["solved_f"] = runs["solved"].astype(float)
    runs["t_steps"] = runs["steps_to_threshold"].where(runs["solved"], runs["total_steps"]).astype(float)
    runs["t_secs"] = runs["seconds_to_threshold"].where(runs["solved"], runs["wall_s"]).astype(float)
    runs["final_norm"] = np.nan
    runs["auc_steps_norm"] = np.nan
    runs["auc_wall_norm"] = np.nan

    curves: dict[str, EnvCurves] = {}
    for env_id, g in runs.groupby("env", sort=True):
        steps_grid = np.linspace(0, float(g["total_steps"].max()), GRID + 1)[1:]
        wall_grid = np.linspace(0, float(g["wall_s"].max()), GRID + 1)[1:]
        a = data.anchors.get(env_id)
        by_steps: dict[str, list] = {}
        by_wall: dict[str, list] = {}
        for idx, r in g.iterrows():
            s0, s1 = bounds.get(r["key"], (0, 0))
            if s1 <= s0:
                continue
            rm = running_mean(ret_a[s0:s1], int(r["window"]))
            cs = np.interp(steps_grid, step_a[s0:s1], rm)
            cw = np.interp(wall_grid, wall_a[s0:s1], rm)
            by_steps.setdefault(r["label"], []).append(cs)
            by_wall.setdefault(r["label"], []).append(cw)
            if a is not None:
                runs.at[idx, "final_norm"] = float(stats.normalise(r["final_return"], a.random_return, a.threshold))
                runs.at[idx, "auc_steps_norm"] = float(stats.normalise(cs, a.random_return, a.threshold).mean())
                runs.at[idx, "auc_wall_norm"] = float(stats.normalise(cw, a.random_return, a.threshold).mean())
        curves[env_id] = EnvCurves(steps_grid, wall_grid, {k: np.array(v) for k, v in by_steps.items()},
                                   {k: np.array(v) for k, v in by_wall.items()})
    return Scored(runs, curves, data.traits)


# --------------------------------------------------------------------------- #
# Tables
# --------------------------------------------------------------------------- #
def final_table(scored: Scored, env_id: str, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per label on one env: runs, IQM final return with CI, success rate with Wilson CI, median times.

    Median steps-to-threshold is read off the Kaplan-Meier curve (censored runs
    kept); it is ``NaN`` when fewer than half the runs are known to have solved.
    """
    rows = []
    g = scored.runs[scored.runs["env"] == env_id]
    for label, r in g.groupby("label", sort=True):
        fr = r["final_return"].to_numpy(float)
        ci = stats.bootstrap_ci(fr, stats.iqm, n_boot=n_boot, rng=0)
        k, n = int(r["solved"].sum()), len(r)
        sr = stats.wilson_interval(k, n)
        med = {}
        for col in ("t_steps", "t_secs"):
            t, f = stats.kaplan_meier(r[col].to_numpy(float), r["solved"].to_numpy(bool))
            hit = np.flatnonzero(f >= 0.5)
            med[col] = float(t[hit[0]]) if hit.size else np.nan
        rows.append(dict(label=label, impl=r["impl"].iloc[0], runs=n, iqm=ci.point, lo=ci.lo, hi=ci.hi,
                         median=float(np.median(fr)), solved=k, success=sr.point, success_lo=sr.lo, success_hi=sr.hi,
                         median_steps=med["t_steps"], median_secs=med["t_secs"]))
    return pd.DataFrame(rows)


def normalised_envs(scored: Scored) -> list[str]:
    """Envs whose runs have normalised scores (they have anchors)."""
    r = scored.runs
    return sorted(r.loc[r["final_norm"].notna(), "env"].unique())


def across_envs(scored: Scored, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per label: IQM of normalised final return over all its envs, stratified bootstrap CI."""
    r = scored.runs[scored.runs["final_norm"].notna()]
    rows = []
    for label, g in r.groupby("label", sort=True):
        envs = sorted(g["env"].unique())
        ci = stats.stratified_bootstrap_ci(scored.tasks(label, "final_norm", envs), stats.aggregate_iqm, n_boot=n_boot, rng=0)
        rows.append(dict(label=label, impl=g["impl"].iloc[0], envs=len(envs), runs=len(g), iqm=ci.point, lo=ci.lo, hi=ci.hi))
    return pd.DataFrame(rows)


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


def _mark_ties(rows: list[dict]) -> None:
    """Mark the best point estimate ``best``; anything whose interval overlaps it ``tie`` (and the best ``tie`` too)."""
    scored = [r for r in rows if r.get("lo") is not None and np.isfinite(r["point"])]
    if not scored:
        return
    best = max(scored, key=lambda r: r["point"])
    tied = [r for r in scored if r is not best and stats.intervals_overlap((r["lo"], r["hi"]), (best["lo"], best["hi"]))]
    for r in tied:
        r["mark"] = "tie"
    best["mark"] = "tie" if tied else "best"


def decision_matrix(scored: Scored, sensitivity: pd.DataFrame | None = None, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Every (category, label, criterion): normalised score, 95% interval, and best/tie marks.

    A label is scored in a category over the category's envs it ran
    (``n_envs`` of ``cat_envs``). Within each (category, criterion) the best
    point estimate is marked ``best``, or ``tie`` when another label's
    interval overlaps its own; those labels are marked ``tie`` as well.

    Columns: category, label, impl, criterion, point, lo, hi, n_envs, cat_envs, n_runs, mark, note.
    """
    r = scored.runs[scored.runs["final_norm"].notna()]
    out: list[dict] = []
    for cat, envs in categories(scored).items():
        rc = r[r["env"].isin(envs)]
        labels = sorted(rc["label"].unique())
        for crit, (col, agg, _) in CRITERIA.items():
            rows = []
            for lb in labels:
                mine = sorted(rc.loc[rc["label"] == lb, "env"].unique())
                ci = stats.stratified_bootstrap_ci(scored.tasks(lb, col, mine), agg, n_boot=n_boot, rng=0)
                rows.append(dict(category=cat, label=lb, impl=rc.loc[rc["label"] == lb, "impl"].iloc[0], criterion=crit,
                                 point=ci.point, lo=ci.lo, hi=ci.hi, n_envs=len(mine), cat_envs=len(envs),
                                 n_runs=int((rc["label"] == lb).sum()), mark="", note=""))
            _mark_ties(rows)
            out += rows
        for lb in labels:
            out.append(_sensitivity_cell(cat, lb, rc, envs, sensitivity))
    return pd.DataFrame(out, columns=["category", "label", "impl", "criterion", "point", "lo", "hi", "n_envs",
                                      "cat_envs", "n_runs", "mark", "note"])


def _sensitivity_cell(cat: str, label: str, rc: pd.DataFrame, envs: list[str], sens: pd.DataFrame | None) -> dict:
    """Hyperparameter sensitivity from the tuner: mean over envs of the IQR of normalised trial scores (lower is better)."""
    mine = rc[rc["label"] == label]
    algo, impl = mine["algo"].iloc[0], mine["impl"].iloc[0]
    row = dict(category=cat, label=label, impl=impl, criterion=SENSITIVITY, point=np.nan, lo=None, hi=None,
               n_envs=0, cat_envs=len(envs), n_runs=0, mark="", note="no tuning data")
    if sens is None:
        return row
    s = sens[(sens["algo"] == algo) & (sens["impl"] == impl) & sens["env_id"].isin(envs)]
    s = s[s["score_iqr"].notna()]
    if s.empty:
        return row
    note = f"IQR of normalised trial scores, {int(s['n_complete'].sum())} completed trials (lower = less sensitive)"
    if s["success_fraction"].notna().any():
        note += f"; {s['success_fraction'].mean():.0%} of trials reached the threshold"
    imp: dict[str, list[float]] = {}
    for d in s["importances"]:
        for k, v in (d or {}).items():
            imp.setdefault(k, []).append(float(v))
    if imp:
        top = max(imp, key=lambda k: np.mean(imp[k]))
        note += f"; most important: {top} ({np.mean(imp[top]):.2f})"
    row.update(point=float(s["score_iqr"].mean()), n_envs=int(s["env_id"].nunique()), n_runs=int(s["n_complete"].sum()),
               note=note)
    return row


# --------------------------------------------------------------------------- #
# Recommendations
# --------------------------------------------------------------------------- #
@dataclass
class Recommendation:
    """One problem profile's answer.

    :param verdict: ``recommended`` (a clear winner), ``tie`` (the best two cannot
        be told apart) or ``insufficient evidence`` (no or one measured candidate).
    :param p_improvement: P(best > runner-up) on the priority criterion, with its interval.
    :param evidence: the envs and, per candidate label, how many runs.
    """

    action: str
    obs: str
    reward: str
    priority: str
    verdict: str
    best: str | None = None
    runner_up: str | None = None
    best_score: stats.Interval | None = None
    runner_up_score: stats.Interval | None = None
    p_improvement: stats.Interval | None = None
    envs: list[str] = field(default_factory=list)
    runs: dict[str, int] = field(default_factory=dict)
    message: str = ""

    @property
    def evidence(self) -> str:
        if not self.envs:
            return "no measured environment covers this profile"
        return f"{', '.join(self.envs)}; runs: " + ", ".join(f"{k} {v}" for k, v in self.runs.items())


def recommend(scored: Scored, *, action: str | None = None, obs: str | None = None, reward: str | None = None,
              priority: str | None = None, n_boot: int = N_BOOT) -> list[Recommendation]:
    """A recommendation for every profile matching the given traits (``None`` = every value).

    For a profile, the envs are those whose action, observation and reward traits
    all match. Candidates are labels with done runs on *every* one of those envs
    (so all are compared on the same tasks). Each is scored on the priority's
    criterion (:data:`PRIORITY_CRITERION`) by the IQM of per-run normalised
    scores with a stratified bootstrap interval; the best and runner-up are the
    top two point estimates. The winner is called only when both hold:

    - the 95% interval of P(best > runner-up) excludes 0.5, and
    - the two IQM intervals do not overlap;

    otherwise the row says ``tie``: the data cannot separate them. Requiring
    both is deliberately conservative: a recommendation is a claim.
    """
    out = []
    r = scored.runs[scored.runs["final_norm"].notna()]
    for a, o, rw, p in itertools.product(ACTIONS, OBS, REWARDS, PRIORITIES):
        if (action and a != action) or (obs and o != obs) or (reward and rw != reward) or (priority and p != priority):
            continue
        envs = sorted(e for e in r["env"].unique()
                      if (scored.traits[e]["action"], scored.traits[e]["obs"], scored.traits[e]["reward"]) == (a, o, rw))
        rec = Recommendation(a, o, rw, p, "insufficient evidence", envs=envs)
        if not envs:
            rec.message = "insufficient evidence: no measured environment covers this profile"
            out.append(rec)
            continue
        rp = r[r["env"].isin(envs)]
        cands = [lb for lb, g in rp.groupby("label", sort=True) if set(g["env"]) == set(envs)]
        rec.runs = {lb: int((rp["label"] == lb).sum()) for lb in cands}
        col, agg, _ = CRITERIA[PRIORITY_CRITERION[p]]
        scores = {lb: stats.stratified_bootstrap_ci(scored.tasks(lb, col, envs), agg, n_boot=n_boot, rng=0) for lb in cands}
        ranked = sorted(cands, key=lambda lb: -scores[lb].point)
        if len(ranked) < 2:
            rec.best = ranked[0] if ranked else None
            rec.best_score = scores[ranked[0]] if ranked else None
            rec.message = ("insufficient evidence: only one algorithm ran every env of this profile"
                           if ranked else "insufficient evidence: no algorithm ran every env of this profile")
            out.append(rec)
            continue
        best, second = ranked[0], ranked[1]
        pi = stats.probability_of_improvement(scored.tasks(best, col, envs), scored.tasks(second, col, envs), n_boot=n_boot, rng=0)
        rec.best, rec.runner_up = best, second
        rec.best_score, rec.runner_up_score, rec.p_improvement = scores[best], scores[second], pi
        clear = pi.lo > 0.5 and not scores[best].overlaps(scores[second])
        if clear:
            rec.verdict = "recommended"
            rec.message = f"{best}, then {second}"
        else:
            rec.verdict = "tie"
            rec.message = f"tie: {best} ≈ {second} (insufficient evidence to separate them)"
        out.append(rec)
    return out


# --------------------------------------------------------------------------- #
# Provenance
# --------------------------------------------------------------------------- #
def hardware_of(meta: dict[str, Any]) -> str:
    """What wall-clock figures depend on: the CPU model, torch threads and (where recorded) BLAS threads."""
    blas = f" · {meta['blas_threads']} BLAS thread(s)" if meta.get("blas_threads") is not None else ""
    return f"{meta.get('cpu_model', '?')} · {meta.get('torch_threads', '?')} torch thread(s){blas}"


def hardware_warnings(data: Data) -> dict[str, list[str]]:
    """Env id → the distinct hardware/thread settings of its pooled runs, where there is more than one.

    Wall-clock figures compared across such runs mix machines, so the report warns.
    """
    r = data.runs[data.runs["pooled"]] if not data.runs.empty else data.runs
    out = {}
    for env_id, g in r.groupby("env", sort=True):
        hw = sorted({hardware_of(m) for m in g["meta"]})
        if len(hw) > 1:
            out[env_id] = hw
    return out
