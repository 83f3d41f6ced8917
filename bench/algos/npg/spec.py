"""NPG (Kakade 2001): its typed hyperparameters and spec."""

from __future__ import annotations

from pydantic import Field, model_validator

from bench.algos.param_types import _OnPolicyParams, _sde_sample_freq_field, _use_sde_field
from bench.algos.spec import AlgoSpec, own, sb3_missing
from bench.algos.trpo.spec import SPACE_TRPO


class NPGParams(_OnPolicyParams):
    """Natural policy gradient (Kakade 2001; Rajeswaran et al. 2017): TRPO's step without its line
    search; SB3 and sb3-contrib have none.

    Defaults: sb3-contrib 2.9 TRPO's for every shared field (so one block configures
    both, and NPG against TRPO isolates the line search); the normalised step size
    ``target_kl`` δ 0.01 is also mjrl's NPG default (``normalized_step_size``, the
    code of Rajeswaran et al. 2017).
    """

    learning_rate: float = Field(1e-3, gt=0, description="Adam step size of the value function (the policy step is set by target_kl).")
    n_steps: int = Field(2048, gt=0, description="Steps per env per rollout (update).")
    batch_size: int = Field(128, gt=0, description="Minibatch size of the value-function updates.")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE λ: 1 is Monte-Carlo returns, 0 is one-step TD.")
    vf_coef: float = Field(
        0.5, ge=0, description="Unused (the critic has its own optimizer, as TRPO's); kept so blocks are shared."
    )
    normalize_advantage: bool = Field(True, description="Standardise advantages over the rollout.")
    cg_max_steps: int = Field(15, gt=0, description="Conjugate-gradient iterations for the natural-gradient direction.")
    cg_damping: float = Field(0.1, ge=0, description="Damping added to the Fisher-vector product.")
    n_critic_updates: int = Field(10, gt=0, description="Value-function gradient passes over each rollout.")
    target_kl: float = Field(
        0.01, gt=0,
        description="Normalised step size δ: every step is sqrt(2δ / xᵀFx)·x, whose quadratic-model KL is δ "
                    "(Rajeswaran et al. 2017, eq. 5); not checked, as there is no line search.",
    )
    sub_sampling_factor: int = Field(
        1, ge=1, description="Use every k-th transition for the policy step (faster; 1 uses them all)."
    )
    use_sde: bool = _use_sde_field()
    sde_sample_freq: int = _sde_sample_freq_field()

    @model_validator(mode="after")
    def _consistent(self) -> NPGParams:
        self._check_rollout()
        self._check_batch(self.batch_size)
        self._check_sde()
        return self


#: NPG shares TRPO's space: target_kl is its normalised step size.
SPEC = AlgoSpec("npg", NPGParams, {"bench": own("npg.npg")}, space=dict(SPACE_TRPO),
                missing=sb3_missing("Stable-Baselines3 and sb3-contrib have no NPG"))
