"""Normalisation anchors: each env's random-policy return (0) and threshold (1).

Scores across environments are only comparable after normalisation, and the
scale must not move when an algorithm is added (Agarwal et al. 2021 normalise
Atari by fixed random and human scores for the same reason). So the anchors
are fixed per env: the low anchor is the mean return of a uniform-random
policy, computed once, deterministically, and the high anchor is the env's
threshold. An anchor is stored in the results store's ``anchors`` table, keyed
by everything that defines it (env, threshold, random-policy episodes and seed),
the first time a report needs it, and never overwritten: two suites that give
one env different thresholds each get their own scale. The random return does
not depend on the threshold, so it is computed once per env and settings.

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


def random_policy_return(env_id: str, episodes: int = EPISODES, seed: int = SEED) -> float:
    """Mean return of ``episodes`` episodes of uniformly random actions; deterministic for a seed.

    Episodes are capped at the env's horizon (or :data:`bench.envs.registry.EVAL_STEP_CAP`).
    """
    from bench.envs.factory import evaluate_policy, make_env

    # A copy of the env's action space, seeded, samples the actions: the same stream the
    # env's own space would give, fed through the harness's one evaluation loop.
    probe = make_env(env_id, training=False)
    space = probe.action_space
    probe.close()
    space.seed(seed)
    return float(np.mean(evaluate_policy(env_id, lambda obs: np.array([space.sample()]), episodes, seed=seed)))


def episodes_for(env_id: str, family: str | None = None) -> int:
    """Random-policy episodes of an env's anchor. ``family`` as the store recorded it (``env_meta``,
    ``env_facts``) is enough; without it the registry is asked, which imports the env's package."""
    if family is None:
        from bench.envs.registry import get_spec, parse_env_key

        if parse_env_key(env_id)[0]:  # a module:EnvId key: its module is not imported to read a store that names it
            return EPISODES
        family = get_spec(env_id).family
    return ATARI_EPISODES if family == "atari" else EPISODES


def ensure_anchors(store, thresholds: dict[str, float], log=None,
                   families: dict[str, str | None] | None = None, *, imports: bool = True) -> dict[str, Anchor]:
    """The anchor of every env in ``thresholds`` at that threshold, computing and storing missing ones.

    :param store: a :class:`bench.storage.store.Store`.
    :param thresholds: env id → the threshold the scores are normalised to (``None``: no anchor).
    :param log: optional ``callable(str)`` told about each env whose random return is computed, or
        whose env cannot be built to compute it (its package is not importable here: it is left out).
    :param families: env id → its family as the store recorded it, so that stored anchors are found
        without importing the env (see :func:`episodes_for`).
    :param imports: whether a ``module:EnvId`` env may be played to compute its anchor, which imports its
        module. ``False`` where the store is read (report, recommend, pack): a store or pack from elsewhere
        names modules, and reading it must run none of them; such an env without a stored anchor is left out.
    """
    from bench.envs.registry import parse_env_key

    have = store.anchors()
    out = {}
    for env_id, thr in thresholds.items():
        if thr is None:
            continue
        n = episodes_for(env_id, (families or {}).get(env_id))
        key = (env_id, float(thr), n, SEED)
        if key not in have:
            # The random return depends on the env and the random policy's settings only.
            known = [r.random_return for (e, _, k, sd), r in have.items() if (e, k, sd) == (env_id, n, SEED)]
            if known:
                random_return = float(known[0])
            elif not imports and parse_env_key(env_id)[0]:
                if log:
                    log(f"{env_id}: no stored anchor, and bench does not import module {parse_env_key(env_id)[0]!r} "
                        "that the store names to play it; left out of cross-env scores")
                continue
            else:
                if log:
                    log(f"computing the random-policy anchor of {env_id} ({n} episodes, seed {SEED}) once; it is stored")
                try:
                    random_return = random_policy_return(env_id, n, SEED)
                except (KeyError, ValueError, ImportError) as e:  # the env's package is not importable here
                    if log:
                        log(f"{env_id}: cannot play it to compute its anchor ({e}); left out of cross-env scores")
                    continue
            store.put_anchor(env_id, random_return, float(thr), n, SEED)
            have = store.anchors()
            if key not in have:
                # The store did not take it (a read-only mount), or a read-only reader cannot see it yet:
                # use the computed value for this report.
                out[env_id] = Anchor(env_id, random_return, float(thr), n, SEED)
                continue
        r = have[key]
        out[env_id] = Anchor(env_id, float(r.random_return), float(r.threshold), int(r.episodes), int(r.seed))
    return out


def stored_anchors(store, thresholds: dict[str, float],
                   families: dict[str, str | None] | None = None) -> dict[str, Anchor]:
    """Like :func:`ensure_anchors`, from stored anchors only (computes and writes nothing)."""
    have = store.anchors()
    out = {}
    for env_id, thr in thresholds.items():
        r = None if thr is None else have.get((env_id, float(thr), episodes_for(env_id, (families or {}).get(env_id)), SEED))
        if r is not None:
            out[env_id] = Anchor(env_id, float(r.random_return), float(r.threshold), int(r.episodes), int(r.seed))
    return out
