"""The leave-one-env-out track table of docs/statistics.md ("Defaults: the track record"), from the shipped reference.

    .venv/bin/python scripts/track_table.py            # runs `bench recommend --format json`
    .venv/bin/python scripts/track_table.py rec.json   # or reads what it printed

Prints one Markdown row per profile and priority with a record (``choice_track_fields``), then the means the text
below the table quotes: the default's and the single best's regret, each weighted by trials (each held-out env
counts once), over every row's trials and over the vector rows' alone.
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rows(path: str | None) -> list[dict]:
    if path:
        return json.loads(Path(path).read_text())
    out = subprocess.run([str(ROOT / ".venv/bin/bench"), "recommend", "--format", "json"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def table(recs: list[dict]) -> list[str]:
    lines = ["| profile | priority | envs | E's best in the set | regret, default | regret, single best | gap closed |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in recs:
        t = r.get("choice_track_fields")
        if not t:
            continue
        gap = "—" if t["gap_closed"] is None else f"{t['gap_closed']:.2f}"
        lines.append(f"| {r['action']} · {r['obs']} · {r['reward']} | {r['priority']} | {len(r['envs'])} | "
                     f"{t['covered']}/{t['trials']} | {t['default']:.3f} | {t['single']:.3f} | {gap} |")
    return lines


def means(recs: list[dict]) -> list[str]:
    out = []
    for priority in sorted({r["priority"] for r in recs}):
        for scope, keep in (("all rows", lambda r: True), ("vector rows", lambda r: r["obs"] == "vector")):
            ts = [r["choice_track_fields"] for r in recs
                  if r["priority"] == priority and r.get("choice_track_fields") and keep(r)]
            n = sum(t["trials"] for t in ts)
            if n:
                d = sum(t["default"] * t["trials"] for t in ts) / n
                s = sum(t["single"] * t["trials"] for t in ts) / n
                out.append(f"{priority}, {scope}: {n} trials, default {d:.3f} v single best {s:.3f}")
    return out


if __name__ == "__main__":
    recs = rows(sys.argv[1] if len(sys.argv) > 1 else None)
    print("\n".join(table(recs) + [""] + means(recs)))
