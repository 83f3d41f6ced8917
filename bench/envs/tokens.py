"""The token vocabulary of the sequence tasks, and the preference task's hidden true score.

Kept apart from :mod:`bench.envs.sequence` so the reward model (:mod:`bench.envs.reward_model`) and
the tasks that use it both import it, and neither imports the other.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = ["VOCAB", "PAD", "EOS", "PLUS", "EQ", "comparisons", "digit", "decode", "true_score", "true_score_scale"]

VOCAB = ("<pad>", "<eos>", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "+", "=")
PAD, EOS, PLUS, EQ = 0, 1, 12, 13


def digit(d: int) -> int:
    """The token of digit ``d`` (0..9)."""
    return 2 + int(d)


def decode(tokens: Any) -> str:
    """Tokens as text (``<pad>`` dropped), for messages and tests: ``[4, 3, 13]`` → ``"21="``."""
    return "".join(VOCAB[int(t)] for t in tokens if int(t) != PAD)


def true_score(topic: int, response: list[int], length: int) -> float:
    """The preference task's hidden "true" quality of a response (its digit tokens, ``<eos>`` excluded).

    ``1[the topic digit appears] + (distinct digits) / 10 - (adjacent repeats) / length``: on topic,
    varied, not repetitive. A bag-of-tokens reward model can learn the first two terms from
    comparisons but cannot see order, so it cannot learn the last: repeating a well-scored token
    raises the proxy while the true score falls. That is the reward hacking the KL penalty exists
    to hold back, built in on purpose and measured by every episode.
    """
    ds = [t - 2 for t in response if 2 <= t <= 11]
    others = sum(1 for t in response if not 2 <= t <= 11)  # non-digit tokens count as repeats of nothing useful
    repeats = sum(1 for x, y in zip(ds, ds[1:]) if x == y)
    return float(topic in ds) + len(set(ds)) / 10 - (repeats + others) / length


def comparisons(length: int, n: int, noise: float, seed: int) -> tuple[list[int], list[list[int]], list[list[int]], np.ndarray]:
    """``n`` labelled comparisons: topics (tokens), responses 1 and 2 (digit tokens), and labels
    ``(n,)`` (1.0 where response 1 was preferred), drawn as :mod:`bench.envs.reward_model` says."""
    rng = np.random.default_rng(seed)
    topics, ones, twos, labels = [], [], [], np.empty(n)
    for i in range(n):
        t = int(rng.integers(0, 10))
        y1, y2 = ([digit(d) for d in rng.integers(0, 10, rng.integers(1, length + 1))] for _ in range(2))
        s1, s2 = true_score(t, y1, length), true_score(t, y2, length)
        labels[i] = float(rng.random() < 1.0 / (1.0 + np.exp(-(s1 - s2) / noise)))
        topics.append(digit(t))
        ones.append(y1)
        twos.append(y2)
    return topics, ones, twos, labels


@functools.lru_cache(maxsize=64)  # pure in its arguments; a report asks once per run (0.15 s each)
def true_score_scale(length: int = 8, pairs: int = 2000, noise: float = 0.25, seed: int = 0) -> tuple[float, float]:
    """Mean and standard deviation of the true score over the responses of the reward model's own
    comparisons: the distribution on which its proxy score is standardised. ``(true − mean) / std`` puts
    the true score on the proxy's scale, so ``proxy − standardised true`` is a gap in one unit (what
    the proxy gained that the true score did not, when it grows)."""
    topics, ones, twos, _ = comparisons(length, pairs, noise, seed)
    t = np.array([true_score(tp - 2, y, length) for tp, y in zip(topics + topics, ones + twos)])
    return float(t.mean()), float(t.std())
