"""Packs read in place: a folder of packs answers the reads a report or ``bench recommend`` makes of a store,
straight from its Parquet files, with no SQLite unpack.

:class:`PackSet` has the read methods of :class:`bench.storage.store.Store` that the analysis uses
(``suite_names``, ``suite_specs``, ``runs_frame``, ``env_facts``, ``anchors``, ``episodes_for``,
``diagnostics_for``, ``last_evaluations``), and gives the frames a store built from the same packs
(:func:`bench.storage.packload.unpack`) gives: the same rows, columns and order. Several packs read as one
store as :func:`bench.storage.packload.load` fills one: the first pack (in the order given) that holds a
suite, suite cell, run, anchor or env's facts wins (but a cell pending and never attempted takes a later
pack's run of it), and a run's episodes, diagnostics and evaluations come from the pack whose run is read.

Why pyarrow and not DuckDB or polars: it is already a dependency (Parquet is written with it), the
reads are whole columns of a few files filtered by run key, which ``pyarrow.parquet`` does in a few
CPU seconds for the shipped reference's 3.8M episode rows (docs/performance.md, "Answers and reports on the
shipped reference"), and a second engine would add tens of MB to every install for a gain not measured here.

Every pack is verified against its manifest's sha256 list when the set is opened
(:func:`bench.storage.packed.verify`), unless the caller has just done so.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterable, Sequence

import bench.storage.packed as packed
from bench.storage.studies import read_packed_studies
from bench.storage.urls import StoreURL

#: The columns and order of :meth:`bench.storage.store.Store.runs_frame`.
RUN_COLUMNS = ("suite", "env", "algo", "impl", "label", "seed", "status", "attempt", "timesteps", "threshold", "window",
               "total_steps", "episodes", "wall_s", "cpu_s", "steps_to_threshold", "seconds_to_threshold",
               "final_return", "auc", "error", "key", "started_at", "finished_at", "config", "meta")
#: The scheme of a pack folder's URL (:attr:`PackSet.url`): not a database, never opened by SQLAlchemy.
SCHEME = "packs:"


class PackSet:
    """The packs ``packs`` (folders with a manifest), read as one read-only store.

    :param verified: the caller has just verified every pack (:func:`bench.storage.packed.verified_packs`).
    :raises bench.storage.packed.PackError: a pack fails its check.
    """

    readonly = True

    def __init__(self, packs: Sequence[Path], *, verified: bool = False, folder: Path | None = None):
        self.packs = [Path(p) for p in packs]
        self.manifests = [packed.read_manifest(p) if verified else packed.verify(p) for p in self.packs]
        self.folder = Path(folder) if folder is not None else (self.packs[0].parent if self.packs else Path("."))
        self._tables: dict[str, Any] = {}
        self._own: list[set[str]] | None = None
        self._studies: Any = None

    @property
    def url(self) -> str:
        """How the set names itself where a store's URL would stand (``packs:results/reference``)."""
        return f"{SCHEME}{self.folder}"

    def dispose(self) -> None:
        """Nothing to close: the packs are read file by file (kept for the reader protocol)."""
        self._studies = None

    # -- the small tables, read once ------------------------------------------
    def _small(self, name: str, key: Sequence[str]):
        """Table ``name`` of every pack, first pack winning per ``key`` (as :func:`bench.storage.packload.load`)."""
        import pandas as pd

        if name not in self._tables:
            t = _concat([f for p in self.packs if (f := p / f"{name}.parquet").is_file()])
            df = t.to_pandas() if t is not None else pd.DataFrame(columns=list(key))
            self._tables[name] = df.drop_duplicates(list(key), keep="first").reset_index(drop=True)
        return self._tables[name]

    def _runs(self):
        """Every pack's runs, the first pack's row winning per key, with the pack index each came from."""
        import pandas as pd

        if "runs" not in self._tables:
            files = [(i, f) for i, p in enumerate(self.packs) if (f := p / "runs.parquet").is_file()]
            t = _concat([f for _, f in files], tags=[i for i, _ in files])
            df = t.to_pandas() if t is not None else pd.DataFrame(columns=["key", "_pack", "status", "attempt"])
            # As a store fills: a cell pending and never attempted in one pack takes a later pack's run of it.
            untried = (df["status"] == "pending") & (df["attempt"] == 0)
            filled = df["key"].isin(df.loc[~df["key"].duplicated() & untried, "key"]) & (df["status"] != "pending")
            if filled.any():  # those keys' untried rows out, so that their first run wins; the order kept
                df = df[~df["key"].isin(df.loc[filled, "key"]) | filled]
            self._tables["runs"] = df.drop_duplicates("key", keep="first").reset_index(drop=True)
        return self._tables["runs"]

    def suite_names(self) -> list[str]:
        return sorted(self._small("suites", ["name"])["name"])

    def suite_specs(self) -> dict[str, dict[str, Any]]:
        """Suite name → its stored spec."""
        s = self._small("suites", ["name"])
        return {n: json.loads(spec) for n, spec in zip(s["name"], s["spec"])}

    def suite_env_metas(self, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Each named suite's ``env_meta`` (suite name → env key → facts), in the order of ``names``."""
        s = self._small("suites", ["name"]).set_index("name")["env_meta"]
        return {n: json.loads(s[n]) for n in names if n in s.index}

    def suite_env_meta(self, name: str) -> dict[str, dict[str, Any]] | None:
        return self.suite_env_metas([name]).get(name)

    def runs_frame(self, suite: str | None = None):
        """One row per (suite, run), as :meth:`bench.storage.store.Store.runs_frame`."""
        cells = self._small("suite_cells", ["suite", "key"])
        if suite is not None:
            cells = cells[cells["suite"] == suite]
        runs = self._runs().rename(columns={"env_id": "env"})
        df = cells.merge(runs.drop(columns=["_pack"]), on="key", how="inner")
        df = df.sort_values(["suite", "env", "label", "seed"], kind="mergesort").reset_index(drop=True)
        return df[list(RUN_COLUMNS)]

    def env_facts(self) -> dict[str, dict[str, Any]]:
        f = self._small("env_facts", ["env_id"])
        return {e: json.loads(x) for e, x in zip(f["env_id"], f["facts"])} if len(f) else {}

    def anchors(self) -> dict[tuple[str, float, int, int], Any]:
        """Anchor rows by ``(env_id, threshold, episodes, seed)``, as :meth:`bench.storage.store.Store.anchors`."""
        a = self._small("anchors", ["env_id", "threshold", "episodes", "seed"])
        return {(r.env_id, float(r.threshold), int(r.episodes), int(r.seed)): SimpleNamespace(**r._asdict())
                for r in a.itertuples(index=False)}

    def put_anchor(self, *_: Any) -> bool:
        """Packs are not written: a missing anchor is computed for this read only (as on a read-only mount)."""
        return False

    # -- per-run tables, read by key ------------------------------------------
    def _own_keys(self) -> list[set[str]]:
        """Per pack, the run keys it is read for (the runs whose row comes from it)."""
        if self._own is None:
            r = self._runs()
            self._own = [set(r.loc[r["_pack"] == i, "key"]) for i in range(len(self.packs))]
        return self._own

    def _pack_keys(self, i: int) -> set[str]:
        """The run keys pack ``i`` holds rows of (its ``runs.parquet``)."""
        import pyarrow.parquet as pq

        name = f"keys{i}"
        if name not in self._tables:
            f = self.packs[i] / "runs.parquet"
            self._tables[name] = set(pq.read_table(f, columns=["key"])["key"].to_pylist()) if f.is_file() else set()
        return self._tables[name]

    def _per_run(self, name: str, keys: Iterable[str], columns: list[str], where=None):
        """Rows of table ``name`` for ``keys``, each run's from its own pack: grouped by run, a run's rows in
        their stored order (a pack stores them by key and index), packs in order. A store's frames are in
        key order over all runs; no reader of these frames depends on the order across runs."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        want = set(keys)
        parts = []
        for i, (p, own) in enumerate(zip(self.packs, self._own_keys())):
            mine = want & own
            f = p / f"{name}.parquet"
            if not mine or not f.is_file():
                continue
            have = pq.read_schema(f).names
            t = pq.read_table(f, columns=[c for c in columns if c in have])
            if not len(t):  # an empty table (its key column typed null): nothing of it to read
                continue
            mask = None
            if mine != self._pack_keys(i):  # only some of its runs: filter (most reads take every run of a pack)
                mask = pc.is_in(t["key"], value_set=pa.array(sorted(mine), type=t.schema.field("key").type))
            if where is not None:
                mask = where(t) if mask is None else pc.and_(mask, where(t))
            if mask is not None:
                t = t.filter(mask)
            for c in columns:  # an older pack without a column: nulls, as a store without the migration
                if c not in t.column_names:
                    t = t.append_column(c, pa.nulls(len(t), pa.float64()))
            parts.append(t.select(columns))
        if not parts:
            return None
        return pa.concat_tables(parts, promote_options="permissive")  # an empty pack's all-null columns

    def episodes_for(self, keys: Sequence[str]):
        """``key, step, wall_s, cpu_s, ret`` of the runs ``keys``, grouped by run in episode order, clocks in
        seconds as a store holds them (:func:`bench.storage.packed.clocks_to_s`, here in Arrow: the same floats)."""
        import pandas as pd
        import pyarrow as pa
        import pyarrow.compute as pc

        # A pack written before clocks were packed as milliseconds has them in seconds (``wall_s``, ``cpu_s``).
        t = self._per_run("episodes", keys, ["key", "step", "wall_ms", "cpu_ms", "wall_s", "cpu_s", "ret"])
        if t is None:
            return pd.DataFrame(columns=["key", "step", "wall_s", "cpu_s", "ret"])
        secs = {s: pc.coalesce(pc.divide(pc.cast(t[ms], pa.float64()), packed._MS_PER_S), pc.cast(t[s], pa.float64()))
                .fill_null(float("nan")) for s, ms in packed.CLOCKS_MS.items()}
        return pa.table({"key": t["key"], "step": t["step"], "wall_s": secs["wall_s"], "cpu_s": secs["cpu_s"],
                         "ret": t["ret"]}).to_pandas()

    def diagnostics_for(self, keys: Sequence[str], names: Sequence[str]):
        """``key, step, name, value`` of the runs ``keys``, for the diagnostics ``names``, in stored order."""
        import pandas as pd
        import pyarrow as pa
        import pyarrow.compute as pc

        empty = pd.DataFrame(columns=["key", "step", "name", "value"])
        if not names:
            return empty
        t = self._per_run("diagnostics", keys, ["key", "step", "name", "value"],
                          where=lambda t: pc.is_in(t["name"], value_set=pa.array(list(names), type=t.schema.field("name").type)))
        return empty if t is None else t.to_pandas()

    def last_evaluations(self, keys: list[str]) -> dict[str, float]:
        """Run key → the mean return of its last periodic evaluation, for those of ``keys`` that have one."""
        t = self._per_run("evaluations", keys, ["key", "idx", "mean_return"])
        if t is None or not len(t):
            return {}
        df = t.to_pandas()
        last = df.drop_duplicates("key", keep="last")
        return {str(k): float(v) for k, v in zip(last["key"], last["mean_return"])}

    def has_studies(self) -> bool:
        return any((p / packed.STUDIES).is_file() for p in self.packs)

    def studies(self) -> list:
        """The packs' ``bench tune`` studies, read in place from their journals
        (:func:`bench.storage.studies.read_packed_studies`)."""
        if self._studies is None:
            self._studies = read_packed_studies(self.packs)
        return self._studies


def _concat(files: list[Path], tags: list[int] | None = None):
    """The Parquet tables ``files`` as one Arrow table (a column that is all null in one pack takes the
    others' type), with a ``_pack`` column of ``tags`` where given; None without files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not files:
        return None
    parts = [pq.read_table(f) for f in files]
    if tags is not None:
        parts = [t.append_column("_pack", pa.array([i] * len(t), pa.int64())) for t, i in zip(parts, tags)]
    return pa.concat_tables(parts, promote_options="permissive")


def open_reader(source: Any):
    """A reader for ``source``: a :class:`PackSet` or :class:`bench.storage.store.Store` given is returned as it
    is; a ``packs:FOLDER`` URL opens the packs in that folder (verified); a
    :class:`bench.storage.urls.StoreURL` (or any other URL) opens the store at it read-only. The caller disposes
    of what this opens (:func:`owned` says whether it opened one)."""
    from bench.storage.store import Store

    if isinstance(source, StoreURL):
        return Store(source, readonly=True)
    if not isinstance(source, str):
        return source
    if source.startswith(SCHEME):
        folder = Path(source[len(SCHEME):])
        return PackSet(packed.verified_packs(folder), verified=True, folder=folder)
    return Store(source, readonly=True)


def owned(source: Any) -> bool:
    """Whether :func:`open_reader` opens a reader of its own for ``source`` (a URL), to dispose of after."""
    return isinstance(source, (str, StoreURL))
