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
  any host (:func:`bench.run.store.is_claimable`). (Ray's task ids would not do:
  they are derived from the job id, and every new local Ray instance numbers
  its jobs from 1 again, so two drivers on two machines would share them.)
- **Training raises** (a NaN, a bad hyperparameter, no CUDA): ``run_cell``
  records a failed run with its error, exactly as locally. Python exceptions are
  never retried (``retry_exceptions=False``): a deterministic run fails the same
  way again.
- **Retries run out, or an error outside training** (say the store is
  unreachable from a node): the driver marks the run failed with the reason.
- **Ctrl-C**: the tasks are cancelled (their workers killed) and their runs are
  marked interrupted; the next ``bench run`` re-runs them.

``ray`` is an optional dependency (``pip install 'bench[ray]'``) and is imported
only here, only when this executor is asked for.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
from collections import deque
from typing import Any, Callable, Iterator

from bench.run.runner import THREAD_ENV, Interrupted, Outcome, run_cell
from bench.suites.suite import Cell

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
        raise RayUnavailable("ray is not installed; install it with pip install 'bench[ray]'") from None
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


def _task(store_url: str, cell: Cell, tag: str, remeasure: bool = False) -> Outcome:
    """The body of every Ray task: ``run_cell`` as this worker, tagged with the task's ``tag``.

    The owner is the worker's own ``host:pid:start`` (so a dead worker is seen as
    dead on its host, and ``bench status`` shows where each run is), tagged with
    the id that all attempts of this task share.
    """
    from bench.run.store import this_owner

    return run_cell(store_url, cell, this_owner(tag=tag), remeasure=remeasure)


def run_ray(
    store_url: str,
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
    # Fixed thread counts make wall-clock comparable across executors; workers of
    # the same runtime_env are pooled and reused from task to task.
    runtime_env = {"env_vars": dict(THREAD_ENV)}
    queue = deque(cells)
    in_flight: dict[Any, tuple[Cell, str]] = {}
    outcomes: list[Outcome] = []
    try:
        while queue or in_flight:
            while queue and (max_in_flight is None or len(in_flight) < max_in_flight):
                cell = queue.popleft()
                tag = f"ray-{uuid.uuid4().hex[:16]}"
                ref = remote.options(
                    name=f"bench {cell.env_id} {cell.label} seed {cell.seed}",
                    num_cpus=cell.resources.get("num_cpus", 1.0),
                    num_gpus=cell.resources.get("num_gpus", 0.0),
                    max_retries=max_retries,
                    retry_exceptions=False,
                    runtime_env=runtime_env,
                ).remote(store_url, cell, tag, cell.key in remeasure)
                in_flight[ref] = (cell, tag)
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                cell, tag = in_flight.pop(ref)
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    # Not a training error (run_cell records those): e.g. the store is unreachable from that node.
                    cause = e.cause if getattr(e, "cause", None) is not None else e
                    out = _give_up(store_url, [(cell, tag)], "failed", f"{type(cause).__name__}: {cause}".replace("\n", " "))[0]
                except ray.exceptions.RayError as e:
                    why = (f"the Ray task was lost {max_retries + 1} time(s) ({type(e).__name__}): its worker was "
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


def _give_up(store_url: str, tasks: list[tuple[Cell, str]], status: str, error: str) -> list[Outcome]:
    """Mark the runs that these (cell, tag) tasks still hold as ``status`` (failed | interrupted)."""
    from bench.run.runner import _store
    from bench.run.store import owner_tag

    store = _store(store_url)
    rows = store.rows([cell.key for cell, _ in tasks])
    for cell, tag in tasks:
        row = rows.get(cell.key)
        if row is not None and row.status == "running" and owner_tag(row.owner) == tag:
            store.release(row.owner, status, error)
    return [Outcome(cell.key, "failed", error) for cell, _ in tasks]
