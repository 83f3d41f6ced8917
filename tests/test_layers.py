"""The package's architecture, enforced: its folders are its layers, imports run downward only, and there is no
import cycle, package ``__init__`` files included.

The import graph is read from the source with :mod:`ast`: every ``import`` and ``from ... import`` in a module, at
module level, inside a function or under ``TYPE_CHECKING`` alike. A call-time import is still a dependency, so it
cannot be used to dodge a cycle. ``from pkg import name`` reads ``pkg``'s ``__init__`` (and the submodule ``name``
where there is one): a submodule that does so with its own package runs in a cycle through that ``__init__``.

The layer order is :data:`LAYERS`: one row a folder of ``bench/`` (docs/architecture.md's table, /work/shared's
DESIGN). Two narrow doors (:data:`DOORS`) say where a layer may use only part of another. The checker is tested
on a copy of the package with a planted bad module, so each test is known to fail when a forbidden import or a
cycle is added.
"""

from __future__ import annotations

import ast
import fnmatch
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "bench"

#: The layers, top to bottom, each a folder of ``bench/``, and the layers it may import besides itself. Imports run
#: downward; a layer may reach past the one just below it. ``stats`` (the pure statistics) is the ground floor that
#: every layer computing a score stands on: a run's summary, a trial's value and the report's scores are one
#: computation.
LAYERS: dict[str, set[str]] = {
    "cli": {"api"},
    "api": {"run", "tune", "analysis", "suites", "algos", "storage", "envs", "stats"},
    # The tuner sits on execution: a trial is a run.
    "tune": {"run", "suites", "algos", "storage", "envs", "stats"},
    "run": {"suites", "algos", "storage", "envs", "stats"},
    # Analysis reads the store and env traits; never the runner, the tuner, a suite or an algorithm.
    "analysis": {"storage", "envs", "stats"},
    "suites": {"algos", "envs"},
    # An algorithm sees an env id, typed parameters, a seed, a budget and a recorder: nothing of suites, stores or
    # the CLI.
    "algos": {"storage", "envs"},
    "storage": set(),
    "envs": set(),
    "stats": set(),
}

#: The modules at the package root, by the layer they belong to. The floor, under every layer, is what every layer
#: reads and which imports nothing of bench: ``bench.distribution`` (pip's name for bench, a literal for install
#: hints) and the package itself (its public names are resolved on first use).
ROOT_MODULES: dict[str, str] = {"bench": "floor", "bench.__main__": "cli", "bench.distribution": "floor"}

#: Narrow doors: (importing layer, imported layer) → the only modules of the imported layer it may use. A suite reads
#: the algorithm *specs* (the AlgoSpec registry, typed hyperparameters, zoo tables, search spaces, plugin
#: declarations), which name implementations by string, so validating a suite loads no torch; an algorithm sees
#: the recorder protocol and nothing else of storage.
DOORS: dict[tuple[str, str], tuple[str, ...]] = {
    # The registry as a suite sees it: the AlgoSpec registry and each algorithm folder's spec (params, zoo values,
    # search space, checks), whose implementations are named by string, so a suite reads them without torch.
    ("suites", "algos"): ("bench.algos.hyperparams", "bench.algos.registry", "bench.algos.spec", "bench.algos.param_types",
                          "bench.algos.*.spec", "bench.algos.search", "bench.algos.plugins", "bench.algos.offpolicy_params"),
    ("algos", "storage"): ("bench.storage.record",),
}

#: The pure statistics: what they may import from outside bench. scipy: scipy.special's t, normal and chi-square
#: functions (bench.stats.distributions), a pure function library like numpy.
PURE_EXTERNAL = {"__future__", "dataclasses", "math", "typing", "collections", "functools", "itertools", "numpy", "pandas",
                 "scipy"}


def part_of(module: str) -> str:
    """The layer of a module: its folder under ``bench/``, or :data:`ROOT_MODULES`' word for a root module."""
    if module in ROOT_MODULES:
        return ROOT_MODULES[module]
    folder = module.split(".")[1]
    if folder not in LAYERS:
        raise AssertionError(f"{module} belongs to no layer: bench's folders are {', '.join(LAYERS)}, and root "
                             f"modules are {', '.join(ROOT_MODULES)}; move it into a folder")
    return folder


def allowed(src_module: str, dst_module: str) -> bool:
    src, dst = part_of(src_module), part_of(dst_module)
    if dst == "floor":
        return True
    if src == "floor" or not (dst == src or dst in LAYERS[src]):
        return False
    door = DOORS.get((src, dst))
    return door is None or any(fnmatch.fnmatchcase(dst_module, d) for d in door)


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
            # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one, and reads ``pkg``'s
            # ``__init__`` first in any case: that is an edge too, or a cycle through the ``__init__`` goes unseen.
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            if base in known and known[base].name == "__init__.py":
                names.append(base)
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
    """One line per import against the layer order (or through no door), and per impure import of the statistics."""
    out = []
    for m, targets in sorted(edges.items()):
        src = part_of(m)
        for t in sorted(targets):
            if not allowed(m, t):
                dst = part_of(t)
                door = DOORS.get((src, dst))
                may = (f"of {dst} only {', '.join(door)}" if door and dst in LAYERS[src]
                       else ", ".join(sorted(LAYERS.get(src, ()))) or "nothing of bench")
                out.append(f"{m} ({src}) imports {t} ({dst}); {src} may import: {may}")
        if src == "stats":
            for name in sorted(external[m] - PURE_EXTERNAL):
                out.append(f"{m} (pure statistics) imports {name}; allowed: {', '.join(sorted(PURE_EXTERNAL))}")
    return out


def own_package_imports(edges: dict[str, set[str]], known: dict[str, Path]) -> list[str]:
    """Submodules that import their own package's ``__init__``: a package re-exports its submodules, so that is a
    cycle, or one as soon as the ``__init__`` imports eagerly. The root package is the floor (it imports nothing of
    bench, which :func:`violations` checks), so ``from bench import api`` is no cycle."""
    return [f"{m} imports its own package {t}" for m, ts in edges.items() for t in ts
            if t != "bench" and m.startswith(t + ".") and known[t].name == "__init__.py"]


# --------------------------------------------------------------------------- #
# The package as it is
# --------------------------------------------------------------------------- #
def test_no_import_cycles():
    edges, _ = graph(ROOT)
    assert len(edges) > 30  # the whole package was read
    assert cycles(edges) == []


def test_no_submodule_imports_its_own_package():
    """No cycle through a package ``__init__`` (issue 65 found three: ``envs/registry.py``, ``algos/registry.py``,
    ``analysis/generalise.py``, each ``from <own package> import <submodule>``)."""
    edges, _ = graph(ROOT)
    assert own_package_imports(edges, modules(ROOT)) == []


def test_imports_follow_the_layers():
    edges, external = graph(ROOT)
    assert violations(edges, external) == []


def test_every_module_is_in_a_layer_folder():
    for m in modules(ROOT):
        part_of(m)  # raises for a module outside the layer folders


def test_every_door_names_real_modules():
    """A door that names a module which no longer exists would let nothing through and hide a rename."""
    known = modules(ROOT)
    assert [d for door in DOORS.values() for d in door if not fnmatch.filter(known, d)] == []


def test_documented_boundaries_hold():
    """The DESIGN's rules, spelt out on the real graph (the table above implies them)."""
    edges, external = graph(ROOT)
    for m, ts in edges.items():
        layers = {part_of(t) for t in ts} - {"floor"}
        if part_of(m) == "algos":
            assert not layers & {"suites", "run", "tune", "cli", "api", "analysis"}, m
            assert all(t == "bench.storage.record" for t in ts if part_of(t) == "storage"), m
        if part_of(m) == "analysis":
            assert not layers & {"run", "tune", "algos", "suites"}, m
        if part_of(m) in ("storage", "envs"):
            assert layers <= {part_of(m)}, m
        if part_of(m) == "stats":
            assert external[m] <= PURE_EXTERNAL and layers <= {"stats"}, m


def test_the_layer_folders_are_the_package():
    """Every folder of ``bench/`` is a layer of the table and every layer a folder: the folders say the order."""
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS)


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
    assert found == ["bench.algos.planted (algos) imports bench.storage.store (storage); algos may import: of storage "
                     "only bench.storage.record"]


def test_checker_catches_a_suite_importing_an_implementation(planted: Path):
    (planted / "suites" / "planted.py").write_text("from bench.algos.ppo import train\n")
    edges, external = graph(planted)
    assert [v.split(";")[0] for v in violations(edges, external)] == [
        "bench.suites.planted (suites) imports bench.algos.ppo (algos)"]


def test_checker_catches_analysis_importing_the_runner(planted: Path):
    (planted / "analysis" / "planted.py").write_text("from bench.run import runner\n")
    edges, external = graph(planted)
    assert [v.split(";")[0] for v in violations(edges, external)] == [
        "bench.analysis.planted (analysis) imports bench.run (run)",
        "bench.analysis.planted (analysis) imports bench.run.runner (run)"]


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
        "bench.storage.planted (storage) imports bench.run.runner (run)"]


def test_checker_catches_impure_statistics(planted: Path):
    stats = planted / "stats" / "aggregate.py"
    stats.write_text(stats.read_text() + "\nimport sqlalchemy\n")
    edges, external = graph(planted)
    assert [v.split(";")[0] for v in violations(edges, external)] == [
        "bench.stats.aggregate (pure statistics) imports sqlalchemy"]


def test_checker_catches_statistics_importing_the_analysis(planted: Path):
    (planted / "stats" / "planted.py").write_text("from bench.analysis.readmodel import read_model\n")
    edges, external = graph(planted)
    assert [v.split(";")[0] for v in violations(edges, external)] == [
        "bench.stats.planted (stats) imports bench.analysis.readmodel (analysis)"]


def test_checker_catches_a_module_outside_the_layer_folders(planted: Path):
    (planted / "planted.py").write_text("x = 1\n")
    with pytest.raises(AssertionError, match="bench.planted belongs to no layer"):
        part_of("bench.planted")
    (planted / "extra").mkdir()
    (planted / "extra" / "__init__.py").write_text("")
    with pytest.raises(AssertionError, match="belongs to no layer"):
        for m in modules(planted):
            part_of(m)


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


def test_checker_catches_a_submodule_imported_through_its_own_package(planted: Path):
    # The three cycles had this form: the name is a submodule, but its package's __init__ is read first.
    (planted / "envs" / "planted.py").write_text("from bench.envs import families\n")
    edges, _ = graph(planted)
    assert edges["bench.envs.planted"] == {"bench.envs", "bench.envs.families"}
    assert own_package_imports(edges, modules(planted)) == ["bench.envs.planted imports its own package bench.envs"]


def test_relative_imports_are_resolved(planted: Path):
    (planted / "algos" / "planted.py").write_text("from ..storage import store\n")
    edges, external = graph(planted)
    assert edges["bench.algos.planted"] == {"bench.storage", "bench.storage.store"}
    assert violations(edges, external)


# --------------------------------------------------------------------------- #
# Old import paths (CHANGELOG.md, "Unreleased")
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("old", ["bench.suite", "bench.store", "bench.runner", "bench.report", "bench.traits",
                                 "bench.policies", "bench.analysis.stats", "bench.analysis.metrics"])
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


HEAVY = {"sqlalchemy", "pyarrow", "torch"}


def _loaded_after(statement: str) -> set[str]:
    """The top-level names of the modules a fresh interpreter holds after ``statement``."""
    import subprocess

    code = f"import sys; {statement}; print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    return set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())


def test_the_pure_statistics_load_nothing_heavy():
    """``import bench.stats`` and every module of it loads no SQLAlchemy, Arrow or torch (issue 65's Done-when:
    ``python -X importtime -c "import bench.stats"``), nor pandas where a module works on arrays alone."""
    pure = sorted(m for m in modules(ROOT) if part_of(m) == "stats")
    assert "bench.stats.aggregate" in pure and "bench.stats.metrics" in pure
    loaded = _loaded_after(f"import {', '.join(pure)}")
    assert loaded & HEAVY == set()
    assert _loaded_after("import bench.stats.metrics, bench.stats.aggregate") & (HEAVY | {"pandas"}) == set()


def test_lower_package_inits_load_nothing_heavy():
    """The package ``__init__`` files below the api resolve their names on first use: importing them (and the trait
    vocabulary, which the command line reads to check its options) loads no gymnasium, SQLAlchemy, Arrow or torch."""
    loaded = _loaded_after("import bench, bench.envs, bench.envs.traits, bench.stats, bench.analysis, bench.run, "
                           "bench.storage, bench.suites")
    assert loaded & (HEAVY | {"gymnasium"}) == set()
