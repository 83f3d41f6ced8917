"""One public function per everyday job, for notebooks and scripts, below the command line (``bench.cli``
parses, calls these, renders).

- :func:`reference`: the shipped reference results (``results/reference/`` packs), verified, as a store to read.
- :func:`record_env_facts`: what a store records of each env at run time, so it is read without the env's package.
- :func:`resolved_hyperparams`: each label's resolved hyperparameters on each env, and where each value came from.
- :func:`export_scores`, :func:`pack_suite`: normalised scores for rliable; a suite as a pack.
- :func:`load_policy`: a run's saved policy, ready to act (``pi.act(obs)``);
- :func:`evaluate`: N episodes of a loaded policy on a fresh evaluation env, optionally filmed to an MP4.

Nothing here prints: messages go to a ``log`` callable the caller passes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench.policies import Evaluation, LoadedPolicy, PolicyError, evaluate, load_policy, video_missing
from bench.run import packed

__all__ = ["REFERENCE_DIR", "Reference", "reference", "reference_dir", "record_env_facts", "resolved_hyperparams",
           "HyperparamRow", "hyperparams_lines", "NothingToExport", "export_scores", "pack_suite",
           "Evaluation", "LoadedPolicy", "PolicyError", "evaluate", "load_policy", "video_missing"]

#: The project's shipped reference results: one packed folder per category (`bench export --format pack`),
#: in the working directory's checkout or else in the checkout this package runs from (an editable
#: install), so that `bench recommend` answers from any directory.
REFERENCE_DIR = Path("results/reference")
_CHECKOUT_REFERENCE_DIR = Path(__file__).resolve().parent.parent / "results" / "reference"


def reference_dir() -> Path | None:
    """Where the shipped reference is: ``$BENCH_REFERENCE_DIR`` where set (tests, or a reference kept
    elsewhere), else the working directory's ``results/reference``, else the package's checkout's; ``None``
    where none holds a pack (a wheel installed on its own)."""
    if os.environ.get(packed.REFERENCE_ENV):
        return Path(os.environ[packed.REFERENCE_ENV])
    for d in (REFERENCE_DIR, _CHECKOUT_REFERENCE_DIR):
        if d.is_dir() and packed.holds_packs(d):
            return d
    return None


@dataclass(frozen=True)
class Reference:
    """The shipped reference as a store: ``url`` (the unpacked cache), ``folder`` it came from, ``packs`` in it."""

    url: str
    folder: Path
    packs: int

    @property
    def name(self) -> str:
        """How commands name it: ``shipped reference (results/reference, 18 packs)``."""
        return f"shipped reference ({str(self.folder).rstrip('/')}, {self.packs} pack{'' if self.packs == 1 else 's'})"


def reference(log: Callable[[str], None] | None = None) -> Reference | None:
    """The shipped reference, every pack verified against its manifest's sha256 list on each call
    (:class:`bench.run.packed.PackError` when one fails), unpacked once into a private cache outside the
    working tree (``$XDG_CACHE_HOME/bench``, else ``~/.cache/bench``, else a private temporary folder) that is
    trusted only while it records the manifests it was built from; ``None`` where there are no packs. ``log`` is
    told when the cache is (re)built, which takes tens of seconds."""
    folder = reference_dir()
    packs = packed.verified_packs(folder) if folder is not None else []
    if folder is None or not packs:
        return None
    base = packed.private_cache_dir(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bench")
    cache = base / "reference.db"
    url = packed.unpack(packs, cache, verified=True, on_build=lambda: log and log(  # once per checkout of the packs
        f"first use of the shipped reference: unpacking {len(packs)} pack(s) into {cache} "
        "(once; later commands read it directly)"))
    return Reference(url, folder, len(packs))


# --------------------------------------------------------------------------- #
# A store describes its envs
# --------------------------------------------------------------------------- #
def _spaces(env_id: str) -> dict[str, str]:
    """The raw env's spaces, in Gymnasium's own words (``Discrete(2)``, ``Box(-inf, inf, (4,), float32)``)."""
    from bench.envs.registry import make_raw

    env = make_raw(env_id)
    try:
        return {"action_space": str(env.action_space), "observation_space": str(env.observation_space)}
    finally:
        env.close()


def record_env_facts(store: Any, env_meta: dict[str, dict[str, Any]],
                     log: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Record in ``store`` what a reader needs of each env of ``env_meta`` (a suite's, as validated:
    threshold and its source, traits, horizon, time scale), with the env's spaces and its normalisation
    anchor, computed here while the env's package is importable (``bench run``'s process). Reports,
    ``bench recommend`` and exports then read them from the store alone (``env_facts``, ``anchors``).

    :param store: a writable :class:`bench.run.store.Store`.
    :param log: told about anchors computed, and about an env whose facts could not all be gathered
        (what could be is still recorded).
    :returns: env key → the facts recorded.
    """
    from bench.analysis.anchors import ensure_anchors

    out: dict[str, dict[str, Any]] = {}
    for env_id, meta in env_meta.items():
        facts = {k: v for k, v in meta.items() if k != "traits_declared"}
        try:
            facts.update(_spaces(env_id))
        except Exception as e:  # noqa: BLE001 - a fact that cannot be had is left out, never a failed run
            if log:
                log(f"{env_id}: its spaces are not recorded ({type(e).__name__}: {e})")
        if meta.get("threshold") is not None:
            try:
                a = ensure_anchors(store, {env_id: meta["threshold"]}, log=log,
                                   families={env_id: meta.get("family")}).get(env_id)
            except Exception as e:  # noqa: BLE001 - as above: a report computes it later, or says it is missing
                a = None
                if log:
                    log(f"{env_id}: its normalisation anchor is not recorded ({type(e).__name__}: {e})")
            if a is not None:
                facts["anchor"] = {"random_return": a.random_return, "threshold": a.threshold,
                                   "episodes": a.episodes, "seed": a.seed}
        out[env_id] = facts
    store.put_env_facts(out)
    return out


# --------------------------------------------------------------------------- #
# Where each hyperparameter came from
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class HyperparamRow:
    """One resolved value of one label on one env: ``source`` is ``default`` (the algorithm's, or the
    continuous-control default for ``normalize``), ``zoo`` (rl-baselines3-zoo's tuned values), ``suite``
    (``hyperparams``, ``env_hyperparams`` or the env's ``vec_env``) or ``--set``."""

    label: str
    env: str
    name: str
    value: Any
    source: str


def resolved_hyperparams(loaded: Any) -> list[HyperparamRow]:
    """Every label's resolved hyperparameters on every env of ``loaded`` (a
    :class:`bench.suites.suite.LoadedSuite`), as its cells hold them, each with its source: the layers
    of :func:`bench.algos.hyperparams.resolve` read back (defaults ← zoo ← suite ← ``--set``)."""
    from bench.algos.hyperparams import zoo_defaults
    from bench.envs import parse_env_key

    suite = loaded.suite
    set_paths = {o.path for o in getattr(loaded, "overrides", ())}
    first: dict[tuple[str, str], Any] = {}
    for c in loaded.cells:
        first.setdefault((c.label, c.env_id), c)
    rows: list[HyperparamRow] = []
    for j, a in enumerate(suite.algorithms):
        for i, e in enumerate(suite.envs):
            cell = first.get((a.display, e.key))
            if cell is None:
                continue
            over_name = e.key if e.key in a.env_hyperparams else e.id
            over = a.env_hyperparams.get(over_name, {})
            zoo = {} if a.impl == "python" else zoo_defaults(a.algo, parse_env_key(e.key)[1])
            for name, value in cell.hyperparams.items():
                if name in over:
                    path = f"algorithms[{j}].env_hyperparams.{over_name}.{name}"
                    src = "--set" if path in set_paths else "suite"
                elif name in a.hyperparams:
                    src = "--set" if f"algorithms[{j}].hyperparams.{name}" in set_paths else "suite"
                elif name == "vec_env":
                    where = f"envs[{i}].vec_env" if e.vec_env else "defaults.vec_env"
                    src = "--set" if where in set_paths else "suite"
                elif name in zoo:
                    src = "zoo"
                else:
                    src = "default"
                rows.append(HyperparamRow(a.display, e.key, name, value, src))
    return rows


def hyperparams_lines(loaded: Any, shown: set[tuple[str, str]]) -> list[str]:
    """``bench run --dry-run``'s account of the hyperparameters: the overrides, then for each (label, env)
    of ``shown`` its resolved values grouped by source (``--set``, suite, zoo, default), wrapped at 100."""
    import json
    import textwrap

    out = ["overrides: " + "; ".join(o.text for o in loaded.overrides)] if loaded.overrides else []
    rows = [r for r in resolved_hyperparams(loaded) if (r.label, r.env) in shown]
    for label, env in dict.fromkeys((r.label, r.env) for r in rows):
        out.append(f"{label} on {env}:")
        for src in ("--set", "suite", "zoo", "default"):
            got = [f"{r.name}={json.dumps(r.value)}" for r in rows if (r.label, r.env, r.source) == (label, env, src)]
            if got:
                out.append(textwrap.fill(", ".join(got), width=100, initial_indent=f"  {src + ':':<9}",
                                         subsequent_indent=" " * 11))
    return out


# --------------------------------------------------------------------------- #
# Exports
# --------------------------------------------------------------------------- #
class NothingToExport(ValueError):
    """An export that has nothing to write, or cannot write it in the asked format (``str(e)``: one line)."""


def export_scores(url: str, suite: str | None, column: str, format: str, out_path: Path,
                  log: Callable[[str], None] | None = None) -> tuple[int, int]:
    """Write normalised per-run scores, label → (runs × envs), for rliable: ``rliable-npz`` (one array per
    label, plus ``__envs__`` and ``__score__``) or ``rliable-json`` (``envs``, ``score``, ``scores``: label →
    rows, ``null`` where a column is padded). Read from the store alone (its recorded env facts).

    :returns: (labels, envs) written.
    :raises NothingToExport: no scores to write, or a label the ``.npz`` keeps for its own keys.
    """
    import json

    import numpy as np

    from bench.analysis import scoring

    scored = scoring.score(scoring.load(url, [suite] if suite else None, diagnostics=(), log=log))
    envs, mats = scoring.score_matrices(scored, column)
    if not mats:
        raise NothingToExport("no done runs with normalised scores in the store" + (f" for suite {suite!r}" if suite else ""))
    reserved = [lb for lb in mats if lb.startswith("__")]
    if format == "rliable-npz" and reserved:
        raise NothingToExport(f"label {reserved[0]!r} starts with '__', which the file keeps for its own keys; allowed: "
                         "rliable-json")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if format == "rliable-npz":
        with open(out_path, "wb") as f:  # a file object: numpy would otherwise append .npz to the name
            np.savez(f, __envs__=np.array(envs), __score__=np.array(column), **mats)
    else:
        doc = {"score": column, "envs": envs,
               "scores": {lb: [[None if v != v else float(v) for v in row] for row in m] for lb, m in mats.items()}}
        out_path.write_text(json.dumps(doc, indent=1))
    return len(mats), len(envs)


def pack_suite(store: Any, suite: str, out: Path, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Pack one suite of ``store`` (a :class:`bench.run.store.Store`) into the folder ``out``, with its envs'
    normalisation anchors computed first where missing (so the pack has them); returns the pack's manifest.
    Runs already in a sibling pack (a claim suite sharing the reference's cells) are not stored twice."""
    from bench.analysis.anchors import ensure_anchors

    if (meta := store.suite_env_meta(suite)) is not None:
        ensure_anchors(store, {e: m.get("threshold") for e, m in meta.items()}, log=log,
                       families={e: m.get("family") for e, m in meta.items()})
    return packed.pack(store.url, suite, out, beside=packed.packs_under(out.resolve().parent))
