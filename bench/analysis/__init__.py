"""From the results store to the answer: per-run metrics, cross-run statistics,
normalisation anchors, scores, the decision matrix, recommendations and the report.

- :mod:`.metrics`: per-run statistics (threshold crossing, censoring, AUC); pure NumPy;
- :mod:`.stats`: cross-run statistics (IQM, stratified bootstrap, profiles,
  P(improvement), Kaplan–Meier); pure NumPy;
- :mod:`.anchors`: per-env normalisation anchors (random-policy return, threshold), stored once;
- :mod:`.scoring`: store → per-run scores;
- :mod:`.answers`: recommendations per problem profile (:mod:`.generalise`: the inference over envs;
  :mod:`.machines`: time on one machine);
- :mod:`.matrix`: the decision matrix, its scores per criterion marked by those same answers;
- :mod:`.report`: figures and the self-contained HTML page (template ``report.html.j2``).

This package reads the store and never runs anything: it imports neither the
runner nor an algorithm. :mod:`.scoring`'s names are re-exported here, so
``from bench import analysis; analysis.load(url)`` works as before the split.
"""

from bench.analysis import answers as _answers
from bench.analysis import scoring as _scoring
from bench.analysis.answers import *  # noqa: F401,F403 - recommendations (moved out of scoring)
from bench.analysis.scoring import *  # noqa: F401,F403 - the old bench.analysis module's API, unchanged
from bench.analysis.matrix import decision_matrix  # noqa: F401 - moved out of scoring: marked by the answers

__all__ = list(_scoring.__all__) + list(_answers.__all__) + ["decision_matrix"]
