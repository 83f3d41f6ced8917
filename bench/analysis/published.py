"""Published returns to check the reference results against (issue 13, "published-number check").

The numbers are rl-baselines3-zoo's ``benchmark.md`` (DLR-RM/rl-baselines3-zoo, commit 0088472b):
each is the mean and standard deviation of the episode returns of **one** trained agent, evaluated
after ``n_timesteps`` of training with the deterministic policy (stochastic on Atari), over about
150k evaluation steps. The zoo trained on older env versions (``-v3`` MuJoCo, ``LunarLander-v2``);
the dynamics of the ``-v5``/``-v3`` ids bench uses are the same tasks with bug fixes, so the
numbers are a sanity bar, not a like-for-like replication. The zoo's note says as much: "not a
quantitative benchmark as it corresponds to only one run".

:func:`check` compares one label's runs with the published number for the same algorithm, env and
budget: a label whose median is more than one interquartile range of its own runs below the zoo's
mean is flagged, as the issue asks ("profile or fix before shipping the category").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PUBLISHED", "SOURCE", "Published", "Check", "check", "published_for"]

SOURCE = "rl-baselines3-zoo benchmark.md (DLR-RM/rl-baselines3-zoo@0088472b), one run each"


@dataclass(frozen=True)
class Published:
    """One published result.

    :param algo: bench's algorithm name (``ppo``, ``a2c``, ``trpo``).
    :param env: bench's env id it stands for.
    :param zoo_env: the env id the zoo trained on.
    :param mean: mean evaluation return of the one trained agent.
    :param std: standard deviation over its evaluation episodes (not over seeds).
    :param timesteps: the zoo's training budget in env steps.
    """

    algo: str
    env: str
    zoo_env: str
    mean: float
    std: float
    timesteps: int


def _p(algo: str, env: str, zoo_env: str, mean: float, std: float, timesteps: float) -> Published:
    return Published(algo, env, zoo_env, mean, std, int(timesteps))


#: (algo, bench env id) → the zoo's published result. Only on-policy algorithms bench runs.
PUBLISHED: dict[tuple[str, str], Published] = {
    (p.algo, p.env): p
    for p in [
        _p("a2c", "CartPole-v1", "CartPole-v1", 500.000, 0.000, 5e5),
        _p("a2c", "MountainCar-v0", "MountainCar-v0", -111.263, 24.087, 1e6),
        _p("a2c", "Pendulum-v1", "Pendulum-v1", -162.965, 103.210, 1e6),
        _p("a2c", "LunarLander-v3", "LunarLander-v2", 155.751, 80.419, 2e5),
        _p("a2c", "LunarLanderContinuous-v3", "LunarLanderContinuous-v2", 84.225, 145.906, 5e6),
        _p("a2c", "HalfCheetah-v5", "HalfCheetah-v3", 3041.174, 157.265, 1e6),
        _p("a2c", "Hopper-v5", "Hopper-v3", 733.454, 376.574, 1e6),
        _p("a2c", "ALE/Breakout-v5", "BreakoutNoFrameskip-v4", 279.793, 122.177, 1e7),
        _p("a2c", "ALE/Pong-v5", "PongNoFrameskip-v4", 17.292, 3.214, 1e7),
        _p("ppo", "CartPole-v1", "CartPole-v1", 500.000, 0.000, 1e5),
        _p("ppo", "MountainCar-v0", "MountainCar-v0", -110.423, 19.473, 1e6),
        _p("ppo", "Pendulum-v1", "Pendulum-v1", -172.225, 104.159, 1e5),
        _p("ppo", "LunarLander-v3", "LunarLander-v2", 242.119, 31.823, 1e6),
        _p("ppo", "LunarLanderContinuous-v3", "LunarLanderContinuous-v2", 270.863, 32.072, 1e6),
        _p("ppo", "HalfCheetah-v5", "HalfCheetah-v3", 5819.099, 663.530, 1e6),
        _p("ppo", "Hopper-v5", "Hopper-v3", 2410.435, 10.026, 1e6),
        _p("ppo", "Walker2d-v5", "Walker2d-v3", 3478.798, 821.708, 1e6),
        _p("ppo", "ALE/Breakout-v5", "BreakoutNoFrameskip-v4", 398.033, 33.328, 1e7),
        _p("ppo", "ALE/Pong-v5", "PongNoFrameskip-v4", 20.989, 0.105, 1e7),
        _p("trpo", "CartPole-v1", "CartPole-v1", 500.000, 0.000, 1e5),
        _p("trpo", "MountainCar-v0", "MountainCar-v0", -107.278, 13.231, 1e5),
        _p("trpo", "Pendulum-v1", "Pendulum-v1", -174.631, 127.577, 1e5),
        _p("trpo", "LunarLander-v3", "LunarLander-v2", 133.166, 112.173, 2e5),
        _p("trpo", "LunarLanderContinuous-v3", "LunarLanderContinuous-v2", 262.387, 21.428, 2e5),
        _p("trpo", "HalfCheetah-v5", "HalfCheetah-v3", 1785.476, 68.672, 1e6),
        _p("trpo", "Hopper-v5", "Hopper-v3", 3618.386, 356.768, 1e6),
        _p("trpo", "Walker2d-v5", "Walker2d-v3", 4933.148, 1452.538, 1e6),
    ]
}


def published_for(algo: str, env: str) -> Published | None:
    """The zoo's published result for ``(algo, env)``, or ``None``."""
    return PUBLISHED.get((algo, env))


@dataclass(frozen=True)
class Check:
    """One label's runs against the published number.

    :param same_budget: the runs' budget equals the zoo's (otherwise the comparison is shown, never flagged).
    :param median, q25, q75: of the runs' values.
    :param below: ``True`` when ``median < published.mean - (q75 - q25)`` at the same budget.
    """

    published: Published
    runs: int
    median: float
    q25: float
    q75: float
    same_budget: bool
    below: bool


def check(values: np.ndarray, published: Published, budget: int) -> Check:
    """Compare runs' returns ``values`` (shape ``(n_runs,)``, at least one) with ``published``.

    A label is flagged when its median is more than one interquartile range (of its own runs)
    below the published mean, and only when it ran at the zoo's budget: at another budget the two
    numbers measure different things.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError("values must be a non-empty 1-D array of finite returns")
    q25, med, q75 = (float(x) for x in np.percentile(v, [25, 50, 75]))
    same = int(budget) == published.timesteps
    return Check(published, int(v.size), med, q25, q75, same, same and med < published.mean - (q75 - q25))
