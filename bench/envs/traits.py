"""The trait vocabulary, declared once, and the record of one env's traits (:class:`EnvSpec`).

A module of plain literals and one frozen dataclass, with no imports from ``bench``, so every layer reads it:
the env families (:mod:`bench.envs.families`), the env registry, a suite's ``traits:`` block, the analysis, and
the command line, which checks its options without loading the analysis (which ``bench recommend`` on the shipped
reference does not need when its answer is kept: :func:`bench.api.recommend`). :mod:`bench.analysis.scoring`
re-exports the tuples. It sits in ``envs`` because traits are what the env layer says about an env; importing it
loads nothing of gymnasium (``bench/envs/__init__.py`` resolves its names on first use).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

#: An env's action space: Discrete or Box.
Action = Literal["discrete", "continuous"]
#: What its learner observes: a feature vector, frames, or token ids (a MultiDiscrete space).
Obs = Literal["vector", "pixels", "sequence"]
#: Whether its reward arrives at most steps, or rarely.
Reward = Literal["dense", "sparse"]
#: What ``bench recommend`` ranks by: env steps to the threshold, or CPU time.
Priority = Literal["samples", "time"]
#: An env's family: the ``name`` of one :class:`bench.envs.families.EnvFamily` (``classic``, ``atari``, a
#: family of your own ...), ``sequence`` for bench's token tasks, or ``other``. A plain string, because the set
#: of families is the family table's, not a closed list.
Family = str

ACTIONS: tuple[str, ...] = get_args(Action)
OBS: tuple[str, ...] = get_args(Obs)
REWARDS: tuple[str, ...] = get_args(Reward)
PRIORITIES: tuple[str, ...] = get_args(Priority)


@dataclass(frozen=True)
class EnvSpec:
    """Traits of one environment, as the benchmark reports and groups them.

    :param id: the Gymnasium id.
    :param family: the name of its family (:mod:`bench.envs.families`), ``sequence`` or ``other``.
    :param action: ``discrete`` or ``continuous`` action space.
    :param obs: ``vector`` or ``pixels`` observations (as the learner sees them), or ``sequence``: the
        token context of a language-model-style task (:mod:`bench.envs.sequence`).
    :param reward: ``dense`` or ``sparse`` reward signal.
    :param horizon: maximum agent steps per episode, ``None`` when unbounded/unknown.
    :param threshold: the return at which the env counts as solved, ``None`` if none is known.
    :param threshold_source: short citation for ``threshold``.
    :param registered: ``True`` for registry entries (declared by a family), ``False`` for inferred ones.
    :param time_scale_us: CPU microseconds per env step that fix the env's time axis: the
        report's time criteria read each run's learning curve over ``budget × time_scale_us``
        CPU seconds, whatever else is in the store (see ``bench.envs.registry.TIME_SCALE_US``); ``None``
        when not yet measured (a suite may give one).
    """

    id: str
    family: Family
    action: Action
    obs: Obs
    reward: Reward
    horizon: int | None
    threshold: float | None
    threshold_source: str
    registered: bool = True
    time_scale_us: float | None = None
