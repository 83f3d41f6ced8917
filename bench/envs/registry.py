"""The registry of known environment ids and their traits.

The registry (:data:`REGISTRY`) holds the ids the benchmark was designed around, each with a success threshold
and where that threshold comes from. It is read off the env families (:data:`bench.envs.families.FAMILIES`),
where each family declares its ids, their traits, thresholds and time scales, and everything else bench needs to
know of it; this module adds nothing per family. Any other registered Gymnasium id works too; :func:`get_spec`
infers its traits by building the env once.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import json
import re
from typing import Any

import gymnasium as gym
import numpy as np

from bench.distribution import install_hint
import bench.envs.families as families
import bench.envs.pixels as _pixels
import bench.envs.sequence as _sequence
from bench.envs.families import ATARI_FRAME_SKIP, ATARI_MAX_FRAMES, GYM as _GYM
from bench.envs.traits import Action, EnvSpec, Family

__all__ = [
    "ATARI_FRAME_SKIP",
    "ATARI_MAX_FRAMES",
    "EVAL_STEP_CAP",
    "EnvSpec",
    "Family",
    "REGISTRY",
    "SEQUENCE_TASKS",
    "TIME_SCALE_US",
    "env_exists",
    "env_key",
    "is_sequence_task",
    "make_raw",
    "parse_env_key",
    "close_matches",
    "get_spec",
    "list_specs",
    "known_specs",
    "registered_time_scale",
    "space_facts",
    "require",
    "is_atari",
    "is_minatar",
    "missing_extra",
]

#: Step cap for evaluation episodes of envs without a known horizon, so a broken env cannot hang a run.
EVAL_STEP_CAP = 100_000

#: The registry, in the order the CLI lists it: every family's entries (:data:`bench.envs.families.FAMILIES`).
#: Horizons are ``gym.spec(id).max_episode_steps``; thresholds are Gymnasium's ``reward_threshold`` wherever it
#: has one (the tests check they still agree).
REGISTRY: dict[str, EnvSpec] = {s.id: s for fam in families.FAMILIES for s in fam.envs}

#: The language-model-style tasks bench registers (:mod:`bench.envs.sequence`), and their default
#: thresholds: an exact-match rate of 0.9 over the window for the verifiable ones (a chosen bar: nine
#: answers in ten right, sampled); none for the preference task, whose reward is a learned model's
#: standardised score (a suite sets one).
SEQUENCE_TASKS: dict[str, float | None] = {"bench/Sort-v0": 0.9, "bench/Add-v0": 0.9, "bench/Preference-v0": None}

#: CPU microseconds per env step that fix each env's time axis (``EnvSpec.time_scale_us``; how they are measured:
#: :mod:`bench.envs.families`): the registry's, as its families declare them, and the sequence tasks'.
TIME_SCALE_US: dict[str, float] = {
    **{k: s.time_scale_us for k, s in REGISTRY.items() if s.time_scale_us is not None},
    "bench/Sort-v0": 700.0,
    "bench/Add-v0": 700.0,
    "bench/Preference-v0": 600.0,
}

# bench's own envs (the sequence tasks, the pixel versions of MiniGrid and Box2D tasks) are registered with
# Gymnasium when the registry is imported, so any process that builds envs through bench knows them.
_sequence.register()
_pixels.register()


def is_sequence_task(env_id: str) -> bool:
    """Whether an env key (kwargs allowed) names one of :data:`SEQUENCE_TASKS`."""
    module, gym_id, _ = parse_env_key(env_id)
    return module is None and gym_id in SEQUENCE_TASKS


# -- env keys: an id, an optional module to import, optional gym.make kwargs ----------------
#: Kwarg names in an env key: Python identifiers (``gym.make`` passes them as keyword arguments).
_KWARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_key(env_id: str, kwargs: dict[str, Any] | None = None) -> str:
    """The one string that names an env everywhere in bench: cell keys, the store, reports.

    ``env_id`` is a Gymnasium id, or Gymnasium's ``module:EnvId`` form for an env that
    registers itself when ``module`` is imported. ``kwargs`` (for ``gym.make``) follow in
    brackets, names sorted and values as JSON, so one env with the same kwargs always gets
    the same key and two variants never share one::

        env_key("LunarLander-v3", {"enable_wind": True, "continuous": True})
        == 'LunarLander-v3[continuous=true,enable_wind=true]'

    Without kwargs the key is ``env_id`` itself, so every key made before kwargs existed
    is unchanged.

    :raises ValueError: a kwarg name is not an identifier, or a value is not JSON
        (str, int, float, bool, None, and lists or dicts of them).
    """
    if not kwargs:
        return env_id
    parts = []
    for k in sorted(kwargs):
        if not _KWARG_NAME.fullmatch(k):
            raise ValueError(f"kwargs name {k!r} is not an identifier; allowed: letters, digits and _ (gym.make keywords)")
        try:
            v = json.dumps(kwargs[k], sort_keys=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError(f"kwargs.{k}: {kwargs[k]!r} is not a JSON value; allowed: strings, finite numbers, "
                             "true/false, null, and lists or maps of them") from None
        parts.append(f"{k}={v}")
    return f"{env_id}[{','.join(parts)}]"


def parse_env_key(key: str) -> tuple[str | None, str, dict[str, Any]]:
    """``(module, gym_id, kwargs)`` of an :func:`env_key` (``module`` is ``None`` for a plain id).

    :raises ValueError: the bracketed part is not ``name=JSON`` pairs separated by commas.
    """
    base, kwargs = key, {}
    if key.endswith("]") and "[" in key:
        base, body = key[: key.index("[")], key[key.index("[") + 1 : -1]
        dec, i = json.JSONDecoder(), 0
        while i < len(body):
            m = _KWARG_NAME.match(body, i)
            if not m or body[m.end() : m.end() + 1] != "=":
                raise ValueError(f"env {key!r}: expected name=value at {body[i:]!r}")
            try:
                kwargs[m.group()], i = dec.raw_decode(body, m.end() + 1)
            except json.JSONDecodeError:
                raise ValueError(f"env {key!r}: the value of {m.group()} is not JSON") from None
            if i < len(body):
                if body[i] != ",":
                    raise ValueError(f"env {key!r}: expected ',' at {body[i:]!r}")
                i += 1
    module, _, gym_id = base.rpartition(":")
    return module or None, gym_id, kwargs


def _import_module(module: str) -> None:
    """Import the module of a ``module:EnvId`` key, so its envs are registered (Gymnasium's own convention)."""
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - whatever the user's module raises, it is one line for them
        raise KeyError(f"cannot import module {module!r} (for its environments): {type(e).__name__}: {e}") from None


# -- Gymnasium registry ------------------------------------------------------
def _register_core() -> None:
    """Register the ids of the families that come with bench's own dependencies (Atari's ale_py), once each.

    Done lazily, for an id not yet known, so importing the registry stays cheap for code that only needs the
    registry table."""
    for fam in families.FAMILIES:
        if fam.module is not None and fam.extra is None:
            families.register(fam.name)


def missing_extra(env_id: str) -> str | None:
    """Why an unknown id is unknown when an optional extra would register it (a family with an ``extra``:
    MinAtar, MiniGrid, gymnasium-robotics, highway-env), else ``None``."""
    fam = families.family_of_id(parse_env_key(env_id)[1])
    if fam is None or fam.extra is None or families.register(fam.name):
        return None
    licence = f", {fam.licence}" if fam.licence else ""
    return (f"a {fam.title} id, and {fam.title} is not installed; allowed: install the optional "
            f"extra ({install_hint(fam.extra)}{licence}), or another env")


def env_exists(env_id: str) -> bool:
    """Whether the id of the env key ``env_id`` is a registered Gymnasium id (ALE and, with their optional
    extras, MinAtar, MiniGrid, gymnasium-robotics and highway-env ids included), after importing its
    ``module:`` part if it has one.

    :raises KeyError: the key's module cannot be imported.
    :raises ValueError: the key's bracketed kwargs do not parse.
    """
    module, gym_id, _ = parse_env_key(env_id)
    if module:
        _import_module(module)
    # The extras register their ids on import, and only an id not yet known needs them: importing
    # MinAtar costs ~3 s (it pulls in seaborn), a third of `bench recommend` on the shipped reference.
    if gym_id not in gym.registry:
        _register_core()
    # A family id goes through `families.register` even when its package registered the id on an import of
    # its own (the user's, pytest's): the family's adjustments (gymnasium-robotics' Fetch under MuJoCo 4.0)
    # must precede a build. Cheap then: the package is imported already, and `register` runs once.
    fam = families.family_of_id(gym_id)
    if fam is not None:
        families.register(fam.name)
    return gym_id in gym.registry


def close_matches(env_id: str, n: int = 3) -> list[str]:
    """Registered ids that look like ``env_id``'s, best first, for "did you mean" hints."""
    for fam in families.FAMILIES:
        families.register(fam.name)
    return difflib.get_close_matches(parse_env_key(env_id)[1], list(gym.registry), n=n, cutoff=0.6)


def require(env_id: str) -> gym.envs.registration.EnvSpec:
    """The Gymnasium spec of the env key's id, or a :class:`KeyError` that says what is allowed."""
    if not env_exists(env_id):
        extra = missing_extra(env_id)
        if extra is not None:
            raise KeyError(f"{parse_env_key(env_id)[1]!r}: {extra}")
        near = close_matches(env_id)
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        raise KeyError(
            f"unknown environment {parse_env_key(env_id)[1]!r}.{hint} Allowed: a registered Gymnasium id "
            f"(built-in registry: {', '.join(REGISTRY)}), or module:EnvId for an env your module registers"
        )
    return gym.spec(parse_env_key(env_id)[1])


def make_raw(env_id: str, **extra: Any) -> gym.Env:
    """``gym.make`` of an env key: its id with its kwargs (``extra`` first, so the key's kwargs win)."""
    _, gym_id, kwargs = parse_env_key(env_id)
    require(env_id)
    return gym.make(gym_id, **{**extra, **kwargs})


def is_minatar(gspec: gym.envs.registration.EnvSpec) -> bool:
    """A MinAtar env (by entry point, so every game and version of the package counts)."""
    fam = families.family_of_spec(gspec)
    return fam is not None and fam.name == "minatar"


def is_atari(gspec: gym.envs.registration.EnvSpec) -> bool:
    # By entry point rather than by the "ALE/" prefix, so legacy ids such as
    # BreakoutNoFrameskip-v4 (also registered by ale_py) get the same preprocessing.
    fam = families.family_of_spec(gspec)
    return fam is not None and fam.name == "atari"


def _family(gspec: gym.envs.registration.EnvSpec) -> Family:
    """The family of an id no family declares: the one its entry point belongs to, else ``other``."""
    fam = families.family_of_spec(gspec)
    return fam.name if fam is not None else "other"


# -- traits --------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def get_spec(env_id: str) -> EnvSpec:
    """Traits of the env key ``env_id``: the :data:`REGISTRY` entry, or inferred for any other
    registered id and for any key with kwargs.

    Inference builds the raw env once (``gym.make`` with the key's kwargs):

    * action: ``Discrete`` → discrete, ``Box`` → continuous (anything else is rejected);
    * obs: a ``uint8`` ``Box`` with two or more dimensions → pixels, else vector;
    * reward: always ``dense``. Sparsity cannot be read off a space, so an
      inferred env is assumed dense; a suite states it with ``traits: {reward: sparse}``;
    * horizon: the built env's ``max_episode_steps`` (Atari: the frame cap / frame skip);
    * threshold: Gymnasium's ``reward_threshold``, else ``None`` (a suite must then give one).

    A registry id with kwargs (``LunarLander-v3[continuous=true]``) keeps its entry's
    family, reward density, threshold and time scale, and takes action, observation and
    horizon from the built env, since kwargs can change them. Kwargs can change difficulty
    too; a suite that knows better sets ``threshold``.

    :raises KeyError: the key's id is not a registered Gymnasium id, or its module cannot be imported.
    :raises ValueError: the env is registered but cannot be built (with these kwargs), or its
        action space is neither ``Discrete`` nor ``Box``.
    """
    if env_id in REGISTRY:
        return REGISTRY[env_id]
    gspec = require(env_id)
    _, gym_id, kwargs = parse_env_key(env_id)
    try:
        # The raw env: its spaces give the traits (Atari's raw frames are uint8 pixels, as
        # are the factory's preprocessed ones), and the registry needs nothing of the factory.
        env = gym.make(gym_id, **kwargs)
    except Exception as e:  # noqa: BLE001 - any failure to build means: unusable here
        with_kw = f" with kwargs {json.dumps(kwargs)}" if kwargs else ""
        raise ValueError(f"{gym_id} is registered but could not be built{with_kw}: {type(e).__name__}: {e}") from e
    try:
        act_space, obs_space = env.action_space, env.observation_space
        built_horizon = env.spec.max_episode_steps if env.spec is not None else gspec.max_episode_steps
        cap = getattr(env.unwrapped, "cap", None)  # a sequence task's answer length cap
    finally:
        env.close()

    if gym_id in SEQUENCE_TASKS and not parse_env_key(env_id)[0]:
        # A token task: one reward at the end of the answer (sparse), the context as observation.
        thr = SEQUENCE_TASKS[gym_id]
        return EnvSpec(id=env_id, family="sequence", action="discrete", obs="sequence", reward="sparse",
                       horizon=cap, threshold=thr, registered=False, time_scale_us=TIME_SCALE_US.get(gym_id),
                       threshold_source="chosen: 0.9 exact match" if thr is not None else "none: set one in the suite")
    if isinstance(act_space, gym.spaces.Discrete):
        action: Action = "discrete"
    elif isinstance(act_space, gym.spaces.Box):
        action = "continuous"
    else:
        raise ValueError(
            f"{env_id} has a {type(act_space).__name__} action space; allowed: Discrete or Box"
        )
    # Frames: uint8 (Atari) or bool (MinAtar's one-hot object channels) boxes of two or more dimensions.
    pixels = (
        isinstance(obs_space, gym.spaces.Box) and obs_space.dtype in (np.uint8, np.bool_) and len(obs_space.shape) >= 2
    )
    if is_atari(gspec):
        frames = int({**gspec.kwargs, **kwargs}.get("max_num_frames_per_episode", ATARI_MAX_FRAMES))
        horizon: int | None = frames // ATARI_FRAME_SKIP
    else:
        horizon = built_horizon
    base = REGISTRY.get(gym_id) if not parse_env_key(env_id)[0] else None
    if base is not None:
        return dataclasses.replace(base, id=env_id, action=action, obs="pixels" if pixels else "vector", horizon=horizon,
                                   registered=False)
    threshold = None if gspec.reward_threshold is None else float(gspec.reward_threshold)
    return EnvSpec(
        id=env_id,
        family=_family(gspec),
        action=action,
        obs="pixels" if pixels else "vector",
        reward="dense",
        horizon=horizon,
        threshold=threshold,
        threshold_source=_GYM if threshold is not None else "none: set one in the suite",
        registered=False,
    )


#: Observation spaces every implementation's policies read: ``Box`` (vectors, and frames of two or more
#: dimensions) and ``MultiDiscrete`` (token ids: the sequence tasks). A ``Discrete`` observation fails inside
#: the own algorithms (their networks take the space's shape, which is ``()``), and a ``Dict``, ``Tuple`` or
#: other composite space has no shape at all.
SUPPORTED_OBS = (gym.spaces.Box, gym.spaces.MultiDiscrete)
def obs_supported(env_id: str) -> str | None:
    """None when bench can train on the env key ``env_id``'s observations, else why not: one line with what is
    allowed. The one place that decides (suite validation asks it). It looks at the env as the learner sees it,
    after its family's observation adapter (:func:`bench.envs.families.adapt`: MiniGrid's view, the flattened
    Dict observations of gymnasium-robotics and highway-env), so an env that bench learns to flatten is
    allowed by giving its family an adapter, and nowhere else.

    :raises KeyError, ValueError: the env cannot be found or built (as :func:`get_spec`).
    """
    _, gym_id, _ = parse_env_key(env_id)
    if env_id in REGISTRY or gym_id in SEQUENCE_TASKS:
        return None
    env = families.adapt(require(env_id), make_raw(env_id))
    try:
        space = env.observation_space
    finally:
        env.close()
    if isinstance(space, SUPPORTED_OBS):
        return None
    adapted = ", ".join(f.title for f in families.FAMILIES if f.adapter is not None)
    return (f"{env_id} has a {type(space).__name__} observation space, which bench's policies cannot read; allowed: "
            f"Box observations (vectors or frames) or MultiDiscrete token ids (or an env bench flattens: {adapted})")


def space_facts(env_id: str) -> dict[str, Any]:
    """What a suite's ``traits:`` are checked against: the built env's spaces, in words.

    ``{"action": "discrete"|"continuous", "obs_ndim": int|None, "obs_box": bool, "horizon": int|None,
    "obs_tokens": bool}`` (``obs_ndim`` is the observation's number of dimensions for a ``Box``, else
    ``None``; ``obs_tokens``: a ``MultiDiscrete`` observation, token ids).
    """
    s = get_spec(env_id)
    env = families.adapt(require(env_id), make_raw(env_id))  # the observations the learner gets
    try:
        space = env.observation_space
        box = isinstance(space, gym.spaces.Box)
        return {"action": s.action, "obs_box": box, "obs_ndim": len(space.shape) if box else None, "horizon": s.horizon,
                "obs_tokens": isinstance(space, gym.spaces.MultiDiscrete)}
    finally:
        env.close()


def list_specs() -> list[EnvSpec]:
    """The built-in registry, in registry order."""
    return list(REGISTRY.values())


def known_specs() -> list[EnvSpec]:
    """Every env bench knows by name, as ``bench envs`` lists them: the built-in registry, then bench's
    own sequence tasks (:data:`SEQUENCE_TASKS`; each built once to read its spaces, which is cheap:
    the preference task's reward model is made only when it first scores an answer)."""
    return [*REGISTRY.values(), *(get_spec(t) for t in SEQUENCE_TASKS)]


def registered_time_scale(env_id: str) -> float | None:
    """The time scale :func:`get_spec` gives the env key ``env_id``, read from :data:`TIME_SCALE_US` alone:
    nothing imported or built. A ``module:EnvId`` key has none (only a suite can give one); a registry id
    or a sequence task keeps its own with kwargs. For readers of stores that predate recording it."""
    module, gym_id, _ = parse_env_key(env_id)
    return None if module else TIME_SCALE_US.get(gym_id)
