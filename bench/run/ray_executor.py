"""Run a suite's cells as Ray tasks: the executor for clusters (``bench run --executor ray``).

Each cell is one Ray task, and the task runs :func:`bench.run.runner.run_cell`, the
same single-run function the local process pool runs: claim the run, train,
write everything in one transaction. So a cell does the same thing, records the
same data and gives the same returns wherever it runs.

What happens when something goes wrong
--------------------------------------
- **A worker dies** (killed, out of memory, its node lost): Ray re-submits the
  task, up to ``max_retries`` times (Ray's default, 3; see "Task fault
  tolerance" in the Ray docs). Every task claims its run under an owner tagged
  with a random id the driver drew for that task; a retry gets the same
  arguments, so the same tag, and takes over its own dead attempt at once, on
  any host (:func:`bench.storage.owners.is_claimable`). (Ray's task ids would not do:
  they are derived from the job id, and every new local Ray instance numbers
  its jobs from 1 again, so two drivers on two machines would share them.)
- **Training raises** (a NaN, a bad hyperparameter, no CUDA): ``run_cell``
  records a failed run with its error, exactly as locally. Python exceptions are
  never retried (``retry_exceptions=False``): a deterministic run fails the same
  way again.
- **Retries run out, or an error outside training** (say the store is
  unreachable from a node): the driver marks the run failed with the reason.
- **A run passes its limit** (``max_wall_minutes``, ``max_memory_mb``): the task
  stops itself and records the run as failed, limit named, with what it recorded
  (:mod:`bench.run.limits`, the same as in the local pool). A task whose training
  does not return is given up: it writes the run, then kills its own worker; Ray's
  retry of it finds the run recorded under its tag and returns that. A task whose
  watch cannot run at all is cancelled by the driver (``ray.cancel(force=True)``)
  :data:`~bench.run.limits.BACKSTOP_S` seconds past its wall-clock limit, or past its
  memory limit where its worker is on the driver's host. A run with a limit gets a
  worker of its own (Ray's ``max_calls=1``): Ray reuses workers from task to task,
  and another run's imports and leftovers must not count against its memory.
- **Ctrl-C**: the tasks are cancelled (their workers killed) and their runs are
  marked interrupted; the next ``bench run`` re-runs them.

``ray`` is an optional dependency (``pip install 'onpolicy-bench[ray]'``) and is imported
only here, only when this executor is asked for.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterator

from bench.distribution import install_hint
from bench.run.limits import WATCH_EVERY_S, Backstop, has_limits, needs_own_worker
from bench.run.pool import Interrupted
from bench.run.runner import Outcome, THREAD_ENV, run_cell
from bench.suites.suite import Cell

if TYPE_CHECKING:  # annotations only: the run layer opens the store through runner._store
    from bench.storage.urls import StoreURL

#: Ray's own default for tasks; a worker death is retried this many times.
MAX_RETRIES = 3
_ADDRESS = re.compile(r"^(auto|(ray://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5})$")


class RayUnavailable(Exception):
    """Ray is not installed, or the cluster cannot be reached; the message is one line."""


def check_address(address: str) -> str | None:
    """None if ``address`` has the form Ray accepts (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``), else why not."""
    if _ADDRESS.match(address):
        return None
    return f"{address!r} is not a Ray address; allowed: auto, HOST:PORT (the head's GCS port, 6379 by default)"


def connect(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Connect to the cluster at ``address``, or start a local Ray instance with ``num_cpus`` CPUs.

    Returns True if this call connected (the caller then owns ``ray.shutdown()``;
    Ray also stops at interpreter exit). A Ray already initialised in this
    process (a test fixture, a notebook) is used as it is and False returned.
    Raises :class:`RayUnavailable` with a one-line reason.
    """
    try:
        import ray
    except ImportError:
        raise RayUnavailable(f"ray is not installed; install it with {install_hint('ray')}") from None
    if ray.is_initialized():
        return False
    kw: dict[str, Any] = dict(include_dashboard=False, logging_level=logging.WARNING)
    try:
        if address:
            ray.init(address=address, **kw)
        else:
            with _worker_niceness(WORKER_NICENESS):
                ray.init(num_cpus=num_cpus, **kw)
    except (ConnectionError, ValueError, RuntimeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RayUnavailable(f"cannot connect to a Ray cluster at {address or 'a new local instance'}: {first}") from None
    return True


#: The niceness of the workers of a Ray instance that bench starts itself: 0, the local pool's. Ray's
#: raylet starts workers at 15 by default (its ``RAY_worker_niceness``), so that they yield to Ray's own
#: daemons; beside any ordinary process that is a near-total yield (the kernel weighs nice 15 against 0
#: as about 1 to 36). Measured on 2 cores beside two busy processes, 2026-11-26: a 65,536-step own-PPO
#: CartPole run took 7.3 CPU seconds and 194 s of wall time, most of it importing torch. Runs on a
#: cluster started with ``ray start`` keep that cluster's setting; each run records its niceness
#: (``meta.nice``).
WORKER_NICENESS = 0


@contextlib.contextmanager
def _worker_niceness(nice: int) -> Iterator[None]:
    """Set ``RAY_worker_niceness`` for the raylet that ``ray.init`` starts (it reads its environment),
    unless the user set it; restore the environment afterwards."""
    key = "RAY_worker_niceness"
    had = key in os.environ
    os.environ.setdefault(key, str(nice))
    try:
        yield
    finally:
        if not had:
            os.environ.pop(key, None)


def _task(store_url: StoreURL, cell: Cell, tag: str, remeasure: bool = False) -> Outcome:
    """The body of every Ray task: ``run_cell`` as this worker, tagged with the task's ``tag``.

    The owner is the worker's own ``host:pid:start`` (so a dead worker is seen as
    dead on its host, and ``bench status`` shows where each run is), tagged with
    the id that all attempts of this task share.
    """
    from bench.storage.owners import this_owner

    if not remeasure and (out := _recorded(store_url, cell, tag)) is not None:
        return out  # a retry after this task's earlier attempt wrote its run, then died (a limit's give-up)
    return run_cell(store_url, cell, this_owner(tag=tag), remeasure=remeasure)


#: The columns of a run row that make an outcome's summary (bench.run.runner.result_of's names).
_SUMMARY = ("total_steps", "episodes", "wall_s", "cpu_s", "steps_to_threshold", "seconds_to_threshold",
            "final_return", "auc")


def _recorded(store_url: StoreURL, cell: Cell, tag: str) -> Outcome | None:
    """The outcome an earlier attempt of the task tagged ``tag`` recorded for ``cell`` (done or failed), or None
    where it recorded none: the run is not finished, or another runner's."""
    from bench.run.runner import _store
    from bench.storage.owners import owner_tag

    row = _store(store_url).rows([cell.key]).get(cell.key)
    if row is None or row.status not in ("done", "failed") or owner_tag(row.owner) != tag:
        return None
    return Outcome(cell.key, row.status, row.error, {k: getattr(row, k) for k in _SUMMARY})


def run_ray(
    store_url: StoreURL,
    cells: list[Cell],
    on_done: Callable[[Cell, Outcome], None],
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    max_retries: int = MAX_RETRIES,
    max_in_flight: int | None = None,
    remeasure: frozenset[str] = frozenset(),
) -> list[Outcome]:
    """Run ``cells`` as Ray tasks; ``on_done`` sees each outcome as it arrives. The cells whose keys
    are in ``remeasure`` are done runs to measure again (:func:`bench.run.runner.remeasure_cell`).

    Connects as :func:`connect` does (and shuts down only a Ray it started
    itself). Each task asks for the cell's ``resources`` (``num_cpus``,
    ``num_gpus``) and runs with one torch/BLAS thread. ``max_in_flight`` caps the
    cells submitted at once (to share a cluster); by default all are submitted
    and Ray queues them by resources. Raises :class:`Interrupted` on Ctrl-C.
    """
    import ray

    started = connect(address, num_cpus)
    remote = ray.remote(_task)
    # A run with a limit of its suite's has a worker to itself, which exits after it (Ray's max_calls, which .options()
    # cannot set); the default wall-clock limit, which every run has, alone does not (bench.run.limits.needs_own_worker).
    alone = ray.remote(max_calls=1)(_task)
    # Fixed thread counts make wall-clock comparable across executors; workers of
    # the same runtime_env are pooled and reused from task to task.
    runtime_env = {"env_vars": dict(THREAD_ENV)}
    queue = deque(cells)
    in_flight: dict[Any, tuple[Cell, str]] = {}
    outcomes: list[Outcome] = []
    watching = any(has_limits(c) for c in cells)
    backstops: dict[Any, Backstop] = {}
    #: Tasks the driver cancelled past a limit, and why (their run's error).
    stopped: dict[Any, str] = {}
    try:
        while queue or in_flight:
            while queue and (max_in_flight is None or len(in_flight) < max_in_flight):
                cell = queue.popleft()
                tag = f"ray-{uuid.uuid4().hex[:16]}"
                ref = (alone if needs_own_worker(cell) else remote).options(
                    name=f"bench {cell.env_id} {cell.label} seed {cell.seed}",
                    num_cpus=cell.resources.get("num_cpus", 1.0),
                    num_gpus=cell.resources.get("num_gpus", 0.0),
                    max_retries=max_retries,
                    retry_exceptions=False,
                    runtime_env=runtime_env,
                ).remote(store_url, cell, tag, cell.key in remeasure)
                in_flight[ref] = (cell, tag)
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=WATCH_EVERY_S if watching else None)
            if watching:
                _backstop(ray, store_url, in_flight, backstops, stopped)
            for ref in ready:
                cell, tag = in_flight.pop(ref)
                backstops.pop(ref, None)
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    # Not a training error (run_cell records those): e.g. the store is unreachable from that node.
                    cause = e.cause if getattr(e, "cause", None) is not None else e
                    out = _give_up(store_url, [(cell, tag)], "failed", f"{type(cause).__name__}: {cause}".replace("\n", " "))[0]
                except ray.exceptions.RayError as e:
                    why = stopped.pop(ref, None) or (
                        f"the Ray task was lost {max_retries + 1} time(s) ({type(e).__name__}): its worker was "
                        "killed, ran out of memory or lost its node")
                    out = _give_up(store_url, [(cell, tag)], "failed", why)[0]
                outcomes.append(out)
                on_done(cell, out)
    except KeyboardInterrupt:
        for ref in in_flight:
            ray.cancel(ref, force=True)
        _give_up(store_url, list(in_flight.values()), "interrupted", "interrupted by the user (Ctrl-C)")
        raise Interrupted from None
    finally:
        if started:
            ray.shutdown()
    return outcomes


def _backstop(ray: Any, store_url: StoreURL, in_flight: dict[Any, tuple[Cell, str]], backstops: dict[Any, Backstop],
              stopped: dict[Any, str]) -> None:
    """Cancel (``force=True``: its worker is killed) each task whose run has stayed past a limit for
    :data:`~bench.run.limits.BACKSTOP_S`: its own watch could not stop it. The wall time counts from the run's
    claim (its row's ``started_at``, on the worker's clock); the memory is read only on this host."""
    from bench.run.runner import _store
    from bench.storage.owners import owner_host, owner_tag

    limited = {ref: ct for ref, ct in in_flight.items() if has_limits(ct[0]) and ref not in stopped}
    if not limited:
        return
    try:
        rows = _store(store_url).rows([cell.key for cell, _ in limited.values()])
    except Exception:  # noqa: BLE001 - a store briefly unreachable: the next check tries again
        return
    here = socket.gethostname()
    for ref, (cell, tag) in limited.items():
        row = rows.get(cell.key)
        if row is None or row.status != "running" or owner_tag(row.owner) != tag or row.started_at is None:
            continue  # queued, or not yet claimed
        pid = int(row.owner.rsplit(":", 2)[1]) if owner_host(row.owner) == here else None
        why = backstops.setdefault(ref, Backstop()).check(cell, time.time() - row.started_at, pid)
        if why is not None:
            stopped[ref] = why
            ray.cancel(ref, force=True)


def _give_up(store_url: StoreURL, tasks: list[tuple[Cell, str]], status: str, error: str) -> list[Outcome]:
    """Mark the runs that these (cell, tag) tasks still hold as ``status`` (failed | interrupted). A run that
    its task recorded before it was lost (a limit's give-up: bench.run.limits) keeps that record and outcome."""
    from bench.run.runner import _store
    from bench.storage.owners import owner_tag

    store = _store(store_url)
    rows = store.rows([cell.key for cell, _ in tasks])
    out = []
    for cell, tag in tasks:
        row = rows.get(cell.key)
        if row is not None and row.status == "running" and owner_tag(row.owner) == tag:
            store.release(row.owner, status, error)
        if status == "failed" and (recorded := _recorded(store_url, cell, tag)) is not None:
            out.append(recorded)
        else:
            out.append(Outcome(cell.key, "failed", error))
    return out
