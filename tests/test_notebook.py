"""The example notebook runs end to end (issue 42): bench.api is enough to run a suite and read its answer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "api-quickstart.ipynb"


@pytest.mark.heavy
def test_the_api_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "\n".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "notebook-tiny 4 cells" in text
    assert "bad input: --only: 'algo=sac' matches none of the 4 cells" in text
    assert text.count(" done") >= 4  # every cell ended done (the callback's lines)
    # the store as frames: every run, its episodes, its periodic evaluations (eval: every 1000 of 2000 steps)
    assert re.search(r"4 runs, [1-9]\d* episodes, 8 evaluations, 4 scored runs", text), text
    assert "insufficient evidence" in text or "on CartPole-v1" in text  # the table's row for discrete vector dense
