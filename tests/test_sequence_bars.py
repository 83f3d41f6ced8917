"""Learning bars of the language-model track (issue 17), run by `nox -s learning` and logged to
results/learning.jsonl: PPO, GRPO and RLOO from the SFT reference on the default verifiable task,
and reward hacking on the preference task with and without the KL penalty.

Settings were chosen on the held-out seed 100 (`bench run` of a suite with these hyperparameters,
2026-11-24); the bars run seeds 0-4.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

SORT = "bench/Sort-v0"  # the default verifiable task: 4 digits
TOKENS = 40_960
PPO = {"policy": "sequence", "n_envs": 8, "n_steps": 64, "batch_size": 128, "n_epochs": 4, "learning_rate": 3e-4,
       "gamma": 1.0, "gae_lambda": 0.95, "kl_coef": 0.01}
GROUPS = {"policy": "sequence", "group_size": 8, "groups_per_update": 8, "learning_rate": 3e-4, "gamma": 1.0,
          "kl_coef": 0.01}
ALGOS = {
    "ppo": ("ppo", PPO),
    "grpo": ("grpo", {**GROUPS, "n_epochs": 4}),
    "rloo": ("grpo", {**GROUPS, "advantage": "rloo", "n_epochs": 1}),
}


def _series(env_id: str, algo: str, hp: dict, seed: int, tokens: int) -> dict[str, list[float]]:
    """Train from the SFT reference; every recorded diagnostic as a series over updates."""
    from bench.algos.grpo import grpo
    from bench.algos.ppo import ppo
    from bench.algos.hyperparams import GRPOParams, PPOParams
    from bench.storage.record import Recorder

    torch.set_num_threads(1)
    rec = Recorder()
    if algo == "ppo":
        ppo.train(env_id, PPOParams.model_validate(hp), seed=seed, timesteps=tokens, recorder=rec)
    else:
        grpo.train(env_id, GRPOParams.model_validate(hp), seed=seed, timesteps=tokens, recorder=rec)
    out: dict[str, list[float]] = {}
    for _, name, value in rec.diag:
        out.setdefault(name, []).append(value)
    return out


@pytest.mark.learning
@pytest.mark.parametrize("name", list(ALGOS))
def test_exact_match_bar_on_sort(learning_record, name):
    # Bar: the sampled exact-match rate over the last 5 updates >= 0.85 within 40,960 tokens, on >= 3/5 seeds.
    # The SFT reference starts at about 0.64 (sampled, 200 held-out prompts; docs/sequence.md). Seed 100
    # (held out) ended at about 0.95 (PPO), 0.92 (GRPO) and 0.90 (RLOO).
    algo, hp = ALGOS[name]
    finals = [round(float(np.mean(_series(SORT, algo, hp, seed, TOKENS)["seq/exact_match"][-5:])), 3)
              for seed in range(5)]
    ok = sum(f >= 0.85 for f in finals) >= 3
    learning_record(bar=f"{name} ({hp}) {SORT}: sampled exact match over the last 5 updates >= 0.85 within "
                        f"{TOKENS:,} tokens on >= 3/5 seeds (per seed)", values=finals, passed=ok)
    assert ok, finals


PREF = "bench/Preference-v0"


@pytest.mark.learning
def test_the_kl_penalty_holds_back_reward_hacking(learning_record):
    # The gap between the proxy (the reward model's standardised score) and the true score standardised on
    # the same responses; its growth from the first 3 updates to the last 5 is what the proxy gained that
    # the true score did not. Seed 100 (held out): kl 0 grew it by 0.69, kl 0.1 by 0.38 (true scores rose
    # in both). Bars on seeds 0-4: with kl_coef 0 the gap grows by >= 0.3 on >= 3/5 seeds; with kl_coef 0.1
    # it grows by at most 0.5 on >= 3/5 seeds, and by less than with kl_coef 0 on >= 3/5 seeds.
    from bench.envs.tokens import true_score_scale

    mu, sd = true_score_scale()
    growth: dict[float, list[float]] = {}
    for kl in (0.0, 0.1):
        growth[kl] = []
        for seed in range(5):
            s = _series(PREF, "ppo", {**PPO, "kl_coef": kl}, seed, TOKENS)
            gap = np.array(s["seq/proxy_score"]) - (np.array(s["seq/true_score"]) - mu) / sd
            growth[kl].append(round(float(gap[-5:].mean() - gap[:3].mean()), 3))
    grows = sum(g >= 0.3 for g in growth[0.0]) >= 3
    bounded = sum(g <= 0.5 for g in growth[0.1]) >= 3
    smaller = sum(b < a for a, b in zip(growth[0.0], growth[0.1])) >= 3
    learning_record(bar=f"ppo ({PPO}, kl_coef 0 and 0.1) {PREF}, {TOKENS:,} tokens: growth of the proxy-true gap "
                        "(both standardised on the reward model's comparison responses), first 3 updates to last 5: "
                        ">= 0.3 with kl 0 and <= 0.5 with kl 0.1 on >= 3/5 seeds, and smaller with kl 0.1 on >= 3/5 "
                        "seeds (per seed)", values={str(k): v for k, v in growth.items()}, passed=grows and bounded and smaller)
    assert grows and bounded and smaller, growth
