"""The package's architecture, enforced: no import cycles, and imports only along the documented layers.

The import graph is read from the source with :mod:`ast`: every ``import`` and
``from ... import`` in a module, at module level, inside a function or under
``TYPE_CHECKING`` alike. A call-time import is still a dependency, so it cannot
be used to dodge a cycle. Layers are checked on direct imports (the rules below
name what each part of ``bench`` may import); cycles on the whole graph.

The checker is tested on a copy of the package with a planted bad module, so the
test is known to fail when a forbidden import or a cycle is added.
"""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "bench"

# Parts of the package, most specific prefix first. Each module belongs to the first part whose prefix it matches.
# The parts are docs/architecture.md's layers; a few layers are split where the DESIGN names what may be imported
# of them (the algorithm registry of `algos`, the recorder protocol of `storage`, the pure statistics of `analysis`).
PARTS: list[tuple[str, str]] = [
    ("bench.cli", "cli"),
    ("bench.__main__", "cli"),
    ("bench.api", "api"),
    # Saved policies: find a run in the store, rebuild its policy (own or SB3), act on an env: execution.
    ("bench.policies", "execution"),
    ("bench.run", "execution"),
    ("bench.tune", "tune"),
    ("bench.analysis.stats", "pure"),
    ("bench.analysis.distributions", "pure"),
    ("bench.analysis.permutation", "pure"),
    ("bench.analysis.survival", "pure"),
    # The trait vocabulary (trait values, priorities), declared once: plain literals every layer reads.
    ("bench.envs.traits", "traits"),
    # The distribution's name (pip's, for install hints and --version): a literal every layer may read.
    ("bench.distribution", "distribution"),
    ("bench.analysis.metrics", "pure"),
    ("bench.analysis.parity", "pure"),
    ("bench.analysis.generalise", "pure"),
    ("bench.analysis.simulation", "pure"),
    ("bench.analysis.machines", "pure"),
    ("bench.analysis.race", "pure"),
    ("bench.analysis.selection", "pure"),
    ("bench.analysis", "analysis"),
    ("bench.suites", "suites"),
    # The algorithm registry as a suite sees it: the AlgoSpec registry and what its specs hold (typed
    # hyperparameters, zoo tables, default search spaces, plugin declarations). Specs only: implementations are
    # named by string, so a suite reads them without torch.
    ("bench.algos.hyperparams", "registry"),
    ("bench.algos.registry", "registry"),
    ("bench.algos.param_types", "registry"),
    ("bench.algos.onpolicy_params", "registry"),
    ("bench.algos.zoo", "registry"),
    ("bench.algos.search", "registry"),
    ("bench.algos.plugins", "registry"),
    ("bench.algos.offpolicy_params", "registry"),
    ("bench.algos", "algos"),
    ("bench.baselines", "algos"),
    # The recorder protocol: all an algorithm sees of storage.
    ("bench.storage.record", "record"),
    ("bench.storage", "storage"),
    ("bench.envs", "envs"),
    ("bench", "root"),
]

# part → the parts it may import (besides itself): /work/shared/DESIGN.md's layer table, one row a layer, with
# every layer below the ones it names (imports run downward; a layer may reach past the one just below it).
# The pure statistics import nothing of bench (and only PURE_EXTERNAL outside it): they are the ground floor,
# which every layer that computes a score may use, so a run's summary, a trial's value and the report's
# scores are one computation.
ALLOWED: dict[str, set[str]] = {
    "cli": {"api"},
    # One public function per everyday job: everything below it.
    "api": {"execution", "tune", "analysis", "pure", "suites", "registry", "algos", "record", "storage", "envs"},
    "execution": {"suites", "registry", "algos", "envs", "record", "storage", "pure"},
    # The tuner sits on execution (a trial is a run): everything below it.
    "tune": {"execution", "suites", "registry", "algos", "envs", "record", "storage", "pure"},
    # Analysis reads the store and env traits; never the runner, the tuner or an algorithm.
    "analysis": {"storage", "record", "envs", "pure"},
    "suites": {"registry", "envs"},
    # An algorithm sees an env id, typed parameters, a seed, a budget and a recorder: nothing of suites, stores or the CLI.
    "algos": {"registry", "envs", "record"},
    "registry": {"envs"},
    "record": set(),
    "storage": set(),
    "envs": set(),
    "pure": set(),
    "root": set(),
    "distribution": set(),
}

#: Parts every part may import: the trait vocabulary and the distribution's name (plain literals, importing nothing
#: of bench).
EVERYWHERE = {"traits", "distribution"}
# Imports the table above does not allow, each with why it stays: (importing part, imported part) → reason.
# There are none (test_there_is_no_exception); the mechanism stays for a reviewed, documented one.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def allowed(src: str, dst: str) -> bool:
    return dst == src or dst in ALLOWED[src] or dst in EVERYWHERE or (src, dst) in EXCEPTIONS


# Pure statistics: what they may import from outside bench.
#: scipy: scipy.special's t, normal and chi-square functions (bench.analysis.distributions), a pure function
#: library like numpy.
PURE_EXTERNAL = {"__future__", "dataclasses", "math", "typing", "collections", "functools", "itertools", "numpy", "pandas",
                 "scipy"}


def part_of(module: str) -> str:
    for prefix, part in PARTS:
        if module == prefix or module.startswith(prefix + "."):
            return part
    raise AssertionError(f"{module} belongs to no part of the layer table; add it to PARTS")


def modules(root: Path, package: str = "bench") -> dict[str, Path]:
    """Module name → source file, for every ``.py`` under ``root`` (a package's ``__init__`` is the package)."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return {m: f for m, f in out.items() if m == package or m.startswith(package + ".")}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package (``bench.envs.get_spec`` → ``bench.envs``)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(module: str, path: Path, known: dict[str, Path]) -> tuple[set[str], set[str]]:
    """(modules of the package that ``module`` imports, top-level names of outside packages it imports)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    inner, outer = set(), set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import: resolve against this module's package
                pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one.
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for n in names:
            if n == "bench" or n.startswith("bench."):
                target = _resolve(n, known)
                if target and target != module:
                    inner.add(target)
            else:
                outer.add(n.split(".")[0])
    return inner, outer


def graph(root: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    known = modules(root)
    edges, external = {}, {}
    for m, f in known.items():
        edges[m], external[m] = imports(m, f, known)
    return edges, external


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def violations(edges: dict[str, set[str]], external: dict[str, set[str]]) -> list[str]:
    """One line per import against the layer table, and per impure import of the pure statistics."""
    out = []
    for m, targets in sorted(edges.items()):
        src = part_of(m)
        for t in sorted(targets):
            dst = part_of(t)
            if not allowed(src, dst):
                out.append(f"{m} ({src}) imports {t} ({dst}); {src} may import: {', '.join(sorted(ALLOWED[src])) or 'nothing of bench'}")
        if src == "pure":
            for name in sorted(external[m] - PURE_EXTERNAL):
                out.append(f"{m} (pure statistics) imports {name}; allowed: {', '.join(sorted(PURE_EXTERNAL))}")
    return out


def own_package_imports(edges: dict[str, set[str]], known: dict[str, Path]) -> list[str]:
    """Submodules that import their own package's ``__init__``: the re-exporting packages import them, so that is a cycle too."""
    return [f"{m} imports its own package {t}" for m, ts in edges.items() for t in ts
            if m.startswith(t + ".") and known[t].name == "__init__.py"]


# --------------------------------------------------------------------------- #
# The package as it is
# --------------------------------------------------------------------------- #
def test_no_import_cycles():
    edges, _ = graph(ROOT)
    assert len(edges) > 30  # the whole package was read
    assert cycles(edges) == []


def test_imports_follow_the_layers():
    edges, external = graph(ROOT)
    assert violations(edges, external) == []


def test_there_is_no_exception():
    """Issue 42: 0 upward imports. Every import follows the table; none is let through by an exception."""
    assert EXCEPTIONS == {}


def test_every_exception_is_still_needed():
    """An exception that no import uses any more is deleted, so the table's count stays true."""
    edges, _ = graph(ROOT)
    used = {(part_of(m), part_of(t)) for m, ts in edges.items() for t in ts}
    stale = [k for k in EXCEPTIONS if k not in used]
    assert stale == []


def test_every_module_has_a_layer():
    for m in modules(ROOT):
        part_of(m)  # raises for a module outside the table


def test_documented_boundaries_hold():
    """The issue's three rules, spelt out on the real graph (the table above implies them)."""
    edges, external = graph(ROOT)
    for m, ts in edges.items():
        if part_of(m) == "algos":
            assert not {part_of(t) for t in ts} & {"suites", "storage", "execution", "tune", "cli", "api", "analysis"}, m
        if part_of(m) == "analysis":
            assert not any(t.startswith(("bench.run", "bench.tune", "bench.algos", "bench.suites")) for t in ts), m
        if part_of(m) == "storage":
            assert all(part_of(t) in {"storage", "record"} for t in ts), m
        if part_of(m) == "pure":
            assert external[m] <= PURE_EXTERNAL and {part_of(t) for t in ts} <= {"pure"}, m


# --------------------------------------------------------------------------- #
# The checker on a planted bad module
# --------------------------------------------------------------------------- #
@pytest.fixture
def planted(tmp_path: Path) -> Path:
    copy = tmp_path / "bench"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_checker_catches_an_algorithm_importing_the_store(planted: Path):
    (planted / "algos" / "planted.py").write_text("def f():\n    from bench.storage.store import Store  # call time counts too\n")
    edges, external = graph(planted)
    found = violations(edges, external)
    assert found == ["bench.algos.planted (algos) imports bench.storage.store (storage); algos may import: envs, record, "
                     "registry"]


def test_checker_catches_analysis_importing_the_runner(planted: Path):
    (planted / "analysis" / "planted.py").write_text("from bench.run import runner\n")
    edges, external = graph(planted)
    assert [v.split(";")[0] for v in violations(edges, external)] == [
        "bench.analysis.planted (analysis) imports bench.run.runner (execution)"]


def test_checker_catches_the_cli_importing_below_the_api(planted: Path):
    # A command parses, calls one bench.api service and renders: it never opens a store itself.
    (planted / "cli" / "planted.py").write_text("from bench.storage.store import Store\n")
    edges, external = graph(planted)
    assert [v.split(";")[0] for v in violations(edges, external)] == [
        "bench.cli.planted (cli) imports bench.storage.store (storage)"]


def test_checker_catches_analysis_importing_the_tuner(planted: Path):
    # The analysis reads studies as data (bench.analysis.sensitivity), never through the tuner.
    (planted / "analysis" / "planted.py").write_text("from bench.tune.study import OBJECTIVE_MEANINGS\n")
    edges, external = graph(planted)
    assert [v.split(";")[0] for v in violations(edges, external)] == [
        "bench.analysis.planted (analysis) imports bench.tune.study (tune)"]


def test_checker_catches_storage_importing_upward(planted: Path):
    (planted / "storage" / "planted.py").write_text("def f():\n    from bench.run.runner import run_cell\n")
    edges, external = graph(planted)
    assert [v.split(";")[0] for v in violations(edges, external)] == [
        "bench.storage.planted (storage) imports bench.run.runner (execution)"]


def test_checker_catches_impure_statistics(planted: Path):
    stats = planted / "analysis" / "stats.py"
    stats.write_text(stats.read_text() + "\nimport sqlalchemy\n")
    edges, external = graph(planted)
    assert [v.split(";")[0] for v in violations(edges, external)] == [
        "bench.analysis.stats (pure statistics) imports sqlalchemy"]


def test_checker_catches_a_cycle_through_a_call_time_import(planted: Path):
    # suites.problems → suites.suite (inside a function, as the old code dodged it) → suites.problems.
    problems = planted / "suites" / "problems.py"
    problems.write_text(problems.read_text() + "\n\ndef _late():\n    from bench.suites.suite import SuiteError\n")
    edges, _ = graph(planted)
    found = cycles(edges)
    assert len(found) == 1 and {"bench.suites.problems", "bench.suites.suite"} <= set(found[0])


def test_checker_catches_a_type_checking_cycle(planted: Path):
    policy = planted / "algos" / "policy.py"
    policy.write_text(policy.read_text() + "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from bench.algos.common import FlatParams\n")
    edges, _ = graph(planted)
    assert any({"bench.algos.policy", "bench.algos.common"} <= set(c) for c in cycles(edges))


def test_checker_catches_a_submodule_importing_its_reexporting_package(planted: Path):
    (planted / "envs" / "planted.py").write_text("from bench.envs import get_spec\n")
    edges, _ = graph(planted)
    known = modules(planted)
    assert own_package_imports(edges, known) == ["bench.envs.planted imports its own package bench.envs"]


def test_no_submodule_imports_its_own_package():
    edges, _ = graph(ROOT)
    assert own_package_imports(edges, modules(ROOT)) == []


def test_relative_imports_are_resolved(planted: Path):
    (planted / "algos" / "planted.py").write_text("from ..storage import store\n")
    edges, external = graph(planted)
    assert edges["bench.algos.planted"] == {"bench.storage.store"}
    assert violations(edges, external)


# --------------------------------------------------------------------------- #
# Old import paths are gone (CHANGELOG.md, "Unreleased")
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("old", ["bench.suite", "bench.store", "bench.runner", "bench.report", "bench.stats"])
def test_retired_module_names_no_longer_import(old: str):
    import importlib

    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_packages_reexport_what_the_old_modules_offered():
    from bench import analysis, envs, tune

    assert callable(envs.get_spec) and callable(envs.make_vec_env) and "CartPole-v1" in envs.REGISTRY
    assert callable(tune.tune) and callable(tune.export_suite)
    assert callable(analysis.load) and callable(analysis.recommend) and analysis.PRIORITIES == ("samples", "time")


# --------------------------------------------------------------------------- #
# Module size (issue 42): a newcomer reads a module in one sitting
# --------------------------------------------------------------------------- #
MAX_LINES = 600
#: A longer module says why in its first line, starting with this.
LONG_MODULE_REASON = "# Longer than 600 lines because"


def long_modules(root: Path) -> list[str]:
    """The modules over :data:`MAX_LINES` lines whose first line gives no reason."""
    out = []
    for m, f in modules(root).items():
        lines = f.read_text().splitlines()
        if len(lines) > MAX_LINES and not (lines and lines[0].startswith(LONG_MODULE_REASON)):
            out.append(f"{m}: {len(lines)} lines")
    return out


def test_no_module_is_longer_than_600_lines_without_a_reason():
    assert long_modules(ROOT) == []


def test_the_size_check_catches_a_long_module(planted: Path):
    (planted / "envs" / "planted.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules(planted) == [f"bench.envs.planted: {MAX_LINES + 1} lines"]
    (planted / "envs" / "planted.py").write_text(f"{LONG_MODULE_REASON} a reason.\n" + "x = 1\n" * MAX_LINES)
    assert long_modules(planted) == []


def test_the_pure_statistics_load_nothing_heavy():
    """Importing the pure statistics loads no SQLAlchemy, Arrow or torch, and nothing of bench but themselves
    (issue 65): ``bench.analysis``'s re-exports of scoring and answers are made on first use. ``machines`` works on
    pandas frames, and pandas 3 loads Arrow, so it is left out of this list."""
    import subprocess
    import sys as _sys

    pure = [m for m, part in PARTS if part == "pure" and m != "bench.analysis.machines"]
    code = (f"import sys; import {', '.join(pure)}; "
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'pyarrow', 'torch', 'pandas'}); "
            f"other = sorted(m for m in sys.modules if m.startswith('bench.') and m not in {pure!r} "
            "and m != 'bench.analysis'); print(heavy, other)")
    out = subprocess.run([_sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[] []", out
