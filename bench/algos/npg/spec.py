"""NPG (Kakade 2001): its typed hyperparameters and spec."""

from __future__ import annotations

from pydantic import Field

from bench.algos.param_types import _NaturalGradientParams
from bench.algos.spec import AlgoSpec, own, sb3_missing
from bench.algos.trpo.spec import SPACE_TRPO


class NPGParams(_NaturalGradientParams):
    """Natural policy gradient (Kakade 2001; Rajeswaran et al. 2017): TRPO's step without its line
    search; SB3 and sb3-contrib have none.

    Its fields are TRPO's less the line search's (:class:`~bench.algos.param_types._NaturalGradientParams`,
    sb3-contrib 2.9 TRPO's defaults: one block configures both); the normalised step size
    ``target_kl`` δ 0.01 is also mjrl's NPG default (``normalized_step_size``, the
    code of Rajeswaran et al. 2017).
    """

    target_kl: float = Field(
        0.01, gt=0,
        description="Normalised step size δ: every step is sqrt(2δ / xᵀFx)·x, whose quadratic-model KL is δ "
                    "(Rajeswaran et al. 2017, eq. 5); not checked, as there is no line search.",
    )


#: NPG shares TRPO's space: target_kl is its normalised step size.
SPEC = AlgoSpec("npg", NPGParams, {"bench": own("npg.npg")}, space=dict(SPACE_TRPO),
                missing=sb3_missing("Stable-Baselines3 and sb3-contrib have no NPG"))
