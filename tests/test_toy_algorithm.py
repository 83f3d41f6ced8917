"""Adding an algorithm is one module and one registry entry.

A toy algorithm (a policy with one parameter, the probability of pushing right) is written as one module in
``tmp_path`` and declared by one :func:`bench.algos.registry.register` call, and nothing else: it then runs
through a suite (:func:`bench.api.run_suite`, in worker processes that never registered it), ``bench report``
and ``bench recommend --store``, and appears in each, as a plugin does.
"""

from __future__ import annotations

import importlib.util
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


# --------------------------------------------------------------------------- #
# Adding an algorithm to bench itself, exactly as docs/architecture.md says
# --------------------------------------------------------------------------- #
#: Step 2 of the docs for VPG, a copy of REINFORCE: its params class and its spec, importing no torch.
VPG_SPEC = '''"""VPG, the vanilla policy gradient: REINFORCE under another name (the docs' example)."""

from __future__ import annotations

from bench.algos.reinforce.spec import SPACE_REINFORCE, REINFORCEParams
from bench.algos.spec import AlgoSpec, own, sb3_missing


class VPGParams(REINFORCEParams):
    """REINFORCE's fields and defaults."""


SPEC = AlgoSpec("vpg", VPGParams, {"bench": own("vpg.vpg")}, space=SPACE_REINFORCE,
                missing=sb3_missing("Stable-Baselines3 has no VPG"))
'''

VPG_SUITE = """\
name: vpg
seeds: 1
defaults: {timesteps: 2000}
envs: [{id: CartPole-v1}]
algorithms: [{algo: vpg, impl: bench}]
"""


def _git(repo, *args):
    import subprocess

    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


def _bench_copy(tmp_path):
    """A checkout of what the steps touch (the package, the same-returns script and its record), under git."""
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    repo = tmp_path / "repo"
    shutil.copytree(root / "bench", repo / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "scripts").mkdir()
    shutil.copy(root / "scripts" / "same_returns.py", repo / "scripts")
    (repo / "tests" / "data").mkdir(parents=True)
    shutil.copy(root / "tests" / "data" / "same_returns.json", repo / "tests" / "data")
    shutil.copy(root / ".gitignore", repo)  # Python's bytecode caches, as the project ignores them
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "bench as it is")
    return repo


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_adding_an_algorithm_as_the_docs_say_touches_its_folder_and_one_registry_line(tmp_path):
    """docs/architecture.md, "Adding an algorithm", step by step for VPG (a copy of REINFORCE), on a copy of the
    package: the folder, one line in FOLDERS, the documented command that records its same-returns hashes, and a
    2,000-step suite through ``python -m bench run``. Nothing else changes."""
    import os
    import subprocess
    import sys

    repo = _bench_copy(tmp_path)
    algos = repo / "bench" / "algos"
    record = json.loads((repo / "tests" / "data" / "same_returns.json").read_text())
    # Steps 1-3: the folder (its __init__, its spec, its implementation: REINFORCE's module, renamed).
    (algos / "vpg").mkdir()
    (algos / "vpg" / "__init__.py").write_text('"""VPG: its spec and its implementation."""\n')
    (algos / "vpg" / "spec.py").write_text(VPG_SPEC)
    own = (algos / "reinforce" / "reinforce.py").read_text()
    (algos / "vpg" / "vpg.py").write_text(own.replace("bench.algos.reinforce.spec", "bench.algos.vpg.spec")
                                          .replace("REINFORCEParams", "VPGParams"))
    # Step 4: one line in the registry's FOLDERS.
    registry = algos / "registry.py"
    text = registry.read_text()
    head = text.index("FOLDERS: tuple[str, ...] = (\n")
    end = text.index("\n)\n", head) + 1
    registry.write_text(text[:end] + '    "vpg",\n' + text[end:])

    env = {**os.environ, "PYTHONPATH": str(repo)}
    # Step 5: the documented command writes the new algorithm's same-returns record.
    rec = subprocess.run([sys.executable, "scripts/same_returns.py", "--write", "--algo", "vpg"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=240)
    assert rec.returncode == 0, rec.stderr[-2000:]
    after = json.loads((repo / "tests" / "data" / "same_returns.json").read_text())
    from bench.algos.registry import ALGOS

    # The hashes for this CPU, as the script files them: an Intel CPU's go to its vendor's own set (by_vendor).
    script = importlib.util.spec_from_file_location("same_returns", repo / "scripts" / "same_returns.py")
    same_returns = importlib.util.module_from_spec(script)
    script.loader.exec_module(same_returns)
    here, before = same_returns.record_cells(after), same_returns.record_cells(record)
    new = {k for k in here if "/vpg/" in k}
    assert new == {f"{e}/vpg/bench" for e in ("CartPole-v1", "Pendulum-v1", "HalfCheetah-v5")}
    assert all(len(here[k]["sha256"]) == 64 for k in new)
    assert "vpg" not in ALGOS  # this process's bench (the checkout's) was left as it is
    assert {k: v for k, v in here.items() if k not in new} == before  # the others' as they were

    # Step 6: it runs in a suite, through the command line.
    (tmp_path / "vpg.yaml").write_text(VPG_SUITE)
    url = f"sqlite:///{tmp_path / 'vpg.db'}"
    run = subprocess.run([sys.executable, "-m", "bench", "run", str(tmp_path / "vpg.yaml"), "--store", url,
                          "--workers", "1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    with sa.create_engine(url).connect() as c:
        steps = c.execute(sa.text("select max(e.step) from episodes e join suite_cells s on e.key = s.key "
                                  "where s.label = 'vpg-bench'")).scalar()
    # Whole episodes: the last one may run past the budget, by less than CartPole's 500-step time limit.
    assert steps is not None and 0 < steps < 2000 + 500

    # What changed: the new folder, one line of the registry, and the record the command wrote.
    # (Sources only: MuJoCo leaves its MUJOCO_LOG.TXT in the working folder, which is no change to bench.)
    status = sorted(_git(repo, "status", "--porcelain", "--untracked-files=all", "--", "bench", "scripts",
                         "tests").splitlines())
    assert status == [" M bench/algos/registry.py", " M tests/data/same_returns.json",
                      "?? bench/algos/vpg/__init__.py", "?? bench/algos/vpg/spec.py",
                      "?? bench/algos/vpg/vpg.py"]
    assert _git(repo, "diff", "--numstat", "bench/algos/registry.py").split()[:2] == ["1", "0"]
