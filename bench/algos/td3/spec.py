"""TD3, Stable-Baselines3's (an off-policy reference point, never one of the project's answers)."""

from __future__ import annotations

from typing import Any

from bench.algos.offpolicy_params import TD3Params, off_policy_spec


def sb3_kwargs(p: TD3Params, action_space: Any) -> dict[str, Any]:
    """TD3's own constructor arguments, beside those SB3's off-policy algorithms share (:mod:`bench.algos.sb3`)."""
    import numpy as np
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise  # SB3: on use only

    kw: dict[str, Any] = dict(policy_delay=p.policy_delay, target_policy_noise=p.target_policy_noise,
                              target_noise_clip=p.target_noise_clip)
    if p.noise_type != "none":
        d = int(np.prod(action_space.shape))
        noise = NormalActionNoise if p.noise_type == "normal" else OrnsteinUhlenbeckActionNoise
        kw["action_noise"] = noise(mean=np.zeros(d), sigma=p.noise_std * np.ones(d))
    return kw


SPEC = off_policy_spec("td3", TD3Params, "continuous", sb3_kwargs)
