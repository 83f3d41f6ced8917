"""Benchmark: `bench status` of a 12,000-cell suite (400 seeds × 6 labels × 5 envs, 20 cells done), as a fresh
process.

Run with ``nox -s benchmark -- -k status`` (or ``pytest -o addopts= tests/benchmarks/test_status_speed.py
--benchmark-only -s``). Each round is a new ``bench status`` process (imports included, as a user runs it).
Target (issue 66): at most 2 s and 60 lines; before the summary per env × label, the table of 12,000 rows took
19.8 s. The 2 s are checked on the process's CPU seconds (user + system, ``RUSAGE_CHILDREN``), which a quiet
machine's wall time equals and a shared one's exceeds by its load; the wall time is recorded beside them.
docs/performance.md quotes the figures with the machine's load.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic import write_status_suite  # noqa: E402

TARGET_S, TARGET_LINES = 2.0, 60
ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "LunarLander-v3"]
ALGOS = [("ppo", "bench"), ("ppo", "sb3"), ("a2c", "bench"), ("a2c", "sb3"), ("trpo", "bench"), ("reinforce", "bench")]


def test_status_of_a_12000_cell_suite(benchmark, tmp_path):
    f, url = write_status_suite(tmp_path, seeds=400, envs=ENVS, algos=ALGOS, done=20)
    shown: list[str] = []
    cpu: list[float] = []

    def status() -> float:
        t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([sys.executable, "-m", "bench", "status", str(f), "--store", url], capture_output=True,
                           text=True, cwd=tmp_path)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert p.returncode == 0, p.stderr
        shown[:] = p.stdout.splitlines()
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        return time.perf_counter() - t

    status()  # bytecode cached, as for a user's second command
    benchmark.pedantic(status, rounds=5, iterations=1)
    median, cpu_s = benchmark.stats.stats.median, sorted(cpu[1:])[len(cpu[1:]) // 2]
    load = os.getloadavg()[0]
    benchmark.extra_info.update(median_s=median, cpu_s=cpu_s, lines=len(shown), load_avg=load, cores=os.cpu_count())
    print(f"\nstatus of 12,000 cells: median {median:.2f}s wall, {cpu_s:.2f} CPU s, {len(shown)} lines; load average "
          f"{load:.1f} on {os.cpu_count()} cores")
    assert "12,000 cells in 30 env × label groups" in shown[0]
    assert len(shown) <= TARGET_LINES, len(shown)
    assert cpu_s <= TARGET_S, cpu_s
