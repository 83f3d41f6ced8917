"""The token vocabulary of the sequence tasks, and the preference task's hidden true score.

Kept apart from :mod:`bench.envs.sequence` so the reward model (:mod:`bench.envs.reward_model`) and
the tasks that use it both import it, and neither imports the other.
"""

from __future__ import annotations

from typing import Any

__all__ = ["VOCAB", "PAD", "EOS", "PLUS", "EQ", "digit", "decode", "true_score"]

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
