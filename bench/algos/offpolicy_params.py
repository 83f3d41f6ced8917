"""Typed hyperparameters of the off-policy reference points: SB3's DQN, SAC and TD3 (``impl: sb3`` only).

They are not candidates for the project's answers, which are about on-policy algorithms (PPO, A2C,
TRPO, ...): ``bench recommend`` sets the best of them beside each profile's answer as an *off-policy
reference* line. Names, meanings and defaults are Stable-Baselines3 2.9's constructor arguments
(``stable_baselines3.DQN`` / ``SAC`` / ``TD3``), with the zoo's string idioms as structured fields, as
for the on-policy algorithms (:mod:`bench.algos.hyperparams`): ``learning_rate: lin_7.3e-4`` is
``learning_rate: 7.3e-4`` with ``lr_schedule: linear``; ``policy_kwargs: dict(net_arch=[400, 300])`` is
``net_arch: [400, 300]``; the zoo's ``noise_type`` / ``noise_std`` (TD3's action noise) are fields.

There is no rollout: an off-policy run acts ``train_freq`` steps per env, then takes ``gradient_steps``
gradient steps on minibatches from its replay buffer (``-1``: as many as it just collected), once
``learning_starts`` steps are in it. SB3's n-step returns (its off-policy ``n_steps``, default 1) are
left at one-step TD and not exposed, so that ``n_steps`` keeps its one meaning in a suite: steps per
env per on-policy rollout.

Not supported, on purpose: Atari and other pixel envs (replay buffers of frames do not fit the
2-core machines the reference runs on), SB3's ``optimize_memory_usage`` and custom replay buffers.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, Literal, Mapping, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from bench.algos.spec import SB3_ADAPTER, AlgoSpec, learns_within_budget, phase_minimum, vector_obs_only

__all__ = ["OFF_POLICY", "GRADIENT_STEP_US", "DQNParams", "SACParams", "TD3Params", "OFF_POLICY_PARAMS", "ZOO_OFF_POLICY",
           "ZOO_OFF_POLICY_TIMESTEPS", "ZOO_OFF_POLICY_SOURCE"]

#: The off-policy algorithms, each SB3's and nothing else (``impl: sb3``).
OFF_POLICY = ("dqn", "sac", "td3")


def _error(field: str, message: str, value: Any) -> ValidationError:
    return ValidationError.from_exception_data(
        "hyperparameters",
        [InitErrorDetails(type=PydanticCustomError("value_error", message), loc=(field,), input=value)],
    )


class _NormalizeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    obs: bool = True
    reward: bool = True


class _OffPolicyParams(BaseModel):
    """Fields DQN, SAC and TD3 share (SB3's ``OffPolicyAlgorithm``). Defaults are overridden per algorithm."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_envs: int = Field(1, ge=1, description="Parallel training envs; each of SB3's steps steps them all.")
    learning_rate: float = Field(3e-4, gt=0, description="Adam step size (every network).")
    lr_schedule: Literal["constant", "linear"] = Field(
        "constant", description="constant, or linear: decay from learning_rate to 0 over training (the zoo's lin_X).")
    buffer_size: int = Field(1_000_000, gt=0, description="Replay buffer capacity in transitions.")
    learning_starts: int = Field(100, ge=0, description="Env steps collected (random actions for SAC and TD3, "
                                                        "ε = 1 for DQN) before the first gradient step.")
    batch_size: int = Field(256, gt=0, description="Minibatch size of each gradient step.")
    tau: float = Field(0.005, gt=0, le=1, description="Polyak coefficient of the target networks (1: hard copy).")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor.")
    train_freq: int = Field(1, gt=0, description="Env steps per env between two training phases.")
    gradient_steps: int = Field(1, ge=-1, description="Gradient steps per training phase; -1: as many as the env "
                                                      "steps just collected.")
    net_arch: list[Annotated[int, Field(gt=0)]] | None = Field(
        None, description="Hidden layer widths of every network (actor, critics, Q-network); unset: SB3's default "
                          "([64, 64] for DQN, [256, 256] for SAC, [400, 300] for TD3).")
    activation: Literal["relu", "tanh"] = Field("relu", description="Hidden activation (SB3's off-policy default: ReLU).")
    normalize: Union[bool, _NormalizeSpec] = Field(
        False, description="VecNormalize on the training envs: true, false, or {obs: bool, reward: bool}. Off by "
                           "default, as in the zoo's entries for these algorithms (no continuous-control default).")
    device: Literal["cpu", "cuda", "auto"] = Field("cpu", description="Torch device for the networks.")
    vec_env: Literal["sync", "async", "vector", "envpool"] = Field(
        "sync", description="How the training envs are stepped; set per env in a suite (envs[i].vec_env).")

    @field_validator("normalize", mode="before")
    @classmethod
    def _normalize(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            return _NormalizeSpec.model_validate(dict(v))
        if isinstance(v, (bool, _NormalizeSpec)):
            return v
        raise PydanticCustomError("normalize_type", "expected true, false or {obs: true|false, reward: true|false}")

    @property
    def normalize_obs(self) -> bool:
        n = self.normalize
        return n.obs if isinstance(n, _NormalizeSpec) else bool(n)

    @property
    def normalize_reward(self) -> bool:
        n = self.normalize
        return n.reward if isinstance(n, _NormalizeSpec) else bool(n)


class DQNParams(_OffPolicyParams):
    """DQN (Mnih et al. 2015), discrete actions. Defaults: SB3 2.9 DQN's."""

    learning_rate: float = Field(1e-4, gt=0, description="Adam step size of the Q-network.")
    learning_starts: int = Field(100, ge=0, description="Env steps before the first gradient step.")
    batch_size: int = Field(32, gt=0, description="Minibatch size of each gradient step.")
    tau: float = Field(1.0, gt=0, le=1, description="Polyak coefficient of the target network (1: hard copy).")
    train_freq: int = Field(4, gt=0, description="Env steps per env between two training phases.")
    target_update_interval: int = Field(10_000, gt=0, description="Env steps between target-network updates.")
    exploration_fraction: float = Field(0.1, ge=0, le=1, description="Fraction of the budget over which ε decays.")
    exploration_initial_eps: float = Field(1.0, ge=0, le=1, description="ε of the ε-greedy policy at the start.")
    exploration_final_eps: float = Field(0.05, ge=0, le=1, description="ε after the decay.")
    max_grad_norm: float = Field(10.0, gt=0, description="Global gradient-norm clip.")


class SACParams(_OffPolicyParams):
    """SAC (Haarnoja et al. 2018), continuous actions. Defaults: SB3 2.9 SAC's."""

    ent_coef: Union[float, Literal["auto"]] = Field(
        "auto", description="Entropy coefficient α, or auto: learned towards the target entropy −dim(A).")
    target_update_interval: int = Field(1, gt=0, description="Gradient steps between target-network updates.")
    use_sde: bool = Field(False, description="gSDE exploration instead of independent Gaussian noise.")
    sde_sample_freq: int = Field(-1, ge=-1, description="gSDE only: steps between noise-matrix draws (-1: per rollout).")
    log_std_init: float = Field(-3.0, description="gSDE only: initial log std of the exploration noise.")

    @model_validator(mode="after")
    def _sde(self) -> SACParams:
        if self.sde_sample_freq not in (-1, 0) and not self.use_sde:
            raise _error("sde_sample_freq", "sde_sample_freq only applies with use_sde: true", self.sde_sample_freq)
        if isinstance(self.ent_coef, float) and self.ent_coef <= 0:
            raise _error("ent_coef", "ent_coef must be positive or auto", self.ent_coef)
        return self


class TD3Params(_OffPolicyParams):
    """TD3 (Fujimoto et al. 2018), continuous actions. Defaults: SB3 2.9 TD3's (no action noise unless
    ``noise_type`` says, as SB3's ``action_noise=None``; the zoo sets it for every env)."""

    learning_rate: float = Field(1e-3, gt=0, description="Adam step size of actor and critics.")
    policy_delay: int = Field(2, gt=0, description="Critic updates per actor (and target) update.")
    target_policy_noise: float = Field(0.2, ge=0, description="Std of the smoothing noise on target actions.")
    target_noise_clip: float = Field(0.5, ge=0, description="Clip of that smoothing noise.")
    noise_type: Literal["none", "normal", "ornstein-uhlenbeck"] = Field(
        "none", description="Exploration noise added to the actor's actions (the zoo's noise_type).")
    noise_std: float = Field(0.1, ge=0, description="Its std, per action dimension (the zoo's noise_std).")


OFF_POLICY_PARAMS: dict[str, type[BaseModel]] = {"dqn": DQNParams, "sac": SACParams, "td3": TD3Params}

#: CPU µs per gradient step, the most measured for each algorithm on the reference suite's envs and networks with one
#: torch thread (docs/reference.md#off-policy-reference-points): what a suite's cost estimate charges an off-policy
#: run per gradient step, since its time goes there rather than to the env (bench.suites.cost). It errs high for
#: smaller networks and batches.
GRADIENT_STEP_US: dict[str, float] = {"dqn": 4_100.0, "sac": 28_500.0, "td3": 18_000.0}


# --------------------------------------------------------------------------- #
# rl-baselines3-zoo tuned values
# --------------------------------------------------------------------------- #
# Carried over from DLR-RM/rl-baselines3-zoo, hyperparams/{dqn,sac,td3}.yml at commit
# eec15dc22e1ec7167064aae0c1218eefccaf0ff4 (the last to change them before 22e3ff24, read 2026-11-27),
# numbers unchanged, in the fields above. Left out everywhere: `policy` (MlpPolicy), `n_timesteps`
# (ZOO_OFF_POLICY_TIMESTEPS). The MuJoCo entries are the zoo's -v4 ones, used for -v5.
ZOO_OFF_POLICY_SOURCE = ("DLR-RM/rl-baselines3-zoo hyperparams/{dqn,sac,td3}.yml @ "
                         "eec15dc22e1ec7167064aae0c1218eefccaf0ff4")

_ZOO_DQN: dict[str, dict[str, Any]] = {
    # dqn.yml `CartPole-v1` ("Almost Tuned")
    "CartPole-v1": {
        "learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000, "learning_starts": 1000, "gamma": 0.99,
        "target_update_interval": 10, "train_freq": 256, "gradient_steps": 128, "exploration_fraction": 0.16,
        "exploration_final_eps": 0.04, "net_arch": [256, 256],
    },
    # dqn.yml `MountainCar-v0` (Tuned)
    "MountainCar-v0": {
        "learning_rate": 4e-3, "batch_size": 128, "buffer_size": 10_000, "learning_starts": 1000, "gamma": 0.98,
        "target_update_interval": 600, "train_freq": 16, "gradient_steps": 8, "exploration_fraction": 0.2,
        "exploration_final_eps": 0.07, "net_arch": [256, 256],
    },
    # dqn.yml `LunarLander-v3` (Tuned)
    "LunarLander-v3": {
        "learning_rate": 6.3e-4, "batch_size": 128, "buffer_size": 50_000, "learning_starts": 0, "gamma": 0.99,
        "target_update_interval": 250, "train_freq": 4, "gradient_steps": -1, "exploration_fraction": 0.12,
        "exploration_final_eps": 0.1, "net_arch": [256, 256],
    },
}

_ZOO_SAC: dict[str, dict[str, Any]] = {
    # sac.yml `MountainCarContinuous-v0` (Tuned), with gSDE; policy_kwargs log_std_init=-3.67, net_arch=[64, 64]
    "MountainCarContinuous-v0": {
        "learning_rate": 3e-4, "buffer_size": 50_000, "batch_size": 512, "ent_coef": 0.1, "train_freq": 32,
        "gradient_steps": 32, "gamma": 0.9999, "tau": 0.01, "learning_starts": 0, "use_sde": True,
        "log_std_init": -3.67, "net_arch": [64, 64],
    },
    # sac.yml `Pendulum-v1`
    "Pendulum-v1": {"learning_rate": 1e-3},
    # sac.yml `LunarLanderContinuous-v3`: learning_rate lin_7.3e-4, policy_kwargs net_arch=[400, 300]
    "LunarLanderContinuous-v3": {
        "batch_size": 256, "learning_rate": 7.3e-4, "lr_schedule": "linear", "buffer_size": 1_000_000,
        "ent_coef": "auto", "gamma": 0.99, "tau": 0.01, "train_freq": 1, "gradient_steps": 1,
        "learning_starts": 10_000, "net_arch": [400, 300],
    },
    # sac.yml `HalfCheetah-v4` (&mujoco-defaults)
    "HalfCheetah-v5": {"learning_starts": 10_000},
}

_ZOO_TD3: dict[str, dict[str, Any]] = {
    # td3.yml `MountainCarContinuous-v0` (Tuned); policy_kwargs net_arch=[400, 300]
    "MountainCarContinuous-v0": {
        "noise_type": "ornstein-uhlenbeck", "noise_std": 0.5, "gradient_steps": 1, "train_freq": 1,
        "learning_rate": 1e-3, "batch_size": 256, "net_arch": [400, 300],
    },
    # td3.yml `Pendulum-v1`; policy_kwargs net_arch=[400, 300]
    "Pendulum-v1": {
        "gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, "noise_type": "normal", "noise_std": 0.1,
        "gradient_steps": 1, "train_freq": 1, "learning_rate": 1e-3, "net_arch": [400, 300],
    },
    # td3.yml `LunarLanderContinuous-v3`; policy_kwargs net_arch=[400, 300]
    "LunarLanderContinuous-v3": {
        "gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, "noise_type": "normal", "noise_std": 0.1,
        "gradient_steps": 1, "train_freq": 1, "learning_rate": 1e-3, "net_arch": [400, 300],
    },
    # td3.yml `HalfCheetah-v4` (&mujoco-defaults); policy_kwargs net_arch=[400, 300]
    "HalfCheetah-v5": {
        "learning_starts": 10_000, "noise_type": "normal", "noise_std": 0.1, "train_freq": 1, "gradient_steps": 1,
        "learning_rate": 1e-3, "batch_size": 256, "net_arch": [400, 300],
    },
}

#: algo → bench env id → the zoo's tuned values, as fields of :data:`OFF_POLICY_PARAMS` ``[algo]``.
ZOO_OFF_POLICY: dict[str, dict[str, dict[str, Any]]] = {"dqn": _ZOO_DQN, "sac": _ZOO_SAC, "td3": _ZOO_TD3}

#: algo → bench env id → the zoo's ``n_timesteps`` for that entry.
ZOO_OFF_POLICY_TIMESTEPS: dict[str, dict[str, int]] = {
    "dqn": {"CartPole-v1": 50_000, "MountainCar-v0": 120_000, "LunarLander-v3": 100_000},
    "sac": {"MountainCarContinuous-v0": 50_000, "Pendulum-v1": 20_000, "LunarLanderContinuous-v3": 500_000,
            "HalfCheetah-v5": 1_000_000},
    "td3": {"MountainCarContinuous-v0": 300_000, "Pendulum-v1": 20_000, "LunarLanderContinuous-v3": 300_000,
            "HalfCheetah-v5": 1_000_000},
}


_OFF_MISSING = "bench has no {} of its own: off-policy algorithms are SB3's reference points"


def off_policy_spec(name: str, params: type[BaseModel], action: str,
                    sb3_kwargs: Callable[[Any, Any], dict[str, Any]]) -> AlgoSpec:
    """The spec of an off-policy reference point: SB3's only, in the one action space SB3 has it for (DQN is
    discrete-only, SAC and TD3 continuous-only), checked per training phase rather than per rollout."""
    return AlgoSpec(name, params, {"sb3": SB3_ADAPTER}, sb3_class=f"stable_baselines3:{name.upper()}", policy="off",
                    actions=(action,), zoo=ZOO_OFF_POLICY[name], zoo_timesteps=ZOO_OFF_POLICY_TIMESTEPS[name],
                    checks=(phase_minimum, vector_obs_only, learns_within_budget),
                    missing={i: _OFF_MISSING.format(name.upper()) for i in ("bench", "numpy")}, sb3_kwargs=sb3_kwargs)
