"""Replay races on the shipped reference: what a race on each env would have picked, and at what CPU.

    .venv/bin/python scripts/race_replay.py                 # docs/race.md's tables (markdown, to stdout)
    .venv/bin/python scripts/race_replay.py --explore       # every design of the search, on both halves of the envs

The reference holds every run's whole learning curve (each episode's env step and CPU seconds). A race whose
rungs are fractions of the full budget, continuing runs from checkpoints, sees exactly the prefixes of those
curves, so its decisions (:func:`bench.analysis.race.race`) replay without new runs. For each env of the reference
(every env of ``bench recommend``'s read: vector, pixels and sequence):

- the grid's tied set: the best label by IQM of the sample score (``auc_steps_norm``) and every label the
  reference's own test (:meth:`bench.analysis.criteria.Criterion.compare`, the stratified permutation test,
  two-sided at :data:`bench.analysis.criteria.ALPHA`) cannot tell from it, as ``bench report`` marks ties;
- the race's pick (the highest IQM at the last rung among the labels still in) and whether it is in that set;
- the CPU the race spent as a fraction of the grid's: the CPU seconds of every prefix it ran (each label's seeds
  to the last rung the label reached; a prefix's CPU is read off the run's per-episode CPU stamps) over the CPU
  seconds of every run of the grid.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.analysis import race as rc  # noqa: E402
from bench.analysis import scoring  # noqa: E402
from bench.analysis.criteria import ALPHA, CRITERIA  # noqa: E402
from bench.stats.aggregate import iqm  # noqa: E402

CRIT = CRITERIA["sample efficiency"]
#: What a pick is also judged on, beside: the normalised final return (the naive race decides on the last window).
FINAL = CRITERIA["final performance"]


@dataclass(frozen=True)
class Design:
    """A race design: rung fractions, the score a rung decides on, alpha and its spending, seeds before the end."""

    name: str
    rungs: tuple[float, ...]
    score: str
    alpha: float
    spending: str
    first_seeds: int | None = None
    until_one: bool = False
    #: Margins from the other envs (:func:`margins`): the quantile of how far a trailing label caught up on its
    #: leader after each rung; ``None``: no margin.
    catch_up: float | None = None


def baseline(alpha: float) -> Design:
    """The issue's naive race: rungs at 1/9, 1/3 and 1 of the budget, last-window return, alpha at every rung."""
    return Design(f"naive, alpha {alpha:g}", (1 / 9, 1 / 3, 1.0), "last", alpha, "none")


#: The rung ladders the search tries: three times as far each rung (to 1/9, 1/27, 1/81 of the budget), and four.
LADDERS = {"1/9,1/3,1": (1 / 9, 1 / 3, 1.0), "1/27..1": (1 / 27, 1 / 9, 1 / 3, 1.0),
           "1/81..1": (1 / 81, 1 / 27, 1 / 9, 1 / 3, 1.0), "1/64..1 x4": (1 / 64, 1 / 16, 1 / 4, 1.0)}
#: The least fraction of tied-best envs a design must reach on the first half to be chosen (the issue's target).
TARGET = 0.9


def designs(alphas: tuple[float, ...] = (0.05, 0.1, 0.2)) -> list[Design]:
    """The search: every ladder, rung score, level, spending, seeds before the end (all, or 3) and ending."""
    out = []
    for (ln, lr), score, alpha, spending, first, one in itertools.product(
            LADDERS.items(), rc.SCORES, alphas, rc.SPENDING, (None, 3), (False, True)):
        out.append(Design(f"{ln} {score} a{alpha:g} {spending}{' seeds3' if first else ''}"
                          f"{' until-one' if one else ''}", lr, score, alpha, spending, first, one))
    return out


@dataclass
class EnvRuns:
    """One env's runs: label → per-run episode arrays, each run's total CPU seconds, and the env's anchors."""

    env: str
    obs: str
    budget: float
    low: float
    high: float
    runs: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, int, float]]]  # steps, cpu, ret, window, cpu_s
    final: dict[str, np.ndarray]  # label → auc_steps_norm per seed, the grid's own scores
    final_norm: dict[str, np.ndarray]  # label → final_norm per seed
    _cache: dict = field(default_factory=dict)

    def prefix(self, score: str, rungs: tuple[float, ...]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """label → scores ``(n_rungs, n_seeds)`` and CPU seconds to each rung ``(n_rungs, n_seeds)``."""
        key = (score, rungs)
        if key not in self._cache:
            sc, cpu = {}, {}
            for label, rs in self.runs.items():
                sc[label] = np.stack([rc.prefix_scores(s, r, w, budget=self.budget, fractions=rungs, low=self.low,
                                                       high=self.high, kind=score) for s, c, r, w, t in rs], axis=1)
                cpu[label] = np.stack([rc.prefix_cpu(s, c, t, budget=self.budget, fractions=rungs)
                                       for s, c, r, w, t in rs], axis=1)
            self._cache[key] = sc, cpu
        return self._cache[key]

    def grid_cpu(self) -> float:
        return float(sum(t for rs in self.runs.values() for *_, t in rs))

    def tied(self, on_final: bool = False) -> tuple[str, set[str]]:
        """The grid's best label (IQM of the sample score, or with ``on_final`` of the normalised final return) and
        its tied set (the reference's permutation test at ALPHA)."""
        if ("tied", on_final) not in self._cache:
            crit, scores = (FINAL, self.final_norm) if on_final else (CRIT, self.final)
            top = max(scores, key=lambda k: float(iqm(scores[k])))
            self._cache[("tied", on_final)] = top, {top} | {
                k for k, v in scores.items() if k != top and crit.compare([scores[top]], [v]).p_value >= ALPHA}
        return self._cache[("tied", on_final)]


def read(source: str) -> list[EnvRuns]:
    """Every env of the reference's main read (claims and variants left out, as ``bench recommend`` reads)."""
    data = scoring.load(source, anchors=False, diagnostics=[], sensitivity=False)
    scored = scoring.score(data)
    ep = data.episodes
    runs = scored.runs[scored.runs["auc_steps_norm"].notna()].sort_values(["env", "label", "seed"])
    by_key = {k: g for k, g in ep.groupby("key", sort=False)}
    out = []
    for env, g in runs.groupby("env", sort=True):
        if g["label"].nunique() < 2:
            continue
        a = data.anchors[env]
        per: dict[str, list] = {}
        for _, r in g.iterrows():
            e = by_key[r["key"]]
            steps, ret = e["step"].to_numpy(float), e["ret"].to_numpy(float)
            cpu = e["cpu_s"].to_numpy(float)
            if np.isnan(cpu).any():  # recorded before per-episode CPU: the run's CPU/wall ratio, as scores.py reads it
                cpu = e["wall_s"].to_numpy(float) * (float(r["cpu_s"]) / float(r["wall_s"]))
            per.setdefault(r["label"], []).append((steps, cpu, ret, int(r["window"]), float(r["cpu_s"])))
        final = {lb: gg["auc_steps_norm"].to_numpy(float) for lb, gg in g.groupby("label", sort=True)}
        final_norm = {lb: gg["final_norm"].to_numpy(float) for lb, gg in g.groupby("label", sort=True)}
        out.append(EnvRuns(env, str(data.traits[env].get("obs")), float(data.budgets[env]), a.random_return,
                           a.threshold, per, final, final_norm))
    return out


@dataclass(frozen=True)
class Outcome:
    env: str
    obs: str
    pick: str
    kept: tuple[str, ...]
    top: str
    tied: bool
    cpu: float
    n_tied: int
    n_labels: int
    #: Whether the pick is tied-best on the normalised final return instead.
    tied_final: bool


def catch_ups(env: EnvRuns, score: str, rungs: tuple[float, ...]) -> list[np.ndarray]:
    """Per rung, how far each trailing label caught up on each label ahead of it by the full budget, on ``env``:
    for every pair with means ``a > b`` at the rung, ``(b - a at the end) - (b - a at the rung)``."""
    scores, _ = env.prefix(score, rungs)
    with warnings.catch_warnings():  # a label with no episode by an early rung: NaN, left out of the quantile
        warnings.simplefilter("ignore", RuntimeWarning)
        means = {k: np.nanmean(v, axis=1) for k, v in scores.items()}
    out = []
    for r in range(len(rungs)):
        gains = [(means[b][-1] - means[a][-1]) - (means[b][r] - means[a][r]) for a in means for b in means
                 if means[a][r] > means[b][r]]
        out.append(np.array(gains, float))
    return out


#: All envs of the replay, for the margins a design takes from the other envs (set by :func:`main`).
ALL: list[EnvRuns] = []


def margins(env: EnvRuns, d: Design) -> tuple[float, ...] | None:
    """Each rung's margin for ``env``, from every *other* env of the reference (never ``env`` itself): the
    ``d.catch_up`` quantile of how far a trailing label caught up on one ahead of it after that rung."""
    if d.catch_up is None:
        return None
    per = [catch_ups(e, d.score, d.rungs) for e in ALL if e.env != env.env]
    return tuple(max(0.0, float(np.nanquantile(np.concatenate([p[r] for p in per]), d.catch_up)))
                 for r in range(len(d.rungs)))


def replay(env: EnvRuns, d: Design) -> Outcome:
    scores, cpu = env.prefix(d.score, d.rungs)
    result = rc.race(scores, rc.rung_alphas(d.alpha, len(d.rungs), d.spending), first_seeds=d.first_seeds,
                     until_one=d.until_one, margins=margins(env, d))
    top, tied = env.tied()
    return Outcome(env.env, env.obs, result.pick, result.kept, top, result.pick in tied,
                   rc.spent(result, cpu) / env.grid_cpu(), len(tied), len(env.final), result.pick in env.tied(True)[1])


def floor(env: EnvRuns, d: Design) -> Outcome:
    """A race that knew the end: the labels the full-budget test (at ``d``'s last level) cannot rule out run to the
    end, every other label stops at ``d``'s first rung. A race that stops only what its test rules out runs those
    labels to the end too, unless an earlier rung happened to rule one out, so this is about the least CPU it
    spends."""
    scores, cpu = env.prefix(d.score, (d.rungs[0], 1.0))
    end = rc.race_step({k: v[-1] for k, v in scores.items()}, alpha=rc.rung_alphas(d.alpha, len(d.rungs),
                                                                                 d.spending)[-1])
    spent = sum(float(cpu[k][1 if k in end.kept else 0].sum()) for k in scores)
    pick = max(end.kept, key=lambda k: float(iqm(scores[k][-1])))
    top, tied = env.tied()
    return Outcome(env.env, env.obs, pick, end.kept, top, pick in tied, spent / env.grid_cpu(), len(tied),
                   len(env.final), pick in env.tied(True)[1])


def headline(outs: list[Outcome]) -> tuple[float, float]:
    return float(np.mean([o.tied for o in outs])), float(np.median([o.cpu for o in outs]))


def halves(envs: list[EnvRuns]) -> tuple[list[EnvRuns], list[EnvRuns]]:
    """The envs at even positions in env order (where a design is chosen) and at odd ones (where it is checked)."""
    return envs[0::2], envs[1::2]


def choose(envs: list[EnvRuns]) -> Design:
    """The design docs/race.md reports, chosen on the first half only: the level is the reference's own
    (:data:`ALPHA`, not searched), and of the designs at it that are tied-best on at least :data:`TARGET` of the
    first half's envs, the one with the least median CPU there (ties: the first in :func:`designs`' order)."""
    first, _ = halves(envs)
    best, best_cpu = None, np.inf
    for d in designs((ALPHA,)):
        t, c = headline([replay(e, d) for e in first])
        if t >= TARGET and c < best_cpu:
            best, best_cpu = d, c
    if best is None:
        raise SystemExit(f"no design reaches {TARGET:.0%} tied-best on the first half")
    return best


def explore(envs: list[EnvRuns]) -> None:
    """Every design of the search: tied-best fraction and median CPU on each half of the envs, and on all."""
    first, second = halves(envs)
    print("| design | first half | second half | all |\n|---|---|---|---|")
    for d in [baseline(a) for a in (0.01, 0.05, 0.2)] + designs():
        cols = [headline([replay(e, d) for e in part]) for part in (first, second, envs)]
        print(f"| {d.name} | " + " | ".join(f"{t:.2f} at {c:.2f}" for t, c in cols) + " |")


def table(envs: list[EnvRuns]) -> None:
    """docs/race.md's tables: the headline numbers of each design, then the chosen design per env beside the
    naive one at the same level."""
    chosen = choose(envs)
    finish = replace(chosen, name=chosen.name.replace(" until-one", "") + " (the last label run to the end)",
                     until_one=False)
    naive = baseline(ALPHA)
    rows = [chosen, finish] + [baseline(a) for a in (0.01, 0.05, 0.2)] + [
        replace(naive, name=naive.name + ", until one", until_one=True),
        replace(naive, name=f"naive's rungs, held score, alpha {ALPHA:g}", score="held"),
        replace(naive, name="naive's rungs, held score, alpha 0.2, until one", score="held", alpha=0.2,
                until_one=True),
        replace(chosen, name=chosen.name + ", margins from the other envs (catch-up quantile 0.75)", catch_up=0.75)]
    print(f"Chosen on the first half: **{chosen.name}**.\n")
    print("| design | all envs: tied-best, median CPU | first half | second half | vector and pixels | "
          "tied-best on final performance |\n|---|---|---|---|---|---|")
    runs = {d.name: [replay(e, d) for e in envs] for d in rows}
    bound = replace(chosen, name=f"bound: the labels the full-budget test keeps run to the end, the rest stop at "
                                 f"1/{round(1 / chosen.rungs[0])}")
    runs[bound.name] = [floor(e, chosen) for e in envs]
    for d in rows + [bound]:
        outs = runs[d.name]
        t, c = headline(outs)
        parts = [outs[0::2], outs[1::2], [o for o in outs if o.obs != "sequence"]]
        print(f"| {d.name} | {t:.2f} ({sum(o.tied for o in outs)}/{len(outs)}), {c:.2f} | "
              + " | ".join("{:.2f}, {:.2f}".format(*headline(p)) for p in parts)
              + f" | {np.mean([o.tied_final for o in outs]):.2f} ({sum(o.tied_final for o in outs)}/{len(outs)}) |")
    by_env = {o.env: o for o in runs[naive.name]}
    print()
    print(f"| env | obs | half | grid's best (tied labels) | race's pick | still in at the end | tied-best | CPU | "
          f"{naive.name}: pick, tied-best, CPU |\n|---|---|---|---|---|---|---|---|---|")
    for i, o in enumerate(runs[chosen.name]):
        n = by_env[o.env]
        print(f"| {o.env} | {o.obs} | {'first' if i % 2 == 0 else 'second'} | {o.top} ({o.n_tied} of {o.n_labels}) | "
              f"{o.pick} | {len(o.kept)} | {'yes' if o.tied else '**no**'} | {o.cpu:.2f} | {n.pick}, "
              f"{'yes' if n.tied else '**no**'}, {n.cpu:.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default="packs:results/reference", help="a store or packs:FOLDER URL")
    ap.add_argument("--explore", action="store_true", help="every design of the search, by half of the envs")
    args = ap.parse_args(argv)
    envs = read(args.source)
    ALL[:] = envs
    explore(envs) if args.explore else table(envs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
