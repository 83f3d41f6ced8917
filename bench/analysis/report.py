"""``bench report``: one self-contained static HTML page from the results store.

The numbers come from :mod:`bench.analysis.scoring` (which reads the store and uses the
pure statistics of :mod:`bench.analysis.stats`); this module draws them with
seaborn/matplotlib (Agg backend, the colour-blind-safe "colorblind" palette)
and writes ``index.html`` with every figure embedded as a base64 PNG, no
external CSS, JavaScript or fonts, so the page opens offline and fetches nothing.

Sections (see the issue): inventory and provenance, per environment (learning
curves vs steps and vs seconds with IQM and 95% bootstrap bands, Kaplan-Meier
fraction solved, final-return table, diagnostics), across environments
(normalised IQM with stratified bootstrap intervals, performance profiles,
probability of improvement), the decision matrix and the recommendation table.
"""

from __future__ import annotations

import base64
import functools
import io
import re
import shutil
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from bench.analysis import answers as ans
from bench.analysis import matrix as mx
from bench.analysis import scoring as an
from bench.analysis import stats
from bench.analysis.offpolicy import line_text, off_policy_lines
from bench.analysis.published import SOURCE
from bench.analysis.style import algo_order, guess_algo, styles

#: Bootstrap replicates for the bands of curves (per grid point).
CURVE_BOOT = 200
DPI = 72
TEMPLATE = Path(__file__).with_name("report.html.j2")


# --------------------------------------------------------------------------- #
# Figures
# --------------------------------------------------------------------------- #
@functools.cache
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.9)
    # seaborn 0.13's heatmap calls a colormap method matplotlib 3.11 plans to deprecate; nothing to act on here.
    warnings.filterwarnings("ignore", message="The set_bad function", category=PendingDeprecationWarning)
    # A fixed title height skips matplotlib's automatic title placement, which measures every
    # tick label again; with fixed margins (``_figure``) each figure is drawn once, not twice
    # as ``bbox_inches="tight"`` would. Together they halve the report's build time.
    plt.rcParams["axes.titley"] = 1.01
    # Labels, env ids and errors are user text: "$\\alpha^$" must be drawn as typed, not parsed as
    # mathtext (an unbalanced one made every report of that store fail).
    plt.rcParams["text.parse_math"] = False
    warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
    plt.rcParams["text.usetex"] = False
    return plt, sns


def _figure(plt, ncols: int, width: float, height: float, *, left: float = 0.8, right: float = 0.3,
            bottom: float = 0.6, top: float = 0.4, wspace: float = 0.3, **kw):
    """A one-row figure whose margins are given in inches (room for labels and outside legends)."""
    fig, axes = plt.subplots(1, ncols, figsize=(width, height), squeeze=False, **kw)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=wspace)
    return fig, list(axes[0])


def _few_ticks(ax) -> None:
    """At most ~5 ticks per axis: enough to read, and every tick costs drawing time."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.yaxis.set_major_locator(MaxNLocator(5))


def overflow(fig) -> float:
    """How far, in inches, the drawn artists of ``fig`` reach past its edges (0: nothing is clipped).
    Needs ``fig`` drawn (``fig.canvas.draw()``)."""
    bb = fig.get_tightbbox(fig.canvas.get_renderer())
    w, h = fig.get_size_inches()
    return float(max(0.0, -bb.x0, -bb.y0, bb.x1 - w, bb.y1 - h))


def _png(fig) -> str:
    """``fig`` as a base64 PNG, drawn once with its fixed margins; if a label would then be clipped at an
    edge (a long tick label or legend entry), saved again with ``bbox_inches="tight"`` so nothing is cut."""
    import matplotlib.pyplot as plt

    fig.set_dpi(DPI)
    fig.canvas.draw()
    buf = io.BytesIO()
    if overflow(fig) > 0.02:
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.08)
    else:  # the canvas already holds the picture: encode it rather than draw it again
        plt.imsave(buf, np.asarray(fig.canvas.buffer_rgba()), format="png", dpi=DPI)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


class Style:
    """The line style of each label (:mod:`bench.analysis.style`: colour by algorithm, dash and marker by
    implementation), and the algorithm each label belongs to (the panels of the small multiples)."""

    def __init__(self, labels: list[str], impl: dict[str, str], algo: dict[str, str] | None = None):
        self.impl = impl
        self.algo = {lb: (algo or {}).get(lb) or guess_algo(lb) for lb in labels}
        self.styles = styles([(lb, self.algo[lb], impl.get(lb, "bench")) for lb in labels])
        self.color = {lb: s.color for lb, s in self.styles.items()}

    def line(self, label: str, *, markers: bool = True) -> dict[str, Any]:
        s = self.styles[label]
        return dict(color=s.color, linestyle=s.dash, label=legend_text(label),
                    **(dict(marker=s.marker, markevery=0.1, markersize=4) if markers else {}))

    def groups(self, labels: list[str]) -> dict[str, list[str]]:
        """``labels`` by algorithm, algorithms in the fixed order, labels by name within each."""
        out: dict[str, list[str]] = {}
        for lb in sorted(labels, key=lambda lb: (algo_order(self.algo[lb]), lb)):
            out.setdefault(self.algo[lb], []).append(lb)
        return out


def legend_text(label: str) -> str:
    """A label as a legend entry: matplotlib hides entries starting with "_", so those get a zero-width space."""
    return "\u200b" + label if label.startswith("_") else label


def _iqm_band(curves: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IQM over runs at each grid point, with a 95% percentile bootstrap band over runs.

    :param curves: ``(n_runs, G)``. :returns: ``(iqm, lo, hi)``, each ``(G,)``.
    """
    n = curves.shape[0]
    point = stats.iqm(curves, axis=0)
    reps = stats.iqm(curves[rng.integers(0, n, size=(CURVE_BOOT, n))], axis=1)  # (B, G)
    lo, hi = stats.percentile_interval(reps)
    return point, lo, hi


#: Above this many labels, an env's learning curves are drawn as small multiples, one panel per algorithm.
SMALL_MULTIPLES = 6


def _guides(ax, threshold: float | None, random: float | None) -> None:
    if threshold is not None:
        ax.axhline(threshold, color="0.3", lw=1, ls=":", label=f"threshold {threshold:g}")
    if random is not None:
        ax.axhline(random, color="0.6", lw=1, ls="-.", label=f"random policy {random:.3g}")


def _draw_km(axes: list, c: an.EnvCurves, runs: pd.DataFrame, style: Style, *, blank: list | None = None,
             bands: bool = True) -> None:
    """The Kaplan-Meier fraction of runs solved against steps (``axes[0]``) and CPU seconds (``axes[1]``),
    with 95% bootstrap bands unless ``bands`` is false; without a time scale the CPU panel (and ``blank``)
    says so instead."""
    for ax, col, grid in ((axes[0], "t_steps", c.steps), (axes[1], "t_cpu", c.cpu)):
        if not grid.size:  # no time scale for this env: no time axis
            for a in [*(blank or []), ax]:
                a.text(0.5, 0.5, "no time scale for this env\n(set time_scale_us in the suite)", ha="center",
                       va="center", transform=a.transAxes, color="0.4")
            continue
        grid = np.r_[0.0, grid]
        for label, g in runs.groupby("label", sort=True):
            f, lo, hi = stats.kaplan_meier_band(g[col].to_numpy(float), g["solved"].to_numpy(bool), grid, n_boot=500)
            k = int(g["solved"].sum())
            ax.step(grid, f, where="post", **{**style.line(label), "label": f"{label}: {k}/{len(g)} runs solved"}, lw=1.8)
            if bands:
                ax.fill_between(grid, lo, hi, step="post", color=style.color[label], alpha=0.15, lw=0)
        ax.set_ylim(-0.02, 1.02)
        _few_ticks(ax)
    axes[0].set_title("solved by env steps (Kaplan-Meier)")
    axes[1].set_title("solved by CPU seconds (Kaplan-Meier)")
    axes[0].set_ylabel("fraction of runs solved")
    axes[0].set_xlabel("env steps")
    axes[1].set_xlabel("training CPU seconds (one thread)")


def fig_env(env_id: str, c: an.EnvCurves, runs: pd.DataFrame, style: Style, threshold: float | None,
            random: float | None) -> str:
    """One env, four panels: return vs env steps and vs training CPU seconds (IQM over seeds, 95%
    bootstrap band), and the Kaplan-Meier fraction of runs solved vs steps and vs CPU seconds
    (unsolved runs censored). The axes run over the env's budget and its fixed time horizon."""
    plt, _ = _plt()
    width, height = 13.0, 7.0
    fig, axes = plt.subplots(2, 2, figsize=(width, height), sharex="col")
    fig.subplots_adjust(left=0.8 / width, right=1 - 2.5 / width, bottom=0.6 / height, top=1 - 0.4 / height,
                        wspace=0.12, hspace=0.22)
    rng = np.random.default_rng(0)
    for ax, grid, by in ((axes[0, 0], c.steps, c.by_steps), (axes[0, 1], c.cpu, c.by_cpu)):
        for label, curves in sorted(by.items()):
            mid, lo, hi = _iqm_band(curves, rng)
            ax.plot(grid, mid, **style.line(label), lw=1.8)
            ax.fill_between(grid, lo, hi, color=style.color[label], alpha=0.18, lw=0)
        _guides(ax, threshold, random)
        _few_ticks(ax)
    axes[0, 1].sharey(axes[0, 0])
    _draw_km([axes[1, 0], axes[1, 1]], c, runs, style, blank=[axes[0, 1]])
    axes[0, 0].set_ylabel("return (running mean of episodes)")
    axes[0, 0].set_title("return vs env steps")
    axes[0, 1].set_title("return vs training CPU seconds")
    # Each legend sits right of the time panel but takes its entries from the steps panel beside it, which
    # draws the same labels: an env without a time scale has empty time panels and would list no algorithm.
    for row, title in ((0, "IQM over seeds, 95% CI"), (1, "unsolved runs censored at their end")):
        handles, labels = axes[row, 0].get_legend_handles_labels()
        if handles:
            axes[row, 1].legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1), title=title,
                                title_fontsize=8)
    return _png(fig)


def fig_env_panels(env_id: str, c: an.EnvCurves, style: Style, threshold: float | None,
                   random: float | None) -> str:
    """Small multiples of an env's learning curves, for many labels: one panel per algorithm with its
    implementations (own and SB3 together), every other label drawn faintly behind for reference; the
    panels against env steps first, then against training CPU seconds (IQM over seeds, 95% bootstrap band)."""
    plt, _ = _plt()
    rng = np.random.default_rng(0)
    groups = style.groups(sorted(c.by_steps))
    ncols = min(5, len(groups))
    nrows = -(-len(groups) // ncols)
    blocks = [(c.steps, c.by_steps, "env steps")] + ([(c.cpu, c.by_cpu, "training CPU seconds")] if c.cpu.size else [])
    pw, ph = 2.8, 2.05
    width, height = 0.8 + ncols * pw + 0.2, 0.75 + len(blocks) * (nrows * ph + 0.55)
    fig, axes = plt.subplots(len(blocks) * nrows, ncols, figsize=(width, height), squeeze=False, sharey=True)
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, bottom=0.55 / height, top=1 - 0.75 / height,
                        wspace=0.08, hspace=0.5)
    for b, (grid, by, xlabel) in enumerate(blocks):
        bands = {lb: _iqm_band(curves, rng) for lb, curves in sorted(by.items())}
        for i, (algo, labels) in enumerate(groups.items()):
            ax = axes[b * nrows + i // ncols, i % ncols]
            for lb, (mid, _, _) in bands.items():  # the others, for reference
                if lb not in labels:
                    ax.plot(grid, mid, color="0.82", lw=0.8, zorder=1)
            for lb in labels:
                if lb in bands:
                    mid, lo, hi = bands[lb]
                    ax.plot(grid, mid, **style.line(lb), lw=1.8, zorder=3)
                    ax.fill_between(grid, lo, hi, color=style.color[lb], alpha=0.2, lw=0, zorder=2)
            _guides(ax, threshold, random)
            ax.set_title(f"{algo} · {xlabel}", fontsize=9)
            ax.legend(handles=[h for h in ax.get_lines() if h.get_label() in {legend_text(lb) for lb in labels}],
                      fontsize=7, loc="lower right", handlelength=2.6)
            ax.tick_params(labelsize=8)
            _few_ticks(ax)
            if i % ncols == 0:
                ax.set_ylabel("return", fontsize=9)
        for j in range(len(groups), nrows * ncols):  # unused cells of the last row
            axes[b * nrows + j // ncols, j % ncols].set_visible(False)
    fig.suptitle(f"{env_id}: return (running mean of episodes), IQM over seeds with 95% CI, one panel per algorithm; "
                 "grey: the other labels", fontsize=11, y=1 - 0.15 / height, va="top")
    return _png(fig)


def fig_env_km(env_id: str, c: an.EnvCurves, runs: pd.DataFrame, style: Style) -> str:
    """The Kaplan-Meier half of :func:`fig_env` on its own (beside :func:`fig_env_panels`)."""
    plt, _ = _plt()
    n = runs["label"].nunique()
    fig, axes = _figure(plt, 2, 13.0, max(3.6, 0.19 * n + 1.3), right=2.9, top=0.4, wspace=0.12)
    # Fourteen overlapping bands hide the curves; the solved counts in the legend say how sure each one is.
    _draw_km(axes, c, runs, style, bands=False)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        axes[1].legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1),
                       title="unsolved runs censored at their end\n(no bands above 6 labels)", title_fontsize=8)
    return _png(fig)


def fig_diagnostics(env_id: str, runs: pd.DataFrame, diags: pd.DataFrame, style: Style, grid: np.ndarray) -> str | None:
    names = [n for n in an.DIAGNOSTICS if (diags["name"] == n).any()]
    if not names:
        return None
    plt, _ = _plt()
    width = 3.2 * len(names) + 2.9
    fig, axes2 = _figure(plt, len(names), width, 3.2, right=2.1, top=0.65, wspace=0.35)
    axes = [axes2]
    label_of = dict(zip(runs["key"], runs["label"]))
    for ax, name in zip(axes[0], names):
        d = diags[(diags["name"] == name) & diags["value"].notna()]
        per_label: dict[str, list[np.ndarray]] = {}
        for key, g in d.groupby("key", sort=False):
            if key in label_of and len(g):
                per_label.setdefault(label_of[key], []).append(
                    # Held at the first value before a run's first update (and at the last after its end).
                    np.interp(grid, g["step"].to_numpy(float), g["value"].to_numpy(float)))
        for label, cs in sorted(per_label.items()):
            q1, mid, q3 = np.percentile(np.array(cs), [25, 50, 75], axis=0)
            ax.plot(grid, mid, **style.line(label), lw=1.5)
            ax.fill_between(grid, q1, q3, color=style.color[label], alpha=0.15, lw=0)
        ax.set_title(name)
        ax.set_xlabel("env steps")
        _few_ticks(ax)
    axes[0][0].set_ylabel("median over seeds (band: IQR)")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle(f"{env_id}: diagnostics per update", y=0.99)
    return _png(fig)


def fig_aggregate(agg: pd.DataFrame, style: Style) -> str:
    plt, _ = _plt()
    fig, (ax,) = _figure(plt, 1, 10, 0.4 * len(agg) + 1.6, left=3.0, bottom=1.0)
    agg = agg.sort_values("iqm")
    for i, r in enumerate(agg.itertuples()):
        ax.errorbar(r.iqm, i, xerr=[[r.iqm - r.lo], [r.hi - r.iqm]], fmt=style.styles[r.label].marker,
                    color=style.color[r.label], capsize=4)
    ax.set_yticks(range(len(agg)), [f"{r.label} ({r.envs} envs, {r.runs} runs)" for r in agg.itertuples()])
    ax.axvline(0, color="0.6", lw=1, ls="-.")
    ax.axvline(1, color="0.3", lw=1, ls=":")
    ax.set_xlabel("normalised final return, mean over envs of the IQM (0 = random policy, 1 = threshold)\n"
                  "95% stratified bootstrap CI, or the range of the runs below 5 per env")
    ax.set_title("Across environments: normalised final return")
    return _png(fig)


def fig_profiles(scored: an.Scored, style: Style) -> str:
    plt, _ = _plt()
    r = scored.runs[scored.runs["final_norm"].notna()]
    hi = max(1.2, float(np.nanpercentile(r["final_norm"], 98)) + 0.05)
    lo = min(0.0, float(np.nanpercentile(r["final_norm"], 2)) - 0.05)
    taus = np.linspace(lo, hi, 120)
    many = r["label"].nunique()
    fig, (ax,) = _figure(plt, 1, 9, max(3.8, 0.19 * many + 1.2), right=2.2)
    for label, g in r.groupby("label", sort=True):
        envs = sorted(g["env"].unique())
        prof, plo, phi = stats.performance_profile([g.loc[g["env"] == e, "final_norm"].to_numpy(float) for e in envs],
                                                   taus, n_boot=500)
        ax.plot(taus, prof, **style.line(label), lw=1.8)
        if many <= SMALL_MULTIPLES:  # above that, the overlapping bands hide the curves
            ax.fill_between(taus, plo, phi, color=style.color[label], alpha=0.15, lw=0)
    ax.set_xlabel("normalised final return τ (0 = random, 1 = threshold)")
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_title("Performance profiles (95% stratified bootstrap bands)" if many <= SMALL_MULTIPLES else
                 f"Performance profiles ({many} labels: bands left out)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    return _png(fig)


#: Above this many labels the probability-of-improvement heatmap is split into blocks of columns, so
#: that its cells and labels keep their size (8 pt and more) at the page's width.
HEATMAP_COLUMNS = 8


def improvement_blocks(labels: list[str], size: int = HEATMAP_COLUMNS) -> list[list[str]]:
    """``labels`` cut into the fewest blocks of at most ``size``, as even as they can be."""
    n = max(1, -(-len(labels) // size))
    q, r = divmod(len(labels), n)
    cuts = np.cumsum([0] + [q + (i < r) for i in range(n)])
    return [labels[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def fig_improvement(pim: pd.DataFrame, labels: list[str], columns: list[str] | None = None) -> str:
    """P(row > column) for ``labels`` (rows) against ``columns`` (default: all of them), annotated."""
    plt, sns = _plt()
    columns = labels if columns is None else columns
    m = pd.DataFrame(np.nan, index=labels, columns=columns)
    ann = pd.DataFrame("", index=labels, columns=columns)
    for r in pim.itertuples():
        if r.x in m.index and r.y in m.columns:
            m.loc[r.x, r.y] = r.p
            ann.loc[r.x, r.y] = f"{r.p:.2f}\n[{r.lo:.2f}, {r.hi:.2f}]"
    left = 0.3 + 0.075 * max(len(lb) for lb in labels)
    bottom = 0.4 + 0.06 * max(len(lb) for lb in columns)
    width, height = left + 0.95 * len(columns) + 1.3, bottom + 0.5 * len(labels) + 0.5
    fig, (ax,) = _figure(plt, 1, width, height, left=left, right=1.3, bottom=bottom, top=0.5)
    sns.heatmap(m, annot=ann.values, fmt="", cmap="vlag", vmin=0, vmax=1, center=0.5, ax=ax, annot_kws={"fontsize": 8},
                cbar_kws={"label": "P(row > column)", "fraction": 0.6 / (0.95 * len(columns) + 0.6), "pad": 0.02})
    ax.grid(False)
    ax.tick_params(labelsize=9)
    ax.set_xticklabels(ax.get_xticklabels(), rotation=35, ha="right", rotation_mode="anchor")
    ax.set_xlabel("Y")
    ax.set_ylabel("X")
    part = "" if columns == labels else f" (columns {labels.index(columns[0]) + 1}–{labels.index(columns[-1]) + 1} of {len(labels)})"
    ax.set_title(f"P(X > Y), normalised final return, 95% CI{part}", fontsize=10)
    return _png(fig)


def fig_decision(dm: pd.DataFrame, category: str) -> str:
    """Annotated heatmap: rows labels, columns criteria. Colour = rank within the column (higher is better)."""
    plt, sns = _plt()
    d = dm[dm["category"] == category]
    labels = sorted(d["label"].unique())
    from bench.analysis.claims import LM_CRITERIA

    crits = mx.criteria_of(dm, category)
    lower_better = {an.SENSITIVITY, *LM_CRITERIA}
    colour = pd.DataFrame(np.nan, index=labels, columns=crits)
    ann = pd.DataFrame("", index=labels, columns=crits)
    for crit in crits:
        col = d[d["criterion"] == crit].set_index("label")
        vals = col["point"].astype(float)
        if vals.notna().sum():
            span = (vals.max() - vals.min()) or 1.0
            scaled = (vals - vals.min()) / span
            colour[crit] = (1 - scaled) if crit in lower_better else scaled  # lower sensitivity, memory, hacking are better
        for lb, r in col.iterrows():
            if r["point"] != r["point"]:
                ann.loc[lb, crit] = r["note"] or "n/a"
                continue
            mark = f" {mx.GLYPHS[r['mark']]}" if r["mark"] in mx.GLYPHS else ""
            ci = "" if r["lo"] is None or r["lo"] != r["lo"] else (
                f"\nrange {r['lo']:.2f}–{r['hi']:.2f}" if r["kind"] == "range" else f"\n[{r['lo']:.2f}, {r['hi']:.2f}]")
            cover = f"\n{r['n_envs']}/{r['cat_envs']} envs" if r["n_envs"] < r["cat_envs"] else ""
            ann.loc[lb, crit] = f"{r['point']:.2f}{mark}{ci}{cover}"
    fig, (ax,) = _figure(plt, 1, 13, 0.75 * len(labels) + 1.5, left=1.5, right=0.2, bottom=0.75, top=0.4)
    cmap = plt.get_cmap("cividis")
    sns.heatmap(colour.astype(float), annot=False, cmap=cmap, vmin=0, vmax=1, cbar=False, ax=ax,
                linewidths=0.5, linecolor="white")
    ax.grid(False)
    # Text drawn by hand: seaborn skips annotations of NaN cells, and "no tuning data" must show.
    for i, lb in enumerate(labels):
        for j, crit in enumerate(crits):
            v = colour.loc[lb, crit]
            dark = v == v and sum(cmap(float(v))[:3]) < 1.5  # light text on dark cells
            ax.text(j + 0.5, i + 0.5, ann.loc[lb, crit], ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")
    ax.set_xticks(np.arange(len(crits)) + 0.5, [c.replace(" ", "\n", 1) for c in crits], rotation=0)
    ax.set_ylabel("")
    ax.set_title(f"Decision matrix: {category}  (marks: the answers, ★ winner, ◆ ahead on these envs, ▲ leaning, "
                 "≈ no difference, · runner-up; colour = rank)", fontsize=9)
    return _png(fig)


# --------------------------------------------------------------------------- #
# The page
# --------------------------------------------------------------------------- #
def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


def _f(v: Any, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "—"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, float):
        return f"{v:,.{digits}f}" if abs(v) < 1e5 else f"{v:,.0f}"
    return str(v)


def _provenance(data: an.Data) -> dict[str, Any]:
    r = data.runs
    done = r[r["status"] == "done"] if not r.empty else r
    metas = list(done["meta"]) if not done.empty else []
    versions = sorted({", ".join(f"{k} {v}" for k, v in sorted((m.get("versions") or {}).items()) if v) for m in metas})
    commits = sorted({f"{(m.get('git_commit') or '?')[:10]}{' (dirty)' if m.get('git_dirty') else ''}" for m in metas})
    starts = sorted(m["started_at"] for m in metas if m.get("started_at"))
    ends = sorted(m["finished_at"] for m in metas if m.get("finished_at"))
    return dict(
        versions=versions, commits=commits,
        hardware=sorted({an.hardware_of(m) + f" · {m.get('cpu_count', '?')} cores · host {m.get('host', '?')}" for m in metas}),
        python=sorted({m.get("python", "?") for m in metas}),
        stepping=_stepping(done),
        dates=f"{starts[0]} → {ends[-1]}" if starts and ends else "—",
        overrides=_overrides(done),
    )


def _overrides(done: Any) -> list[str]:
    """One line per ``bench run --set`` override the done runs were run with (``overrides`` in their meta),
    with the labels it reached; none for runs of the suite files as written."""
    if done.empty:
        return []
    by_text: dict[str, set[str]] = {}
    for label, m in zip(done["label"], done["meta"]):
        for o in m.get("overrides") or ():
            by_text.setdefault(str(o), set()).add(str(label))
    return [f"--set {o}: {', '.join(sorted(labels))}" for o, labels in sorted(by_text.items())]


def _stepping(done: Any) -> list[str]:
    """One line per env stepping mode of the done runs (``vec_env`` in their meta; none recorded: sync), with the
    labels that used it and any note (envpool: its envs are not Gymnasium's)."""
    if done.empty:
        return []
    by_mode: dict[str, set[str]] = {}
    notes: set[str] = set()
    for label, m in zip(done["label"], done["meta"]):
        by_mode.setdefault(m.get("vec_env", "sync"), set()).add(str(label))
        if m.get("vec_env_note"):
            notes.add(m["vec_env_note"])
    lines = [f"{mode}: {', '.join(sorted(labels))}" for mode, labels in sorted(by_mode.items())]
    return lines + [f"note: {n}" for n in sorted(notes)]


def _inventory(data: an.Data) -> tuple[list[dict], list[dict]]:
    r = data.runs
    if r.empty:
        return [], []
    counts = (r.groupby(["suite", "env", "label", "impl", "status"]).size().unstack("status", fill_value=0).reset_index())
    rows = []
    for c in counts.to_dict("records"):
        g = r[(r["suite"] == c["suite"]) & (r["env"] == c["env"]) & (r["label"] == c["label"])]
        rows.append(dict(suite=c["suite"], env=c["env"], label=c["label"], impl=c["impl"],
                         total=int(sum(c.get(s, 0) for s in ("pending", "running", "done", "failed", "interrupted"))),
                         **{s: int(c.get(s, 0)) for s in ("done", "failed", "interrupted", "running", "pending")},
                         pooled=int(g["pooled"].sum()), budget=_f(int(g["timesteps"].max()))))
    bad = r[r["status"].isin(["failed", "interrupted"])]
    failures = [dict(env=x.env, label=x.label, seed=int(x.seed), status=x.status, error=x.error or "")
                for x in bad.itertuples()]
    return rows, failures


def answer_data(data: an.Data, scored: an.Scored, recs: list[ans.Recommendation]) -> dict[str, Any]:
    """What the page's verdicts are made of: "The answer", the recommendation table and the decision matrix,
    from one list of answers (``recs``: :func:`bench.analysis.answers.recommend` on ``scored``, every profile
    and priority, the rows ``bench recommend --format json`` prints). Figures are drawn apart from it.

    :returns: ``recs`` (:func:`bench.analysis.answers.recommendation_rows`), ``matrix`` (the marked
        :func:`bench.analysis.matrix.decision_matrix`, with the language-model track's criteria), ``decision``
        (per category: category, envs as text, env_ids, criteria, rows), ``track`` (leave-one-env-out hit rates),
        ``lm`` (whether the LM criteria are in the matrix).
    """
    from bench.analysis import claims as cl

    cats = an.categories(scored) if an.normalised_envs(scored) else {}
    dm = mx.decision_matrix(scored, data.sensitivity, recs=recs) if cats else pd.DataFrame(columns=mx.COLUMNS)
    # Sequence tasks add the language-model track's criteria (model memory, reward hacking).
    lm = [row for cat, envs in cats.items() for row in cl.lm_criteria(scored, data.diagnostics, cat, envs)]
    if lm:
        dm = pd.concat([dm, pd.DataFrame(lm, columns=dm.columns)], ignore_index=True)
    decision = [dict(category=cat, envs=", ".join(envs), env_ids=envs, criteria=mx.criteria_of(dm, cat),
                     rows=mx.decision_rows(dm, cat)) for cat, envs in cats.items()]
    return dict(recs=ans.recommendation_rows(recs), matrix=dm, decision=decision, track=mx.track_record(recs),
                lm=bool(lm))


def build(store_url: str, out_dir: Path, suites: list[str] | None = None, *,
          log: Callable[[str], None] | None = None, anchors: bool = True,
          stage: Callable[[str], None] | None = None) -> Path:
    """Write ``out_dir/index.html`` for ``suites`` (default: all in the store); returns its path.

    :param log: gets the lines worth keeping (notes while reading, the time it took).
    :param stage: gets the step under way, for a live status line (a report of the shipped
        reference takes tens of CPU seconds).
    """
    import jinja2

    stage = stage or (lambda _: None)
    t0 = time.perf_counter()
    stage("reading the store")
    data = an.load(store_url, suites, anchors=anchors, log=log)
    scored = an.score(data)
    runs = scored.runs
    labels = sorted(data.runs["label"].unique()) if not data.runs.empty else []
    impl = dict(zip(data.runs.get("label", []), data.runs.get("impl", [])))
    style = Style(labels, impl, dict(zip(data.runs.get("label", []), data.runs.get("algo", []))))
    warn = an.hardware_warnings(data)

    from bench.analysis import collapse

    flagged = collapse.flags(runs, data.episodes, data.diagnostics, data.anchors, data.traits)
    last_eval = _last_evaluations(data.store_url, runs)
    env_sections = []
    for i, (env_id, c) in enumerate(scored.curves.items()):
        stage(f"figures of {env_id} ({i + 1} of {len(scored.curves)})")
        g = runs[runs["env"] == env_id]
        a = data.anchors.get(env_id)
        thr = data.traits.get(env_id, {}).get("threshold")
        table = an.final_table(scored, env_id)
        d = data.diagnostics[data.diagnostics["key"].isin(g["key"])]
        env_sections.append(dict(
            id=f"env-{_slug(env_id)}", env=env_id, traits=an.category_of(data.traits[env_id]),
            threshold=f"{thr:g}" if thr is not None else "—", random=f"{a.random_return:.4g}" if a else "—",
            anchor=f"{a.episodes} random episodes, seed {a.seed}" if a else "none",
            warning=warn.get(env_id),
            figures=_env_figures(env_id, c, g, style, thr, a.random_return if a else None),
            diagnostics=fig_diagnostics(env_id, g, d, style, c.steps),
            table=[dict(label=t.label, impl=t.impl, runs=t.runs, iqm=_interval(t.iqm, t.lo, t.hi, t.kind),
                        median=_f(t.median), success=f"{t.solved}/{t.runs} = {t.success:.2f} [{t.success_lo:.2f}, {t.success_hi:.2f}]",
                        median_steps=_f(t.median_steps, 0), median_cpu=_f(t.median_cpu, 1), contended=t.contended,
                        run_time=f"{_f(t.run_wall, 1)} / {_f(t.run_cpu, 1)}",
                        memory=_bytes(t.memory))
                   for t in table.itertuples()],
            horizon=f"{scored.horizons[env_id]:,.1f} CPU s" if env_id in scored.horizons else "none",
            flags=flagged[flagged["env"] == env_id].sort_values(["label", "seed"]).to_dict("records"),
            budget=f"{data.budgets.get(env_id, 0):,}",
            cpu_budget=f"{data.cpu_budgets[env_id]:,g}" if env_id in data.cpu_budgets else None,
            published=_published_rows(g, env_id, data.budgets.get(env_id, 0), last_eval),
        ))

    across = None
    if an.normalised_envs(scored):
        stage("across environments")
        agg = an.across_envs(scored)
        pim = an.improvement_matrix(scored)
        # Best first (as the aggregate figure ranks them), so the top rows and first columns are the leaders.
        have = set(runs.loc[runs["final_norm"].notna(), "label"])
        ranked = [lb for lb in agg.sort_values("iqm", ascending=False)["label"] if lb in have]
        plabels = ranked + sorted(have - set(ranked))
        across = dict(
            aggregate=fig_aggregate(agg, style), profiles=fig_profiles(scored, style),
            improvement=[fig_improvement(pim, plabels, cols) for cols in improvement_blocks(plabels)]
            if len(plabels) > 1 else [],
            table=[dict(label=r.label, impl=r.impl, envs=r.envs, runs=r.runs, iqm=_interval(r.iqm, r.lo, r.hi, r.kind))
                   for r in agg.itertuples()],
        )

    stage("the answers and the decision matrix")
    recs = ans.recommend(scored)
    view = answer_data(data, scored, recs)
    decision = [dict(d, figure=fig_decision(view["matrix"], d["category"]),
                     wall_warning=sorted(e for e in d["env_ids"] if e in warn)) for d in view["decision"]]
    inventory, failures = _inventory(data)
    stage("variants")
    variants = variant_sections(store_url, data, suites, anchors=anchors, log=log)

    # The claims of the suites asked for; by default of every claim suite in the store (which the
    # rest of the report leaves out, see scoring.load).
    stage("claims")
    from bench.analysis import claims as cl

    claim_rows = cl.rows(cl.evaluate(store_url, suites, anchors=anchors))

    from bench.analysis import parity as par

    stage("implementation parity")

    parity_rows = [row for algo, a, b in par.implementation_pairs(runs)
                   for row in parity_table_rows(par.parity(
                       runs, a, b, flagged=set(zip(flagged["key"], flagged["kind"])),
                       checkable=collapse.checkable(data.diagnostics)), algo)]

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    html = env.from_string(TEMPLATE.read_text()).render(
        title="bench report: " + (", ".join(data.suites) or "empty store"),
        generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        store=_describe(data.store_url), suites=data.suites, inventory=inventory, failures=failures,
        provenance=_provenance(data), warnings=warn,
        notes=data.notes, envs=env_sections, across=across, correction=ans.CORRECTION,
        decision=decision, criteria=[(k, v.meaning) for k, v in an.CRITERIA.items()], sensitivity=an.SENSITIVITY,
        lm_criteria=list(cl.LM_CRITERIA.items()) if view["lm"] else [],
        recs=view["recs"], n_runs=len(data.runs), n_pooled=int(len(runs)),
        n_boot=an.N_BOOT, anchors=data.anchors, rules=_rules(), contended=int(runs["contended"].sum()) if len(runs) else 0,
        hardware_line=an.hardware_line(scored), track=view["track"], claims=claim_rows,
        published_source=SOURCE, parity=parity_rows, parity_margin=f"{par.MARGIN:g}", variants=variants,
        off_policy=[line_text(x) for x in off_policy_lines(data, recs)],
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    path.write_text(html, encoding="utf-8")
    if log:
        log(f"report built in {time.perf_counter() - t0:.1f}s from {len(data.runs)} runs")
    return path


def _env_figures(env_id: str, c: an.EnvCurves, g: pd.DataFrame, style: Style, thr: float | None,
                 random: float | None) -> list[str]:
    """An env's curve figures: one four-panel figure for a few labels; above :data:`SMALL_MULTIPLES`
    labels, small multiples of the returns and the Kaplan-Meier curves beside them."""
    if g["label"].nunique() <= SMALL_MULTIPLES:
        return [fig_env(env_id, c, g, style, thr, random)]
    return [fig_env_panels(env_id, c, style, thr, random), fig_env_km(env_id, c, g, style)]


def _only(data: an.Data, envs: list[str], keep: Callable[[pd.DataFrame], pd.Series] | None = None) -> an.Data:
    """``data`` cut to the runs on ``envs`` (and, with ``keep``, to the runs it selects)."""
    import dataclasses

    mask = data.runs["env"].isin(envs)
    if keep is not None:
        mask &= keep(data.runs)
    runs = data.runs[mask].reset_index(drop=True)
    keys = set(runs["key"])
    return dataclasses.replace(data, runs=runs, episodes=data.episodes[data.episodes["key"].isin(keys)],
                               diagnostics=data.diagnostics[data.diagnostics["key"].isin(keys)],
                               traits={e: t for e, t in data.traits.items() if e in envs})


def variant_sections(store_url: str, data: an.Data, suites: list[str] | None, *, anchors: bool = True,
                     log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The report's section per variant suite (``variant:``; ``bench tune --export`` writes ``tuned``):
    its labels beside the runs of the report's other suites on the same envs, in one decision matrix
    per category, and the answer by algorithm from each side alone (the other suites v the variant).

    The answers elsewhere in the report leave variants out (:func:`bench.analysis.scoring.load`): they
    compare algorithms at one effort. Suites named on the command line are reported as named, with no
    section. Each entry: name, variant, envs, decision (as the main matrix's), answers (rows of both sides).
    """
    if suites:
        return []
    from bench.storage.store import Store

    out = []
    db = Store(store_url, readonly=True)
    for name, variant in an.variant_suites(store_url).items():
        mine = db.runs_frame(name)  # the runs table only: which envs and labels, before anything is read
        envs = sorted(mine.loc[mine["status"] == "done", "env"].unique())
        base = sorted(data.runs.loc[data.runs["env"].isin(envs), "suite"].unique()) if envs else []
        if not base:
            if log:
                log(f"variant suite {name!r}: no runs of other suites on its envs to set it beside")
            continue
        both = _only(an.load(store_url, [name, *base], anchors=anchors, diagnostics=[]), envs)
        scored = an.score(both)
        dm = mx.decision_matrix(scored, both.sensitivity, recs=ans.recommend(scored, track_record=False))
        ours = set(mine["label"])
        # Each side named by what it is: the variant, and the suites whose runs it varies.
        sides = [(", ".join(base), _only(both, envs, lambda r: ~r["label"].isin(ours))),
                 (variant, _only(both, envs, lambda r: r["label"].isin(ours)))]
        answers = []
        for side, d in sides:
            for row in ans.recommendation_rows(ans.recommend(an.score(d))):
                if row.get("envs"):
                    answers.append(dict(row, side=side))
        out.append(dict(
            name=name, variant=variant, envs=", ".join(envs), base=", ".join(base), answers=answers,
            decision=[dict(category=cat, envs=", ".join(e), criteria=mx.criteria_of(dm, cat), rows=mx.decision_rows(dm, cat))
                      for cat, e in an.categories(scored).items()]))
    db.dispose()
    return out


def parity_table_rows(envs: list[Any], algo: str = "") -> list[dict[str, str]]:
    """Display rows of :func:`bench.analysis.parity.parity` results: one per env and metric (the report's
    parity table and ``bench parity`` print the same)."""
    def pair(d: dict[str, float], fmt: str) -> str:
        return " / ".join("—" if not np.isfinite(v) else format(v, fmt) for v in d.values()) if d else "—"

    rows = []
    for ep in envs:
        for c in ep.comparisons:
            lo, hi = c.ci
            diff = f"{c.diff:+.3f}" + (f" [{lo:+.3f}, {hi:+.3f}]" if np.isfinite(lo) and lo != hi else "")
            note = (f"{c.seeds_needed} runs per label needed" if c.seeds_needed else
                    c.reason if c.verdict != "inconclusive" or not np.isfinite(lo) else "")
            rows.append(dict(algo=algo, a=ep.label_a, b=ep.label_b, env=ep.env, metric=c.metric, diff=diff,
                             verdict=c.verdict, note=note, runs=f"{c.n_a} / {c.n_b}",
                             success=pair(ep.success, ".2f"), median_steps=pair(ep.median_steps, ",.0f"),
                             collapsed=pair(ep.collapsed, ".2f")))
    return rows


def _last_evaluations(store_url: str, runs: pd.DataFrame) -> dict[str, float]:
    """Run key → its last evaluation's mean return, for runs on envs with a published number."""
    from bench.analysis.published import PUBLISHED
    from bench.storage.store import Store

    envs = {e for _, e in PUBLISHED}
    keys = runs.loc[runs["env"].isin(envs), "key"].tolist() if len(runs) else []
    return Store(store_url, readonly=True).last_evaluations(keys) if keys else {}


def _published_rows(g: pd.DataFrame, env_id: str, budget: int, last_eval: dict[str, float]) -> list[dict[str, Any]]:
    """One row per label of ``g`` (one env's pooled runs) whose algorithm has a published number.

    The zoo evaluates its one trained agent's deterministic policy, so each run contributes its last
    periodic evaluation where the suite asked for evaluations, else its final (trailing-mean, stochastic
    policy) training return, and the row says which.
    """
    from bench.analysis.published import check, published_for

    rows = []
    for label, r in g.groupby("label", sort=True):
        pub = published_for(str(r["algo"].iloc[0]), env_id)
        if pub is None:
            continue
        evals = [last_eval.get(k) for k in r["key"]]
        use_eval = all(v is not None for v in evals)
        values = np.array(evals if use_eval else r["final_return"].to_numpy(float), dtype=float)
        values = values[np.isfinite(values)]
        if values.size == 0:
            continue
        c = check(values, pub, budget)
        rows.append(dict(
            label=label, algo=pub.algo, impl=str(r["impl"].iloc[0]), runs=c.runs,
            ours=f"{c.median:.4g} [{c.q25:.4g}, {c.q75:.4g}]",
            measure="last evaluation (deterministic)" if use_eval else "final training return (trailing mean)",
            zoo=f"{pub.mean:.4g} ± {pub.std:.3g}", zoo_env=pub.zoo_env, zoo_budget=f"{pub.timesteps:,}",
            verdict=("more than one IQR below the zoo" if c.below else
                     "within one IQR of the zoo or above" if c.same_budget else
                     f"not comparable: budget {budget:,} vs the zoo's {pub.timesteps:,}"),
            below=c.below,
        ))
    # A flag asks "this implementation or these settings?": the SB3 baseline ran the same settings beside it.
    for row in rows:
        if not row["below"] or row["impl"] == "sb3":
            continue
        sb3 = [o for o in rows if o["algo"] == row["algo"] and o["impl"] == "sb3"]
        if sb3:
            o = sb3[0]
            row["verdict"] += (f"; so is {o['label']} with the same settings: the settings, not this implementation"
                               if o["below"] else
                               f", where {o['label']} with the same settings is not: look at this implementation")
    return rows


def _describe(url: str) -> str:
    from bench.storage.urls import describe_url

    return describe_url(url)


def _bytes(m: dict[str, int] | None) -> str:
    """``model_memory`` as a short text: total, and how much of it is optimiser state."""
    if not m or not m.get("total_bytes"):
        return "—"
    kb = lambda b: f"{b / 1024:,.0f} KiB" if b < 1024 ** 2 else f"{b / 1024 ** 2:,.1f} MiB"  # noqa: E731
    return f"{kb(m['total_bytes'])} ({kb(m.get('optimizer_bytes', 0))} optimiser)"


#: A score with its interval, as every table of the page writes it (``bench recommend`` prints the same).
_interval = mx.interval_text


def _rules() -> dict[str, Any]:
    from bench.analysis import collapse

    from bench.analysis.generalise import MIN_ENVS_GENERALISE

    return dict(alpha=an.ALPHA, min_seeds=an.MIN_SEEDS, min_envs=an.MIN_ENVS, min_ci=stats.MIN_CI_RUNS,
                min_envs_generalise=MIN_ENVS_GENERALISE,
                min_cvar=stats.MIN_CVAR_CI_RUNS, contention=an.CONTENTION_RATIO, cvar=an.CVAR_ALPHA,
                log_std_drop=collapse.LOG_STD_DROP, stall=collapse.STALL, spike=collapse.SPIKE_FACTOR)


# --------------------------------------------------------------------------- #
# Screenshot (headless Chromium)
# --------------------------------------------------------------------------- #
def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if p := shutil.which(name):
            return p
    return None


#: Flags for a quiet, offline, throwaway headless browser.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars")


def screenshot(html: Path, png: Path, *, width: int = 1400, height: int = 2400, timeout: float = 120) -> Path:
    """Render ``html`` in headless Chromium and save the top ``width × height`` pixels as ``png``.

    :raises FileNotFoundError: no Chromium on PATH (Debian: ``apt-get install chromium``).
    """
    import tempfile

    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
    png = png.resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
                        f"--window-size={width},{height}", html.resolve().as_uri()],
                       capture_output=True, timeout=timeout, check=False)
    if not png.is_file():
        raise RuntimeError(f"chromium did not write {png}")
    return png


#: A point with its interval as the report prints it (``0.61 [0.52, 0.70]``): public, for ``bench recommend``
#: (:func:`bench.api.recommend`), which prints the language-model criteria as the decision matrix does.
interval_text = _interval
