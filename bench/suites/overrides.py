"""Command-line overrides of a suite file: ``bench run SUITE --set PATH=VALUE``.

``PATH`` names a place in the suite's YAML the way its error lines do: keys joined by dots, list
items by ``[i]`` (``defaults.timesteps``, ``algorithms[0].hyperparams.learning_rate``); a key with
dots or brackets in it is written in double quotes (``algorithms[0].env_hyperparams."pkg.mod:Env-v0".n_steps``).
``VALUE`` is read as YAML (``1e-4``, ``true``, ``[64, 64]``, ``{obs: true}``), except that a plain
number in exponent form without a dot (``2e5``), which YAML 1.1 reads as text, is a number here, as it is
in YAML 1.2 and on every other command line.

An override is applied to the parsed file before validation, so it is checked exactly as the file is,
and each problem it causes is named by its ``--set`` path. Missing mappings on the way are created
(``algorithms[0].hyperparams`` need not be in the file); list items must exist. This follows the
zoo's ``--hyperparams`` and Hydra's ``key=value`` overrides, with the paths of bench's own error lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from bench.suites.problems import Problem

__all__ = ["Override", "OverrideError", "parse_override", "apply_overrides"]

_TOKEN = re.compile(r'"(?P<quoted>[^"]+)"|(?P<bare>[^.\["\]=\s]+)|\[(?P<index>\d+)\]|(?P<dot>\.)')
#: Numbers YAML 1.1 reads as text (no dot before the exponent): ``2e5``, ``-1E-4``.
_EXP_NUMBER = re.compile(r"[-+]?\d+(?:\.\d*)?[eE][-+]?\d+")


class OverrideError(ValueError):
    """An override that cannot be read (``str(e)``: one line naming it and what is allowed)."""


@dataclass(frozen=True)
class Override:
    """One ``--set PATH=VALUE``: ``path`` written as error lines write it, ``parts`` its keys and indexes."""

    text: str
    path: str
    parts: tuple[str | int, ...]
    value: Any


def _path_of(parts: tuple[str | int, ...]) -> str:
    out = ""
    for p in parts:
        out = f"{out}[{p}]" if isinstance(p, int) else (f"{out}.{p}" if out else p)
    return out


def parse_override(text: str) -> Override:
    """Read one ``PATH=VALUE``. :raises OverrideError: not of that form, or a value YAML cannot read."""
    allowed = "allowed: PATH=VALUE, e.g. defaults.timesteps=2e5 or 'algorithms[0].hyperparams.learning_rate=1e-4'"
    head, eq, raw = text.partition("=")
    if not eq or not head.strip():
        raise OverrideError(f"--set: {text!r} is not PATH=VALUE; {allowed}")
    parts: list[str | int] = []
    pos, want_key = 0, True
    head = head.strip()
    while pos < len(head):
        m = _TOKEN.match(head, pos)
        if m is None:
            raise OverrideError(f"--set: {text!r}: cannot read the path at {head[pos:]!r}; {allowed} (a key with "
                                'dots or brackets in double quotes)')
        if m.group("dot"):
            if want_key:
                raise OverrideError(f"--set: {text!r}: an empty key in the path; {allowed}")
            want_key = True
        elif m.group("index") is not None:
            if not parts or want_key:
                raise OverrideError(f"--set: {text!r}: an index [i] must follow a key; {allowed}")
            parts.append(int(m.group("index")))
        else:
            if not want_key:
                raise OverrideError(f"--set: {text!r}: keys are joined by dots; {allowed}")
            parts.append(m.group("quoted") if m.group("quoted") is not None else m.group("bare"))
            want_key = False
        pos = m.end()
    if want_key:
        raise OverrideError(f"--set: {text!r}: the path ends in a dot; {allowed}")
    raw = raw.strip()
    if _EXP_NUMBER.fullmatch(raw):
        value: Any = float(raw)
    else:
        try:
            value = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError as e:
            what = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise OverrideError(f"--set: {text!r}: the value is not YAML ({what}); allowed: a YAML value such as "
                                "3, 1e-4, true, [64, 64] or {obs: true}") from None
    return Override(text, _path_of(tuple(parts)), tuple(parts), value)


def apply_overrides(data: Any, overrides: list[Override]) -> list[Problem]:
    """Set each override's value in ``data`` (the parsed suite, changed in place), in order; the
    problems of those that name no place in it (a list item that is not there, a key under a value)."""
    problems: list[Problem] = []
    for o in overrides:
        node = data
        for k, (part, nxt) in enumerate(zip(o.parts, o.parts[1:] + (None,))):
            here = _path_of(o.parts[:k]) or "the suite"
            if isinstance(part, int):
                if not isinstance(node, list):
                    problems.append(Problem(o.path, f"{here} is not a list, so it has no item [{part}]", o.value, True))
                    break
                if part >= len(node):
                    problems.append(Problem(o.path, f"{here} has {len(node)} item(s); allowed: [0] to "
                                                    f"[{len(node) - 1}]" if node else f"{here} is empty", o.value, True))
                    break
            elif not isinstance(node, dict):
                kind = "a list (index it with [i])" if isinstance(node, list) else f"the value {node!r}"
                problems.append(Problem(o.path, f"{here} is {kind}, so it has no key {part!r}", o.value, True))
                break
            if nxt is None:
                node[part] = o.value
            else:
                if isinstance(node, dict) and node.get(part) is None:
                    node[part] = [] if isinstance(nxt, int) else {}
                node = node[part]
    return problems
