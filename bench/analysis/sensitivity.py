"""Hyperparameter sensitivity of each tuned algorithm, read from the studies in the store.

Read-only: the report and the decision matrix call :func:`sensitivity_table`;
nothing here trains or writes.

Each study's spread is put on a scale fixed by the study itself (its objective,
env anchor and budget), never by the other studies in the store, so adding a
study, or an algorithm, leaves every other row unchanged: the same promise the
report's scores make (Agarwal et al. 2021 normalise by fixed per-task anchors
for the same reason).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from bench.storage.vocabulary import OBJECTIVE_VERSIONS, STUDY_ATTR, readable_name


SENSITIVITY_COLUMNS = [
    "algo", "impl", "env_id", "study", "n_trials", "n_complete", "score_iqr", "success_fraction", "importances",
    "objective", "n_pruned", "note",
]


def iqr_normalised(scores: np.ndarray, lo: float, hi: float) -> float:
    """Interquartile range of ``scores`` (shape ``(n,)``) after mapping ``[lo, hi]`` to ``[0, 1]``.

    ``nan`` for no scores; ``0`` when ``hi == lo`` (every score equal).
    """
    s = np.asarray(scores, dtype=float)
    if s.size == 0:
        return float("nan")
    if hi <= lo:
        return 0.0
    q75, q25 = np.percentile((s - lo) / (hi - lo), [75, 25])
    return float(q75 - q25)


def trial_score(trial: Any) -> float | None:
    """A finished trial's score: a complete trial's value, a pruned trial's last reported
    intermediate value; ``None`` for any other trial, or a pruned one that reported nothing.

    A pruned trial is a configuration the search tried; leaving it out would hide the
    worst of the space and shrink the spread (pruning removes the low tail first). Its
    last value is on the objective's scale: the mean of its finished seeds' objectives
    and its current seed's objective over the steps it had run (see :mod:`bench.tune.trial`).
    """
    from optuna.trial import TrialState

    if trial.state == TrialState.COMPLETE:
        return None if trial.value is None else float(trial.value)
    if trial.state == TrialState.PRUNED and trial.intermediate_values:
        return float(trial.intermediate_values[max(trial.intermediate_values)])
    return None


def study_scale(attrs: dict[str, Any], anchor_of: Any) -> tuple[float | None, float | None, str]:
    """``(lo, hi, note)``: the values of a study's objective that map to 0 and 1; ``None, None, why`` if it has none.

    - ``auc`` (version 2): already normalised (random policy 0, threshold 1): ``(0, 1)``;
    - ``final_return``: the env's anchor, ``(random-policy return, threshold)``;
    - ``steps_to_threshold``: ``(0, budget)``; a censored seed counts 2 × budget, so
      scores lie in ``[0, 2]``.

    :param attrs: the study's settings (``STUDY_ATTR``).
    :param anchor_of: ``anchor_of(env_id, threshold)`` → the stored random-policy
        return or ``None``; asked only when the study did not keep one.
    """
    objective, thr = attrs.get("objective"), attrs.get("threshold")
    if objective == "auc":
        version = attrs.get("objective_version", 1)
        if version != OBJECTIVE_VERSIONS["auc"]:
            return None, None, f"tuned with auc version {version} (mean return per episode), which has no fixed scale"
        return 0.0, 1.0, ""
    if objective == "steps_to_threshold":
        return 0.0, float(attrs["timesteps"]), ""
    if objective == "final_return":
        if thr is None:
            return None, None, "no threshold to normalise final_return with"
        low = attrs.get("random_return")
        if low is None:
            low = anchor_of(attrs.get("env_id"), float(thr))
        if low is None:
            return None, None, f"no stored random-policy anchor for {attrs.get('env_id')} at threshold {thr:g}"
        if not float(thr) > float(low):
            return None, None, f"threshold {thr:g} is not above the random-policy return {low:.6g}"
        return float(low), float(thr), ""
    return None, None, f"unknown objective {objective!r}"


def sensitivity_table(source: Any):
    """One row per bench study in ``source``: how sensitive the algorithm is to its hyperparameters.

    :param source: a store URL, a ``packs:FOLDER`` URL, or an open reader
        (:func:`bench.storage.packread.open_reader`, or a command's read model); its studies are read, never changed.

    - ``n_trials``: the trials whose score enters the spread: complete ones, and pruned
      ones that reported an intermediate value (at their last one, :func:`trial_score`).
      Failed, running and waiting trials stay out. ``n_complete`` / ``n_pruned``: the
      trials that ran to the end / were pruned (diverged runs included).
    - ``score_iqr``: interquartile range of those scores on the study's own fixed
      scale (:func:`study_scale`): the normalised AUC as it is (0 random policy,
      1 threshold), the final return mapped by the env's random-policy return and
      threshold, steps-to-threshold divided by the budget (``[0, 2]``, censored
      seeds counting 2 × budget). It does not depend on any other study. NaN when no
      trial has a score or the study has no fixed scale (``note`` says why). Wide
      means the result depends a lot on the hyperparameters.
    - ``success_fraction``: over complete and pruned trials (a pruned or diverged trial
      is a configuration that did not get there), the mean of each trial's
      ``solved_fraction``, the fraction of its tuning seeds whose trailing mean reached
      the threshold (seeds a pruned trial never trained count as not reached). It
      estimates P(a configuration from the space, on a random seed, reaches the threshold
      within the budget). NaN when no trial finished.
    - ``importances``: Optuna's parameter importances (its default evaluator, which uses
      complete trials) keyed by readable hyperparameter names; ``{}`` with fewer than 2
      complete trials or when it cannot be computed.
    - ``note``: why ``score_iqr`` is NaN, else ``""``.
    """
    from bench.envs.anchors import stored_anchors
    from bench.storage.packread import open_reader, owned
    from bench.storage.schema import StoreError
    from bench.storage.store import store_exists
    from bench.storage.urls import StoreURL

    if isinstance(source, StoreURL) or isinstance(source, str) and not source.startswith("packs:"):
        try:
            source = StoreURL.parse(source)  # a StoreURL as it is; text (a caller of this function) checked here
            if not store_exists(source):
                return _empty()
        except StoreError:
            return _empty()
    db = open_reader(source)
    try:
        if not db.has_studies():
            return _empty()
        # The stored random-policy returns (the tuner stored them when it tuned): read only.
        return study_rows(db.studies(), lambda env_id, thr: getattr(
            stored_anchors(db, {env_id: thr}).get(env_id), "random_return", None))
    finally:
        if owned(source):
            db.dispose()


def _empty():
    import pandas as pd

    return pd.DataFrame(columns=SENSITIVITY_COLUMNS)


def study_rows(studies: list[Any], anchor_of: Any):
    """:func:`sensitivity_table`'s rows for ``studies`` (Optuna studies carrying bench's settings), in order.

    :param anchor_of: ``anchor_of(env_id, threshold)`` → the env's stored random-policy return or ``None``.
    """
    import optuna
    import pandas as pd
    from optuna.trial import TrialState

    rows = []
    for study in studies:
        attrs = study.user_attrs.get(STUDY_ATTR)
        if not attrs:
            continue
        trials = study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
        scores = np.array([v for v in map(trial_score, finished) if v is not None], dtype=float)
        lo, hi, note = study_scale(attrs, anchor_of)
        if lo is None or hi is None:
            iqr = float("nan")
        elif scores.size == 0:
            iqr, note = float("nan"), "no complete or pruned trial with a score"
        else:
            iqr = iqr_normalised(scores, lo, hi)
        importances: dict[str, float] = {}
        if len(complete) >= 2:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    raw = optuna.importance.get_param_importances(study)
                # Largest first, ties by name: Optuna's order among equal importances follows a set's
                # iteration, which changes with the process's string hashing, and "most important" is the first.
                importances = dict(sorted(((readable_name(k), float(v)) for k, v in raw.items()),
                                          key=lambda kv: (-kv[1], kv[0])))
            except Exception:  # noqa: BLE001 - e.g. a single distinct value per parameter
                importances = {}
        solved = [float(t.user_attrs.get("solved_fraction", 0.0)) for t in finished]
        rows.append({
            "algo": attrs.get("algo"), "impl": attrs.get("impl"), "env_id": attrs.get("env_id"), "study": study.study_name,
            "n_trials": int(scores.size), "n_complete": len(complete), "score_iqr": iqr,
            "success_fraction": float(np.mean(solved)) if solved else float("nan"),
            "importances": importances, "objective": attrs.get("objective"),
            "n_pruned": sum(t.state == TrialState.PRUNED for t in trials), "note": note,
        })
    return pd.DataFrame(rows, columns=SENSITIVITY_COLUMNS)
