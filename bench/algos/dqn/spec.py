"""DQN, Stable-Baselines3's (an off-policy reference point, never one of the project's answers)."""

from __future__ import annotations

from typing import Any

from bench.algos.offpolicy_params import DQNParams, off_policy_spec


def sb3_kwargs(p: DQNParams, action_space: Any) -> dict[str, Any]:
    """DQN's own constructor arguments, beside those SB3's off-policy algorithms share (:mod:`bench.algos.sb3`)."""
    return dict(target_update_interval=p.target_update_interval, exploration_fraction=p.exploration_fraction,
                exploration_initial_eps=p.exploration_initial_eps, exploration_final_eps=p.exploration_final_eps,
                max_grad_norm=p.max_grad_norm)


SPEC = off_policy_spec("dqn", DQNParams, "discrete", sb3_kwargs)
