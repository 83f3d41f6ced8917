"""The report at many labels (the quick start has 14): distinct and stable line styles, small multiples,
readable probability-of-improvement heatmaps, nothing clipped, "insufficient evidence" folded, and the
page in headless Chromium."""

from __future__ import annotations

import base64
import html as html_lib
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import analysis
from bench.analysis import figures, report
from bench.analysis.style import cielab, styles
from bench.run.anchors import for_reading

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402

#: The quick start's 14 labels (suites/quickstart.yaml): (label, algo, impl, planted skill).
QUICKSTART = [("ppo-bench", "ppo", "bench", 1.0), ("ppo-sb3", "ppo", "sb3", 1.0), ("a2c-bench", "a2c", "bench", 0.8),
              ("a2c-sb3", "a2c", "sb3", 0.75), ("trpo-bench", "trpo", "bench", 0.95), ("trpo-sb3", "trpo", "sb3", 0.9),
              ("reinforce-bench", "reinforce", "bench", 0.5), ("a3c-bench", "a3c", "bench", 0.7),
              ("grpo-bench", "grpo", "bench", 0.6), ("rloo-bench", "rloo", "bench", 0.55),
              ("reinforce-numpy", "reinforce", "numpy", 0.45), ("ac_mc-bench", "ac_mc", "bench", 0.5),
              ("ac_td-bench", "ac_td", "bench", 0.65), ("npg-bench", "npg", "bench", 0.85)]
#: Twenty labels: the quick start's, SB3's off-policy algorithms, a second configuration and two plugins.
TWENTY = [(lb, a, i) for lb, a, i, _ in QUICKSTART] + [
    ("dqn-sb3", "dqn", "sb3"), ("sac-sb3", "sac", "sb3"), ("td3-sb3", "td3", "sb3"),
    ("ppo-bench-lr3e4", "ppo", "bench"), ("mine-python", "mine", "python"), ("theirs-python", "theirs", "python")]
#: CIE 1976 ΔE below which two colours of one line style are hard to tell apart in a legend (a just
#: noticeable difference is about 2.3; 15 keeps neighbours apart on a white background at a glance).
MIN_DELTA_E = 15.0


def _hue_angle(rgb) -> float:
    _, a, b = cielab(rgb)
    return float(np.degrees(np.arctan2(b, a)))


def test_the_first_20_styles_are_distinct_and_own_and_sb3_read_as_a_pair():
    got = styles(TWENTY)
    assert len({(s.color, str(s.dash), s.marker) for s in got.values()}) == 20
    for (la, a), (lb, b) in itertools.combinations(got.items(), 2):
        if str(a.dash) == str(b.dash):  # the same dash: the colours alone must tell them apart
            d = float(np.linalg.norm(cielab(a.color) - cielab(b.color)))
            assert d >= MIN_DELTA_E, (la, lb, round(d, 1))
    for algo in ("ppo", "a2c", "trpo"):  # one hue, two shades, two dashes
        own, sb3 = got[f"{algo}-bench"], got[f"{algo}-sb3"]
        assert str(own.dash) != str(sb3.dash) and own.marker != sb3.marker
        assert abs(_hue_angle(own.color) - _hue_angle(sb3.color)) < 20  # one hue family (tints drift a little in CIELAB)
        assert cielab(sb3.color)[0] > cielab(own.color)[0] + 10  # SB3 is the lighter shade


def test_a_label_keeps_its_style_whatever_else_is_in_the_store():
    full = styles(TWENTY)
    for subset in (TWENTY[:3], TWENTY[5:11], list(reversed(TWENTY)), [TWENTY[1], TWENTY[-5]]):
        for label, s in styles(subset).items():
            if label != "ppo-bench-lr3e4" or ("ppo-bench", "ppo", "bench") in subset:
                assert s == full[label], label
    # Algorithms bench does not know take hues by name, apart from the known ones.
    assert full["mine-python"].color != full["theirs-python"].color


def test_a_label_that_would_be_clipped_is_saved_whole(monkeypatch):
    plt, _ = figures._plt()
    fig, (ax,) = figures._figure(plt, 1, 4, 3, bottom=0.2)
    ax.set_xlabel("a label far too long to fit in four inches of figure at this size, " * 2)
    fig.canvas.draw()
    assert figures.overflow(fig) > 1  # the fixed margins cut it...
    assert figures.touches_edge(fig)  # ...and its cut letters are in the edge pixels
    from PIL import Image

    png = Image.open(io.BytesIO(base64.b64decode(figures._png(fig))))
    assert png.size[0] > (4 * figures.DPI + 50) * figures.DENSITY  # ...so the page gets the whole label
    fig, (ax,) = figures._figure(plt, 1, 4, 3)
    ax.plot([0, 1], [0, 1])
    fig.canvas.draw()
    assert not figures.touches_edge(fig) and figures.overflow(fig) == 0
    # At twice the page's pixels per inch (issue 66): the page shows it at 4 × 3 inches, sharp.
    assert Image.open(io.BytesIO(base64.b64decode(figures._png(fig)))).size == (8 * figures.DPI, 6 * figures.DPI)


def test_improvement_blocks_are_even_and_at_most_eight_wide():
    labels = [f"l{i}" for i in range(20)]
    assert [len(b) for b in figures.improvement_blocks(labels)] == [7, 7, 6]
    assert [len(b) for b in figures.improvement_blocks(labels[:14])] == [7, 7]
    assert figures.improvement_blocks(labels[:8]) == [labels[:8]]
    assert sum(figures.improvement_blocks(labels), []) == labels


@pytest.fixture(scope="module")
def fourteen(tmp_path_factory):
    """A 14-label store shaped as the quick start (one env, 3 seeds), its report, and every figure drawn
    for it with how far its artists reach past its edges under its fixed margins."""
    d = tmp_path_factory.mktemp("fourteen")
    url = f"sqlite:///{d / 's.db'}"
    write_store(url, ["CartPole-v1"], [Planted(lb, a, i, skill=s, tau=0.2 + 0.03 * k)
                                       for k, (lb, a, i, s) in enumerate(QUICKSTART)], seeds=3, suite="quickstart").dispose()
    figs: list[dict] = []
    png = figures._png

    def recording(fig):
        fig.set_dpi(figures.DPI)
        fig.canvas.draw()
        texts = [t for t in fig.findobj(lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text"))
                 if t.get_visible() and t.get_text().strip()]
        shown = [a for a in fig.axes if a.get_visible()]
        read = [t for a in shown for t in [*a.get_xticklabels(), *a.get_yticklabels(), a.title,
                                           *(a.get_legend().get_texts() if a.get_legend() else [])]
                if t.get_visible() and t.get_text().strip()]
        figs.append(dict(title=fig._suptitle.get_text() if fig._suptitle else " | ".join(a.get_title() for a in fig.axes),
                         axes=shown, overflow=figures.overflow(fig),
                         min_font=min(t.get_fontsize() for t in texts), size=tuple(fig.get_size_inches()),
                         min_read=min(t.get_fontsize() for t in read)))
        return png(fig)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "_png", recording)
        page = report.build(url, d / "rep", anchors=for_reading)
    return dict(url=url, page=page, html=page.read_text(), figs=figs)


def test_fourteen_labels_get_small_multiples_one_panel_per_algorithm(fourteen):
    (panels,) = [f for f in fourteen["figs"] if "one panel per algorithm" in f["title"]]
    algos = sorted({a for _, a, _, _ in QUICKSTART})
    titles = [a.get_title() for a in panels["axes"]]
    assert len(titles) == 2 * len(algos)  # against env steps and against CPU seconds
    for algo in algos:
        assert f"{algo} · env steps" in titles and f"{algo} · training CPU seconds" in titles
    ax = panels["axes"][titles.index("ppo · env steps")]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["ppo-bench", "ppo-sb3"]  # own and SB3 together, the others only faint grey behind


def test_fourteen_labels_get_diagnostics_as_small_multiples_one_row_per_algorithm(fourteen):
    """Issue 66: above 6 labels the diagnostics are a row per algorithm, a column per diagnostic, not 14
    lines in each of a few panels."""
    (panels,) = [f for f in fourteen["figs"] if "diagnostics per update" in f["title"]]
    assert "one row per algorithm" in panels["title"]
    algos = sorted({a for _, a, _, _ in QUICKSTART})
    titles = [a.get_title() for a in panels["axes"]]
    assert len(titles) == 2 * len(algos)  # the store records entropy and approximate KL
    for algo in algos:
        assert f"{algo} · policy/entropy" in titles and f"{algo} · policy/approx_kl" in titles
    ax = panels["axes"][titles.index("trpo · policy/entropy")]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["trpo-bench", "trpo-sb3"]


def test_legend_tick_and_panel_title_text_is_at_least_10_px_at_fourteen_labels(fourteen):
    """Issue 66: a figure is shown at one point per CSS pixel, so its legends, ticks and panel titles are drawn at
    10 pt or more, to read at 100% zoom."""
    small = {f["title"][:60]: f["min_read"] for f in fourteen["figs"] if f["min_read"] < 10}
    assert not small, small


def test_few_labels_keep_the_single_four_panel_figure(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, ["CartPole-v1"], [Planted(lb, a, i, s) for lb, a, i, s in QUICKSTART[:4]], seeds=3).dispose()
    titles = []
    monkeypatch.setattr(figures, "_png", lambda fig: titles.append([a.get_title() for a in fig.axes]) or "")
    report.build(url, tmp_path / "rep", anchors=False)
    assert ["return vs env steps", "return vs training CPU seconds", "solved by env steps (Kaplan-Meier)",
            "solved by CPU seconds (Kaplan-Meier)"] in titles
    assert not any("ppo · env steps" in t for t in titles)


def test_fourteen_labels_split_the_heatmap_and_keep_its_text_readable(fourteen):
    heat = [f for f in fourteen["figs"] if "P(X > Y)" in f["title"]]
    assert len(heat) == 2 and all("of 14)" in f["title"] for f in heat)
    page_px = 1320 - 2 * 32  # the page's max-width less its padding (report.html.j2)
    for f in heat:
        assert f["size"][0] * figures.DPI <= page_px  # shown at its own size, not shrunk
        assert f["min_font"] >= 8
    # Each label is a row of both blocks, and a column of exactly one.
    cols = [[t.get_text() for t in f["axes"][0].get_xticklabels()] for f in heat]
    assert sorted(cols[0] + cols[1]) == sorted(lb for lb, *_ in QUICKSTART)


def test_no_figure_is_clipped_at_fourteen_labels(fourteen):
    clipped = {f["title"][:60]: round(f["overflow"], 2) for f in fourteen["figs"] if f["overflow"] > 0.02}
    assert not clipped, clipped


def test_insufficient_evidence_rows_are_folded_into_one_line(fourteen):
    page = fourteen["html"]
    rows = analysis.recommendation_rows(analysis.recommend(analysis.score(analysis.load(fourteen["url"]))))
    folded = [r for r in rows if r["verdict"] == "insufficient evidence"]
    assert 0 < len(folded) < len(rows)
    main = re.search(r'<table id="recommendation-table">(.*?)</table>', page, re.S).group(1)
    assert "verdict-insufficient" not in main and main.count("<tr class=") == len(rows) - len(folded)
    details = re.search(r'<details id="insufficient-evidence"><summary>(.*?)</summary>(.*?)</details>', page, re.S)
    summary = html_lib.unescape(re.sub(r"<[^>]+>", "", details.group(1)))
    assert summary.startswith(f"Insufficient evidence for {len(folded)} of {len(rows)} rows")
    assert "continuous vector dense" in summary
    assert details.group(2).count('<tr class="verdict-insufficient">') == len(folded)


#: Injected into a copy of the page (test-only): every image's natural and shown width, and errors.
PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || e.type).slice(0, 200)), true);
window.addEventListener('load', () => {
  const imgs = [...document.images];
  const r = {errors: window.__errors, content: document.body.clientWidth,
             images: imgs.map(i => ({alt: i.alt, ok: i.complete && i.naturalWidth > 0, natural: i.naturalWidth, shown: i.width})),
             details: document.querySelectorAll('details#insufficient-evidence summary').length};
  const pre = document.createElement('pre'); pre.id = '__probe'; pre.textContent = JSON.stringify(r); document.body.appendChild(pre);
});
</script>"""


def _section(body: str, section_id: str) -> str:
    start = body.index(f'<section id="{section_id}"')
    return body[start:body.index("</section>", start) + len("</section>")]


@pytest.mark.slow
@pytest.mark.heavy
def test_fourteen_label_report_in_headless_chromium(fourteen, tmp_path):
    """Load the 14-label page in Chromium: every figure decodes, none is shrunk below its drawn size (so
    8 pt stays 8 pt), the folded rows have their one line; then screenshot it. ``BENCH_SCREENSHOTS=DIR``
    keeps the screenshots (docs/figures/report-14-*.png come from here)."""
    exe = report.find_chromium()
    if exe is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    probe = tmp_path / "probe.html"
    probe.write_text(fourteen["html"].replace("<head>", "<head>" + PROBE, 1))
    r = subprocess.run([exe, *report.CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000",
                        "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()], capture_output=True, text=True,
                       timeout=120)
    m = re.search(r'<pre id="__probe">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stderr[-2000:]
    res = json.loads(html_lib.unescape(m.group(1)))
    assert res["errors"] == [] and res["details"] == 1, res
    assert all(i["ok"] for i in res["images"]), [i["alt"] for i in res["images"] if not i["ok"]]
    shrunk = [i for i in res["images"] if i["shown"] < i["natural"]]
    assert not shrunk, shrunk
    # Screenshots of the page's top (the answer and the per-env figures) and of the heatmaps.
    shots = tmp_path / "shots"
    shots.mkdir()
    head, body = fourteen["html"].split("<body>", 1)
    for name, section in (("curves", "env-cartpole-v1"), ("across", "across"), ("recommendations", "recommendations")):
        # The page cut to one section (a scrolled headless screenshot paints only part of the viewport).
        page = fourteen["page"].with_name(f"{name}.html")
        page.write_text(f"{head}<body>{_section(body, section)}</body></html>")
        png = report.screenshot(page, shots / f"report-14-{name}.png", width=1400, height=1800)
        from PIL import Image

        im = np.asarray(Image.open(png).convert("RGB")).astype(float) / 255
        assert im.shape[:2] == (1800, 1400) and (im.min(axis=2) < 0.9).mean() > 0.01  # a page, not a blank
        if name == "curves":  # every label's own colour is on screen: 14 series, told apart by colour
            pal = styles([(lb, a, i) for lb, a, i, _ in QUICKSTART])
            seen = {lb: int((np.abs(im - np.array(s.color)).max(axis=2) < 0.03).sum()) for lb, s in pal.items()}
            assert min(seen.values()) >= 50, seen
    if out := os.environ.get("BENCH_SCREENSHOTS"):
        for f in shots.iterdir():
            shutil.copy(f, Path(out) / f.name)
