"""The published-number check: its numerics by hand, and its table in the report."""

from __future__ import annotations

import re

import numpy as np
import pytest

from bench.analysis import report
from bench.analysis.published import PUBLISHED, check, published_for
from bench.envs import REGISTRY
from tests.synthetic import Planted, write_store


def test_check_flags_more_than_one_iqr_below_at_the_same_budget():
    pub = published_for("ppo", "HalfCheetah-v5")
    assert (pub.mean, pub.timesteps, pub.zoo_env) == (5819.099, 1_000_000, "HalfCheetah-v3")
    # values 1000..5000: quartiles (numpy's linear rule) 2000 and 4000, median 3000, IQR 2000.
    c = check(np.array([1000.0, 2000.0, 3000.0, 4000.0, 5000.0]), pub, 1_000_000)
    assert (c.median, c.q25, c.q75, c.runs) == (3000.0, 2000.0, 4000.0, 5)
    assert c.same_budget and c.below  # 3000 < 5819.099 - 2000
    # Wider spread: IQR 4000 puts 3000 within one IQR of 5819.
    wide = check(np.array([-1000.0, 1000.0, 3000.0, 5000.0, 7000.0]), pub, 1_000_000)
    assert not wide.below
    # The same weak runs at another budget are shown but never flagged.
    other = check(np.array([1000.0, 2000.0, 3000.0, 4000.0, 5000.0]), pub, 500_000)
    assert not other.same_budget and not other.below


def test_check_refuses_empty_or_nonfinite():
    pub = published_for("trpo", "Hopper-v5")
    for bad in (np.array([]), np.array([1.0, np.nan]), np.ones((2, 2))):
        with pytest.raises(ValueError):
            check(bad, pub, pub.timesteps)


def test_every_published_env_is_registered_and_algorithms_are_on_policy():
    for (algo, env), p in PUBLISHED.items():
        assert env in REGISTRY and algo in ("ppo", "a2c", "trpo") and p.std >= 0 and p.timesteps > 0
    assert published_for("reinforce", "CartPole-v1") is None


def _published_table(html: str, env: str) -> str:
    sec = re.search(rf'<h2>{re.escape(env)} .*?</section>', html, re.S).group(0)
    m = re.search(r"<h3>Against published numbers</h3>(.*?)</table>", sec, re.S)
    return m.group(1) if m else ""


def test_report_shows_published_rows_from_last_evaluations(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    algos = [Planted("ppo-bench", "ppo", "bench", skill=0.2, noise=0.01),
             Planted("ppo-sb3", "ppo", "sb3", skill=1.3, noise=0.01),
             Planted("reinforce-bench", "reinforce", "bench", skill=0.5)]
    write_store(url, ["HalfCheetah-v5"], algos, 5, timesteps=1_000_000, eval_offset=100.0)
    html = report.build(url, tmp_path / "rep").read_text()
    table = _published_table(html, "HalfCheetah-v5")
    rows = re.findall(r"<tr(?: class=\"below-published\")?><td class=\"\w+\">([\w-]+)</td>", table)
    assert rows == ["ppo-bench", "ppo-sb3"]  # REINFORCE has no published number
    assert "last evaluation (deterministic)" in table and "5819 ± 664" in table
    assert table.count('class="below-published"') == 1
    assert ("<strong>more than one IQR below the zoo, where ppo-sb3 with the same settings is not: look at this "
            "implementation</strong>") in table
    # The value shown is the evaluation's (final training return + 100), not the training return.
    from bench.storage.store import Store

    db = Store(url, readonly=True)
    fr = db.runs_frame("synthetic")
    own = fr[fr["label"] == "ppo-bench"]["final_return"].to_numpy(float) + 100.0
    assert f"{np.median(own):.4g} [" in table


def test_report_without_evaluations_uses_final_training_return_and_budget_note(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    write_store(url, ["CartPole-v1"], [Planted("a2c-bench", "a2c", "bench", skill=1.0)], 5, timesteps=100_000)
    table = _published_table(report.build(url, tmp_path / "rep").read_text(), "CartPole-v1")
    assert "final training return (trailing mean)" in table
    assert "not comparable: budget 100,000 vs the zoo&#39;s 500,000" in table or \
        "not comparable: budget 100,000 vs the zoo's 500,000" in table


def test_a_flag_says_whether_sb3_with_the_same_settings_is_below_too():
    """Own PPO on Hopper-v5 stood still at ~1,000 where the zoo's one run reached 2,410, and so did SB3's
    PPO with the same settings: the flag must say which of the two it points at."""
    import pandas as pd

    def frame(own, sb3):
        vals = {"ppo-bench": own, "ppo-sb3": sb3}
        return pd.DataFrame([dict(label=lb, algo="ppo", impl=lb.split("-")[1], key=f"{lb}{i}", final_return=v)
                             for lb, vs in vals.items() for i, v in enumerate(vs)])

    low, high = [990.0, 1000.0, 1010.0, 1020.0, 1030.0], [2390.0, 2400.0, 2410.0, 2420.0, 2430.0]
    both = {r["label"]: r for r in report._published_rows(frame(low, low), "Hopper-v5", 1_000_000, {})}
    assert both["ppo-bench"]["below"] and both["ppo-sb3"]["below"]
    assert both["ppo-bench"]["verdict"].endswith("so is ppo-sb3 with the same settings: the settings, not this "
                                                 "implementation")
    assert both["ppo-sb3"]["verdict"] == "more than one IQR below the zoo"  # the baseline's own row is plain
    own_only = {r["label"]: r for r in report._published_rows(frame(low, high), "Hopper-v5", 1_000_000, {})}
    assert own_only["ppo-bench"]["verdict"].endswith("where ppo-sb3 with the same settings is not: look at this "
                                                     "implementation")
    fine = {r["label"]: r for r in report._published_rows(frame(high, low), "Hopper-v5", 1_000_000, {})}
    assert fine["ppo-bench"]["verdict"] == "within one IQR of the zoo or above"
