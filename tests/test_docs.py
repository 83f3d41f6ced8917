"""The README and the documentation: short front page, exactly two quick-start commands, links that
resolve, and figures that trace to the commands and measurement files they came from."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _blocks(text: str, lang: str = "") -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_readme_is_short_and_its_quick_start_is_exactly_two_commands():
    assert len(README.splitlines()) <= 150
    (block,) = _blocks(_section(README, "Quick start"), "bash")
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]
    assert commands == ["make quickstart", "make test"]


def test_readme_links_resolve():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    assert targets, "the README links to the documentation"
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert not missing, missing


@pytest.fixture(scope="module")
def reference_cwd(tmp_path_factory):
    """A folder whose results/reference is the shipped one, and a cache of its own built from the packs once."""
    d = tmp_path_factory.mktemp("reference")
    (d / "results").mkdir()
    (d / "results" / "reference").symlink_to(ROOT / "results" / "reference")
    return d


@pytest.mark.parametrize("doc, marker", [
    ("README.md", "**Consult the recommendation table.**"),
    # Each builds the reference cache and scores it, a minute or two of CPU: the heavy tier (`nox -s heavy`).
    pytest.param("docs/statistics.md", "**Regenerated example.**", marks=pytest.mark.heavy),
    pytest.param("docs/getting-started.md", "**Its answer for vector observations.**", marks=pytest.mark.heavy)])
def test_recommend_examples_are_what_the_command_prints(reference_cwd, doc, marker):
    """The README's and docs/statistics.md's examples are pasted from real runs (scripts/readme_recommend.py):
    rerun each command on the shipped reference."""
    text = (ROOT / doc).read_text()
    para = text[text.index(marker):]
    cmd = re.search(r"`\.venv/bin/bench (recommend[^`]*)`", para.replace("\n", " ")).group(1).split()
    (shown,) = [b for b in _blocks(para) if b.startswith("bench recommend")][:1]
    env = {**os.environ, "XDG_CACHE_HOME": str(reference_cwd / "cache"), "COLUMNS": "100"}
    p = subprocess.run([sys.executable, "-m", "bench", *cmd], capture_output=True, text=True, cwd=reference_cwd,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "shipped reference" in p.stderr
    printed = "\n".join(line.rstrip() for line in p.stdout.splitlines())
    assert printed.strip("\n") == shown.strip("\n")
    assert max(len(line) for line in printed.splitlines()) <= 100


# --------------------------------------------------------------------------- #
# Figures moved out of the README keep their commands, dates and sources
# --------------------------------------------------------------------------- #
def _num(s: str) -> float:
    return float(s.replace(",", ""))


def test_speed_table_matches_its_measurement_files_and_names_its_commands():
    page = (DOCS / "performance.md").read_text()
    assert "2026-11-24" in page
    for f in ("speed-cartpole.json", "speed-halfcheetah.json", "speed-cartpole-torch.json", "speed-cartpole-vector.json",
              "speed-cartpole-envpool.json", "speed-pong.json", "anchor-jax-cartpole.json"):
        assert f"--json results/{f}" in page  # the command that wrote each file
    # The 2026-11-24 table (its files by env) and the 2026-11-25 one (a file per row): each row is its file's.
    rows = re.findall(r"\| (PPO|A2C|TRPO), ([\w/-]+) \| ([\d,]+) \| ([\d,]+) \| \*\*([\d.]+)×\*\* \|(?: `results/([\w.-]+)` \|)?",
                      page)
    files = {"CartPole-v1": "speed-cartpole.json", "HalfCheetah-v5": "speed-halfcheetah.json"}
    assert len(rows) == 13 and sum(1 for r in rows if r[5]) == 7, rows
    for algo, env, own, sb3, ratio, file in rows:
        file = file or files[env]
        (r,) = [r for r in json.loads((ROOT / "results" / file).read_text())["results"] if r["algo"] == algo.lower()]
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        assert (round(med(r["own_steps_per_s"])), round(med(r["sb3_steps_per_s"]))) == (_num(own), _num(sb3)), algo
        assert f"{r['ratio']:.2f}" == ratio, (algo, env)
    # The time-to-threshold table and the JAX anchor's figures are those of their files.
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    (ppo,) = [r for r in json.loads((ROOT / "results" / "speed-cartpole.json").read_text())["results"] if r["algo"] == "ppo"]
    assert f"| {med(ppo['own_steps_to_threshold']):,} | **{med(ppo['own_cpu_s_to_threshold']):.2f}** |" in page
    assert f"| {med(ppo['sb3_steps_to_threshold']):,} | {med(ppo['sb3_cpu_s_to_threshold']):.2f} |" in page
    anchor = json.loads((ROOT / "results" / "anchor-jax-cartpole.json").read_text())["runs"]
    assert f"**{round(med([a['steps_per_s_after_compile'] for a in anchor])):,} steps/s**" in page
    assert f"**{med([a['cpu_s_to_475_after_compile'] for a in anchor]):.2f}** after its compile" in page


def test_learning_bars_match_the_learning_log_and_name_their_command():
    page = (DOCS / "measurements.md").read_text()
    assert "`nox -s learning`" in page and "Latest, 2026-11-23" in page
    logged = [json.loads(line)["values"] for line in (ROOT / "results" / "learning.jsonl").read_text().splitlines()]
    logged_ints = [[v for v in vals if v is not None] for vals in logged]
    table = _section(page, "Learning bars")
    rows = [r for r in table.splitlines() if r.startswith("| ") and "✔" in r]
    assert len(rows) >= 10, rows
    for row in rows:
        seeds = []
        for part in row.split(" | ")[1].split("·"):  # one value per seed; "not reached" has none
            m = re.search(r"[−-]?\d[\d,]*(?:\.\d+)?", part.split(":")[-1])
            if m:
                seeds.append(_num(m.group().replace("−", "-")))
        assert len(seeds) in (1, 5) or len(seeds) == 4 and "not reached" in row, row
        assert any(all(v in vals for v in seeds) for vals in logged_ints), row


@pytest.mark.parametrize("page, needs", [
    ("measurements.md", ["tests/benchmarks/test_a3c_vs_a2c.py", "Measured 2026-11-23"]),
    ("performance.md", ["tests/benchmarks/test_kernel_step.py", "2026-11-23: 794 against"]),
    ("cluster.md", ["tests/benchmarks/test_ray_overhead.py", "2026-11-23"]),
    ("testing.md", ["2026-11-22: medians 28.06 s and 16.42 s", "2026-11-23 on a quiet 2-core machine"]),
    ("getting-started.md", ["`.venv/bin/bench recommend --obs vector`, regenerated by"]),
    ("statistics.md", ["captured 2026-11-27", "bench report quickstart --out reports/quickstart --screenshot"]),
])
def test_moved_figures_keep_their_commands_and_dates(page, needs):
    text = (DOCS / page).read_text()
    for n in needs:
        assert n in text, (page, n)


def test_readme_reference_costs_are_the_packs_own():
    # Issue 13: the README gives the CPU-hours per category, measured: each row must be what the
    # category's pack.json says (written by `bench export --format pack` from the runs themselves),
    # and every shipped pack has its row.
    rows = re.findall(r"^\| `([\w-]+)` \| (\d+) of (\d+) \| ([\d.]+) \| `(bench run [^`]+)` \|$",
                      _section(README, "Shipped reference"), flags=re.M)
    packs = {p.name: json.loads((p / "pack.json").read_text()) for p in (ROOT / "results" / "reference").iterdir()
             if (p / "pack.json").is_file()}
    # A tuning suite's pack counts its finished trials (complete or pruned) and studies instead of runs.
    tuned = re.findall(r"^\| `([\w-]+)` \| (\d+) trials in (\d+) studies \| ([\d.]+) \| `(bench tune [^`]+)` \|$",
                       _section(README, "Shipped reference"), flags=re.M)
    assert sorted(r[0] for r in rows + tuned) == sorted(packs)
    for name, trials, studies, hours, command in tuned:
        m = packs[name]
        t = m["studies"]["trials"]
        assert (int(trials), int(studies)) == (t.get("complete", 0) + t.get("pruned", 0), m["studies"]["count"]), name
        assert hours == f"{m['cpu_hours']:.2f}", name
        assert (ROOT / command.split()[2]).is_file(), command
    for name, done, total, hours, command in rows:
        m = packs[name]
        shared = sum(m.get("shared_runs", {}).values())
        assert int(done) == m["runs"].get("done", 0) + shared and int(total) == sum(m["runs"].values()) + shared, name
        assert hours == f"{m['cpu_hours']:.2f}", name
        assert (ROOT / command.split()[2]).is_file(), command
