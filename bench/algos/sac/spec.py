"""SAC, Stable-Baselines3's (an off-policy reference point, never one of the project's answers)."""

from __future__ import annotations

from typing import Any

from bench.algos.offpolicy_params import SACParams, off_policy_spec


def sb3_kwargs(p: SACParams, action_space: Any) -> dict[str, Any]:
    """SAC's own constructor arguments, beside those SB3's off-policy algorithms share (:mod:`bench.algos.sb3`)."""
    # policy_kwargs entries are merged into the shared ones; use_sde also reaches the policy (SB3's
    # OffPolicyAlgorithm gives gSDE to the policies of algorithms that support it).
    return dict(ent_coef=p.ent_coef, target_update_interval=p.target_update_interval, use_sde=p.use_sde,
                sde_sample_freq=p.sde_sample_freq, policy_kwargs={"log_std_init": p.log_std_init} if p.use_sde else {})


SPEC = off_policy_spec("sac", SACParams, "continuous", sb3_kwargs)
