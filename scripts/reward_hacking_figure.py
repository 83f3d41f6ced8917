"""Reward hacking against the KL penalty: the figure of docs/sequence.md and the README, from a store
holding the runs of suites/lm/kl-sweep.yaml.

    python scripts/reward_hacking_figure.py --store sqlite:///results/work/lm.db --out docs/figures/reward-hacking.png

Per run, every update recorded the mean proxy score (the reward model's, standardised on its
comparison responses), the mean true score and the mean KL to the SFT reference. The true score is
put on the proxy's scale (``bench.envs.tokens.true_score_scale``), and the gap
``proxy − true`` is shown relative to the run's first three updates: what the proxy gained that the
true score did not. Left: the gap over tokens, mean and range over seeds per ``kl_coef``. Right: each
run's gap growth (first 3 updates to last 5) against its mean KL to the reference over the last 5.
It also prints those numbers, one line per run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import sqlalchemy as sa


def series(url: str, suite: str) -> list[dict]:
    eng = sa.create_engine(url)
    out = []
    with eng.connect() as c:
        cells = c.execute(sa.text("select s.key, s.label, r.seed, r.config from suite_cells s join runs r on r.key = s.key "
                                  "where s.suite = :s and r.status = 'done' order by s.label, r.seed"), {"s": suite}).all()
        for key, label, seed, config in cells:
            rows = c.execute(sa.text("select step, name, value from diagnostics where key = :k and name in "
                                     "('seq/proxy_score', 'seq/true_score', 'kl/reference') order by step"), {"k": key}).all()
            by: dict[str, dict[int, float]] = {}
            for step, name, value in rows:
                by.setdefault(name, {})[int(step)] = float(value)
            steps = sorted(set(by.get("seq/proxy_score", {})) & set(by.get("seq/true_score", {})))
            if not steps:
                continue  # a run on another env of the suite (no proxy score recorded)
            kl = json.loads(config)["hyperparams"].get("kl_coef", 0.0)
            out.append(dict(label=label, seed=seed, kl_coef=kl, steps=np.array(steps),
                            proxy=np.array([by["seq/proxy_score"][s] for s in steps]),
                            true=np.array([by["seq/true_score"][s] for s in steps]),
                            kl=np.array([by.get("kl/reference", {}).get(s, np.nan) for s in steps])))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--suite", default="lm-kl-sweep")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.envs.tokens import true_score_scale

    mu, sd = true_score_scale()
    runs = series(args.store, args.suite)
    if not runs:
        raise SystemExit(f"{args.store}: no done runs of suite {args.suite!r}")
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    kls = sorted({r["kl_coef"] for r in runs})
    colours = plt.cm.viridis(np.linspace(0, 0.85, len(kls)))
    print("label seed kl_coef gap_growth true_z_start true_z_end proxy_start proxy_end kl_end")
    for kl, col in zip(kls, colours):
        group = [r for r in runs if r["kl_coef"] == kl]
        n = min(len(r["steps"]) for r in group)
        gaps = []
        for r in group:
            gap = r["proxy"] - (r["true"] - mu) / sd
            gaps.append(gap[:n] - gap[:3].mean())
            growth = gap[-5:].mean() - gap[:3].mean()
            tz = (r["true"] - mu) / sd
            kl_end = float(np.nanmean(r["kl"][-5:]))
            print(f"{r['label']} {r['seed']} {kl:g} {growth:.3f} {tz[:3].mean():.3f} {tz[-5:].mean():.3f} "
                  f"{r['proxy'][:3].mean():.3f} {r['proxy'][-5:].mean():.3f} {kl_end:.4f}")
            b.scatter(kl_end, growth, color=col, s=30)
        g = np.array(gaps)
        x = group[0]["steps"][:n] / 1000
        a.plot(x, g.mean(axis=0), color=col, label=f"kl_coef {kl:g}")
        a.fill_between(x, g.min(axis=0), g.max(axis=0), color=col, alpha=0.15)
    a.axhline(0, color="grey", lw=0.8)
    a.set(xlabel="tokens (thousands)", ylabel="proxy − true, from its start (sd units)",
          title="gap between reward model and true score")
    a.legend(fontsize=8, frameon=False)
    b.set(xlabel="mean KL to the SFT reference, last 5 updates (nats/token)", ylabel="gap growth (sd units)",
          title="each run: gap growth against KL")
    fig.suptitle("PPO on bench/Preference-v0: the KL penalty against reward hacking", fontsize=10)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
