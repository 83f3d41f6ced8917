"""Regenerate the README's "Shipped reference" table from the packs' manifests (tests/test_docs.py checks it)."""
import json, re
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent


def suite_of(pack: str) -> str:
    """The suite file a pack is regenerated from: suites/reference/, suites/ or suites/claims/ (claim-*)."""
    for cand in (f"suites/reference/{pack}.yaml", f"suites/{pack}.yaml",
                 f"suites/claims/{pack.removeprefix('claim-')}.yaml"):
        if (ROOT / cand).is_file():
            return cand
    raise SystemExit(f"results/reference/{pack}: no suite file for it under suites/")


rows = []
for p in sorted((ROOT / "results/reference").iterdir()):
    if not (p / "pack.json").is_file():
        continue
    m = json.loads((p / "pack.json").read_text())
    shared = sum(m.get("shared_runs", {}).values())
    done = m["runs"].get("done", 0) + shared
    total = sum(m["runs"].values()) + shared
    suite = suite_of(p.name)
    studies = m.get("studies")
    if studies and not m["runs"]:  # a tuning suite's pack: its Optuna studies, no runs
        t = studies["trials"]
        rows.append(f"| `{p.name}` | {t.get('complete', 0) + t.get('pruned', 0)} trials in {studies['count']} studies | "
                    f"{m['cpu_hours']:.2f} | `bench tune {suite}` |")
        continue
    rows.append(f"| `{p.name}` | {done} of {total} | {m['cpu_hours']:.2f} | `bench run {suite}` |")
table = "\n".join(["| pack | runs done | CPU-hours | regenerate (then pack: [how](docs/reference.md)) |", "|---|---|---|---|", *rows])
readme = (ROOT / "README.md").read_text()
sec = re.compile(r"(## Shipped reference\n\n.*?\n\n)(\| pack \|.*?\n)(?=\n)", re.S)
if sec.search(readme):
    readme = sec.sub(lambda mm: mm.group(1) + table + "\n", readme)
else:
    intro = ("## Shipped reference\n\nWhat each category of `results/reference/` holds and what its runs cost, "
             "read from its `pack.json` (training CPU-hours of its finished runs, on this project's 2-core "
             "machines; a claim suite that shares the reference's cells costs nothing more):\n\n")
    readme = readme.replace("## Suites\n", intro + table + "\n\n## Suites\n", 1)
(ROOT / "README.md").write_text(readme)
print(table)
