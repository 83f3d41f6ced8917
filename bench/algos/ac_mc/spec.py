"""AC-MC, REINFORCE with a learned value baseline: run by REINFORCE's module."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bench.algos.reinforce.spec import SPACE_REINFORCE, REINFORCEParams
from bench.algos.spec import AlgoSpec, own, sb3_missing


class ACMCParams(REINFORCEParams):
    """Actor-critic with Monte-Carlo targets (AC-MC): exactly REINFORCE with a learned
    state-value baseline (``bench.algos.reinforce.reinforce`` with ``baseline: value``), "REINFORCE
    with baseline", Sutton & Barto 2018 §13.4: the critic V(s) is fitted to the
    Monte-Carlo return G_t and used only as a baseline (no bootstrapping, except at
    time limits). Defaults: REINFORCE's; ``baseline`` is fixed at value.
    """

    baseline: Literal["value"] = Field("value", description="Fixed: the learned V(s) (use algo reinforce for none/mean).")


#: REINFORCE's module with ``baseline: value``; its space is REINFORCE's, less the baseline the name fixes.
SPEC = AlgoSpec("ac_mc", ACMCParams, {"bench": own("reinforce.reinforce")},
                space={k: v for k, v in SPACE_REINFORCE.items() if k != "baseline"},
                missing=sb3_missing("Stable-Baselines3 has no REINFORCE with a value baseline (ac_mc)"))
