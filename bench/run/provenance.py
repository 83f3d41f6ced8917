"""Provenance: what a run records of the process and machine it ran on (package versions, CPU model and
CPUID, float paths, BLAS threads, git commit), how its envs were stepped, and the GPU it used."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from bench.distribution import NAME
from bench.suites.suite import Cell

_PACKAGES = ("bench", "torch", "numpy", "gymnasium", "stable-baselines3", "sb3-contrib", "ale-py", "mujoco", "box2d")


def _cpuinfo(field: str) -> str | None:
    """The first ``field`` of /proc/cpuinfo (``model name``, ``flags``), or None where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def _float_paths() -> dict[str, Any]:
    """What picks the code paths that round floats, beside the package versions: a seed's returns are
    the same run to run on one machine, but not across CPUs. MKL (torch's LAPACK and CPU matmuls, e.g.
    the orthogonal initialisation's QR) chooses its kernels by CPU unless ``MKL_CBWR`` fixes them (on
    one AVX-512 host, 2026-11-24, own PPO on CartPole reached 475 at seed 0 after 28,018 steps with
    MKL's default, 39,948 with ``MKL_CBWR=AVX2`` and 21,258 with ``COMPATIBLE``); OpenBLAS (NumPy's
    matmuls) and torch's own kernels dispatch by CPU too. Recorded so a re-run that differs can say why.
    """
    import torch

    flags = set((_cpuinfo("flags") or "").split())
    try:
        from threadpoolctl import threadpool_info

        blas = sorted({f"{i.get('internal_api')} {i.get('architecture')}" for i in threadpool_info()
                       if i.get("user_api") == "blas"})
    except Exception:  # noqa: BLE001 - provenance only
        blas = []
    return {"cpu_simd": [f for f in ("avx2", "fma", "avx512f") if f in flags],
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "blas_kernels": blas, "mkl_cbwr": os.environ.get("MKL_CBWR")}


# OpenBLAS kernels that use AVX-512 instructions (OpenBLAS's driver/others/dynamic.c names them): a CPU
# without AVX-512 that is told to use one dies of SIGILL in the first matmul.
_AVX512_KERNELS = ("skylakex", "cooperlake", "sapphirerapids")


def blas_kernel_problem(environ: dict[str, str] | None = None) -> str | None:
    """Why ``OPENBLAS_CORETYPE`` names a kernel this CPU cannot run, or None.

    A run recorded with an AVX-512 kernel reproduces bit for bit only on a CPU that has AVX-512; on
    any other its workers would die at their first matmul, so ``bench run`` says so at once instead.
    """
    wanted = (environ if environ is not None else os.environ).get("OPENBLAS_CORETYPE", "")
    if wanted.strip().lower() not in _AVX512_KERNELS:
        return None
    if "avx512f" in set((_cpuinfo("flags") or "").split()):
        return None
    return (f"OPENBLAS_CORETYPE={wanted}: that kernel needs AVX-512, which this CPU ({_cpu_model()}) lacks; "
            f"allowed here: a kernel without AVX-512 (Haswell, Zen) or unset (docs/cluster.md, reproducing a run)")


def _git_commit() -> dict[str, Any]:
    here = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5,
        ).stdout.strip()
        return {"git_commit": commit or None, "git_dirty": bool(dirty) if commit else None}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}


_STATIC_META: dict[str, Any] | None = None


def run_metadata() -> dict[str, Any]:
    """Package versions, Python, CPU, host, threads and git commit of this process."""
    global _STATIC_META
    if _STATIC_META is None:
        versions = {}
        for p in _PACKAGES:
            try:
                # bench's own under its key "bench" (as every stored run has it), read from its distribution.
                versions[p] = importlib_metadata.version(NAME if p == "bench" else p)
            except importlib_metadata.PackageNotFoundError:
                versions[p] = None
        _STATIC_META = {
            "versions": versions,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpu_model": _cpu_model(),
            # CPUID family / model / stepping: one model name covers several generations ("Intel(R) Xeon(R) Processor").
            "cpu_id": "/".join(_cpuinfo(f) or "?" for f in ("cpu family", "model\t", "stepping")),
            "cpu_count": os.cpu_count(),
            "host": socket.gethostname(),
            "float_paths": _float_paths(),
            **_git_commit(),
        }
    import torch

    return {**_STATIC_META, "torch_threads": torch.get_num_threads(), "blas_threads": _blas_threads(),
            "pid": os.getpid(), "nice": os.nice(0)}  # niceness: a run at nice 15 (Ray's default) yields its core


def stepping_meta(cell: Cell) -> dict[str, Any]:
    """How the run's envs were stepped (``vec_env``, bench.envs.vector), with a note where the envs are not Gymnasium's."""
    mode = cell.hyperparams.get("vec_env", "sync")
    out: dict[str, Any] = {"vec_env": mode}
    if mode == "envpool":
        try:
            version = importlib_metadata.version("envpool")
        except importlib_metadata.PackageNotFoundError:
            version = "?"
        out["vec_env_note"] = (f"envpool {version} steps its own C++ implementation of the env: dynamics, start "
                               "states and time limits may differ from Gymnasium's")
    return out


def accelerator_meta(cell: Cell) -> dict[str, Any]:
    """The GPU a run's networks were on (hyperparameter ``device``: ``cuda``, or ``auto`` where one is), as
    ``{"accelerator": {device, name, cuda, count}}``; empty for a CPU run. A GPU run's process CPU seconds
    include the host thread's wait for the GPU (torch synchronises when it reads a result back), so they
    follow its wall time and measure that GPU as much as the CPU: the analysis counts the GPU as part of
    the machine (``bench.analysis.scoring.hardware_of``). On an H100 beside a 16-core Xeon, 2026-11-26, the
    24 runs of a device check had wall / CPU 1.00-1.01, GPU runs included.
    """
    if cell.hyperparams.get("device", "cpu") == "cpu":
        return {}
    import torch

    if not torch.cuda.is_available():
        return {}
    return {"accelerator": {"device": "cuda", "name": torch.cuda.get_device_name(torch.cuda.current_device()),
                            "cuda": torch.version.cuda, "count": torch.cuda.device_count()}}


def _blas_threads() -> int | None:
    """Threads of the BLAS libraries NumPy loaded (the NumPy kernel's matmuls), or None if none is."""
    from threadpoolctl import threadpool_info

    n = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(n) if n else None


def iso_time(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")
