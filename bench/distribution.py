"""The distribution bench is installed as: ``onpolicy-bench`` (``bench`` on PyPI is another project's). The import
name and the command stay ``bench``. One place for the name, so every install hint says the same.
"""

from __future__ import annotations

#: The name pip knows bench by (pyproject.toml's ``[project] name``).
NAME = "onpolicy-bench"


def install_hint(extra: str) -> str:
    """How to install the optional extra ``extra``: from the index, or from a checkout."""
    return f"pip install '{NAME}[{extra}]', or pip install -e '.[{extra}]' in a checkout"


def version() -> str:
    """The installed distribution's version (``bench --version``)."""
    from importlib.metadata import version as of

    return of(NAME)
