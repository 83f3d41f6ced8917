"""Regenerate the README's `bench recommend` example from the shipped reference (tests/test_docs.py checks it).

    .venv/bin/python scripts/readme_recommend.py

Runs the command the README names, on the packs in results/reference/ with a cache of its own, and
puts what it prints into the README's block, as the test reruns it.
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
readme = (ROOT / "README.md").read_text()
start = readme.index("**Consult the recommendation table.**")
cmd = re.search(r"`\.venv/bin/bench (recommend[^`]*)`", readme[start:].replace("\n", " ")).group(1).split()
with tempfile.TemporaryDirectory() as tmp:
    (Path(tmp) / "results").mkdir()
    (Path(tmp) / "results" / "reference").symlink_to(ROOT / "results" / "reference")
    p = subprocess.run([sys.executable, "-m", "bench", *cmd], capture_output=True, text=True, cwd=tmp,
                       env={**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}, check=True)
printed = "\n".join(line.rstrip() for line in p.stdout.splitlines()).strip("\n")
block = re.compile(r"```\n(bench recommend[^\n]*\n.*?)```", re.S)
m = block.search(readme, start)
readme = readme[:m.start(1)] + printed + "\n" + readme[m.end(1):]
(ROOT / "README.md").write_text(readme)
print(printed)
