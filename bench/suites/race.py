"""A suite's ``race:`` block: the suite is raced rung by rung on its one env (``bench race SUITE.yaml``,
docs/race.md "A race in a suite file") instead of run as a whole grid.

The block holds what ``bench race ENV``'s flags hold beyond the grid itself (``rungs``, ``cpu_hours``,
``priority``); the labels, seeds and budget are the suite's own ``algorithms``, ``seeds`` and
``defaults.timesteps``, so the file's cells are the very runs the flags would make. What a race needs of the rest
of the suite (one env, two seeds or more, labels whose runs can pause) is checked by :func:`check_race` in the
same pass as every other problem of the file.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bench.suites.problems import Problem
from bench.envs.traits import Priority

#: The rungs of the design docs/race.md chose on the shipped reference (three times apart from 1/81).
DEFAULT_RUNGS = "1/81,1/27,1/9,1/3,1"
#: Own algorithms whose runs take no checkpoints (A3C's workers update asynchronously: bench/algos/resume.py), so
#: they cannot pause at a rung; SB3's and plugins' runs take none either.
NO_PAUSE = ("a3c",)
#: Implementations whose runs take no checkpoints, so cannot race.
NO_PAUSE_IMPLS = ("sb3", "python")
RUNGS_ALLOWED = "allowed: increasing fractions of the budget in (0, 1], the last 1, e.g. 1/9,1/3,1"


def rung_fractions(text: str) -> tuple[Fraction, ...]:
    """``1/9,1/3,1`` (or ``0.5``) as fractions of the budget: increasing, each in (0, 1], the last 1.

    :raises ValueError: ``"not a list"`` (a part that is not a number) or ``"bad"`` (out of order or range); the
        caller words the line, as the flag or the file's path."""
    try:
        out = tuple(Fraction(p.strip()) for p in text.split(","))
    except (ValueError, ZeroDivisionError):
        raise ValueError("not a list") from None
    if not out or any(not 0 < f <= 1 for f in out) or any(b <= a for a, b in zip(out, out[1:])) or out[-1] != 1:
        raise ValueError("bad")
    return out


class RaceSpec(BaseModel):
    """``race:``: race the suite's labels on its one env, rung by rung (``bench race SUITE.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rungs: str = Field(DEFAULT_RUNGS, description="Fractions of the budget at which the labels still in are "
                       "compared and those ruled out stop: increasing, in (0, 1], the last 1; written as "
                       "`1/9,1/3,1` or as a list `[1/9, 1/3, 1]`.")
    cpu_hours: float | None = Field(None, gt=0, le=1e9, allow_inf_nan=False,
                                    description="End the race after the rung by which it has spent this many CPU "
                                                "hours (its answer is then that rung's).")
    priority: Priority | None = Field(None, description="samples | time: recorded with the race; a rung decides on "
                                                        "the sample score either way (the labels are the suite's).")

    @field_validator("rungs", mode="before")
    @classmethod
    def _fractions(cls, v: Any) -> str:
        parts = v if isinstance(v, list) else [v] if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        if parts is not None:
            if any(isinstance(p, bool) or not isinstance(p, (int, float, str)) for p in parts):
                raise ValueError(f"not a list of fractions; {RUNGS_ALLOWED}")
            v = ",".join(str(p) for p in parts)
        if not isinstance(v, str):
            raise ValueError(f"not a list of fractions; {RUNGS_ALLOWED}")
        try:
            got = rung_fractions(v)
        except ValueError as e:
            raise ValueError(("not a list of fractions; " if str(e) == "not a list" else "") + RUNGS_ALLOWED) from None
        # Written back as fractions (0.5 → 1/2), the form `bench race --rungs` takes and prints.
        return ",".join(str(f) for f in got)


def check_race(suite: Any) -> list[Problem]:
    """What a race needs of the rest of ``suite`` (a :class:`bench.suites.schema.Suite` with a ``race`` block):
    one env (a race answers "which label on this env?"; a race per env is a file per env), two seeds or more (the
    seeds are the unit of a rung's test) and labels whose runs take checkpoints, so that they can pause at a rung
    and continue (the own implementations, A3C excepted)."""
    problems = []
    if len(suite.envs) != 1:
        problems.append(Problem("envs", f"a race is on one env, and this suite has {len(suite.envs)}; allowed: one "
                                "env (a race suite per env, or `bench race ENV` for each)", len(suite.envs), True))
    if len(suite.seed_list) < 2:
        problems.append(Problem("seeds", "too few to rule a label out in a race (seeds are the unit of its test); "
                                "allowed: 2 or more", suite.seeds, True))
    for j, a in enumerate(suite.algorithms):
        if a.impl in NO_PAUSE_IMPLS:
            who = "SB3's" if a.impl == "sb3" else "a plugin's"
            problems.append(Problem(f"algorithms[{j}].impl", f"cannot race: {who} runs take no checkpoints, so they "
                                    "cannot pause at a rung and continue; allowed in a race: impl bench or numpy",
                                    a.impl, True))
        elif a.algo in NO_PAUSE:
            problems.append(Problem(f"algorithms[{j}].algo", "cannot race: its runs take no checkpoints "
                                    "(asynchronous workers), so they cannot pause at a rung and continue; allowed in "
                                    "a race: the other own algorithms", a.algo, True))
    return problems
