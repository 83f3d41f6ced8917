"""Implementation parity (bench parity): the tests' arithmetic, their error rates by simulation, and the command."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from bench.stats.parity import ALPHA, MARGIN, compare, parity, seeds_for_equivalence, welch
from tests.synthetic import Planted, write_store


def test_welch_by_hand():
    # a: mean 2, variance 1; b: mean 4, variance 4. se = sqrt(1/3 + 4/3) = sqrt(5/3);
    # df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = (25/9) / (17/18) = 50/17.
    diff, se, df = welch(np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0]))
    assert diff == -2.0 and se == pytest.approx(math.sqrt(5 / 3)) and df == pytest.approx(50 / 17)
    # The p-value of t = -2 / sqrt(5/3) = -1.549 on 2.94 df, two-sided: about 0.22 (t tables: between
    # the 0.2 and 0.3 columns at 3 df, t = 1.638 and 1.250).
    c = compare(np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0]), margin=0.5)
    assert 0.2 < c.p_diff < 0.3 and c.verdict == "inconclusive" and c.seeds_needed > 3


def test_identical_distributions_are_equivalent_and_a_shift_is_different():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.8, 0.03, 30), rng.normal(0.8, 0.03, 30)
    eq = compare(a, b)
    assert eq.verdict == "equivalent" and -MARGIN < eq.ci[0] < eq.ci[1] < MARGIN and eq.p_equiv < ALPHA
    diff = compare(a, b + 0.2)
    assert diff.verdict == "different" and diff.ci[1] < 0 and diff.p_diff < 1e-6 and diff.g < -2


def test_three_seeds_are_inconclusive_with_a_sample_size():
    rng = np.random.default_rng(1)
    c = compare(rng.normal(0.7, 0.1, 3), rng.normal(0.7, 0.1, 3))
    assert c.verdict == "inconclusive" and c.seeds_needed is not None and c.seeds_needed > 3


def test_degenerate_inputs():
    ones = np.ones(10)
    assert compare(ones, ones).verdict == "equivalent"  # CartPole's capped final return in both
    assert compare(ones, ones * 0.9).verdict == "different"  # constants 0.1 apart
    assert compare(ones, ones * 0.98).verdict == "equivalent"  # constants inside the margin
    one = compare(np.array([0.5]), np.array([0.4, 0.6]))
    assert one.verdict == "inconclusive" and "fewer than 2" in one.reason


def test_error_rates_by_simulation():
    rng = np.random.default_rng(2)
    n, sd, sims = 10, 0.05, 2000
    # True difference exactly at the margin: the TOST may call it equivalent at most α of the time.
    at_margin = [compare(rng.normal(MARGIN, sd, n), rng.normal(0, sd, n)).verdict == "equivalent" for _ in range(sims)]
    # No difference: Welch's test calls it different about α of the time.
    null = [compare(rng.normal(0, sd, n), rng.normal(0, sd, n)).p_diff < ALPHA for _ in range(sims)]
    slack = 3 * math.sqrt(ALPHA * (1 - ALPHA) / sims)  # three Monte-Carlo standard errors
    assert np.mean(at_margin) <= ALPHA + slack
    assert abs(np.mean(null) - ALPHA) <= slack


def test_the_sample_size_gives_the_stated_power():
    sd = 0.06
    n = seeds_for_equivalence(sd, MARGIN, ALPHA, 0.8)
    rng = np.random.default_rng(3)
    power = np.mean([compare(rng.normal(0, sd, n), rng.normal(0, sd, n)).verdict == "equivalent" for _ in range(1000)])
    assert 15 <= n <= 40 and 0.75 <= power <= 0.9, (n, power)


def _bench(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.heavy
def test_parity_command_and_report_on_a_planted_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    labels = [Planted("ppo-bench", "ppo", "bench", skill=1.0, tau=0.1, noise=0.02),
              Planted("ppo-sb3", "ppo", "sb3", skill=1.0, tau=0.1, noise=0.02, env_skill=(("Pendulum-v1", 0.5),))]
    write_store(url, ["CartPole-v1", "Pendulum-v1"], labels, seeds=12).dispose()

    from bench.analysis import scoring

    from bench.run.anchors import for_reading

    runs = scoring.score(scoring.load(url, anchors=for_reading)).runs
    got = {ep.env: ep for ep in parity(runs, "ppo-bench", "ppo-sb3")}
    assert got["Pendulum-v1"].verdict == "different"  # planted: sb3 half as good there
    assert got["Pendulum-v1"].comparisons[1].diff > 0.3

    p = _bench("parity", "ppo-bench", "ppo-sb3", "--store", url, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Pendulum-v1: different" in p.stdout and "CartPole-v1:" in p.stdout
    p = _bench("parity", "ppo-bench", "ppo-sb3", "--store", url, "--env", "Pendulum-v1", "--format", "json",
               cwd=tmp_path)
    rows = json.loads(p.stdout)
    assert [r["env"] for r in rows] == ["Pendulum-v1"] and rows[0]["verdict"] == "different"

    for args, words in [(("ppo-bench", "nope"), "'nope': no label of that name"),
                        (("ppo-bench", "ppo-bench"), "the same label twice"),
                        (("ppo-bench", "ppo-sb3", "--env", "Hopper-v5"), "--env: 'Hopper-v5' has no scored runs"),
                        (("ppo-bench", "ppo-sb3", "--margin", "-1"), "--margin: -1.0 is not a margin"),
                        (("ppo-bench", "ppo-sb3", "--format", "xml"), "--format")]:
        p = _bench("parity", *args, "--store", url, cwd=tmp_path)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and "Traceback" not in p.stderr and words in lines[-1], p.stderr
        assert len([ln for ln in lines if not ln.startswith("reading ")]) == 1, p.stderr

    p = _bench("report", "--store", url, "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "rep" / "index.html").read_text()
    section = html[html.index('id="parity-table"'):]
    section = section[: section.index("</table>")]
    assert "ppo-bench vs ppo-sb3" in section and "Pendulum-v1" in section and "different" in section


def test_collapse_fractions_count_only_what_both_labels_could_show():
    # Label b records no gradient norm (as SB3 does not): neither label's fraction counts gradient spikes, so b is
    # not credited with "no spikes", and a's spikes are not set beside b's unmeasured ones.
    import pandas as pd

    rows = [dict(env="E", label=lab, algo="a2c", impl=impl, key=f"{lab}{i}", final_norm=0.5, auc_steps_norm=0.5,
                 solved=i == 0, t_steps=100.0 * (i + 1), total_steps=1000) for lab, impl in (("a", "bench"), ("b", "sb3")) for i in range(3)]
    runs = pd.DataFrame(rows)
    checkable = {f"a{i}": {"gradient spike"} for i in range(3)}
    (ep,) = parity(runs, "a", "b", flagged={("a1", "gradient spike")}, checkable=checkable)
    assert math.isnan(ep.collapsed["a"]) and math.isnan(ep.collapsed["b"])
    assert ep.collapse_checks == {"a": [], "b": []}
    assert ep.success == {"a": pytest.approx(1 / 3), "b": pytest.approx(1 / 3)}
    assert math.isnan(ep.median_steps["a"])  # one of three solved: the Kaplan–Meier median is not reached

    # Continuous actions: both record the log-std, only a the gradient norm. Both fractions count log-std
    # collapses alone: a's spike (a1) is not counted, a2's and b0's collapses are.
    checkable = {**{f"a{i}": {"gradient spike", "log-std collapse"} for i in range(3)},
                 **{f"b{i}": {"log-std collapse"} for i in range(3)}}
    flagged = {("a1", "gradient spike"), ("a2", "log-std collapse"), ("b0", "log-std collapse")}
    (ep,) = parity(runs, "a", "b", flagged=flagged, checkable=checkable)
    assert ep.collapsed == {"a": pytest.approx(1 / 3), "b": pytest.approx(1 / 3)}
    assert ep.collapse_checks == {"a": ["log-std collapse"], "b": ["log-std collapse"]}


def test_recommend_says_when_the_recommended_algorithms_implementations_differ(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    labels = [Planted("ppo-bench", "ppo", "bench", skill=1.0, tau=0.1, noise=0.02),
              Planted("ppo-sb3", "ppo", "sb3", skill=1.0, tau=0.1, noise=0.02, env_skill=(("Pendulum-v1", 0.5),)),
              Planted("a2c-bench", "a2c", "bench", skill=0.3, tau=0.5, noise=0.02)]
    write_store(url, ["Pendulum-v1"], labels, seeds=6).dispose()
    p = _bench("recommend", "--store", url, "--format", "json", "--action", "continuous", cwd=tmp_path)
    rows = [r for r in json.loads(p.stdout) if r["envs"]]
    # Issue 40: implementations are pooled only where parity finds them alike; here it finds them different, so
    # ppo's labels are ranked apart, the answer names the better one, and the row says why (no pooled "ppo").
    assert rows and all(r["algorithm"] == "ppo-bench" and r["impl"] == "ranked apart" for r in rows), rows
    assert all(r["pooling"] == ["ppo ranked by implementation: Pendulum-v1 (ppo-bench v ppo-sb3 different)"]
               for r in rows), rows
    assert all("its algorithm's implementations are ranked apart (parity: different on Pendulum-v1)"
               in r["implementation"] for r in rows), rows
