"""GRPO (Shao et al. 2024): its typed hyperparameters, search space and spec."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from bench.algos.param_types import _error, _OnPolicyParams
from bench.algos.search import NET_SMALL, NET_TINY, Dim
from bench.algos.spec import AlgoSpec, own, sb3_missing


class GRPOParams(_OnPolicyParams):
    """GRPO (Shao et al. 2024, DeepSeekMath §4.1), group-relative policy optimisation; SB3 has no GRPO.

    Per update, ``groups_per_update`` groups of ``group_size`` whole episodes, every episode of a
    group started from the same initial state (the same reset seed). No critic: each episode's
    advantage is its return standardised within its group. The policy takes ``n_epochs``
    full-batch steps on PPO's clipped surrogate minus ``kl_coef`` × the k3 estimate of the KL
    to a frozen reference policy. Defaults: β = 0.04 and ε = 0.2 as the paper; the rest are this
    project's choice for classic control (the paper's are for a 7B language model).
    Shared fields GRPO does not use (``n_envs``, ``n_steps``, ``gae_lambda``, ``vf_coef``,
    ``normalize_advantage``) are kept so one suite block can name them for every algorithm.
    """

    learning_rate: float = Field(1e-3, gt=0, description="Adam step size of the policy.")
    gamma: float = Field(
        1.0, gt=0, le=1, description="Discount of the returns R = Σ γ^t r_t (1: the undiscounted outcome, as the paper)."
    )
    group_size: int = Field(8, ge=2, description="Episodes per group, G; all start from the same reset seed.")
    groups_per_update: int = Field(4, ge=1, description="Groups per policy update (the batch is their episodes).")
    advantage: Literal["outcome", "process", "rloo", "mean"] = Field(
        "outcome",
        description=(
            "outcome: every step of episode i gets (R_i − mean R)/std R over its group (the paper's outcome "
            "supervision, §4.1.2); process: step rewards standardised over all steps of the group, and each "
            "step's advantage is the (γ-discounted) sum of those from it on (§4.1.3). Constant rewards "
            "(CartPole) make process advantages zero. rloo: R_i minus the mean of the other G − 1 returns, "
            "unscaled (REINFORCE with a leave-one-out baseline, Kool et al. 2019, Ahmadian et al. 2024); "
            "mean: R_i minus the group mean, unscaled. With n_epochs 1 the clipped ratio is 1 at the only "
            "step, so rloo and mean are plain REINFORCE with that baseline."
        ),
    )
    kl_coef: float = Field(0.04, ge=0, description="β, weight of the KL penalty to the reference policy (paper: 0.04).")
    clip_range: float = Field(0.2, gt=0, description="Clipping ε of the probability ratio π/π_old.")
    n_epochs: int = Field(10, gt=0, description="Full-batch gradient steps per update (the paper's μ).")
    max_grad_norm: float = Field(0.5, gt=0, description="Global gradient-norm clip.")
    ref_checkpoint: str | None = Field(
        None,
        description=(
            "Reference policy: null is the initial policy; else a path to a torch state_dict of a bench "
            "policy of the same architecture (its actor entries are used)."
        ),
    )
    n_envs: int = Field(1, ge=1, le=1, description="Unused: a group's episodes run on group_size envs of their own.")
    n_steps: int = Field(1, gt=0, description="Unused by GRPO (batches are whole groups of episodes).")
    gae_lambda: float = Field(1.0, ge=0, le=1, description="Unused by GRPO (no critic).")
    vf_coef: float = Field(0.0, ge=0, description="Unused by GRPO (no critic).")
    normalize_advantage: bool = Field(False, description="Unused: advantages are standardised within each group.")
    policy: Literal["mlp", "sequence"] = Field(
        "mlp", description="mlp: the MLP/CNN policy; sequence: a causal transformer over tokens that starts from "
                           "the task's SFT reference, which is then the frozen reference (sequence tasks only).")
    #: Added after stores of GRPO runs existed: left out of cell keys at this value (see key_view).
    late_defaults: ClassVar[dict[str, Any]] = {"policy": "mlp"}

    @model_validator(mode="after")
    def _consistent(self) -> GRPOParams:
        if self.policy == "sequence" and (self.normalize_obs or self.ref_checkpoint is not None):
            raise _error("policy", "policy sequence reads token ids and its reference is the task's SFT model; set "
                                   "normalize: false and leave ref_checkpoint out", self.policy)
        if self.normalize_reward:
            raise _error(
                "normalize",
                "GRPO standardises returns within each group, so reward normalisation does not apply; "
                "set normalize: {obs: true, reward: false} or false",
                self.normalize,
            )
        if self.kernel == "numpy":
            raise _error("kernel", "GRPO has no NumPy kernel; allowed: auto, torch", self.kernel)
        return self


# No zoo sampler: this project's choice around the paper's β 0.04 and ε 0.2.
SPACE_GRPO: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-5, 3e-3, log=True),
    "group_size": Dim("categorical", choices=(4, 8, 16, 32)),
    "groups_per_update": Dim("categorical", choices=(1, 2, 4, 8)),
    "kl_coef": Dim("float", 1e-4, 0.1, log=True),
    "clip_range": Dim("categorical", choices=(0.1, 0.2, 0.3)),
    "n_epochs": Dim("categorical", choices=(1, 5, 10, 20)),
    "net_arch": Dim("categorical", choices=(NET_TINY, NET_SMALL)),
}


SPEC = AlgoSpec("grpo", GRPOParams, {"bench": own("grpo.grpo")}, space=SPACE_GRPO,
                missing=sb3_missing("Stable-Baselines3 has no GRPO"))
