"""Recommendations: per problem profile, an answer about the next env of its kind (issues 40 and 63).

Each row carries the answer in three parts, computed by :mod:`bench.analysis.choices` (labels that can still be
best, those ruled out, a default with its regret, and their leave-one-env-out record: ``Recommendation.choice``
and ``.track``); the compact table, the report's first table and ``--format`` print those. This module also
keeps the headline test of the best two (``--verbose``, the decision matrix's marks). For a profile (action ×
observations × reward) and a priority (samples or time), the headline:

1. **Candidates.** Algorithms with runs on every env of the profile, their implementations pooled,
   but only where they agree: where ``bench parity`` (:mod:`bench.stats.parity`) calls two
   implementations of an algorithm *different* on one of the profile's envs, or cannot check them
   (fewer than :data:`~bench.analysis.scoring.MIN_SEEDS` runs of one there), they are ranked apart,
   as labels. Two algorithms whose runs have identical returns on every env and seed they ran (the
   same computation under two names: ``ac_mc`` is REINFORCE with its default value baseline) are
   counted once, under the first name, and the answer says so.
2. **The best two** by the priority's score (mean over envs of each env's IQM).
3. **One headline test**, fixed by the number of envs before any score is read
   (:mod:`bench.stats.generalise`): from :data:`~bench.stats.generalise.MIN_ENVS_GENERALISE`
   envs, a t-test over the per-env effects with every env weighted equally
   (:func:`bench.stats.generalise.equal_weights`), whose answer is a claim about the next env of the kind; with fewer, the stratified permutation test over the envs measured, whose answer
   names them ("on CartPole-v1, LunarLander-v3: ppo"). Time is compared on one machine per env, on
   quiet cores only (:mod:`bench.analysis.machines`).
4. **Holm** across the headline tests of every profile × priority of the store
   (:func:`bench.stats.generalise.holm`), whatever the call's filter: the adjusted p is what decides and
   what is printed, and a filtered call returns the very rows of the full one.
5. **Verdict.** Adjusted p < :data:`~bench.analysis.scoring.ALPHA` with ≥ MIN_SEEDS runs per side and
   env: ``recommended`` (profile-level) or ``measured`` (on the named envs). Adjusted p < ALPHA with
   fewer runs: ``leaning``. Otherwise ``no difference`` ("no difference measured"); also where the test's
   mean effect puts the runner-up by score ahead (no leader is named then).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from bench.stats import generalise, parity, aggregate as stats
import bench.analysis.choices as choices
from bench.analysis.scoring import (ACTIONS, ALPHA, CRITERIA, MIN_SEEDS, N_BOOT, OBS, PRIORITIES, PRIORITY_CRITERION,
                                    REWARDS, Criterion, Scored, hardware_line)

__all__ = ["CORRECTION", "EQUAL_COMPUTE_ONLY", "NO_ENV", "Candidate", "Recommendation", "leave_one_env_out",
           "p_text", "recommend", "recommendation_rows"]

#: The multiplicity correction across the headline answers of one call, as the footer names it.
CORRECTION = "Holm"
#: Why a profile has no answer: no env of it was measured, or (by samples) its envs ran only at an equal CPU budget.
NO_ENV = "insufficient evidence: no measured environment covers this profile"
EQUAL_COMPUTE_ONLY = ("insufficient evidence: its envs ran only at an equal CPU budget (cpu_seconds), where sample "
                      "efficiency is not scored")


@dataclass(frozen=True)
class Candidate:
    """What a profile ranks: an algorithm with its implementations pooled (``by="algo"``), or one label
    (``by="label"``) where the implementations were ranked apart."""

    name: str
    by: str
    algo: str


@dataclass(frozen=True)
class Recommendation:
    """One problem profile's answer (see the module docstring). Built whole once the call's Holm adjustment is
    known (:func:`recommend`), and never changed after.

    :param verdict: ``recommended`` | ``measured`` | ``leaning`` | ``no difference`` | ``insufficient evidence``.
    :param algorithm: the winner (or the leader by score); ``runner_up`` the other of the two tested.
    :param p_value: the headline test's raw p; ``p_adjusted`` after Holm over the call; ``p_floor`` the
        least p the test can give where it is a Monte Carlo test (else ``None``); ``test``: ``t over envs``
        or ``permutation``.
    :param tested_envs: the envs the test used (time: those where both share a known machine);
        ``effects``: per tested env, mean(algorithm) − mean(runner-up).
    :param pooling: notes on candidates ranked apart or counted once.
    :param loo: leave-one-env-out track record ``(hits, trials)``, if ≥ 2 envs.
    :param labels: the labels each of the two tested candidates stands for (its implementations pooled, or
        the one label it is where they were ranked apart): where the report's decision matrix puts the answer.
    :param choice: the three parts (can still be best, ruled out, default with its regret:
        :mod:`bench.analysis.choices`); ``track``: their leave-one-env-out record.
    """

    action: str
    obs: str
    reward: str
    priority: str
    verdict: str
    algorithm: str | None = None
    runner_up: str | None = None
    best_score: stats.Interval | None = None
    runner_up_score: stats.Interval | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    p_floor: float | None = None
    test: str = ""
    meta: generalise.Meta | None = None
    implementation: str = ""
    impl: tuple[str, str, str | None, float | None] | None = None
    pooling: list[str] = field(default_factory=list)
    envs: list[str] = field(default_factory=list)
    tested_envs: list[str] = field(default_factory=list)
    effects: list[float] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)
    enough: bool = False
    message: str = ""
    loo: tuple[int, int] | None = None
    hardware: str = ""
    labels: dict[str, list[str]] = field(default_factory=dict)
    choice: choices.Selection | None = None
    track: choices.Track | None = None

    @property
    def profile(self) -> str:
        return f"{self.action} · {self.obs} · {self.reward}"


def _profile_envs(scored: Scored, a: str, o: str, rw: str) -> list[str]:
    r = scored.runs[scored.runs["final_norm"].notna()]
    return sorted(e for e in r["env"].unique()
                  if (scored.traits[e]["action"], scored.traits[e]["obs"], scored.traits[e]["reward"]) == (a, o, rw))


# --------------------------------------------------------------------------- #
# Candidates: pool only implementations that agree; one computation counts once
# --------------------------------------------------------------------------- #
def _disagreements(scored: Scored, labels: list[str], envs: list[str]) -> list[tuple[str, str, str, bool]]:
    """``(env, a, b, few)`` for each pair of ``labels`` (of one algorithm) that may not be pooled on an env of
    ``envs``: ``few`` false where parity calls them different (as its table says, however few the runs),
    true where it does not and one has too few runs for parity to check (its table: inconclusive)."""
    out = []
    for a, b in itertools.combinations(labels, 2):
        # Each env's parity depends on that env's runs alone: computed once per pair, for every env.
        by_env = scored.once(("parity", a, b), lambda: parity.parity(scored.runs, a, b))  # noqa: B023 - called at once
        for ep in (ep for ep in by_env if ep.env in envs):
            n = {c.n_a for c in ep.comparisons} | {c.n_b for c in ep.comparisons}
            if min(n) < MIN_SEEDS or ep.verdict == "different":
                out.append((ep.env, a, b, ep.verdict != "different"))
    return out


def _disagree(scored: Scored, labels: list[str], envs: list[str]) -> list[str]:
    """Why ``labels`` (of one algorithm) may not be pooled on ``envs``: ``"env (a v b different)"`` where parity
    calls them different, ``"env (a v b: fewer than 5 runs to check parity)"`` where it cannot check them."""
    return [f"{e} ({a} v {b}: fewer than {MIN_SEEDS} runs to check parity)" if few else f"{e} ({a} v {b} different)"
            for e, a, b, few in _disagreements(scored, labels, envs)]


def _apart_reason(scored: Scored, c: Candidate, col: str, envs: list[str]) -> str:
    """Why candidate ``c`` (a label) stands alone, as the parity table says it: "parity: different on ENV"
    and/or "fewer than 5 runs to check parity on ENV" (an "inconclusive" row there)."""
    r = scored.runs
    labels = sorted(lb for lb in r.loc[r["algo"] == c.algo, "label"].unique()
                    if any(t.size for t in scored.tasks(lb, col, envs)))  # as _candidates picks them
    why = [(e, few) for e, a, b, few in _disagreements(scored, labels, envs) if c.name in (a, b)]
    different = sorted({e for e, few in why if not few})
    few = sorted({e for e, f in why if f})
    return "; ".join([*([f"parity: different on {', '.join(different)}"] if different else []),
                      *([f"fewer than {MIN_SEEDS} runs to check parity on {', '.join(few)}"] if few else [])])


def _returns(scored: Scored, c: Candidate, envs: list[str]) -> dict[tuple[str, Any], float]:
    """``(env, seed) → final return`` of the candidate's runs on ``envs`` (its returns per env read once)."""
    def per_env() -> dict[str, dict[tuple[str, Any], float]]:
        r = scored.runs[scored.runs[c.by] == c.name]
        out: dict[str, dict[tuple[str, Any], float]] = {}
        for e, s, v in zip(r["env"], r["seed"], r["final_return"]):
            out.setdefault(e, {})[(e, s)] = float(v)
        return out

    mine = scored.once(("returns", c.by, c.name), per_env)
    return {k: v for e in envs for k, v in mine.get(e, {}).items()}


def _candidates(scored: Scored, crit: Criterion, envs: list[str]) -> tuple[list[Candidate], list[str]]:
    """The profile's candidates on ``envs`` and notes on how they were formed (module docstring, step 1)."""
    r = scored.runs
    cands, notes = [], []
    for al in sorted(a for a in r["algo"].unique() if scored.covers(a, crit.column, envs, "algo")):
        labels = sorted(lb for lb in r.loc[r["algo"] == al, "label"].unique()
                        if any(t.size for t in scored.tasks(lb, crit.column, envs)))
        apart = _disagree(scored, labels, envs) if len(labels) > 1 else []
        if apart:
            notes.append(f"{al} ranked by implementation: {'; '.join(apart)}")
            cands += [Candidate(lb, "label", al) for lb in labels if scored.covers(lb, crit.column, envs)]
        else:
            cands.append(Candidate(al, "algo", al))
    kept: list[tuple[Candidate, dict]] = []  # each with its returns, read once
    for c in cands:
        mine = _returns(scored, c, envs)
        twin = next((k for k, theirs in kept if theirs == mine), None)
        if twin is None:
            kept.append((c, mine))
        else:
            notes.append(f"{c.name} is the same computation as {twin.name} (identical returns on every env and "
                         "seed): counted once")
    return [c for c, _ in kept], notes


def _rank(scored: Scored, cands: list[Candidate], crit: Criterion, envs: list[str],
          n_boot: int) -> tuple[list[Candidate], dict[str, stats.Interval]]:
    est = {c.name: crit.estimate(scored.tasks(c.name, crit.column, envs, c.by), n_boot=n_boot) for c in cands}
    return sorted(cands, key=lambda c: (-est[c.name].point, c.name)), est


def _labels(scored: Scored, c: Candidate, col: str, envs: list[str]) -> list[str]:
    """The labels whose runs candidate ``c`` pools on ``envs`` (those with a score of ``col`` there)."""
    if c.by == "label":
        return [c.name]
    r = scored.runs
    return sorted(lb for lb in r.loc[r["algo"] == c.name, "label"].unique() if any(t.size for t in scored.tasks(lb, col, envs)))


def _counts(scored: Scored, c: Candidate, col: str, envs: list[str]) -> str:
    n = [t.size for t in scored.tasks(c.name, col, envs, c.by)]
    return f"{min(n)}" if min(n) == max(n) else f"{min(n)}–{max(n)}"


# --------------------------------------------------------------------------- #
# The headline test, and the second level (implementations)
# --------------------------------------------------------------------------- #
def _headline(scored: Scored, crit: Criterion, envs: list[str], best: Candidate, second: Candidate) -> dict[str, Any]:
    """The one test of ``best`` against ``second``: ``p``, its Monte Carlo ``floor``, ``stat`` (its sign says
    who is ahead), ``test``, ``meta``, ``tested`` envs, per-env ``effects`` and whether the runs are ``enough``."""
    xt, yt = scored.pair(best.name, second.name, crit, envs, best.by, second.by)
    used = [i for i, (a, b) in enumerate(zip(xt, yt)) if a.size and b.size]
    xt, yt = [xt[i] for i in used], [yt[i] for i in used]
    out: dict[str, Any] = dict(tested=[envs[i] for i in used], p=None, floor=None, stat=0.0, test="", meta=None,
                               effects=[], enough=bool(used) and all(a.size >= MIN_SEEDS for a in xt + yt))
    if not used:
        return out
    effects, _ = generalise.env_effects(xt, yt)
    out["effects"] = [float(e) for e in effects]
    if len(used) >= generalise.MIN_ENVS_GENERALISE:
        m = generalise.equal_weights(effects)
        out.update(p=m.p, stat=m.mu, test="t over envs", meta=m)
    else:
        t = crit.compare(xt, yt)
        out.update(p=t.p_value, stat=t.statistic, test="permutation",
                   floor=None if t.exact else 1.0 / (1 + t.n_permutations))
    return out


def _implementation(scored: Scored, c: Candidate, crit: Criterion, envs: list[str],
                    n_boot: int) -> tuple[str, str, str | None, float | None] | None:
    """Which label of candidate ``c`` did better on ``envs``: ``(verdict, first, second, p)``, verdict ``better``
    | ``tie`` | ``leaning`` (fewer than MIN_SEEDS runs per env) | ``only``; ``("apart", c.name, why, None)``
    where the candidate is one label because its implementations were ranked apart (:func:`_apart_reason`).
    Not Holm-adjusted: it
    is no headline answer."""
    if c.by == "label":
        return ("apart", c.name, _apart_reason(scored, c, crit.column, envs) or None, None)
    r = scored.runs
    labels = sorted(lb for lb in r.loc[r["algo"] == c.name, "label"].unique() if scored.covers(lb, crit.column, envs))
    if len(labels) < 2:
        return ("only", labels[0], None, None) if labels else None
    ranked, _ = _rank(scored, [Candidate(lb, "label", c.name) for lb in labels], crit, envs, n_boot)
    a, b = ranked[0].name, ranked[1].name
    xt, yt = scored.pair(a, b, crit, envs)
    both = [i for i, (x, y) in enumerate(zip(xt, yt)) if x.size and y.size]
    if not both:
        return ("leaning", a, b, None)
    t = crit.compare([xt[i] for i in both], [yt[i] for i in both])
    if any(min(xt[i].size, yt[i].size) < MIN_SEEDS for i in both):
        return ("leaning", a, b, t.p_value)
    return ("tie" if t.p_value >= ALPHA else "better", a, b, t.p_value)


def _verdict(rec: Recommendation, stat: float) -> tuple[str, str]:
    """The verdict and message of ``rec`` from its adjusted p (module docstring, step 5); ``stat`` is the headline
    test's mean effect, whose sign is checked against the ranking."""
    p = rec.p_adjusted
    if p is None:
        return "insufficient evidence", rec.message or (
            f"insufficient evidence: {rec.algorithm} and {rec.runner_up} share no known machine on quiet cores on "
            "any env")
    shown = p_text(rec)
    if stat < 0:
        # The test's mean effect over envs has the other sign than the ranking by score: naming either would
        # show a leader that one of its own two numbers puts behind (issue 63, defect 9).
        return "no difference", (f"no leader: {rec.algorithm} scores higher, but {rec.runner_up} is ahead on the "
                                 f"mean effect over envs (adjusted p {shown})")
    if not p < ALPHA:
        return "no difference", (f"no difference measured between {rec.algorithm} and {rec.runner_up} "
                                 f"(adjusted p {shown})")
    if not rec.enough:
        return "leaning", (f"leaning {rec.algorithm} over {rec.runner_up} (adjusted p {shown}; a winner needs ≥ "
                           f"{MIN_SEEDS} runs per side and env)")
    if rec.test == "t over envs":
        m = rec.meta
        return "recommended", (f"{rec.algorithm}, then {rec.runner_up}: mean effect over envs of this kind "
                               f"{m.mu:+.3f} [{m.lo:+.3f}, {m.hi:+.3f}] (t over {m.k} envs weighted equally; sd of "
                               f"the env effects {m.tau:.3f}), adjusted p {shown}")
    return "measured", (f"on {', '.join(rec.tested_envs)}: {rec.algorithm} ahead of {rec.runner_up} (adjusted p "
                        f"{shown}); fewer than {generalise.MIN_ENVS_GENERALISE} envs make no claim about the next "
                        "env of this kind")


def recommend(scored: Scored, *, action: str | None = None, obs: str | None = None, reward: str | None = None,
              priority: str | None = None, n_boot: int = N_BOOT, track_record: bool = True) -> list[Recommendation]:
    """A recommendation for every profile matching the given traits (``None`` = every value); see the module
    docstring. Every row is computed whatever the filter, and the headline p-values are Holm-adjusted over every
    profile × priority of the store (a fixed family), so a filtered call returns exactly the rows of the full one."""
    rows: list[dict[str, Any]] = []  # each row's fields, until the call's Holm adjustment is known
    stats_of: list[float] = []
    for a, o, rw, p in itertools.product(ACTIONS, OBS, REWARDS, PRIORITIES):
        if a == "continuous" and o == "sequence":
            continue  # tokens are discrete actions: no such problem
        profile = _profile_envs(scored, a, o, rw)
        crit = CRITERIA[PRIORITY_CRITERION[p]]
        # Envs without a time axis have no time score, and envs run at an equal CPU budget no sample score.
        scored_on = set(scored.runs.loc[scored.runs[crit.column].notna(), "env"])
        envs = [e for e in profile if e in scored_on]
        row: dict[str, Any] = dict(action=a, obs=o, reward=rw, priority=p, verdict="insufficient evidence", envs=envs,
                                   hardware=hardware_line(scored, envs) if crit.is_time else "")
        rows.append(row)
        stats_of.append(0.0)
        if not envs:
            # A profile env has anchors (final_norm), so by samples the only way to lack a score is equal compute.
            row["message"] = EQUAL_COMPUTE_ONLY if profile and crit.over_steps else NO_ENV
            continue
        row["choice"] = choices.select(scored, crit, envs)
        if track_record:
            row["track"] = choices.track_record(scored, crit, envs)
        cands, row["pooling"] = _candidates(scored, crit, envs)
        row["runs"] = {c.name: _counts(scored, c, crit.column, envs) for c in cands}
        if len(cands) < 2:
            row["message"] = ("insufficient evidence: " + (f"only {cands[0].name} ran every env of this profile"
                                                           if cands else "no algorithm ran every env of this profile"))
            row["algorithm"] = cands[0].name if cands else None
            continue
        ranked, est = _rank(scored, cands, crit, envs, n_boot)
        best, second = ranked[0], ranked[1]
        h = _headline(scored, crit, envs, best, second)
        stats_of[-1] = h["stat"]
        impl = _implementation(scored, best, crit, envs, n_boot)
        row.update(algorithm=best.name, runner_up=second.name, best_score=est[best.name],
                   runner_up_score=est[second.name],
                   labels={c.name: _labels(scored, c, crit.column, envs) for c in (best, second)},
                   p_value=h["p"], p_floor=h["floor"], test=h["test"], meta=h["meta"], tested_envs=h["tested"],
                   effects=h["effects"], enough=h["enough"], impl=impl, implementation=_impl_sentence(impl))
        if track_record and len(envs) >= 2:
            row["loo"] = leave_one_env_out(scored, crit, envs, n_boot=min(n_boot, 200))
    out = []
    for row, adj, stat in zip(rows, generalise.holm([r.get("p_value") for r in rows]), stats_of):
        rec = Recommendation(**row, p_adjusted=adj)
        if rec.algorithm and rec.runner_up:
            verdict, message = _verdict(rec, stat)
            rec = replace(rec, verdict=verdict, message=message)
        out.append(rec)
    return [r for r in out if not ((action and r.action != action) or (obs and r.obs != obs)
                                   or (reward and r.reward != reward) or (priority and r.priority != priority))]


def _impl_sentence(impl: tuple[str, str, str | None, float | None] | None) -> str:
    if impl is None:
        return ""
    verdict, a, b, p = impl
    if verdict == "only":
        return f"only {a} ran every env"
    if verdict == "apart":
        return f"{a} alone: its algorithm's implementations are ranked apart ({b or 'bench parity'})"
    ps = "no shared machine" if p is None else f"p = {p:.2g}"
    return {"tie": f"{a} ≈ {b} ({ps})", "better": f"{a} better than {b} ({ps})",
            "leaning": f"leaning {a} over {b} ({ps}; fewer than {MIN_SEEDS} runs per env)"}[verdict]


def leave_one_env_out(scored: Scored, crit: Criterion, envs: list[str], *, n_boot: int = 200) -> tuple[int, int]:
    """How often the ranking would have been right on an env it had not seen: ``(hits, trials)``.

    For each env E of the profile: the candidate ranked first on the other envs is a hit if it is
    tied-best on E: the best there by point estimate, or not significantly worse than it (the
    permutation test at :data:`ALPHA`; time on one machine). An E where the rule names nothing, or
    where that candidate did not run, is not a trial.
    """
    hits = trials = 0
    for held in envs:
        rest = [e for e in envs if e != held]
        cands, _ = _candidates(scored, crit, rest)
        if not cands:
            continue
        pick = _rank(scored, cands, crit, rest, n_boot)[0][0]
        on_e = [c for c in cands if scored.covers(c.name, crit.column, [held], c.by)]
        if pick not in on_e:
            continue
        trials += 1
        top = _rank(scored, on_e, crit, [held], n_boot)[0][0]
        if top == pick:
            hits += 1
            continue
        xt, yt = scored.pair(top.name, pick.name, crit, [held], top.by, pick.by)
        hits += int(not (xt[0].size and yt[0].size) or crit.compare(xt, yt).p_value >= ALPHA)
    return hits, trials


# --------------------------------------------------------------------------- #
# Rows for the command and the report
# --------------------------------------------------------------------------- #
def _answer_text(r: Recommendation) -> str:
    return {"recommended": f"{r.algorithm}", "measured": f"on {', '.join(r.tested_envs)}: {r.algorithm}",
            "leaning": f"leaning {r.algorithm}", "no difference": "no difference measured"}.get(
        r.verdict, "insufficient evidence")


def p_text(r: Recommendation) -> str:
    """The adjusted p as printed: at the Monte Carlo floor, ``< floor × Holm's multiplier`` (an upper bound)."""
    if r.p_adjusted is None:
        return "—"
    if r.p_floor is not None and r.p_value is not None and r.p_value <= r.p_floor * (1 + 1e-9):
        return f"< {r.p_adjusted:.0e}" if r.p_adjusted < 1 else "1"
    return f"{r.p_adjusted:.2g}"


def recommendation_rows(recs: list[Recommendation]) -> list[dict[str, Any]]:
    """Flat rows of the recommendation table, for ``bench recommend --format`` and the report.

    Keys: action, obs, reward, priority, verdict, answer (one short phrase), algorithm, runner_up, score,
    runner_up_score (as printed; their numbers as ``score_point, score_lo, score_hi, score_kind`` and likewise),
    p_value (raw), p_adjusted (Holm over the call), p_text (as printed), test, correction, envs, tested_envs,
    effects (env → mean difference, winner − runner-up), directions (``+ + −``, in ``tested_envs`` order),
    implementation (a sentence), impl (short), pooling (notes), runs (candidate → runs per env), track_record
    (``hits/trials`` or ""), hardware, message, evidence (``2 envs, 20 v 20 runs``), labels (each of the two
    tested candidates → the labels it stands for).
    """
    rows = []
    for r in recs:
        rows.append(dict(
            action=r.action, obs=r.obs, reward=r.reward, priority=r.priority, verdict=r.verdict,
            answer=_answer_text(r), algorithm=r.algorithm, runner_up=r.runner_up,
            score=str(r.best_score) if r.best_score else "", runner_up_score=str(r.runner_up_score) if r.runner_up_score else "",
            **_interval_fields("score", r.best_score), **_interval_fields("runner_up_score", r.runner_up_score),
            p_value=r.p_value, p_adjusted=r.p_adjusted, p_text=p_text(r), test=r.test, correction=CORRECTION,
            envs=list(r.envs), tested_envs=list(r.tested_envs), effects=dict(zip(r.tested_envs, r.effects)),
            directions=generalise.directions(r.effects), implementation=r.implementation, impl=_impl_short(r),
            pooling=list(r.pooling), runs=dict(r.runs),
            track_record=f"{r.loo[0]}/{r.loo[1]}" if r.loo and r.loo[1] else "", hardware=r.hardware, message=r.message,
            evidence=_evidence(r), labels={k: list(v) for k, v in r.labels.items()}, **_choice_fields(r),
        ))
    return rows


def _named(label: str, sel: choices.Selection) -> str:
    """A label as the answer names it: with its twins (``a = b``), the same computation under other names."""
    return " = ".join((label, *sel.twins.get(label, ())))


def _choice_fields(r: Recommendation) -> dict[str, Any]:
    """The three parts of a row as flat fields (``candidates``, ``ruled_out``, ``default``, ``default_how``,
    ``default_regret`` and its numbers, ``regrets``, ``partial``, ``label_parts``: label → [algorithm,
    implementation]) and their leave-one-env-out record
    (``choice_track``: ``covered/trials`` and the mean regret of the default and of the single best)."""
    sel, tr = r.choice, r.track
    if sel is None:
        return dict(candidates=[], ruled_out=[], default=None, default_how="", default_regret="", default_regret_point=None,
                    default_regret_lo=None, default_regret_hi=None, regrets={}, partial=[], label_parts={}, choice_track="",
                    choice_track_fields=None)
    d = sel.default
    reg = sel.regret[d.label] if d else None
    nan = lambda v: None if v is None or v != v else float(v)  # noqa: E731 - JSON has no NaN
    return dict(
        candidates=[_named(c, sel) for c in sel.candidates],
        ruled_out=[dict(label=_named(lb, sel), p=p, behind=b) for lb, p, b in sel.ruled_out],
        default=_named(d.label, sel) if d else None, default_how=d.how if d else "",
        default_regret=str(reg) if reg else "", default_regret_point=nan(reg.point if reg else None),
        default_regret_lo=nan(reg.lo if reg else None), default_regret_hi=nan(reg.hi if reg else None),
        regrets={_named(k, sel): str(v) for k, v in sel.regret.items()}, partial=list(sel.partial),
        label_parts={_named(k, sel): list(v) for k, v in sel.parts.items()},
        choice_track=(f"{tr.covered}/{tr.trials}; {tr.default:.3f} v {tr.single:.3f}" if tr else ""),
        choice_track_fields=(dict(trials=tr.trials, covered=tr.covered, default=tr.default, single=tr.single,
                                  gap_closed=nan(tr.gap_closed)) if tr else None))


def _evidence(r: Recommendation) -> str:
    """The row's evidence in a few words: ``2 envs, 20 v 20 runs`` (the answer's runs, then the runner-up's)."""
    if not r.envs:
        return "no env"
    n = len(r.envs)
    pair = [str(r.runs[x]) for x in (r.algorithm, r.runner_up) if x in r.runs]
    return f"{n} env{'s' if n > 1 else ''}, {' v '.join(pair)} runs"


def _impl_short(r: Recommendation) -> str:
    """The implementation answer in a few characters: ``sb3 ≈ bench``, ``bench > sb3``, ``leaning sb3``."""
    if r.impl is None:
        return ""
    verdict, a, b, _ = r.impl
    algo = r.impl[1].split("-")[0] if verdict == "apart" else r.algorithm
    short = {x: x[len(algo) + 1:] if x and algo and x.startswith(algo + "-") else x for x in (a, b)}
    if verdict == "only":
        return f"only {short[a]}"
    if verdict == "apart":
        return "ranked apart"
    return {"tie": f"{short[a]} ≈ {short[b]}", "better": f"{short[a]} > {short[b]}", "leaning": f"leaning {short[a]}"}[verdict]


def _interval_fields(prefix: str, iv: stats.Interval | None) -> dict[str, Any]:
    if iv is None:
        return {f"{prefix}_{k}": None for k in ("point", "lo", "hi", "kind")}
    nan = lambda v: None if v != v else float(v)  # noqa: E731 - JSON has no NaN
    return {f"{prefix}_point": nan(iv.point), f"{prefix}_lo": nan(iv.lo), f"{prefix}_hi": nan(iv.hi), f"{prefix}_kind": iv.kind}

