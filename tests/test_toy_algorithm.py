"""Adding an algorithm is one module and one registry entry.

A toy algorithm (a policy with one parameter, the probability of pushing right) is written as one module in
``tmp_path`` and declared by one :func:`bench.algos.registry.register` call, and nothing else: it then runs
through a suite (:func:`bench.api.run_suite`, in worker processes that never registered it), ``bench report``
and ``bench recommend --store``, and appears in each, as a plugin does.
"""

from __future__ import annotations

import json
import textwrap

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from bench import api
from bench.algos import registry
from bench.algos.registry import AlgoSpec, register
from bench.cli import app
from bench.suites.suite import SuiteError, load_suite

TOY = '''
"""A toy algorithm: push right with probability p_right, learn nothing."""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class ToyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    p_right: float = Field(0.5, ge=0, le=1, description="Probability of action 1.")
    episodes_per_update: int = Field(1, ge=1, description="Episodes between two after_update calls.")


def train(env_id: str, params: ToyParams, *, seed: int, timesteps: int, recorder) -> None:
    from bench.envs import make_env

    assert isinstance(params, ToyParams)  # typed from the suite to here, not a dict
    env = make_env(env_id, recorder=recorder)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    steps, episodes = 0, 0
    while steps < timesteps:
        _, _, term, trunc, _ = env.step(int(rng.random() < params.p_right))
        steps += 1
        if term or trunc:
            env.reset()
            episodes += 1
            if episodes % params.episodes_per_update == 0:
                recorder.diagnostics({"toy/p_right": params.p_right}, step=steps)
                recorder.after_update()
    env.close()
'''

SUITE = """\
name: toy
seeds: 2
defaults: {timesteps: 800, window: 5}
envs: [{id: CartPole-v1}]
algorithms:
  - {algo: toy, impl: bench, hyperparams: {p_right: 0.5}}
  - {algo: toy, impl: bench, label: toy-left, hyperparams: {p_right: 0.1, episodes_per_update: 2}}
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    (tmp_path / "toy_algo.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers get the parent's sys.path
    import toy_algo

    # The one declaration.
    register(AlgoSpec("toy", toy_algo.ToyParams, {"bench": "toy_algo:train"}))
    yield toy_algo
    registry.unregister("toy")


def test_a_registered_toy_algorithm_runs_through_a_suite_the_report_and_recommend(tmp_path, toy):
    suite = tmp_path / "toy.yaml"
    suite.write_text(SUITE)
    loaded = load_suite(suite)
    assert {c.label for c in loaded.cells} == {"toy-bench", "toy-left"}
    # The suite's typed params travel with the cell (the key still hashes their stored form).
    assert all(isinstance(c.params, toy.ToyParams) for c in loaded.cells)
    assert loaded.cells[0].hyperparams == {"p_right": 0.5, "episodes_per_update": 1}

    url = f"sqlite:///{tmp_path / 'toy.db'}"
    run = api.run_suite(suite, url, workers=1)
    assert [o.status for _, o in run.results] == ["done"] * 4, [o.error for _, o in run.results]
    eng = sa.create_engine(url)
    with eng.connect() as c:
        rows = c.execute(sa.text("select s.label, count(e.idx) from suite_cells s join episodes e on e.key = s.key "
                                 "group by s.label")).all()
    assert {lb for lb, n in rows if n > 5} == {"toy-bench", "toy-left"}

    cli = CliRunner()
    rep = cli.invoke(app, ["report", "toy", "--store", url, "--out", str(tmp_path / "rep")])
    assert rep.exit_code == 0, rep.output
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "toy-bench" in html and "toy-left" in html
    rec = cli.invoke(app, ["recommend", "--store", url, "--verbose", "--format", "json"])
    assert rec.exit_code == 0, rec.output
    answers = json.loads(rec.output[rec.output.index("["):])  # after the "reading <store>" line
    # Profiles without runs answer None; the one this suite covers names the toy's labels.
    assert {a["algorithm"] for a in answers} == {"toy-bench", None}
    assert any(a["algorithm"] == "toy-bench" and a["runner_up"] == "toy-left" for a in answers)


def test_the_registry_is_the_only_declaration(tmp_path, toy):
    """Validation, the allowed names and the derived tables all follow the one entry, and forget it again."""
    from bench.algos import TRAIN
    from bench.algos.hyperparams import PARAMS
    from bench.suites.suite import AVAILABLE

    assert PARAMS["toy"] is toy.ToyParams and AVAILABLE["toy"] == ("bench",) and "toy" in TRAIN
    typo = tmp_path / "typo.yaml"
    typo.write_text(SUITE.replace("p_right: 0.5", "p_rigth: 0.5"))
    with pytest.raises(SuiteError, match=r"unknown hyperparameter for toy; allowed: p_right, episodes_per_update; "
                                         r"did you mean p_right\?"):
        load_suite(typo)
    sb3 = tmp_path / "sb3.yaml"
    sb3.write_text(SUITE.replace("impl: bench, label", "impl: sb3, label"))
    with pytest.raises(SuiteError, match=r"algorithms\[1\]\.impl: allowed for toy: impl bench \(got 'sb3'\)"):
        load_suite(sb3)
    with pytest.raises(ValueError, match="already registered"):
        register(AlgoSpec("toy", toy.ToyParams, {"bench": "toy_algo:train"}))
    with pytest.raises(ValueError, match="cannot be written in a suite"):
        register(AlgoSpec("Toy-2", toy.ToyParams, {"bench": "toy_algo:train"}))
    registry.unregister("toy")
    assert "toy" not in PARAMS and "toy" not in AVAILABLE
    with pytest.raises(SuiteError, match="algorithms\\[0\\]\\.algo: unknown algorithm; allowed: reinforce, "):
        load_suite(typo)
