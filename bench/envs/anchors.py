"""Normalisation anchors: each env's random-policy return (0) and threshold (1).

Scores across environments are only comparable after normalisation, and the
scale must not move when an algorithm is added (Agarwal et al. 2021 normalise
Atari by fixed random and human scores for the same reason). So the anchors
are fixed per env: the low anchor is the mean return of a uniform-random
policy, computed once, deterministically, and the high anchor is the env's
threshold. An anchor is stored in the results store's ``anchors`` table, keyed
by everything that defines it (env, threshold, random-policy episodes and seed),
the first time a run or a report needs it, and never overwritten: two suites that give
one env different thresholds each get their own scale. The random return does
not depend on the threshold, so it is computed once per env and settings.

This module reads anchors and says how they are keyed; the run layer computes and stores them
(:mod:`bench.run.anchors`: at run time, and for the api before a report reads a store that lacks some), so
reading a store never runs an env or writes.

The random policy runs :data:`EPISODES` whole episodes (``make_env(...,
training=False)``: Atari scores are raw game scores over whole games) with the
env reset to seed :data:`SEED` once and the action space seeded with it too.
Atari uses :data:`ATARI_EPISODES` episodes, because one random game of Pong
takes about 800 agent steps and the mean settles quickly (Mnih et al. 2015
averaged 30 random episodes; the spread of random Breakout/Pong scores is a
few points, small beside the gap to the threshold).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Random-policy episodes per env, and the seed of the env and of the action space.
EPISODES = 20
ATARI_EPISODES = 5
SEED = 0


@dataclass(frozen=True)
class Anchor:
    """Normalised score = (return - random_return) / (threshold - random_return)."""

    env_id: str
    random_return: float
    threshold: float
    episodes: int
    seed: int


def episodes_for(env_id: str, family: str | None = None) -> int:
    """Random-policy episodes of an env's anchor. ``family`` as the store recorded it (``env_meta``,
    ``env_facts``) is enough; without it the registry is asked, which imports the env's package."""
    if family is None:
        from bench.envs.registry import get_spec, parse_env_key

        if parse_env_key(env_id)[0]:  # a module:EnvId key: its module is not imported to read a store that names it
            return EPISODES
        family = get_spec(env_id).family
    return ATARI_EPISODES if family == "atari" else EPISODES


def stored_anchors(store, thresholds: dict[str, float],
                   families: dict[str, str | None] | None = None) -> dict[str, Anchor]:
    """The stored anchor of every env in ``thresholds`` at that threshold (computes and writes nothing; the run
    layer's :func:`bench.run.anchors.ensure_anchors` computes missing ones)."""
    have = store.anchors()
    out = {}
    for env_id, thr in thresholds.items():
        r = None if thr is None else have.get((env_id, float(thr), episodes_for(env_id, (families or {}).get(env_id)), SEED))
        if r is not None:
            out[env_id] = Anchor(env_id, float(r.random_return), float(r.threshold), int(r.episodes), int(r.seed))
    return out
