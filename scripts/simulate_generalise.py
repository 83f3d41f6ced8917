"""The full simulation behind `bench recommend`'s profile rule (docs/statistics.md, "How many envs").

    .venv/bin/python scripts/simulate_generalise.py            # about a minute on one core
    nox -s simulate

Prints three Markdown tables (bench.stats.simulation): the false-winner rate of the headline test (a t-test
over the per-env effects, envs weighted equally), of the random-effects rule (HKSJ, inverse-variance weights; the
headline test until issue 63) and of the fixed-env rule under an env × algorithm interaction with zero mean difference,
the largest over the run counts and run spreads simulated; the headline test's power at the
mean differences the shipped reference shows between the two best candidates of a profile (0.05 to 0.14
on the normalised scale, 2026-11-27). Settings: runs per side and env 5, 10, 20 (the reference has 5-20),
within-env run sd 0.03 and 0.15 (the median and the 90th percentile of the reference's per-(env, label)
sd of the sample-efficiency score), interaction sd 0.05 and 0.1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats.simulation import table  # noqa: E402

KS = (2, 3, 4, 5, 6, 8)
NS = (5, 10, 20)
SD_ENVS = (0.05, 0.1)
SD_RUNS = (0.03, 0.15)
DELTAS = (0.05, 0.1, 0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20_000, help="simulated profiles per cell")
    reps = ap.parse_args().reps
    null = table(KS, NS, SD_ENVS, SD_RUNS, [0.0], reps=reps, seed=0)
    print(f"False-winner rate, zero mean difference ({reps:,} profiles per cell; the largest over {NS} runs per side "
          f"and env and run sd {SD_RUNS}; Monte Carlo sd about {(0.05 * 0.95 / reps) ** 0.5:.4f} at 5%):\n")
    print("| envs | interaction sd | equal weights (the headline test) | random effects (HKSJ) | fixed envs |")
    print("|---:|---:|---:|---:|---:|")
    for k in KS:
        for e in SD_ENVS:
            cells = [c for c in null if c.k == k and c.sd_env == e]
            print(f"| {k} | {e:g} | {max(c.winner_eq for c in cells):.3f} | {max(c.winner_re for c in cells):.3f} | "
                  f"{max(c.winner_fixed for c in cells):.3f} |")
    power = table(KS, (5, 10, 20), SD_ENVS, (0.15,), DELTAS, reps=reps, seed=1)
    print(f"\nPower of the headline test (equal weights; run sd 0.15; runs per side and env 5 / 10 / 20):\n")
    print("| envs | interaction sd | " + " | ".join(f"mean difference {d:g}" for d in DELTAS) + " |")
    print("|---:|---:|" + "---:|" * len(DELTAS))
    for k in KS:
        for e in SD_ENVS:
            got = []
            for d in DELTAS:
                cells = sorted((c for c in power if c.k == k and c.sd_env == e and c.delta == d), key=lambda c: c.n)
                got.append(" / ".join(f"{c.winner_eq:.2f}" for c in cells))
            print(f"| {k} | {e:g} | " + " | ".join(got) + " |")
    stuck = table(KS[1:], (10,), (0.05,), (0.15,), (0.0, 0.1, 0.2), reps=reps, seed=2, stuck=1)
    print("\nOne env that no algorithm learns (every run of both sides scores the same) among the envs; named "
          "winners at a mean difference 0 / 0.1 / 0.2 on the others (10 runs per side and env, interaction sd 0.05, "
          "run sd 0.15):\n")
    print("| envs | equal weights | random effects (HKSJ) |")
    print("|---:|---:|---:|")
    for k in KS[1:]:
        cells = sorted((c for c in stuck if c.k == k), key=lambda c: c.delta)
        print(f"| {k} | " + " / ".join(f"{c.winner_eq:.3f}" for c in cells) + " | "
              + " / ".join(f"{c.winner_re:.3f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
