"""Claims checked against planted runs: holds, does not hold, not settled; and claim blocks in suites."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.analysis import claims
from bench.suites.suite import CLAIM_MEASURES, SuiteError, load_suite

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402

ENVS = ["CartPole-v1", "LunarLander-v3"]
GOOD = Planted("good", "ppo", "bench", skill=1.0, tau=0.1, sec_per_kstep=0.5)
POOR = Planted("poor", "trpo", "sb3", skill=0.4, tau=0.4, sec_per_kstep=2.0)


def claim(*lines: str) -> dict:
    exp = []
    for line in lines:
        a, op, b, measure = line.split(" ", 3)
        exp.append({"a": a, "op": op, "b": b, "measure": measure.removeprefix("on ")})
    return {"claim": {"text": "a planted claim", "source": "a test", "expect": exp}}


def test_measures_are_the_schema_s():
    assert set(claims.MEASURES) == set(CLAIM_MEASURES)


def test_verdicts_on_planted_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, ENVS, [GOOD, POOR], seeds=5, suite="right",
                spec_extra=claim("ppo > trpo on final performance", "trpo > ppo on CPU seconds per million steps"))
    write_store(url, ENVS, [GOOD, POOR], seeds=5, suite="wrong", spec_extra=claim("poor > good on sample efficiency"))
    write_store(url, ENVS, [GOOD, POOR], seeds=3, suite="few", spec_extra=claim("good > poor on final performance"))
    twins = [Planted("a", "a2c", "bench", 0.6, noise=0.15), Planted("b", "a2c", "sb3", 0.6, noise=0.15)]
    write_store(url, ENVS, twins, seeds=6, suite="same", spec_extra=claim("a > b on final performance"))
    write_store(url, ENVS, [GOOD], seeds=2, suite="plain")  # no claim: not in the section
    got = {r.suite: r for r in claims.evaluate(url, anchors=False, n_boot=200)}
    assert set(got) == {"right", "wrong", "few", "same"}
    right = got["right"]
    assert right.verdict == claims.HOLDS and [c.verdict for c in right.checks] == [claims.HOLDS, claims.HOLDS]
    perf, cpu = right.checks
    assert perf.kind == "ci" and 0 < perf.lo <= perf.effect <= perf.hi and perf.p_value < 0.05
    assert cpu.effect == pytest.approx(1500.0, rel=0.01)  # 2.0 vs 0.5 CPU s per 1000 steps: 1500 s per million
    assert got["wrong"].verdict == claims.FAILS and got["wrong"].checks[0].why == "significant in the other direction"
    few = got["few"].checks[0]
    assert got["few"].verdict == claims.OPEN and few.kind == "none" and "fewer than 5 runs" in few.why
    assert few.effect > 0  # the planted difference shows, but 3 seeds settle nothing
    assert got["same"].verdict == claims.OPEN and "no difference detected" in got["same"].checks[0].why
    rows = claims.rows(list(got.values()))
    assert len(rows) == 5 and {r["claim_verdict"] for r in rows} == {claims.HOLDS, claims.FAILS, claims.OPEN}


def test_a_claim_with_no_runs_yet_is_not_settled(tmp_path):
    import pandas as pd

    empty = pd.DataFrame(columns=["label", "algo", "env", "final_norm"])
    c = claims.check(empty, {"a": "ppo", "op": ">", "b": "trpo", "measure": "final performance"}, [])
    assert c.verdict == claims.OPEN and "no runs" in c.why


BASE = """\
name: c
seeds: 5
defaults: {timesteps: 4096}
envs: [{id: CartPole-v1}]
algorithms:
  - {algo: ppo, impl: bench}
  - {algo: trpo, impl: bench}
"""


@pytest.mark.parametrize("claim_yaml, path, words", [
    ("claim: {text: t, expect: ['ppo >> trpo on final return']}", "claim.expect[0]", "not an expectation"),
    ("claim: {text: t, expect: ['ppo > trpo on happiness']}", "claim.expect[0]", "unknown measure 'happiness'"),
    ("claim: {text: t, expect: ['ppo > dqn on final return']}", "claim.expect[0]", "'dqn' is neither an algorithm nor a label"),
    ("claim: {text: t, expect: []}", "claim.expect", "at least 1"),
])
def test_bad_claim_blocks_are_one_line_each(tmp_path, claim_yaml, path, words):
    f = tmp_path / "s.yaml"
    f.write_text(BASE + claim_yaml + "\n")
    with pytest.raises(SuiteError) as e:
        load_suite(f)
    (line,) = e.value.lines
    assert path in line and words in line, line


def test_the_shipped_claims_suites_load():
    for f in sorted(Path(__file__).resolve().parents[1].joinpath("suites", "claims").glob("*.yaml")):
        s = load_suite(f).suite
        assert s.claim is not None and s.claim.expect, f
        assert all(e.line.count(" on ") == 1 for e in s.claim.expect)
