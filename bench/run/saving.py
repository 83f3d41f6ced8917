"""Saved policies: where they go, and writing a run's beside its store.

A suite opts in with ``save: final | best`` (``defaults.save``, or per label). Each done run then
gets a folder named by its key in the store's policies folder:

- SQLite ``sqlite:///results/bench.db`` → ``results/bench.policies/<key>/``;
- any other store (PostgreSQL) → ``results/policies/<key>/``, or ``bench run --artifacts DIR``.

In it, per kept policy (``final``: after the last update; ``best``: at the best periodic evaluation),
the policy's files and a manifest ``final.json`` with what acting needs besides: the format, the env
key, the algorithm and implementation, and the hyperparameters that built the network. The files are
data only, read back without unpickling anything (:mod:`bench.algos.saved_files`):

- ``final.pt``, the project's own torch policies: tensors and plain values (:mod:`bench.algos.checkpoint`);
- ``final.npz``, the NumPy REINFORCE: arrays;
- SB3 (:mod:`bench.algos.sb3_saved`): ``final.sb3.pt`` (the policy's state dict), ``final.sb3.json``
  (its policy class and spaces) and, when the run normalised observations, ``final.vecnormalize.npz``.
  Earlier versions wrote SB3's ``final.zip`` and ``final.vecnormalize.pkl`` (pickles), which
  ``bench eval`` reads only with ``--trust``.

The run's ``meta["policies"]`` in the store says where the folder is and what it holds. A run that
failed keeps no policy.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: `bench eval` and `bench.api` load this without the suite schema (pydantic)
    from bench.storage.urls import StoreURL
    from bench.suites.suite import Cell

#: The folder of saved policies for stores that are not a SQLite file.
DEFAULT_POLICIES = "results/policies"
#: The manifest's format version.
MANIFEST_VERSION = 1


def policies_dir(store_url: StoreURL, override: str | None = None) -> Path:
    """The folder of saved policies for a store: ``override`` when given, else beside a SQLite file
    (``results/bench.db`` → ``results/bench.policies``), else :data:`DEFAULT_POLICIES`."""
    if override:
        return Path(override)
    if (db := store_url.sqlite_path) is not None:
        return db.with_name(f"{db.stem}.policies")
    return Path(DEFAULT_POLICIES)


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def save_policies(cell: Cell, recorder: Any, store_url: StoreURL) -> dict[str, Any] | None:
    """Write the policies ``recorder`` kept for ``cell`` (``cell.save``); returns what goes into the run's
    ``meta["policies"]`` (``{"dir", "kept": {kind: {"step", "eval_return"?, "files"}}}``), or ``None``
    when nothing was kept (saving off, or no update happened)."""
    if cell.save == "none":
        return None
    kept: dict[str, dict[str, Any]] = {}
    final = recorder.final_checkpoint()
    if final is not None:
        kept["final"] = {"step": int(recorder.steps), "checkpoint": final}
    if cell.save == "best" and recorder.best is not None:
        kept["best"] = {k: recorder.best[k] for k in ("step", "eval_return", "checkpoint")}
    if not kept:
        return None
    folder = policies_dir(store_url, cell.outputs.policies) / cell.key
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"dir": str(folder.resolve()), "kept": {}}
    for kind, what in kept.items():
        ck = what.pop("checkpoint")
        files = {suffix: f"{kind}.{suffix}" for suffix in ck["files"]}
        for suffix, data in ck["files"].items():
            _write(folder / files[suffix], data)
        manifest = {"version": MANIFEST_VERSION, "kind": kind, "format": ck["format"], "files": files,
                    "key": cell.key, "env_id": cell.env_id, "algo": cell.algo, "impl": cell.impl, "label": cell.label,
                    "seed": cell.seed, "hyperparams": cell.hyperparams, **what}
        _write(folder / f"{kind}.json", json.dumps(manifest, indent=1, sort_keys=True, default=str).encode())
        out["kept"][kind] = {**what, "files": [*files.values(), f"{kind}.json"]}
    return out


def finish_outputs(cell: Cell, recorder: Any, result: Any, error: str | None, store_url: StoreURL | None) -> None:
    """After a run: close its sinks (bench.run.loggers) and, for a run that did not fail, write the policies it
    kept into ``result.meta["policies"]``. A policy that cannot be written does not fail the run, which is a
    result all the same: ``meta["policies_error"]`` says why."""
    if recorder.sink is not None:
        recorder.sink.close()
    if error is not None or store_url is None:
        return
    try:
        saved = save_policies(cell, recorder, store_url)
    except Exception as e:  # noqa: BLE001 - a full disk must not throw away a finished run
        result.meta["policies_error"] = " ".join(f"{type(e).__name__}: {e}".split())
        return
    if saved is not None:
        result.meta["policies"] = saved
