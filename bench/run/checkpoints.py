"""Mid-run checkpoints on disk: where a run's go, writing them whole, and reading them back as data only.

A suite turns them on with ``checkpoint_every: <env steps>`` (``defaults`` or per label). A run of the
project's own algorithms then saves its training state every that many steps, at an update boundary
(:mod:`bench.algos.resume` says what it holds), into a folder keyed by its cell key beside the store's
saved policies:

- SQLite ``sqlite:///results/bench.db`` → ``results/bench.policies/<key>/checkpoint/``;
- any other store → ``results/policies/<key>/checkpoint/``, or under ``bench run --artifacts DIR``,

so a Ray worker on another machine continues from a shared folder. A run that starts and finds one
continues from it, and one that finishes (done or failed) removes it.

The folder holds three files: ``tensors-<steps>.pt`` (``torch.save`` of a flat dict of tensors),
``arrays-<steps>.npz`` (NumPy arrays, no objects) and ``checkpoint.json`` (everything else, with the other
two files' names and SHA-256 digests), written in this order, each whole or not at all, and the older
step's files removed only after, so a run killed at any moment leaves one readable checkpoint. Reading
never unpickles: ``torch.load(weights_only=True)`` and ``numpy.load(allow_pickle=False)``. A checkpoint
that is not what this module wrote (tampered, truncated, another version, a planted pickle) is refused with
:class:`CheckpointError`, one line naming the file and why: the run fails with it, and nothing runs from it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from bench.algos.resume import Snapshot
from bench.run.saving import _write

#: The checkpoint file's format version.
FORMAT = 1
MANIFEST = "checkpoint.json"


class CheckpointError(Exception):
    """A checkpoint that is refused; its message is one line: the file and why."""


def checkpoint_dir(policies: Path, key: str) -> Path:
    """The folder of cell ``key``'s checkpoint under a policies folder (:func:`bench.run.saving.policies_dir`)."""
    return policies / key / "checkpoint"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Checkpoints:
    """One run's checkpoints: :meth:`load` the last, :meth:`save` one when :meth:`due`.

    :param folder: where they go (:func:`checkpoint_dir`).
    :param every: env steps between two checkpoints.
    :param key: the cell key, written into the manifest and checked on reading.
    :param pause_at: stop the run at the first update boundary at or past this env step, after a checkpoint
        there (:class:`bench.algos.resume.Paused`; a race's rung); ``None``: run to the end.
    """

    def __init__(self, folder: Path, every: int, key: str, pause_at: int | None = None):
        self.folder, self.every, self.key = Path(folder), int(every), key
        self.pause_at = pause_at
        self._next = self.every
        #: What the run's ``meta["checkpoints"]`` says: the interval, how many were taken, the step it
        #: continued from, or why it took none.
        self.note: dict[str, Any] = {"every": self.every, "taken": 0,
                                     "off": "its implementation takes none (SB3, a plugin, A3C)"}

    # -- the driver's side ------------------------------------------------------
    def start(self, steps: int) -> None:
        """Training starts (or continues, from a checkpoint put back) at ``steps``: the next checkpoint is due at
        the next multiple of ``every``."""
        self.note.pop("off", None)
        if steps > 0 and "resumed_from_step" not in self.note:
            self.note["resumed_from_step"] = int(steps)
        self._next = (steps // self.every + 1) * self.every

    def off(self, why: str | None) -> None:
        """This run takes none (``why``): the run records it."""
        self.note["off"] = why

    def due(self, steps: int) -> bool:
        return steps >= self._next

    def pause_due(self, steps: int) -> bool:
        """Whether the run has reached its pause step (:attr:`pause_at`)."""
        return self.pause_at is not None and steps >= self.pause_at

    def refuse(self, why: str) -> None:
        """The saved checkpoint cannot be put back into this run. :raises CheckpointError: always."""
        raise CheckpointError(self._line(self.folder / MANIFEST, why))

    def _line(self, path: Path, why: str) -> str:
        return (f"checkpoint {path}: {why}; it was not used (delete {self.folder} to run this cell again from "
                "step 0)")

    def save(self, snap: Snapshot, steps: int) -> bool:
        """Write ``snap``, taken after the update that reached ``steps``; then remove the older one's files.
        Returns whether it was written (not, on a full disk: the note says why)."""
        import torch

        buf = io.BytesIO()
        torch.save(snap.tensors, buf)
        tensors = buf.getvalue()
        buf = io.BytesIO()
        np.savez(buf, allow_pickle=False, **snap.arrays)
        arrays = buf.getvalue()
        files = {"tensors": f"tensors-{steps}.pt", "arrays": f"arrays-{steps}.npz"}
        manifest = {"format": FORMAT, "key": self.key, "steps": steps, "files": files,
                    "sha256": {"tensors": _sha(tensors), "arrays": _sha(arrays)}, "meta": snap.meta}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            _write(self.folder / files["tensors"], tensors)
            _write(self.folder / files["arrays"], arrays)
            _write(self.folder / MANIFEST, json.dumps(manifest, sort_keys=True).encode())
            for f in self.folder.iterdir():  # the older checkpoint's files, now that the manifest names the new ones
                if f.name not in (MANIFEST, *files.values()):
                    f.unlink(missing_ok=True)
        except OSError as e:  # a full disk must not fail the run: it goes on without (its last checkpoint stays)
            self.note["error"] = " ".join(f"{type(e).__name__}: {e}".split())
            self._next = float("inf")  # type: ignore[assignment]
            return False
        self._next = (steps // self.every + 1) * self.every
        self.note["taken"] += 1
        return True

    def load(self) -> Snapshot | None:
        """The saved checkpoint, or ``None`` when there is none. :raises CheckpointError: one that is refused."""
        path = self.folder / MANIFEST
        if not path.is_file():
            return None
        try:
            manifest = json.loads(path.read_bytes())
            ok = (isinstance(manifest, dict) and manifest.get("format") == FORMAT
                  and isinstance(manifest.get("files"), dict) and isinstance(manifest.get("sha256"), dict)
                  and isinstance(manifest.get("meta"), dict))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(self._line(path, f"not a checkpoint manifest ({type(e).__name__})")) from None
        if not ok:
            raise CheckpointError(self._line(path, f"not a checkpoint manifest of format {FORMAT}"))
        if manifest.get("key") != self.key:
            raise CheckpointError(self._line(path, f"it belongs to cell {manifest.get('key')!r}, not {self.key!r}"))
        blobs = {}
        for kind in ("tensors", "arrays"):
            name = manifest["files"].get(kind)
            f = self.folder / str(name)
            if not isinstance(name, str) or f.parent != self.folder or not f.is_file():
                raise CheckpointError(self._line(path, f"its {kind} file {name!r} is missing"))
            blobs[kind] = f.read_bytes()
            if _sha(blobs[kind]) != manifest["sha256"].get(kind):
                raise CheckpointError(self._line(f, "its SHA-256 is not the one its manifest records (changed "
                                                    "or truncated after it was written)"))
        tensors = self._tensors(self.folder / manifest["files"]["tensors"], blobs["tensors"])
        arrays = self._arrays(self.folder / manifest["files"]["arrays"], blobs["arrays"])
        return Snapshot(tensors, arrays, manifest["meta"])

    def _tensors(self, path: Path, data: bytes) -> dict[str, Any]:
        import torch

        try:  # weights_only: tensors and plain containers only; any other object in the pickle is refused
            out = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - whatever the file holds, it is refused, not run
            why = " ".join(str(e).split())[:200]
            raise CheckpointError(self._line(path, f"not a data-only tensor file ({type(e).__name__}: {why})")) from None
        if not isinstance(out, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in out.items()):
            raise CheckpointError(self._line(path, "not a flat dict of named tensors"))
        return out

    def _arrays(self, path: Path, data: bytes) -> dict[str, np.ndarray]:
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:  # an object array is a ValueError here
            why = " ".join(str(e).split())[:200]
            raise CheckpointError(self._line(path, f"not a data-only array file ({type(e).__name__}: {why})")) from None

    def clear(self) -> None:
        """Remove the checkpoint (the run is recorded): its folder, and the cell's folder if nothing else is in it."""
        shutil.rmtree(self.folder, ignore_errors=True)
        try:
            os.rmdir(self.folder.parent)
        except OSError:  # saved policies live there too, or it is gone already
            pass
