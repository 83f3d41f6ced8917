"""Environments: the registry of known ids with their traits (:mod:`.registry`) and the
one env factory every implementation uses (:mod:`.factory`), with its vector-env
backends (:mod:`.vector`).

The public names of both are re-exported here, so ``from bench.envs import get_spec,
make_env`` is the way to use them. Neither submodule imports this package.
"""

from bench.envs.factory import (
    ActionRepeat,
    EpisodeMonitor,
    EpisodicLife,
    RecorderLike,
    evaluate_policy,
    make_env,
    make_vec_env,
)
from bench.envs.registry import (
    ATARI_FRAME_SKIP,
    ATARI_MAX_FRAMES,
    EVAL_STEP_CAP,
    REGISTRY,
    EnvSpec,
    Family,
    close_matches,
    env_exists,
    env_key,
    get_spec,
    missing_extra,
    is_sequence_task,
    obs_supported,
    parse_env_key,
    space_facts,
    list_specs,
    known_specs,
    registered_time_scale,
)
from bench.envs.vector import VEC_ENV_MODES, VecEnvMode, vec_env_problem

__all__ = [
    "ATARI_FRAME_SKIP",
    "ATARI_MAX_FRAMES",
    "EVAL_STEP_CAP",
    "REGISTRY",
    "EnvSpec",
    "Family",
    "EpisodeMonitor",
    "EpisodicLife",
    "ActionRepeat",
    "RecorderLike",
    "close_matches",
    "env_exists",
    "env_key",
    "parse_env_key",
    "space_facts",
    "get_spec",
    "missing_extra",
    "obs_supported",
    "list_specs",
    "known_specs",
    "registered_time_scale",
    "make_env",
    "make_vec_env",
    "evaluate_policy",
    "is_sequence_task",
    "VEC_ENV_MODES",
    "VecEnvMode",
    "vec_env_problem",
]

# The language-model-style tasks (bench/Sort-v0, bench/Add-v0, bench/Preference-v0): registered on import,
# so any process that builds envs through bench knows them.
from bench.envs.sequence import register as _register_sequence_tasks  # noqa: E402
# The pixel versions of MiniGrid and Box2D tasks (issue 68): their own bench/ ids, registered the same way.
from bench.envs.pixels import register as _register_pixel_versions  # noqa: E402

_register_sequence_tasks()
_register_pixel_versions()
