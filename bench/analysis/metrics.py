"""Per-run summary statistics: pure NumPy functions, no I/O.

Every function takes the finished training episodes of one run as parallel 1-D
arrays in the order they finished:

- ``steps``: shape ``(n_episodes,)``, the global env step at which each episode ended;
- ``wall``: shape ``(n_episodes,)``, training wall-clock seconds at that moment;
- ``returns``: shape ``(n_episodes,)``, the raw episode return.

A run that never reaches its threshold is *censored*: its steps- and
seconds-to-threshold are ``None``, and it is kept, never dropped (dropping it
would make slow algorithms look fast; see Agarwal et al. 2021, "Deep RL at the
Edge of the Statistical Precipice").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


def trailing_mean(returns: np.ndarray, window: int) -> np.ndarray:
    """Mean of each full window of ``window`` consecutive returns.

    :param returns: shape ``(n,)``.
    :returns: shape ``(max(n - window + 1, 0),)``; element ``i`` is the mean of
        ``returns[i : i + window]``, i.e. the moving average as of episode
        ``i + window - 1``.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    r = np.asarray(returns, dtype=float)
    if r.size < window:
        return np.empty(0)
    c = np.concatenate([[0.0], np.cumsum(r)])
    return (c[window:] - c[:-window]) / window


def first_crossing(returns: np.ndarray, threshold: float, window: int) -> int | None:
    """Index of the first episode at which the trailing ``window``-episode mean
    reaches ``threshold`` (``>=``), or ``None`` when it never does.

    Only full windows count, as in Gym's "solved" convention (the average over
    100 consecutive episodes), so one lucky early episode cannot count as solving.
    """
    ma = trailing_mean(returns, window)
    hits = np.flatnonzero(ma >= threshold)
    return None if hits.size == 0 else int(hits[0]) + window - 1


@dataclass(frozen=True)
class RunSummary:
    """What one run reports. ``None`` means censored (never reached) or no episodes."""

    episodes: int
    steps_to_threshold: int | None
    seconds_to_threshold: float | None
    final_return: float | None
    auc: float | None

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(
    steps: np.ndarray,
    wall: np.ndarray,
    returns: np.ndarray,
    *,
    threshold: float | None,
    window: int,
) -> RunSummary:
    """Summarise one run's training episodes.

    - steps/seconds-to-threshold: where the trailing ``window``-episode mean first
      reaches ``threshold`` (``None`` if never, or if there is no threshold);
    - final return: the mean of the last ``window`` episodes (all of them if fewer);
    - AUC: the mean training return over the whole run, a sample-efficiency
      summary that rewards learning early.
    """
    steps = np.asarray(steps)
    wall = np.asarray(wall, dtype=float)
    returns = np.asarray(returns, dtype=float)
    if not (steps.shape == wall.shape == returns.shape) or returns.ndim != 1:
        raise ValueError(
            f"steps, wall and returns must be 1-D of equal length, got {steps.shape}, {wall.shape}, {returns.shape}"
        )
    n = int(returns.size)
    if n == 0:
        return RunSummary(0, None, None, None, None)
    i = None if threshold is None else first_crossing(returns, threshold, window)
    return RunSummary(
        episodes=n,
        steps_to_threshold=None if i is None else int(steps[i]),
        seconds_to_threshold=None if i is None else float(wall[i]),
        final_return=float(returns[-window:].mean()),
        auc=float(returns.mean()),
    )
