"""Each on-policy algorithm's typed hyperparameters, named as in SB3 / rl-baselines3-zoo.

The fields every one of them shares are :class:`bench.algos.param_types.HyperParams`'s; which class
belongs to which algorithm is its :class:`bench.algos.registry.AlgoSpec`'s ``params``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from bench.algos.param_types import (
    EntSchedule,
    Schedule,
    _ent_rate_field,
    _ent_schedule_field,
    _error,
    _OnPolicyParams,
    _sde_sample_freq_field,
    _use_sde_field,
)

__all__ = ["PPOParams", "A2CParams", "A3CParams", "TRPOParams", "REINFORCEParams", "GRPOParams", "NPGParams",
           "ACTDParams", "ACMCParams", "RLOOParams"]


class PPOParams(_OnPolicyParams):
    """PPO (clipped surrogate). Defaults: SB3 2.9 PPO defaults."""

    learning_rate: float = Field(3e-4, gt=0, description="Adam step size.")
    n_steps: int = Field(2048, gt=0, description="Steps per env per rollout (update).")
    batch_size: int = Field(64, gt=0, description="Minibatch size for the n_epochs passes over each rollout.")
    n_epochs: int = Field(10, gt=0, description="Passes over each rollout.")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE λ: 1 is Monte-Carlo returns, 0 is one-step TD.")
    clip_range: float = Field(0.2, gt=0, description="Clipping ε of the probability ratio.")
    clip_range_schedule: Schedule = Field(
        "constant", description="constant, or linear: decay from clip_range to 0 over training (the zoo's lin_X)."
    )
    clip_range_vf: float | None = Field(
        None, gt=0, description="Clipping of the value prediction around the old one; null disables it (SB3 default)."
    )
    ent_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")
    ent_schedule: EntSchedule = _ent_schedule_field()
    ent_schedule_rate: float = _ent_rate_field()
    vf_coef: float = Field(0.5, ge=0, description="Weight of the value loss in the total loss.")
    max_grad_norm: float = Field(0.5, gt=0, description="Global gradient-norm clip.")
    normalize_advantage: bool = Field(True, description="Standardise advantages per minibatch.")
    target_kl: float | None = Field(
        None, gt=0, description="Stop the epochs early once the approximate KL exceeds 1.5 × this; null disables it."
    )
    use_sde: bool = _use_sde_field()
    sde_sample_freq: int = _sde_sample_freq_field()
    policy: Literal["mlp", "sequence"] = Field(
        "mlp", description="mlp: the MLP/CNN ActorCritic; sequence: a small causal transformer over tokens that "
                           "starts from the task's SFT reference (sequence tasks only, bench/Sort-v0 ...; see "
                           "bench.algos.sequence_policy).")
    kl_coef: float = Field(0.0, ge=0, description="β of the KL penalty to the frozen SFT reference (policy "
                                                  "sequence only); 0 disables it.")
    kl_in: Literal["reward", "loss"] = Field(
        "reward", description="Where the KL penalty goes: reward, per token r_t − β (log π − log π_ref) as "
                              "InstructGPT (Ouyang et al. 2022, eq. 2); loss, β × the k3 estimate added to the "
                              "loss as GRPO (Shao et al. 2024).")
    critic: Literal["shared", "separate"] = Field(
        "shared", description="policy sequence only: shared, a value head on the policy's transformer; separate, "
                              "a value model of its own (as InstructGPT's), started from the SFT reference.")
    #: Added after stores of PPO runs existed: left out of cell keys at these values (see key_view).
    late_defaults: ClassVar[dict[str, Any]] = {"policy": "mlp", "kl_coef": 0.0, "kl_in": "reward", "critic": "shared"}

    @model_validator(mode="after")
    def _consistent(self) -> PPOParams:
        if self.policy == "sequence" and (self.normalize_obs or self.normalize_reward):
            raise _error("normalize", "policy sequence reads token ids and rewards as they are; set normalize: false",
                         self.normalize)
        if self.critic != "shared" and self.policy != "sequence":
            raise _error("critic", "critic separate is the sequence policy's option; the MLP policy's critic is "
                                   "always its own network; leave critic out", self.critic)
        if self.kl_coef > 0 and self.policy != "sequence":
            raise _error("kl_coef", "a KL penalty needs a reference policy, which only policy sequence has; set "
                                    "kl_coef: 0 or policy: sequence", self.kl_coef)
        if self.normalize_advantage and self.batch_size <= 1:
            raise _error(
                "batch_size",
                "batch_size must be greater than 1 when normalize_advantage is true (SB3 issue #440: "
                "advantages of a one-sample minibatch normalise to NaN); raise batch_size",
                self.batch_size,
            )
        if self.use_sde and self.policy == "sequence":
            raise _error("use_sde", "gSDE is for continuous actions, and policy sequence emits tokens; set "
                                    "use_sde: false", self.use_sde)
        self._check_rollout()
        self._check_batch(self.batch_size)
        self._check_sde()
        return self


class A2CParams(_OnPolicyParams):
    """A2C (synchronous advantage actor-critic). Defaults: SB3 2.9 A2C defaults."""

    learning_rate: float = Field(7e-4, gt=0, description="Optimizer step size.")
    n_steps: int = Field(5, gt=0, description="Steps per env per rollout (update).")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(1.0, ge=0, le=1, description="GAE λ; SB3's A2C default 1.0 is plain n-step returns.")
    ent_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")
    ent_schedule: EntSchedule = _ent_schedule_field()
    ent_schedule_rate: float = _ent_rate_field()
    vf_coef: float = Field(0.5, ge=0, description="Weight of the value loss in the total loss.")
    max_grad_norm: float = Field(0.5, gt=0, description="Global gradient-norm clip.")
    normalize_advantage: bool = Field(False, description="Standardise advantages per rollout (SB3 A2C default: off).")
    use_rms_prop: bool = Field(True, description="RMSprop (alpha 0.99) as in the A2C paper; false uses Adam.")
    rms_prop_eps: float = Field(1e-5, gt=0, description="RMSprop ε (numerical stability).")
    use_sde: bool = _use_sde_field()
    sde_sample_freq: int = _sde_sample_freq_field()

    @model_validator(mode="after")
    def _consistent(self) -> A2CParams:
        self._check_rollout()
        self._check_sde()
        return self


class A3CParams(A2CParams):
    """A3C (asynchronous advantage actor-critic, Mnih et al. 2016); SB3 has no A3C.

    ``n_workers`` processes each run ``n_envs`` env(s) and apply A2C's n-step gradient to shared
    parameters without locks, through a shared RMSprop (or Adam). Every other field means what it
    means for A2C, with A2C's (SB3's) defaults; a rollout is ``n_steps × n_envs`` steps of one worker.
    """

    n_workers: int = Field(
        4, ge=1, le=64,
        description="Worker processes (the paper's actor-learner threads), each with its own env(s) and gradients.",
    )
    grad_noise_chunks: int | None = Field(None, description="Not supported by A3C (must be null).")

    @model_validator(mode="after")
    def _a3c(self) -> A3CParams:
        if self.device != "cpu":
            raise _error("device", "A3C's workers share parameters in CPU memory; allowed: cpu", self.device)
        if self.grad_noise_chunks is not None:
            raise _error("grad_noise_chunks", "A3C does not measure gradient noise; set it to null",
                         self.grad_noise_chunks)
        if self.use_sde:
            # Each worker would need its own noise matrices drawn from the shared σ; not built.
            raise _error("use_sde", "A3C's workers sample plain Gaussian noise, gSDE is not supported; allowed: false",
                         self.use_sde)
        if self.ent_schedule != "constant":
            # The workers take A2C's gradient with the constant ent_coef; a schedule would need the global
            # step in every worker, which they do not share.
            raise _error("ent_schedule", "A3C's workers apply a constant entropy bonus; allowed: constant",
                         self.ent_schedule)
        return self


class TRPOParams(_OnPolicyParams):
    """TRPO (natural gradient with a KL trust region). Defaults: sb3-contrib 2.9 TRPO defaults."""

    learning_rate: float = Field(1e-3, gt=0, description="Adam step size of the value function (the policy step is set by target_kl).")
    n_steps: int = Field(2048, gt=0, description="Steps per env per rollout (update).")
    batch_size: int = Field(128, gt=0, description="Minibatch size of the value-function updates.")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE λ: 1 is Monte-Carlo returns, 0 is one-step TD.")
    vf_coef: float = Field(
        0.5, ge=0, description="Unused by sb3-contrib's TRPO (the critic has its own optimizer); kept so blocks are shared."
    )
    normalize_advantage: bool = Field(True, description="Standardise advantages over the rollout.")
    cg_max_steps: int = Field(15, gt=0, description="Conjugate-gradient iterations for the natural-gradient direction.")
    cg_damping: float = Field(0.1, ge=0, description="Damping added to the Fisher-vector product.")
    line_search_shrinking_factor: float = Field(
        0.8, gt=0, lt=1, description="Step-size reduction per backtracking line-search iteration."
    )
    line_search_max_iter: int = Field(10, gt=0, description="Backtracking line-search iterations before the step is rejected.")
    n_critic_updates: int = Field(10, gt=0, description="Value-function gradient passes over each rollout.")
    target_kl: float = Field(0.01, gt=0, description="Trust-region size δ: the maximum mean KL of one policy update.")
    sub_sampling_factor: int = Field(
        1, ge=1, description="Use every k-th transition for the policy step (faster; 1 uses them all)."
    )
    kl_action_dims: Literal["mean", "sum"] = Field(
        "mean",
        description="How the KL of a diagonal Gaussian policy combines its d action dimensions in the trust region "
        "(the Fisher, the step size and the line search): `mean`, sb3-contrib's (its KL is torch's per-dimension "
        "Normal KL averaged over samples and dimensions, so δ bounds the KL per dimension and the policy may move by "
        "d·δ in KL between action distributions); `sum`, the paper's KL between the action distributions. No effect "
        "on discrete or one-dimensional actions. impl sb3 has `mean` only.",
    )
    #: Added after TRPO runs existed; at ``mean`` it stays out of the key (see :func:`key_view`). Runs it changed
    #: (own TRPO with d > 1, i.e. LunarLanderContinuous-v3 in the shipped reference) were re-run.
    use_sde: bool = _use_sde_field()
    sde_sample_freq: int = _sde_sample_freq_field()
    late_defaults: ClassVar[dict[str, Any]] = {"kl_action_dims": "mean"}

    @model_validator(mode="after")
    def _consistent(self) -> TRPOParams:
        self._check_rollout()
        self._check_batch(self.batch_size)
        self._check_sde()
        return self


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


class ACTDParams(A2CParams):
    """Actor-critic with n-step TD targets (AC-TD): exactly A2C (``bench.algos.a2c``) with one env.

    One env steps ``n_steps`` times; each step's target bootstraps from V at the end of
    that stretch (n-step returns, ``gae_lambda`` 1); then one gradient step on those
    ``n_steps`` samples: Mnih et al. 2016, Algorithm S3, for a single actor, the seed
    texts' step between Monte-Carlo actor-critic (``ac_mc``) and A2C. Defaults: SB3's
    A2C's (n_steps 5, RMSprop lr 7e-4, γ 0.99, vf_coef 0.5, max_grad_norm 0.5);
    ``n_envs`` is fixed at 1 (with more envs it is ``a2c``). SB3 runs it as ``A2C``
    with ``n_envs=1``, but that is what ``algo: a2c`` with ``n_envs: 1`` measures.
    """

    n_envs: int = Field(1, ge=1, le=1, description="Fixed at 1: AC-TD is one actor (use algo a2c for more envs).")


class ACMCParams(REINFORCEParams):
    """Actor-critic with Monte-Carlo targets (AC-MC): exactly REINFORCE with a learned
    state-value baseline (``bench.algos.reinforce`` with ``baseline: value``), "REINFORCE
    with baseline", Sutton & Barto 2018 §13.4: the critic V(s) is fitted to the
    Monte-Carlo return G_t and used only as a baseline (no bootstrapping, except at
    time limits). Defaults: REINFORCE's; ``baseline`` is fixed at value.
    """

    baseline: Literal["value"] = Field("value", description="Fixed: the learned V(s) (use algo reinforce for none/mean).")


class RLOOParams(GRPOParams):
    """REINFORCE with a leave-one-out baseline (RLOO; Kool et al. 2019, "Buy 4 REINFORCE samples, get
    a baseline for free"; Ahmadian et al. 2024, "Back to Basics", for RL from human feedback): run by
    GRPO's module (``bench.algos.grpo``) with ``advantage: rloo`` and one epoch.

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


#: algorithm → its hyperparameter model: the on-policy algorithms above, then the off-policy reference
