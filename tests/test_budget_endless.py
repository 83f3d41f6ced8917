"""Every algorithm × implementation ends within one rollout of its step budget on an env whose episodes never
end (issue 44): the Monte-Carlo ones (REINFORCE, AC-MC, GRPO, RLOO) used to finish every episode they started,
so they ran for ever (14M steps after 10 minutes on a 2,000-step budget)."""

from __future__ import annotations

import pytest

import endless_env  # noqa: F401 - registers Endless-v0

from bench.algos.hyperparams import PARAMS
from bench.algos.offpolicy_params import OFF_POLICY
from bench.storage.record import Recorder
from bench.suites.suite import AVAILABLE

ENV = "endless_env:Endless-v0"
BUDGET = 2_000
#: Small rollouts, so a test costs seconds; the Monte-Carlo algorithms keep their defaults (one episode per env).
SMALL = {"n_steps": 32, "n_envs": 2, "batch_size": 32, "group_size": 2, "groups_per_update": 2}
#: The on-policy ones. SB3's off-policy reference points (DQN, SAC, TD3) are SB3's own loop, which counts
#: every env step against ``total_timesteps`` and has no episode-long rollout to run past it.
COMBOS = [(algo, impl) for algo, impls in AVAILABLE.items() for impl in impls if algo not in OFF_POLICY]
#: The algorithms that ran for ever before the fix (they update on whole episodes); the others end by rollouts and
#: are checked in the heavy tier (`nox -s heavy`), where A3C's and SB3's start-up cost does not count against CI.
EPISODIC = {"reinforce", "ac_mc", "grpo", "rloo"}


class Watchdog(Recorder):
    """A recorder that fails the test rather than let a run that does not stop run for ever."""

    def __setattr__(self, name, value):
        if name == "steps" and value > 20 * BUDGET:
            raise AssertionError(f"{value} steps on a {BUDGET}-step budget: the run does not stop")
        super().__setattr__(name, value)


def _params(algo: str):
    model = PARAMS[algo]
    fields = model.model_fields
    hp = {k: v for k, v in SMALL.items() if k in fields and not (algo in ("reinforce", "ac_mc") and k == "n_steps")}
    if "n_envs" in fields and fields["n_envs"].metadata and any(getattr(m, "le", None) == 1 for m in fields["n_envs"].metadata):
        hp.pop("n_envs")  # fixed at one env (ac_td, grpo)
    return model.model_validate(hp)


def _rollout(algo: str, p) -> int:
    if algo in ("grpo", "rloo"):
        return p.groups_per_update * p.group_size
    return p.n_steps * getattr(p, "n_envs", 1)


def test_the_combinations_are_every_algorithm_and_implementation():
    """Read from the registry: an algorithm added there is checked here without an edit."""
    from bench.algos.registry import ALGOS, names

    assert {a for a, _ in COMBOS} == set(names("on"))
    assert len(COMBOS) == sum(len(ALGOS[a].impls) for a in names("on"))
    assert ("reinforce", "numpy") in COMBOS and ("ppo", "sb3") in COMBOS


@pytest.mark.timeout(300)
@pytest.mark.parametrize("algo, impl", [c if c[0] in EPISODIC else pytest.param(*c, marks=pytest.mark.heavy)
                                        for c in COMBOS])
def test_an_endless_episode_ends_within_one_rollout_of_the_budget(algo, impl):
    p = _params(algo)
    rec = Watchdog()
    if impl == "sb3":
        from bench.algos.sb3 import train_sb3

        train_sb3(ENV, algo, p, seed=0, timesteps=BUDGET, recorder=rec)
    else:
        from bench.algos import TRAIN, TRAIN_NUMPY

        (TRAIN_NUMPY if impl == "numpy" else TRAIN)[algo](ENV, p, seed=0, timesteps=BUDGET, recorder=rec)
    assert BUDGET <= rec.steps <= BUDGET + _rollout(algo, p), rec.steps
    assert rec.ep_return == []  # no episode ever ended
