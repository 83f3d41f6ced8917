"""What can still be checked of a suite the schema refused, so that one pass names every problem.

The schema (:mod:`.schema`) stops at the first model that does not validate: an unknown env id, a
hyperparameter name or a bad hyperparameter value elsewhere in the file would then only show once the
schema's problems were fixed, one round trip per stage. These checks read the parsed YAML as it is and
add only what the schema cannot see (env ids are checked against the registry, hyperparameters are
free-form there); the schema's own checks stay the schema's.

:func:`env_id_problem` is also what the full validation (:func:`bench.suites.expand.expand`) asks, so an
unknown env reads the same in both.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bench.algos.registry import PARAMS
from bench.suites.errors import _problems_from_pydantic, did_you_mean
from bench.suites.problems import Problem

__all__ = ["env_id_problem", "hyperparam_problems", "unvalidated_problems"]


def env_id_problem(path: str, key: str, env_id: str) -> Problem | None:
    """The problem with env key ``key`` (of ``envs[i]``, at ``path``), if the registry does not know it.

    :param env_id: the id as the suite wrote it (the problem's value).
    """
    from bench import envs  # the registry pulls in gymnasium, which the schema alone does not need

    try:
        exists = envs.env_exists(key)
    except KeyError as err:  # the module of module:EnvId cannot be imported
        return Problem(f"{path}.id", str(err.args[0]), env_id, True)
    if exists:
        return None
    extra = envs.missing_extra(key)
    if extra is not None:
        return Problem(f"{path}.id", extra, env_id, True)
    near = envs.close_matches(key)
    hint = f"did you mean {', '.join(near)}? " if near else ""
    return Problem(f"{path}.id", f"unknown environment; {hint}allowed: a registered Gymnasium id (`bench envs` lists "
                                 "the built-in registry), or module:EnvId for an env that your module registers",
                   env_id, True)


def unvalidated_problems(data: dict[str, Any]) -> list[Problem]:
    """The problems the schema cannot see in a suite it refused: each env id the registry does not know,
    and each algorithm entry's hyperparameters, their names against its algorithm's (or every
    algorithm's, where its own is unknown: an unknown algorithm must not hide a typo such as
    ``learning_rat``) and, where the algorithm is known, their values one by one."""
    return _env_problems(data.get("envs")) + _hyperparam_problems(data.get("algorithms"))


def _env_problems(entries: Any) -> list[Problem]:
    from bench.envs.registry import env_key

    problems: list[Problem] = []
    for i, e in enumerate(entries if isinstance(entries, list) else []):
        env_id, kwargs = (e.get("id"), e.get("kwargs") or {}) if isinstance(e, dict) else (None, None)
        # An id the schema refuses for its form (empty, brackets, control characters) is the schema's to name.
        if not isinstance(env_id, str) or not env_id or any(c in env_id for c in "[]") or not env_id.isprintable() \
                or not isinstance(kwargs, dict):
            continue
        try:
            key = env_key(env_id, kwargs)
        except ValueError:
            continue  # kwargs that cannot be in a key: named once the schema passes
        if (p := env_id_problem(f"envs[{i}]", key, env_id)) is not None:
            problems.append(p)
    return problems


def _hyperparam_problems(entries: Any) -> list[Problem]:
    return [p for j, a in enumerate(entries if isinstance(entries, list) else []) for p in hyperparam_problems(j, a)]


def hyperparam_problems(j: int, a: Any) -> list[Problem]:
    """The problems of ``algorithms[j]`` (``a``, as parsed) that its hyperparameters show alone: names its
    algorithm does not have, and values their fields refuse. Suite validation asks it too for an entry that
    no env of the suite could resolve (each one unusable for its own named problem)."""
    if not isinstance(a, dict) or a.get("impl") == "python":
        return []  # a plugin's names are its own model's, checked once it loads
    algo = a.get("algo")
    known = isinstance(algo, str) and algo in PARAMS
    names = list(PARAMS[algo].model_fields) if known else sorted({n for m in PARAMS.values() for n in m.model_fields})
    blocks = [("hyperparams", a.get("hyperparams"))]
    env_hp = a.get("env_hyperparams")
    if isinstance(env_hp, dict):
        blocks += [(f"env_hyperparams.{k}", v) for k, v in env_hp.items()]
    problems: list[Problem] = []
    for where, block in blocks:
        if not isinstance(block, dict):
            continue
        for key in block:
            if isinstance(key, str) and key not in names:
                whose = f"for {algo}" if known else "for any algorithm"
                problems.append(Problem(f"algorithms[{j}].{where}.{key}",
                                        f"unknown hyperparameter {whose}; allowed: {', '.join(names)}"
                                        f"{did_you_mean(key, names)}"))
        if known:
            problems += _value_problems(PARAMS[algo], {k: v for k, v in block.items() if k in names},
                                        f"algorithms[{j}].{where}")
    return problems


def _value_problems(model: Any, block: dict[str, Any], prefix: str) -> list[Problem]:
    """Each value of ``block`` its field refuses, checked against ``model`` with the others at their defaults.
    Only field errors: a rule across fields (a batch against a rollout) may be met by the zoo's values,
    which are layered in once the schema passes (:func:`bench.algos.hyperparams.resolve`)."""
    try:
        model.model_validate(block)
    except ValidationError as err:
        return [p for p in _problems_from_pydantic(err, prefix) if _field_of(p.path, prefix) in block]
    return []


def _field_of(path: str, prefix: str) -> str:
    """The field a problem's ``path`` (under ``prefix``) names: ``prefix.net_arch[0]`` → ``net_arch``; ``""`` for
    the model as a whole."""
    rest = path[len(prefix) + 1:] if path.startswith(prefix + ".") else ""
    return rest.split(".")[0].split("[")[0]
