"""Shared fixtures: stores on SQLite and, where one is reachable, PostgreSQL."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

# NumPy's OpenBLAS picks its kernels by CPU: AVX-512 ones ("SkylakeX") on some AMD EPYC VMs, AVX2 ones
# ("Haswell") on others, and the two round differently, so a seed's returns differed from one CI machine to
# the next (tests/test_same_returns.py). Held to the AVX2 kernels, every x86-64 machine with AVX2 computes
# the same bits. Set before anything imports NumPy: OpenBLAS reads it once, when it loads.
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "suites"

def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist, the tests that take seconds first, longest first (``tests/data/slow_tests.json``:
    every test of 2 s or more in a measured serial run), the rest in their usual order.

    xdist hands tests out in collection order, so a 40-second test collected last keeps one worker busy while the
    other has nothing left: longest first is the classic list-scheduling rule for the shortest finish. Only in
    xdist workers (each must collect the same order, which a fixed file gives); a serial run keeps file order, so
    module fixtures are set up once.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import json

    seconds = json.loads((ROOT / "tests" / "data" / "slow_tests.json").read_text())["seconds"]
    items.sort(key=lambda item: -seconds.get(item.nodeid, 0.0))  # stable: the rest keep their order


@pytest.fixture(autouse=True, scope="session")
def one_thread() -> None:
    """One torch and one BLAS thread, as every bench run: the determinism tests
    compare runs bit for bit, which holds at a fixed thread count."""
    from bench.algos.common import pin_one_thread

    pin_one_thread()


#: Base URL of a PostgreSQL server the tests may create throwaway databases on.
PG_BASE = os.environ.get("BENCH_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432")


def _pg_admin():
    import psycopg

    dsn = PG_BASE.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    return psycopg.connect(dsn, autocommit=True, connect_timeout=3)


@pytest.fixture(scope="session")
def pg_available() -> str | None:
    try:
        with _pg_admin():
            return None
    except Exception as e:  # noqa: BLE001 - any failure means: no server here
        return f"no PostgreSQL reachable at {PG_BASE} ({type(e).__name__}); set BENCH_TEST_POSTGRES to point at one"


@pytest.fixture
def pg_url(pg_available):
    """A fresh, empty PostgreSQL database, dropped afterwards."""
    if pg_available:
        pytest.skip(pg_available)
    name = f"bench_test_{uuid.uuid4().hex[:10]}"
    with _pg_admin() as c:
        c.execute(f'CREATE DATABASE "{name}"')
    yield f"{PG_BASE}/{name}"

    with _pg_admin() as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request, tmp_path):
    """Each store test runs against SQLite and against a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'bench.db'}"
    return request.getfixturevalue("pg_url")


#: Where the `learning` session keeps its measured bars (committed; docs/measurements.md quotes the latest).
LEARNING_LOG = ROOT / "results" / "learning.jsonl"


@pytest.fixture
def learning_record(request):
    """Call ``learning_record(bar=..., values=..., passed=...)`` once per learning test.

    Appends one JSON line with the measured values, whether the bar held, the wall
    time and the run metadata (versions, CPU, threads, git commit) to
    ``results/learning.jsonl``, so the figures quoted in docs/measurements.md are traceable.
    """
    import json
    import time

    from bench.run.provenance import run_metadata

    t0 = time.time()

    def record(*, bar: str, values, passed: bool) -> None:
        line = {
            "test": request.node.nodeid, "bar": bar, "values": values, "passed": bool(passed),
            "wall_s": round(time.time() - t0, 1),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "meta": run_metadata(),
        }
        LEARNING_LOG.parent.mkdir(exist_ok=True)
        with LEARNING_LOG.open("a") as f:
            f.write(json.dumps(line) + "\n")

    return record
