"""Tables over scored runs: per env (:func:`final_table`), across envs (:func:`across_envs`,
:func:`improvement_matrix`, :func:`score_matrices` for rliable), the trait categories the decision matrix
is drawn by, and the language-model track's marks by test (:func:`mark_by_test`). Pure: a
:class:`bench.analysis.scores.Scored` in, frames out.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from bench.stats import aggregate as stats, survival
from bench.analysis.criteria import ALPHA, CRITERIA, MIN_ENVS, MIN_SEEDS, N_BOOT, SCORE_COLUMNS, Criterion
from bench.analysis.scores import Scored

__all__ = ["across_envs", "categories", "category_of", "final_table", "improvement_matrix", "mark_by_test",
           "normalised_envs", "score_matrices"]

# --------------------------------------------------------------------------- #
# Evidence counts
# --------------------------------------------------------------------------- #
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
    (unsolved runs censored at the end of the budget, :func:`bench.stats.survival.censored_at_budget`; ``NaN``,
    "not reached", when fewer than half the runs solved), median wall and CPU
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
                         median_steps=_median_to_threshold(r["t_steps"], solved),
                         median_cpu=_median_to_threshold(r["t_cpu"], solved),
                         run_wall=float(r["wall_s"].median()), run_cpu=float(r["cpu_s"].median()),
                         memory=_memory(r["meta"]),
                         contended=int(r["contended"].sum())))
    return pd.DataFrame(rows)


def _median_to_threshold(times: pd.Series, solved: np.ndarray) -> float:
    """Kaplan-Meier median time to threshold, unsolved runs censored at the end of the budget."""
    t = times.to_numpy(float)
    return survival.kaplan_meier_median(survival.censored_at_budget(t, solved), solved)


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
        ci = crit.estimate(scored.tasks(label, "final_norm", envs), n_boot=n_boot)
        rows.append(dict(label=label, impl=g["impl"].iloc[0], envs=len(envs), runs=len(g), iqm=ci.point, lo=ci.lo,
                         hi=ci.hi, kind=ci.kind))
    return pd.DataFrame(rows)



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


def mark_by_test(rows: list[dict], tasks: dict[str, list[np.ndarray]], crit: Criterion, scored: Scored, envs: list[str],
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
        if crit.is_time:  # time: each env's one shared machine, quiet cores only
            xt, yt = scored.pair(top["label"], r["label"], crit, envs)
            both = [i for i, (a, b) in enumerate(zip(xt, yt)) if a.size and b.size]
            if len(both) < len(envs):
                r["note"] = (r["note"] + "; " if r["note"] else "") + (
                    f"time compared on {len(both)} of {len(envs)} envs (the rest share no known machine with "
                    f"{top['label']} on quiet cores)")
            xt, yt = [xt[i] for i in both], [yt[i] for i in both]
        else:
            xt, yt = tasks[top["label"]], tasks[r["label"]]
        r["p"] = crit.compare(xt, yt).p_value if xt else float("nan")
        if not r["p"] < ALPHA:
            tied.append(r)
    for r in tied:
        r["mark"] = "tie"
    if enough is None:
        enough = _enough(scored, [r["label"] for r in live], crit.column, envs, "label")
    top["mark"] = "tie" if tied else ("best" if enough else "lead")
