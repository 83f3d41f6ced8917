"""Hyperparameter sensitivity of each tuned algorithm, read from the studies in the store.

Read-only: the report and the decision matrix call :func:`sensitivity_table`;
nothing here trains or writes.
"""

from __future__ import annotations

import warnings

import numpy as np

from bench.suites.spaces import readable_name
from bench.tune.study import STUDY_ATTR


SENSITIVITY_COLUMNS = [
    "algo", "impl", "env_id", "study", "n_trials", "n_complete", "score_iqr", "success_fraction", "importances",
    "objective", "n_pruned",
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


def sensitivity_table(store_url: str):
    """One row per bench study in the store: how sensitive the algorithm is to its hyperparameters.

    - ``n_trials``: all trials; ``n_complete`` / ``n_pruned``: those that ran to the end / were pruned.
    - ``score_iqr``: interquartile range of the complete trials' objective values,
      min-max normalised to [0, 1] over the complete trials of *every* study on the
      same env and objective in the store, so studies of different algorithms on one
      env share one scale; NaN without complete trials. Wide means the result
      depends a lot on the hyperparameters.
    - ``success_fraction``: over complete and pruned trials (a pruned or diverged trial
      is a configuration that did not get there), the mean of each trial's
      ``solved_fraction``, the fraction of its tuning seeds whose trailing mean reached
      the threshold (seeds a pruned trial never trained count as not reached). It
      estimates P(a configuration from the space, on a random seed, reaches the threshold
      within the budget). NaN when no trial finished.
    - ``importances``: Optuna's parameter importances (its default evaluator) keyed by
      readable hyperparameter names; ``{}`` with fewer than 2 complete trials or when
      it cannot be computed.
    """
    import optuna
    import pandas as pd
    from optuna.trial import TrialState

    from bench.run.store import StoreError, normalise_url, readonly_engine_args, store_exists

    url = normalise_url(store_url)
    try:
        if not store_exists(url):
            return pd.DataFrame(columns=SENSITIVITY_COLUMNS)
    except StoreError:
        return pd.DataFrame(columns=SENSITIVITY_COLUMNS)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        # Read-only, like every reader of the store: no tables made, no files left beside it.
        ro_url, kwargs = readonly_engine_args(url)
        storage = optuna.storages.RDBStorage(ro_url, engine_kwargs=kwargs, skip_compatibility_check=True,
                                             skip_table_creation=True)
        summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    except Exception:  # noqa: BLE001 - a results store without Optuna tables has no studies
        return pd.DataFrame(columns=SENSITIVITY_COLUMNS)
    rows, values = [], []
    for s in summaries:
        attrs = s.user_attrs.get(STUDY_ATTR)
        if not attrs:
            continue
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        trials = study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
        importances: dict[str, float] = {}
        if len(complete) >= 2:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    raw = optuna.importance.get_param_importances(study)
                importances = {readable_name(k): float(v) for k, v in raw.items()}
            except Exception:  # noqa: BLE001 - e.g. a single distinct value per parameter
                importances = {}
        solved = [float(t.user_attrs.get("solved_fraction", 0.0)) for t in finished]
        rows.append({
            "algo": attrs.get("algo"), "impl": attrs.get("impl"), "env_id": attrs.get("env_id"), "study": s.study_name,
            "n_trials": len(trials), "n_complete": len(complete), "score_iqr": float("nan"),
            "success_fraction": float(np.mean(solved)) if solved else float("nan"),
            "importances": importances, "objective": attrs.get("objective"),
            "n_pruned": sum(t.state == TrialState.PRUNED for t in trials),
        })
        values.append(np.array([t.value for t in complete], dtype=float))
    # Normalise over every study on the same (env, objective).
    for i, row in enumerate(rows):
        pooled = np.concatenate(
            [values[j] for j, r in enumerate(rows) if (r["env_id"], r["objective"]) == (row["env_id"], row["objective"])]
        )
        if values[i].size:
            row["score_iqr"] = iqr_normalised(values[i], float(pooled.min()), float(pooled.max()))
    return pd.DataFrame(rows, columns=SENSITIVITY_COLUMNS)
