"""What running a suite would cost, in CPU-hours, estimated before it starts.

The estimate is each cell's budget times its env's time scale (``time_scale_us``: the registry's
:data:`bench.envs.registry.TIME_SCALE_US`, or the suite's own), the mean CPU microseconds per step of
the slowest implementation measured on that env, so it errs high for the faster ones; a cell with a
``cpu_seconds`` budget costs at most that. An env with no time scale has no estimate.

An off-policy run (DQN, SAC, TD3) spends its time in gradient steps, not in the env: it is charged, on top of
the env's steps, the measured CPU cost of one gradient step of its algorithm
(:data:`bench.algos.offpolicy_params.GRADIENT_STEP_US`) for each of its gradient steps after ``learning_starts``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from bench.algos.offpolicy_params import GRADIENT_STEP_US

#: Above this estimate, ``bench run`` starts only with ``--yes`` (1,000 CPU-hours: six weeks of one core).
CONFIRM_CPU_HOURS = 1_000.0
#: A cell on an env with no time scale needs ``--yes`` above this many steps (1e8: past every
#: budget of the shipped suites, whose largest is 1e6, by a factor of 100).
CONFIRM_UNKNOWN_STEPS = 10**8


@dataclass(frozen=True)
class Cost:
    """An estimate for some cells: ``cpu_hours`` over the cells whose env has a time scale (or a CPU
    budget), and the env keys of those that have none (``unknown``), with their largest budget."""

    cpu_hours: float
    cells: int
    unknown: tuple[str, ...] = ()
    unknown_max_steps: int = 0
    #: How many of ``cells`` are on the ``unknown`` envs (not in ``cpu_hours``).
    unknown_cells: int = 0

    def line(self) -> str:
        """The estimate in words, e.g. ``about 3.2 CPU-hours for 280 cells``."""
        def n_cells(n: int) -> str:
            return f"{n:,} cell{'s' if n != 1 else ''}"

        hours = f"{self.cpu_hours:.2g}" if self.cpu_hours < 10 else f"{self.cpu_hours:,.0f}"
        why = (f"{', '.join(self.unknown)} (no time scale; give the env time_scale_us in the suite for an "
               "estimate)")
        if not self.unknown:
            return f"about {hours} CPU-hours for {n_cells(self.cells)} (from the envs' time scales)"
        if self.unknown_cells == self.cells:
            return f"unknown for {n_cells(self.cells)} on {why}"
        return (f"about {hours} CPU-hours for {n_cells(self.cells - self.unknown_cells)} (from the envs' time "
                f"scales), and unknown for {n_cells(self.unknown_cells)} on {why}")

    def needs_confirmation(self) -> bool:
        """Whether the run is large enough that starting it must be confirmed."""
        return self.cpu_hours > CONFIRM_CPU_HOURS or self.unknown_max_steps > CONFIRM_UNKNOWN_STEPS


#: A run with no ``max_wall_minutes`` of its suite's is stopped after this many times its estimated CPU time
#: (:func:`cell_cpu_seconds`), and no sooner than :data:`DEFAULT_WALL_FLOOR_MIN`: a run that never ends (a hung
#: plugin, an env that never steps) ends. Generous on purpose: the time scale is the slowest implementation's mean,
#: and a run on a shared core takes more wall than CPU time (wall / CPU up to 6 on the project's 2-core machine
#: at a load of 12), so a healthy run, even a plugin several times slower, is far from it.
DEFAULT_WALL_MULTIPLE = 20
DEFAULT_WALL_FLOOR_MIN = 60


def cell_cpu_seconds(cell: Any, time_scale_us: float | None) -> float | None:
    """A cell's estimated CPU seconds: its budget at its env's ``time_scale_us`` (plus an off-policy run's gradient
    steps), at most its ``cpu_seconds`` budget; that budget alone where the env has no time scale; else None."""
    if time_scale_us is not None:
        s = cell.timesteps * float(time_scale_us) / 1e6 + _gradient_seconds(cell)
        return min(s, cell.cpu_seconds) if cell.cpu_seconds is not None else s
    return cell.cpu_seconds


def default_wall_minutes(cell: Any, time_scale_us: float | None) -> float | None:
    """The wall-clock limit of a cell whose suite sets none: :data:`DEFAULT_WALL_MULTIPLE` times its estimated CPU
    time, at least :data:`DEFAULT_WALL_FLOOR_MIN`, rounded up to 0.01 min; None where there is no estimate."""
    s = cell_cpu_seconds(cell, time_scale_us)
    if s is None:
        return None
    return max(float(DEFAULT_WALL_FLOOR_MIN), math.ceil(DEFAULT_WALL_MULTIPLE * s / 60 * 100) / 100)


def estimate(cells: Iterable[Any], env_meta: dict[str, dict[str, Any]]) -> Cost:
    """The cost of ``cells`` (:class:`bench.suites.suite.Cell`), with ``env_meta`` (a loaded suite's:
    env key → its ``time_scale_us``)."""
    seconds, n, unknown, unknown_max, n_unknown = 0.0, 0, {}, 0, 0
    for c in cells:
        n += 1
        s = cell_cpu_seconds(c, (env_meta.get(c.env_id) or {}).get("time_scale_us"))
        if s is not None:
            seconds += s
        else:
            unknown[c.env_id] = True
            n_unknown += 1
            unknown_max = max(unknown_max, c.timesteps)
    return Cost(cpu_hours=seconds / 3600, cells=n, unknown=tuple(unknown), unknown_max_steps=unknown_max,
                unknown_cells=n_unknown)


def _gradient_seconds(cell: Any) -> float:
    """The gradient steps' CPU seconds of an off-policy cell (0 for the rest)."""
    per_step = GRADIENT_STEP_US.get(getattr(cell, "algo", ""))
    if per_step is None:
        return 0.0
    hp = getattr(cell, "hyperparams", {}) or {}
    freq, grads = int(hp.get("train_freq", 1)), int(hp.get("gradient_steps", 1))
    per_env_step = 1.0 if grads < 0 else grads / freq  # -1: as many gradient steps as env steps collected
    return max(0, cell.timesteps - int(hp.get("learning_starts", 0))) * per_env_step * per_step / 1e6
