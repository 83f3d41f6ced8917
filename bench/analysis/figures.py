"""The report's figures: seaborn/matplotlib (Agg backend, the colour-blind-safe "colorblind" palette),
each returned as a base64 PNG for :mod:`bench.analysis.report` to embed in its page.

Per environment: learning curves vs steps and vs CPU seconds with IQM and 95% bootstrap bands, the
Kaplan-Meier fraction solved, diagnostics; across environments: the normalised IQM with its intervals,
performance profiles, probability of improvement; the decision matrix. Drawing only: the numbers come
from :mod:`bench.analysis.scoring` and :mod:`bench.stats.aggregate`.
"""

from __future__ import annotations

import base64
import functools
import io
import threading
import warnings
from contextlib import contextmanager
from typing import Any, Callable

import numpy as np
import pandas as pd

import bench.analysis.scoring as an
from bench.stats import aggregate as stats, survival
from bench.analysis.style import algo_order, guess_algo, styles

#: Bootstrap replicates for the bands of curves (per grid point).
CURVE_BOOT = 200
DPI = 72
#: Pixels per figure pixel in the PNGs: the page shows them at DPI per inch (``srcset ... 2x``), sharp on a
#: high-density screen and when zoomed.
DENSITY = 2
#: The least font size (points) of a figure's text that a reader must read: legends, ticks, panel titles. The
#: page shows a figure at DPI pixels per inch, one point per CSS pixel, so 10 pt is 10 px at 100% zoom.
MIN_FONT = 10


@functools.cache
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.9)
    # Ticks and legends at MIN_FONT: seaborn's notebook context at this scale sets them to 9.9 pt.
    plt.rcParams.update({k: MIN_FONT for k in ("xtick.labelsize", "ytick.labelsize", "legend.fontsize",
                                               "legend.title_fontsize")})
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


@functools.cache
def _in_view_locator():
    from matplotlib.ticker import MaxNLocator

    class InView(MaxNLocator):
        """:class:`~matplotlib.ticker.MaxNLocator`'s ticks, less those outside the view.

        MaxNLocator also returns the steps just beyond the axis limits, and matplotlib builds a tick object
        (two lines, two texts and a gridline) for each location before it drops those outside the view: up
        to a third of an axis's tick objects, made only to be thrown away. The drawn ticks, their labels and
        their offset text are the same, since the formatter's offset and precision come from the ticks in
        view (docs/performance.md).
        """

        def __call__(self):
            vmin, vmax = self.axis.get_view_interval()
            locs = self.tick_values(vmin, vmax)
            lo, hi = min(vmin, vmax), max(vmin, vmax)
            slack = 1e-10 * (hi - lo)
            inside = locs[(locs >= lo - slack) & (locs <= hi + slack)]
            return inside if len(inside) >= 2 else locs

    return InView


def _few_ticks(ax) -> None:
    """At most ~5 ticks per axis: enough to read, and every tick costs drawing time."""
    in_view = _in_view_locator()
    ax.xaxis.set_major_locator(in_view(5))
    ax.yaxis.set_major_locator(in_view(5))


def overflow(fig) -> float:
    """How far, in inches, the drawn artists of ``fig`` reach past its edges (0: nothing is clipped).
    Needs ``fig`` drawn (``fig.canvas.draw()``)."""
    bb = fig.get_tightbbox(fig.canvas.get_renderer())
    w, h = fig.get_size_inches()
    return float(max(0.0, -bb.x0, -bb.y0, bb.x1 - w, bb.y1 - h))


def touches_edge(fig) -> bool:
    """Whether anything drawn on ``fig``'s canvas reaches its outermost pixels (needs ``fig`` drawn).

    Every artist of a report figure is anchored inside it, so one cut at an edge leaves its cut pixels in the
    edge row or column; a figure with none cannot be clipped, and :func:`overflow` (a layout of every artist,
    about a tenth of a figure's drawing time) is asked only of the others."""
    a = np.asarray(fig.canvas.buffer_rgba())
    face = np.round(np.asarray(fig.get_facecolor()) * 255)
    edges = np.concatenate([a[0], a[-1], a[:, 0], a[:, -1]]).astype(float)
    return bool(np.any(edges != face))


def _png(fig) -> str:
    """``fig`` as a base64 PNG, drawn once with its fixed margins; if a label would then be clipped at an
    edge (a long tick label or legend entry), saved again with ``bbox_inches="tight"`` so nothing is cut."""
    import matplotlib.pyplot as plt

    fig.set_dpi(DPI * DENSITY)
    fig.canvas.draw()
    buf = io.BytesIO()
    if touches_edge(fig) and overflow(fig) > 0.02:
        fig.savefig(buf, format="png", dpi=DPI * DENSITY, bbox_inches="tight", pad_inches=0.08)
    else:  # the canvas already holds the picture: encode it rather than draw it again
        plt.imsave(buf, np.asarray(fig.canvas.buffer_rgba()), format="png", dpi=DPI * DENSITY)
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
            solved = g["solved"].to_numpy(bool)
            times = survival.censored_at_budget(g[col].to_numpy(float), solved)  # as the table's medians
            f, lo, hi = survival.kaplan_meier_band(times, solved, grid, n_boot=500)
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
    for row, title in ((0, "IQM over seeds, 95% CI"), (1, "unsolved runs censored at the budget")):
        handles, labels = axes[row, 0].get_legend_handles_labels()
        if handles:
            axes[row, 1].legend(handles, labels, fontsize=MIN_FONT, loc="upper left", bbox_to_anchor=(1.02, 1),
                                title=title, title_fontsize=MIN_FONT)
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
            ax.set_title(f"{algo} · {xlabel}", fontsize=MIN_FONT)
            ax.legend(handles=[h for h in ax.get_lines() if h.get_label() in {legend_text(lb) for lb in labels}],
                      fontsize=MIN_FONT, loc="lower right", handlelength=2.6)
            ax.tick_params(labelsize=MIN_FONT)
            _few_ticks(ax)
            if i % ncols == 0:
                ax.set_ylabel("return", fontsize=MIN_FONT)
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
        axes[1].legend(handles, labels, fontsize=MIN_FONT, loc="upper left", bbox_to_anchor=(1.02, 1),
                       title="unsolved runs censored at the budget\n(no bands above 6 labels)", title_fontsize=MIN_FONT)
    return _png(fig)


def _diagnostic_bands(runs: pd.DataFrame, diags: pd.DataFrame, names: list[str],
                      grid: np.ndarray) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Diagnostic name → label → its (q1, median, q3) over seeds on ``grid``."""
    label_of = dict(zip(runs["key"], runs["label"]))
    out: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for name in names:
        d = diags[(diags["name"] == name) & diags["value"].notna()]
        per_label: dict[str, list[np.ndarray]] = {}
        for key, g in d.groupby("key", sort=False):
            if key in label_of and len(g):
                per_label.setdefault(label_of[key], []).append(
                    # Held at the first value before a run's first update (and at the last after its end).
                    np.interp(grid, g["step"].to_numpy(float), g["value"].to_numpy(float)))
        out[name] = {lb: tuple(np.percentile(np.array(cs), [25, 50, 75], axis=0))
                     for lb, cs in sorted(per_label.items())}
    return out


def fig_diagnostics(env_id: str, runs: pd.DataFrame, diags: pd.DataFrame, style: Style, grid: np.ndarray) -> str | None:
    """An env's diagnostics per update (median over seeds, IQR band): one panel per diagnostic; above
    :data:`SMALL_MULTIPLES` labels, small multiples (:func:`_diagnostics_panels`)."""
    names = [n for n in an.DIAGNOSTICS if (diags["name"] == n).any()]
    if not names:
        return None
    bands = _diagnostic_bands(runs, diags, names, grid)
    if runs["label"].nunique() > SMALL_MULTIPLES:
        return _diagnostics_panels(env_id, bands, style, grid)
    plt, _ = _plt()
    width = 3.2 * len(names) + 2.9
    fig, axes2 = _figure(plt, len(names), width, 3.2, right=2.1, top=0.65, wspace=0.35)
    for ax, name in zip(axes2, names):
        for label, (q1, mid, q3) in bands[name].items():
            ax.plot(grid, mid, **style.line(label), lw=1.5)
            ax.fill_between(grid, q1, q3, color=style.color[label], alpha=0.15, lw=0)
        ax.set_title(name)
        ax.set_xlabel("env steps")
        _few_ticks(ax)
    axes2[0].set_ylabel("median over seeds (band: IQR)")
    axes2[-1].legend(fontsize=MIN_FONT, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle(f"{env_id}: diagnostics per update", y=0.99)
    return _png(fig)


def _diagnostics_panels(env_id: str, bands: dict[str, dict[str, tuple]], style: Style, grid: np.ndarray) -> str:
    """Small multiples of the diagnostics: a row per algorithm (its implementations in colour, the other
    labels faint grey behind), a column per diagnostic, each column on one y scale."""
    plt, _ = _plt()
    names = list(bands)
    groups = style.groups(sorted({lb for b in bands.values() for lb in b}))
    pw, ph = 3.0, 1.9
    left, right, top, bottom = 0.9, 0.2, 0.8, 0.6
    width, height = left + len(names) * pw + right, top + len(groups) * ph + bottom
    fig, axes = plt.subplots(len(groups), len(names), figsize=(width, height), squeeze=False, sharex=True,
                             sharey="col")
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=0.3, hspace=0.45)
    for i, (algo, labels) in enumerate(groups.items()):
        for j, name in enumerate(names):
            ax = axes[i, j]
            for lb, (_, mid, _) in bands[name].items():
                if lb not in labels:
                    ax.plot(grid, mid, color="0.82", lw=0.8, zorder=1)
            for lb in labels:
                if lb in bands[name]:
                    q1, mid, q3 = bands[name][lb]
                    ax.plot(grid, mid, **style.line(lb), lw=1.6, zorder=3)
                    ax.fill_between(grid, q1, q3, color=style.color[lb], alpha=0.2, lw=0, zorder=2)
            ax.set_title(f"{algo} · {name}", fontsize=MIN_FONT)
            ax.tick_params(labelsize=MIN_FONT)
            _few_ticks(ax)
            if j == 0:
                ax.legend(handles=[h for h in ax.get_lines() if h.get_label() in {legend_text(lb) for lb in labels}],
                          fontsize=MIN_FONT, loc="best", handlelength=2.6)
        axes[i, 0].set_ylabel("median", fontsize=MIN_FONT)
    for j in range(len(names)):
        axes[-1, j].set_xlabel("env steps", fontsize=MIN_FONT)
    fig.suptitle(f"{env_id}: diagnostics per update, one row per algorithm\nmedian over seeds with IQR; "
                 "grey: the other labels", fontsize=11, y=1 - 0.1 / height, va="top")
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


def fig_profiles(runs: pd.DataFrame, style: Style) -> str:
    """Performance profiles of the scored runs ``runs`` (``label, env, final_norm``; one row per run)."""
    plt, _ = _plt()
    r = runs[runs["final_norm"].notna()]
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
    ax.legend(fontsize=MIN_FONT, loc="upper left", bbox_to_anchor=(1.02, 1))
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
    left = 0.3 + 0.085 * max(len(lb) for lb in labels)  # MIN_FONT tick labels
    bottom = 0.4 + 0.068 * max(len(lb) for lb in columns)
    width, height = left + 0.95 * len(columns) + 1.3, bottom + 0.5 * len(labels) + 0.5
    fig, (ax,) = _figure(plt, 1, width, height, left=left, right=1.3, bottom=bottom, top=0.5)
    sns.heatmap(m, annot=ann.values, fmt="", cmap="vlag", vmin=0, vmax=1, center=0.5, ax=ax, annot_kws={"fontsize": 8},
                cbar_kws={"label": "P(row > column)", "fraction": 0.6 / (0.95 * len(columns) + 0.6), "pad": 0.02})
    ax.grid(False)
    ax.tick_params(labelsize=MIN_FONT)
    ax.set_xticklabels(ax.get_xticklabels(), rotation=35, ha="right", rotation_mode="anchor")
    ax.set_xlabel("Y")
    ax.set_ylabel("X")
    part = "" if columns == labels else f" (columns {labels.index(columns[0]) + 1}–{labels.index(columns[-1]) + 1} of {len(labels)})"
    ax.set_title(f"P(X > Y), normalised final return, 95% CI{part}", fontsize=10)
    return _png(fig)


def env_figures(env_id: str, c: an.EnvCurves, g: pd.DataFrame, style: Style, thr: float | None,
                random: float | None) -> list[str]:
    """An env's curve figures: one four-panel figure for a few labels; above :data:`SMALL_MULTIPLES`
    labels, small multiples of the returns and the Kaplan-Meier curves beside them."""
    if g["label"].nunique() <= SMALL_MULTIPLES:
        return [fig_env(env_id, c, g, style, thr, random)]
    return [fig_env_panels(env_id, c, style, thr, random), fig_env_km(env_id, c, g, style)]


class Painter:
    """Draws the report's figures in worker processes while the caller goes on with the tables.

    Drawing is most of a large report's CPU time (each figure takes a few hundred ms of matplotlib, and the
    shipped reference has ~80 of them); the figures are independent, so they are drawn ``workers`` at a time.
    Each figure function seeds its own generator, so a figure is the same PNG in a worker as in the caller.
    Workers are forked from a server that has imported matplotlib and this module once (``forkserver``;
    ``spawn`` where there is none). With ``workers == 0`` every figure is drawn at once, in this process.

    :meth:`draw` returns a future: ``.result()`` gives the figure (a figure function's error is raised there).
    Where workers cannot be started (a sandbox without the semaphores multiprocessing needs), or one dies
    (killed for memory), the figures are drawn in this process instead: the report is slower, never lost.
    """

    def __init__(self, workers: int):
        self.workers = max(0, int(workers))
        self._pool = None
        if self.workers > 0:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
            ctx = mp.get_context(method)
            if method == "forkserver":  # matplotlib and seaborn imported once, in the server, not per worker
                ctx.set_forkserver_preload(["matplotlib.pyplot", "seaborn", __name__])
            try:
                self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx)
            except (OSError, NotImplementedError, RuntimeError):
                self._pool = None
        self._started = threading.Event()
        if self._pool is None:
            self._started.set()
        else:
            # The first worker's start waits for the server to import matplotlib (a CPU second or two): done in
            # a thread, so that the caller reads and scores meanwhile; the first figure waits for it (draw).
            threading.Thread(target=self._start, name="painter-start", daemon=True).start()

    def _start(self) -> None:
        """Start every worker (one per job submitted while none is idle), without the caller's ``__main__``."""
        try:
            with _main_hidden():
                for _ in range(self.workers):
                    self._pool.submit(_plt_ready)
        except (OSError, NotImplementedError, RuntimeError):  # no semaphores here: draw in the caller instead
            pool, self._pool = self._pool, None
            pool.shutdown(wait=False, cancel_futures=True)
        finally:
            self._started.set()

    def draw(self, fn: Callable[..., Any], *args: Any):
        from concurrent.futures import Future
        from concurrent.futures.process import BrokenProcessPool

        self._started.wait()
        if self._pool is not None:
            try:
                return _Drawing(self._pool.submit(fn, *args), fn, args)
            except BrokenProcessPool:
                self.close()
        done: Future = Future()
        done.set_result(fn(*args))
        return done

    def close(self) -> None:
        self._started.wait()  # a pool is shut down once its workers have started, not while they start
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "Painter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Drawing:
    """A figure being drawn in a worker; :meth:`result` draws it here if the worker died first."""

    def __init__(self, future: Any, fn: Callable[..., Any], args: tuple):
        self.future, self.fn, self.args = future, fn, args

    def result(self) -> Any:
        from concurrent.futures.process import BrokenProcessPool

        try:
            return self.future.result()
        except BrokenProcessPool:
            return self.fn(*self.args)


@contextmanager
def _main_hidden():
    """The caller's ``__main__`` module hidden from :mod:`multiprocessing` while workers start.

    A ``forkserver`` or ``spawn`` child runs the parent's main script again (as ``__mp_main__``) so that it
    can unpickle functions defined there; a script that calls :func:`bench.api.report` at its top level,
    with no ``if __name__ == "__main__":`` guard, would then build a report inside every worker and fail.
    The workers run functions of this module only, so they need nothing of the caller's script.
    """
    import sys

    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None and k in main.__dict__}
    try:
        for k in saved:
            if k == "__spec__":
                main.__spec__ = None
            else:
                del main.__dict__[k]
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)


def _plt_ready() -> None:
    """A worker's first job: matplotlib and seaborn imported and themed before the first figure comes."""
    _plt()
