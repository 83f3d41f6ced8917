"""Optuna studies (``bench tune``'s) in a store and in a pack: which are there, copied into a pack as
Optuna's own journal, and loaded back into a store with the trials cut off by the copy re-queued."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.storage.urls import StoreURL
from bench.storage.vocabulary import MAX_RETRY, STUDY_ATTR

#: A tuning suite's studies: Optuna's journal format (JSON lines, written and read by Optuna
#: itself, so every trial, state, intermediate value and attribute survives), gzipped.
STUDIES = "studies.journal.gz"


def suite_studies(store_url: StoreURL, suite: str | None = None) -> list[str]:
    """The names of the store's ``bench tune`` studies of tuning suite ``suite`` (every suite's with
    ``None``), sorted; none where the store has no Optuna tables."""
    return sorted(n for n, tag in _study_tags(store_url).items() if suite is None or tag.get("suite") == suite)


def tuning_suites(store_url: StoreURL) -> list[str]:
    """The tuning suites the store has ``bench tune`` studies of, sorted."""
    return sorted({tag.get("suite") for tag in _study_tags(store_url).values()} - {None})


def _study_tags(store_url: StoreURL) -> dict[str, dict]:
    """Study name → its bench settings (:data:`bench.storage.vocabulary.STUDY_ATTR`), for the bench studies in the store."""
    import optuna

    if not _has_studies(store_url):
        return {}
    with _optuna_storage(store_url) as storage:
        summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    return {s.study_name: tag for s in summaries if (tag := s.user_attrs.get(STUDY_ATTR))}


@contextlib.contextmanager
def _optuna_storage(store_url: StoreURL, *, durable: bool = True):
    """Optuna's storage on the store, its connections closed on leaving: a SQLite file that is then moved
    (:func:`bench.storage.packload.unpack` builds beside the cache) must have no connection left open on it.

    :param durable: False for a SQLite file that is thrown away if the process dies (the cache being
        built): its commits then skip the disk syncs, a third of copying the reference's studies
        (Optuna commits once per trial).
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(store_url.text)
    if not durable and storage.engine.dialect.name == "sqlite":
        def _unsynced(dbapi_conn, _record):
            dbapi_conn.execute("PRAGMA synchronous=OFF")
            dbapi_conn.execute("PRAGMA journal_mode=MEMORY")

        sa.event.listen(storage.engine, "connect", _unsynced)
        storage.engine.dispose()  # the connection Optuna opened to make its tables has not run it
    try:
        yield storage
    finally:
        storage.engine.dispose()


def _has_studies(store_url: StoreURL) -> bool:
    """Whether the store holds Optuna's tables (opening it with Optuna would create them)."""
    eng = sa.create_engine(store_url.text)
    try:
        with eng.connect() as c:
            return sa.inspect(c).has_table("studies") and sa.inspect(c).has_table("trials")
    finally:
        eng.dispose()


def write_studies(store_url: StoreURL, names: list[str], path: Path) -> dict:
    """Copy studies ``names`` into an Optuna journal, gzipped at ``path``; returns what they hold:
    ``count``, ``trials`` (per state) and ``cpu_s`` (the trials' recorded training CPU seconds)."""
    import gzip
    import tempfile

    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    states: dict[str, int] = {}
    cpu_s = 0.0
    with tempfile.TemporaryDirectory() as d, _optuna_storage(store_url) as src:
        journal = Path(d) / "studies.journal"
        to = JournalStorage(JournalFileBackend(str(journal)))
        for name in names:
            optuna.copy_study(from_study_name=name, from_storage=src, to_storage=to)
            for t in optuna.load_study(study_name=name, storage=src).get_trials(deepcopy=False):
                states[t.state.name.lower()] = states.get(t.state.name.lower(), 0) + 1
                cpu_s += float(t.user_attrs.get("cpu_s") or 0.0)
        # The same studies give the same bytes, so a reader's cache fingerprint stays put: each journal line's
        # writer (a random id per JournalStorage) is one name, and the gzip header carries no time.
        lines = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
        text = "".join(json.dumps({**op, "worker_id": "bench-pack"} if "worker_id" in op else op) + "\n" for op in lines)
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    return {"count": len(names), "trials": dict(sorted(states.items())), "cpu_s": cpu_s}


#: What a trial that was running when its study was copied out of its store says (user attr ``error``).
CUT_OFF = "cut off: running when its study was copied from another store, where its worker stayed; re-queued with the same parameters"


def requeue_cut_off(storage: Any, study_name: str) -> list[int]:  # ``storage``: Optuna's storage object, in Optuna's word
    """Fail the RUNNING trials of a study copied from another store, and re-queue each with its parameters.

    A copy (``bench import`` of a pack, or the reference cache) carries a trial that was running where it
    was packed, but not its worker nor its heartbeats: Optuna's heartbeat check only fails trials that
    have one, so such a trial would stay RUNNING for ever, counted neither done nor failed, and its
    configuration never tried. It is failed here (``error``: :data:`CUT_OFF`) and re-queued as a killed
    worker's trial is (:data:`bench.storage.vocabulary.MAX_RETRY`, Optuna's ``RetryHeartbeatStaleTrialCallback``), so the next
    ``bench tune`` runs it first. Every RUNNING trial is taken as cut off, which is right only for a
    study no worker is tuning (one just copied). Returns the numbers failed.
    """
    import warnings

    import optuna
    from optuna.trial import TrialState

    study = optuna.load_study(study_name=study_name, storage=storage)
    failed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # Enqueued first, so the retry does not inherit the error set below.
            optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)(study, t)
        storage.set_trial_user_attr(t._trial_id, "error", CUT_OFF)
        storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        failed.append(t.number)
    return failed


def load_studies(packs: list[Path], store_url: StoreURL, *, durable: bool = True) -> int:
    """Copy the studies of ``packs`` (their :data:`STUDIES`) into the store at ``store_url``; a study the
    store already has (by name) is kept as it is, as :func:`bench.storage.packload.load` keeps runs. A trial that was running
    where the study was packed is failed and re-queued with its parameters
    (:func:`requeue_cut_off`). Returns the studies added. ``durable``: as for
    :func:`_optuna_storage` (False only for a file that is thrown away if the process dies)."""
    import gzip
    import tempfile

    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    files = [Path(p) / STUDIES for p in packs if (Path(p) / STUDIES).is_file()]
    if not files:
        return 0
    have = set(suite_studies(store_url))
    added = 0
    with _optuna_storage(store_url, durable=durable) as dest:
        for f in files:
            with tempfile.TemporaryDirectory() as d:
                journal = Path(d) / "studies.journal"
                journal.write_bytes(gzip.decompress(f.read_bytes()))
                src = JournalStorage(JournalFileBackend(str(journal)))
                for name in sorted(optuna.get_all_study_names(src)):
                    if name in have:
                        continue
                    optuna.copy_study(from_study_name=name, from_storage=src, to_storage=dest)
                    requeue_cut_off(dest, name)  # no worker of this store runs them
                    have.add(name)
                    added += 1
    return added


def read_studies(store_url: StoreURL) -> list:
    """The store's ``bench tune`` studies (those with :data:`bench.storage.vocabulary.STUDY_ATTR`), as
    Optuna studies read-only: no table made, no file left beside the store. Empty where the store has no
    Optuna tables. The caller disposes of nothing: the studies hold their trials in Optuna's cache."""
    import optuna

    from bench.storage.urls import readonly_engine_args

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ro_url, kwargs = readonly_engine_args(store_url.text)
    try:
        storage = optuna.storages.RDBStorage(ro_url, engine_kwargs=kwargs, skip_compatibility_check=True,
                                             skip_table_creation=True)
        summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    except Exception:  # noqa: BLE001 - a results store without Optuna tables has no studies
        return []
    try:
        studies = [optuna.load_study(study_name=s.study_name, storage=storage)
                   for s in summaries if s.user_attrs.get(STUDY_ATTR)]
        for study in studies:
            study.get_trials(deepcopy=False)  # read now, so the engine can be closed
        return studies
    finally:
        storage.engine.dispose()


class _Journal:
    """A pack's journal held in memory, for Optuna to replay as it replays a journal file; never written
    (a pack is read-only). Replaying it is a few lines of JSON per trial, where copying its studies into
    an SQLite store (:func:`load_studies`) commits once per trial."""

    def __init__(self, logs: list[dict[str, Any]]):
        self._logs = logs

    def read_logs(self, log_number_from: int) -> list[dict[str, Any]]:
        return self._logs[log_number_from:]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        raise PermissionError("a pack's tuning studies are read-only; `bench import` the pack to tune on")


def read_packed_studies(packs: list[Path]) -> list:
    """The ``bench tune`` studies in the packs' journals (:data:`STUDIES`), read in place as Optuna studies:
    the first pack that holds a study name wins, as :func:`load_studies` keeps the first. A trial that was
    running where a study was packed stays RUNNING here (nothing re-queues it: the studies are read, not tuned)."""
    import gzip

    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import BaseJournalBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    backend = type("PackJournal", (_Journal, BaseJournalBackend), {})
    seen: set[str] = set()
    studies = []
    for f in (Path(p) / STUDIES for p in packs):
        if not f.is_file():
            continue
        logs = [json.loads(line) for line in gzip.decompress(f.read_bytes()).decode().splitlines() if line.strip()]
        storage = JournalStorage(backend(logs))
        summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
        for s in sorted(summaries, key=lambda s: s.study_name):
            if s.study_name in seen or not s.user_attrs.get(STUDY_ATTR):
                continue
            seen.add(s.study_name)
            studies.append(optuna.load_study(study_name=s.study_name, storage=storage))
    return studies


#: Episode clock columns as a pack stores them: integer milliseconds (see :data:`bench.storage.schema.CLOCK_DECIMALS`).
