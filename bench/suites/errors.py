"""A suite's problems as one line each (:class:`SuiteError`), and reading its YAML within bounds."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable

import yaml
from pydantic import BaseModel, ValidationError

from bench.suites.problems import Problem
from bench.suites.schema import MAX_DEPTH, MAX_NODES, MAX_STRING, MAX_TIMESTEPS, Suite

# --------------------------------------------------------------------------- #
# Errors: one line per problem
# --------------------------------------------------------------------------- #
class SuiteError(Exception):
    """One or more problems with a suite file; ``lines`` has one line each."""

    def __init__(self, file: str, problems: list[Problem], lines_of: dict[str, int] | None = None,
                 overridden: Iterable[str] = (), flags: dict[str, str] | None = None):
        """:param flags: path → the command-line flag that gave its value (``bench run --env``): a problem at or
        under the path is named by the flag alone, as the user wrote it (:mod:`bench.suites.oneline`)."""
        self.file = file
        self.problems = problems
        self.lines_of = lines_of or {}
        self.overridden = tuple(overridden)
        seen: set[str] = set()
        self.lines: list[str] = []
        set_paths = self.overridden

        def under(path: str, o: str) -> bool:
            return path == o or path.startswith((o + ".", o + "["))

        for p in problems:
            got = f" (got {_show(p.value)})" if p.has_value else ""
            flag = next((f for o, f in (flags or {}).items() if p.path and under(p.path, o)), None)
            if p.path and any(under(p.path, o) for o in set_paths):
                where = f"{file}: --set"  # the value came from the command line: named as it was given there
            elif flag is not None:
                text = one_line(f"{flag}: {p.message}{got}")
                if text not in seen:
                    seen.add(text)
                    self.lines.append(text)
                continue
            else:
                where = f"{file}:{_line_for(p.path, self.lines_of)}:" if p.path else f"{file}:"
            text = one_line(f"{where} {p.path + ': ' if p.path else ''}{p.message}{got}")
            if text not in seen:
                seen.add(text)
                self.lines.append(text)
        super().__init__("\n".join(self.lines))


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with control characters and line breaks escaped (``\\r``, ``\\x00``): one line, whatever a key held."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


def _show(value: Any) -> str:
    s = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return s if len(s) <= 80 else s[:77] + "..."


_LAST_PART = re.compile(r"(\.[^.\[]+|\[\d+\])$")


def _line_for(path: str, lines_of: dict[str, int]) -> str:
    # A missing key is reported at the line of its nearest ancestor in the file.
    p = path
    while p:
        if p in lines_of:
            return str(lines_of[p])
        q = _LAST_PART.sub("", p)
        if q == p:
            break
        p = q
    return str(lines_of.get("", 1))


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


# --------------------------------------------------------------------------- #
# YAML with line numbers and duplicate-key detection
# --------------------------------------------------------------------------- #
def _malformed(file: str, e: yaml.YAMLError) -> SuiteError:
    mark = getattr(e, "problem_mark", None)
    line = mark.line + 1 if mark is not None else 1
    what = getattr(e, "problem", None) or str(e).splitlines()[0]
    return SuiteError(file, [Problem("", f"line {line}: malformed YAML: {what}")])


def _check_shape(text: str, file: str) -> None:
    """Nesting and node count from the event stream: linear, and no recursion (PyYAML's composer recurses)."""
    depth = nodes = 0
    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise SuiteError(file, [Problem("", f"line {ev.start_mark.line + 1}: nested {depth} levels deep; "
                                                        f"allowed: at most {MAX_DEPTH}")])
            elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if isinstance(ev, yaml.NodeEvent):
                nodes += 1
                if nodes > MAX_NODES:
                    raise SuiteError(file, [Problem("", f"line {ev.start_mark.line + 1}: more than {MAX_NODES:,} "
                                                        f"YAML nodes; allowed: at most {MAX_NODES:,}")])
    except yaml.YAMLError as e:
        raise _malformed(file, e) from None


def _children(n: yaml.Node) -> list[yaml.Node]:
    if isinstance(n, yaml.MappingNode):
        return [x for kv in n.value for x in kv]
    if isinstance(n, yaml.SequenceNode):
        return list(n.value)
    return []


def _check_aliases(root: yaml.Node, file: str) -> None:
    """Size and depth of the document with its aliases expanded, computed on the alias graph
    (each node once, iteratively), so a "billion laughs" costs microseconds, not gigabytes."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        n, leaving = stack.pop()
        k = id(n)
        if leaving:
            kids = _children(n)
            size[k] = 1 + sum(size[id(c)] for c in kids)
            height[k] = 1 + max((height[id(c)] for c in kids), default=0)
            continue
        if k in size:
            continue
        if k in height:  # entered and not left: an alias inside the node it refers to
            raise SuiteError(file, [Problem("", f"line {n.start_mark.line + 1}: a YAML alias refers to a node that "
                                                "contains it (recursive YAML); allowed: aliases of finished nodes only")])
        height[k] = -1  # entered
        stack.append((n, True))
        for c in _children(n):
            if id(c) not in size:
                if height.get(id(c)) == -1:
                    raise SuiteError(file, [Problem("", f"line {c.start_mark.line + 1}: a YAML alias refers to a node "
                                                        "that contains it (recursive YAML); allowed: aliases of finished nodes only")])
                stack.append((c, False))
    if size[id(root)] > MAX_NODES:
        raise SuiteError(file, [Problem("", f"its YAML aliases expand to {size[id(root)]:,} nodes; allowed: at most "
                                            f"{MAX_NODES:,} (aliases are for sharing a block, not for multiplying it)")])
    if height[id(root)] > MAX_DEPTH:
        raise SuiteError(file, [Problem("", f"its YAML aliases expand to {height[id(root)]} levels of nesting; "
                                            f"allowed: at most {MAX_DEPTH}")])


def _check_values(data: Any) -> list[Problem]:
    """Every string printable by the terminal and storable by both backends, every number finite and 64-bit."""
    problems: list[Problem] = []
    stack: list[tuple[str, Any]] = [("", data)]
    while stack and len(problems) < 20:
        path, v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(k, str) and (why := _bad_string(k)):
                    problems.append(Problem(path or "", f"a key {why}", _show_key(k), True))
                    continue
                stack.append((_join(path, k), x))
        elif isinstance(v, list):
            stack.extend((_join(path, i), x) for i, x in enumerate(v))
        elif isinstance(v, str) and (why := _bad_string(v)):
            problems.append(Problem(path, why, _show_key(v), True))
        elif isinstance(v, bool):
            pass
        elif isinstance(v, int) and abs(v) > MAX_TIMESTEPS:
            problems.append(Problem(path, f"integer out of range; allowed: -{MAX_TIMESTEPS:,} to {MAX_TIMESTEPS:,} "
                                          "(64 bits, what the store holds)", v, True))
        elif isinstance(v, float) and not math.isfinite(v):
            problems.append(Problem(path, "not a finite number; allowed: a finite number", v, True))
    return problems


def _bad_string(v: str) -> str | None:
    if len(v) > MAX_STRING:
        return f"string of {len(v):,} characters; allowed: at most {MAX_STRING:,}"
    if "\x00" in v:
        return "string contains a NUL character; allowed: text without NUL (PostgreSQL cannot store it)"
    if any("\ud800" <= ch <= "\udfff" for ch in v):
        return "string contains a lone UTF-16 surrogate (a \\ud800-\\udfff escape); allowed: valid Unicode text"
    return None


def _show_key(v: str) -> str:
    return v.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")[:60]


def _read_yaml(text: str, file: str) -> tuple[Any, dict[str, int]]:
    _check_shape(text, file)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        raise _malformed(file, e) from None
    if node is None:
        raise SuiteError(file, [Problem("", "the file is empty; a suite needs name, seeds, envs and algorithms")])
    _check_aliases(node, file)
    lines: dict[str, int] = {}
    dups: list[Problem] = []

    def walk(n: yaml.Node, path: str) -> None:
        lines[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            seen: set[str] = set()
            for k, v in n.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                child = _join(path, key)
                if key in seen:
                    dups.append(Problem(child, "duplicate key (YAML would silently keep only the last one)"))
                seen.add(key)
                walk(v, child)
                lines[child] = k.start_mark.line + 1  # the key's line, not its value's
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                walk(v, _join(path, i))

    walk(node, "")
    if dups:
        raise SuiteError(file, dups, lines)
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, OverflowError) as e:  # e.g. a timestamp out of range
        if isinstance(e, yaml.YAMLError):
            raise _malformed(file, e) from None
        raise SuiteError(file, [Problem("", f"a value cannot be read: {e}")]) from None
    if problems := _check_values(data):
        raise SuiteError(file, problems, lines)
    return data, lines


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #
_PYDANTIC_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "missing required key",
}


def _allowed_keys(model: type[BaseModel]) -> str:
    return ", ".join(model.model_fields)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the last key of ``loc`` (for 'allowed keys' hints)."""
    model: Any = Suite
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        f = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if f is None:
            return None
        ann = f.annotation
        inner = getattr(ann, "__args__", None) or (ann,)
        nxt = next((a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if nxt is None:
            # list[Model]
            for a in inner:
                for b in getattr(a, "__args__", ()) or ():
                    if isinstance(b, type) and issubclass(b, BaseModel):
                        nxt = b
            if nxt is None:
                return None
        model = nxt
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _problems_from_pydantic(err: ValidationError, prefix: str = "", owner: type[BaseModel] | None = None) -> list[Problem]:
    out: list[Problem] = []
    for e in err.errors(include_url=False):
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and ("[" in p or p in ("int", "list[int]"))))
        path = prefix
        for part in loc:
            path = _join(path, part)
        msg = _PYDANTIC_MESSAGES.get(e["type"], e["msg"])
        if e["type"] == "string_pattern_mismatch" and str(e.get("ctx", {}).get("pattern", "")).startswith("^[^\\x00-\\x1f"):
            msg = "control characters are not allowed; allowed: printable text"  # the pattern, in words
        if e["type"] == "extra_forbidden":
            model = owner if owner is not None else _model_at(loc)
            if model is not None:
                last = loc[-1] if loc else ""
                msg += f"; allowed: {_allowed_keys(model)}{did_you_mean(str(last), model.model_fields)}"
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        msg = msg[0].lower() + msg[1:] if msg else msg
        has_value = e["type"] != "missing"
        out.append(Problem(path, msg, e.get("input"), has_value))
    return out


def did_you_mean(word: str, allowed: Iterable[str]) -> str:
    """``"; did you mean X?"`` for the closest of ``allowed`` to a mistyped ``word`` (difflib), else ``""``."""
    import difflib

    near = difflib.get_close_matches(word, list(allowed), n=1, cutoff=0.6)
    return f"; did you mean {near[0]}?" if near else ""
