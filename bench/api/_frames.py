"""Results as pandas frames, for a notebook: a store's runs, episodes, periodic evaluations and diagnostics, one
row per stored row (what ``bench export`` writes as files), and the normalised per-run scores the report compares.

Each reads the store read-only and closes it before returning. The tables are the store's own reads
(:class:`bench.storage.store.Store`: no SQL here); the scores are the report's (:func:`bench.analysis.scoring.load`
and :func:`bench.analysis.scoring.score`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from bench.api._common import BadInput, parse_store
from bench.storage.urls import StoreURL

if TYPE_CHECKING:
    import pandas as pd

#: The per-run tables a store holds, as :func:`runs` … :func:`diagnostics` and ``bench export --what`` read them.
TABLES = ("runs", "episodes", "evaluations", "diagnostics")

#: The columns of :func:`scores`, in order.
SCORE_FRAME_COLUMNS = ["key", "env", "label", "algo", "impl", "seed", "timesteps", "total_steps", "final_return",
                       "solved", "t_steps", "t_cpu", "final_norm", "auc_steps_norm", "auc_time_norm", "contended"]


def open_store(store_url: StoreURL, flag: str = "--store") -> Any:
    """The store at ``store_url``, read-only (a :class:`bench.storage.store.Store`; the caller disposes of it).

    :raises BadInput: there is no store at ``store_url`` (naming ``flag``).
    """
    from bench.storage.schema import StoreMissing
    from bench.storage.store import Store

    try:
        return Store(store_url, readonly=True)
    except StoreMissing:
        raise BadInput(f"{flag}: no results store at {store_url.shown}; run a suite first (`bench run SUITE.yaml`)") \
            from None


def check_suite(db: Any, suite: str | None, flag: str = "--suite", also: list[str] | None = None) -> None:
    """:class:`BadInput` (naming ``flag`` and the suites there are) unless ``suite`` is ``None`` or in the store
    ``db`` (or in ``also``)."""
    if suite is not None and suite not in (names := db.suite_names()) and suite not in (also or []):
        allowed = names + sorted(set(also or []) - set(names))
        raise BadInput(f"{flag}: no suite named {suite!r} in the store; allowed: {', '.join(allowed) or 'none'}")


def read_table(db: Any, what: str, suite: str | None) -> "pd.DataFrame":
    """The table ``what`` (one of :data:`TABLES`) of the open store ``db``, of ``suite`` or of every suite."""
    return {"runs": db.runs_frame, "episodes": db.episodes_frame, "evaluations": db.evaluations_frame,
            "diagnostics": db.diagnostics_frame}[what](suite)


def _frame(what: str, store: StoreURL | str | None, suite: str | None) -> "pd.DataFrame":
    db = open_store(parse_store(store, "store"), "store")
    try:
        check_suite(db, suite, "suite")
        return read_table(db, what, suite)
    finally:
        db.dispose()


def runs(store: StoreURL | str | None = None, suite: str | None = None) -> "pd.DataFrame":
    """One row per (suite, run) of ``store`` (a URL; default ``sqlite:///results/bench.db``), of ``suite`` or of
    every suite, runs of every status (filter on ``status == "done"`` for the finished ones), ordered by suite,
    env, label and seed. ``bench export --what runs`` writes the same table.

    Columns: ``suite, env, algo, impl, label, seed, status`` (pending, running, done, failed, interrupted),
    ``attempt, timesteps`` (the budget in env steps), ``threshold, window, total_steps, episodes, wall_s, cpu_s``
    (training wall and CPU seconds), ``steps_to_threshold, seconds_to_threshold, final_return, auc, error, key``
    (the cell's hash), ``started_at, finished_at`` (Unix times), ``config`` (the cell's resolved identity, JSON)
    and ``meta`` (provenance, JSON). Columns the run has not reached are empty (NaN or ``None``).

    :raises BadInput: no store at ``store``, or no suite ``suite`` in it.
    """
    return _frame("runs", store, suite)


def episodes(store: StoreURL | str | None = None, suite: str | None = None) -> "pd.DataFrame":
    """One row per (suite, run, finished training episode): the learning curves, as ``bench export --what
    episodes`` writes them. ``store`` and ``suite`` as :func:`runs`.

    Columns: the run's ``suite, env, algo, impl, label, seed, status, key``, then the episode's ``idx`` (0, 1, …
    within the run), ``step`` (the run's env steps at its end), ``wall_s, cpu_s`` (training seconds since the run
    started; ``cpu_s`` empty in stores written before it was recorded), ``ret`` (its return) and ``length``.

    :raises BadInput: no store at ``store``, or no suite ``suite`` in it.
    """
    return _frame("episodes", store, suite)


def evaluations(store: StoreURL | str | None = None, suite: str | None = None) -> "pd.DataFrame":
    """One row per (suite, run, periodic evaluation): what a suite's ``eval: {every, episodes}`` recorded, the
    numbers rl-baselines3-zoo users plot from ``evaluations.npz`` (whose ``timesteps`` is ``step`` here, and
    whose per-episode ``results`` are summed up as ``mean_return``, ``std_return`` and ``n``). ``store`` and
    ``suite`` as :func:`runs`; a run without ``eval:`` has no rows.

    Columns: the run's ``suite, env, algo, impl, label, seed, status, key``, then ``idx`` (0, 1, … within the
    run), ``step`` (the run's env steps when it was taken), ``wall_s`` (wall seconds since the run started),
    ``mean_return, std_return`` and ``n`` (its deterministic episodes).

    :raises BadInput: no store at ``store``, or no suite ``suite`` in it.
    """
    return _frame("evaluations", store, suite)


def diagnostics(store: StoreURL | str | None = None, suite: str | None = None) -> "pd.DataFrame":
    """One row per (suite, run, stored diagnostic point), as ``bench export --what diagnostics`` writes them.
    ``store`` and ``suite`` as :func:`runs`.

    Columns: the run's ``suite, env, algo, impl, label, seed, status, key``, then ``step, name`` (``loss/policy``,
    ``policy/entropy``, …), ``value`` and ``n`` (the updates the value is the mean of).

    :raises BadInput: no store at ``store``, or no suite ``suite`` in it.
    """
    return _frame("diagnostics", store, suite)


def scores(store: StoreURL | str | None = None, suite: str | None = None, *,
           log: Callable[[str], None] | None = None) -> "pd.DataFrame":
    """The normalised per-run scores the report compares: one row per run it pools (a done run at its env's
    comparison budget and threshold; ``suite`` ``None``: every suite but claim and variant suites, as the report
    reads them), in the report's scale (0 the mean return of a uniform-random policy, 1 the env's threshold,
    capped at 1). The rows of ``bench export --format rliable-*``'s matrices. ``store`` as :func:`runs`. An env
    whose anchors are missing has them computed and stored first (a few seconds of random play; told to ``log``).

    Columns (:data:`SCORE_FRAME_COLUMNS`): ``key, env, label, algo, impl, seed, timesteps, total_steps,
    final_return``, ``solved`` (reached the threshold), ``t_steps`` and ``t_cpu`` (env steps and training CPU
    seconds to the threshold, or to the end when not solved), ``final_norm`` (normalised final return),
    ``auc_steps_norm`` and ``auc_time_norm`` (normalised area under the learning curve over env steps and over
    training CPU seconds; NaN where the env has no anchors or no time scale) and ``contended`` (the run shared
    its core: wall over 1.25 × CPU seconds).

    :raises BadInput: no store at ``store``, or no suite ``suite`` in it.
    """
    import pandas as pd

    from bench.analysis import scoring
    from bench.run.anchors import for_reading

    store_url = parse_store(store, "store")
    open_store(store_url, "store").dispose()
    with scoring.ReadModel(store_url) as db:
        check_suite(db, suite, "suite")
        scored = scoring.score(scoring.load(db, [suite] if suite else None, diagnostics=(), log=log, anchors=for_reading))
    if not len(scored.runs):
        return pd.DataFrame(columns=SCORE_FRAME_COLUMNS)
    return scored.runs[SCORE_FRAME_COLUMNS].reset_index(drop=True)
