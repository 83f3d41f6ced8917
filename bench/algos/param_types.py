"""The shared parts of every on-policy algorithm's typed hyperparameters: the network and normalisation
fields, the entropy and gSDE fields, and :class:`HyperParams` (the base of every on-policy params class,
and of a plugin's). Each algorithm's own class is in its folder's ``spec.py``; names and
defaults follow SB3 / rl-baselines3-zoo (see :mod:`bench.algos.hyperparams`).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Mapping, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = ["HyperParams", "NetArch", "NormalizeSpec"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NetArch(_Strict):
    """Separate hidden layers for the policy (actor) and the value function (critic)."""

    pi: list[Annotated[int, Field(gt=0)]] = Field(description="Hidden layer widths of the policy network.")
    vf: list[Annotated[int, Field(gt=0)]] = Field(description="Hidden layer widths of the value network.")


class NormalizeSpec(_Strict):
    """Running normalisation of the training envs (SB3 ``VecNormalize``)."""

    obs: bool = Field(True, description="Normalise observations with running mean and std (``norm_obs``).")
    reward: bool = Field(True, description="Scale rewards by the running std of the discounted return (``norm_reward``).")


NetArchField = Union[list[Annotated[int, Field(gt=0)]], NetArch]
NormalizeField = Union[bool, NormalizeSpec]

_WIDTHS = TypeAdapter(list[Annotated[int, Field(gt=0)]])
_BOOL = TypeAdapter(bool)


def _net_arch_before(v: Any) -> Any:
    # Validate each form on its own so an error's loc is the field's own path,
    # e.g. ('net_arch', 'pi', 0), not one error per union branch.
    if v is None or isinstance(v, NetArch):
        return v
    if isinstance(v, Mapping):
        return NetArch.model_validate(dict(v))
    if isinstance(v, (list, tuple)):
        return _WIDTHS.validate_python(list(v))
    raise PydanticCustomError(
        "net_arch_type", "expected a list of layer widths like [64, 64] or {pi: [64, 64], vf: [64, 64]}"
    )


def _normalize_before(v: Any) -> Any:
    if isinstance(v, NormalizeSpec):
        return v
    if isinstance(v, Mapping):
        return NormalizeSpec.model_validate(dict(v))
    try:
        return _BOOL.validate_python(v)
    except ValidationError:
        raise PydanticCustomError(
            "normalize_type", "expected true, false or {obs: true|false, reward: true|false}"
        ) from None


#: How a value changes over training: constant, or linear decay to 0 (the zoo's ``lin_X``).
ScheduleKind = Literal["constant", "linear"]
EntSchedule = Literal["constant", "linear", "exponential"]


def _ent_schedule_field() -> Any:
    return Field(
        "constant",
        description=(
            "Schedule of ent_coef over training (impl bench only; SB3 has none): constant; linear, decay from "
            "ent_coef to 0 (as lr_schedule); exponential, ent_coef · exp(−ent_schedule_rate · progress), progress "
            "the fraction of the budget done (0 → 1)."
        ),
    )


def _ent_rate_field() -> Any:
    return Field(
        5.0, gt=0,
        description="exponential ent_schedule only: decay rate k; the bonus ends at ent_coef · e^(−k) (5: 0.67%).",
    )


def _use_sde_field() -> Any:
    return Field(
        False,
        description=(
            "Generalized State-Dependent Exploration (gSDE; Raffin et al. 2022, \"Smooth Exploration for Robotic "
            "Reinforcement Learning\", CoRL): the action noise is latent(s)·ε, the policy's last hidden layer times a "
            "matrix ε ~ N(0, σ²) held fixed between resamples, so exploration is a smooth function of the state; σ "
            "(one entry per hidden unit and action dimension, started at exp(log_std_init)) is learned. Continuous "
            "actions only; impl bench runs it on the torch path (kernel auto or torch)."
        ),
    )


def _sde_sample_freq_field() -> Any:
    return Field(
        -1, ge=-1,
        description="gSDE only: draw a new noise matrix ε every this many steps of a rollout; -1 (SB3's default) "
                    "or 0: once per rollout.",
    )


def _error(field: str, message: str, value: Any) -> ValidationError:
    """A ValidationError located at ``field`` (a model validator's own errors have an empty loc)."""
    return ValidationError.from_exception_data(
        "hyperparameters",
        [InitErrorDetails(type=PydanticCustomError("value_error", message), loc=(field,), input=value)],
    )


class _OnPolicyParams(_Strict):
    """Fields every on-policy algorithm shares. Defaults here are overridden per algorithm."""

    n_envs: int = Field(1, ge=1, description="Parallel training envs (stepped as vec_env says); one rollout is n_steps × n_envs transitions.")
    learning_rate: float = Field(3e-4, gt=0, description="Optimizer step size (for TRPO: of the value function only).")
    lr_schedule: ScheduleKind = Field(
        "constant",
        description="constant, or linear: decay from learning_rate to 0 over training (the zoo's lin_X).",
    )
    n_steps: int = Field(2048, gt=0, description="Steps per env per rollout (update).")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE λ: 1 is Monte-Carlo returns, 0 is one-step TD.")
    vf_coef: float = Field(0.5, ge=0, description="Weight of the value loss in the total loss.")
    normalize_advantage: bool = Field(True, description="Standardise advantages per (mini)batch.")
    net_arch: NetArchField | None = Field(
        None,
        description=(
            "Hidden layers: a list of widths shared by pi and vf, or {pi: [...], vf: [...]}. "
            "Unset means SB3's default: pi=[64, 64], vf=[64, 64] for vector observations; "
            "for pixels the Nature CNN feature extractor with linear heads."
        ),
    )
    activation: Literal["tanh", "relu"] = Field("tanh", description="Hidden activation (SB3 activation_fn: nn.Tanh / nn.ReLU).")
    ortho_init: bool = Field(True, description="Orthogonal weight initialisation (SB3 policy_kwargs ortho_init).")
    log_std_init: float = Field(0.0, description="Initial log std of the Gaussian policy (continuous actions only).")
    normalize: NormalizeField = Field(
        False,
        description="VecNormalize on the training envs: true (obs and reward), false, or {obs: bool, reward: bool}.",
    )
    device: Literal["cpu", "cuda", "auto"] = Field("cpu", description="Torch device for the networks.")
    vec_env: Literal["sync", "async", "vector", "envpool"] = Field(
        "sync",
        description="How the training envs are stepped (bench.envs.vector): sync, in-process one after another; "
                    "async, subprocesses; vector, the env's NumPy-vectorised implementation; envpool, envpool's. "
                    "Suites set it per env (envs[i].vec_env, defaults.vec_env), the same for every implementation.",
    )
    kernel: Literal["auto", "torch", "numpy"] = Field(
        "auto",
        description=(
            "impl bench only: how PPO and A2C compute acting and gradients. torch: autograd; numpy: the "
            "hand-written NumPy kernel (MLP policies on the CPU only; same loss, checked against autograd); "
            "auto: numpy where it applies, else torch."
        ),
    )
    grad_noise_chunks: int | None = Field(
        None,
        ge=2,
        description=(
            "impl bench only: after each update, split the batch into this many chunks and record "
            "grad/noise_ratio, the variance of the chunk gradients over their squared mean norm; null disables it."
        ),
    )

    #: A plugin's default search space for ``bench tune``: hyperparameter → dimension, in the suite's
    #: ``tune.space`` form (``{"learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}``;
    #: see :mod:`bench.suites.spaces`). Empty: a suite's ``tune.space`` must name what to search. Built-in
    #: algorithms leave it empty; their defaults are their ``AlgoSpec.space`` (:mod:`bench.algos.registry`).
    search_space: ClassVar[dict[str, Any]] = {}

    _check_net_arch = field_validator("net_arch", mode="before")(_net_arch_before)
    _check_normalize = field_validator("normalize", mode="before")(_normalize_before)

    @property
    def normalize_obs(self) -> bool:
        n = self.normalize
        return n.obs if isinstance(n, NormalizeSpec) else bool(n)

    @property
    def normalize_reward(self) -> bool:
        n = self.normalize
        return n.reward if isinstance(n, NormalizeSpec) else bool(n)

    def _check_rollout(self) -> None:
        rollout = self.n_steps * self.n_envs
        if self.normalize_advantage and rollout <= 1:
            raise _error(
                "n_steps",
                f"n_steps * n_envs must be greater than 1 when normalize_advantage is true "
                f"(n_steps={self.n_steps}, n_envs={self.n_envs}): the advantage std of one sample is undefined; "
                f"raise n_steps or n_envs, or set normalize_advantage: false",
                self.n_steps,
            )

    def _check_sde(self) -> None:
        use_sde, freq = getattr(self, "use_sde", False), getattr(self, "sde_sample_freq", -1)
        if freq not in (-1, 0) and not use_sde:
            raise _error("sde_sample_freq", "sde_sample_freq only applies with use_sde: true; set use_sde: true or "
                                            "leave sde_sample_freq out", freq)
        if use_sde and self.kernel == "numpy":
            raise _error("kernel", "gSDE (use_sde) runs on the torch path, the NumPy kernel has no state-dependent "
                                   "noise; allowed with use_sde: auto, torch", self.kernel)

    def _check_batch(self, batch_size: int) -> None:
        rollout = self.n_steps * self.n_envs
        if batch_size > rollout:
            raise _error(
                "batch_size",
                f"batch_size {batch_size} is greater than one rollout, n_steps * n_envs = "
                f"{self.n_steps} * {self.n_envs} = {rollout}; lower batch_size to at most {rollout} "
                f"(ideally a divisor of it) or raise n_steps or n_envs",
                batch_size,
            )


class _NaturalGradientParams(_OnPolicyParams):
    """Fields TRPO and NPG share: the natural-gradient step (conjugate gradient on Fisher-vector products) and the
    critic's own updates. Defaults: sb3-contrib 2.9 TRPO's, so one block configures both, and NPG against TRPO
    isolates the line search."""

    learning_rate: float = Field(
        1e-3, gt=0, description="Adam step size of the value function (the policy step is set by target_kl)."
    )
    n_steps: int = Field(2048, gt=0, description="Steps per env per rollout (update).")
    batch_size: int = Field(128, gt=0, description="Minibatch size of the value-function updates.")
    vf_coef: float = Field(
        0.5, ge=0,
        description="Unused (the critic has its own optimizer, as sb3-contrib's TRPO's); kept so blocks are shared.",
    )
    normalize_advantage: bool = Field(True, description="Standardise advantages over the rollout.")
    cg_max_steps: int = Field(15, gt=0, description="Conjugate-gradient iterations for the natural-gradient direction.")
    cg_damping: float = Field(0.1, ge=0, description="Damping added to the Fisher-vector product.")
    n_critic_updates: int = Field(10, gt=0, description="Value-function gradient passes over each rollout.")
    sub_sampling_factor: int = Field(
        1, ge=1, description="Use every k-th transition for the policy step (faster; 1 uses them all)."
    )
    use_sde: bool = _use_sde_field()
    sde_sample_freq: int = _sde_sample_freq_field()

    @model_validator(mode="after")
    def _consistent(self) -> _NaturalGradientParams:
        self._check_rollout()
        self._check_batch(self.batch_size)
        self._check_sde()
        return self


#: The public base of every algorithm's hyperparameters, built-in or plugin (``impl: python``): the
#: fields SB3 and rl-baselines3-zoo share (n_envs, n_steps, gamma, gae_lambda, normalize, net_arch,
#: activation, ...), validated the same way; unknown keys are refused. A plugin subclasses it and
#: adds its own fields with their defaults.
HyperParams = _OnPolicyParams
