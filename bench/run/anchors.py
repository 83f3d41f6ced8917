"""Normalisation anchors computed and stored: the random policy played (:mod:`bench.envs.anchors` says what an
anchor is and how it is keyed, and reads them).

The run layer plays the envs: :func:`bench.api.record_env_facts` stores each env's anchor when its suite runs, the
tuner when a target needs one, and the api, before the analysis reads a store, passes :func:`for_reading` to it
for the anchors the store lacks (an old store, a threshold given later). The analysis itself only reads.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from bench.envs.anchors import EPISODES, SEED, Anchor, episodes_for

__all__ = ["ensure_anchors", "for_reading", "random_policy_return"]


def random_policy_return(env_id: str, episodes: int = EPISODES, seed: int = SEED) -> float:
    """Mean return of ``episodes`` episodes of uniformly random actions; deterministic for a seed.

    Episodes are capped at the env's horizon (or :data:`bench.envs.registry.EVAL_STEP_CAP`).
    """
    # Lazy: the factory (gymnasium and its wrappers) loads only where an anchor is missing, which a store written by
    # `bench run` never has, so reading a store stays cheap.
    from bench.envs.factory import evaluate_policy, make_env

    # A copy of the env's action space, seeded, samples the actions: the same stream the
    # env's own space would give, fed through the harness's one evaluation loop.
    probe = make_env(env_id, training=False)
    space = probe.action_space
    probe.close()
    space.seed(seed)
    return float(np.mean(evaluate_policy(env_id, lambda obs: np.array([space.sample()]), episodes, seed=seed)))


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
    # Lazy, as the factory above: the registry imports gymnasium, which a store whose anchors are all there never needs.
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


def for_reading(store: Any, thresholds: dict[str, float], log: Callable[[str], None] | None = None,
                families: dict[str, str | None] | None = None) -> dict[str, Anchor]:
    """:func:`ensure_anchors` for a store being read (``bench report``, ``recommend``, exports): a ``module:EnvId``
    env is never played, since reading a store from elsewhere must run none of the modules it names. The api
    passes this to :func:`bench.analysis.readmodel.load` as its ``anchors``."""
    return ensure_anchors(store, thresholds, log, families, imports=False)
