"""Reading results: a store's report, its exports (tables, rliable scores, packs) and imports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench.api._common import BadInput, parse_store, results_store, writable
from bench.api._frames import TABLES, check_suite, open_store, read_table
from bench.storage import packed, packload
from bench.storage.studies import load_studies, tuning_suites
from bench.storage.urls import StoreURL

class NothingToExport(ValueError):
    """An export that has nothing to write, or cannot write it in the asked format (``str(e)``: one line)."""


def export_scores(store: StoreURL | str, suite: str | None, column: str, format: str, out_path: Path,
                  log: Callable[[str], None] | None = None) -> tuple[int, int]:
    """Write normalised per-run scores, label → (runs × envs), for rliable: ``rliable-npz`` (one array per
    label, plus ``__envs__`` and ``__score__``) or ``rliable-json`` (``envs``, ``score``, ``scores``: label →
    rows, ``null`` where a column is padded). Read from the store alone (its recorded env facts).

    :param store: the store (a :class:`StoreURL`, or its URL as text, checked here).
    :returns: (labels, envs) written.
    :raises NothingToExport: no scores to write, or a label the ``.npz`` keeps for its own keys.
    :raises BadInput: a URL that is not a usable store URL.
    """
    import json

    import numpy as np

    from bench.analysis import scoring
    from bench.run.anchors import for_reading

    scored = scoring.score(scoring.load(parse_store(store), [suite] if suite else None, diagnostics=(), log=log, anchors=for_reading))
    envs, mats = scoring.score_matrices(scored, column)
    if not mats:
        raise NothingToExport("no done runs with normalised scores in the store" + (f" for suite {suite!r}" if suite else ""))
    reserved = [lb for lb in mats if lb.startswith("__")]
    if format == "rliable-npz" and reserved:
        raise NothingToExport(f"label {reserved[0]!r} starts with '__', which the file keeps for its own keys; allowed: "
                         "rliable-json")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if format == "rliable-npz":
        with open(out_path, "wb") as f:  # a file object: numpy would otherwise append .npz to the name
            np.savez(f, __envs__=np.array(envs), __score__=np.array(column), **mats)
    else:
        doc = {"score": column, "envs": envs,
               "scores": {lb: [[None if v != v else float(v) for v in row] for row in m] for lb, m in mats.items()}}
        out_path.write_text(json.dumps(doc, indent=1))
    return len(mats), len(envs)


def pack_suite(store: Any, suite: str, out: Path, log: Callable[[str], None] | None = None, *,
               keep: str = "all") -> dict[str, Any]:
    """Pack one suite of ``store`` (a :class:`bench.storage.store.Store`) into the folder ``out``, with its envs'
    normalisation anchors computed first where missing (so the pack has them); returns the pack's manifest.
    Runs already in a sibling pack (a claim suite sharing the reference's cells) are not stored twice. ``keep``:
    what of unfinished work the pack holds (:data:`bench.storage.packed.KEEP`)."""
    from bench.run.anchors import ensure_anchors

    if (meta := store.suite_env_meta(suite)) is not None:
        ensure_anchors(store, {e: m.get("threshold") for e, m in meta.items()}, log=log,
                       families={e: m.get("family") for e, m in meta.items()})
    return packed.pack(store.store_url, suite, out, beside=packed.packs_under(out.resolve().parent), keep=keep)


def report(suites: list[str] | None = None, store: StoreURL | str | None = None, out: str | Path | None = None, *,
           screenshot: Path | None = None, log: Callable[[str], None] | None = None,
           stage: Callable[[str], None] | None = None, workers: int | None = None) -> Path:
    """Write the self-contained HTML report (``index.html``, figures embedded) of ``suites`` (names in the
    store, or their YAML files; default: every suite) from the store alone; returns its path.

    ``store`` as :func:`results_store` (a store whose runs all failed still gets a report: it lists the
    failures). ``out`` defaults to ``reports/<suite names joined by +>/`` or ``reports/all/``. ``log`` is told
    which store is read, once the inputs are checked, then what the report leaves out; ``stage`` each step as
    it starts (for a live status line). ``screenshot``: also save a PNG of the page's top there (needs
    chromium; checked before anything is read). ``workers``: processes drawing the figures beside this one
    (default: one per core; 0 draws them here, as does a report of a few envs; :func:`bench.analysis.report.build`).

    :raises BadInput: a store or suite that is not there, an unwritable ``out`` or ``screenshot``, no chromium.
    """
    from bench.analysis.readmodel import ReadModel
    from bench.analysis.report import build, find_chromium, screenshot as take
    from bench.run.anchors import for_reading
    from bench.suites.suite import SuiteError, load_suite

    if screenshot is not None:
        parse_store(store)
        # The path first: a path that cannot be written is the same bad input with or without a browser.
        writable("--screenshot", screenshot, folder=False)
        if find_chromium() is None:
            raise BadInput(f"--screenshot: {screenshot} needs chromium on PATH (Debian: apt-get install chromium); "
                           "none found")

    source, where = results_store(store, need_done=False, log=log)
    with ReadModel(source) as db:  # one read model for the whole report: each table read once
        have = db.suite_names()
        names: list[str] = []
        for s in suites or []:
            if s.endswith((".yaml", ".yml")) or Path(s).is_file():
                try:
                    names.append(load_suite(Path(s)).suite.name)
                except SuiteError as e:
                    raise BadInput(e.lines) from None
            else:
                names.append(s)
        if unknown := [s for s in names if s not in have]:
            raise BadInput([f"report: no suite named {s!r} in the store; allowed: {', '.join(have) or 'none'}"
                            for s in unknown])
        chosen = list(dict.fromkeys(names))
        out_dir = writable("--out", Path(out) if out is not None else Path("reports") / ("+".join(chosen) or "all"),
                           folder=True)
        if log is not None:
            log(where)
        path = build(db, out_dir, chosen or None, log=log, stage=stage, workers=workers, anchors=for_reading)
    if screenshot is not None:
        shot = take(path, screenshot)
        if log is not None:
            log(f"screenshot: {shot}")
    return path


#: ``bench export --format``: what each writes, and which ``--what`` it takes.
EXPORT_FORMATS = ("csv", "parquet", "json", "pack", "rliable-npz", "rliable-json")
EXPORT_WHAT = TABLES


def export(store: StoreURL | str | None = None, out: Path | str = "", *, suite: str | None = None, what: str = "runs",
           format: str = "csv", score: str = "final", keep: str = "all", log: Callable[[str], None] | None = None) -> str:
    """Export ``what`` (runs, episodes, evaluations or diagnostics: the frames :func:`bench.api.runs` …
    :func:`bench.api.diagnostics` return) of ``store`` as CSV, Parquet or JSON records; normalised
    per-run scores for rliable (``rliable-npz`` / ``rliable-json``, ``score``: final, samples or time); or pack
    one suite (``format="pack"``, into the folder ``out``; ``keep``: all its runs as they stand, only the
    finished ones, or only the envs whose runs all finished, :data:`bench.storage.packed.KEEP`). Returns the line
    saying what was written.

    :raises BadInput: an unknown option value, an unwritable ``out``, no store, no such suite, nothing to export.
    """
    import json

    from bench.analysis.scoring import SCORE_COLUMNS

    out = Path(out)
    for flag, value, allowed in (("--what", what, EXPORT_WHAT), ("--format", format, EXPORT_FORMATS),
                                 ("--score", score, tuple(SCORE_COLUMNS)), ("--keep", keep, packed.KEEP)):
        if value not in allowed:
            raise BadInput(f"{flag}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
    if keep != "all" and format != "pack":
        raise BadInput(f"--keep: says what a pack holds of unfinished runs; allowed with --format pack only "
                       f"(got --format {format})")
    if format in ("pack", "rliable-npz", "rliable-json") and what != "runs":
        raise BadInput(f"--what: --format {format} exports whole runs; allowed with it: runs (got {what!r})")
    store_url = parse_store(store)
    if format != "pack" and out.is_dir():
        suffix = {"rliable-npz": "npz", "rliable-json": "json"}.get(format, format)
        raise BadInput(f"--out: {out} is a folder; allowed: a file path, e.g. {out / (what + '.' + suffix)}")
    writable("--out", out, folder=format == "pack")
    db = open_store(store_url)
    try:
        # A pack can hold a tuning suite's studies alone (no runs of its name).
        check_suite(db, suite, also=_tuning_suites(store_url) if format == "pack" and suite is not None else None)
        if format == "pack":
            if suite is None:
                raise BadInput("--format pack: name the suite to pack with --suite")
            m = pack_suite(db, suite, out, log=log, keep=keep)
            shared = "".join(f"; {n} runs shared with {p}" for p, n in m.get("shared_runs", {}).items())
            studies = m.get("studies")
            states = "" if set(m["runs"]) <= {"done"} else \
                " (" + ", ".join(f"{n} {s}" for s, n in sorted(m["runs"].items())) + ")"
            what = f"{sum(m['runs'].values())} runs{states}" + (f" and {studies['count']} tuning studies "
                                                        f"({sum(studies['trials'].values())} trials)" if studies else "")
            return f"packed {what} of {suite} into {out} ({m['bytes'] / 1e6:.1f} MB{shared})"
        if format.startswith("rliable-"):
            db.dispose()
            try:
                n = export_scores(store_url, suite, SCORE_COLUMNS[score], format, out, log=log)
            except NothingToExport as e:
                raise BadInput(f"--format {format}: {e}") from None
            return f"wrote {SCORE_COLUMNS[score]} of {n[0]} labels × {n[1]} envs to {out}"
        df = read_table(db, what, suite)
    finally:
        db.dispose()
    out.parent.mkdir(parents=True, exist_ok=True)
    if format == "csv":
        df.to_csv(out, index=False)
    elif format == "parquet":
        df.to_parquet(out, index=False)
    else:  # records; json, not pandas' to_json, which keeps 10 digits and so does not round-trip a float
        rows = [{k: None if isinstance(v, float) and v != v else v for k, v in r.items()} for r in df.to_dict("records")]
        out.write_text(json.dumps(rows, default=str))
    return f"wrote {len(df)} {'runs' if what == 'runs' else what[:-1] + ' rows'} to {out}"


def _tuning_suites(store_url: StoreURL) -> list[str]:
    """The tuning suites whose ``bench tune`` studies are in the store (a pack can hold them)."""
    try:
        return tuning_suites(store_url)
    except Exception:  # noqa: BLE001 - a store Optuna cannot read has no studies to pack
        return []


def import_packs(packs: list[Path], store: StoreURL | str | None = None) -> str:
    """Load packs (folders ``bench export --format pack`` wrote, or folders of them) into ``store``, their
    tuning studies too; runs already there are kept as they were (a cell pending and never attempted takes the
    pack's run: it holds nothing to lose). Every pack is verified before the store is
    opened, so bad input writes nothing. Returns the line saying what was imported.

    :raises BadInput: a path that is not a pack, a manifest or table that cannot be read, a bad URL.
    """
    from bench.storage.store import Store

    found: list[Path] = []
    for p in packs:
        under = packed.verified_packs(p)
        if not under:
            raise BadInput(f"PACK: {p} is not a pack (a folder with {packed.MANIFEST}) nor a folder of packs; "
                           "allowed: what `bench export --format pack` writes, e.g. results/reference/classic")
        found += [q for q in under if q.resolve() not in {f.resolve() for f in found}]
    try:
        found = packed.with_siblings(found)
        suites = [packed.verify(p)["suite"] for p in found]
    except FileNotFoundError as e:
        raise BadInput(f"PACK: {e}; allowed: import the folder that holds both") from None
    except (ValueError, KeyError) as e:
        raise BadInput(f"PACK: a {packed.MANIFEST} is not a pack manifest ({e}); allowed: what "
                       "`bench export --format pack` writes") from None
    if (bad := packed.unreadable(found)) is not None:  # checked before the store is opened: nothing written
        raise BadInput(f"PACK: {bad} is not a readable Parquet table; allowed: what `bench export --format pack` writes")
    store_url = parse_store(store)
    db = Store(store_url)
    try:
        n = packload.load(found, db)
    finally:
        db.dispose()
    kept = f"; {n['kept']} already there, kept as they were" if n["kept"] else ""
    added = load_studies(found, store_url)
    studies = f"; {added} tuning stud{'y' if added == 1 else 'ies'}" if added else ""
    return f"imported {n['new']} runs{studies} of {', '.join(dict.fromkeys(suites))} into {store_url.shown}{kept}"


@dataclass(frozen=True)
class ParityResult:
    """:func:`parity`'s answer: ``envs``, one :class:`bench.stats.parity.EnvParity` per env (its verdict and
    comparisons); ``rows``, the same as the report's parity table (text, one row per metric); ``alpha``, the
    tests' level."""

    envs: list
    rows: list[dict[str, str]]
    alpha: float


def parity(label_a: str, label_b: str, *, envs: list[str] | None = None, margin: float = 0.05,
           store: StoreURL | str | None = None, log: Callable[[str], None] | None = None) -> ParityResult:
    """Are two labels the same algorithm? Per env, equivalent, different or inconclusive, with the evidence
    (:func:`bench.stats.parity.parity`); ``margin`` on the normalised scale (0 random policy, 1 threshold).
    ``log`` is told which store is read.

    :raises BadInput: a margin outside (0, 1], a label or env with no scored runs, no env in common.
    """
    import math

    from bench.stats import parity as par
    from bench.analysis import collapse, scoring
    from bench.analysis.report import parity_table_rows
    from bench.run.anchors import for_reading

    if not (math.isfinite(margin) and 0 < margin <= 1):
        raise BadInput(f"--margin: {margin!r} is not a margin; allowed: a number in (0, 1] on the normalised scale")
    source, where = results_store(store, log=log)
    if log is not None:
        log(where)
    data = scoring.load(source, log=log, anchors=for_reading)
    runs = scoring.score(data).runs
    have = sorted(runs.loc[runs["final_norm"].notna(), "label"].unique()) if len(runs) else []
    for name in (label_a, label_b):
        if name not in have:
            raise BadInput(f"{name!r}: no label of that name has scored runs in the store; allowed: "
                           f"{', '.join(have) or 'none'}")
    if label_a == label_b:
        raise BadInput(f"{label_b!r}: the same label twice; allowed: two different labels")
    known = set(runs["env"])
    for e in envs or []:
        if e not in known:
            raise BadInput(f"--env: {e!r} has no scored runs in the store; allowed: {', '.join(sorted(known))}")
    flagged = collapse.flags(runs, data.episodes, data.diagnostics, data.anchors, data.traits)
    result = par.parity(runs, label_a, label_b, envs=envs or None, margin=margin,
                        flagged=set(zip(flagged["key"], flagged["kind"])), checkable=collapse.checkable(data.diagnostics))
    if not result:
        raise BadInput(f"{label_a} and {label_b} have no env in common with scored runs of both"
                       + (f" among --env {', '.join(envs)}" if envs else ""))
    return ParityResult(result, parity_table_rows(result), par.ALPHA)
