"""The simulation behind `bench recommend`'s three parts (docs/statistics.md, "Answers that decide").

    .venv/bin/python scripts/simulate_selection.py            # a few seconds on one core
    nox -s simulate

Prints one Markdown table (bench.stats.simulation.selection_table): per number of envs, labels and
env × algorithm interaction sd, how often the true best is ruled out (paired tests, as `bench recommend`; and
Hsu's pooled-variance form), the power to rule out a label 0.1 and 0.2 below the best, and how often the
default's regret interval holds its true expected regret. Runs: 5 per label and env, sd 0.1 (between the
median 0.03 and the 90th percentile 0.15 of the reference's per-(env, label) sd of the sample score).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats.simulation import selection_table  # noqa: E402

KS = (3, 5, 8)
MS = (2, 4, 7)
SD_INTS = (0.05, 0.1, 0.3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000, help="simulated profiles per cell")
    reps = ap.parse_args().reps
    cells = selection_table(KS, MS, SD_INTS, reps=reps, seed=0)
    print(f"{reps:,} profiles per cell; Monte Carlo sd about {(0.05 * 0.95 / reps) ** 0.5:.4f} at 5%. "
          "Power: a label 0.1 / 0.2 below the best ruled out (— with 2 labels: only one gap).\n")
    print("| envs | labels | interaction sd | true best ruled out | (pooled form) | power, 0.1 below | power, 0.2 below "
          "| regret interval coverage |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cells:
        p2 = "—" if c.power_2 != c.power_2 else f"{c.power_2:.3f}"
        print(f"| {c.k} | {c.m} | {c.sd_int:g} | {c.best_out:.3f} | {c.best_out_pooled:.3f} | {c.power_1:.3f} | {p2} "
              f"| {c.coverage:.2f} |")


if __name__ == "__main__":
    main()
