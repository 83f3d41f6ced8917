"""Benchmark: the Ray executor against the local process pool on the smoke suite.

Run with ``nox -s benchmark`` (or ``pytest -o addopts= tests/benchmarks/test_ray_overhead.py --benchmark-only -s``).
Each round, interleaved so that drift in machine load hits both alike:

1. the local pool (2 workers) runs every cell of ``suites/smoke.yaml`` into a
   fresh SQLite store; its worker start-up (spawn, torch import) is included;
2. Ray start-up is timed on its own: ``ray.init(num_cpus=2)`` plus one trivial
   task (the cost a user pays once per ``bench run --executor ray``);
3. the same cells run as Ray tasks on that instance into another fresh store;
   this includes Ray's worker start-up and torch import, the counterpart of (1).

Reported: Ray start-up, and the per-cell overhead ``(ray - local) / cells``
(extra wall seconds per cell on 2 workers; it can be negative within noise).
Both executors' returns are compared episode by episode: they must be equal.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import pytest

from bench.run.pool import run_local
from bench.storage.owners import this_owner
from bench.storage.store import Store
from bench.suites.suite import load_suite
from bench.storage.urls import StoreURL

SMOKE = Path(__file__).resolve().parents[2] / "suites" / "smoke.yaml"
WORKERS = 2
#: Loose bound on the extra wall time per cell; Ray's per-task dispatch is milliseconds.
TARGET_PER_CELL_S = 0.5


def _fresh(tmp: Path, name: str, loaded) -> str:
    url = f"sqlite:///{tmp / name}"
    Store(url).register(loaded.suite.name, str(SMOKE), {}, loaded.env_meta, loaded.cells)
    return url


def test_ray_executor_overhead_on_smoke(benchmark, tmp_path):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'bench[ray]')")
    from bench.run.ray_executor import run_ray

    loaded = load_suite(SMOKE)
    cells = loaded.cells
    times: dict[str, list[float]] = {"local": [], "ray_startup": [], "ray": []}
    urls: list[tuple[str, str]] = []
    counter = iter(range(1000))

    def round_() -> None:
        i = next(counter)
        local_url = _fresh(tmp_path, f"local-{i}.db", loaded)
        t = time.perf_counter()
        outs = run_local(StoreURL.parse(local_url), cells, this_owner(), WORKERS, lambda c, o: None)
        times["local"].append(time.perf_counter() - t)
        assert all(o.status == "done" for o in outs), [o.error for o in outs if o.status != "done"]

        t = time.perf_counter()
        ray.init(num_cpus=WORKERS, include_dashboard=False, logging_level="WARNING")
        ray.get(ray.remote(lambda: None).remote())
        times["ray_startup"].append(time.perf_counter() - t)
        try:
            ray_url = _fresh(tmp_path, f"ray-{i}.db", loaded)
            t = time.perf_counter()
            outs = run_ray(StoreURL.parse(ray_url), cells, lambda c, o: None)
            times["ray"].append(time.perf_counter() - t)
            assert all(o.status == "done" for o in outs), [o.error for o in outs if o.status != "done"]
        finally:
            ray.shutdown()
        urls.append((local_url, ray_url))

    benchmark.pedantic(round_, rounds=2, iterations=1)

    for local_url, ray_url in urls:  # the same runs, wherever they ran
        a, b = Store(local_url), Store(ray_url)
        for c in cells:
            assert a.episodes_of(c.key)["ret"].tolist() == b.episodes_of(c.key)["ret"].tolist(), c.key
    med = {k: statistics.median(v) for k, v in times.items()}
    per_cell = (med["ray"] - med["local"]) / len(cells)
    benchmark.extra_info.update(
        **{f"{k}_s": v for k, v in times.items()}, per_cell_overhead_s=per_cell, cells=len(cells),
        workers=WORKERS, cores=os.cpu_count(),
    )
    print(
        f"\nsmoke suite ({len(cells)} cells, {WORKERS} workers, {os.cpu_count()} cores): local pool median "
        f"{med['local']:.2f}s, Ray median {med['ray']:.2f}s after a Ray start-up of {med['ray_startup']:.2f}s "
        f"(ray.init + first task); per-cell overhead {per_cell:+.3f}s (target <= {TARGET_PER_CELL_S}); all: {times}"
    )
    assert per_cell <= TARGET_PER_CELL_S, f"Ray added {per_cell:.2f}s per cell (target {TARGET_PER_CELL_S})"
