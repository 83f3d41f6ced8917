"""Per-run scores and learning curves: :func:`score` turns a :class:`bench.analysis.readmodel.Data` into
:class:`Scored` (normalised final return, AUC against env steps and against CPU seconds, crossing times,
each run's machine), with each env's curves on fixed grids. Pure: frames in, frames and arrays out; see
:mod:`bench.analysis.scoring` for what each score means.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bench.stats import aggregate as stats
import bench.analysis.machines as machines
from bench.analysis.criteria import Criterion
from bench.stats.metrics import axis_grid, curve_on_grid, first_crossing, normalised_auc
from bench.analysis.provenance import hardware_key, hardware_of, least_probe, probe_class_ms
from bench.analysis.readmodel import Data
from bench.storage.vocabulary import CONTENTION_RATIO

__all__ = ["EnvCurves", "Scored", "score"]

@dataclass
class EnvCurves:
    """One env's learning curves on its fixed grids.

    :param steps: shape ``(G,)`` env steps, over the env's budget.
    :param cpu: shape ``(G,)`` CPU seconds, over the env's time horizon (empty without a time scale).
    :param by_steps: label → raw-return curves ``(n_runs, G)`` against ``steps``.
    :param by_cpu: label → raw-return curves ``(n_runs, G)`` against ``cpu``.
    """

    steps: np.ndarray
    cpu: np.ndarray
    by_steps: dict[str, np.ndarray]
    by_cpu: dict[str, np.ndarray]


@dataclass
class Scored:
    """Per-run scores of the pooled done runs, and per-env curves.

    ``runs`` columns: key, env, label, algo, impl, seed, timesteps, total_steps, wall_s, cpu_s,
    final_return, solved (bool), solved_f (0/1), t_steps, t_cpu, final_norm, auc_steps_norm,
    auc_time_norm (NaN where the env has no anchors or time scale), cpu_estimated, contended, hardware
    (:func:`hardware_of`), machine (the hardware string where the run has a speed-probe class, else ``None``:
    an unknown machine, :mod:`bench.analysis.machines`), hw_key (:func:`hardware_key`) and probe_ms (its least
    probe, ``None`` without one), from which a time comparison classes its two sides' machines, meta.
    """

    runs: pd.DataFrame
    curves: dict[str, EnvCurves]
    traits: dict[str, dict[str, Any]]
    horizons: dict[str, float] = field(default_factory=dict)
    _cells: dict[tuple[str, str], dict[tuple[str, str], np.ndarray]] = field(default_factory=dict, repr=False)
    #: Results of pure functions of these runs, by the function's name and arguments (:meth:`once`).
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    def once(self, key: Any, compute: Any) -> Any:
        """``compute()``, computed once per ``key`` for these runs (a pure function of them: parity of a
        pair of labels, asked by every profile and priority that pools them)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def cells(self, col: str, by: str = "label") -> dict[tuple[str, str], np.ndarray]:
        """``(label or algo, env) → (n_runs,)`` values of ``col`` (runs with normalised scores only), computed once."""
        if (col, by) not in self._cells:
            r = self.runs[self.runs["final_norm"].notna() & self.runs[col].notna()]
            self._cells[(col, by)] = {(k, e): g.to_numpy(float) for (k, e), g in r.groupby([by, "env"], sort=True)[col]}
        return self._cells[(col, by)]

    def tasks(self, name: str, col: str, envs: list[str], by: str = "label") -> list[np.ndarray]:
        """Per-task arrays of ``col`` for a label (``by="label"``) or algorithm (``by="algo"``) on ``envs``."""
        c = self.cells(col, by)
        return [c.get((name, e), np.empty(0)) for e in envs]

    def covers(self, name: str, col: str, envs: list[str], by: str = "label") -> bool:
        """Whether ``name`` has scored runs of ``col`` on every one of ``envs``."""
        return all(t.size for t in self.tasks(name, col, envs, by))

    def pair(self, x: str, y: str, crit: Criterion, envs: list[str], by_x: str = "label",
             by_y: str | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per env of ``envs``, the runs of ``x`` and ``y`` that a test of the two on ``crit`` compares: every
        scored run, except on a time measure (``crit.is_time``), where only the runs of the one machine both
        share most on each env (:func:`bench.analysis.machines.one_machine`; empty where they share none)."""
        by_y, col = by_y or by_x, crit.column
        if not crit.is_time:
            return self.tasks(x, col, envs, by_x), self.tasks(y, col, envs, by_y)
        r = self.runs[self.runs["final_norm"].notna() & self.runs[col].notna()]
        xt, yt, _ = machines.one_machine(r[r[by_x] == x], r[r[by_y] == y], col, envs)
        return xt, yt


#: id of an episode table → its :func:`_episode_arrays`, while the table lives (the read model's tables are
#: not modified after loading; a command scores views of one table several times, e.g. the off-policy lines).
_SPLITS: dict[int, tuple] = {}


def _episode_arrays(ep: pd.DataFrame) -> tuple[dict[Any, tuple[int, int]], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The (key-ordered) episode table split into one slice per run without a Python-level groupby: run key →
    ``(start, stop)`` rows, then the ``step``, ``wall_s``, ``ret`` and ``cpu_s`` columns as float arrays of
    shape ``(n_episodes,)``. The keys as integer codes: a hash of millions of Arrow strings, not millions of
    Python strings. Computed once per table."""
    if id(ep) in _SPLITS:
        return _SPLITS[id(ep)]
    codes, uniques = pd.factorize(ep["key"])
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.array([], dtype=int)
    bounds = dict(zip(uniques[codes[starts]], zip(starts, np.r_[starts[1:], len(codes)])))
    step_a, wall_a, ret_a = (ep[c].to_numpy(dtype=float) for c in ("step", "wall_s", "ret"))
    cpu_a = pd.to_numeric(ep["cpu_s"], errors="coerce").to_numpy(dtype=float)
    out = _SPLITS[id(ep)] = (bounds, step_a, wall_a, ret_a, cpu_a)
    weakref.finalize(ep, _SPLITS.pop, id(ep), None)
    return out


def score(data: Data) -> Scored:
    """Curves on fixed grids and normalised per-run scores (see the module docstring)."""
    cols = ["key", "env", "label", "algo", "impl", "seed", "timesteps", "total_steps", "wall_s", "cpu_s", "window",
            "final_return", "steps_to_threshold", "meta"]
    runs = data.runs.loc[data.runs["pooled"].astype(bool), cols].copy() if not data.runs.empty \
        else pd.DataFrame(columns=cols)
    runs = runs.reset_index(drop=True)
    # The analysis filters these few hundred rows by label, algorithm and env thousands of times: as NumPy
    # object columns each filter is one array take, where pandas' Arrow-backed strings cost a pyarrow call
    # per column (about 2 CPU s of a report of the shipped reference).
    for c in ("key", "env", "label", "algo", "impl"):
        runs[c] = runs[c].astype(object)
    bounds, step_a, wall_a, ret_a, cpu_a = _episode_arrays(data.episodes)

    for c in ("final_norm", "auc_steps_norm", "auc_time_norm", "t_cpu"):
        runs[c] = np.nan
    runs["solved"] = runs["steps_to_threshold"].notna()
    runs["solved_f"] = runs["solved"].astype(float)
    runs["t_steps"] = runs["steps_to_threshold"].where(runs["solved"], runs["total_steps"]).astype(float)
    runs["cpu_estimated"] = False
    ratio = runs["wall_s"].astype(float) / runs["cpu_s"].astype(float).where(runs["cpu_s"] > 0)
    runs["contended"] = (ratio > CONTENTION_RATIO).fillna(False).astype(bool)
    runs["hardware"] = [hardware_of(m if isinstance(m, dict) else {}) for m in runs["meta"]]
    runs["machine"] = [h if isinstance(m, dict) and probe_class_ms(m) is not None else None
                       for h, m in zip(runs["hardware"], runs["meta"])]
    # What a time comparison classes its two sides' runs by (bench.analysis.machines.one_machine).
    runs["hw_key"] = [hardware_key(m if isinstance(m, dict) else {}) for m in runs["meta"]]
    runs["probe_ms"] = [least_probe(m) if isinstance(m, dict) else None for m in runs["meta"]]

    curves: dict[str, EnvCurves] = {}
    horizons: dict[str, float] = {}
    for env_id, g in runs.groupby("env", sort=True):
        budget = data.budgets.get(env_id, int(g["timesteps"].max()))
        scale = data.traits.get(env_id, {}).get("time_scale_us")
        # At equal compute the time axis is the CPU budget every run had, and there is no common step
        # axis: a faster algorithm ran more steps, so sample efficiency is not scored (NaN).
        equal_compute = env_id in data.cpu_budgets
        horizon = data.cpu_budgets[env_id] if equal_compute else budget * float(scale) * 1e-6 if scale else None
        if horizon:
            horizons[env_id] = horizon
        # At equal compute the step budget is out of reach: the step axis (figures only) ends where the
        # longest run ended, rather than holding every curve flat to the unreached budget.
        steps_grid = axis_grid(int(g["total_steps"].max()) if equal_compute else budget)
        cpu_grid = axis_grid(horizon) if horizon else np.empty(0)
        a = data.anchors.get(env_id)
        thr = data.traits.get(env_id, {}).get("threshold")
        by_steps: dict[str, list] = {}
        by_cpu: dict[str, list] = {}
        for idx, r in g.iterrows():
            s0, s1 = bounds.get(r["key"], (0, 0))
            if s1 <= s0:
                continue
            steps, ret, window = step_a[s0:s1], ret_a[s0:s1], int(r["window"])
            cpu = cpu_a[s0:s1]
            if np.isnan(cpu).any():
                # Recorded before per-episode CPU seconds: the run's own CPU/wall ratio scales its wall clock.
                cpu = wall_a[s0:s1] * (float(r["cpu_s"]) / float(r["wall_s"]) if r["wall_s"] and r["cpu_s"] else 1.0)
                runs.at[idx, "cpu_estimated"] = True
            crossing = None if thr is None else first_crossing(ret, float(thr), window)
            runs.at[idx, "t_cpu"] = float(cpu[crossing]) if crossing is not None else float(r["cpu_s"] or cpu[-1])
            by_steps.setdefault(r["label"], []).append(curve_on_grid(steps, ret, window, steps_grid))
            if horizon:
                by_cpu.setdefault(r["label"], []).append(curve_on_grid(cpu, ret, window, cpu_grid))
            if a is not None:
                lo, hi = a.random_return, a.threshold
                runs.at[idx, "final_norm"] = min(float(stats.normalise(r["final_return"], lo, hi)), 1.0)
                if not equal_compute:
                    runs.at[idx, "auc_steps_norm"] = normalised_auc(steps, ret, window, upto=budget, low=lo, high=hi)
                if horizon:
                    runs.at[idx, "auc_time_norm"] = normalised_auc(cpu, ret, window, upto=horizon, low=lo, high=hi)
        curves[env_id] = EnvCurves(steps_grid, cpu_grid, {k: np.array(v) for k, v in by_steps.items()},
                                   {k: np.array(v) for k, v in by_cpu.items()})
    return Scored(runs, curves, data.traits, horizons)
