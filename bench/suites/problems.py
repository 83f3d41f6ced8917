"""What suite validation reports, shared by the suite schema (:mod:`.suite`) and the
search spaces of its ``tune:`` block (:mod:`.spaces`), below both so neither imports the other
for it.

A :class:`Problem` is one bad value at one YAML path; :class:`bench.suites.suite.SuiteError`
turns a list of them into one line each (file, line, path, bad value, what is allowed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, field_validator

#: A problem as a plain tuple (path, message, value, has_value), as the space parsers build them.
Issue = tuple[str, str, Any, bool]


@dataclass(frozen=True)
class Problem:
    """One problem: where (``path``, e.g. ``algorithms[1].hyperparams.n_steps``), what is
    wrong and what is allowed (``message``), and the bad value when there is one."""

    path: str
    message: str
    value: Any = None
    has_value: bool = False


def check_seeds(v: list[int] | int) -> list[int] | int:
    """A ``seeds:`` value: an integer n >= 1 (meaning 0..n-1) or a non-empty list of distinct seeds >= 0."""
    if isinstance(v, int):
        if v < 1:
            raise ValueError("an integer seeds must be >= 1 (it means 0..n-1)")
        return v
    if not v:
        raise ValueError("seeds must not be empty")
    if any(s < 0 for s in v):
        raise ValueError("seeds must be non-negative integers")
    if len(set(v)) != len(v):
        raise ValueError("seeds must not repeat")
    return v


class SeedsMixin(BaseModel):
    """What a model with a ``seeds:`` field (an integer n meaning 0..n-1, or a list) validates and offers."""

    @field_validator("seeds", check_fields=False)
    @classmethod
    def _check_seeds(cls, v: list[int] | int) -> list[int] | int:
        return check_seeds(v)

    @property
    def seed_list(self) -> list[int]:
        seeds = self.seeds  # type: ignore[attr-defined]
        return list(range(seeds)) if isinstance(seeds, int) else list(seeds)
