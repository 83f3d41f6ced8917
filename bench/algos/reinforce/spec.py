"""REINFORCE (Williams 1992): its typed hyperparameters, default search space and spec."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bench.algos.param_types import EntSchedule, _ent_rate_field, _ent_schedule_field, _OnPolicyParams
from bench.algos.search import NET_SMALL, NET_TINY, Dim
from bench.algos.spec import AlgoSpec, CellFacts, Refusal, own, rollout_minimum, sb3_missing


class REINFORCEParams(_OnPolicyParams):
    """REINFORCE (Williams 1992), the Monte-Carlo policy gradient; SB3 has no REINFORCE.

    Batches are whole episodes: each of the ``n_envs`` envs plays episodes until
    the batch holds at least ``n_steps × n_envs`` steps, and an env whose episode
    ends after that sits idle until the slowest env's episode is over. Every
    return is then a complete Monte-Carlo return of the current policy (no
    bootstrapping except at time limits, no step of the next policy wasted or
    mixed in). ``n_steps = 1, n_envs = 1`` is one episode per update, as in
    Williams' episodic REINFORCE and PyTorch's ``examples/reinforcement_learning/reinforce.py``.

    Defaults: ``learning_rate`` 1e-2, ``gamma`` 0.99, one episode per update, returns
    standardised per batch, no entropy bonus and no gradient clipping are the PyTorch
    example's; the learned state-value baseline (``baseline: value``) is
    "REINFORCE with baseline", Sutton & Barto 2018 §13.4, fitted jointly by MSE to G_t
    with SB3's ``vf_coef`` 0.5. Fields named as SB3's mean what they mean there;
    ``baseline`` and ``normalize_returns`` are named after the paper and the example.
    """

    learning_rate: float = Field(1e-2, gt=0, description="Adam step size (PyTorch's reinforce.py example: 1e-2).")
    n_steps: int = Field(
        1,
        gt=0,
        description=(
            "Minimum steps per env per batch: envs play whole episodes until the batch holds at least "
            "n_steps × n_envs steps, then the in-flight episodes are finished (1: one episode per env per update)."
        ),
    )
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor of the Monte-Carlo returns G_t.")
    gae_lambda: float = Field(
        1.0, ge=1, le=1, description="Fixed at 1: REINFORCE uses full Monte-Carlo returns (kept so blocks are shared)."
    )
    baseline: Literal["none", "mean", "value"] = Field(
        "value",
        description=(
            "b(s) subtracted from G_t: none (Williams' plain REINFORCE), mean (the batch's mean return, a constant "
            "baseline) or value (a learned V(s) fitted to G_t by MSE, Sutton & Barto 2018 §13.4)."
        ),
    )
    normalize_returns: bool = Field(
        True,
        description=(
            "Standardise the returns G_t per batch before the baseline (PyTorch's reinforce.py); with baseline "
            "value the critic then fits standardised returns. Centring is itself a mean baseline."
        ),
    )
    normalize_advantage: bool = Field(
        False, description="Standardise the advantages G_t − b(s) per batch (after the baseline)."
    )
    ent_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")
    ent_schedule: EntSchedule = _ent_schedule_field()
    ent_schedule_rate: float = _ent_rate_field()
    vf_coef: float = Field(0.5, ge=0, description="Weight of the value loss in the joint loss (baseline value only).")
    max_grad_norm: float | None = Field(
        None, gt=0, description="Global gradient-norm clip; null disables it (plain REINFORCE clips nothing)."
    )


# No zoo sampler: this project's choice, around PyTorch's reinforce.py (lr 1e-2, γ 0.99).
SPACE_REINFORCE: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-4, 3e-2, log=True),
    "n_steps": Dim("pow2", 1, 256),  # 1: one episode per env per update
    "gamma": Dim("one_minus_log", 0.9, 0.9999),
    "baseline": Dim("categorical", choices=("none", "mean", "value")),
    "normalize_returns": Dim("categorical", choices=(True, False)),
    "ent_coef": Dim("float", 1e-8, 0.1, log=True),
    "net_arch": Dim("categorical", choices=(NET_TINY, NET_SMALL)),
}


def numpy_vector_only(f: CellFacts) -> Refusal | None:
    """The pure-NumPy implementation is a linear policy: it has no network to read frames with."""
    if f.impl != "numpy" or f.obs != "pixels":
        return None
    return Refusal("impl", f"the pure-NumPy REINFORCE is a linear policy on vector observations, and {f.env} has "
                           "pixel observations; allowed here: impl bench", "numpy")


SPEC = AlgoSpec("reinforce", REINFORCEParams,
                {"bench": own("reinforce.reinforce"), "numpy": own("reinforce.reinforce_numpy")},
                space=SPACE_REINFORCE, checks=(rollout_minimum, numpy_vector_only),
                missing=sb3_missing("Stable-Baselines3 has no REINFORCE"))
