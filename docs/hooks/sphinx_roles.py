"""A griffe extension for the API pages: Sphinx cross-reference roles become mkdocstrings cross-references.

bench's docstrings use Sphinx's ``:param:`` fields (``docstring_style: sphinx`` parses those) and its
cross-reference roles, ``:func:`interval``` and the like, which mkdocstrings-python does not read: the
pages showed ":func:" followed by the name as code. Each role is rewritten, before the docstring is
parsed, into an *optional* autorefs reference (mkdocs-autorefs' ``<autoref ... optional>``): a link where
the target has an API page, else the name as inline code with the full path as its tooltip, never a
warning (many targets, such as private helpers, have no page).

Names resolve as Sphinx resolves them: a dotted path starting at ``bench`` stands as written, otherwise the
first component is looked up in the docstring's scope (its object, then the enclosing class and module,
imports included). ``~`` shows only the last component, as in Sphinx.

Sphinx's literal-block marker is read as Sphinx reads it (reStructuredText, "Literal Blocks"): a paragraph
that ends in ``::`` before an indented block ends in ``:`` (``Example::`` reads "Example:"), or in nothing
where the ``::`` stands apart (``Use ::``); the indented block below is Markdown's code block already. The
pages showed the ``::`` as written.

Loaded by ``mkdocs.yml`` (``extensions:`` of the python handler); ``tests/test_docs.py`` checks it.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

#: The Python-domain roles bench's docstrings use (Sphinx, "Cross-referencing Python objects").
ROLE = re.compile(r":(?:py:)?(?P<role>func|meth|class|data|attr|mod|obj|exc|const):`(?P<target>[^`<>]+)`")


def full_path(obj: griffe.Object, name: str) -> str:
    """The dotted path ``name`` refers to from ``obj``'s scope; ``name`` itself when it cannot be resolved."""
    if name.split(".", 1)[0] == obj.package.name:
        return name
    head, _, rest = name.partition(".")
    try:
        base = obj.resolve(head)
    except (griffe.NameResolutionError, AttributeError, KeyError):
        return name
    return f"{base}.{rest}" if rest else base


#: A paragraph's last line ending in ``::`` (its text before, and whether a space stands between), followed by a
#: blank line and an indented line: Sphinx's literal-block marker.
LITERAL = re.compile(r"(?m)^(?P<text>[^\n]*?)(?P<space>[ \t]*)::[ \t]*$(?=\n[ \t]*\n[ \t]+\S)")


def literal_blocks(text: str) -> str:
    """``text`` with each literal-block marker read as Sphinx reads it (see the module docstring)."""

    def one(m: re.Match[str]) -> str:
        body = m["text"]
        return body if m["space"] or not body.strip() else f"{body}:"

    return LITERAL.sub(one, text)


def rewrite(text: str, obj: griffe.Object) -> str:
    """``text`` with every role replaced by an optional autorefs reference (see the module docstring)."""

    def one(m: re.Match[str]) -> str:
        target = m["target"].strip()
        short = target.startswith("~")
        name = target.lstrip("~.")
        shown = name.rsplit(".", 1)[-1] if short else name
        ident = html.escape(full_path(obj, name), quote=True)
        return f'<autoref identifier="{ident}" optional><code>{html.escape(shown)}</code></autoref>'

    return ROLE.sub(one, text)


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring in the package once it is loaded (names resolve across modules)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = literal_blocks(rewrite(obj.docstring.value, obj))
            stack.extend(m for m in obj.members.values() if not m.is_alias)
