"""Summarise a pack's finished runs for docs/reference.md: one Markdown table per env, and the cost lines.

    .venv/bin/python scripts/pack_summary.py results/reference/highway-two-way [more packs]

Per label (algorithm × implementation): mean final return over the last ``window`` training episodes with its
min-max over seeds, the seeds whose windowed mean crossed the env's threshold and their median steps to it, and
CPU µs per step (an agent step where the env repeats actions) with its min-max, and the mean training return of
the episodes ending in the first and in the last tenth of the budget (learning, or flat). Under each table: runs done,
CPU- and wall-hours, the range of wall / CPU (a run is contended past 1.25), each machine (CPU model and CPUID)
with its runs, and the random policy's anchor. A time axis (``registry.TIME_SCALE_US``) is the slowest label's
mean rounded up to 100 µs (docs/reference.md, "Time axes"); the line that says so names that label.

Reads the pack's Parquet files as data (no pickles, nothing executed), and prints only: the numbers in the
docs come from the pack, not from a hand copy.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd

#: Implementation → how the docs name a label's implementation.
_IMPL = {"bench": "own", "sb3": "SB3"}
#: Algorithms that come from sb3-contrib when the implementation is SB3's.
_CONTRIB = {"trpo"}


def label(algo: str, impl: str) -> str:
    """The docs' name of a label: ``own PPO``, ``SB3 A2C``, ``sb3-contrib TRPO``, ``REINFORCE`` (own only)."""
    if algo == "reinforce" and impl == "bench":
        return "REINFORCE"
    who = "sb3-contrib" if impl == "sb3" and algo in _CONTRIB else _IMPL.get(impl, impl)
    return f"{who} {algo.upper()}"


def _meta(x: object) -> dict:
    if isinstance(x, dict):
        return x
    try:
        return json.loads(x) if isinstance(x, str) else {}
    except ValueError:
        return {}


def _num(x: float, digits: int = 1) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:,.{digits}f}".replace("-", "−")


def tenths(runs: pd.DataFrame, episodes: pd.DataFrame | None) -> pd.Series:
    """Per run (index ``key``): ``(first, last)``, the mean training return of the episodes that ended in the
    first and in the last tenth of its budget (NaN where none did); what a final return alone does not say."""
    if episodes is None:
        return pd.Series(dtype=str)
    out = {}
    for key, budget in zip(runs["key"], runs["timesteps"].astype(float)):
        e = episodes[episodes["key"] == key]
        first, last = e[e["step"] <= budget / 10]["ret"], e[e["step"] > budget * 0.9]["ret"]
        out[key] = (float(first.mean()) if len(first) else float("nan"), float(last.mean()) if len(last) else float("nan"))
    return pd.Series(out)


def env_table(runs: pd.DataFrame, episodes: pd.DataFrame | None = None) -> str:
    """Markdown table, one row per label, best mean final return first. ``runs``: one env's finished runs;
    ``episodes``: the pack's training episodes (for the first and last tenth), or None."""
    thr = float(runs["threshold"].iloc[0])
    ends = tenths(runs, episodes)
    rows = []
    for (algo, impl), g in runs.groupby(["algo", "impl"]):
        fin = g["final_return"].astype(float)
        cross = pd.to_numeric(g["steps_to_threshold"], errors="coerce").dropna()
        us = g["cpu_s"].astype(float) / g["total_steps"].astype(float) * 1e6
        rows.append((float(fin.mean()), label(algo, impl), f"{_num(fin.mean())} ({_num(fin.min())} to {_num(fin.max())})",
                     f"{len(cross)}/{len(g)}", _num(float(cross.median()), 0) if len(cross) else "—",
                     f"{_num(us.mean(), 0)} ({_num(us.min(), 0)}-{_num(us.max(), 0)})",
                     _curve(ends, g["key"])))
    rows.sort(key=lambda r: -r[0])
    head = [f"| label | final return (min to max) | seeds crossing {thr:g} | median steps to it | "
            "CPU µs per step (min-max) | return, first → last tenth |", "|---|---|---|---|---|---|"]
    return "\n".join(head + [f"| {' | '.join(r[1:])} |" for r in rows])


def _curve(ends: pd.Series, keys: pd.Series) -> str:
    """The label's mean over seeds of each run's first- and last-tenth return."""
    if not len(ends):
        return "—"
    pairs = [ends[k] for k in keys if k in ends.index]
    first, last = (float(pd.Series([p[i] for p in pairs]).mean()) for i in (0, 1))
    return f"{_num(first)} → {_num(last)}"


def cost_lines(runs: pd.DataFrame, anchors: pd.DataFrame | None, env: str) -> list[str]:
    """Runs done, hours, wall / CPU, machines, the random anchor and the slowest label for one env."""
    done = runs[runs["status"] == "done"]
    meta = done["meta"].map(_meta)
    machines = meta.map(lambda m: f"{m.get('cpu_model', '?')} (CPUID {m.get('cpu_id', '?')})").value_counts()
    ratio = done["wall_s"].astype(float) / done["cpu_s"].astype(float)
    us = (done["cpu_s"].astype(float) / done["total_steps"].astype(float) * 1e6).groupby(
        [done["algo"], done["impl"]]).mean()
    (algo, impl), slowest = us.idxmax(), float(us.max())
    lines = [f"{len(done)} of {len(runs)} runs done; {done['cpu_s'].sum() / 3600:.2f} CPU-hours, "
             f"{done['wall_s'].sum() / 3600:.2f} wall-hours; wall / CPU {ratio.min():.3f}-{ratio.max():.3f} "
             f"({int((ratio > 1.25).sum())} contended)",
             "machines: " + "; ".join(f"{k}: {v} runs" for k, v in machines.items()),
             f"slowest label: {label(algo, impl)}, mean {slowest:,.0f} µs per step → time axis "
             f"{math.ceil(slowest / 100) * 100:,.0f} µs"]
    if anchors is not None and len(a := anchors[anchors["env_id"] == env]):
        lines.append(f"random policy: {_num(float(a['random_return'].mean()), 2)} over {int(a['episodes'].iloc[0])} episodes")
    return lines


def summarise(pack: Path) -> str:
    runs = pd.read_parquet(pack / "runs.parquet")
    anchors = pd.read_parquet(pack / "anchors.parquet") if (pack / "anchors.parquet").is_file() else None
    episodes = pd.read_parquet(pack / "episodes.parquet") if (pack / "episodes.parquet").is_file() else None
    out = []
    for env, g in runs.groupby("env_id"):
        done = g[g["status"] == "done"]
        out += [f"## {env} ({pack.name})", ""]
        if not len(done):
            out += ["no finished runs", ""]
            continue
        out += [env_table(done, episodes), "", *(f"- {s}" for s in cost_lines(g, anchors, env)), ""]
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: scripts/pack_summary.py PACK_DIR [PACK_DIR ...]")
    for p in sys.argv[1:]:
        if not (Path(p) / "runs.parquet").is_file():
            raise SystemExit(f"{p}: no runs.parquet; give a pack folder (results/reference/<name>)")
        print(summarise(Path(p)))
