"""The smaller jobs: the envs bench knows, own-against-SB3 speed, the suite file's JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from bench.api._common import BadInput, writable

#: ``bench speed --algo``: the algorithms with an SB3 twin to time against.
SPEED_ALGOS = ("ppo", "a2c", "trpo")
#: ``bench speed --kernel``: the own implementation's kernels.
SPEED_KERNELS = ("auto", "numpy", "torch")


def envs() -> list:
    """Every env bench knows (its registry and its own sequence tasks), as
    :class:`bench.envs.registry.EnvSpec`: traits, horizon, threshold and its source, time scale."""
    from bench.envs import known_specs

    return list(known_specs())


def speed(algos: str | list[str], env: str, *, timesteps: int = 20_000, rounds: int = 3, seeds: int = 0,
          sample_timesteps: int | None = None, kernel: str = "auto", vec_env: str = "sync",
          out_json: Path | None = None, progress: Callable[[str], None] | None = None) -> list:
    """Own implementation against SB3: env-steps/s side by side in one process, one torch and BLAS thread
    each (:func:`bench.run.speed.compare`), for ``algos`` (a list, or comma-separated), and with ``seeds`` the median samples-to-threshold over that many
    seeds. Returns one :class:`bench.run.speed.SpeedResult` per algorithm; with ``out_json`` also writes them,
    with the machine's metadata, as JSON.

    :raises BadInput: an algorithm without an SB3 twin, an unknown env, kernel or vec env, an unwritable ``out_json``.
    """
    from dataclasses import asdict

    from bench.envs import env_exists, missing_extra, vec_env_problem
    from bench.run.speed import compare

    given = algos
    if isinstance(algos, str):
        algos = [a.strip() for a in algos.split(",") if a.strip()]
    bad = [a for a in algos if a not in SPEED_ALGOS]
    if bad or not algos:
        raise BadInput(f"--algo: {', '.join(bad) or repr(given)} not comparable with SB3; allowed: "
                       f"{', '.join(SPEED_ALGOS)}")
    if not env_exists(env):
        extra = missing_extra(env)
        raise BadInput(f"--env: {env!r} is {extra}" if extra else
                       f"--env: unknown environment {env!r}; allowed: a registered Gymnasium id (see `bench envs`)")
    if kernel not in SPEED_KERNELS:
        raise BadInput(f"--kernel: {kernel!r} is not a kernel; allowed: {', '.join(SPEED_KERNELS)}")
    why = vec_env_problem(env, vec_env)
    if why is not None:
        raise BadInput(f"--vec-env: {vec_env!r}: {why}")
    if out_json is not None:
        writable("--json", out_json, folder=False)
    results = [compare(a, env, timesteps=timesteps, rounds=rounds, sample_seeds=seeds, sample_timesteps=sample_timesteps,
                       overrides={"kernel": kernel, "vec_env": vec_env}, progress=progress or (lambda s: None))
               for a in algos]
    if out_json is not None:
        import platform

        from bench.run.provenance import run_metadata

        out_json.write_text(json.dumps({"results": [asdict(r) | {"ratio": r.ratio, "kernel": kernel, "vec_env": vec_env}
                                                    for r in results],
                                        "meta": run_metadata(), "machine": platform.machine()}, indent=2))
    return results


def suite_schema() -> dict[str, Any]:
    """The JSON Schema of suite files."""
    from bench.suites.suite import json_schema

    return json_schema()
