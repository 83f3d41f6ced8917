"""A2C (Mnih et al. 2016, synchronous): its typed hyperparameters, zoo values, search space and spec."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from bench.algos.param_types import (
    EntSchedule,
    _ent_rate_field,
    _ent_schedule_field,
    _OnPolicyParams,
    _sde_sample_freq_field,
    _use_sde_field,
)
from bench.algos.search import NET_MEDIUM, NET_SMALL, Dim
from bench.algos.spec import SB3_ADAPTER, AlgoSpec, own

# rl-baselines3-zoo's tuned values: carried over from DLR-RM/rl-baselines3-zoo, hyperparams/a2c.yml, numbers
# unchanged, translated into the fields of the params class below. Left out everywhere: `policy` (bench
# picks MlpPolicy / CnnPolicy from the observation kind), `n_timesteps` (the ZOO_TIMESTEPS table), and for
# Atari `env_wrapper: AtariWrapper` + `frame_stack: 4` (bench.envs.make_env already returns ALE ids
# preprocessed and 4-frame stacked). Version read: a2c.yml @ c6c209e7d487635f0b835fb916ec4468142b28ff.
# Zoo keys with older version suffixes (LunarLander-v2, HalfCheetah-v4, ...) are
# mapped to the ids bench uses; each block names the zoo key it came from.


ZOO_A2C: dict[str, dict[str, Any]] = {
    # a2c.yml `atari`. The zoo also sets policy_kwargs optimizer_class=RMSpropTFLike,
    # optimizer_kwargs=dict(eps=1e-5): custom optimizers are not supported, so this is
    # SB3's torch RMSprop with the same eps (TF-style RMSprop differs in where eps enters).
    "ALE/Breakout-v5": {"n_envs": 16, "ent_coef": 0.01, "vf_coef": 0.25, "rms_prop_eps": 1e-5},
    # a2c.yml `atari` (as above)
    "ALE/Pong-v5": {"n_envs": 16, "ent_coef": 0.01, "vf_coef": 0.25, "rms_prop_eps": 1e-5},
    # a2c.yml `CartPole-v1`
    "CartPole-v1": {"n_envs": 8, "ent_coef": 0.0},
    # a2c.yml `LunarLander-v2`
    "LunarLander-v3": {
        "n_envs": 8, "gamma": 0.995, "n_steps": 5,
        "learning_rate": 0.00083, "lr_schedule": "linear", "ent_coef": 0.00001,
    },
    # a2c.yml `MountainCar-v0`
    "MountainCar-v0": {"normalize": True, "n_envs": 16, "ent_coef": 0.0},
    # a2c.yml `MountainCarContinuous-v0`, with gSDE; policy_kwargs: log_std_init=0.0, ortho_init=False
    "MountainCarContinuous-v0": {
        "normalize": True, "n_envs": 4, "n_steps": 100, "ent_coef": 0.0, "use_sde": True, "sde_sample_freq": 16,
        "log_std_init": 0.0, "ortho_init": False,
    },
    # a2c.yml `Pendulum-v1` (Tuned). Tuned WITH gSDE (use_sde: True); kept without it, as the shipped
    # reference ran it before bench had gSDE.
    # policy_kwargs: log_std_init=-2, ortho_init=False
    "Pendulum-v1": {
        "normalize": True, "n_envs": 8, "ent_coef": 0.0, "max_grad_norm": 0.5, "n_steps": 8,
        "gae_lambda": 0.9, "vf_coef": 0.4, "gamma": 0.9, "use_rms_prop": True,
        "normalize_advantage": False, "learning_rate": 7e-4, "lr_schedule": "linear",
        "log_std_init": -2.0, "ortho_init": False,
    },
    # a2c.yml `LunarLanderContinuous-v3` (Tuned). Tuned WITH gSDE (use_sde: True); kept without
    # it, as the shipped reference ran it before bench had gSDE. policy_kwargs: log_std_init=-2, ortho_init=False
    "LunarLanderContinuous-v3": {
        "normalize": True, "n_envs": 4, "ent_coef": 0.0, "max_grad_norm": 0.5, "n_steps": 8,
        "gae_lambda": 0.9, "vf_coef": 0.4, "gamma": 0.99, "use_rms_prop": True,
        "normalize_advantage": False, "learning_rate": 7e-4, "lr_schedule": "linear",
        "log_std_init": -2.0, "ortho_init": False,
    },
    # a2c.yml `HalfCheetah-v4` (&mujoco-defaults: only normalize, n_timesteps, policy)
    "HalfCheetah-v5": {"normalize": True},
    # a2c.yml `Hopper-v4` (<<: *mujoco-defaults)
    "Hopper-v5": {"normalize": True},
    # a2c.yml `Walker2d-v4` (<<: *mujoco-defaults)
    "Walker2d-v5": {"normalize": True},
    # a2c.yml `Humanoid-v4` (<<: *mujoco-defaults)
    "Humanoid-v5": {"normalize": True},
    # a2c.yml `Ant-v4` (<<: *mujoco-defaults)
    "Ant-v5": {"normalize": True},
    # a2c.yml `Swimmer-v4` (<<: *mujoco-defaults)
    "Swimmer-v5": {"normalize": True, "gamma": 0.9999},
    # a2c.yml `BipedalWalker-v3` (Tuned), with gSDE; policy_kwargs: log_std_init=-2, ortho_init=False
    "BipedalWalker-v3": {
        "normalize": True, "n_envs": 16, "ent_coef": 0.0, "max_grad_norm": 0.5, "n_steps": 8,
        "gae_lambda": 0.9, "vf_coef": 0.4, "gamma": 0.99, "use_rms_prop": True,
        "normalize_advantage": False, "learning_rate": 0.00096, "lr_schedule": "linear", "use_sde": True,
        "log_std_init": -2.0, "ortho_init": False,
    },
}


ZOO_TIMESTEPS_A2C: dict[str, int] = {
    "ALE/Breakout-v5": 10_000_000,  # atari
    "ALE/Pong-v5": 10_000_000,  # atari
    "CartPole-v1": 500_000,
    "LunarLander-v3": 200_000,  # LunarLander-v2
    "MountainCar-v0": 1_000_000,
    "MountainCarContinuous-v0": 100_000,
    "Pendulum-v1": 1_000_000,
    "LunarLanderContinuous-v3": 5_000_000,
    "HalfCheetah-v5": 1_000_000,  # HalfCheetah-v4
    "Hopper-v5": 1_000_000,  # Hopper-v4
    "Walker2d-v5": 1_000_000,  # Walker2d-v4
    "Humanoid-v5": 2_000_000,  # Humanoid-v4
    "Ant-v5": 1_000_000,  # Ant-v4
    "Swimmer-v5": 1_000_000,  # Swimmer-v4
    "BipedalWalker-v3": 5_000_000,
}


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


# sample_a2c_params
SPACE_A2C: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-5, 2e-3, log=True),
    "n_steps": Dim("pow2", 32, 2048),
    "gamma": Dim("one_minus_log", 0.97, 0.9999),
    "gae_lambda": Dim("one_minus_log", 0.9, 0.9999),
    "ent_coef": Dim("float", 1e-8, 0.1, log=True),
    "max_grad_norm": Dim("float", 0.3, 2.0),
    "net_arch": Dim("categorical", choices=(NET_SMALL, NET_MEDIUM)),
    "activation": Dim("categorical", choices=("tanh", "relu")),
}


def sb3_kwargs(p: A2CParams, action_space: Any) -> dict[str, Any]:
    """A2C's own constructor arguments, beside those every on-policy SB3 algorithm shares (:mod:`bench.algos.sb3`)."""
    return dict(ent_coef=p.ent_coef, vf_coef=p.vf_coef, max_grad_norm=p.max_grad_norm, use_rms_prop=p.use_rms_prop,
                rms_prop_eps=p.rms_prop_eps)


SPEC = AlgoSpec("a2c", A2CParams, {"bench": own("a2c.a2c"), "sb3": SB3_ADAPTER}, sb3_class="stable_baselines3:A2C",
                zoo=ZOO_A2C, zoo_timesteps=ZOO_TIMESTEPS_A2C, space=SPACE_A2C, sb3_kwargs=sb3_kwargs)
