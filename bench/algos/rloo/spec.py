"""RLOO, REINFORCE with a leave-one-out baseline: run by GRPO's module."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bench.algos.grpo.spec import SPACE_GRPO, GRPOParams
from bench.algos.spec import AlgoSpec, own, sb3_missing


class RLOOParams(GRPOParams):
    """REINFORCE with a leave-one-out baseline (RLOO; Kool et al. 2019, "Buy 4 REINFORCE samples, get
    a baseline for free"; Ahmadian et al. 2024, "Back to Basics", for RL from human feedback): run by
    GRPO's module (``bench.algos.grpo.grpo``) with ``advantage: rloo`` and one epoch.

    Each update samples ``groups_per_update`` groups of ``group_size`` episodes, every episode of a
    group from the same prompt (reset seed); episode i's advantage is its return minus the mean of
    the other G − 1 returns of its group, unscaled. With ``n_epochs`` 1 the probability ratio is 1
    at the only step, so the clipped surrogate's gradient is the REINFORCE gradient with that
    baseline: this is the practitioner's "REINFORCE is enough" candidate, named on its own so that
    recommendations do not pool it with GRPO's group-standardised, multi-epoch update. ``advantage:
    mean`` (R_i minus the group mean, Kool et al.'s biased variant) is allowed for comparison. The KL
    penalty to the frozen reference and the rest are GRPO's fields and defaults.
    """

    advantage: Literal["rloo", "mean"] = Field(
        "rloo", description="rloo: R_i minus the mean of the other G − 1 returns of its group; mean: minus the group mean."
    )
    n_epochs: int = Field(1, gt=0, description="Gradient steps per batch (1: plain REINFORCE; more is PPO-style reuse).")


#: GRPO's module at one epoch by default: the ratio is 1, so clip_range does nothing there.
SPEC = AlgoSpec("rloo", RLOOParams, {"bench": own("grpo.grpo")},
                space={k: v for k, v in SPACE_GRPO.items() if k not in ("clip_range", "n_epochs")},
                missing=sb3_missing("Stable-Baselines3 has no RLOO"))
