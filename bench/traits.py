"""The problem vocabulary ``bench recommend`` is asked in: the values of each trait and of the priority.

A module of plain tuples with no imports, so the command line checks its options without loading the
analysis (which ``bench recommend`` on the shipped reference does not need when its answer is kept:
:func:`bench.api.recommend`). :mod:`bench.analysis.scoring` re-exports them.
"""

ACTIONS = ("discrete", "continuous")
OBS = ("vector", "pixels", "sequence")
REWARDS = ("dense", "sparse")
PRIORITIES = ("samples", "time")
