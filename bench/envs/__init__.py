"""Environments: the env families (:mod:`.families`: ids, traits, thresholds, time scales, optional extras and
observation adapters, one declaration a family), the registry read off them (:mod:`.registry`), the trait
vocabulary (:mod:`.traits`), and the one env factory every implementation uses (:mod:`.factory`), with its
vector-env backends (:mod:`.vector`).

The public names of the registry and the factory are re-exported here, so ``from bench.envs import get_spec,
make_env`` is the way to use them. They are resolved on first use: importing ``bench.envs`` (or the plain literals
of :mod:`bench.envs.traits`, which the command line reads to check its options) loads no gymnasium. No submodule
imports this package.
"""

from __future__ import annotations

import importlib
import importlib.util

#: Where each re-exported name lives.
_FROM: dict[str, tuple[str, ...]] = {
    "bench.envs.factory": ("ActionRepeat", "EpisodeMonitor", "EpisodicLife", "RecorderLike", "evaluate_policy",
                           "make_env", "make_vec_env"),
    "bench.envs.registry": ("ATARI_FRAME_SKIP", "ATARI_MAX_FRAMES", "EVAL_STEP_CAP", "REGISTRY", "EnvSpec", "Family",
                            "close_matches", "env_exists", "env_key", "get_spec", "missing_extra", "is_sequence_task",
                            "obs_supported", "parse_env_key", "space_facts", "list_specs", "known_specs",
                            "registered_time_scale"),
    "bench.envs.vector": ("VEC_ENV_MODES", "VecEnvMode", "vec_env_problem"),
}
_WHERE = {name: module for module, names in _FROM.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    if not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'bench.envs' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
