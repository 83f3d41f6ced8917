"""Nox sessions. `make test` is the everyday path; nox adds the slower tiers.

- ``nox -s tests``: the default test run (what CI runs through `make test`).
- ``nox -s learning``: multi-seed learning bars (minutes to hours; not in CI).
- ``nox -s benchmark``: speed benchmarks with pytest-benchmark (ratios measured side by side).
- ``nox -s fuzz``: the property-based fuzz test with its larger ``fuzz`` profile (5,000 suite and
  store-URL examples, 150 report examples; about 4 minutes on 2 cores). CI runs the ``ci`` profile (about a minute).
- ``nox -s extras``: the tests of the optional extras the test extra leaves out for their size (W&B offline,
  envpool), with those extras installed, so that they run instead of skipping.
- ``nox -s docs``: the documentation site (MkDocs, ``mkdocs.yml``) into ``site/``, with ``--strict`` as CI builds it.
- ``nox -s wheel``: the distribution (``onpolicy-bench``) built as a wheel and installed, with its dependencies, into
  a fresh virtualenv, whose ``bench --version`` then runs outside the checkout.
"""

import tomllib
from pathlib import Path

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
    # -n 0: one bar at a time, so the wall times recorded beside each bar are not shared-core times.
    session.run("pytest", "-m", "learning", "-n", "0", "-p", "no:cacheprovider", "--timeout=0", *session.posargs)


@nox.session(python="3.11")
def heavy(session: nox.Session) -> None:
    """The long end-to-end checks that the default tier leaves out for CI's time (docs/testing.md)."""
    _install(session)
    session.run("pytest", "-m", "heavy", "-p", "no:cacheprovider", *session.posargs)


@nox.session(python="3.11")
def extras(session: nox.Session) -> None:
    """W&B's offline run and envpool's stepping: their tests skip in the default tier, whose test extra leaves the
    packages out for their size (measured 2026-12-07 on a 2-core machine, docs/testing.md: wandb 0.31 adds 64 MB
    and its test takes 39 s; envpool 1.2.5 adds 741 MB with its assets and a 53 s install)."""
    session.install("-e", ".[test,wandb,envpool]")
    session.run("python", "-c", "import envpool, wandb")  # installed, so the tests below cannot skip
    session.run("pytest", "tests/test_loggers.py", "tests/test_vec_env.py", "-k", "wandb or envpool", "-rs",
                "-p", "no:cacheprovider", *session.posargs)


@nox.session(python="3.11")
def benchmark(session: nox.Session) -> None:
    _install(session)
    session.run("pytest", "-o", "addopts=", "tests/benchmarks", "--benchmark-only", "-s", *session.posargs)


@nox.session(python="3.11")
def fuzz(session: nox.Session) -> None:
    _install(session)
    session.run("pytest", "tests/test_fuzz.py", "-p", "no:cacheprovider", "--timeout=0", *session.posargs,
                env={"HYPOTHESIS_PROFILE": "fuzz"})


@nox.session(python="3.11")
def docs(session: nox.Session) -> None:
    # Only the docs extra: mkdocstrings reads bench's docstrings from the source tree, it does not import bench.
    with open("pyproject.toml", "rb") as f:
        session.install(*tomllib.load(f)["project"]["optional-dependencies"]["docs"])
    session.run("mkdocs", "build", "--strict", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python="3.11", reuse_venv=False)
def wheel(session: nox.Session) -> None:
    """Build the wheel (``python -m build``, PEP 517 in an isolated environment) and install it, not the checkout,
    into this fresh virtualenv; then ``bench --version`` and the report's template from the installed package,
    run from a folder outside the checkout so that nothing is imported from the source tree."""
    with open("pyproject.toml", "rb") as f:
        name = tomllib.load(f)["project"]["name"]
    session.install("build")
    dist = Path(session.create_tmp()) / "dist"
    session.run("python", "-m", "build", "--wheel", "--outdir", str(dist), ".")
    wheels = sorted(dist.glob(f"{name.replace('-', '_')}-*.whl"))
    assert len(wheels) == 1, wheels
    session.install(str(wheels[0]))
    session.chdir(dist)
    session.run("bench", "--version")
    session.run("python", "-c", "import importlib.metadata as m, importlib.resources as r, bench; "
                f"assert m.version({name!r}) and (r.files('bench') / 'analysis' / 'report.html.j2').is_file(); "
                "assert 'site-packages' in bench.__file__, bench.__file__")


@nox.session(python="3.11")
def simulate(session: nox.Session) -> None:
    """The full simulations of `bench recommend`: the headline rule (docs/statistics.md, "How many envs") and the
    three parts (docs/statistics.md, "Answers that decide")."""
    _install(session)
    session.run("python", "scripts/simulate_generalise.py", *session.posargs)
    session.run("python", "scripts/simulate_selection.py")


@nox.session(python="3.11")
def race(session: nox.Session) -> None:
    """docs/race.md's tables: races replayed on the shipped reference (`-- --explore`: the whole design search)."""
    _install(session)
    session.run("python", "scripts/race_replay.py", *session.posargs)
