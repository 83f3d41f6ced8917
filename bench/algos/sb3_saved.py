"""Saved SB3 policies as data: the policy's weights and what rebuilds it, never SB3's pickles.

SB3's own ``model.save`` zip keeps the model's non-JSON attributes (spaces, schedules, ``policy_kwargs``)
as cloudpickled bytes in its ``data`` entry, which ``Model.load`` unpickles, and ``VecNormalize.save`` is a
pickle (https://stable-baselines3.readthedocs.io/en/master/guide/save_format.html): loading either runs
whatever code the file names. So bench keeps an SB3 policy (format :data:`SB3_STATE`) as

- ``sb3.pt``: the policy module's ``state_dict``, tensors only (loaded with ``weights_only=True``);
- ``sb3.json``: which policy class of the algorithm built it (one of :data:`POLICY_CLASSES`), its
  observation and action spaces in words (:func:`describe_space`), and DQN's exploration rate;
- ``vecnormalize.npz``, where the run normalised observations: ``VecNormalize``'s observation statistics
  (mean, var, count) with its ``clip_obs`` and ``epsilon``, as arrays.

The network's sizes and activation are the run's hyperparameters, in the manifest beside these files:
:func:`bench.algos.sb3.restore_sb3` builds a fresh policy with SB3's constructor, as the algorithm's
``_setup_model`` does, and loads the state dict into it. Files of bench before this layout (SB3's zip and
VecNormalize's pickle, format :data:`SB3_ZIP`) are read only when the caller trusts them
(:func:`restore_zip`, ``bench eval --trust``).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from bench.algos.saved_files import RESAVE, Refused, arrays, field, json_of, tensors

#: The file format of a saved SB3 policy: its state dict, its spaces as JSON, VecNormalize's statistics as arrays.
SB3_STATE = "sb3-state-dict"
#: The format bench wrote before: SB3's ``model.save`` zip and ``VecNormalize``'s pickle (code runs on loading).
SB3_ZIP = "sb3"
#: The SB3 policy classes a saved policy may name (the algorithm's ``policy_aliases`` give the class).
POLICY_CLASSES = ("MlpPolicy", "CnnPolicy")
#: The dtypes a saved space may have.
DTYPES = ("float32", "float64", "uint8", "int8", "int16", "int32", "int64", "bool")
#: The layout's version in ``sb3.json``.
VERSION = 1


# --------------------------------------------------------------------------- #
# Spaces in words
# --------------------------------------------------------------------------- #
def _bound(a: np.ndarray) -> Any:
    """A Box bound: one number where every entry is the same (frames: 0 and 255), else the nested list."""
    flat = a.reshape(-1)
    return flat[0].item() if flat.size and (flat == flat[0]).all() else a.tolist()


def describe_space(space: Any) -> dict[str, Any]:
    """A Gymnasium space as JSON values (Box, Discrete, MultiDiscrete, MultiBinary: what SB3's policies take).

    :raises TypeError: another space (bench's SB3 runs have none)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype), "low": _bound(space.low),
                "high": _bound(space.high)}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "dtype": str(space.dtype)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    raise TypeError(f"a {type(space).__name__} space cannot be saved; allowed: Box, Discrete, MultiDiscrete, MultiBinary")


def space_of(desc: Any, suffix: str, where: str) -> Any:
    """The space :func:`describe_space` described; a description it does not write is refused."""
    from gymnasium import spaces

    def bad(what: str) -> Refused:
        return Refused(suffix, f"{where}: {what}; not bench's format (changed since?); allowed: {RESAVE}")

    if not isinstance(desc, dict):
        raise bad("not a JSON object")
    kind = desc.get("type")
    try:
        if kind == "Discrete":
            return spaces.Discrete(int(field(desc, "n", (int,), suffix)), start=int(field(desc, "start", (int,), suffix)))
        if kind == "MultiBinary":
            return spaces.MultiBinary(desc["n"])
        dtype = desc.get("dtype")
        if dtype not in DTYPES:
            raise bad(f"dtype {dtype!r}, allowed: {', '.join(DTYPES)}")
        if kind == "MultiDiscrete":
            return spaces.MultiDiscrete(np.asarray(desc["nvec"], dtype=np.int64), dtype=dtype)
        if kind == "Box":
            shape = tuple(int(n) for n in field(desc, "shape", (list,), suffix))
            low, high = (np.broadcast_to(np.asarray(desc[k], dtype=dtype), shape) for k in ("low", "high"))
            return spaces.Box(low=low.copy(), high=high.copy(), shape=shape, dtype=dtype)
    except Refused:
        raise
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise bad(f"a {kind} space that cannot be built ({type(e).__name__})") from None
    raise bad(f"space type {kind!r}, allowed: Box, Discrete, MultiDiscrete, MultiBinary")


# --------------------------------------------------------------------------- #
# Saving
# --------------------------------------------------------------------------- #
def sb3_checkpoint(model: Any, vecnorm: Any | None) -> dict[str, Any]:
    """``{"format", "files"}`` of an SB3 model as it is now (:data:`SB3_STATE`). Reads the model only."""
    import torch

    policy = model.policy
    name = next((n for n, cls in model.policy_aliases.items() if cls is type(policy)), None)
    if name not in POLICY_CLASSES:
        raise TypeError(f"an SB3 {type(policy).__name__} cannot be saved; allowed: {', '.join(POLICY_CLASSES)}")
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu().clone() for k, v in policy.state_dict().items()}, buf)
    meta: dict[str, Any] = {"version": VERSION, "policy": name, "observation_space": describe_space(model.observation_space),
                            "action_space": describe_space(model.action_space)}
    if hasattr(model, "exploration_rate"):  # DQN: its ε-greedy when acting by sampling (DQN.predict)
        meta["exploration_rate"] = float(model.exploration_rate)
    files = {"sb3.pt": buf.getvalue(), "sb3.json": json.dumps(meta, sort_keys=True).encode()}
    if vecnorm is not None and vecnorm.norm_obs:
        rms = vecnorm.obs_rms
        out = io.BytesIO()
        np.savez(out, mean=np.asarray(rms.mean, dtype=np.float64), var=np.asarray(rms.var, dtype=np.float64),
                 count=np.float64(rms.count), clip_obs=np.float64(vecnorm.clip_obs), epsilon=np.float64(vecnorm.epsilon))
        files["vecnormalize.npz"] = out.getvalue()
    return {"format": SB3_STATE, "files": files}


# --------------------------------------------------------------------------- #
# Reading, as data
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class Saved:
    """What :func:`read` took from an :data:`SB3_STATE` checkpoint's files: the policy class's name (one of
    :data:`POLICY_CLASSES`), its spaces, its state dict, DQN's exploration rate, and VecNormalize's
    ``normalize_obs`` with the saved statistics (``None`` where the run did not normalise observations)."""

    policy: str
    observation_space: Any
    action_space: Any
    state_dict: dict[str, Any]
    exploration_rate: float | None
    normalize: Callable[[np.ndarray], np.ndarray] | None


def read(files: dict[str, bytes]) -> Saved:
    """The checkpoint's files as data (:mod:`bench.algos.saved_files`).

    :raises Refused: a file that is not what :func:`sb3_checkpoint` writes (pickles included)."""
    import torch

    meta = json_of(files, "sb3.json")
    if meta.get("version") != VERSION:
        raise Refused("sb3.json", f"version {meta.get('version')!r}, allowed: {VERSION} ({RESAVE})")
    name = meta.get("policy")
    if name not in POLICY_CLASSES:
        raise Refused("sb3.json", f"policy class {name!r} is not one bench builds; allowed: {', '.join(POLICY_CLASSES)}")
    obs_space = space_of(meta.get("observation_space"), "sb3.json", "observation_space")
    action_space = space_of(meta.get("action_space"), "sb3.json", "action_space")
    eps = meta.get("exploration_rate")
    if eps is not None and not (isinstance(eps, (int, float)) and not isinstance(eps, bool) and 0 <= eps <= 1):
        raise Refused("sb3.json", f"exploration_rate {eps!r}; allowed: a number in [0, 1]")
    state = tensors(files, "sb3.pt")
    if not isinstance(state, dict) or not state or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                          for k, v in state.items()):
        raise Refused("sb3.pt", f"not bench's format (a state dict: names to tensors); allowed: {RESAVE}")
    normalize = _normalizer(arrays(files, "vecnormalize.npz"), obs_space.shape) if "vecnormalize.npz" in files else None
    return Saved(name, obs_space, action_space, state, None if eps is None else float(eps), normalize)


def _normalizer(data: dict[str, np.ndarray], shape: tuple[int, ...]) -> Callable[[np.ndarray], np.ndarray]:
    """VecNormalize's ``normalize_obs`` with the saved statistics (SB3 2.9, ``vec_normalize.py``: clip the
    standardised observation to ±clip_obs, then float32)."""
    try:
        mean, var = (np.asarray(data[k], dtype=np.float64) for k in ("mean", "var"))
        clip, eps = float(data["clip_obs"]), float(data["epsilon"])
        float(data["count"])
    except (KeyError, TypeError, ValueError):
        raise Refused("vecnormalize.npz", f"not bench's format (mean, var, count, clip_obs, epsilon); allowed: {RESAVE}") from None
    if mean.shape != tuple(shape) or var.shape != tuple(shape):
        raise Refused("vecnormalize.npz", f"statistics of shape {mean.shape}, not the observations' {tuple(shape)}; "
                                          f"allowed: {RESAVE}")

    def normalize(obs: np.ndarray) -> np.ndarray:
        return np.clip((obs - mean) / np.sqrt(var + eps), -clip, clip).astype(np.float32)

    return normalize


def acting(predict: Callable[..., Any], normalize: Callable[[np.ndarray], np.ndarray] | None, deterministic: bool, *,
           exploration_rate: float | None = None, action_space: Any = None) -> Callable[[np.ndarray], np.ndarray]:
    """A policy on raw observations: normalised (as in training), then ``predict`` (an SB3 policy's or model's);
    a batch in, a batch of actions out. ``exploration_rate``: DQN's ε-greedy when sampling, as ``DQN.predict``."""

    def act(obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs)
        if normalize is not None:
            x = normalize(x)
        if exploration_rate is not None and not deterministic and np.random.rand() < exploration_rate:
            return np.array([action_space.sample() for _ in range(len(x))])
        action, _ = predict(x, deterministic=deterministic)
        return action

    return act


def restore_zip(files: dict[str, bytes], model_class: type, *, deterministic: bool = True) -> Callable[[np.ndarray], np.ndarray]:
    """A policy saved as :data:`SB3_ZIP` (bench before :data:`SB3_STATE`), through SB3's ``load`` and ``pickle``:
    **runs whatever code the files hold**; only for files the caller trusts (``bench eval --trust``).

    The schedules SB3 pickled with the model are replaced by constants on load (acting needs none), so that a model
    saved by another Python version still loads (rl-baselines3-zoo's ``enjoy`` does the same)."""
    import pickle

    model = model_class.load(io.BytesIO(files["zip"]), device="cpu", custom_objects={  # type: ignore[attr-defined]
        "learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0,
        "exploration_schedule": lambda _: 0.0})
    vecnorm = pickle.loads(files["vecnormalize.pkl"]) if "vecnormalize.pkl" in files else None  # noqa: S301 - trusted
    return acting(model.predict, vecnorm.normalize_obs if vecnorm is not None and vecnorm.norm_obs else None,
                  deterministic)
