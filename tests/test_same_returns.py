"""Same seeds, same returns, bit for bit: every algorithm × implementation on CartPole-v1, Pendulum-v1 and
HalfCheetah-v5 (and the language-model policy's PPO, GRPO and RLOO on ``bench/Sort-v0[n=3]``) records the
episodes, evaluations and diagnostics whose sha256 ``tests/data/same_returns.json`` holds
(``scripts/same_returns.py`` trains the cells and says what the hash covers).

The record was made on the code before the training skeleton (issue 42), so a refactor of the training
loops that passes this computes what the loops computed before. After a change that is meant to change
what a run computes, record the hashes again (``python scripts/same_returns.py --write``) and say why in
the commit.

The default tier runs the project's own CartPole-v1 cells (A3C aside: its worker process costs seconds to
start), 17 s on a loaded 2-core machine (most of it imports); the whole grid (47 cells, 2 to 4 minutes)
and the 5 sequence cells (about 10 s) are ``heavy`` (``nox -s heavy``). The sequence cells were recorded
on the code before the skeleton too (its commit 3b76a97, with this script).

Across CPUs: on the AVX-512 AMD EPYC the record was made on, each of the 47 cells of the three envs gave
the same hash (the sequence cells were not tried) under torch's
``ATEN_CPU_CAPABILITY`` avx512 and avx2, and with OpenBLAS and MKL held to AVX2 kernels
(``OPENBLAS_CORETYPE=Haswell MKL_ENABLE_INSTRUCTIONS=AVX2``, checked on CartPole-v1 and Pendulum-v1), so the
hashes are of the raw float64 values, unrounded: rounding would not help, since one low bit of a
probability changes a sampled action and from there every return. Under ``ATEN_CPU_CAPABILITY=default``
(no SIMD kernels) every torch cell differs (the pure-NumPy REINFORCE's do not), so the test skips where
torch runs without AVX2 (an ARM CPU, or that setting); CI's x86 machines have AVX2.

NumPy's OpenBLAS chooses its kernels by CPU too: on the record's machine (AMD EPYC, CPUID family 26) it ran its
AVX2 ("Haswell") kernels, on another AMD EPYC VM (family 25, with AVX-512) its "SkylakeX" ones, and there 6
of the 10 default cells (the pure-NumPy REINFORCE among them) recorded other returns. ``tests/conftest.py``
holds OpenBLAS to the Haswell kernels (``OPENBLAS_CORETYPE``, read when NumPy loads), under which that machine
gives the record's hashes for every cell; the test skips where OpenBLAS runs other kernels all the same (the
variable set otherwise, or NumPy imported before the conftest).

NumPy's own loops dispatch by CPU as well: its float64 ``exp`` and ``log`` have AVX-512 versions. On an AMD EPYC
without AVX-512 (CPUID 25/1) every torch cell of the default tier gives the record's hash and the pure-NumPy
REINFORCE gives another, so the record keeps the pure-NumPy cells' hashes per level (``by_numpy_simd``, the
script's ``numpy_simd``; docs/testing.md says where each set was made and checked); they skip where NumPy
dispatches to a level with no record.

Intel CPUs: on an Intel Xeon VM (CPUID 6/207) torch rounds differently from the AMD EPYC VMs whatever kernel
setting is tried (``scripts/same_returns.py``, ``vendor``): 48 of the 52 cells differ. The record holds a second
set of hashes for Intel CPUs (``by_vendor``), made there on 2026-11-28 from the code after the skeleton: on Intel
the test guards against regressions; the proof about the skeleton is the AMD record.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path

import pytest
import torch

from bench.algos.registry import ALGOS


def _openblas_cores() -> set[str]:
    """The core types NumPy's OpenBLAS runs kernels for in this process (none where it has no OpenBLAS)."""
    import numpy  # noqa: F401 - loaded, so threadpoolctl sees its BLAS
    import threadpoolctl

    return {str(i.get("architecture")) for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"}


pytestmark = [
    pytest.mark.skipif(
        torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"),
        reason=f"the hashes were recorded with torch's AVX2 / AVX-512 kernels; this torch runs "
               f"{torch.backends.cpu.get_cpu_capability()}, whose float rounding differs"),
    pytest.mark.skipif(
        not _openblas_cores() <= {"Haswell"},
        reason=f"the hashes were recorded with OpenBLAS's Haswell (AVX2) kernels; this NumPy's OpenBLAS runs "
               f"{', '.join(sorted(_openblas_cores()))} (OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')})"),
]


ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def _script():
    spec = importlib.util.spec_from_file_location("same_returns", ROOT / "scripts" / "same_returns.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The default tier: every own implementation (``bench``, ``numpy``) in the registry on CartPole-v1, seconds each;
#: A3C aside, whose worker process costs seconds to start. A new algorithm joins it without an edit here.
DEFAULT = {f"CartPole-v1/{a}/{i}" for a, spec in ALGOS.items() if a != "a3c" and a not in _script().ENVS[
    "CartPole-v1"]["skip"] for i in spec.impls if i in ("bench", "numpy")}


_DATA = json.loads((ROOT / "tests" / "data" / "same_returns.json").read_text())
#: The hashes recorded for this CPU (the script's ``record_cells``: Intel CPUs round differently, and the
#: pure-NumPy cells' hashes depend on the SIMD level NumPy dispatches to).
RECORD = _script().record_cells(_DATA)
#: The pure-NumPy cells' marks: they skip where the record has no hashes for NumPy's SIMD level here.
_NUMPY_SIMD = [pytest.mark.skipif(
    not _script().numpy_cells_recorded(_DATA),
    reason=f"the pure-NumPy cells' hashes are recorded for NumPy's "
           f"{' and '.join(['X86_V4', *sorted(_DATA.get('by_numpy_simd', {}))])} loops; NumPy here dispatches to "
           f"{_script().numpy_simd()}")]


@functools.lru_cache(maxsize=None)
def _cells(env_id: str) -> dict:
    s = _script()
    return {s.name(c): c for c in s.cells([env_id])}


def test_the_record_covers_every_algorithm_implementation_and_env():
    s = _script()
    from bench.suites.suite import AVAILABLE

    want = {f"{env}/{a}/{i}" for env, spec in s.ENVS.items() for a, impls in AVAILABLE.items()
            if a not in spec["skip"] for i in impls}
    assert DEFAULT <= want and {w.split("/")[1] for w in want} == set(AVAILABLE)  # every registered algorithm
    sequence = {k for k in RECORD if k.startswith("bench/")}
    assert set(RECORD) == want | sequence
    assert sequence == {f"bench/Sort-v0[n=3]/{c['label']}" for c in s.SEQUENCE}
    for level in _DATA.get("by_numpy_simd", {}).values():  # a level's set holds the pure-NumPy cells, all of them
        assert set(level["cells"]) == {k for k in want if k.endswith("/numpy")}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("key", [pytest.param(k, marks=(
    ([] if k in DEFAULT else [pytest.mark.heavy]) + (_NUMPY_SIMD if k.endswith("/numpy") else [])))
    for k in sorted(RECORD)])
def test_a_seed_records_what_it_recorded_before_the_skeleton(key):
    s = _script()
    env_id = s.SEQUENCE_ENV["id"] if key.startswith("bench/") else key.split("/")[0]
    got = s.run_cell(_cells(env_id)[key])
    assert got == RECORD[key], f"{key}: the run recorded other returns, lengths or diagnostics than the record"


#: Checkpointed in the default tier: one algorithm of each collector (n-step rollouts, whole episodes, groups).
CHECKPOINTED = {f"CartPole-v1/{a}/bench" for a in ("ppo", "a2c", "reinforce", "grpo")}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("key", [pytest.param(k, marks=(
    ([] if k in CHECKPOINTED else [pytest.mark.heavy]) + (_NUMPY_SIMD if k.endswith("/numpy") else [])))
    for k in sorted(DEFAULT)])
def test_taking_checkpoints_leaves_a_seeds_record_as_it_was(key, tmp_path):
    """Mid-run checkpoints every 500 steps (``checkpoint_every``, bench.run.checkpoints) read the run's state
    and draw no random numbers: the run records what the record holds."""
    from bench.run.checkpoints import Checkpoints
    from bench.run.runner import make_recorder, record_cell

    s = _script()
    cell = _cells("CartPole-v1")[key]
    recorder = make_recorder(cell)
    recorder.checkpoints = ck = Checkpoints(tmp_path, 500, cell.key)
    recorder, error = record_cell(cell, recorder=recorder)
    assert error is None
    assert ck.note["taken"] >= 1 and "off" not in ck.note  # checkpoints were taken
    assert s.digest(recorder) == RECORD[key]["sha256"], f"{key}: checkpoints changed what the run recorded"
