"""Which machine a run ran on: speed-probe classes, and the hardware lines and warnings the report prints.

A CPU name can hide virtual machines of different speeds, so runs are told apart by their speed probe
(:mod:`bench.run.probe`), grouped over the runs read together (:func:`probe_classes`) for each run's provenance.
A line about some runs (a row's hardware line, an env's warning) groups those runs alone, so that it does not
move when unrelated runs are read beside them; time comparisons group the two sides' runs on each env alone
(:mod:`bench.analysis.machines`). Pure: run metas and frames in, strings out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# One rule for telling machines apart, here and in time comparisons.
from bench.analysis.machines import PROBE_CLASS, PROBE_SPAN, machine_classes
# One rule: the analysis flags what --remeasure re-runs, as the run layer does.
from bench.storage.vocabulary import CONTENTION_RATIO

__all__ = ["PROBE_CLASS", "PROBE_CLASS_KEY", "PROBE_SPAN", "hardware_key", "hardware_line", "hardware_of",
           "hardware_warnings", "least_probe", "machine_classes", "probe_class_ms", "probe_classes"]

#: Where :func:`load` puts each run's class (its group's median least probe, 3 significant figures).
PROBE_CLASS_KEY = "probe_class_ms"


def least_probe(meta: dict[str, Any]) -> float | None:
    """The run's least speed-probe time in ms (start or end of the run), ``None`` where it recorded none."""
    p = meta.get("cpu_probe_ms")
    vals = [float(v) for v in (p.values() if isinstance(p, dict) else ()) if v and v > 0]
    return min(vals) if vals else None


def probe_class_ms(meta: dict[str, Any]) -> float | None:
    """The run's speed-probe class in ms: where :func:`probe_classes` gave it one (every run :func:`load`
    reads), that; else its least probe time rounded to a power of :data:`PROBE_CLASS`; ``None`` where the
    run recorded no probe (runs from before 2026-11-26)."""
    if meta.get(PROBE_CLASS_KEY) is not None:
        return float(meta[PROBE_CLASS_KEY])
    least = least_probe(meta)
    if least is None:
        return None
    return float(PROBE_CLASS ** round(np.log(least) / np.log(PROBE_CLASS)))


def probe_classes(metas: list[dict[str, Any]]) -> list[float | None]:
    """Each run's speed-probe class in ms over the runs read together (:func:`machine_classes`): the machine
    the report's provenance and hardware lines name. Time comparisons form theirs from the two sides' runs
    alone (:func:`bench.analysis.machines.one_machine`). ``metas``: (n_runs,) → (n_runs,)."""
    return machine_classes([hardware_key(m) for m in metas], [least_probe(m) for m in metas])


def _hardware(meta: dict[str, Any], probe_ms: float | None) -> str:
    probe = f" (probe ≈{probe_ms:.3g} ms)" if probe_ms is not None else ""
    blas = f" · {meta['blas_threads']} BLAS thread(s)" if meta.get("blas_threads") is not None else ""
    stepping = f" · {meta['vec_env']} env stepping" if meta.get("vec_env", "sync") != "sync" else ""
    acc = meta.get("accelerator")
    gpu = f" · GPU {acc.get('name', '?')}" if isinstance(acc, dict) else ""
    return (f"{meta.get('cpu_model', '?')}{probe} · {meta.get('torch_threads', '?')} torch thread(s){blas}"
            f"{stepping}{gpu}")


def hardware_key(meta: dict[str, Any]) -> str:
    """What time figures depend on, but the speed: the CPU name, threads, env stepping and GPU
    (:func:`hardware_of` without the probe class)."""
    return _hardware(meta, None)


def hardware_of(meta: dict[str, Any]) -> str:
    """What time figures depend on: the CPU model and (where recorded) its speed-probe class
    (:func:`probe_class_ms`), torch threads, (where recorded) BLAS threads, the env stepping where it is not
    the default sync (runs from before the option have none: sync), and the GPU of a run whose networks were
    on one (``meta.accelerator``: its CPU seconds include the wait for the GPU,
    bench.run.runner.accelerator_meta)."""
    return _hardware(meta, probe_class_ms(meta))


def _machines(metas: list[dict[str, Any]]) -> list[str]:
    """The distinct machines of these runs, sorted, their speed-probe classes formed from these runs alone
    (:func:`probe_classes`): a line about some runs must not move when unrelated runs are read beside them
    (a class is labelled by its median probe, which other runs of the same machine would shift)."""
    return sorted({_hardware(m, c) for m, c in zip(metas, probe_classes(metas))})


def hardware_line(scored: Any, envs: list[str] | None = None) -> str:
    """One line for every time figure: the machines the runs' CPU seconds come from (of ``envs``' runs, where
    given, told apart from those runs alone), how time comparisons use them (:mod:`bench.analysis.machines`),
    and how many runs were contended or have no speed probe (both left out of time comparisons)."""
    r = scored.runs if envs is None else scored.runs[scored.runs["env"].isin(envs)]
    if r.empty:
        return ""
    hw = _machines(list(r["meta"]))
    n = int(r["contended"].sum())
    unknown = int(r["machine"].isna().sum())
    est = int(r["cpu_estimated"].sum())
    line = "CPU seconds on " + "; ".join(hw)
    if len(hw) > 1:
        line += "; a time comparison uses, on each env, the one machine both sides share most"
    if n:
        line += (f"; {n} of {len(r)} runs contended (wall > {CONTENTION_RATIO:g} × CPU), left out of time comparisons "
                 "until `bench run --remeasure contended` measures them again")
    if unknown:
        line += f"; {unknown} of {len(r)} runs have no speed probe (an unknown machine), left out of time comparisons"
    if est:
        line += f"; {est} runs' CPU time estimated from wall time (recorded before per-episode CPU seconds)"
    return line


def hardware_warnings(data: Any) -> dict[str, list[str]]:
    """Env id → the distinct hardware/thread settings of its pooled runs, where there is more than one.

    Time figures compared across such runs mix machines, so the report warns. Each env's machines are told
    apart from its own runs.
    """
    r = data.runs[data.runs["pooled"]] if not data.runs.empty else data.runs
    out = {}
    for env_id, g in r.groupby("env", sort=True):
        hw = _machines(list(g["meta"]))
        if len(hw) > 1:
            out[env_id] = hw
    return out
