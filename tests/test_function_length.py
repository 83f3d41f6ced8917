"""No function in bench/ is over 80 lines (issue 65): a reader sees one stage at a time.

Counted from the ``def`` line to the function's last line, docstring and comments included (``ast``'s
``lineno``/``end_lineno``), so a long docstring counts too; nested functions count within their parent.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "bench"
LIMIT = 80


def long_functions(root: Path, limit: int = LIMIT) -> list[tuple[int, str, str]]:
    """``(lines, path, name)`` of every function under ``root`` longer than ``limit`` lines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append((n, str(path.relative_to(root.parent)), node.name))
    return sorted(out, reverse=True)


def test_no_function_is_over_80_lines():
    assert long_functions(ROOT) == []


def test_the_checker_finds_a_long_function(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n" + "    x = 1\n" * 80 + "\n\ndef g():\n    return 1\n")
    assert long_functions(tmp_path) == [(81, f"{tmp_path.name}/m.py", "f")]
