"""Environments: the registry of known ids with their traits (:mod:`.registry`) and the
one env factory every implementation uses (:mod:`.factory`).

The public names of both are re-exported here, so ``from bench.envs import get_spec,
make_env`` is the way to use them. Neither submodule imports this package.
"""

from bench.envs.factory import EpisodeMonitor, EpisodicLife, RecorderLike, evaluate_policy, make_env, make_vec_env
from bench.envs.registry import (
    ATARI_FRAME_SKIP,
    ATARI_MAX_FRAMES,
    EVAL_STEP_CAP,
    REGISTRY,
    EnvSpec,
    Family,
    close_matches,
    env_exists,
    get_spec,
    list_specs,
)

__all__ = [
    "ATARI_FRAME_SKIP",
    "ATARI_MAX_FRAMES",
    "EVAL_STEP_CAP",
    "REGISTRY",
    "EnvSpec",
    "Family",
    "EpisodeMonitor",
    "EpisodicLife",
    "RecorderLike",
    "close_matches",
    "env_exists",
    "get_spec",
    "list_specs",
    "make_env",
    "make_vec_env",
    "evaluate_policy",
]
