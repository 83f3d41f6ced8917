"""Collapse diagnosis: runs whose policy stopped exploring, or whose gradients blew up.

Two signatures, read from the diagnostics a run records (pure NumPy on per-run arrays; see
:func:`checkable` for which runs each can see: SB3 records no gradient norm):

- **log-std collapse** (continuous actions): the policy's mean log standard deviation
  (``policy/log_std``, recorded after every update by both implementations) falls more
  than :data:`LOG_STD_DROP` nats below its first recorded value, i.e. the action noise
  shrinks by a factor of more than e^1.5 ≈ 4.5, while the run has not solved the env and
  its normalised return improves by less than :data:`STALL` from that step to the end.
  A Gaussian policy whose std collapses before it has found a good behaviour stops
  exploring and stays where it is; the entropy bonus (``ent_coef``, and its schedule)
  exists to prevent it (Haarnoja et al. 2018 make the same argument for maximum-entropy
  RL; the seed texts' HalfCheetah example is this failure).
- **gradient spike**: a recorded gradient norm (``grad/norm``, before clipping) more than
  :data:`SPIKE_FACTOR` times the median of the run's earlier norms, after at least
  :data:`SPIKE_WARMUP` updates. Clipping bounds the step, but a spike of that size says
  the loss surface or the advantages went wrong there.

The step at which each began is reported, so the report can point at it.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

#: Nats below its first value that the mean log-std must fall to count as collapsed.
LOG_STD_DROP = 1.5
#: Normalised-return improvement below which a run has stopped improving after the collapse.
STALL = 0.05
#: A gradient norm this many times the median of the earlier ones is a spike ...
SPIKE_FACTOR = 10.0
#: ... once this many updates have set the median.
SPIKE_WARMUP = 10


@dataclass(frozen=True)
class Flag:
    """One flagged run: ``kind`` is ``log-std collapse`` or ``gradient spike``, ``step`` where it began."""

    kind: str
    step: int
    detail: str


def log_std_collapse(steps: np.ndarray, log_std: np.ndarray, curve_steps: np.ndarray, curve_norm: np.ndarray) -> Flag | None:
    """The log-std signature of one run, or ``None``.

    :param steps, log_std: shape ``(u,)``, the recorded mean log-std after each (stored) update.
    :param curve_steps, curve_norm: shape ``(n,)``, the run's normalised learning curve (running mean of
        episode returns mapped to 0 = random policy, 1 = threshold) at each episode's end.
    """
    log_std = np.asarray(log_std, dtype=float)
    ok = np.isfinite(log_std)
    if ok.sum() < 2 or len(curve_norm) == 0:
        return None
    steps, log_std = np.asarray(steps)[ok], log_std[ok]
    below = np.flatnonzero(log_std <= log_std[0] - LOG_STD_DROP)
    if below.size == 0:
        return None
    at = int(steps[below[0]])
    curve_norm = np.asarray(curve_norm, dtype=float)
    final = float(curve_norm[-1])
    then = float(np.interp(at, np.asarray(curve_steps, dtype=float), curve_norm))
    if final >= 1.0 or final - then >= STALL:
        return None  # solved, or still improving after the noise shrank: a policy converging, not collapsing
    return Flag("log-std collapse", at, f"log-std {log_std[0]:.2f} → {log_std[below[0]]:.2f} by step {at:,}; "
                                        f"normalised return {then:.2f} then, {final:.2f} at the end")


def gradient_spike(steps: np.ndarray, grad_norm: np.ndarray) -> Flag | None:
    """The first gradient-norm spike of one run, or ``None``.

    :param steps, grad_norm: shape ``(u,)``, the recorded gradient norm after each (stored) update.
    """
    steps = np.asarray(steps)
    earlier: list[float] = []  # the finite norms before update i, sorted: a running median, not one per update
    for i, v in enumerate(np.asarray(grad_norm, dtype=float).tolist()):
        if not math.isfinite(v):
            continue
        if i >= SPIKE_WARMUP and len(earlier) >= SPIKE_WARMUP:
            n = len(earlier)
            median = earlier[n // 2] if n % 2 else (earlier[n // 2 - 1] + earlier[n // 2]) / 2  # as np.median
            if v > SPIKE_FACTOR * median > 0:
                return Flag("gradient spike", int(steps[i]), f"gradient norm {v:.3g} at step {int(steps[i]):,}, "
                                                             f"{v / median:.0f}× the median before it")
        bisect.insort(earlier, v)
    return None


#: Which diagnostic each signature reads; a run without it cannot be flagged by that signature.
NEEDS = {"gradient spike": "grad/norm", "log-std collapse": "policy/log_std"}


def checkable(diagnostics) -> dict[str, set[str]]:
    """Run key → the signatures its recorded diagnostics allow (:data:`NEEDS`).

    SB3 records no gradient norm, so its runs can show a log-std collapse (continuous actions)
    but never a gradient spike: a flag count must be read against what could be flagged.

    :param diagnostics: ``key, name`` (and more) rows.
    """
    out: dict[str, set[str]] = {}
    if len(diagnostics):
        for (key, name) in diagnostics[["key", "name"]].drop_duplicates().itertuples(index=False):
            for kind, need in NEEDS.items():
                if name == need:
                    out.setdefault(key, set()).add(kind)
    return out


def _by_key(frame, cols: list[str]) -> dict:
    """``frame``'s ``cols`` as NumPy arrays per key, rows in their stored order: one sort for the whole
    frame rather than a boolean mask per run (the report scores about a thousand runs)."""
    if not len(frame):
        return {}
    codes, keys = frame["key"].factorize()
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(keys) + 1))
    arrays = [frame[c].to_numpy()[order] for c in cols]
    return {k: tuple(a[bounds[i]:bounds[i + 1]] for a in arrays) for i, k in enumerate(keys)}


def flags(runs, episodes, diagnostics, anchors: dict, traits: dict):
    """Every flagged run of a report: a DataFrame with columns key, env, label, seed, kind, step, detail.

    :param runs: the scored runs (``key, env, label, seed, window``).
    :param episodes: ``key, step, ret`` in order; :param diagnostics: ``key, step, name, value``.
    :param anchors: env id → anchor (``random_return``, ``threshold``); :param traits: env id → traits.
    """
    import pandas as pd

    from bench.stats.metrics import running_mean

    cols = ["key", "env", "label", "seed", "kind", "step", "detail"]
    out = []
    ep = _by_key(episodes, ["step", "ret"])
    series = {}  # (key, diagnostic name) → (steps, values), for the names the signatures read
    if len(diagnostics):
        d = diagnostics[diagnostics["name"].isin(["policy/log_std", "grad/norm_max", "grad/norm"])]
        for name, g in d.groupby("name", sort=False):
            series.update({(k, name): v for k, v in _by_key(g, ["step", "value"]).items()})
    for r in runs.itertuples():
        found = []
        a, e = anchors.get(r.env), ep.get(r.key)
        ls = series.get((r.key, "policy/log_std"))
        if traits.get(r.env, {}).get("action") == "continuous" and ls is not None and a is not None and e is not None:
            curve = (running_mean(e[1].astype(float), int(r.window)) - a.random_return) / (a.threshold - a.random_return)
            found.append(log_std_collapse(ls[0], ls[1].astype(float), e[0].astype(float), curve))
        g = series.get((r.key, "grad/norm_max")) or series.get((r.key, "grad/norm"))
        if g is not None:
            found.append(gradient_spike(g[0], g[1].astype(float)))
        out += [dict(key=r.key, env=r.env, label=r.label, seed=int(r.seed), kind=f.kind, step=f.step, detail=f.detail)
                for f in found if f is not None]
    return pd.DataFrame(out, columns=cols)
