"""One-line runs: ``bench run --env ID --algo NAME`` without a suite file. The flags make a suite
(:mod:`bench.suites.oneline`), written beside the store, that is then planned and run like any suite."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from bench.api._common import BadInput, parse_store
from bench.storage.urls import StoreURL

#: The implementations a one-line run takes (a plugin, impl python, needs a suite file for its entry).
ONELINE_IMPLS = ("bench", "sb3", "numpy")


@dataclass(frozen=True)
class OneLineSuite:
    """The suite a one-line run makes: its ``name``, its YAML ``text``, and the ``path`` it is written to."""

    name: str
    path: Path
    text: str


def oneline_suite(env: str, algo: str, *, impl: str | None = None, seeds: int | None = None,
                  timesteps: int | None = None, store: StoreURL | str | None = None,
                  overrides: Sequence[str] = ()) -> OneLineSuite:
    """The suite ``bench run --env ENV --algo ALGO [--impl] [--seeds] [--timesteps] [--set ...]`` runs, checked
    (with ``overrides``) and not written (:func:`write_oneline_suite` writes it). ``timesteps`` defaults to
    rl-baselines3-zoo's budget for the algorithm on the env, ``seeds`` to 3, ``impl`` to bench.

    :raises BadInput: one line per problem, named by the flag that gave the value (``--env: unknown
        environment; did you mean CartPole-v1? ...``) or by its ``--set`` path.
    """
    from bench.suites.oneline import DEFAULT_SEEDS, FLAGS, flags_suite, suite_yaml, suites_dir
    from bench.suites.problems import Problem
    from bench.suites.suite import SuiteError, load_suite_text

    impl = impl or "bench"
    seeds = DEFAULT_SEEDS if seeds is None else seeds
    problems: list[Problem] = []
    if impl not in ONELINE_IMPLS:
        problems.append(Problem("algorithms[0].impl", f"allowed: {', '.join(ONELINE_IMPLS)} (a plugin, impl python, "
                                                       "runs from a suite file)", impl, True))
    # A bad --impl is named above; the rest is checked as with the default one, so that one pass names it all.
    data = flags_suite(env, algo, impl if not problems else "bench", seeds, timesteps)
    path = suites_dir(parse_store(store).sqlite_path) / f"{data['name']}.yaml"
    text = suite_yaml(data, f"`{data['description']}`")
    try:
        load_suite_text(text, str(path), overrides)
    except SuiteError as e:
        problems += e.problems
        file, lines_of, overridden = e.file, e.lines_of, e.overridden
    else:
        file, lines_of, overridden = str(path), None, ()
    if "timesteps" not in data["defaults"]:
        # No --timesteps and no zoo budget: said as the flag that is missing (not the file's envs[0].timesteps),
        # unless the env or algorithm is unknown, which is why there is none.
        problems = [p for p in problems if p.path != "envs[0].timesteps"]
        if not any(p.path in ("envs[0].id", "algorithms[0].algo") for p in problems):
            problems.append(Problem("defaults.timesteps", f"rl-baselines3-zoo has no budget for {algo} on {env}, so "
                                                          "there is no default; allowed: --timesteps N (env steps)"))
    if problems:
        raise BadInput(SuiteError(file, problems, lines_of, overridden, FLAGS).lines)
    return OneLineSuite(data["name"], path, text)


def write_oneline_suite(made: OneLineSuite, *, check: bool = False) -> Path:
    """Write ``made``'s YAML to its path (a file there already with the same text is left as it is); with
    ``check``, only check that it can be, writing nothing (``bench run`` checks before the store is touched and
    writes once the suite is registered).

    :raises BadInput: a file there holds another suite (edited since: run it by its path instead), or the
        folder cannot be written.
    """
    from bench.api._common import writable

    if made.path.exists():
        try:
            same = made.path.read_text() == made.text
        except (OSError, UnicodeDecodeError):
            same = False
        if same:
            return made.path
        raise BadInput(f"{made.path}: already holds another suite than these flags make (edited since it was "
                       f"written?); allowed: bench run {made.path}, or move the file away")
    writable("--store", made.path.parent, folder=True)
    if check:
        return made.path
    try:
        made.path.parent.mkdir(parents=True, exist_ok=True)
        made.path.write_text(made.text)
    except OSError as e:
        raise BadInput(f"{made.path}: cannot be written ({e.strerror or e}); allowed: a --store whose folder "
                       "can be written") from None
    return made.path


def oneline_choices(flag: str) -> list[str]:
    """The values shell completion offers for a one-line run's ``flag``: ``--env`` the built-in registry's
    ids, ``--algo`` the registered algorithms, ``--impl`` :data:`ONELINE_IMPLS`. Read from the registries,
    nothing built."""
    if flag == "--env":
        from bench.envs.registry import SEQUENCE_TASKS, list_specs

        return [s.id for s in list_specs()] + list(SEQUENCE_TASKS)
    if flag == "--algo":
        from bench.algos.registry import names

        return list(names())
    return list(ONELINE_IMPLS) if flag == "--impl" else []
