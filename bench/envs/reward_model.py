"""A Bradley–Terry reward model for the preference task, learned from noisy pairwise comparisons.

RLHF's reward model (Christiano et al. 2017; Ouyang et al. 2022, InstructGPT, §3.5) is fitted to
human comparisons under the Bradley–Terry model (Bradley & Terry 1952): the chance that response
``y1`` is preferred to ``y2`` is ``σ(r(y1) − r(y2))``, and ``r`` maximises the comparisons'
log-likelihood. Here the "humans" are the task's hidden true score with logistic noise:
``P(y1 ≻ y2) = σ((s(y1) − s(y2)) / noise)`` (:func:`bench.envs.tokens.true_score`), so the
fitted model recovers the ranking up to what its architecture can see.

The model is deliberately small and order-blind: a sum of token embeddings (an embedding bag)
beside the topic's embedding, then a one-hidden-layer MLP to a scalar. It can learn "on topic" and
"varied" from comparisons, but not "no adjacent repeats", which depends on order: the gap a policy
can exploit, as RLHF policies exploit their reward models.

Training is full-batch Adam on the comparisons' binary cross-entropy, seeded, a few seconds on
one CPU thread. The trained weights are cached on disk by a hash of everything that determines
them (:func:`reward_model`), so every env of one parameter set, in every process, scores with the
very same model.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bench.envs.tokens import comparisons

__all__ = ["CODE_VERSION", "RewardModel", "cache_dir", "kendall_tau", "reward_model", "train"]

#: Bump when the model, its features or its training change: old cache entries stop matching.
CODE_VERSION = 1
_EMBED, _HIDDEN, _EPOCHS, _LR = 32, 64, 300, 1e-2


def cache_dir() -> Path:
    """Where trained models are kept: ``$XDG_CACHE_HOME/bench`` (else ``~/.cache/bench``), or a temporary
    folder where that cannot be written."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bench"
    try:
        base.mkdir(parents=True, exist_ok=True)
        return base
    except OSError:
        return Path(tempfile.gettempdir()) / "bench-cache"


class RewardModel(nn.Module):
    """``r(topic, response)``: a bag of the response's tokens, each marked whether it is the topic's
    token (ids ``token`` and ``vocab + token``), summed as embeddings → MLP → scalar, standardised.

    The mark lets a bag see "on topic" (the count of topic tokens); without it, the topic could only
    meet the response inside the MLP, which a model this small learns poorly. After training, scores
    are standardised to mean 0 and standard deviation 1 over the comparisons' responses (the buffers
    ``shift`` and ``scale``), as RLHF normalises its reward model (InstructGPT, §C.2), so the
    reward's scale does not depend on the label noise.
    """

    def __init__(self, vocab: int = 14) -> None:
        super().__init__()
        self.vocab = vocab
        self.tokens = nn.EmbeddingBag(2 * vocab, _EMBED, mode="sum", padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(_EMBED, _HIDDEN), nn.Tanh(), nn.Linear(_HIDDEN, 1))
        self.register_buffer("shift", torch.zeros(()))
        self.register_buffer("scale", torch.ones(()))

    def raw(self, topics: torch.Tensor, bodies: torch.Tensor) -> torch.Tensor:
        """Unstandardised scores: ``topics`` ``(B,)`` token ids, ``bodies`` ``(B, L)`` padded with 0 → ``(B,)``."""
        marked = torch.where((bodies == topics[:, None]) & (bodies != 0), bodies + self.vocab, bodies)
        return self.mlp(self.tokens(marked)).squeeze(-1)

    def forward(self, topics: torch.Tensor, bodies: torch.Tensor) -> torch.Tensor:
        return (self.raw(topics, bodies) - self.shift) / self.scale

    @torch.no_grad()
    def score(self, topics: list[int], bodies: list[list[int]]) -> np.ndarray:
        """Scores of responses (token lists, any lengths) under their topics' tokens, shape ``(B,)``."""
        width = max(1, max((len(b) for b in bodies), default=1))
        padded = torch.zeros((len(bodies), width), dtype=torch.long)
        for i, b in enumerate(bodies):
            padded[i, : len(b)] = torch.as_tensor(b, dtype=torch.long)
        return self(torch.as_tensor(topics, dtype=torch.long), padded).numpy().astype(float)


def train(length: int, pairs: int, noise: float, seed: int) -> RewardModel:
    """Fit a :class:`RewardModel` to ``pairs`` comparisons by maximum likelihood (see the module doc)."""
    topics, ones, twos, labels = comparisons(length, pairs, noise, seed)
    with torch.random.fork_rng(devices=[]), torch.enable_grad():  # callable from inside a no_grad block
        torch.manual_seed(seed)
        model = RewardModel()
        opt = torch.optim.Adam(model.parameters(), lr=_LR)

        def batch(bodies: list[list[int]]) -> torch.Tensor:
            out = torch.zeros((len(bodies), length), dtype=torch.long)
            for i, b in enumerate(bodies):
                out[i, : len(b)] = torch.as_tensor(b)
            return out

        t, b1, b2 = torch.as_tensor(topics), batch(ones), batch(twos)
        y = torch.as_tensor(labels, dtype=torch.float32)
        for _ in range(_EPOCHS):
            opt.zero_grad()
            # Bradley–Terry: P(1 ≻ 2) = σ(r1 − r2); the loss is the comparisons' negative log-likelihood.
            loss = nn.functional.binary_cross_entropy_with_logits(model.raw(t, b1) - model.raw(t, b2), y)
            loss.backward()
            opt.step()
        with torch.no_grad():
            seen = torch.cat([model.raw(t, b1), model.raw(t, b2)])
            model.shift.copy_(seen.mean())
            model.scale.copy_(seen.std().clamp_min(1e-8))
    model.eval()
    return model


def reward_model(length: int, pairs: int, noise: float, seed: int) -> RewardModel:
    """The trained model for these parameters: from the cache, or trained now and cached.

    The cache key hashes the parameters and :data:`CODE_VERSION`, so a change to either trains a
    new model; the file is written beside its final name and moved into place, so concurrent
    processes never read half a file.
    """
    spec = {"length": length, "pairs": pairs, "noise": noise, "seed": seed, "code": CODE_VERSION}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir() / f"reward-model-{digest}.pt"
    model = RewardModel()
    if path.is_file():
        try:
            model.load_state_dict(torch.load(path, weights_only=True))
            model.eval()
            return model
        except Exception:  # noqa: BLE001 - a corrupt cache entry is retrained, not trusted
            pass
    model = train(length, pairs, noise, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)
    return model


def kendall_tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's τ-a of two score vectors ``(n,)``: (concordant − discordant pairs) / all pairs."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    i, j = np.triu_indices(x.size, k=1)
    return float(np.sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])) / i.size)
