"""Same seeds, same returns: a sha256 per (env, algorithm, implementation) of what a tiny run records.

Every algorithm × implementation the project runs (``bench.suites.suite.AVAILABLE``) trains for a few
updates on CartPole-v1, Pendulum-v1 and HalfCheetah-v5 where it accepts the env's action space (and the
language-model policy's PPO, GRPO and RLOO on ``bench/Sort-v0[n=3]``, :data:`SEQUENCE`), through
the runner's own cell function (:func:`bench.run.runner.record_cell`) on cells that a suite resolved
(zoo hyperparameters filled in, as ``bench run`` does). Each cell's hash covers its recorded training
episodes (global step, return, length, in order), its evaluation returns (one evaluation at the end of
the budget) and its per-update diagnostics (keys and values, by step and key): a refactor of the training code that
keeps these hashes computes what it computed before, bit for bit.

Floats are hashed as ``repr`` of the float64 the recorder holds, so the hash is bit-exact: a refactor
must not move a single rounding. Across CPUs, torch picks its kernels by capability
(``ATEN_CPU_CAPABILITY``) and NumPy's OpenBLAS by core type (held here to ``Haswell``, its AVX2 kernels);
``tests/test_same_returns.py`` says which cells stayed identical across which settings and machines.

    python scripts/same_returns.py                      # print the hashes
    python scripts/same_returns.py --write              # record them in tests/data/same_returns.json
    python scripts/same_returns.py --check --env CartPole-v1   # compare with the record (exit 1 on a mismatch)
    python scripts/same_returns.py --write --algo vpg   # record a new algorithm's cells, leave the others' as they are

A new algorithm's record is written by the last command (docs/architecture.md, "Adding an algorithm"); the
others' hashes are kept, and ``tests/test_same_returns.py`` then checks it beside them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

# NumPy's OpenBLAS held to its AVX2 kernels, as the record was made: on a CPU where it would pick its AVX-512
# ones, the rounding differs and so does every hash (tests/conftest.py sets the same for the test).
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

RECORD = Path(__file__).resolve().parent.parent / "tests" / "data" / "same_returns.json"
SEED = 0
#: env → its budget (a few updates of every algorithm: seconds per cell) and which algorithms skip it.
ENVS: dict[str, dict[str, Any]] = {
    "CartPole-v1": {"timesteps": 2000, "skip": {"sac", "td3"}},  # discrete: no SAC / TD3
    "Pendulum-v1": {"timesteps": 1800, "skip": {"dqn"}},  # continuous: no DQN
    "HalfCheetah-v5": {"timesteps": 2100, "skip": {"dqn"}},
}
#: Per algorithm, what makes its tiny run exercise its update (defaults otherwise: the zoo's where it has them).
#: A3C with one worker: several workers race by nature (bench/algos/a3c/a3c.py), one is deterministic.
#: The off-policy ones learn in the last few hundred steps of the budget (their updates are the slow part);
#: GRPO / RLOO take one group of 2 episodes; REINFORCE takes the mean baseline (AC-MC is its value baseline).
HYPERPARAMS: dict[str, dict[str, Any]] = {
    "a3c": {"n_workers": 1},
    "dqn": {"learning_starts": 1500},
    "sac": {"learning_starts": 1500},
    "td3": {"learning_starts": 1500},
    "grpo": {"group_size": 2, "groups_per_update": 1},
    "rloo": {"group_size": 2, "groups_per_update": 1},
    "reinforce": {"n_envs": 2, "n_steps": 200, "baseline": "mean"},
    "ac_mc": {"n_envs": 2, "n_steps": 200},
    "npg": {"n_steps": 512, "batch_size": 128},
}
#: Pendulum's zoo rollouts (PPO 4 × 1024, TRPO 2 × 1024) are longer than its whole tiny budget.
ENV_HYPERPARAMS: dict[str, dict[str, dict[str, Any]]] = {
    "Pendulum-v1": {"ppo": {"n_steps": 128}, "trpo": {"n_steps": 256}},
    "HalfCheetah-v5": {"sac": {"learning_starts": 1800}, "td3": {"learning_starts": 1800}},
}


#: The language-model policy (bench.algos.sequence_policy) on a sequence task: PPO with the KL penalty in the
#: reward, in the loss, and with a value model of its own; GRPO and RLOO from the same SFT reference.
SEQUENCE_ENV = {"id": "bench/Sort-v0", "kwargs": {"n": 3}}
_SEQ = {"policy": "sequence", "n_envs": 4, "n_steps": 32, "batch_size": 64, "n_epochs": 2, "gamma": 1.0}
SEQUENCE: list[dict[str, Any]] = [
    {"algo": "ppo", "impl": "bench", "label": "ppo-seq-kl-reward", "hyperparams": {**_SEQ, "kl_coef": 0.05}},
    {"algo": "ppo", "impl": "bench", "label": "ppo-seq-kl-loss",
     "hyperparams": {**_SEQ, "kl_coef": 0.05, "kl_in": "loss"}},
    {"algo": "ppo", "impl": "bench", "label": "ppo-seq-critic", "hyperparams": {**_SEQ, "critic": "separate"}},
    {"algo": "grpo", "impl": "bench", "label": "grpo-seq",
     "hyperparams": {"policy": "sequence", "group_size": 4, "groups_per_update": 4, "gamma": 1.0}},
    {"algo": "rloo", "impl": "bench", "label": "rloo-seq",
     "hyperparams": {"policy": "sequence", "group_size": 4, "groups_per_update": 4, "gamma": 1.0}},
]
SEQUENCE_TIMESTEPS = 384


def _load(suite: dict[str, Any]) -> list[Any]:
    from bench.suites.suite import SuiteError, load_suite

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "same_returns.yaml"
        path.write_text(yaml.safe_dump(suite, sort_keys=False))
        try:
            return load_suite(path).cells
        except SuiteError as e:
            raise SystemExit(str(e)) from None


def cells(envs: list[str] | None = None) -> list[Any]:
    """The resolved cells, one per (env, algorithm, implementation), in a fixed order."""
    from bench.suites.suite import AVAILABLE

    out = []
    for env_id, spec in ENVS.items():
        if envs and env_id not in envs:
            continue
        algos = [{"algo": a, "impl": i, "hyperparams": {**HYPERPARAMS.get(a, {}),
                                                        **ENV_HYPERPARAMS.get(env_id, {}).get(a, {})}}
                 for a, impls in AVAILABLE.items() if a not in spec["skip"] for i in impls]
        suite = {"name": "same-returns", "seeds": [SEED],
                 "defaults": {"timesteps": spec["timesteps"], "eval": {"every": spec["timesteps"], "episodes": 2}},
                 "envs": [{"id": env_id}], "algorithms": algos}
        out += _load(suite)
    if not envs or SEQUENCE_ENV["id"] in envs:
        out += _load({"name": "same-returns-sequence", "seeds": [SEED],
                      "defaults": {"timesteps": SEQUENCE_TIMESTEPS,
                                   "eval": {"every": SEQUENCE_TIMESTEPS, "episodes": 2}},
                      "envs": [SEQUENCE_ENV], "algorithms": SEQUENCE})
    return out


def name(cell: Any) -> str:
    """``env/algo/impl``, or ``env/label`` for a cell with a label of its own (the sequence cells)."""
    if cell.label != f"{cell.algo}-{cell.impl}":
        return f"{cell.env_id}/{cell.label}"
    return f"{cell.env_id}/{cell.algo}/{cell.impl}"


def digest(recorder: Any) -> str:
    """sha256 over the run's episodes (step, return, length) in the order they ended, evaluations (step,
    mean, std, n) and diagnostics (step, key, value) in (step, key) order, each float as the ``repr`` of
    its float64 (bit-exact)."""
    h = hashlib.sha256()
    for row in zip(recorder.ep_step, recorder.ep_return, recorder.ep_length):
        h.update(repr((int(row[0]), float(row[1]), int(row[2]))).encode())
    h.update(b"|evals|")
    for step, _wall, mean, std, n in recorder.evals:
        h.update(repr((int(step), float(mean), float(std), int(n))).encode())
    h.update(b"|diag|")
    # Sorted by (step, key), stably: which key an update reports first is no part of what it computed.
    for step, key, value in sorted(recorder.diag, key=lambda row: (int(row[0]), row[1])):
        h.update(repr((int(step), key, float(value))).encode())
    return h.hexdigest()


def run_cell(cell: Any) -> dict[str, Any]:
    """Train one cell through the runner and hash what it recorded (an error is a failure, not a hash)."""
    from bench.run.runner import record_cell

    recorder, error = record_cell(cell)
    if error is not None:
        raise RuntimeError(f"{name(cell)} failed: {error}")
    return {"sha256": digest(recorder), "episodes": len(recorder.ep_return), "steps": recorder.steps}


def vendor() -> str:
    """This CPU's vendor (``vendor_id`` of /proc/cpuinfo; "" where there is none).

    On an Intel Xeon VM (CPUID 6/207, 2026-11-28) 48 of the 52 cells gave other hashes than on the AMD EPYC VMs
    the record was made on (only the pure-NumPy REINFORCE cells and HalfCheetah's own PPO agreed), under every
    kernel setting tried (``ATEN_CPU_CAPABILITY`` avx2, ``MKL_ENABLE_INSTRUCTIONS`` AVX2/AVX/SSE4_2, ``MKL_CBWR``,
    ``NPY_DISABLE_CPU_FEATURES=AVX512_SPR``): torch rounds differently there. The record keeps a second set of
    hashes for Intel CPUs (``by_vendor``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def numpy_simd() -> str:
    """The widest level NumPy's own loops dispatch to in this process: "X86_V4" (AVX-512) or "X86_V3" (AVX2) on
    x86, else the machine's name (``platform.machine()``, e.g. "aarch64", or "x86_64" below AVX2), so that every
    record this script writes is filed under a name. ``NPY_DISABLE_CPU_FEATURES`` lowers it; the older NumPy names
    are read where the ``X86_V*`` ones are absent.

    The pure-NumPy REINFORCE cells are the only ones it changes: float64 ``exp`` and ``log`` have AVX-512 loops,
    so their hashes are kept per level (``by_numpy_simd``; docs/testing.md says where each set was made and
    checked). At X86_V4 they agree across vendors (the Intel set holds the same three)."""
    import platform

    from numpy._core._multiarray_umath import __cpu_features__ as features

    for level, older in (("X86_V4", "AVX512_SKX"), ("X86_V3", "AVX2")):
        if features.get(level, features.get(older)):
            return level
    return platform.machine() or "unknown"


def _vendor_cells(data: dict[str, Any]) -> dict[str, Any]:
    """The hashes recorded for this CPU's vendor: its own set where the record has one, else the first record's."""
    return data.get("by_vendor", {}).get(vendor(), {}).get("cells", data.get("cells", {}))


def record_cells(data: dict[str, Any]) -> dict[str, Any]:
    """The hashes recorded for this CPU: its vendor's (:func:`vendor`), with the pure-NumPy cells' replaced by
    those of the level NumPy dispatches to (:func:`numpy_simd`) where that is not X86_V4 and the record has it."""
    cells = dict(_vendor_cells(data))
    if numpy_simd() != "X86_V4":
        cells.update(data.get("by_numpy_simd", {}).get(numpy_simd(), {}).get("cells", {}))
    return cells


def numpy_cells_recorded(data: dict[str, Any]) -> bool:
    """Whether the record holds the pure-NumPy cells' hashes for the level NumPy dispatches to here."""
    return numpy_simd() == "X86_V4" or numpy_simd() in data.get("by_numpy_simd", {})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", action="append", help="only this env (repeatable)")
    ap.add_argument("--only", action="append", help="only this env/algo/impl (repeatable)")
    ap.add_argument("--algo", action="append", help="only this algorithm's cells, every env and impl (repeatable)")
    ap.add_argument("--write", action="store_true", help=f"write the hashes to {RECORD}")
    ap.add_argument("--check", action="store_true", help="compare with the record; exit 1 on any difference")
    ap.add_argument("--out", help="also write this run's hashes to this JSON file")
    args = ap.parse_args(argv)
    from bench.suites.suite import AVAILABLE

    if unknown := sorted(set(args.algo or ()) - set(AVAILABLE)):
        print(f"--algo {', '.join(unknown)}: not a registered algorithm; allowed: {', '.join(AVAILABLE)}", file=sys.stderr)
        return 2
    data = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    record = record_cells(data)
    got: dict[str, Any] = {}
    bad = []
    for cell in cells(args.env):
        if (args.only and name(cell) not in args.only) or (args.algo and cell.algo not in args.algo):
            continue
        t = time.perf_counter()
        got[name(cell)] = run_cell(cell)
        same = record.get(name(cell), {}).get("sha256") == got[name(cell)]["sha256"]
        if not same:
            bad.append(name(cell))
        print(f"{name(cell):34s} {got[name(cell)]['sha256'][:16]}  {'same' if same else 'DIFFERENT'}  "
              f"{time.perf_counter() - t:5.1f} s", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"cells": got}, indent=1, sort_keys=True) + "\n")
    if args.write:
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        if numpy_simd() != "X86_V4":  # the pure-NumPy cells' hashes are kept per NumPy SIMD level
            by_level = data.setdefault("by_numpy_simd", {}).setdefault(numpy_simd(), {}).setdefault("cells", {})
            by_level.update({k: v for k, v in got.items() if k.endswith("/numpy")})
            got = {k: v for k, v in got.items() if not k.endswith("/numpy")}
        if vendor() in data.get("by_vendor", {}):
            data["by_vendor"][vendor()]["cells"] = {**_vendor_cells(data), **got}
        else:
            data.update(seed=SEED, cells={**_vendor_cells(data), **got})
        RECORD.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    if args.check and bad:
        print(f"{len(bad)} of {len(got)} cells differ from {RECORD.name}: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
