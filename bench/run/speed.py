"""``bench speed``: the project's own implementations against SB3, side by side.

Both implementations run in this one process, one torch thread, with the same
resolved hyperparameters (the zoo's for the env unless overridden), alternating
round by round so that drift in machine load hits both alike. A run's time is
the whole ``train`` call (env and network set-up included), and its speed is
env steps per second of that time. Optionally each also runs several seeds to
compare samples-to-threshold, because speed only counts at equal sample
efficiency.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass
class SpeedResult:
    algo: str
    env_id: str
    timesteps: int
    own_steps_per_s: list[float] = field(default_factory=list)
    sb3_steps_per_s: list[float] = field(default_factory=list)
    own_steps_to_threshold: list[int | None] = field(default_factory=list)
    sb3_steps_to_threshold: list[int | None] = field(default_factory=list)
    #: CPU seconds of the ``train`` call (set-up included, one thread) when the trailing mean first reached the
    #: threshold; None where it never did. Time to threshold is what a user waits for: speed at equal samples.
    own_cpu_s_to_threshold: list[float | None] = field(default_factory=list)
    sb3_cpu_s_to_threshold: list[float | None] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """Median own speed over median SB3 speed."""
        return statistics.median(self.own_steps_per_s) / statistics.median(self.sb3_steps_per_s)


def _median_censored(xs: list[int | None]) -> float | None:
    """Median with censored runs (None) counted as +inf; None if the median itself is censored."""
    vals = sorted(float("inf") if x is None else float(x) for x in xs)
    if not vals:
        return None
    m = statistics.median(vals)
    return None if m == float("inf") else m


def _timed(fn: Callable[..., None], *args: Any, **kw: Any) -> tuple[float, Any]:
    from bench.storage.record import Recorder

    rec = Recorder()
    t = time.perf_counter()
    fn(*args, recorder=rec, **kw)
    return rec.steps / (time.perf_counter() - t), rec


def compare(
    algo: str,
    env_id: str,
    *,
    timesteps: int,
    rounds: int = 3,
    seed: int = 0,
    sample_seeds: int = 0,
    sample_timesteps: int | None = None,
    threshold: float | None = None,
    window: int = 20,
    overrides: dict[str, Any] | None = None,
    progress: Callable[[str], None] = lambda s: None,
) -> SpeedResult:
    """Measure own vs SB3 ``algo`` on ``env_id``; see the module docstring."""
    from bench.algos import TRAIN
    from bench.algos.sb3 import train_sb3
    from bench.envs import get_spec
    from bench.algos.hyperparams import resolve
    from bench.stats.metrics import first_crossing

    from bench.algos.common import pin_one_thread

    pin_one_thread()
    params = resolve(algo, env_id, overrides or {})
    own = lambda **kw: TRAIN[algo](env_id, params, **kw)  # noqa: E731
    sb3 = lambda **kw: train_sb3(env_id, algo, params, **kw)  # noqa: E731
    res = SpeedResult(algo, env_id, timesteps)
    # Warm-up: first calls pay one-off imports and allocator growth.
    n = params.n_envs * getattr(params, "n_steps", 1)
    _timed(own, seed=seed, timesteps=n)
    _timed(sb3, seed=seed, timesteps=n)
    for r in range(rounds):
        a, _ = _timed(own, seed=seed, timesteps=timesteps)
        b, _ = _timed(sb3, seed=seed, timesteps=timesteps)
        res.own_steps_per_s.append(a)
        res.sb3_steps_per_s.append(b)
        progress(f"{algo} {env_id} round {r + 1}/{rounds}: own {a:,.0f} steps/s, sb3 {b:,.0f} steps/s")
    if sample_seeds:
        thr = threshold if threshold is not None else get_spec(env_id).threshold
        if thr is None:
            raise ValueError(f"{env_id} has no threshold; pass one to compare samples-to-threshold")
        budget = sample_timesteps or timesteps
        for s in range(sample_seeds):
            for fn, out, out_s in ((own, res.own_steps_to_threshold, res.own_cpu_s_to_threshold),
                                   (sb3, res.sb3_steps_to_threshold, res.sb3_cpu_s_to_threshold)):
                _, rec = _timed(fn, seed=s, timesteps=budget)
                i = first_crossing(np.asarray(rec.ep_return), thr, window)
                out.append(None if i is None else rec.ep_step[i])
                out_s.append(None if i is None else rec.ep_cpu[i])
            progress(f"{algo} {env_id} seed {s}: steps to {thr:g}: own {res.own_steps_to_threshold[-1]}, "
                     f"sb3 {res.sb3_steps_to_threshold[-1]}")
    return res


def median_steps(xs: list[int | None] | list[float | None]) -> float | None:
    return _median_censored(xs)
