"""What the env monitors check on every step, so that an env's fault is named as the env's.

A user's env that returns a NaN reward used to surface as the algorithm's divergence ("Diverged: non-finite
loss/policy = nan at step 152 at record.py:164"), and one that raised named no step. The monitors
(:class:`bench.envs.factory.EpisodeMonitor`, :class:`bench.envs.vector.VectorEpisodeMonitor`), which every
implementation's env steps pass through, raise :class:`EnvError` instead, naming the env, the step and the
quantity. The checks are one ``isfinite`` per quantity per step, and only where the quantity can be
non-finite (float observations and actions; integer frames and token ids cannot). An observation that is not
numbers (strings, objects) is refused too, on reset and on every step, with the space it should belong to: NumPy
would otherwise fail later, in the algorithm, with "the resolved dtypes are not compatible with add.reduce".
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class EnvError(RuntimeError):
    """An env returned a non-finite reward, observation or action, an observation of the wrong shape or of a
    non-numeric dtype, or raised.

    The message is one line naming the env (its key), the step (the run's env steps, this one included) and
    the quantity; the runner records it as the run's error as it is.
    """


def float_box(space: gym.Space) -> bool:
    """Whether values of ``space`` can be NaN or infinite: a ``Box`` of a floating dtype."""
    return isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating)


def first_bad(x: Any) -> float:
    """The first non-finite value of ``x`` (an array or a number that has one)."""
    a = np.asarray(x, dtype=np.float64).ravel()
    return float(a[~np.isfinite(a)][0])


def returned(env_id: str, what: str, value: Any, step: int) -> EnvError:
    """``env X returned reward nan at step 152`` (``what``: reward, observation or action)."""
    return EnvError(f"env {env_id} returned {what} {first_bad(value)} at step {step:,}")


def bad_action(env_id: str, action: Any, step: int) -> EnvError:
    return EnvError(f"env {env_id} was given the action {first_bad(action)} at step {step:,} (the policy's output is "
                    "not finite: the algorithm diverged)")


def raised(env_id: str, e: BaseException, step: int) -> EnvError:
    text = " ".join(str(e).split())
    return EnvError(f"env {env_id} raised {type(e).__name__}" + (f": {text}" if text else "") + f" at step {step:,}")


def bad_shape(env_id: str, shape: tuple, expected: tuple, step: int) -> EnvError:
    return EnvError(f"env {env_id} returned an observation of shape {shape} at step {step:,}; its observation space "
                    f"says {expected}")


#: ``dtype.kind`` of the observations an algorithm can take: bool, signed and unsigned integers, floats.
NUMERIC_KINDS = "biuf"


def non_numeric(obs: Any) -> bool:
    """Whether ``obs`` is not an array of numbers (strings, Python objects, or no array at all)."""
    dtype = getattr(obs, "dtype", None)
    if dtype is None:  # a list or a scalar: what NumPy makes of it
        dtype = np.asarray(obs).dtype
    return dtype.kind not in NUMERIC_KINDS


def bad_dtype(env_id: str, obs: Any, space: gym.Space, step: int, *, reset: bool = False) -> EnvError:
    """``env X returned an observation of dtype <U1 at step 5; its observation space is Box(…): …``."""
    dtype = getattr(obs, "dtype", None)
    dtype = np.asarray(obs).dtype if dtype is None else dtype  # (a dtype without fields is falsy: no `or`)
    at = (f"at the reset after step {step:,}" if step else "at its first reset") if reset else f"at step {step:,}"
    return EnvError(f"env {env_id} returned an observation of dtype {dtype} {at}; its observation space is {space} "
                    "(allowed: arrays of numbers: bool, integer or float)")
