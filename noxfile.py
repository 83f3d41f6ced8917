"""Nox sessions. `make test` is the everyday path; nox adds the slower tiers.

- ``nox -s tests``: the default test run (what CI runs through `make test`).
- ``nox -s learning``: multi-seed learning bars (minutes to hours; not in CI).
- ``nox -s benchmark``: speed benchmarks with pytest-benchmark (ratios measured side by side).
"""

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True


def _install(session: nox.Session) -> None:
    session.install("-e", ".[test]")


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    _install(session)
    session.run("pytest", *session.posargs)


@nox.session(python="3.11")
def learning(session: nox.Session) -> None:
    _install(session)
    session.run("pytest", "-m", "learning", "-p", "no:cacheprovider", "--timeout=0", *session.posargs)


@nox.session(python="3.11")
def benchmark(session: nox.Session) -> None:
    _install(session)
    session.run("pytest", "-o", "addopts=", "tests/benchmarks", "--benchmark-only", "-s", *session.posargs)
