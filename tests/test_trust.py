"""What bench trusts (docs/recorded.md#what-bench-trusts): reading a store runs none of the modules it names.

A ``module:EnvId`` env key makes Gymnasium import ``module``. A store or pack from elsewhere can name any module,
so reading it (``bench report``, ``bench recommend``: :func:`bench.analysis.scoring.load`) must import none: an
env whose traits or anchor the store lacks is left out, with a note, rather than built. The saved policies'
side (``bench eval``) is in tests/test_policies.py."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402

GOOD = Planted("ppo-bench", "ppo", "bench", skill=1.0, tau=0.2)
KEY = "plantmod:CartPole-v1"


@pytest.mark.parametrize("traits", ["all", "no family", "none"])
def test_reading_a_store_never_imports_a_module_it_names(tmp_path, monkeypatch, traits):
    """``traits``: the suite recorded the env's traits (its anchor is missing), all but its family (a store from
    before families were recorded), or none (an old store whose suite row lost them): the module is never
    imported, and the env is left out of cross-env scores with a note."""
    from bench.analysis import scoring

    marker = tmp_path / "ran"
    (tmp_path / "plantmod.py").write_text(f"open({str(marker)!r}, 'w')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    url = f"sqlite:///{tmp_path}/b.db"
    write_store(url, ["CartPole-v1"], [GOOD], seeds=2, timesteps=2_000, episodes=20, anchors=False).dispose()
    with sqlite3.connect(tmp_path / "b.db") as c:  # the same runs, under a module:EnvId key
        c.execute("UPDATE runs SET env_id = ?", (KEY,))
        (meta,) = c.execute("SELECT env_meta FROM suites").fetchone()
        meta = json.loads(meta)
        kept = {k: v for k, v in meta["CartPole-v1"].items() if traits == "all" or k != "family"}
        c.execute("UPDATE suites SET env_meta = ?", (json.dumps({KEY: kept} if traits != "none" else {}),))
    data = scoring.load(url)
    assert not marker.exists() and "plantmod" not in sys.modules
    assert KEY not in data.anchors and len(data.runs) == 2
    assert any(n.startswith(KEY) for n in data.notes), data.notes
