"""The ladder's named rungs: ac_mc (REINFORCE with a value baseline) and ac_td (A2C with one env)
run their modules' code with their own defaults, and an AC-TD learning bar."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from bench.algos import MODULES, TRAIN
from bench.algos.hyperparams import PARAMS, resolve
from bench.stats.metrics import first_crossing
from bench.storage.record import Recorder


def _run(algo: str, env_id: str, steps: int, seed: int = 0, recorder=None, **over) -> Recorder:
    rec = recorder or Recorder()
    TRAIN[algo](env_id, resolve(algo, env_id, over), seed=seed, timesteps=steps, recorder=rec)
    return rec


def test_names_map_to_the_modules_that_run_them():
    assert MODULES["ac_td"] == "a2c" and MODULES["ac_mc"] == "reinforce"
    td, mc = resolve("ac_td", "CartPole-v1"), resolve("ac_mc", "CartPole-v1")
    assert td.n_envs == 1 and td.n_steps == 5 and td.gae_lambda == 1.0 and td.use_rms_prop
    assert mc.baseline == "value"
    # Everything else is the parent algorithm's default.
    a2c = PARAMS["a2c"]().model_dump()
    assert {k: v for k, v in td.model_dump().items() if k != "n_envs"} == {k: v for k, v in a2c.items() if k != "n_envs"}
    assert mc.model_dump() == PARAMS["reinforce"]().model_dump()


def test_names_fix_what_makes_them_what_they_are():
    with pytest.raises(ValidationError, match="n_envs"):
        resolve("ac_td", "CartPole-v1", {"n_envs": 8})
    with pytest.raises(ValidationError, match="baseline"):
        resolve("ac_mc", "CartPole-v1", {"baseline": "none"})


def test_ac_td_is_one_env_a2c_and_ac_mc_is_value_baseline_reinforce():
    """Same seed, same returns and diagnostics: the names run the same update code."""
    td = _run("ac_td", "CartPole-v1", 2000, seed=3)
    a2c = _run("a2c", "CartPole-v1", 2000, seed=3, n_envs=1)
    assert td.ep_return == a2c.ep_return and td.diag == a2c.diag and len(td.ep_return) > 10
    mc = _run("ac_mc", "CartPole-v1", 2000, seed=3, n_envs=2, n_steps=100)
    rf = _run("reinforce", "CartPole-v1", 2000, seed=3, n_envs=2, n_steps=100, baseline="value")
    assert mc.ep_return == rf.ep_return and mc.diag == rf.diag and len(mc.ep_return) > 10


def test_rloo_is_one_epoch_grpo_with_the_leave_one_out_advantage():
    """``rloo`` names GRPO's module at advantage rloo and one epoch: same seed, same returns."""
    assert MODULES["rloo"] == "grpo"
    r = resolve("rloo", "CartPole-v1")
    assert r.advantage == "rloo" and r.n_epochs == 1
    g = PARAMS["grpo"]().model_dump()
    assert {k: v for k, v in r.model_dump().items() if k not in ("advantage", "n_epochs")} == \
        {k: v for k, v in g.items() if k not in ("advantage", "n_epochs")}
    with pytest.raises(ValidationError, match="advantage"):
        resolve("rloo", "CartPole-v1", {"advantage": "outcome"})  # that is GRPO
    rl = _run("rloo", "CartPole-v1", 1500, seed=2)
    gr = _run("grpo", "CartPole-v1", 1500, seed=2, advantage="rloo", n_epochs=1)
    assert rl.ep_return == gr.ep_return and rl.diag == gr.diag and len(rl.ep_return) > 10


class _Solved(Exception):
    pass


class _StopWhenSolved(Recorder):
    """Ends a run once the 20-episode trailing mean reaches the threshold."""

    def __init__(self, threshold: float):
        super().__init__()
        self.threshold = threshold

    def after_update(self, policy=None):
        super().after_update(policy)
        if first_crossing(np.asarray(self.ep_return), self.threshold, 20) is not None:
            raise _Solved


@pytest.mark.learning
def test_ac_td_cartpole_bar_five_seeds(learning_record):
    """Learning bar (issue 15): AC-TD 475 within 500k steps on at least 3 of 5 seeds, SB3's A2C defaults."""
    hits = []
    for seed in range(5):
        rec = _StopWhenSolved(475.0)
        try:
            _run("ac_td", "CartPole-v1", 500_000, seed=seed, recorder=rec)
        except _Solved:
            pass
        i = first_crossing(np.asarray(rec.ep_return), 475.0, 20)
        hits.append(None if i is None else int(rec.ep_step[i]))
    ok = sum(h is not None for h in hits) >= 3
    learning_record(bar="AC-TD (one-env A2C, SB3's A2C defaults: n_steps 5, RMSprop lr 7e-4) CartPole-v1: 475 within "
                        "500k steps on >= 3/5 seeds (steps-to-475 per seed)", values=hits, passed=ok)
    assert ok, hits
