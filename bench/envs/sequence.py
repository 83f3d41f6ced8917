"""Language-model-style tasks as Gymnasium environments: a policy over tokens, rewarded at the end.

A sequence task is a tiny language-model episode. ``reset`` draws a prompt from the seed; each
``step`` appends one token (the action); the episode ends when the policy emits ``<eos>`` or the
answer's length cap is reached. The reward comes once, at the end, from an exact checker
(verifiable rewards, as in RL from verifiable rewards) or from a learned reward model
(preferences, as in RLHF). Everything is generated in-process from the seed; nothing is downloaded.

Vocabulary, shared by every task (:data:`VOCAB`)::

    0 <pad>   1 <eos>   2..11 the digits 0..9   12 +   13 =

Observation: the context so far, prompt then generated tokens, padded with ``<pad>`` to a fixed
length ``prompt_len + cap``, as a ``MultiDiscrete([14] * length)`` (so SB3's ``MlpPolicy`` sees a
one-hot of every position, the off-the-shelf choice). Action: ``Discrete(14)``, the next token
(``<pad>``, ``+`` and ``=`` are legal moves that are simply wrong answers).

Tasks, registered as ``bench/Sort-v0``, ``bench/Add-v0`` and ``bench/Preference-v0`` (see
:func:`register`); their difficulty knobs are ``gym.make`` kwargs, so a suite sets them with
``kwargs:``:

- **Sort** (``n`` digits, 1..9): the prompt is ``d1 … dn =``; the answer is the digits in
  ascending order, then ``<eos>``.
- **Add** (``k`` digits, 1..4): the prompt is ``a + b =`` with two ``k``-digit numbers (no leading
  zero when ``k > 1``); the answer is the sum's digits, most significant first, then ``<eos>``.
- **Preference** (``length`` 2..16): the prompt is ``t =`` with a topic digit ``t``; any digits are a
  response. Its reward is a Bradley–Terry reward model's score (:mod:`bench.envs.reward_model`),
  learned from noisy comparisons of a hidden true score (:func:`true_score`).

Rewards: ``partial=False`` (the default) gives 1 for an exact answer and 0 otherwise; ``partial=True``
gives the fraction of answer positions right (``<eos>`` included), a denser signal of the same
target. ``info`` at the end has ``exact_match`` (verifiable tasks) or ``true_score`` and
``proxy_score`` (preference), so the gap between what was optimised and what was meant is
measured, not assumed.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from bench.envs.tokens import EOS, EQ, PAD, PLUS, VOCAB, decode, digit, true_score

__all__ = ["VOCAB", "PAD", "EOS", "PLUS", "EQ", "TASKS", "digit", "SequenceTask", "SortTask", "AddTask",
           "PreferenceTask", "true_score", "decode", "register"]

def _check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return int(value)


class SequenceTask(gym.Env):
    """One prompt, one answer of at most ``cap`` tokens, one reward at the end.

    Subclasses set ``prompt_len`` and ``cap`` and implement :meth:`sample` (a prompt and its
    reference answer from ``self.np_random``) and, for non-verifiable tasks, :meth:`finish`.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    prompt_len: int
    cap: int

    def __init__(self, partial: bool = False) -> None:
        if not isinstance(partial, bool):
            raise ValueError(f"partial must be true or false, got {partial!r}")
        self.partial = partial
        self.observation_space = gym.spaces.MultiDiscrete([len(VOCAB)] * (self.prompt_len + self.cap))
        self.action_space = gym.spaces.Discrete(len(VOCAB))
        self.prompt: list[int] = []
        self.answer: list[int] = []
        self.generated: list[int] = []
        #: End-of-episode infos since the algorithm last drained them (``exact_match``, ``true_score``,
        #: ``proxy_score``): what an algorithm records beside the return; bounded so nobody leaks.
        self.finished: list[dict[str, Any]] = []

    # -- what a task defines ---------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        """A prompt (``prompt_len`` tokens) and its reference answer (ending with ``<eos>``)."""
        raise NotImplementedError

    def finish(self) -> tuple[float, dict[str, Any]]:
        """The episode's reward and ``info`` once it ends: the exact checker by default."""
        exact = self.generated == self.answer
        if not self.partial:
            return float(exact), {"exact_match": exact}
        right = sum(g == a for g, a in zip(self.generated, self.answer))
        return right / len(self.answer), {"exact_match": exact}

    # -- the gymnasium API -------------------------------------------------------------------
    def _obs(self) -> np.ndarray:
        ctx = self.prompt + self.generated
        return np.array(ctx + [PAD] * (self.prompt_len + self.cap - len(ctx)), dtype=np.int64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.prompt, self.answer = self.sample(self.np_random)
        self.generated = []
        return self._obs(), {}

    def step(self, action):
        if not self.prompt or (self.generated and (self.generated[-1] == EOS or len(self.generated) >= self.cap)):
            raise RuntimeError("step() after the episode ended (or before reset()); call reset() first")
        tok = int(action)
        if not 0 <= tok < len(VOCAB):
            raise ValueError(f"action {action!r} is not a token id; allowed: 0..{len(VOCAB) - 1}")
        self.generated.append(tok)
        if tok != EOS and len(self.generated) < self.cap:
            return self._obs(), 0.0, False, False, {}
        # The answer ended (<eos>, or the cap, which is part of the task): the only reward.
        reward, info = self.finish()
        if len(self.finished) < 100_000:
            self.finished.append(info)
        return self._obs(), reward, True, False, info


class SortTask(SequenceTask):
    """``d1 … dn =`` → the digits in ascending order, then ``<eos>``."""

    def __init__(self, n: int = 4, partial: bool = False) -> None:
        self.n = _check_int("n", n, 1, 9)
        self.prompt_len, self.cap = self.n + 1, self.n + 1
        super().__init__(partial)

    def sample(self, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        ds = rng.integers(0, 10, self.n)
        return [digit(d) for d in ds] + [EQ], [digit(d) for d in sorted(ds)] + [EOS]


class AddTask(SequenceTask):
    """``a + b =`` with two ``k``-digit numbers → the digits of ``a + b``, then ``<eos>``."""

    def __init__(self, k: int = 2, partial: bool = False) -> None:
        self.k = _check_int("k", k, 1, 4)
        self.prompt_len, self.cap = 2 * self.k + 2, self.k + 2  # the sum has at most k + 1 digits
        super().__init__(partial)

    def sample(self, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        lo = 10 ** (self.k - 1) if self.k > 1 else 0
        a, b = (int(x) for x in rng.integers(lo, 10**self.k, 2))

        def toks(x: int) -> list[int]:
            return [digit(int(c)) for c in str(x)]

        return toks(a) + [PLUS] + toks(b) + [EQ], toks(a + b) + [EOS]


class PreferenceTask(SequenceTask):
    """``t =`` → up to ``length`` digits; rewarded by a learned Bradley–Terry reward model.

    :param length: the response's length cap in digits (``<eos>`` may end it earlier).
    :param pairs: comparisons the reward model is trained on; ``noise``: the Bradley–Terry
        temperature of their labels (``P(y1 preferred) = σ((s1 − s2) / noise)``, ``s`` the true score);
    :param rm_seed: the seed of the comparisons and the model's initialisation. The model is trained
        once per parameter set and cached (:func:`bench.envs.reward_model.reward_model`).
    """

    def __init__(self, length: int = 8, pairs: int = 2000, noise: float = 0.25, rm_seed: int = 0,
                 partial: bool = False) -> None:
        self.length = _check_int("length", length, 2, 16)
        self.pairs = _check_int("pairs", pairs, 10, 1_000_000)
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 < noise <= 10:
            raise ValueError(f"noise must be a number in (0, 10], got {noise!r}")
        self.noise = float(noise)
        self.rm_seed = _check_int("rm_seed", rm_seed, 0, 2**31 - 1)
        self.prompt_len, self.cap = 2, self.length + 1
        super().__init__(partial)
        self._rm: Any = None

    @property
    def reward_model(self) -> Any:
        if self._rm is None:
            from bench.envs.reward_model import reward_model

            self._rm = reward_model(self.length, self.pairs, self.noise, self.rm_seed)
        return self._rm

    def sample(self, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        # No reference answer: any response is scored. The SFT demonstrations use random_response.
        return [digit(rng.integers(0, 10)), EQ], []

    def random_response(self, rng: np.random.Generator) -> list[int]:
        """A response as the comparisons draw them: 1..length uniform digits, then ``<eos>`` if shorter."""
        n = int(rng.integers(1, self.length + 1))
        body = [digit(d) for d in rng.integers(0, 10, n)]
        return body + ([EOS] if n < self.length else [])

    def finish(self) -> tuple[float, dict[str, Any]]:
        topic = self.prompt[0] - 2
        body = [t for t in self.generated if t != EOS]
        proxy = float(self.reward_model.score([self.prompt[0]], [body])[0])
        true = true_score(topic, body, self.length)
        return proxy, {"true_score": true, "proxy_score": proxy}


#: The registered sequence tasks, by Gymnasium id (their ids and thresholds: ``registry.SEQUENCE_TASKS``).
TASKS = {"bench/Sort-v0": SortTask, "bench/Add-v0": AddTask, "bench/Preference-v0": PreferenceTask}


def register() -> None:
    """Register the tasks with Gymnasium under the ``bench/`` namespace (once; importing :mod:`bench.envs` does it)."""
    for name, cls in TASKS.items():
        if name not in gym.registry:
            gym.register(name, entry_point=cls)
