"""Which algorithm for my problem: ``bench recommend``'s answer from a store or the shipped reference,
computed once per pack content (the answer cache)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench.api._common import BadInput, Reference, cache_dir, parse_store, reference
from bench.storage.packread import SCHEME as PACKS
from bench.storage.urls import StoreURL

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


def recommend(source: StoreURL | str | Reference | None = None, *, action: str | None = None, obs: str | None = None,
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
    from bench.envs.traits import ACTIONS, OBS, PRIORITIES, REWARDS

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
    if isinstance(source, str) and not source.startswith(PACKS):
        source = parse_store(source)  # a store URL given as text: checked here, once
    return _compute_answer(source, action=action, obs=obs, reward=reward, priority=priority, log=log)


def _compute_answer(source: StoreURL | str, *, action, obs, reward, priority, log) -> Answer:
    """:func:`recommend`'s answer for ``source`` (a :class:`StoreURL`, or the shipped reference's
    ``packs:FOLDER``), computed: read once (:func:`bench.analysis.scoring.load`), scored, answered."""
    import json

    from bench.stats import generalise
    from bench.analysis import answers, claims, offpolicy, scoring
    from bench.analysis.matrix import interval_text
    from bench.analysis.readmodel import ReadModel
    from bench.run.anchors import for_reading
    from bench.suites.suite import one_line

    with ReadModel(source) as db:  # one read of the store or packs for the whole answer
        data = scoring.load(db, diagnostics=scoring.SEQUENCE_DIAGNOSTICS,  # for the sequence tasks' own criteria
                            log=log, sensitivity=False,  # the table does not use the tuner's studies
                            anchors=for_reading)
        left_out = [one_line(f"left out: suite {name}, a variant ({variant}) of other suites' runs; `bench report` "
                             "sets it beside them") for name, variant in scoring.variant_suites(db).items()]
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
    root = Path(__file__).resolve().parents[1]  # the bench package
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
