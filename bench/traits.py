"""The trait vocabulary, declared once: the values of each env trait and of ``bench recommend``'s priority.

A module of plain literals with no imports from ``bench``, so every layer reads it: the env registry's
:class:`~bench.envs.registry.EnvSpec`, a suite's ``traits:`` block, the analysis, and the command line,
which checks its options without loading the analysis (which ``bench recommend`` on the shipped reference
does not need when its answer is kept: :func:`bench.api.recommend`). :mod:`bench.analysis.scoring`
re-exports the tuples.
"""

from typing import Literal, get_args

#: An env's action space: Discrete or Box.
Action = Literal["discrete", "continuous"]
#: What its learner observes: a feature vector, frames, or token ids (a MultiDiscrete space).
Obs = Literal["vector", "pixels", "sequence"]
#: Whether its reward arrives at most steps, or rarely.
Reward = Literal["dense", "sparse"]
#: What ``bench recommend`` ranks by: env steps to the threshold, or CPU time.
Priority = Literal["samples", "time"]

ACTIONS: tuple[str, ...] = get_args(Action)
OBS: tuple[str, ...] = get_args(Obs)
REWARDS: tuple[str, ...] = get_args(Reward)
PRIORITIES: tuple[str, ...] = get_args(Priority)
