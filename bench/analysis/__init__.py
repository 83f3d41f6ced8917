"""From the results store to the answer: the read model, scores, the decision matrix, recommendations and the
report. The statistics they compute with are pure functions in :mod:`bench.stats`.

- :mod:`.readmodel`: the store's frames, read once (it only reads);
- :mod:`.scoring`: store → per-run scores (normalised by the anchors the run layer recorded);
- :mod:`.answers`: recommendations per problem profile (:mod:`bench.stats.generalise`: the inference over envs;
  :mod:`.machines`: time on one machine);
- :mod:`.matrix`: the decision matrix, its scores per criterion marked by those same answers;
- :mod:`.report`: figures and the self-contained HTML page (template ``report.html.j2``).

This package reads the store and never runs or writes anything: it imports neither the runner nor an algorithm.
:mod:`.scoring`'s and :mod:`.answers`' names are re-exported here on first use, so
``from bench import analysis; analysis.load(url)`` works as before the split, while importing one module of the
package loads only what that module needs.
"""

from __future__ import annotations

import importlib
import importlib.util

#: Where each re-exported name lives: the old ``bench.analysis`` module's API.
_FROM = ("bench.analysis.scoring", "bench.analysis.answers")


def __getattr__(name: str):
    # `from bench.analysis import stats` asks for the attribute before the submodule is loaded: a submodule is
    # itself, never a reason to load scoring.
    if not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "decision_matrix":  # moved out of scoring: marked by the answers
        from bench.analysis.matrix import decision_matrix

        return decision_matrix
    for module in _FROM:
        mod = importlib.import_module(module)
        if name in getattr(mod, "__all__", ()):
            return getattr(mod, name)
    raise AttributeError(f"module 'bench.analysis' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {n for m in _FROM for n in importlib.import_module(m).__all__} | {"decision_matrix"})
