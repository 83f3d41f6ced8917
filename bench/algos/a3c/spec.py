"""A3C (Mnih et al. 2016, asynchronous): its typed hyperparameters, search space and spec."""

from __future__ import annotations

from pydantic import Field, model_validator

from bench.algos.a2c.spec import A2CParams
from bench.algos.param_types import _error
from bench.algos.search import NET_MEDIUM, NET_SMALL, Dim
from bench.algos.spec import AlgoSpec, own, sb3_missing


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


# No zoo sampler: sample_a2c_params' space (A3C is A2C's asynchronous form) with the worker count.
SPACE_A3C: dict[str, Dim] = {
    "learning_rate": Dim("float", 1e-5, 2e-3, log=True),
    "n_steps": Dim("pow2", 4, 256),
    "gamma": Dim("one_minus_log", 0.97, 0.9999),
    "ent_coef": Dim("float", 1e-8, 0.1, log=True),
    "max_grad_norm": Dim("float", 0.3, 2.0),
    "net_arch": Dim("categorical", choices=(NET_SMALL, NET_MEDIUM)),
}


SPEC = AlgoSpec("a3c", A3CParams, {"bench": own("a3c.a3c")}, space=SPACE_A3C,
                missing=sb3_missing("Stable-Baselines3 has no A3C"),
                vec_env_refused={"async": "A3C's workers are daemon processes, which cannot start async envs' "
                                          "subprocesses"})
