"""The pieces every service shares: the user's error, which store a reading command answers from, where
the shipped reference is, and whether an output path can be written."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.storage import packed, packload, packread
from bench.storage.schema import StoreError, StoreMissing
from bench.storage.urls import DEFAULT_URL, StoreURL, describe_url

class BadInput(ValueError):
    """A user's error, found before anything was written: ``lines``, one per problem, each naming what was
    wrong and what is allowed."""

    def __init__(self, lines: str | list[str]):
        self.lines = [lines] if isinstance(lines, str) else list(lines)
        super().__init__("; ".join(self.lines))


#: The project's shipped reference results: one packed folder per category (`bench export --format pack`),
#: in the working directory's checkout or else in the checkout this package runs from (an editable
#: install), so that `bench recommend` answers from any directory.
REFERENCE_DIR = Path("results/reference")
_CHECKOUT_REFERENCE_DIR = Path(__file__).resolve().parents[2] / "results" / "reference"


def reference_dir() -> Path | None:
    """Where the shipped reference is: ``$BENCH_REFERENCE_DIR`` where set (tests, or a reference kept
    elsewhere), else the working directory's ``results/reference``, else the package's checkout's; ``None``
    where none holds a pack (a wheel installed on its own)."""
    if os.environ.get(packed.REFERENCE_ENV):
        return Path(os.environ[packed.REFERENCE_ENV])
    for d in (REFERENCE_DIR, _CHECKOUT_REFERENCE_DIR):
        if d.is_dir() and packed.holds_packs(d):
            return d
    return None


@dataclass(frozen=True)
class Reference:
    """The shipped reference: ``url`` to read it by (``packs:FOLDER``, read in place by
    :class:`bench.storage.packread.PackSet`),
    ``folder`` it came from, ``packs`` in it, ``manifests``: each pack's folder name and manifest sha256
    (what its answers are keyed by)."""

    url: str
    folder: Path
    packs: int
    manifests: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        """How commands name it: ``shipped reference (results/reference, 18 packs)``."""
        return f"shipped reference ({str(self.folder).rstrip('/')}, {self.packs} pack{'' if self.packs == 1 else 's'})"


def cache_dir() -> Path:
    """bench's private cache folder (``$XDG_CACHE_HOME/bench``, else ``~/.cache/bench``, else a private
    temporary folder: :func:`bench.storage.packload.private_cache_dir`)."""
    return packload.private_cache_dir(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bench")


def reference(log: Callable[[str], None] | None = None) -> Reference | None:
    """The shipped reference, every pack verified against its manifest's sha256 list on each call
    (:class:`bench.storage.packed.PackError` when one fails); ``None`` where there are no packs.

    It is read in place (``url`` ``packs:FOLDER``, :class:`bench.storage.packread.PackSet`) by every command,
    ``bench report`` and ``parity`` as ``recommend``: nothing is unpacked or copied. ``log`` is unused (kept
    for callers that pass one)."""
    folder = reference_dir()
    packs = packed.verified_packs(folder) if folder is not None else []
    if folder is None or not packs:
        return None
    manifests = tuple((p.name, packed.read_manifest(p)[packed.SELF]) for p in packs)
    return Reference(f"{packread.SCHEME}{folder}", folder, len(packs), manifests)




def writable(flag: str, path: Path, *, folder: bool) -> Path:
    """``path`` if a command can write it there (a file, or with ``folder`` a folder to fill), checked before
    any work and creating nothing; else :class:`BadInput` naming ``flag`` (a measurement of minutes must not
    end in an unwritable path)."""
    what = "a folder (new or existing)" if folder else "a file path (new or existing)"
    if path.exists() and path.is_dir() != folder:
        raise BadInput(f"{flag}: {path} is {'a file' if folder else 'a folder'}; allowed: {what}")
    if path.exists():  # replaced (a file) or filled (a folder) where it is
        up = path
    else:
        up = path.parent
        while not up.exists() and up != up.parent:
            up = up.parent
    if up is not path and not up.is_dir():
        raise BadInput(f"{flag}: {path} cannot be created: {up} is not a folder; allowed: {what} under a folder")
    if not os.access(up, os.W_OK | (os.X_OK if up.is_dir() else 0)):
        raise BadInput(f"{flag}: {path} cannot be written: {up} is not writable by this user; allowed: {what} "
                       "somewhere writable")
    return path


def parse_store(store: StoreURL | str | None, flag: str = "--store") -> StoreURL:
    """``store`` as the :class:`StoreURL` every layer below takes: text (default ``sqlite:///results/bench.db``)
    checked here, once, where a public function receives it; a :class:`StoreURL` (the command line parsed its
    ``--store`` already) as it is. :class:`BadInput` naming ``flag`` when it cannot be used (in-memory SQLite, a
    malformed URL, …)."""
    try:
        return StoreURL.parse(store)
    except StoreError as e:
        raise BadInput(f"{flag}: {e}") from None


def results_store(store: StoreURL | str | None = None, *, need_done: bool = True, fallback: bool = True,
                  log: Callable[[str], None] | None = None) -> tuple[StoreURL | str, str]:
    """The store a reading command answers from, and a line saying which it is.

    ``store`` defaults to ``sqlite:///results/bench.db``; when that was left at its default and does not exist,
    the shipped reference (:func:`reference`) is read instead (unless not ``fallback``): then the first item
    is its ``packs:FOLDER`` URL, which readers (:func:`bench.storage.packread.open_reader`) open as packs;
    else the store's :class:`StoreURL`.

    :raises BadInput: a bad URL, no store, a store with no runs (with ``need_done``: no finished run).
    :raises bench.storage.schema.StoreError: a store that cannot be reached or read.
    """
    from bench.storage.store import Store

    store_url = parse_store(store)
    try:
        db = Store(store_url, readonly=True)
    except StoreMissing:
        if store_url.is_default and fallback and (ref := reference(log=log)) is not None:
            return ref.url, (f"reading the project's shipped reference results ({ref.folder}/): "
                             f"there is no store of your own at {describe_url(DEFAULT_URL)}")
        raise BadInput(f"--store: no results store at {store_url.shown}; run a suite first (`bench run SUITE.yaml`)") \
            from None
    status = db.runs_frame()["status"] if db.suite_names() else []
    db.dispose()
    if len(status) == 0:
        raise BadInput(f"--store: the store at {store_url.shown} has no runs; run a suite first (`bench run SUITE.yaml`)")
    if need_done and not (status == "done").any():
        raise BadInput(f"--store: the store at {store_url.shown} has no finished runs; run a suite first "
                       "(`bench run SUITE.yaml`)")
    return store_url, f"reading {store_url.shown}"

