"""Running a suite: the plan (what would run, its cost), the run itself with callbacks for progress,
what a store records of each env, and where each hyperparameter came from."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench.api._common import BadInput, parse_store
from bench.distribution import install_hint
from bench.storage.urls import StoreURL

# --------------------------------------------------------------------------- #
# A store describes its envs
# --------------------------------------------------------------------------- #
def _spaces(env_id: str) -> dict[str, str]:
    """The raw env's spaces, in Gymnasium's own words (``Discrete(2)``, ``Box(-inf, inf, (4,), float32)``)."""
    from bench.envs.registry import make_raw

    env = make_raw(env_id)
    try:
        return {"action_space": str(env.action_space), "observation_space": str(env.observation_space)}
    finally:
        env.close()


def threshold_warning(env_id: str, random_return: float, threshold: float, episodes: int) -> str:
    """The one line said where an env's random policy already meets its threshold: every run, however bad,
    counts as solving it, and the env has no normalised scores (the report leaves it out of them)."""
    return (f"warning: {env_id}: the random policy's mean return over {episodes} episodes, {random_return:.4g}, "
            f"already meets the threshold {threshold:g}, so reaching it means nothing and the env is left out of "
            "cross-env scores; set a higher threshold for it")


def record_env_facts(store: Any, env_meta: dict[str, dict[str, Any]],
                     log: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Record in ``store`` what a reader needs of each env of ``env_meta`` (a suite's, as validated:
    threshold and its source, traits, horizon, time scale), with the env's spaces and its normalisation
    anchor, computed here while the env's package is importable (``bench run``'s process). Reports,
    ``bench recommend`` and exports then read them from the store alone (``env_facts``, ``anchors``).

    :param store: a writable :class:`bench.storage.store.Store`.
    :param log: told about anchors computed, and about an env whose facts could not all be gathered
        (what could be is still recorded).
    :returns: env key → the facts recorded.
    """
    from bench.run.anchors import ensure_anchors

    out: dict[str, dict[str, Any]] = {}
    for env_id, meta in env_meta.items():
        facts = {k: v for k, v in meta.items() if k != "traits_declared"}
        try:
            facts.update(_spaces(env_id))
        except Exception as e:  # noqa: BLE001 - a fact that cannot be had is left out, never a failed run
            if log:
                log(f"{env_id}: its spaces are not recorded ({type(e).__name__}: {e})")
        if meta.get("threshold") is not None:
            try:
                a = ensure_anchors(store, {env_id: meta["threshold"]}, log=log,
                                   families={env_id: meta.get("family")}).get(env_id)
            except Exception as e:  # noqa: BLE001 - as above: a report computes it later, or says it is missing
                a = None
                if log:
                    log(f"{env_id}: its normalisation anchor is not recorded ({type(e).__name__}: {e})")
            if a is not None:
                facts["anchor"] = {"random_return": a.random_return, "threshold": a.threshold,
                                   "episodes": a.episodes, "seed": a.seed}
                if not a.threshold > a.random_return and log:
                    log(threshold_warning(env_id, a.random_return, a.threshold, a.episodes))
        out[env_id] = facts
    store.put_env_facts(out)
    return out


# --------------------------------------------------------------------------- #
# Where each hyperparameter came from
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class HyperparamRow:
    """One resolved value of one label on one env: ``source`` is ``default`` (the algorithm's: SB3's where SB3
    has the algorithm), ``zoo`` (rl-baselines3-zoo's tuned values), ``bench`` (bench's own choice: its
    additions to the zoo's tables and its continuous-control ``normalize``,
    :func:`bench.algos.hyperparams.bench_choices`), ``suite`` (``hyperparams``, ``env_hyperparams`` or the
    env's ``vec_env``) or ``--set``."""

    label: str
    env: str
    name: str
    value: Any
    source: str


def resolved_hyperparams(loaded: Any) -> list[HyperparamRow]:
    """Every label's resolved hyperparameters on every env of ``loaded`` (a
    :class:`bench.suites.suite.LoadedSuite`), as its cells hold them, each with its source: the layers
    of :func:`bench.algos.hyperparams.resolve` read back (defaults ← zoo ← suite ← ``--set``)."""
    from bench.algos.hyperparams import bench_choices, zoo_defaults
    from bench.envs import parse_env_key

    suite = loaded.suite
    set_paths = {o.path for o in getattr(loaded, "overrides", ())}
    first: dict[tuple[str, str], Any] = {}
    for c in loaded.cells:
        first.setdefault((c.label, c.env_id), c)
    rows: list[HyperparamRow] = []
    for j, a in enumerate(suite.algorithms):
        for i, e in enumerate(suite.envs):
            cell = first.get((getattr(loaded, "labels", {}).get(a.display, a.display), e.key))  # a variant's own
            if cell is None:
                continue
            over_name = e.key if e.key in a.env_hyperparams else e.id
            over = a.env_hyperparams.get(over_name, {})
            zoo = {} if a.impl == "python" else zoo_defaults(a.algo, parse_env_key(e.key)[1])
            own = frozenset() if a.impl == "python" else bench_choices(a.algo, e.key)
            for name, value in cell.hyperparams.items():
                if name in over:
                    path = f"algorithms[{j}].env_hyperparams.{over_name}.{name}"
                    src = "--set" if path in set_paths else "suite"
                elif name in a.hyperparams:
                    src = "--set" if f"algorithms[{j}].hyperparams.{name}" in set_paths else "suite"
                elif name == "vec_env":
                    where = f"envs[{i}].vec_env" if e.vec_env else "defaults.vec_env"
                    src = "--set" if where in set_paths else "suite"
                elif name in own:
                    src = "bench"
                elif name in zoo:
                    src = "zoo"
                else:
                    src = "default"
                rows.append(HyperparamRow(cell.label, e.key, name, value, src))
    return rows


def hyperparams_lines(loaded: Any, shown: set[tuple[str, str]]) -> list[str]:
    """``bench run --dry-run``'s account of the hyperparameters: the overrides, then for each (label, env)
    of ``shown`` its resolved values grouped by source (``--set``, suite, bench, zoo, default), wrapped at 100."""
    import json
    import textwrap

    out = ["overrides: " + "; ".join(o.text for o in loaded.overrides)] if loaded.overrides else []
    if getattr(loaded, "variant_of", None) is not None:
        out.append(f"a variant of suite {loaded.variant_of}, which the store holds with another grid: stored "
                   f"beside it as {loaded.suite.name} (its runs are kept; --replace replaces its grid instead)")
    rows = [r for r in resolved_hyperparams(loaded) if (r.label, r.env) in shown]
    for label, env in dict.fromkeys((r.label, r.env) for r in rows):
        out.append(f"{label} on {env}:")
        for src in ("--set", "suite", "bench", "zoo", "default"):
            got = [f"{r.name}={json.dumps(r.value)}" for r in rows if (r.label, r.env, r.source) == (label, env, src)]
            if got:
                out.append(textwrap.fill(", ".join(got), width=100, initial_indent=f"  {src + ':':<9}",
                                         subsequent_indent=" " * 11))
    return out


# --------------------------------------------------------------------------- #
# Running a suite
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class RunPlan:
    """A suite checked against its store, nothing written yet: what :func:`run_suite` would run.

    ``cells`` are the suite's cells ``only`` selected (their keys, envs, labels, seeds and budgets);
    ``cost`` is the estimate :mod:`bench.suites.cost` makes of them.
    """

    loaded: Any
    store_url: StoreURL
    cells: list
    cost: Any
    executor: str = "local"
    address: str | None = None
    workers: int = 1
    #: With a Ray cluster address: at most this many cells at once (``None``: as many as the cluster takes).
    max_in_flight: int | None = None

    @property
    def name(self) -> str:
        return self.loaded.suite.name

    @property
    def url(self) -> str:
        """The store's normalised URL as text (kept for callers of 0.x; :attr:`store_url` is the type)."""
        return self.store_url.text

    def outputs(self) -> dict[str, str]:
        """Where this plan's runs write, for the line that ends a run: ``store`` (the URL, password hidden),
        ``policies`` (the folder, where a cell saves any: suite ``save:``), ``tensorboard`` (the folder) and
        ``wandb`` (the project) where asked for, and ``report``: the command that writes the suite's report."""
        out = self.cells[0].outputs if self.cells else None
        shown = self.store_url.shown
        where = {"store": shown}
        if out is not None and out.policies and any(c.save != "none" for c in self.cells):
            where["policies"] = out.policies
        if out is not None and out.tensorboard:
            where["tensorboard"] = out.tensorboard
        if out is not None and out.wandb:
            where["wandb"] = out.wandb
        where["report"] = f"bench report {self.name}" + ("" if self.store_url.is_default else f" --store {shown}")
        return where

    def with_outputs(self, outputs: Any) -> "RunPlan":
        """This plan with every cell writing ``outputs`` (:class:`bench.suites.suite.Outputs`)."""
        import dataclasses

        return dataclasses.replace(self, cells=[dataclasses.replace(c, outputs=outputs) for c in self.cells])


@dataclass
class SuiteRun:
    """What one :func:`run_suite` call did. ``results``: ``(cell, outcome)`` in the order the cells ended;
    ``interrupted``: the signal that stopped it (its finished cells are kept), else ``None``."""

    suite: str
    store_url: StoreURL
    cells: int
    done_before: int
    busy: int
    remeasured: int
    results: list = field(default_factory=list)
    seconds: float = 0.0
    interrupted: int | None = None

    @property
    def url(self) -> str:
        """The store's normalised URL as text (kept for callers of 0.x; :attr:`store_url` is the type)."""
        return self.store_url.text

    @property
    def failed(self) -> list:
        return [(c, o) for c, o in self.results if o.status == "failed"]

    def frame(self):
        """One row per cell this call ran: ``key, env, label, seed, status, final_return, steps_to_threshold,
        wall_s, error``."""
        import pandas as pd

        return pd.DataFrame([{"key": c.key, "env": c.env_id, "label": c.label, "seed": c.seed, "status": o.status,
                              "final_return": o.summary.get("final_return"),
                              "steps_to_threshold": o.summary.get("steps_to_threshold"), "wall_s": o.wall_s,
                              "error": o.error} for c, o in self.results],
                            columns=["key", "env", "label", "seed", "status", "final_return", "steps_to_threshold",
                                     "wall_s", "error"])


def _variant(loaded: Any, store_url: StoreURL) -> Any:
    """``loaded`` as the variant its overrides make (:mod:`bench.suites.variants`) where the store holds
    the suite's name with another grid; else as it is. Reads the store only; one that cannot be read (none
    yet, unreachable) holds no grid here, and :func:`run_suite` says why when it opens it."""
    from bench.storage.schema import StoreError
    from bench.storage.store import Store
    from bench.suites.variants import as_variant, is_other_grid

    if not loaded.overrides:
        return loaded
    try:
        db = Store(store_url, readonly=True)
    except StoreError:
        return loaded
    try:
        stored = db.grid(loaded.suite.name)
    except Exception:  # noqa: BLE001 - a store that cannot be read here is reported by the run that writes it
        stored = None
    finally:
        db.dispose()
    return as_variant(loaded, stored) if is_other_grid(loaded, stored) else loaded


def plan_run(suite: str | Path, store: StoreURL | str | None = None, *, only: str | None = None,
             overrides: list[str] | tuple[str, ...] = (), workers: int | None = None, executor: str = "local",
             address: str | None = None, outputs: Any = None, replace: bool = False,
             text: str | None = None, race: bool = False) -> RunPlan:
    """Check ``suite`` (a YAML file) and the ``store`` URL (default ``sqlite:///results/bench.db``), select the
    cells ``only`` names (e.g. ``"env=CartPole-v1,algo=ppo"``), and estimate their cost. Writes nothing.

    :param overrides: ``PATH=VALUE`` changes to the file (``bench run --set``), checked as the file is. Where the
        store already holds the suite's name with another grid, the run is a *variant* of it, stored beside it
        under a name of its own (``small.timesteps-60000.3f9a1c``; :mod:`bench.suites.variants`), unless ``replace``.
    :param replace: the grid is to replace the stored one of the suite's name (:func:`run_suite`), never a variant.
    :param text: the suite's YAML, where ``suite`` names a file not written yet (a one-line run's,
        :func:`bench.api.oneline_suite`).
    :param race: a race plans it (:func:`bench.api.race_file`); else a ``race:`` block is refused with a hint.
    :param outputs: the cells' :class:`bench.suites.suite.Outputs` (saved policies, TensorBoard, W&B);
        default: policies beside a SQLite store, else under ``results/policies``.
    :raises BadInput: the suite, ``only``, the URL or the executor options are wrong (one line each).
    """
    import dataclasses

    from bench.run.provenance import blas_kernel_problem
    from bench.run.saving import policies_dir
    from bench.suites.cost import estimate
    from bench.suites.suite import Outputs, SuiteError, load_suite, load_suite_text, parse_only, select

    try:
        loaded = load_suite(Path(suite), overrides) if text is None else load_suite_text(text, str(suite), overrides)
    except SuiteError as e:
        raise BadInput(e.lines) from None
    if loaded.suite.race is not None and not race:
        raise BadInput(f"{suite}: race: this suite is a race; run it with `bench race {suite}` (docs/race.md), or its "
                       f"whole grid with `bench run {suite} --set race=null`")
    try:
        filt = parse_only(only)
    except ValueError as e:
        raise BadInput(str(e)) from None
    store_url = parse_store(store)
    if outputs is None:
        outputs = Outputs(policies=str(policies_dir(store_url).resolve()))
    named = loaded.cells
    if not replace:
        loaded = _variant(loaded, store_url)
    # --only names labels as the file does; a variant's own labels work too.
    mine = {c.key: c for c in loaded.cells}
    cells = [dataclasses.replace(mine[c.key], outputs=outputs) for c in (select(named, filt) or select(loaded.cells, filt))]
    if not cells:
        raise BadInput(f"--only: {only!r} matches none of the {len(loaded.cells)} cells of {suite}")
    if executor not in ("local", "ray"):
        raise BadInput(f"--executor: {executor!r} is not allowed; allowed: local, ray")
    if executor == "local" and (why := blas_kernel_problem()) is not None:
        raise BadInput(why)
    if address is not None:
        from bench.run.ray_executor import check_address

        if executor != "ray":
            raise BadInput(f"--address: only used with --executor ray (got --address {address!r} with --executor "
                           f"{executor})")
        if (why := check_address(address)) is not None:
            raise BadInput(f"--address: {why}")
        if store_url.backend == "sqlite":
            # Every worker must reach the store, and SQLite's locking is only safe on one host.
            raise BadInput(f"--store: SQLite is not for several hosts; with --executor ray --address give a "
                           f"PostgreSQL store, e.g. postgresql+psycopg://USER@HOST:5432/DB (got {store_url.shown!r})")
    return RunPlan(loaded, store_url, cells, estimate(cells, loaded.env_meta), executor, address,
                   workers or os.cpu_count() or 1, workers if address else None)


def run_suite(suite: str | Path | RunPlan, store: StoreURL | str | None = None, *, only: str | None = None,
              overrides: list[str] | tuple[str, ...] = (), workers: int | None = None, executor: str = "local",
              address: str | None = None, replace: bool = False, remeasure: bool = False, yes: bool = False,
              on_start: Callable[[SuiteRun, list], None] | None = None,
              on_done: Callable[[Any, Any], None] | None = None,
              on_poll: Callable[[dict[str, float]], None] | None = None,
              log: Callable[[str], None] | None = None) -> SuiteRun:
    """Run a suite's cells that are not done yet (``bench run``), and return what happened.

    ``suite`` is a YAML file (checked with :func:`plan_run`, which takes ``store``, ``only``, ``overrides``,
    ``workers``, ``executor`` and ``address``) or a :class:`RunPlan`. Cells another runner holds are left to it;
    with ``remeasure``, done runs that shared their core are run again and replaced only if the new run had its
    core to itself. Callbacks: ``on_start(run, todo)`` once the store is registered, ``on_done(cell, outcome)``
    as each cell ends, ``on_poll({key: fraction})`` every few seconds for the cells in flight.

    :raises BadInput: as :func:`plan_run`; the store already holds another suite of that name (unless
        ``replace``); the estimated cost needs confirming (over 1,000 CPU-hours) and ``yes`` is not set;
        Ray is not installed or its cluster cannot be reached.
    """
    plan = suite if isinstance(suite, RunPlan) else plan_run(
        suite, store, only=only, overrides=overrides, workers=workers, executor=executor, address=address,
        replace=replace)
    _check_start(plan, yes)
    db = _register(plan, replace, log)
    run, todo, again = _todo(db, plan, remeasure)
    if on_start is not None:
        on_start(run, todo)
    if todo:
        _execute(plan, db, run, todo, again, on_done, on_poll)
    return run


def _check_start(plan: RunPlan, yes: bool) -> None:
    """Refuse, before anything is written, a run whose cost needs confirming (and ``yes`` is not set), and a Ray
    executor that is not installed or whose cluster cannot be reached."""
    if plan.cost.needs_confirmation() and not yes:
        raise BadInput(f"{plan.loaded.path}: the cells to run would take {plan.cost.line()}; to start it, run again "
                       "with --yes (or lower the budgets)")
    if plan.executor != "ray":
        return
    from bench.run.ray_executor import RayUnavailable, connect

    try:  # a cluster that cannot be reached is found out before anything is written
        import ray  # noqa: F401

        if plan.address is not None:
            connect(plan.address)  # stopped at exit: ray.init registers ray.shutdown with atexit
    except ImportError:
        raise BadInput(f"--executor: ray is not installed; install it with {install_hint('ray')} (allowed: "
                       "local, ray)") from None
    except RayUnavailable as e:
        raise BadInput(f"--address: {e}") from None


def _register(plan: RunPlan, replace: bool, log: Callable[[str], None] | None) -> Any:
    """The store opened for writing, with the plan's suite registered in it and its envs' facts recorded."""
    from bench.storage.schema import SuiteConflict
    from bench.storage.store import Store
    from bench.suites.variants import stored_spec

    db = Store(plan.store_url)
    if plan.loaded.variant_of is not None and log is not None:
        log(f"{plan.loaded.path}: suite {plan.loaded.variant_of} is in the store with another grid, so this run "
            f"with --set is its variant {plan.name}, stored beside it (the runs of {plan.loaded.variant_of} are "
            "kept, `bench report` sets the two side by side; --replace replaces its grid instead)")
    try:
        db.register(plan.name, str(plan.loaded.path), stored_spec(plan.loaded),
                    plan.loaded.env_meta, plan.loaded.cells, replace=replace)
    except SuiteConflict as e:
        raise BadInput(f"{plan.loaded.path}: name: {e}") from None
    # The store describes its envs (traits, spaces, threshold, anchor, time scale), so it is read later
    # without importing them: recorded here, where the env's package is importable.
    record_env_facts(db, {c.env_id: plan.loaded.env_meta[c.env_id] for c in plan.cells}, log=log)
    return db


def _todo(db: Any, plan: RunPlan, remeasure: bool) -> tuple[SuiteRun, list, frozenset[str]]:
    """What this call runs: the :class:`SuiteRun` it fills, the cells to run (claimable ones, then with
    ``remeasure`` the contended done ones), and the keys of those done ones, to measure again."""
    from bench.storage.owners import is_claimable
    from bench.storage.vocabulary import contended_done

    cells = plan.cells
    rows = db.rows([c.key for c in cells])
    todo = [c for c in cells if is_claimable(rows[c.key])]
    done_before = sum(rows[c.key].status == "done" for c in cells)
    again = frozenset(contended_done(rows) if remeasure else ())
    todo += [c for c in cells if c.key in again]
    run = SuiteRun(plan.name, plan.store_url, len(cells), done_before,
                   len(cells) - len(todo) - done_before + len(again), len(again))
    return run, todo, again


def _execute(plan: RunPlan, db: Any, run: SuiteRun, todo: list, again: frozenset[str],
             on_done: Callable[[Any, Any], None] | None, on_poll: Callable[[dict[str, float]], None] | None) -> None:
    """Run ``todo`` on the plan's executor, filling ``run`` (its results, seconds, and the signal that stopped it)."""
    import time

    from bench.run.pool import Interrupted, run_local
    from bench.run.progress import LiveProgress
    from bench.run.runner import HEARTBEAT_EVERY_S
    from bench.storage.owners import this_owner

    def finished(cell, outcome) -> None:
        run.results.append((cell, outcome))
        live.finished(cell.key)
        if on_done is not None:
            on_done(cell, outcome)

    live = LiveProgress(db.rows, [c.key for c in todo], on_poll or (lambda _: None), every=HEARTBEAT_EVERY_S)
    t0 = time.perf_counter()
    try:
        with live:
            if plan.executor == "ray":
                from bench.run.ray_executor import run_ray

                run_ray(plan.store_url, todo, finished, num_cpus=plan.workers,
                        max_in_flight=plan.max_in_flight, remeasure=again)
            else:
                run_local(plan.store_url, todo, this_owner(), plan.workers, finished, remeasure=again)
    except Interrupted as e:
        run.interrupted = e.signum
    run.seconds = time.perf_counter() - t0


def run_outputs(store: StoreURL | str, tensorboard: Path | None = None, wandb: str | None = None,
                artifacts: Path | None = None, verbose: bool = False) -> Any:
    """``bench run``'s ``--tensorboard``, ``--wandb``, ``--artifacts`` and ``--verbose`` as the cells'
    :class:`bench.suites.suite.Outputs`, checked. Paths are made absolute here: a Ray worker need not share
    this process's working directory.

    :raises BadInput: a logger whose extra is not installed, a bad W&B project name, a path that cannot be written.
    """
    from bench.api._common import writable
    from bench.run.loggers import missing
    from bench.run.saving import policies_dir
    from bench.suites.suite import Outputs

    for flag, given in (("--tensorboard", tensorboard), ("--wandb", wandb)):
        if given is not None and (why := missing(flag)):
            raise BadInput(why)
    if wandb is not None and (not wandb.strip() or any(c in wandb for c in "/\\#?%:")):
        raise BadInput(f"--wandb: {wandb!r} is not a W&B project name; allowed: a name without / \\ # ? % :")
    tb, art = (None if p is None else str(writable(f, p, folder=True).resolve())
               for f, p in (("--tensorboard", tensorboard), ("--artifacts", artifacts)))
    return Outputs(policies=art or str(policies_dir(parse_store(store)).resolve()), tensorboard=tb, wandb=wandb, verbose=verbose)


def contended_keys(store: StoreURL | str, cells: list) -> set[str]:
    """Keys of the done runs among ``cells`` that shared their core (``bench run --remeasure contended``
    would run them again), read without writing anything; none where there is no store yet."""
    from bench.storage.schema import StoreMissing
    from bench.storage.store import Store
    from bench.storage.vocabulary import contended_done

    try:
        db = Store(parse_store(store), readonly=True)
    except StoreMissing:
        return set()
    try:
        return contended_done(db.rows([c.key for c in cells]))
    finally:
        db.dispose()
