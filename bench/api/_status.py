"""Where a suite stands in a store (``bench status``): each cell's state, per group and in all."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.api._common import BadInput, parse_store
from bench.api._run import _variant
from bench.storage.urls import StoreURL


@dataclass(frozen=True)
class CellStatus:
    """One cell of :func:`status`: where it stands, as plain values (``None``: not known).

    :param state: pending | running | done | failed | interrupted | stale (running, its owner dead or
        silent) | stalled (running and beating, its env steps not growing).
    :param heartbeat_s: seconds since a running run last reported.
    :param progress: how far a running run is (``412,160 of 1,000,000 (41%, ~13 min left)``).
    """

    env_id: str
    label: str
    seed: int
    state: str
    attempt: int = 0
    host: str = ""
    heartbeat_s: float | None = None
    progress: str | None = None
    total_steps: int | None = None
    final_return: float | None = None
    steps_to_threshold: int | None = None
    error: str = ""
    #: Wall seconds a running run has left at its pace so far (``None``: not running, or no pace yet).
    seconds_left: float | None = None


#: The order ``bench status`` names the states in: finished, in flight, then what still has to run.
STATES = ("done", "running", "stalled", "stale", "interrupted", "failed", "diverged", "pending")


@dataclass(frozen=True)
class GroupStatus:
    """The cells of one env × label of a suite (:meth:`SuiteStatus.groups`): how many are in each state, and
    when its running cells will have finished at their pace so far (``None``: none running, or no pace yet;
    its pending cells are not counted in, since when they start depends on the workers)."""

    env_id: str
    label: str
    counts: dict[str, int]
    seconds_left: float | None = None

    @property
    def cells(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class SuiteStatus:
    """``bench status``: every cell of a suite (:class:`CellStatus`), the count of each state, and how many
    done runs shared their core (wall > ``contention_ratio`` × CPU seconds)."""

    name: str
    cells: list[CellStatus]
    counts: dict[str, int]
    contended: int
    contention_ratio: float

    def groups(self) -> list[GroupStatus]:
        """The cells summed up per env × label, by env then label in the suite's order (a suite of 12,000 cells
        in 30 rows)."""
        envs = {e: i for i, e in enumerate(dict.fromkeys(c.env_id for c in self.cells))}
        labels = {lb: i for i, lb in enumerate(dict.fromkeys(c.label for c in self.cells))}
        counts: dict[tuple[str, str], dict[str, int]] = {}
        left: dict[tuple[str, str], float] = {}
        for c in self.cells:
            g = counts.setdefault((c.env_id, c.label), {})
            g[c.state] = g.get(c.state, 0) + 1
            if c.seconds_left is not None:
                left[(c.env_id, c.label)] = max(left.get((c.env_id, c.label), 0.0), c.seconds_left)
        return [GroupStatus(e, lb, counts[e, lb], left.get((e, lb)))
                for e, lb in sorted(counts, key=lambda g: (envs[g[0]], labels[g[1]]))]

    def failures(self) -> list[CellStatus]:
        """The cells that failed or diverged, in the suite's order."""
        return [c for c in self.cells if c.state in ("failed", "diverged")]


def status(suite: str | Path, store: StoreURL | str | None = None, *, overrides: list[str] | tuple[str, ...] = ()) -> SuiteStatus:
    """Where each cell of ``suite`` stands in ``store``, read without writing anything (on a cluster: every
    host's runs).

    :raises BadInput: the suite or URL is wrong, or there is no store at the URL (a mistyped ``--store``:
        a table of pending cells would hide it).
    :raises bench.storage.schema.StoreError: a store that cannot be reached or is not a bench store.
    """
    import time

    from bench.run.progress import is_stalled, row_fraction, run_progress, seconds_left
    from bench.storage.owners import is_claimable, owner_host
    from bench.storage.schema import StoreMissing
    from bench.storage.store import Store
    from bench.storage.vocabulary import CONTENTION_RATIO, contended_done, cpu_budget
    from bench.suites.suite import SuiteError, load_suite

    try:
        loaded = load_suite(Path(suite), overrides)
    except SuiteError as e:
        raise BadInput(e.lines) from None
    store_url = parse_store(store)
    try:
        db = Store(store_url, readonly=True)  # an unreachable or foreign store is an error, never "all pending"
    except StoreMissing:
        raise BadInput(f"--store: no results store at {store_url.shown}; allowed: a store `bench run {suite}` "
                       "wrote (it has not run yet, or --store names another file)") from None
    try:
        rows = db.rows([c.key for c in loaded.cells])
    finally:
        db.dispose()
    loaded = _variant(loaded, store_url)  # a run with these overrides is stored as this variant: named as it is
    cells: list[CellStatus] = []
    counts: dict[str, int] = {}
    now = time.time()
    for c in loaded.cells:
        r = rows.get(c.key)
        state = "pending" if r is None else r.status
        if r is not None and state == "running" and is_claimable(r):
            state = "stale"  # its runner died; the next `bench run` re-runs it
        elif r is not None and is_stalled(r):
            state = "stalled"  # alive, but no env step for a while (bench.run.progress.stall_after_s)
        counts[state] = counts.get(state, 0) + 1
        if r is None:
            cells.append(CellStatus(c.env_id, c.label, c.seed, state))
            continue
        live = state in ("running", "stalled")
        cells.append(CellStatus(
            c.env_id, c.label, c.seed, state, r.attempt or 0, owner_host(r.owner) or "",
            now - r.heartbeat_at if r.status == "running" and r.heartbeat_at else None,
            run_progress(r.total_steps, r.timesteps, r.started_at, now, r.cpu_s, cpu_budget(r.config))
            if live else None,
            r.total_steps, r.final_return, r.steps_to_threshold, (r.error or "")[:60],
            seconds_left(now - r.started_at, row_fraction(r)) if state == "running" and r.started_at else None))
    return SuiteStatus(loaded.suite.name, cells, counts, len(contended_done(rows)), CONTENTION_RATIO)
