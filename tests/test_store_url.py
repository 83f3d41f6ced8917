"""The store URL is one type under one name (issue 65): parsed into a :class:`bench.storage.urls.StoreURL` once,
where it enters bench, and passed down as ``store_url``.

The rules are read from the source (``ast``), so they hold for code not yet written:

- a parameter that takes only a store URL (annotated ``StoreURL`` or ``StoreURL | None``) is named ``store_url``,
  and a parameter named ``store_url`` is annotated so;
- a parameter that also takes text is at the edge, where text is parsed: ``store`` (the ``--store`` flag's name,
  in :mod:`bench.api` and the Store constructor's callers) or ``source`` (what a reader reads: a store or the
  shipped reference's ``packs:FOLDER``);
- no parameter is named ``url`` (or another alias) outside :mod:`bench.storage.urls`, whose functions read the
  URL's text before it is a ``StoreURL``; ``storage`` names only Optuna's storage object.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.storage.schema import StoreError
from bench.storage.store import Store
from bench.storage.urls import DEFAULT_URL, StoreURL

BENCH = Path(__file__).resolve().parent.parent / "bench"
#: The parser's own steps: they take the URL as text, before it is a StoreURL.
PARSER = BENCH / "storage" / "urls.py"
#: Names other code has given the store URL (issue 65 counted five); only ``store_url`` is kept.
ALIASES = {"url", "db_url", "storage_url", "store_uri", "results_url"}
#: Where ``storage`` may name a parameter: Optuna's own storage object, in Optuna's word.
OPTUNA_STORAGE = {BENCH / "storage" / "studies.py", BENCH / "tune" / "study.py"}
#: The names of a parameter that takes a store URL as text too (the edge, where it is parsed).
EDGE_NAMES = {"store", "source"}


def _params(path: Path):
    """``(function name, line, parameter name, annotation text)`` of every parameter in ``path``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                ann = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                yield node.name, node.lineno, arg.arg, ann.replace("api.", "").replace(" ", "").strip("'\"")


def store_url_name_problems(root: Path = BENCH) -> list[str]:
    """Every parameter under ``root`` that breaks the rules of this module's docstring."""
    only = {"StoreURL", "StoreURL|None", "Optional[StoreURL]"}
    bad = []
    for path in sorted(root.rglob("*.py")):
        for fn, line, name, ann in _params(path):
            where = f"{path.relative_to(root.parent)}:{line} {fn}({name}: {ann or '-'})"
            if ann in only and name != "store_url":
                bad.append(f"{where}: takes only a StoreURL, so is named store_url")
            elif name == "store_url" and ann not in only:
                bad.append(f"{where}: store_url is annotated StoreURL (or StoreURL | None)")
            elif "StoreURL" in ann and ann not in only and name not in EDGE_NAMES:
                bad.append(f"{where}: takes a store URL as text too, so is named one of {sorted(EDGE_NAMES)}")
            elif name in ALIASES and path != PARSER:
                bad.append(f"{where}: a store URL is a StoreURL named store_url")
            elif name == "storage" and path not in OPTUNA_STORAGE:
                bad.append(f"{where}: storage names Optuna's storage object only")
    return bad


def test_one_store_url_parameter_name_in_bench():
    assert store_url_name_problems() == []


def test_the_rules_catch_each_other_name(tmp_path):
    """The check itself fails where a parameter is named as before issue 65, or typed without its name."""
    pkg = tmp_path / "bench"
    (pkg / "run").mkdir(parents=True)
    (pkg / "run" / "x.py").write_text(
        "def a(url: str): ...\n"
        "def b(store: StoreURL): ...\n"
        "def c(store_url: str): ...\n"
        "def d(where: StoreURL | str): ...\n"
        "def e(storage): ...\n"
        "def ok(store_url: StoreURL, store: StoreURL | str | None, source: StoreURL | str): ...\n")
    got = store_url_name_problems(pkg)
    assert [g.split()[1] for g in got] == ["a(url:", "b(store:", "c(store_url:", "d(where:", "e(storage:"], got


def test_a_store_url_is_checked_once_and_passed_down_as_it_is(monkeypatch, tmp_path):
    """Parsed once (text checked), then used as it is: the Store constructor does not check it again."""
    import bench.storage.urls as urls

    given = f"sqlite:///{tmp_path / 'b.db'}"
    parsed = StoreURL.parse(given)
    assert StoreURL.parse(parsed) is parsed and StoreURL.parse(None) == StoreURL.parse(DEFAULT_URL)
    calls = []
    real = urls.check_url
    monkeypatch.setattr(urls, "check_url", lambda text: calls.append(text) or real(text))
    Store(parsed).dispose()
    assert calls == []  # a StoreURL is not checked again
    Store(given).dispose()
    assert calls == [given]  # text is, where it enters (here the constructor)
    with pytest.raises(StoreError, match="in-memory"):
        StoreURL.parse("sqlite://")


def test_a_store_url_never_shows_its_password():
    u = StoreURL.parse("postgresql://bench:s3cretpw@db.example:5432/bench")
    assert u.text.startswith("postgresql+psycopg://bench:s3cretpw@")  # the engine gets it
    for shown in (str(u), repr(u), u.shown, f"{u}"):
        assert "s3cretpw" not in shown and "db.example" in shown, shown
    assert u.secret == "s3cretpw" and u.backend == "postgresql" and u.host == "db.example"
