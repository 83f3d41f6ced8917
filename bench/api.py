"""One public function per everyday job, for notebooks and scripts, below the command line (``bench.cli``
parses, calls these, renders).

- :func:`plan_run`, :func:`run_suite`: a suite checked against a store (what would run), then run, with
  callbacks for progress; the result's :meth:`SuiteRun.frame` is one row per cell run.
- :func:`results_store`: the store a reading command answers from (yours, or the shipped reference).
- :func:`report`: a suite's (or a store's) self-contained HTML report.
- :func:`reference`: the shipped reference results (``results/reference/`` packs), verified, as a store to read.
- :func:`recommend`: which algorithm for a problem, from a store or the shipped reference (whose answers are
  computed once per pack content).
- :func:`record_env_facts`: what a store records of each env at run time, so it is read without the env's package.
- :func:`resolved_hyperparams`: each label's resolved hyperparameters on each env, and where each value came from.
- :func:`export_scores`, :func:`pack_suite`: normalised scores for rliable; a suite as a pack.
- :func:`load_policy`: a run's saved policy, ready to act (``pi.act(obs)``);
- :func:`evaluate`: N episodes of a loaded policy on a fresh evaluation env, optionally filmed to an MP4.

Nothing here prints: messages go to a ``log`` callable the caller passes. A user's error is
:class:`BadInput` (one line per problem; the command line prints them and exits with status 2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench.policies import Evaluation, LoadedPolicy, PolicyError, evaluate, load_policy, video_missing
from bench.storage import packed, packread

__all__ = ["BadInput", "RunPlan", "SuiteRun", "plan_run", "run_suite", "results_store", "writable", "report",
           "REFERENCE_DIR", "Reference", "reference", "reference_dir", "cache_dir", "Answer", "recommend",
           "record_env_facts", "resolved_hyperparams",
           "HyperparamRow", "hyperparams_lines", "NothingToExport", "export_scores", "pack_suite",
           "Evaluation", "LoadedPolicy", "PolicyError", "evaluate", "load_policy", "video_missing"]

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
_CHECKOUT_REFERENCE_DIR = Path(__file__).resolve().parent.parent / "results" / "reference"


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
    :class:`bench.storage.packread.PackSet`; a SQLite URL where :func:`reference` was asked to ``unpack``),
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
    temporary folder: :func:`bench.storage.packed.private_cache_dir`)."""
    return packed.private_cache_dir(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bench")


def reference(log: Callable[[str], None] | None = None, *, unpack: bool = False) -> Reference | None:
    """The shipped reference, every pack verified against its manifest's sha256 list on each call
    (:class:`bench.storage.packed.PackError` when one fails); ``None`` where there are no packs.

    It is read in place (``url`` ``packs:FOLDER``). With ``unpack`` it is also unpacked once into a
    SQLite store in the private cache folder (:func:`cache_dir`), trusted only while it records the
    manifests it was built from, for the commands that read it as a SQL store (``bench report``,
    ``parity``); ``log`` is told when that store is (re)built, which takes tens of seconds."""
    folder = reference_dir()
    packs = packed.verified_packs(folder) if folder is not None else []
    if folder is None or not packs:
        return None
    manifests = tuple((p.name, packed.read_manifest(p)[packed.SELF]) for p in packs)
    if not unpack:
        return Reference(f"{packread.SCHEME}{folder}", folder, len(packs), manifests)
    cache = cache_dir() / "reference.db"
    url = packed.unpack(packs, cache, verified=True, on_build=lambda: log and log(  # once per checkout of the packs
        f"first use of the shipped reference: unpacking {len(packs)} pack(s) into {cache} "
        "(once; later commands read it directly)"))
    return Reference(url, folder, len(packs), manifests)


# --------------------------------------------------------------------------- #
# Which algorithm for my problem
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class Answer:
    """``bench recommend``'s answer from one source, as plain JSON values.

    :param rows: the recommendation table (:func:`bench.analysis.answers.recommendation_rows`).
    :param left_out: one line per variant suite the answers leave out.
    :param lm: the language-model track's own criteria on the sequence envs of ``rows`` (dicts with
        ``criterion, label, point, lo, hi, kind, mark``; :func:`bench.analysis.claims.lm_criteria`).
    :param lm_lines: the same as the report prints them: per criterion with a value, its name and one
        ``label point [lo, hi]`` text per label (★: best).
    :param legend: the rules the table was computed under (``alpha``, ``min_seeds``, ``correction``,
        ``min_envs_generalise``, ``equal_compute_only``: the message of a profile with only equal-compute envs),
        so the table is printed without loading the analysis.
    :param cached: read from the answer cache (:func:`recommend`), not computed by this call.
    """

    rows: list[dict[str, Any]]
    left_out: list[str]
    lm: list[dict[str, Any]]
    lm_lines: list[tuple[str, list[str]]]
    legend: dict[str, Any]
    #: The off-policy reference lines (:func:`bench.analysis.offpolicy.line_text`), one per profile that has one.
    off_policy: list[str] = field(default_factory=list)
    cached: bool = False


#: Bumped when :class:`Answer`'s layout changes (the cache key holds it, so an old entry is not read).
_ANSWER_LAYOUT = 3
_FIELDS = ("rows", "left_out", "lm", "lm_lines", "legend", "off_policy")
#: Answers kept in the cache folder (each a few tens of KB); older ones are removed as new ones are written.
_KEEP_ANSWERS = 64


def recommend(source: str | Reference | None = None, *, action: str | None = None, obs: str | None = None,
              reward: str | None = None, priority: str | None = None,
              log: Callable[[str], None] | None = None) -> Answer:
    """The recommendation table of ``source`` (a store URL, or the shipped reference, :func:`reference`,
    which ``None`` means) for the matching problems (``None``: all), with what goes with it (:class:`Answer`;
    ``answer.rows`` are ``bench recommend --format json``'s rows).

    :raises BadInput: a filter outside its values; ``None`` where there is no shipped reference.

    The shipped reference's answer is computed once per pack content and kept in the private cache
    folder (:func:`cache_dir`), in a file named by the hash of everything that decides it: every pack's
    manifest sha256 (which covers every file's sha256), bench's own source code, the numerical libraries'
    versions and the options. A file is used only when the key it records inside is that key: a changed
    pack, a changed line of bench or another option computes afresh. A user's store changes with every
    run, so its answer is computed on each call, through the same read model.
    """
    from bench.traits import ACTIONS, OBS, PRIORITIES, REWARDS

    for flag, value, allowed in (("--action", action, ACTIONS), ("--obs", obs, OBS), ("--reward", reward, REWARDS),
                                 ("--priority", priority, PRIORITIES)):
        if value is not None and value not in allowed:
            raise BadInput(f"{flag}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
    if source is None and (source := reference(log=log)) is None:
        raise BadInput("no shipped reference here (no packs under results/reference) and no store given; "
                       "allowed: a store URL, e.g. sqlite:///results/bench.db")
    if isinstance(source, Reference):
        key = _answer_key(source, dict(action=action, obs=obs, reward=reward, priority=priority))
        f = cache_dir() / "answers" / f"{key}.json"
        if (got := _cached_answer(f, key)) is not None:
            return got
        answer = _compute_answer(source.url, action=action, obs=obs, reward=reward, priority=priority, log=log)
        _keep_answer(f, key, answer)
        return answer
    return _compute_answer(source, action=action, obs=obs, reward=reward, priority=priority, log=log)


def _compute_answer(url: str, *, action, obs, reward, priority, log) -> Answer:
    """:func:`recommend`'s answer, computed: read once (:func:`bench.analysis.scoring.load`), scored, answered."""
    import json

    from bench.analysis import answers, claims, generalise, offpolicy, scoring
    from bench.analysis.report import interval_text
    from bench.suites.suite import one_line

    reader = packread.open_reader(url)
    try:
        data = scoring.load(reader, diagnostics=scoring.SEQUENCE_DIAGNOSTICS,  # for the sequence tasks' own criteria
                            log=log, sensitivity=False)  # the table does not use the tuner's studies
        left_out = [one_line(f"left out: suite {name}, a variant ({variant}) of other suites' runs; `bench report` "
                             "sets it beside them") for name, variant in scoring.variant_suites(reader).items()]
    finally:
        reader.dispose()
    scored = scoring.score(data)
    recs = answers.recommend(scored, action=action, obs=obs, reward=reward, priority=priority)
    rows = answers.recommendation_rows(recs)
    off_policy = [offpolicy.line_text(line) for line in offpolicy.off_policy_lines(data, recs)]
    seq_envs = sorted({e for r in rows if r["obs"] == "sequence" for e in r["envs"]})
    lm = claims.lm_criteria(scored, data.diagnostics, "sequence", seq_envs) if seq_envs else []
    lm_lines = [(crit, got) for crit in claims.LM_CRITERIA
                if (got := [f"{x['label']} {interval_text(x['point'], x['lo'], x['hi'], x['kind'])}"
                            f"{' ★' if x['mark'] == 'best' else ''}"
                            for x in lm if x["criterion"] == crit and x["point"] == x["point"]])]
    legend = dict(alpha=scoring.ALPHA, min_seeds=scoring.MIN_SEEDS, correction=answers.CORRECTION,
                  min_envs_generalise=generalise.MIN_ENVS_GENERALISE, equal_compute_only=answers.EQUAL_COMPUTE_ONLY)
    # As JSON holds them (what `--format json` prints): a cached answer and a computed one are the same values.
    plain = json.loads(json.dumps({"rows": rows, "lm": lm, "lm_lines": lm_lines, "legend": legend}, default=str))
    return Answer(plain["rows"], left_out, plain["lm"], [tuple(x) for x in plain["lm_lines"]], plain["legend"],
                  off_policy)


def _answer_key(ref: Reference, options: dict[str, Any]) -> str:
    """The sha256 of everything a shipped-reference answer depends on (see :func:`recommend`)."""
    import hashlib
    import json

    from importlib.metadata import version

    code = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for f in sorted(root.rglob("*.py")):  # bench's own code: any change may change an answer
        code.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    doc = dict(layout=_ANSWER_LAYOUT, packs=list(ref.manifests), code=code.hexdigest(), options=options,
               versions={lib: version(lib) for lib in ("numpy", "pandas", "scipy", "pyarrow")})
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _cached_answer(f: Path, key: str) -> Answer | None:
    """The answer kept in ``f`` if it records ``key`` and is whole; else None (it is then computed again)."""
    import json

    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != key:
        return None
    try:
        return Answer(list(doc["rows"]), list(doc["left_out"]), list(doc["lm"]),
                      [(str(c), list(got)) for c, got in doc["lm_lines"]], dict(doc["legend"]),
                      [str(x) for x in doc["off_policy"]], cached=True)
    except (KeyError, TypeError, ValueError):
        return None


def _keep_answer(f: Path, key: str, answer: Answer) -> None:
    """Write ``answer`` to ``f`` under ``key``, atomically (a reader sees the old file or the whole new one).
    A cache that cannot be written only costs the next call the computation."""
    import json

    tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
    try:
        f.parent.mkdir(mode=0o700, exist_ok=True)
        tmp.write_text(json.dumps({"key": key, **{k: getattr(answer, k) for k in _FIELDS}}), encoding="utf-8")
        tmp.replace(f)
        # Each change of bench or of the packs leaves the old answers unread: keep the most recent few.
        kept = sorted(f.parent.glob("*.json"), key=lambda x: x.stat().st_mtime, reverse=True)
        for old in kept[_KEEP_ANSWERS:]:
            old.unlink(missing_ok=True)
    except OSError:
        tmp.unlink(missing_ok=True)


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
    from bench.analysis.anchors import ensure_anchors

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
        out[env_id] = facts
    store.put_env_facts(out)
    return out


# --------------------------------------------------------------------------- #
# Where each hyperparameter came from
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class HyperparamRow:
    """One resolved value of one label on one env: ``source`` is ``default`` (the algorithm's, or the
    continuous-control default for ``normalize``), ``zoo`` (rl-baselines3-zoo's tuned values), ``suite``
    (``hyperparams``, ``env_hyperparams`` or the env's ``vec_env``) or ``--set``."""

    label: str
    env: str
    name: str
    value: Any
    source: str


def resolved_hyperparams(loaded: Any) -> list[HyperparamRow]:
    """Every label's resolved hyperparameters on every env of ``loaded`` (a
    :class:`bench.suites.suite.LoadedSuite`), as its cells hold them, each with its source: the layers
    of :func:`bench.algos.hyperparams.resolve` read back (defaults ← zoo ← suite ← ``--set``)."""
    from bench.algos.hyperparams import zoo_defaults
    from bench.envs import parse_env_key

    suite = loaded.suite
    set_paths = {o.path for o in getattr(loaded, "overrides", ())}
    first: dict[tuple[str, str], Any] = {}
    for c in loaded.cells:
        first.setdefault((c.label, c.env_id), c)
    rows: list[HyperparamRow] = []
    for j, a in enumerate(suite.algorithms):
        for i, e in enumerate(suite.envs):
            cell = first.get((a.display, e.key))
            if cell is None:
                continue
            over_name = e.key if e.key in a.env_hyperparams else e.id
            over = a.env_hyperparams.get(over_name, {})
            zoo = {} if a.impl == "python" else zoo_defaults(a.algo, parse_env_key(e.key)[1])
            for name, value in cell.hyperparams.items():
                if name in over:
                    path = f"algorithms[{j}].env_hyperparams.{over_name}.{name}"
                    src = "--set" if path in set_paths else "suite"
                elif name in a.hyperparams:
                    src = "--set" if f"algorithms[{j}].hyperparams.{name}" in set_paths else "suite"
                elif name == "vec_env":
                    where = f"envs[{i}].vec_env" if e.vec_env else "defaults.vec_env"
                    src = "--set" if where in set_paths else "suite"
                elif name in zoo:
                    src = "zoo"
                else:
                    src = "default"
                rows.append(HyperparamRow(a.display, e.key, name, value, src))
    return rows


def hyperparams_lines(loaded: Any, shown: set[tuple[str, str]]) -> list[str]:
    """``bench run --dry-run``'s account of the hyperparameters: the overrides, then for each (label, env)
    of ``shown`` its resolved values grouped by source (``--set``, suite, zoo, default), wrapped at 100."""
    import json
    import textwrap

    out = ["overrides: " + "; ".join(o.text for o in loaded.overrides)] if loaded.overrides else []
    rows = [r for r in resolved_hyperparams(loaded) if (r.label, r.env) in shown]
    for label, env in dict.fromkeys((r.label, r.env) for r in rows):
        out.append(f"{label} on {env}:")
        for src in ("--set", "suite", "zoo", "default"):
            got = [f"{r.name}={json.dumps(r.value)}" for r in rows if (r.label, r.env, r.source) == (label, env, src)]
            if got:
                out.append(textwrap.fill(", ".join(got), width=100, initial_indent=f"  {src + ':':<9}",
                                         subsequent_indent=" " * 11))
    return out


# --------------------------------------------------------------------------- #
# Exports
# --------------------------------------------------------------------------- #
class NothingToExport(ValueError):
    """An export that has nothing to write, or cannot write it in the asked format (``str(e)``: one line)."""


def export_scores(url: str, suite: str | None, column: str, format: str, out_path: Path,
                  log: Callable[[str], None] | None = None) -> tuple[int, int]:
    """Write normalised per-run scores, label → (runs × envs), for rliable: ``rliable-npz`` (one array per
    label, plus ``__envs__`` and ``__score__``) or ``rliable-json`` (``envs``, ``score``, ``scores``: label →
    rows, ``null`` where a column is padded). Read from the store alone (its recorded env facts).

    :returns: (labels, envs) written.
    :raises NothingToExport: no scores to write, or a label the ``.npz`` keeps for its own keys.
    """
    import json

    import numpy as np

    from bench.analysis import scoring

    scored = scoring.score(scoring.load(url, [suite] if suite else None, diagnostics=(), log=log))
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


def pack_suite(store: Any, suite: str, out: Path, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Pack one suite of ``store`` (a :class:`bench.storage.store.Store`) into the folder ``out``, with its envs'
    normalisation anchors computed first where missing (so the pack has them); returns the pack's manifest.
    Runs already in a sibling pack (a claim suite sharing the reference's cells) are not stored twice."""
    from bench.analysis.anchors import ensure_anchors

    if (meta := store.suite_env_meta(suite)) is not None:
        ensure_anchors(store, {e: m.get("threshold") for e, m in meta.items()}, log=log,
                       families={e: m.get("family") for e, m in meta.items()})
    return packed.pack(store.url, suite, out, beside=packed.packs_under(out.resolve().parent))


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
    url: str
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

    def with_outputs(self, outputs: Any) -> "RunPlan":
        """This plan with every cell writing ``outputs`` (:class:`bench.suites.suite.Outputs`)."""
        import dataclasses

        return dataclasses.replace(self, cells=[dataclasses.replace(c, outputs=outputs) for c in self.cells])


@dataclass
class SuiteRun:
    """What one :func:`run_suite` call did. ``results``: ``(cell, outcome)`` in the order the cells ended;
    ``interrupted``: the signal that stopped it (its finished cells are kept), else ``None``."""

    suite: str
    url: str
    cells: int
    done_before: int
    busy: int
    remeasured: int
    results: list = field(default_factory=list)
    seconds: float = 0.0
    interrupted: int | None = None

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


def plan_run(suite: str | Path, store: str | None = None, *, only: str | None = None,
             overrides: list[str] | tuple[str, ...] = (), workers: int | None = None, executor: str = "local",
             address: str | None = None, outputs: Any = None) -> RunPlan:
    """Check ``suite`` (a YAML file) and the ``store`` URL (default ``sqlite:///results/bench.db``), select the
    cells ``only`` names (e.g. ``"env=CartPole-v1,algo=ppo"``), and estimate their cost. Writes nothing.

    :param overrides: ``PATH=VALUE`` changes to the file (``bench run --set``), checked as the file is.
    :param outputs: the cells' :class:`bench.suites.suite.Outputs` (saved policies, TensorBoard, W&B);
        default: policies beside a SQLite store, else under ``results/policies``.
    :raises BadInput: the suite, ``only``, the URL or the executor options are wrong (one line each).
    """
    import dataclasses

    import sqlalchemy as sa

    from bench.run.saving import policies_dir
    from bench.storage.store import DEFAULT_URL, StoreError, check_url
    from bench.suites.cost import estimate
    from bench.suites.suite import Outputs, SuiteError, load_suite, parse_only, select

    try:
        loaded = load_suite(Path(suite), overrides)
    except SuiteError as e:
        raise BadInput(e.lines) from None
    try:
        filt = parse_only(only)
    except ValueError as e:
        raise BadInput(str(e)) from None
    try:
        url = check_url(store or DEFAULT_URL)
    except StoreError as e:
        raise BadInput(f"--store: {e}") from None
    if outputs is None:
        outputs = Outputs(policies=str(policies_dir(url).resolve()))
    cells = [dataclasses.replace(c, outputs=outputs) for c in select(loaded.cells, filt)]
    if not cells:
        raise BadInput(f"--only: {only!r} matches none of the {len(loaded.cells)} cells of {suite}")
    if executor not in ("local", "ray"):
        raise BadInput(f"--executor: {executor!r} is not allowed; allowed: local, ray")
    if address is not None:
        from bench.run.ray_executor import check_address

        if executor != "ray":
            raise BadInput(f"--address: only used with --executor ray (got --address {address!r} with --executor "
                           f"{executor})")
        if (why := check_address(address)) is not None:
            raise BadInput(f"--address: {why}")
        if sa.engine.make_url(url).get_backend_name() == "sqlite":
            # Every worker must reach the store, and SQLite's locking is only safe on one host.
            raise BadInput(f"--store: SQLite is not for several hosts; with --executor ray --address give a "
                           f"PostgreSQL store, e.g. postgresql+psycopg://USER@HOST:5432/DB (got {store!r})")
    return RunPlan(loaded, url, cells, estimate(cells, loaded.env_meta), executor, address,
                   workers or os.cpu_count() or 1, workers if address else None)


def run_suite(suite: str | Path | RunPlan, store: str | None = None, *, only: str | None = None,
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
    import time

    from bench.run.progress import LiveProgress
    from bench.run.runner import HEARTBEAT_EVERY_S, Interrupted, run_local
    from bench.storage.store import Store, SuiteConflict, is_claimable, this_owner
    from bench.storage.vocabulary import contended_done

    plan = suite if isinstance(suite, RunPlan) else plan_run(
        suite, store, only=only, overrides=overrides, workers=workers, executor=executor, address=address)
    if plan.cost.needs_confirmation() and not yes:
        raise BadInput(f"{plan.loaded.path}: the cells to run would take {plan.cost.line()}; to start it, run again "
                       "with --yes (or lower the budgets)")
    if plan.executor == "ray":
        from bench.run.ray_executor import RayUnavailable, connect

        try:  # a cluster that cannot be reached is found out before anything is written
            import ray  # noqa: F401

            if plan.address is not None:
                connect(plan.address)  # stopped at exit: ray.init registers ray.shutdown with atexit
        except ImportError:
            raise BadInput("--executor: ray is not installed; install it with pip install 'bench[ray]' (allowed: "
                           "local, ray)") from None
        except RayUnavailable as e:
            raise BadInput(f"--address: {e}") from None
    db = Store(plan.url)
    try:
        db.register(plan.name, str(plan.loaded.path), plan.loaded.suite.model_dump(mode="json"),
                    plan.loaded.env_meta, plan.loaded.cells, replace=replace)
    except SuiteConflict as e:
        raise BadInput(f"{plan.loaded.path}: name: {e}") from None
    # The store describes its envs (traits, spaces, threshold, anchor, time scale), so it is read later
    # without importing them: recorded here, where the env's package is importable.
    record_env_facts(db, {c.env_id: plan.loaded.env_meta[c.env_id] for c in plan.cells}, log=log)
    cells = plan.cells
    rows = db.rows([c.key for c in cells])
    todo = [c for c in cells if is_claimable(rows[c.key])]
    done_before = sum(rows[c.key].status == "done" for c in cells)
    again = frozenset(contended_done(rows) if remeasure else ())
    todo += [c for c in cells if c.key in again]
    run = SuiteRun(plan.name, plan.url, len(cells), done_before, len(cells) - len(todo) - done_before + len(again),
                   len(again))
    if on_start is not None:
        on_start(run, todo)
    if not todo:
        return run

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

                run_ray(plan.url, todo, finished, num_cpus=plan.workers,
                        max_in_flight=plan.max_in_flight, remeasure=again)
            else:
                run_local(plan.url, todo, this_owner(), plan.workers, finished, remeasure=again)
    except Interrupted as e:
        run.interrupted = e.signum
    run.seconds = time.perf_counter() - t0
    return run


# --------------------------------------------------------------------------- #
# Reading a store: which one, and its report
# --------------------------------------------------------------------------- #
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


def results_store(store: str | None = None, *, need_done: bool = True, fallback: bool = True,
                  log: Callable[[str], None] | None = None) -> tuple[str, str]:
    """The store a reading command answers from, and a line saying which it is.

    ``store`` defaults to ``sqlite:///results/bench.db``; when that was left at its default and does not exist,
    the shipped reference (:func:`reference`) is read instead (unless not ``fallback``).

    :raises BadInput: a bad URL, no store, a store with no runs (with ``need_done``: no finished run).
    :raises bench.storage.store.StoreError: a store that cannot be reached or read.
    """
    from bench.storage.store import DEFAULT_URL, Store, StoreError, StoreMissing, check_url, describe_url

    given = store or DEFAULT_URL
    try:
        url = check_url(given)
    except StoreError as e:
        raise BadInput(f"--store: {e}") from None
    try:
        db = Store(url, readonly=True)
    except StoreMissing:
        if given == DEFAULT_URL and fallback and (ref := reference(log=log, unpack=True)) is not None:
            return ref.url, (f"reading the project's shipped reference results ({ref.folder}/): "
                             f"there is no store of your own at {describe_url(DEFAULT_URL)}")
        raise BadInput(f"--store: no results store at {describe_url(url)}; run a suite first (`bench run SUITE.yaml`)") \
            from None
    status = db.runs_frame()["status"] if db.suite_names() else []
    db.dispose()
    if len(status) == 0:
        raise BadInput(f"--store: the store at {describe_url(url)} has no runs; run a suite first (`bench run SUITE.yaml`)")
    if need_done and not (status == "done").any():
        raise BadInput(f"--store: the store at {describe_url(url)} has no finished runs; run a suite first "
                       "(`bench run SUITE.yaml`)")
    return url, f"reading {describe_url(url)}"


def report(suites: list[str] | None = None, store: str | None = None, out: str | Path | None = None, *,
           log: Callable[[str], None] | None = None, stage: Callable[[str], None] | None = None) -> Path:
    """Write the self-contained HTML report (``index.html``, figures embedded) of ``suites`` (names in the
    store, or their YAML files; default: every suite) from the store alone; returns its path.

    ``store`` as :func:`results_store` (a store whose runs all failed still gets a report: it lists the
    failures). ``out`` defaults to ``reports/<suite names joined by +>/`` or ``reports/all/``. ``log`` is told
    which store is read, once the inputs are checked, then what the report leaves out; ``stage`` each step as
    it starts (for a live status line).

    :raises BadInput: a store or suite that is not there, an unwritable ``out``.
    """
    from bench.analysis.report import build
    from bench.storage.store import Store
    from bench.suites.suite import SuiteError, load_suite

    url, where = results_store(store, need_done=False, log=log)
    db = Store(url, readonly=True)
    have = db.suite_names()
    db.dispose()
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
    return build(url, out_dir, chosen or None, log=log, stage=stage)
