"""A suite run with ``--set`` where its file's name already holds another grid: a *variant*, stored beside it.

``bench run small.yaml --set defaults.timesteps=60000`` on a store that holds ``small`` with its own budget
would replace nothing and run nothing under ``small``'s name. Instead it becomes the suite
``small.timesteps-60000.<hash>``: its name is the file's, the overrides in brief, and a short hash of the
overrides themselves (so that two override sets that read alike never share a name, and the same set always
gets the same one). It is marked as a variant (``variant:``, as ``bench tune --export`` marks ``tuned``) of
``small``, so the report leaves it out of the answers by algorithm and sets it beside ``small`` in a section of
its own; ``small``'s runs stay as they were. Each label whose runs the overrides change gets the overrides in
brackets (``ppo-bench [timesteps=60000]``), so the two sides never pool under one label; a label they leave
alone keeps its name, and its runs are the very runs of ``small`` (a cell's key holds no suite name or label).

Names keep to the suite schema's characters (letters, digits, ``_ . -``), safe in a file name and a URL.
The stored spec records the overrides as typed and the suite it varies (:func:`stored_spec`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from typing import Any

from bench.suites.cells import LoadedSuite
from bench.suites.overrides import Override
from bench.suites.schema import MAX_LABEL

__all__ = ["VARIANT_HASH", "as_variant", "grid", "is_other_grid", "stored_spec", "variant_name"]

#: Hex digits of the overrides' hash in a variant's name: 16^6 names per suite, far more than a store holds.
VARIANT_HASH = 6
#: A suite's name (and a variant's, ``Suite.variant``) holds at most this many characters (the store's column).
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def grid(loaded: LoadedSuite) -> list[tuple[str, str]]:
    """The suite's grid as the store compares it (:meth:`bench.storage.store.Store.register`): its sorted
    ``(key, label)`` pairs."""
    return sorted({c.key: c.label for c in loaded.cells}.items())


def is_other_grid(loaded: LoadedSuite, stored: list[tuple[str, str]] | None) -> bool:
    """Whether a run of ``loaded`` with overrides is a variant: the store holds its name with another grid
    (``stored``: that grid, ``None`` where the store holds no suite of the name)."""
    return bool(loaded.overrides) and bool(stored) and stored != grid(loaded)


def _plain(value: Any) -> Any:
    """``value`` with integral floats as integers (``6e4`` and ``60000`` are one budget, one name)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _brief(o: Override) -> tuple[str, str]:
    """An override as its last key and its value, as short as reads unambiguously (``timesteps``, ``60000``)."""
    last = o.parts[-1] if isinstance(o.parts[-1], str) else o.path
    v = _plain(o.value)
    shown = v if isinstance(v, str) and v.isprintable() else json.dumps(v, sort_keys=True, ensure_ascii=True)
    return str(last), shown


def _last_each(overrides: tuple[Override, ...]) -> list[Override]:
    """One override per path, the last one given (as applying them keeps it), sorted by path: the order the
    flags were typed in names no other variant."""
    return [o for _, o in sorted({o.path: o for o in overrides}.items())]


def _digest(overrides: tuple[Override, ...]) -> str:
    blob = json.dumps([(o.path, _plain(o.value)) for o in _last_each(overrides)], sort_keys=True,
                      separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:VARIANT_HASH]


def variant_tag(overrides: tuple[Override, ...], limit: int = MAX_NAME) -> str:
    """The overrides in brief, ``timesteps=60000, learning_rate=0.0001``, cut to ``limit`` characters."""
    text = ", ".join(f"{k}={v}" for k, v in (_brief(o) for o in _last_each(overrides)))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def variant_name(name: str, overrides: tuple[Override, ...]) -> str:
    """The variant of suite ``name`` that ``overrides`` make: ``name.<brief>.<hash>``, at most :data:`MAX_NAME`
    characters of ``[A-Za-z0-9_.-]`` (the brief is cut first, then the name)."""
    h = _digest(overrides)
    brief = ".".join(_UNSAFE.sub("-", f"{k}-{v}").strip("-.") for k, v in
                     (_brief(o) for o in _last_each(overrides)))
    room = MAX_NAME - len(name) - len(h) - 2
    if room < 4:  # no room for a readable brief: the name and the hash
        return f"{name[:MAX_NAME - len(h) - 1]}.{h}"
    brief = brief[:room].rstrip("-.")
    return f"{name}.{brief}.{h}" if brief else f"{name}.{h}"


def _label(label: str, overrides: tuple[Override, ...]) -> str:
    room = MAX_LABEL - len(label) - 3
    tag = variant_tag(overrides, room) if room >= 8 else _digest(overrides)
    return f"{label} [{tag}]" if len(label) + len(tag) + 3 <= MAX_LABEL else f"{label[:MAX_LABEL - 9]} [{_digest(overrides)}]"


def as_variant(loaded: LoadedSuite, stored: list[tuple[str, str]]) -> LoadedSuite:
    """``loaded`` (a suite with overrides) as the variant of the suite of its name whose grid is ``stored``:
    renamed (:func:`variant_name`), marked ``variant:`` with its overrides in brief, and each label whose
    cells are not all in ``stored`` under that label renamed ``label [overrides that reach it]``. Keys are
    unchanged: they hold neither the suite's name nor a label."""
    sets = loaded.overrides
    by_text = {o.text: o for o in sets}
    kept = set(stored)
    changed = {c.label for c in loaded.cells if (c.key, c.label) not in kept}
    labels: dict[str, str] = {}
    for c in loaded.cells:
        if c.label in changed and c.label not in labels:
            labels[c.label] = _label(c.label, tuple(by_text[t] for t in c.overrides if t in by_text) or sets)
    name = variant_name(loaded.suite.name, sets)
    suite = loaded.suite.model_copy(update={"name": name, "variant": variant_tag(sets)})
    cells = [replace(c, suite=name, label=labels.get(c.label, c.label)) for c in loaded.cells]
    return replace(loaded, suite=suite, cells=cells, variant_of=loaded.suite.name, labels=labels)


def stored_spec(loaded: LoadedSuite) -> dict[str, Any]:
    """What the store keeps of a suite (its ``spec``): the validated suite as JSON, with the ``--set``
    overrides as typed (``overrides``) where there are any, and the suite a variant varies (``variant_of``)."""
    spec = loaded.suite.model_dump(mode="json")
    if loaded.overrides:
        spec["overrides"] = [o.text for o in loaded.overrides]
    if loaded.variant_of is not None:
        spec["variant_of"] = loaded.variant_of
    return spec
