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


# --------------------------------------------------------------------------- #
# Learning curves on a fixed axis (the report's per-run scores, and the tuner's)
# --------------------------------------------------------------------------- #
#: Grid points per learning curve.
GRID = 100


def running_mean(returns: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` returns at each episode (of all so far for the first ``window - 1``).

    :param returns: shape ``(n,)``. :returns: shape ``(n,)``.
    """
    r = np.asarray(returns, dtype=float)
    c = np.concatenate([[0.0], np.cumsum(r)])
    i = np.arange(1, r.size + 1)
    lo = np.maximum(i - window, 0)
    return (c[i] - c[lo]) / (i - lo)


def axis_grid(upto: float, points: int = GRID) -> np.ndarray:
    """``points`` equally spaced points in ``(0, upto]``: the grid a curve is read on, shape ``(points,)``."""
    return np.linspace(0.0, float(upto), points + 1)[1:]


def curve_on_grid(x: np.ndarray, returns: np.ndarray, window: int, grid: np.ndarray) -> np.ndarray:
    """A run's learning curve read on ``grid``: the running mean of its last ``window``
    returns at each episode's end ``x`` (steps or seconds), linearly interpolated;
    held at its first value before the first episode ends and at its last value
    after the run ended (a user stops and keeps the policy).

    :param x, returns: shape ``(n,)``, ``x`` non-decreasing. :returns: shape ``grid.shape``.
    """
    return np.interp(grid, np.asarray(x, dtype=float), running_mean(returns, window))


def normalised_auc(x: np.ndarray, returns: np.ndarray, window: int, *, upto: float, low: float, high: float,
                   points: int = GRID) -> float:
    """Area under the normalised learning curve on ``(0, upto]``, as a mean (1 = at the threshold all along).

    The curve (:func:`curve_on_grid`) is mapped so that ``low`` (a random policy's
    return) is 0 and ``high`` (the threshold) is 1, and capped at 1: past the
    threshold counts as solved, so an env with headroom above its threshold does
    not outweigh the others. ``upto`` is fixed per env (its budget in steps, or its
    time horizon in CPU seconds), never taken from the runs being compared, so a
    run's score does not depend on which other runs are in the store.
    """
    if not high > low:
        raise ValueError(f"normalised_auc needs high > low, got low {low}, high {high}")
    c = curve_on_grid(x, returns, window, axis_grid(upto, points))
    return float(np.minimum((c - low) / (high - low), 1.0).mean())
