"""Benchmark: `bench recommend` on the shipped reference, first call and warm, as fresh processes.

Run with ``nox -s benchmark -- -k recommend`` (or ``pytest -o addopts= tests/benchmarks/test_recommend_speed.py
--benchmark-only -s``). Each round is a new ``bench recommend --format json`` process (imports included, as a
user runs it), with its own cache folder (``XDG_CACHE_HOME``):

- first call: an empty cache folder, so the packs are read in place and the answer computed
  (target: issue 42, at most 10 s on a quiet machine, and no file larger than the packs written);
- warm: the answer kept by the first call is read back (target: at most 1 s and 300 MiB).

Peak memory is the child's maximum resident set (``resource.getrusage(RUSAGE_CHILDREN)``, the largest
child so far, so the warm rounds run first, in a process that has had no other child). docs/performance.md
("Answers and reports on the shipped reference") quotes the figures with the machine's load.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WARM_S, WARM_MIB, FIRST_S = 1.0, 300, 10.0


def _run(cache: Path) -> float:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "bench", "recommend", "--format", "json"], cwd=ROOT, capture_output=True,
                       text=True, env={**os.environ, "XDG_CACHE_HOME": str(cache)})
    assert p.returncode == 0, p.stderr
    return time.perf_counter() - t


def test_recommend_on_the_shipped_reference(benchmark, tmp_path):
    warm_cache = tmp_path / "warm"
    _run(warm_cache)  # keeps the answer
    benchmark.pedantic(lambda: _run(warm_cache), rounds=5, iterations=1)
    warm = benchmark.stats.stats.median
    warm_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    firsts = []
    for i in range(3):
        cache = tmp_path / f"first{i}"
        firsts.append(_run(cache))
        packs = sum(f.stat().st_size for f in (ROOT / "results" / "reference").rglob("*") if f.is_file())
        biggest = max(f.stat().st_size for f in cache.rglob("*") if f.is_file())
        assert biggest < packs, f"a cache file of {biggest / 2**20:.0f} MB, larger than the packs"
        shutil.rmtree(cache)
    first = sorted(firsts)[1]
    load = os.getloadavg()[0]
    benchmark.extra_info.update(warm_s=warm, warm_peak_mib=warm_mib, first_s=first, load_avg=load, cores=os.cpu_count())
    print(f"\nrecommend on the shipped reference: warm median {warm:.2f}s, peak {warm_mib:.0f} MiB; first call median "
          f"{first:.2f}s (rounds {[round(x, 2) for x in firsts]}); load average {load:.1f} on {os.cpu_count()} cores")
    assert warm <= WARM_S and warm_mib <= WARM_MIB, (warm, warm_mib)
    assert first <= FIRST_S, first
