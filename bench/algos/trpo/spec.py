"""TRPO (Schulman et al. 2015): its typed hyperparameters, zoo values, search space and spec."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from bench.algos.param_types import _NaturalGradientParams
from bench.algos.search import NET_MEDIUM, NET_SMALL, Dim
from bench.algos.spec import SB3_ADAPTER, AlgoSpec, own

# rl-baselines3-zoo's tuned values: carried over from DLR-RM/rl-baselines3-zoo, hyperparams/trpo.yml, numbers
# unchanged, translated into the fields of the params class below. Left out everywhere: `policy` (bench
# picks MlpPolicy / CnnPolicy from the observation kind), `n_timesteps` (the ZOO_TIMESTEPS table), and for
# Atari `env_wrapper: AtariWrapper` + `frame_stack: 4` (bench.envs.make_env already returns ALE ids
# preprocessed and 4-frame stacked). Version read: trpo.yml @ 13a3fe74510342bc368b09d459d8117e470ab620.
# Zoo keys with older version suffixes (LunarLander-v2, HalfCheetah-v4, ...) are
# mapped to the ids bench uses; each block names the zoo key it came from.


# trpo.yml `HalfCheetahBulletEnv-v0: &pybullet-defaults`, which `Ant-v4: &mujoco-defaults`
# and hence every MuJoCo entry below inherit.
_TRPO_MUJOCO: dict[str, Any] = {
    "normalize": True, "n_envs": 2, "batch_size": 128, "n_steps": 1024, "gamma": 0.99,
    "gae_lambda": 0.95, "sub_sampling_factor": 1, "cg_max_steps": 25, "cg_damping": 0.1,
    "n_critic_updates": 20, "learning_rate": 1e-3,
}


ZOO_TRPO: dict[str, dict[str, Any]] = {
    # trpo.yml has no `atari` entry: no TRPO values for ALE ids.
    # trpo.yml `CartPole-v1` (Tuned)
    "CartPole-v1": {
        "n_envs": 2, "n_steps": 512, "batch_size": 512, "cg_damping": 1e-3, "gae_lambda": 0.98,
        "gamma": 0.99, "learning_rate": 1e-3, "n_critic_updates": 20,
    },
    # trpo.yml `Pendulum-v1` (Tuned). Tuned WITH gSDE (use_sde: True,
    # sde_sample_freq: 4); kept without it, as the shipped reference ran it before bench had gSDE.
    "Pendulum-v1": {"n_envs": 2, "n_steps": 1024, "gamma": 0.9, "n_critic_updates": 15},
    # trpo.yml `LunarLander-v3` (Tuned)
    "LunarLander-v3": {
        "n_envs": 2, "n_steps": 512, "cg_damping": 0.01, "gae_lambda": 0.98, "gamma": 0.99,
        "learning_rate": 1e-3, "n_critic_updates": 15,
    },
    # trpo.yml `LunarLanderContinuous-v3` (Tuned)
    "LunarLanderContinuous-v3": {"normalize": True, "n_envs": 2, "n_steps": 1024, "n_critic_updates": 20},
    # trpo.yml `MountainCarContinuous-v0`, with gSDE
    "MountainCarContinuous-v0": {"normalize": True, "n_envs": 2, "use_sde": True, "sde_sample_freq": 4},
    # trpo.yml `MountainCar-v0` (Tuned)
    "MountainCar-v0": {"normalize": True, "n_envs": 2, "n_steps": 1024, "n_critic_updates": 20},
    # trpo.yml `HalfCheetah-v4` (Tuned): <<: *mujoco-defaults, target_kl: 0.04
    "HalfCheetah-v5": {**_TRPO_MUJOCO, "target_kl": 0.04},
    # trpo.yml `Hopper-v4` (Tuned): <<: *mujoco-defaults
    "Hopper-v5": dict(_TRPO_MUJOCO),
    # trpo.yml `Walker2d-v4` (Tuned): <<: *mujoco-defaults
    "Walker2d-v5": dict(_TRPO_MUJOCO),
    # trpo.yml `Humanoid-v4`: <<: *mujoco-defaults (not marked tuned)
    "Humanoid-v5": dict(_TRPO_MUJOCO),
    # trpo.yml `Ant-v3` (Tuned): &mujoco-defaults
    "Ant-v5": dict(_TRPO_MUJOCO),
    # trpo.yml `Swimmer-v3` (Tuned): <<: *mujoco-defaults, gamma 0.9999
    "Swimmer-v5": {**_TRPO_MUJOCO, "gamma": 0.9999},
    # trpo.yml `BipedalWalker-v3` (Tuned): <<: *mujoco-defaults
    "BipedalWalker-v3": dict(_TRPO_MUJOCO),
}


ZOO_TIMESTEPS_TRPO: dict[str, int] = {
    "CartPole-v1": 100_000,
    "Pendulum-v1": 100_000,
    "LunarLander-v3": 200_000,
    "LunarLanderContinuous-v3": 100_000,
    "MountainCar-v0": 100_000,
    "MountainCarContinuous-v0": 50_000,
    "HalfCheetah-v5": 1_000_000,  # HalfCheetah-v4
    "Hopper-v5": 1_000_000,  # Hopper-v4
    "Walker2d-v5": 1_000_000,  # Walker2d-v4
    "Humanoid-v5": 2_000_000,  # Humanoid-v4
    "Ant-v5": 1_000_000,  # Ant-v3
    "Swimmer-v5": 1_000_000,  # Swimmer-v3
    "BipedalWalker-v3": 1_000_000,
}


class TRPOParams(_NaturalGradientParams):
    """TRPO (natural gradient with a KL trust region): the fields it shares with NPG
    (:class:`~bench.algos.param_types._NaturalGradientParams`) and its backtracking line search. Defaults:
    sb3-contrib 2.9 TRPO's."""

    line_search_shrinking_factor: float = Field(
        0.8, gt=0, lt=1, description="Step-size reduction per backtracking line-search iteration."
    )
    line_search_max_iter: int = Field(10, gt=0, description="Backtracking line-search iterations before the step is rejected.")
    target_kl: float = Field(0.01, gt=0, description="Trust-region size δ: the maximum mean KL of one policy update.")
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
    late_defaults: ClassVar[dict[str, Any]] = {"kl_action_dims": "mean"}


# sample_trpo_params
SPACE_TRPO: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-5, 1.0, log=True),  # the critic's step size
    "n_steps": Dim("pow2", 8, 2048),
    "batch_size": Dim("pow2", 8, 512),  # clamped to one rollout
    "gamma": Dim("one_minus_log", 0.9, 0.9999),  # zoo: categorical 0.9..0.9999
    "gae_lambda": Dim("categorical", choices=(0.8, 0.9, 0.92, 0.95, 0.98, 0.99, 1.0)),
    "target_kl": Dim("float", 1e-3, 0.1, log=True),  # max-KL δ; zoo: categorical 0.001..0.1
    "n_critic_updates": Dim("categorical", choices=(5, 10, 20, 25, 30)),
    "cg_max_steps": Dim("categorical", choices=(5, 10, 20, 25, 30)),
    "cg_damping": Dim("float", 0.01, 0.5, log=True),  # zoo: commented out, categorical 0.01..0.5
    "net_arch": Dim("categorical", choices=(NET_SMALL, NET_MEDIUM)),
    "activation": Dim("categorical", choices=("tanh", "relu")),
}


def sb3_kwargs(p: TRPOParams, action_space: Any) -> dict[str, Any]:
    """sb3-contrib's TRPO's own constructor arguments, beside those every on-policy SB3 algorithm shares (:mod:`bench.algos.sb3`)."""
    # vf_coef has no counterpart in sb3-contrib's TRPO (separate critic updates).
    return dict(batch_size=p.batch_size, cg_max_steps=p.cg_max_steps, cg_damping=p.cg_damping,
                line_search_shrinking_factor=p.line_search_shrinking_factor,
                line_search_max_iter=p.line_search_max_iter, n_critic_updates=p.n_critic_updates,
                target_kl=p.target_kl, sub_sampling_factor=p.sub_sampling_factor)


# On pixels the critic gets a CNN of its own, as the own TRPO's has: fitting it trains features and never moves the
# policy (docs/parity.md).
SPEC = AlgoSpec("trpo", TRPOParams, {"bench": own("trpo.trpo"), "sb3": SB3_ADAPTER}, sb3_class="sb3_contrib:TRPO",
                zoo=ZOO_TRPO, zoo_timesteps=ZOO_TIMESTEPS_TRPO, space=SPACE_TRPO, sb3_kwargs=sb3_kwargs,
                sb3_separate_critic=True,
                sb3_fixed={"kl_action_dims": ("mean", "sb3-contrib's TRPO averages the KL over action dimensions")})
