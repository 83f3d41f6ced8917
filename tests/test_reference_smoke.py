"""Every label of every reference suite trains on each of its envs for one rollout and one update (heavy tier:
``nox -s heavy``; the MiniGrid pixel and intersection-v0 suites took 7 minutes on one core of a 2-core AMD EPYC,
most of it intersection-v0's 60 ms steps).

A reference suite is registered, keyed and validated long before its hours of runs start, often in another
session: a label that cannot train on an env (a policy sized for another frame, a wrapper a label does not
take) should fail here, not in the first run of the background job. Issue 68's MiniGrid pixel suite was such a
case: every own label failed on its 56×56 view.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bench.run.runner import record_cell
from bench.suites.suite import SuiteError, load_suite

ROOT = Path(__file__).resolve().parents[1]
SUITES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "suites" / "reference").glob("*.yaml"))


@pytest.mark.heavy
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("suite", SUITES)
def test_every_label_of_a_reference_suite_trains_on_each_of_its_envs(suite):
    try:
        cells = load_suite(ROOT / suite).cells
    except SuiteError as e:  # an optional extra this install lacks: the suite file says which
        if "not installed" in str(e):
            pytest.skip(str(e))
        raise
    first = {}
    for c in cells:  # one seed of each (env, label): the point is that it trains, not what it learns
        first.setdefault((c.env_id, c.label), c)
    failed = []
    for (env, label), cell in sorted(first.items()):
        # A budget of one step still collects one whole rollout and makes one update (own and SB3 alike).
        _, error = record_cell(replace(cell, timesteps=1, cpu_seconds=None, checkpoint_every=None, pause_at=None))
        if error is not None:
            failed.append(f"{env} {label}: {error}")
    assert not failed, "\n".join(failed)
