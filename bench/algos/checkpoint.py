"""Saving the project's own policies, and acting with a saved one.

A checkpoint holds what acting needs and nothing of training:

- the policy network's weights (``state_dict``), or the pure-NumPy REINFORCE's weight matrix;
- the observation normaliser's running statistics when the run normalised observations
  (:class:`~bench.algos.common.Normalizer`, VecNormalize's algorithm), frozen;
- which network was built where a hyperparameter does not say it (``share_features``: NPG and
  TRPO give the critic its own CNN on pixels; ``critic``: GRPO drops the critic).

The env key and the hyperparameters that build the network (``net_arch``, ``activation``,
``log_std_init``, ``use_sde`` ...) are the run's own and travel in the manifest that
:mod:`bench.run.saving` writes beside the file; :func:`restore` takes them back.

A checkpoint is taken as bytes (:func:`savable`): the copy at the best evaluation must not follow
training afterwards. Taking one reads the policy only: no random numbers, no change to what
training computes, so a seed's returns are the same with saving on or off.
"""

from __future__ import annotations

import io
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from bench.algos.common import Normalizer
from bench.algos.policy import ActorCritic, make_policy
from bench.algos.reinforce.reinforce_numpy import LINEAR, restore_linear
from bench.algos.saved_files import RESAVE, Refused, field, tensors
from bench.storage.record import PolicyFn, SavablePolicy

#: The file format of a torch actor-critic (the pure-NumPy REINFORCE's is ``LINEAR``, its module's).
TORCH = "bench-actor-critic"


def actor_critic_checkpoint(policy: ActorCritic, norm: Normalizer) -> dict[str, Any]:
    """``{"format", "files"}`` of a torch actor-critic and its normaliser, as they are now.

    :raises TypeError: a policy other than :class:`ActorCritic` (a sequence policy is rebuilt from
        its task's SFT reference, which a checkpoint does not carry; suites refuse ``save`` for it).
    """
    if not isinstance(policy, ActorCritic):
        raise TypeError(f"a {type(policy).__name__} cannot be saved; allowed: the MLP / CNN actor-critic")
    buf = io.BytesIO()
    torch.save({"state_dict": {k: v.detach().cpu().clone() for k, v in policy.state_dict().items()},
                "share_features": bool(policy.shared or not policy.pixels),
                "critic": policy.vf is not None,
                # As tensors, so that loading needs no pickled NumPy objects (torch.load(weights_only=True)).
                "obs_norm": _tensors(norm.obs_state())}, buf)
    return {"format": TORCH, "files": {"pt": buf.getvalue()}}


def _tensors(state: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if state is None else {k: torch.as_tensor(np.asarray(v)) for k, v in state.items()}


def savable(act: PolicyFn, policy: ActorCritic, norm: Normalizer) -> SavablePolicy:
    """``act`` (a collector's deterministic policy) that can also be saved (:func:`actor_critic_checkpoint`)."""
    return SavablePolicy(act, lambda: actor_critic_checkpoint(policy, norm))


# --------------------------------------------------------------------------- #
# Acting with a saved policy
# --------------------------------------------------------------------------- #
def restore(fmt: str, files: dict[str, bytes], *, algo: str, params: Any, obs_space: gym.Space,
            action_space: gym.Space, deterministic: bool = True) -> PolicyFn:
    """A policy on raw observations, a batch in and a batch of actions out, from a saved checkpoint.

    :param fmt: :data:`TORCH` or :data:`LINEAR`; ``files`` by suffix, as written.
    :param params: the run's hyperparameters (``PARAMS[algo]``), which built the network.
    :param obs_space: the env's single observation space, ``action_space`` its single action space.
    :param deterministic: the distribution's mode (as periodic evaluation acts), else a sample.
    :raises ValueError: an unknown format.
    :raises bench.algos.saved_files.Refused: a file that is not what bench writes (a pickle of objects included).
    """
    continuous = isinstance(action_space, gym.spaces.Box)
    low, high = (action_space.low, action_space.high) if continuous else (None, None)
    if fmt == LINEAR:
        return restore_linear(files, obs_space, action_space, deterministic=deterministic)
    if fmt != TORCH:
        raise ValueError(f"unknown policy format {fmt!r}; allowed: {TORCH}, {LINEAR}")
    saved = tensors(files, "pt")
    shape_ok = isinstance(saved, dict) and isinstance(saved.get("state_dict"), dict) and \
        isinstance(saved.get("obs_norm"), (dict, type(None)))
    field(saved, "share_features", (bool,), "pt")
    field(saved, "critic", (bool,), "pt")
    if not shape_ok:
        raise Refused("pt", f"not bench's format (state_dict, obs_norm); allowed: {RESAVE}")

    class _Spaces:  # what make_policy reads of a vector env
        single_observation_space, single_action_space = obs_space, action_space

    policy = make_policy(_Spaces(), params, share_features=saved["share_features"])  # type: ignore[arg-type]
    if not saved["critic"]:
        policy.vf = None
    try:
        policy.load_state_dict(saved["state_dict"])
        stats = saved["obs_norm"]
        norm = Normalizer.frozen(obs_space.shape, None if stats is None else {k: v.numpy() for k, v in stats.items()})
    except (RuntimeError, KeyError, TypeError, ValueError, AttributeError):  # names or shapes the network lacks
        raise Refused("pt", f"weights or statistics that do not fit the {algo} network the manifest's hyperparameters "
                            f"build and the env's observations; allowed: the files bench saved with it ({RESAVE})") from None
    policy.eval()

    def act(raw: np.ndarray) -> np.ndarray:
        obs = norm.obs(np.asarray(raw), update=False)
        obs = obs if obs.dtype == np.uint8 else obs.astype(np.float32, copy=False)
        with torch.inference_mode():
            if policy.use_sde and not deterministic:
                policy.reset_noise(len(obs))
            pd = policy.dist(torch.as_tensor(obs))
            a = (pd.mode() if deterministic else pd.sample()).numpy()
        return np.clip(a, low, high) if continuous else a

    return act

