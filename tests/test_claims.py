"""Claims checked against planted runs: holds, does not hold, not settled; and claim blocks in suites."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
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


def test_per_env_effects_show_what_an_aggregate_of_opposite_signs_hides(tmp_path):
    # "a" far ahead on CartPole and as far behind on LunarLander: the aggregate is about zero and not
    # settled, while each env's own test finds its difference, with its sign.
    url = f"sqlite:///{tmp_path / 's.db'}"
    a = Planted("a", "ppo", "bench", skill=0.5, noise=0.02, env_skill=(("CartPole-v1", 0.9), ("LunarLander-v3", 0.1)))
    b = Planted("b", "trpo", "bench", skill=0.5, noise=0.02)
    write_store(url, ENVS, [a, b], seeds=8, suite="mixed", spec_extra=claim("a > b on final performance"))
    (res,) = claims.evaluate(url, anchors=False, n_boot=200)
    (c,) = res.checks
    # Significant on both envs, in opposite directions: no one direction holds for the next env.
    assert res.verdict == c.verdict == claims.DEPENDS and "per-env effects disagree" in c.why, c.why
    assert c.p_heterogeneity < 0.05
    per = {e: (d, p) for e, d, p in c.per_env}
    assert set(per) == set(ENVS)
    assert per["CartPole-v1"][0] > 0.2 and per["LunarLander-v3"][0] < -0.2
    assert per["CartPole-v1"][1] < 0.05 and per["LunarLander-v3"][1] < 0.05
    # The aggregate effect is the mean of the per-env IQM differences.
    assert c.effect == pytest.approx(np.mean([d for d, _ in per.values()]))
    (row,) = claims.rows([res])
    assert row["per_env"].startswith("CartPole-v1 +") and "LunarLander-v3 -" in row["per_env"]


def test_claim_suites_are_not_pooled_into_the_answers_but_are_reported(tmp_path):
    # A claim suite's deliberately varied runs (here a weak "ppo" variant) must not move the answer
    # for ppo; the claims section still checks them.
    from bench.analysis import report, scoring

    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, ENVS, [GOOD, POOR], seeds=5, suite="ref")
    weak = Planted("weak-ppo", "ppo", "bench", skill=0.1)
    write_store(url, ENVS, [weak, POOR], seeds=5, suite="exp", spec_extra=claim("weak-ppo > poor on final performance"))
    data = scoring.load(url, anchors=False)
    assert data.suites == ["ref"] and "weak-ppo" not in set(data.runs["label"])
    assert "weak-ppo" in set(scoring.load(url, ["exp"], anchors=False).runs["label"])  # named, it is read
    html = report.build(url, tmp_path / "rep").read_text()
    assert "weak-ppo &gt; poor on final performance" in html or "weak-ppo > poor on final performance" in html


def test_an_equivalence_expectation_uses_two_one_sided_tests(tmp_path):
    # A ≈ B on a 0-1 measure: holds when every env is equivalent within ±0.05, fails when one is different.
    from bench.analysis.claims import check

    import pandas as pd

    rng = np.random.default_rng(0)
    rows = []
    for env, shift in (("E1", 0.0), ("E2", 0.0)):
        for lab, delta in (("a", 0.0), ("b", shift), ("c", 0.3), ("d", 0.045)):
            rows += [dict(env=env, label=lab, algo=lab, v=float(np.clip(0.7 + delta + 0.02 * rng.standard_normal(), 0, 1)))
                     for _ in range(12)]
    runs = pd.DataFrame(rows)
    from bench.analysis import claims

    claims.MEASURES["test measure"] = "v"
    try:
        same = check(runs, {"a": "a", "op": "≈", "b": "b", "measure": "test measure"}, ["E1", "E2"])
        apart = check(runs, {"a": "a", "op": "≈", "b": "c", "measure": "test measure"}, ["E1", "E2"])
        close = check(runs, {"a": "d", "op": "≈", "b": "a", "measure": "test measure"}, ["E1", "E2"])
    finally:
        del claims.MEASURES["test measure"]
    assert same.verdict == "holds" and "equivalent within" in same.why and same.line == "a ≈ b on test measure"
    assert apart.verdict == "does not hold" and "outside ±0.05 on E1, E2" in apart.why
    # 0.045 apart, clearly not 0 and not shown inside ±0.05 either: not settled (issue 40, "rloo ≈ ppo").
    assert close.verdict == claims.OPEN and 0 < close.lo and close.hi > 0.045, close
    assert "not shown within ±0.05, nor outside it" in close.why and "significantly different from 0" in close.why


def test_a_deterministic_measure_is_compared_without_a_p_value():
    import pandas as pd

    from bench.analysis.claims import check

    # Model memory is the same for every seed: IQM trimming made a p-value of 0.023 out of constants.
    runs = pd.DataFrame([dict(env=e, label=lab, algo=lab.split("-")[0], model_bytes=b)
                         for e in ("E1", "E2") for lab, b in (("grpo-bench", 1000.0), ("ppo-bench", 1500.0))
                         for _ in range(5)])
    c = check(runs, {"a": "grpo", "op": "<", "b": "ppo", "measure": "model memory"}, ["E1", "E2"])
    assert c.verdict == claims.HOLDS and c.p_value is None and c.effect == -500.0, c
    assert "without a p-value" in c.why
    c = check(runs, {"a": "ppo", "op": "<", "b": "grpo", "measure": "model memory"}, ["E1", "E2"])
    assert c.verdict == claims.FAILS and c.p_value is None


def test_claim_lines_accept_an_ascii_tilde_for_equivalence():
    from bench.suites.suite import Expectation

    e = Expectation.model_validate("rloo-bench ~ ppo on exact match")
    assert (e.a, e.op, e.b, e.measure, e.line) == ("rloo-bench", "≈", "ppo", "exact match", "rloo-bench ≈ ppo on exact match")


def test_a_verdict_needs_the_test_and_the_interval_to_agree():
    from bench.analysis.claims import FAILS, HOLDS, OPEN, verdict

    # Test rejects, interval on the expected side: holds; on the other side: does not hold.
    assert verdict(0.01, 0.3, 0.1, 0.5, 1.0) == (HOLDS, "")
    assert verdict(0.01, -0.3, -0.5, -0.1, -1.0) == (HOLDS, "")
    assert verdict(0.01, -0.3, -0.5, -0.1, 1.0) == (FAILS, "significant in the other direction")
    # The permutation test rejects but the bootstrap interval includes zero (the shipped GAE-lambda
    # gradient-noise expectation read +1.93 [-0.029, +4.11], p = 0.028): not settled, both figures said.
    v, why = verdict(0.028, 1.93, -0.0287, 4.11, 1.0)
    assert v == OPEN and "p = 0.028" in why and "includes 0" in why
    assert verdict(0.02, -1.0, -2.0, 0.0, 1.0)[0] == OPEN  # an interval ending at zero does not exclude it
    # No rejection: not settled whatever the interval; no interval: not settled.
    assert verdict(0.2, 0.3, 0.1, 0.5, 1.0)[0] == OPEN
    assert verdict(0.01, 0.3, float("nan"), float("nan"), 1.0)[0] == OPEN


def test_a_cpu_cost_verdict_uses_quiet_runs_on_one_machine_only(tmp_path):
    """TRPO takes 1.2× PPO's CPU seconds per step. On one machine with quiet cores that holds; with one side's
    runs contended or on another machine there is no verdict on CPU seconds (issue 40: time by design, not by
    a correction factor)."""
    line = "trpo > ppo on CPU seconds per million steps"
    for name, ppo_cpu, wall, verdict in [("quiet", "CPU A", 1.0, claims.HOLDS), ("busy", "CPU A", 2.0, claims.OPEN),
                                         ("other", "CPU B", 1.0, claims.OPEN)]:
        url = f"sqlite:///{tmp_path / f'{name}.db'}"
        ppo = Planted("ppo-bench", "ppo", "bench", 0.9, sec_per_kstep=0.5, cpu_model=ppo_cpu, wall_per_cpu=wall)
        trpo = Planted("trpo-bench", "trpo", "bench", 0.9, sec_per_kstep=0.6, cpu_model="CPU A")
        write_store(url, ENVS, [ppo, trpo], seeds=5, spec_extra=claim(line))
        (c,) = claims.evaluate(url, anchors=False, n_boot=200)[0].checks
        assert c.verdict == verdict, (name, c.why)
        if verdict == claims.HOLDS:
            assert c.effect == pytest.approx(100.0, rel=0.02)  # 0.6 v 0.5 CPU s per 1000 steps
            assert "budget: CartPole-v1 20,000 steps" in c.scope and "trpo = trpo-bench" in c.scope
        else:
            assert "share no known machine on quiet cores" in c.why, c.why


def test_equal_compute_runs_on_different_machines_settle_no_measure(tmp_path):
    """At an equal CPU budget a faster machine trains more steps, so even final performance measures it."""
    line = "ppo > trpo on final performance"
    for name, capped, trpo_cpu, verdict in [("steps", False, "CPU B", claims.HOLDS),  # step budgets: as measured
                                            ("same", True, "CPU A", claims.HOLDS),
                                            ("mixed", True, "CPU B", claims.OPEN)]:
        url = f"sqlite:///{tmp_path / f'{name}.db'}"
        ppo = Planted("ppo-bench", "ppo", "bench", 1.0, tau=0.1, cpu_model="CPU A")
        trpo = Planted("trpo-bench", "trpo", "bench", 0.4, tau=0.4, cpu_model=trpo_cpu)
        write_store(url, ENVS, [ppo, trpo], seeds=5, spec_extra=claim(line),
                    meta_extra={"stopped_by": "cpu_seconds"} if capped else None)
        (c,) = claims.evaluate(url, anchors=False, n_boot=200)[0].checks
        assert c.verdict == verdict, (name, c.why)
        assert ("equal-compute runs on CartPole-v1, LunarLander-v3 ran on more than one machine" in c.why) == \
            (name == "mixed"), c.why


def test_a_p_at_the_monte_carlo_floor_is_printed_as_a_bound():
    """A drawn permutation test's least p is 1 / (draws + 1): printed as "< floor", never as a measured value;
    an exact test's p is printed as it is (issue 40)."""
    rng = np.random.default_rng(0)
    # Two envs of 12 runs a side: C(24, 12)^2 relabelings, too many to enumerate, so the test draws.
    runs = pd.DataFrame([dict(env=e, algo=a, label=f"{a}-bench", auc_steps_norm=float(v), meta={})
                         for e in ("E1", "E2") for a, shift in (("x", 1.0), ("y", 0.0))
                         for v in rng.normal(shift, 0.01, 12)])
    c = claims.check(runs, dict(a="x", op=">", b="y", measure="sample efficiency"), ["E1", "E2"], n_boot=200)
    assert c.p_floor is not None and c.p_value <= c.p_floor * (1 + 1e-9)
    (row,) = claims.rows([claims.ClaimResult("s", "x beats y", None, c.verdict, [c], ["E1", "E2"])])
    assert row["p"] == f"< {c.p_floor:.0e}"
    assert all(f"(p < {f:.0e})" in row["per_env"] if f is not None else "(p <" not in row["per_env"]
               for f in c.per_env_floors)
