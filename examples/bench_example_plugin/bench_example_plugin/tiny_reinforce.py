"""REINFORCE with a running-mean baseline, as a bench plugin, in one file.

Williams (1992): ascend  E[ Σ_t ∇ log π(a_t|s_t) (G_t − b) ], with G_t the discounted return from
step t and b a baseline; here b is an exponential running mean of the per-step returns of earlier
episodes (a constant baseline, Williams' "reinforcement comparison"). Discrete actions, one env, whole episodes.

The contract: ``train(env_id, params, *, seed, timesteps, recorder)``; ``params``'s annotation names
the typed hyperparameters (a subclass of ``bench.HyperParams``); the recorder is fed through the
env (bench's env factory wraps it) and told after each update.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from pydantic import Field

from bench import HyperParams, RecorderProtocol


class TinyParams(HyperParams):
    """The plugin's hyperparameters (the shared ones, such as gamma, come from bench.HyperParams)."""

    learning_rate: float = Field(1e-2, gt=0, description="Adam step size.")
    hidden: int = Field(32, ge=1, le=1024, description="Width of the one hidden layer.")
    baseline_decay: float = Field(0.9, ge=0, lt=1, description="Running-mean baseline: b ← decay·b + (1−decay)·mean_t G_t, per episode.")

    # What `bench tune` searches by default, in a suite's tune.space form (a suite can change it).
    search_space: ClassVar[dict] = {
        "learning_rate": {"type": "float", "low": 1e-3, "high": 1e-1, "log": True},
        "hidden": {"type": "pow2", "low": 8, "high": 128},
        "baseline_decay": {"type": "float", "low": 0.5, "high": 0.99},
    }


def train(env_id: str, params: TinyParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    from bench.envs import make_env

    torch.manual_seed(seed)
    env = make_env(env_id, recorder=recorder)  # counts steps and reports episodes to the recorder
    n_obs = int(np.prod(env.observation_space.shape))
    policy = torch.nn.Sequential(torch.nn.Linear(n_obs, params.hidden), torch.nn.Tanh(),
                                 torch.nn.Linear(params.hidden, int(env.action_space.n)))
    opt = torch.optim.Adam(policy.parameters(), lr=params.learning_rate)
    recorder.note_models(policy.parameters(), [opt])
    gen = torch.Generator().manual_seed(seed)
    baseline, steps = None, 0
    obs, _ = env.reset(seed=seed)
    while steps < timesteps:
        logps, rewards, done = [], [], False
        while not done and steps < timesteps:
            logits = policy(torch.as_tensor(obs, dtype=torch.float32).reshape(-1))
            dist = torch.distributions.Categorical(logits=logits)
            a = torch.multinomial(dist.probs, 1, generator=gen).squeeze()
            obs, r, term, trunc, _ = env.step(int(a))
            logps.append(dist.log_prob(a))
            rewards.append(float(r))
            steps += 1
            done = term or trunc
        if done:
            obs, _ = env.reset()
        g, returns = 0.0, []
        for r in reversed(rewards):  # G_t = r_t + γ G_{t+1}
            g = r + params.gamma * g
            returns.append(g)
        returns = torch.tensor(returns[::-1])
        b = float(returns.mean()) if baseline is None else baseline
        loss = -(torch.stack(logps) * (returns - b)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        baseline = float(returns.mean()) if baseline is None else \
            params.baseline_decay * baseline + (1 - params.baseline_decay) * float(returns.mean())
        recorder.diagnostics({"loss/policy": float(loss)}, step=steps)
        recorder.after_update()
    env.close()
