"""Regenerate the `bench recommend` examples of the README, docs/statistics.md and docs/getting-started.md from
the shipped reference
(tests/test_docs.py checks them).

    .venv/bin/python scripts/readme_recommend.py

Each document names its command in a paragraph that starts with its marker (:data:`MARKERS`); this runs it on
the packs in results/reference/ with a cache of its own, and puts what it prints into the block that follows,
as the test reruns it.
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Document → the marker of the paragraph that names the command, followed by its output block.
MARKERS = {"README.md": "**Consult the recommendation table.**", "docs/statistics.md": "**Regenerated example.**",
           "docs/getting-started.md": "**Its answer for vector observations.**"}


def command(text: str, marker: str) -> list[str]:
    start = text.index(marker)
    return re.search(r"`\.venv/bin/bench (recommend[^`]*)`", text[start:].replace("\n", " ")).group(1).split()


def run(cmd: list[str], cache: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "results").mkdir()
        (Path(tmp) / "results" / "reference").symlink_to(ROOT / "results" / "reference")
        p = subprocess.run([sys.executable, "-m", "bench", *cmd], capture_output=True, text=True, cwd=tmp,
                           env={**os.environ, "XDG_CACHE_HOME": str(cache), "COLUMNS": "100"}, check=True)
    return "\n".join(line.rstrip() for line in p.stdout.splitlines()).strip("\n")


def main() -> None:
    # A cache of its own, unpacked from the packs, unless BENCH_REFERENCE_CACHE names one already built from
    # them (the unpack takes a while; the cache is checked against the packs' fingerprint either way).
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.environ.get("BENCH_REFERENCE_CACHE") or tmp
        for doc, marker in MARKERS.items():
            path = ROOT / doc
            text = path.read_text()
            printed = run(command(text, marker), Path(cache))
            m = re.compile(r"```\n(bench recommend[^\n]*\n.*?)```", re.S).search(text, text.index(marker))
            path.write_text(text[:m.start(1)] + printed + "\n" + text[m.end(1):])
            print(f"{doc}:\n{printed}\n")


if __name__ == "__main__":
    main()
