"""Entropy-bonus schedules (ent_schedule: constant | linear | exponential): values by hand,
what each algorithm records, and what SB3 is refused."""

from __future__ import annotations

import math

import pytest

from bench.algos import TRAIN
from bench.algos.loop import ent_coef_at
from bench.algos.hyperparams import resolve
from bench.storage.record import Recorder


@pytest.mark.parametrize("schedule, rate, want", [
    # progress_remaining 1 (start), 0.75, 0.5, 0 (end); ent_coef 0.01
    ("constant", 5.0, [0.01, 0.01, 0.01, 0.01]),
    ("linear", 5.0, [0.01, 0.0075, 0.005, 0.0]),
    # 0.01·e^(−5·done): done 0, 0.25, 0.5, 1 → e^0, e^−1.25 = 0.2865048, e^−2.5 = 0.0820850, e^−5 = 0.0067379
    ("exponential", 5.0, [0.01, 0.002865048, 0.000820850, 0.0000673795]),
    # rate ln 2 halves the bonus over the run: done 0.5 → 1/√2
    ("exponential", math.log(2), [0.01, 0.01 * 2 ** -0.25, 0.01 * 2 ** -0.5, 0.005]),
])
def test_schedule_values_by_hand(schedule, rate, want):
    p = resolve("ppo", "CartPole-v1", {"ent_coef": 0.01, "ent_schedule": schedule, "ent_schedule_rate": rate})
    got = [ent_coef_at(p, pr) for pr in (1.0, 0.75, 0.5, 0.0)]
    assert got == pytest.approx(want, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("algo, over, steps", [
    ("ppo", {"n_envs": 2, "n_steps": 64, "batch_size": 64, "n_epochs": 1}, 512),
    ("ppo", {"n_envs": 2, "n_steps": 64, "batch_size": 64, "n_epochs": 1, "kernel": "torch"}, 512),
    ("a2c", {"n_envs": 2}, 200),
    ("a2c", {"n_envs": 2, "kernel": "torch"}, 200),
    ("ac_td", {}, 100),
    ("reinforce", {"n_envs": 2, "n_steps": 50}, 600),
    ("ac_mc", {"n_envs": 2, "n_steps": 50}, 600),
])
def test_each_algorithm_with_an_entropy_term_follows_the_schedule(algo, over, steps):
    """The scheduled weight is recorded, and it is the one the loss uses: against a constant weight of the
    same start, the first update is the same and a later one is not."""
    def train(**extra):
        rec = Recorder()
        TRAIN[algo]("CartPole-v1", resolve(algo, "CartPole-v1", {**over, **extra}), seed=0, timesteps=steps,
                    recorder=rec)
        return rec

    rec = train(ent_coef=0.02, ent_schedule="linear")
    c = [v for _, k, v in rec.diag if k == "train/ent_coef"]
    assert len(c) >= 2 and c[0] == pytest.approx(0.02) and all(a > b for a, b in zip(c, c[1:])) and c[-1] > 0
    # constant (the default) records nothing extra and keeps the old behaviour
    const = train(ent_coef=0.02)
    assert not any(k == "train/ent_coef" for _, k, _ in const.diag)
    scheduled = [d for d in rec.diag if d[1] != "train/ent_coef"]
    first = min(u for u, _, _ in const.diag)
    assert [d for d in scheduled if d[0] == first] == [d for d in const.diag if d[0] == first]
    assert scheduled != const.diag, "the run trained as with a constant weight: the loss ignores the schedule"


def test_schedule_fields_are_validated():
    with pytest.raises(Exception, match="ent_schedule"):
        resolve("a2c", "CartPole-v1", {"ent_schedule": "cosine"})
    with pytest.raises(Exception, match="ent_schedule_rate"):
        resolve("a2c", "CartPole-v1", {"ent_schedule_rate": 0})
    with pytest.raises(Exception, match="ent_schedule"):  # no entropy term in NPG / TRPO
        resolve("npg", "CartPole-v1", {"ent_schedule": "linear"})
