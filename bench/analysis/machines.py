"""Time comparisons by design: both sides measured on one machine, each run with its core to itself (issue 40).

CPU seconds per step depend on the machine, and not by one factor for all code (own A2C ran 1.22×
faster on an Intel Xeon than on an AMD EPYC, SB3 PPO 1.03× slower, both on HalfCheetah-v5:
docs/statistics.md), and a run that shared its core has inflated CPU seconds. Earlier versions
corrected for both with store-wide factors (the largest same-label ratio, the largest re-measured
contention ratio). Those were maxima without uncertainty, grew with the number of pairs, and made one
answer depend on unrelated labels. Instead, a time comparison is designed so that neither arises:

- only runs that had their core to themselves count (:func:`bench.storage.vocabulary.is_contended`; a contended
  run counts once ``bench run --remeasure contended`` has measured it again on a quiet core);
- only runs whose machine is known: a CPU name can hide virtual machines of different speeds, so a run
  needs a speed probe. A run without one (from before the probe existed) is an unknown machine: it is
  matched with no other run;
- on each env, the two sides are compared on the one machine on which both have the most runs (the
  larger of the two sides' least counts; ties: the first machine by name). The machines are told apart
  from the two sides' runs on that env alone (:func:`machine_classes`), not
  over the store: another label's runs at probe times between two machines' would otherwise chain them
  into one class. So neither the choice nor the runs it takes read any other label or env.

Effects on different envs may come from different machines: the env-level effect is a difference on one
machine, and what is left of the machine's part (a machine × algorithm interaction) is spread across envs,
where the test over envs (:mod:`bench.stats.generalise`) counts it as heterogeneity.

Pure: frames in, arrays out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["PROBE_CLASS", "PROBE_SPAN", "TIME_COLUMNS", "known_machine", "machine_classes", "one_machine"]

#: Speed-probe classes (:mod:`bench.run.probe`). A run alone is rounded to a power of this factor
#: (:func:`bench.analysis.provenance.probe_class_ms`). Runs read together (:func:`machine_classes`) are grouped
#: instead: sorted by probe, a new machine starts where the next probe is more than this factor slower. A fixed
#: grid split one machine whose probes straddled a grid line: the 18 Atari reference runs of one VM (least
#: probes 12.0-13.0 ms, 2026-11-27) fell into two classes.
PROBE_CLASS = 2 ** 0.25
#: A group of probes wider than this (max / min) is not one machine's noise (the widest seen on one CPUID in
#: one session: 1.20, least probes 11.4-13.7 ms over the 210 tuned-variant runs, 2026-11-27): it is split at
#: its widest gap until no group is wider.
PROBE_SPAN = 2 ** 0.5

#: Per-run columns that measure time: compared only as :func:`one_machine` selects.
TIME_COLUMNS = frozenset({"auc_time_norm", "cpu_per_msteps"})


def known_machine(runs: pd.DataFrame) -> np.ndarray:
    """Which runs may enter a time comparison: uncontended, with a known machine. ``(n_runs,)`` booleans.

    :param runs: columns ``contended`` (bool) and ``machine`` (the speed-probe class's hardware string, or
        ``None`` / NaN for a run without a probe).
    """
    m = runs["machine"]
    return (~runs["contended"].astype(bool) & m.notna() & (m.astype(str) != "")).to_numpy()


def one_machine(x: pd.DataFrame, y: pd.DataFrame, col: str, envs: list[str]
                ) -> tuple[list[np.ndarray], list[np.ndarray], list[str | None]]:
    """Per env, the values of ``col`` of both sides' runs on the one machine they share most.

    :param x, y: one row per run, columns ``env``, ``machine``, ``contended`` and ``col``; with columns
        ``hw_key`` and ``probe_ms`` (:func:`bench.analysis.provenance.hardware_key`, ``least_probe``) the
        machines are classed from these two sides' runs on each env, else ``machine`` is taken as given.
    :returns: ``(x_tasks, y_tasks, machines)`` in ``envs`` order: arrays ``(n_i,)`` and ``(m_i,)`` (empty
        where the two share no known machine on that env) and the machine used (``None`` there).
    """
    xt, yt, used = [], [], []
    xs, ys = x[known_machine(x)] if len(x) else x, y[known_machine(y)] if len(y) else y
    for e in envs:
        xe, ye = _local_machines(xs[xs["env"] == e], ys[ys["env"] == e])
        nx, ny = xe["machine"].value_counts(), ye["machine"].value_counts()
        shared = sorted(set(nx.index) & set(ny.index))
        if not shared:
            xt.append(np.empty(0))
            yt.append(np.empty(0))
            used.append(None)
            continue
        best = max(shared, key=lambda m: (min(nx[m], ny[m]), -shared.index(m)))
        xt.append(xe.loc[xe["machine"] == best, col].to_numpy(float))
        yt.append(ye.loc[ye["machine"] == best, col].to_numpy(float))
        used.append(str(best))
    return xt, yt, used


def _local_machines(xe: pd.DataFrame, ye: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both sides' runs on one env, their ``machine`` re-labelled by classes formed from these runs alone."""
    if not {"hw_key", "probe_ms"} <= set(xe.columns) & set(ye.columns):
        return xe, ye
    both = pd.concat([xe[["hw_key", "probe_ms"]], ye[["hw_key", "probe_ms"]]], ignore_index=True)
    probes = [None if pd.isna(v) else float(v) for v in both["probe_ms"]]
    cls = machine_classes([str(k) for k in both["hw_key"]], probes)
    labels = [None if c is None else f"{k} (probe ≈{c:.3g} ms)" for k, c in zip(both["hw_key"], cls)]
    return xe.assign(machine=labels[:len(xe)]), ye.assign(machine=labels[len(xe):])


def _split_probes(vals: np.ndarray) -> list[np.ndarray]:
    """Sorted probe times (n,) → runs of indices into them, one per machine (see :data:`PROBE_CLASS`)."""
    if len(vals) == 0:
        return []
    gaps = np.diff(np.log(vals))
    cuts = np.flatnonzero(gaps > np.log(PROBE_CLASS)) + 1
    out = []
    for part in np.split(np.arange(len(vals)), cuts):
        stack = [part]
        while stack:  # too wide for one machine: cut at the widest gap inside
            q = stack.pop()
            if vals[q[-1]] / vals[q[0]] <= PROBE_SPAN:
                out.append(q)
                continue
            k = int(np.argmax(np.diff(np.log(vals[q])))) + 1
            stack += [q[k:], q[:k]]
    return sorted(out, key=lambda q: q[0])


def machine_classes(keys: list[str], probes: list[float | None]) -> list[float | None]:
    """Each run's speed-probe class in ms: within each hardware key (provenance.hardware_key), runs whose least
    probes lie close (:data:`PROBE_CLASS`, :data:`PROBE_SPAN`) are one machine, labelled by their median least
    probe (3 significant figures). ``None`` where a run recorded no probe. ``keys``, ``probes``: (n_runs,) →
    (n_runs,). The classes depend on every run passed: pass only the runs a figure compares."""
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        if probes[i] is not None:
            groups.setdefault(k, []).append(i)
    out: list[float | None] = [None] * len(keys)
    for idx in groups.values():
        order = sorted(idx, key=lambda i: probes[i])
        vals = np.array([probes[i] for i in order], dtype=float)
        for part in _split_probes(vals):
            label = float(f"{np.median(vals[part]):.3g}")
            for j in part:
                out[order[j]] = label
    return out
