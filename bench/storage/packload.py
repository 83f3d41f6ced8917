"""Packs into a store: ``bench import``'s :func:`load`, and :func:`unpack`, a SQLite copy of a folder of packs
that records the manifests it was built from (the tests read :mod:`bench.storage.packread`'s in-place reads
against it); and the private folder a cache may be kept in. Packs are written and verified in
:mod:`bench.storage.packed`.

    bench import results/reference/minatar --store sqlite:///results/work/minatar.db
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

import sqlalchemy as sa

import bench.storage.schema as schema
import bench.storage.store as st
from bench.storage.packed import MANIFEST, TABLES, clocks_to_s, verify
from bench.storage.studies import load_studies
from bench.storage.urls import StoreURL

#: The table inside a built cache that records the fingerprint of the manifests it was built from.
_CACHE_TABLE = "bench_reference_cache"


def fingerprint(packs: list[Path]) -> str:
    """A hash of the packs' manifests, in order: the cache is rebuilt when it changes. Each manifest
    lists the sha256 of every file of its pack (:func:`verify` checks them), so this covers the files'
    bytes without reading them again."""
    h = hashlib.sha256()
    for p in packs:
        h.update(f"{Path(p).name}\0".encode())
        h.update((Path(p) / MANIFEST).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def built_from(cache: Path) -> str | None:
    """The fingerprint recorded inside a built cache (None: no file, not SQLite, or built without one)."""
    cache = Path(cache)
    if not cache.is_file():
        return None
    try:
        # immutable: read as it is on disk, creating nothing beside it (it may sit on a read-only mount).
        con = sqlite3.connect(f"{cache.absolute().as_uri()}?immutable=1", uri=True)
        try:
            row = con.execute(f"SELECT fingerprint FROM {_CACHE_TABLE}").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return row[0][0] if len(row) == 1 and isinstance(row[0][0], str) else None


def unpack(packs: list[Path], cache: Path, *, on_build: Callable[[], None] | None = None,
           verified: bool = False) -> str:
    """A SQLite store holding every pack in ``packs``, built at ``cache`` unless it is already
    built from these very packs; returns its URL.

    Every pack is verified first (:func:`verify`). The cache is trusted only when the fingerprint
    recorded inside it (:func:`built_from`) is that of these packs' manifests; otherwise it is
    rebuilt. The store is built beside ``cache`` and moved into place, so a reader never sees a
    half-built one, and two readers building at once each end with a whole one.

    :param on_build: called before a build (not when the cache is current), to say it will take a while.
    :param verified: the caller has just verified every pack (:func:`verified_packs`): not hashed again.
    :raises PackError: a pack fails its check.
    """
    cache = Path(cache)
    for p in packs if not verified else ():
        verify(p)  # reads and hashes every file (its cost: docs/reference.md)
    fp = fingerprint(packs)
    if built_from(cache) == fp:
        return f"sqlite:///{cache}"
    if on_build is not None:
        on_build()
    cache.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_builds(cache)
    # One per builder (process and thread), so builders side by side never share a file.
    tmp = cache.with_name(f"{cache.name}.{os.getpid()}-{threading.get_ident()}.building")
    try:
        building = StoreURL.parse(f"sqlite:///{tmp}")
        db = st.Store(building)
        load(packs, db)
        with db.engine.begin() as c:
            c.execute(sa.text(f"CREATE TABLE {_CACHE_TABLE} (fingerprint TEXT NOT NULL)"))
            c.execute(sa.text(f"INSERT INTO {_CACHE_TABLE} (fingerprint) VALUES (:fp)"), {"fp": fp})
        db.dispose()
        load_studies(packs, building, durable=False)  # a build that dies is deleted, not used
        # A -wal or -shm left beside the old file belongs to it: SQLite would replay that WAL's frames into
        # the new file on its next open (a planted store's rows read as the cache's, seen in CI).
        for side in ("-wal", "-shm", "-journal"):
            cache.with_name(cache.name + side).unlink(missing_ok=True)
        tmp.replace(cache)
    finally:
        tmp.unlink(missing_ok=True)
    return f"sqlite:///{cache}"


def private_cache_dir(preferred: Path) -> Path:
    """A folder for the reference cache that only this user can write: ``preferred`` (made if missing),
    else this user's own folder in the temporary directory (made mode 0700), each used only if this
    user owns it, no one else can write it, and a file can be made in it; else a new private temporary
    folder (the cache is then built afresh). A cache in a folder others can write could be replaced by
    one that answers otherwise, whatever it records inside itself."""
    for d in (Path(preferred), Path(tempfile.gettempdir()) / f"bench-cache-{os.getuid()}"):
        try:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = d.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
                continue
            probe = d / f".writable-{os.getpid()}"
            probe.touch()
            probe.unlink()
            return d
        except OSError:
            continue
    return Path(tempfile.mkdtemp(prefix="bench-cache-"))


def _remove_abandoned_builds(cache: Path) -> None:
    """Delete half-built copies of ``cache`` whose builder is gone (killed before its ``finally``)."""
    for f in cache.parent.glob(f"{cache.name}.*.building"):
        try:
            os.kill(int(f.name[len(cache.name) + 1:-len(".building")].split("-")[0]), 0)
        except ProcessLookupError:
            f.unlink(missing_ok=True)
        except (ValueError, PermissionError):  # not ours to judge: another user's, or a name we did not write
            pass


def _fill_untried(c: Any, keys: Any) -> set[str]:
    """Delete, of the runs ``keys`` in the store, those pending and never attempted (nothing is recorded for
    them), so that a pack's attempt at the same cells is loaded in their place; returns their keys."""
    keys = list(keys)
    untried = (schema.runs.c.status == "pending") & (schema.runs.c.attempt == 0)
    gone: set[str] = set()
    for i in range(0, len(keys), 500):
        part = schema.runs.c.key.in_(keys[i:i + 500])
        gone |= {r.key for r in c.execute(sa.select(schema.runs.c.key).where(part & untried))}
    for i in range(0, len(gone), 500):
        c.execute(sa.delete(schema.runs).where(schema.runs.c.key.in_(sorted(gone)[i:i + 500]) & untried))
    return gone


def load(packs: list[Path], db: "st.Store") -> dict[str, int]:
    """Insert the rows of ``packs`` into the store ``db`` (any dialect), parents first, in one
    transaction; returns the runs it added (``new``) and those it found there (``kept``). What the store already
    holds wins, as the first writer does in a store: its suites and anchors are kept (packs share
    them), and a run it already has is kept whole, with its own episodes, diagnostics and
    evaluations (runs may be in two packs: one made before its sibling held them). So loading a
    pack twice changes nothing the second time. The one exception holds nothing to lose: a cell the store has
    as pending and never attempted takes the pack's attempt at it (a pack made with ``keep="envs"``, then the
    staged pack of the same suite, which holds the runs of its unfinished envs).
    """
    import pandas as pd

    counts = {"new": 0, "kept": 0}
    with db.engine.begin() as c:
        for p in packs:
            new_runs: set[str] = set()
            for name in TABLES:
                f = Path(p) / f"{name}.parquet"
                if not f.is_file():
                    continue
                df = pd.read_parquet(f)
                if name == "runs":
                    have = {r.key for i in range(0, len(df), 500) for r in c.execute(
                        sa.select(schema.runs.c.key).where(schema.runs.c.key.in_(list(df["key"][i:i + 500]))))}
                    have -= _fill_untried(c, df[df["key"].isin(have) & (df["status"] != "pending")]["key"])
                    df = df[~df["key"].isin(have)]
                    new_runs = set(df["key"])
                    counts["new"] += len(new_runs)
                    counts["kept"] += len(have)
                elif name in ("episodes", "diagnostics", "evaluations"):
                    df = df[df["key"].isin(new_runs)]
                if df.empty:
                    continue
                if name == "episodes":
                    df = clocks_to_s(df)
                table = schema.metadata.tables[name]
                df = df[[col for col in df.columns if col in table.c]]
                if name in ("episodes", "diagnostics", "evaluations"):  # millions of rows of plain numbers
                    schema.insert_frame(c, table, df)
                else:
                    c.execute(schema.dialect_insert(c, table).on_conflict_do_nothing(), df.astype(object).where(df.notna(), None).to_dict("records"))
    return counts
