"""AC-TD, one-env A2C: run by A2C's module."""

from __future__ import annotations

from pydantic import Field

from bench.algos.a2c.spec import SPACE_A2C, A2CParams
from bench.algos.spec import AlgoSpec, own, sb3_missing


class ACTDParams(A2CParams):
    """Actor-critic with n-step TD targets (AC-TD): exactly A2C (``bench.algos.a2c.a2c``) with one env.

    One env steps ``n_steps`` times; each step's target bootstraps from V at the end of
    that stretch (n-step returns, ``gae_lambda`` 1); then one gradient step on those
    ``n_steps`` samples: Mnih et al. 2016, Algorithm S3, for a single actor, the seed
    texts' step between Monte-Carlo actor-critic (``ac_mc``) and A2C. Defaults: SB3's
    A2C's (n_steps 5, RMSprop lr 7e-4, γ 0.99, vf_coef 0.5, max_grad_norm 0.5);
    ``n_envs`` is fixed at 1 (with more envs it is ``a2c``). SB3 runs it as ``A2C``
    with ``n_envs=1``, but that is what ``algo: a2c`` with ``n_envs: 1`` measures.
    """

    n_envs: int = Field(1, ge=1, le=1, description="Fixed at 1: AC-TD is one actor (use algo a2c for more envs).")


#: A2C's module with one env. n_envs is not in A2C's space, so one-env A2C searches all of it.
SPEC = AlgoSpec("ac_td", ACTDParams, {"bench": own("a2c.a2c")}, space=dict(SPACE_A2C),
                missing=sb3_missing("ac_td is the project's name for one-env A2C; for SB3 use algo a2c with n_envs 1"))
