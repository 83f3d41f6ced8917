"""What a practitioner reaches for on day one (issue 43): the right table by default, stores that describe
their envs, command-line overrides, and the CLI's conventions (--version, -h, one pass of errors)."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402

#: A user's env package: registers myrl/Line-v0 when `myrl.envs` is imported (Gymnasium's module:EnvId form).
LINE_ENV = '''\
import gymnasium as gym
import numpy as np


class Line(gym.Env):
    """Walk right along 5 cells: +1 at the end, 20 steps at most."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return np.array([0.0], np.float32), {}

    def step(self, a):
        self.pos = max(0, self.pos + (1 if a == 1 else -1))
        done = self.pos >= 4
        return np.array([self.pos / 4], np.float32), float(done), done, False, {}


gym.register("myrl/Line-v0", entry_point=Line, max_episode_steps=20)
'''

PLUGIN_SUITE = """\
name: mine
seeds: 2
defaults: {timesteps: 1024, window: 5}
envs:
  - id: 'myrl.envs:myrl/Line-v0'
    threshold: 0.9
algorithms:
  - {algo: ppo, impl: bench, hyperparams: {n_envs: 1, n_steps: 256, batch_size: 64}}
  - {algo: a2c, impl: bench}
"""

TINY = """\
name: tiny
seeds: 1
defaults: {timesteps: 512, window: 5}
envs:
  - id: CartPole-v1
algorithms:
  - {algo: a2c, impl: bench}
"""


def _invoke(*args: str):
    """``bench ARGS`` in this process (fast: for what needs no package isolation)."""
    from typer.testing import CliRunner

    from bench.cli import app

    return CliRunner().invoke(app, list(args), prog_name="bench")


def _here(monkeypatch, *args: str, cwd: Path, env: dict | None = None) -> SimpleNamespace:
    """``bench ARGS`` in this process, as from ``cwd`` with ``env`` added (each subprocess would pay
    Python's and torch's start-up, seconds each)."""
    monkeypatch.chdir(cwd)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    res = _invoke(*args)
    return SimpleNamespace(returncode=res.exit_code, stdout=res.stdout, stderr=res.stderr)


def _bench(*args: str, cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd,
                          env={**base, **(env or {})}, timeout=timeout)


def _table_rows(out: str) -> list[str]:
    """The rows of the first ``bench recommend`` table in ``out``, each its lines joined by newlines.

    The table wraps its cells (``continuous`` over ``vector dense``; a long answer over two lines), so a
    row is the line that names its action space and priority plus the lines below it, up to the next row
    or the blank line that ends the table.
    """
    rows: list[str] = []
    for ln in out.splitlines():
        if re.match(r"^ +(continuous|discrete) +(samples|time) ", ln):
            rows.append(ln)
        elif rows and ln.strip():
            rows[-1] += "\n" + ln
        elif rows:
            break
    return rows


# --------------------------------------------------------------------------- #
# 1. The right table by default
# --------------------------------------------------------------------------- #
def test_after_a_run_into_the_default_store_recommend_answers_from_the_shipped_reference(tmp_path, monkeypatch):
    # As after `make quickstart`: a suite run with no --store writes results/bench.db in the working
    # directory (the checkout, beside results/reference); the first `bench recommend` there must print
    # the reference's table and name it. A stand-in reference (one small pack of planted continuous-control
    # runs) keeps this fast; tests/test_docs.py runs the README's command on the real one.
    from bench.storage import packed

    planted = f"sqlite:///{tmp_path / 'planted.db'}"
    write_store(planted, ["Pendulum-v1", "LunarLanderContinuous-v3"],
                [Planted("ppo-x", "ppo", "bench", 0.9), Planted("a2c-x", "a2c", "sb3", 0.4)], seeds=5, suite="ref-x")
    packed.pack(planted, "ref-x", tmp_path / "results" / "reference" / "x")
    (tmp_path / "tiny.yaml").write_text(TINY)
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    p = _here(monkeypatch, "run", "tiny.yaml", "--workers", "1", cwd=tmp_path, env=cache)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "results" / "bench.db").is_file()
    p = _here(monkeypatch, "recommend", cwd=tmp_path, env=cache)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].strip() == "bench recommend — shipped reference (results/reference, 1 pack)"
    assert "reading the project's shipped reference results (results/reference/)" in p.stderr
    # The reference's rows (continuous control), not the quick start's (CartPole, discrete).
    rows = _table_rows(p.stdout)
    assert rows and all(r.split()[0] == "continuous" for r in rows), p.stdout
    # The row names what can still be best and its default: the reference's PPO label (issue 63).
    assert any(r.split()[1] == "samples" and r.split()[2:4] == ["ppo-x", "a2c-x"] and r.split()[4] == "ppo-x"
               and "vector" in r and "dense" in r for r in rows), p.stdout
    # --store answers from that store and names it.
    p = _here(monkeypatch, "recommend", "--store", "sqlite:///results/bench.db", cwd=tmp_path, env=cache)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].strip() == "bench recommend — sqlite:///results/bench.db"
    rows = _table_rows(p.stdout)
    assert rows and all(r.split()[0] == "discrete" for r in rows), p.stdout
    assert any(r.split()[1] == "samples" and "vector" in r and "dense" in r for r in rows), p.stdout
    # --with-reference: both tables, each named, the store's first.
    p = _here(monkeypatch, "recommend", "--with-reference", cwd=tmp_path, env=cache)
    assert p.returncode == 0, p.stderr
    titles = [ln.strip() for ln in p.stdout.splitlines() if ln.startswith("bench recommend — ")]
    assert titles == ["bench recommend — sqlite:///results/bench.db",
                      "bench recommend — shipped reference (results/reference, 1 pack)"], p.stdout
    p = _here(monkeypatch, "recommend", "--with-reference", "--format", "json", cwd=tmp_path, env=cache)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--with-reference" in p.stderr, p.stderr


def test_an_explicit_store_that_is_not_there_is_bad_input_not_the_reference(tmp_path):
    p = _bench("recommend", "--store", "sqlite:///results/bench.db", cwd=tmp_path)
    assert p.returncode == 2 and "no results store at sqlite:///results/bench.db" in p.stderr, p.stderr


def test_quickstart_ends_by_printing_both_recommend_commands():
    make = (ROOT / "Makefile").read_text()
    recipe = make[make.index("quickstart: "):make.index("\ntest:")]
    assert ".venv/bin/bench recommend " in recipe.replace("$(VENV)", ".venv") or \
        "$(VENV)/bin/bench recommend" in recipe
    assert "--store sqlite:///results/bench.db" in recipe


# --------------------------------------------------------------------------- #
# 2. Stores describe their envs
# --------------------------------------------------------------------------- #
def test_a_store_of_a_plugin_env_is_read_without_its_package(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg" / "myrl"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "envs.py").write_text(LINE_ENV)
    (tmp_path / "mine.yaml").write_text(PLUGIN_SUITE)
    url = f"sqlite:///{tmp_path / 's.db'}"
    p = _bench("run", "mine.yaml", "--store", url, "--workers", "1", cwd=tmp_path,
               env={"PYTHONPATH": str(tmp_path / "pkg")})
    assert p.returncode == 0, p.stderr + p.stdout
    # A process where the package cannot be imported (the store is all it has): this one.
    with pytest.raises(ImportError):
        importlib.import_module("myrl.envs")
    for args in (["report", "--store", url, "--out", str(tmp_path / "rep")],
                 ["recommend", "--store", url],
                 ["export", "--store", url, "--format", "rliable-json", "--out", str(tmp_path / "s.json")],
                 ["export", "--store", url, "--format", "rliable-npz", "--out", str(tmp_path / "s.npz")],
                 ["export", "--store", url, "--suite", "mine", "--format", "pack", "--out", str(tmp_path / "pk")]):
        q = _here(monkeypatch, *args, cwd=tmp_path)
        assert q.returncode == 0, (args, q.stderr)
        assert "cannot import" not in q.stderr and "internal error" not in q.stderr, (args, q.stderr)
    scores = json.loads((tmp_path / "s.json").read_text())
    assert scores["envs"] == ["myrl.envs:myrl/Line-v0"] and sorted(scores["scores"]) == ["a2c-bench", "ppo-bench"]
    rows = json.loads(_here(monkeypatch, "recommend", "--store", url, "--format", "json", cwd=tmp_path).stdout)
    assert "myrl" not in sys.modules
    assert [r["envs"] for r in rows if r["envs"]][0] == ["myrl.envs:myrl/Line-v0"]
    # What the store recorded at run time, and the pack carries it.
    from bench.storage.store import Store

    db = Store(url, readonly=True)
    facts = db.env_facts()["myrl.envs:myrl/Line-v0"]
    db.dispose()
    assert facts["action_space"] == "Discrete(2)" and facts["observation_space"].startswith("Box(0.0, 1.0, (1,)")
    assert (facts["family"], facts["action"], facts["obs"], facts["reward"], facts["horizon"]) == \
        ("other", "discrete", "vector", "dense", 20)
    assert facts["threshold"] == 0.9 and facts["threshold_source"] == "suite" and facts["time_scale_us"] is None
    assert facts["anchor"]["threshold"] == 0.9 and facts["anchor"]["episodes"] == 20
    assert (tmp_path / "pk" / "env_facts.parquet").is_file()


def test_env_facts_are_added_to_an_older_store_and_readers_tolerate_their_absence(store_url):
    from bench.storage import store as st

    db = st.Store(store_url)
    with db.engine.begin() as c:  # a store written before the table existed
        c.execute(sa.text("DROP TABLE env_facts"))
    db.dispose()
    reader = st.Store(store_url, readonly=True)
    assert reader.env_facts() == {}  # read-only: nothing created, nothing missed
    reader.dispose()
    db = st.Store(store_url)  # a writer adds it
    db.put_env_facts({"CartPole-v1": {"family": "classic"}})
    db.put_env_facts({"CartPole-v1": {"family": "classic", "horizon": 500}})  # the latest facts win
    assert db.env_facts() == {"CartPole-v1": {"family": "classic", "horizon": 500}}
    db.dispose()


def test_a_time_scale_for_an_old_store_is_read_from_the_registry_table_without_building_anything():
    from bench.envs import get_spec, registered_time_scale

    for key in ("CartPole-v1", "LunarLander-v3[continuous=true]", "bench/Sort-v0", "Acrobot-v1"):
        assert registered_time_scale(key) == get_spec(key).time_scale_us
    assert registered_time_scale("no_such_module_xyz:CartPole-v1") is None  # nothing imported


# --------------------------------------------------------------------------- #
# 3. Command-line overrides
# --------------------------------------------------------------------------- #
SMALL = """\
name: small
description: two labels
seeds: 2
defaults: {timesteps: 1000, window: 5}
envs:
  - id: CartPole-v1
algorithms:
  - {algo: ppo, impl: bench, hyperparams: {n_envs: 1, n_steps: 128, batch_size: 64}}
  - {algo: a2c, impl: bench}
"""


def _small(tmp_path: Path) -> Path:
    f = tmp_path / "small.yaml"
    f.write_text(SMALL)
    return f


def test_an_override_that_changes_the_experiment_changes_the_key_and_one_that_does_not_keeps_it(tmp_path):
    from bench.suites.suite import load_suite

    f = _small(tmp_path)
    keys = lambda loaded: {(c.label, c.seed): c.key for c in loaded.cells}  # noqa: E731
    base = load_suite(f)
    same = load_suite(f, ["description=another", "algorithms[0].hyperparams.n_steps=128"])
    assert keys(same) == keys(base)
    lr = load_suite(f, ["algorithms[0].hyperparams.learning_rate=1e-4"])
    assert {c.hyperparams["learning_rate"] for c in lr.cells if c.label == "ppo-bench"} == {1e-4}
    changed = {k for k, v in keys(lr).items() if v != keys(base)[k]}
    assert changed == {("ppo-bench", 0), ("ppo-bench", 1)}  # a2c's cells are the same experiments
    budget = load_suite(f, ["defaults.timesteps=2e3"])
    assert {c.timesteps for c in budget.cells} == {2000} and not set(keys(budget).values()) & set(keys(base).values())
    # Each cell carries the overrides that reach it, for its run's provenance.
    both = load_suite(f, ["defaults.window=7", "algorithms[1].hyperparams.learning_rate=1e-3"])
    by_label = {c.label: c.overrides for c in both.cells}
    assert by_label == {"ppo-bench": ("defaults.window=7",),
                        "a2c-bench": ("defaults.window=7", "algorithms[1].hyperparams.learning_rate=1e-3")}


@pytest.mark.parametrize("override, words", [
    ("defaults.timestep=2e5", "--set defaults.timestep: unknown key; allowed: timesteps, cpu_seconds, window, eval, "
                              "vec_env, save, checkpoint_every, diag_points, max_wall_minutes, max_memory_mb; did you mean timesteps? "
                              "(got 200000.0)"),
    ("defaults.timesteps=abc", "--set defaults.timesteps: input should be a valid integer"),
    ("defaults.timesteps=-5", "--set defaults.timesteps: input should be greater than 0 (got -5)"),
    ("algorithms[5].label=x", "--set algorithms[5].label: algorithms has 2 item(s); allowed: [0] to [1]"),
    ("algorithms[0].hyperparams.learning_rat=1e-4",
     "--set algorithms[0].hyperparams.learning_rat: unknown hyperparameter for ppo; allowed: n_envs, learning_rate"),
    ("algorithms[0].hyperparams.learning_rat=1e-4", "; did you mean learning_rate? (got 0.0001)"),
    ("defaults.timesteps=100", "--set defaults.timesteps: budget is smaller than one rollout of ppo-bench"),
    ("nonsense", "--set: 'nonsense' is not PATH=VALUE"),
    ("envs[0].threshold=[1,", "the value is not YAML"),
    ("seeds.x=1", "--set seeds.x: seeds is the value 2, so it has no key 'x'"),
])
def test_a_bad_override_is_one_line_naming_its_set_path(tmp_path, override, words):
    f = _small(tmp_path)
    res = _invoke("run", str(f), "--set", override, "--store", f"sqlite:///{tmp_path / 'x.db'}")
    assert res.exit_code == 2, res.output
    assert res.stderr.count("\n") == 1 and words in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "x.db").exists()


def test_overrides_reach_the_run_its_provenance_the_report_and_the_dry_run(tmp_path, monkeypatch):
    f = _small(tmp_path)
    url = f"sqlite:///{tmp_path / 's.db'}"
    sets = ["--set", "defaults.timesteps=512", "--set", "algorithms[1].hyperparams.learning_rate=1e-3",
            "--only", "label=a2c-bench"]
    p = _here(monkeypatch, "run", str(f), "--dry-run", *sets, "--store", url, cwd=tmp_path)
    assert p.returncode == 0 and not (tmp_path / "s.db").exists(), p.stderr
    assert "overrides: defaults.timesteps=512; algorithms[1].hyperparams.learning_rate=1e-3" in p.stdout
    assert re.search(r"a2c-bench on CartPole-v1:\n  --set: +learning_rate=0\.001\n  zoo: +", p.stdout), p.stdout
    assert "512" in p.stdout
    p = _here(monkeypatch, "run", str(f), *sets, "--store", url, "--workers", "1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    from bench.storage.store import Store

    db = Store(url, readonly=True)
    runs = db.runs_frame()
    db.dispose()
    done = runs[runs["status"] == "done"]
    assert len(done) == 2 and set(done["timesteps"]) == {512}
    for config, meta in zip(done["config"], done["meta"]):
        assert json.loads(config)["hyperparams"]["learning_rate"] == 1e-3
        assert json.loads(meta)["overrides"] == ["defaults.timesteps=512", "algorithms[1].hyperparams.learning_rate=1e-3"]
    # `bench status` with the same overrides finds the runs (their keys are the overridden cells').
    p = _here(monkeypatch, "status", str(f), *sets[:4], "--store", url, cwd=tmp_path)
    assert "done: 2" in p.stdout and "pending: 2" in p.stdout, p.stdout
    p = _here(monkeypatch, "report", "--store", url, "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "command-line overrides" in html and "--set defaults.timesteps=512: a2c-bench" in html


# --------------------------------------------------------------------------- #
# 4. CLI conventions
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("option, values", [("--priority", ["samples", "time", "wall-clock"]),
                                            ("--obs", ["vector", "pixels", "sequence"]), ("--obs", ["pixels"])])
def test_recommend_completes_its_option_values(option, values):
    from typer.testing import CliRunner

    from bench.cli import app

    typed = "p" if values == ["pixels"] else ""
    words = f"bench recommend {option} {typed}"
    res = CliRunner().invoke(app, [], prog_name="bench", env={"_BENCH_COMPLETE": "complete_bash", "COMP_WORDS": words,
                                                             "COMP_CWORD": "3"})
    assert res.exit_code == 0 and res.stdout.split() == values, res.stdout


def test_recommend_verbose_names_the_envs_of_an_answer_without_a_test():
    # The shipped reference's discrete pixels sparse row (time) read "insufficient evidence", "1 env, 10 v 10
    # runs", and named no env: its one env was measured but not tested.
    from bench.cli.results import _recommend_cell

    row = {"envs": ["MinAtar/Freeway-v1"], "tested_envs": [], "evidence": "1 env, 10 v 10 runs"}
    assert _recommend_cell(row, "evidence") == "1 env, 10 v 10 runs; not tested on MinAtar/Freeway-v1"
    row = {"envs": ["A-v0", "B-v0", "C-v0"], "tested_envs": ["A-v0", "C-v0"], "evidence": "3 envs, 5 v 5 runs"}
    assert _recommend_cell(row, "evidence") == "3 envs, 5 v 5 runs; tested on A-v0, C-v0; not tested on B-v0"


def test_version_short_help_and_completion():
    from importlib.metadata import version

    res = _invoke("--version")
    # the distribution is onpolicy-bench (pyproject.toml): `bench` on PyPI is another project
    assert res.exit_code == 0 and res.stdout.strip() == f"bench {version('onpolicy-bench')}"
    for args in (["-h"], ["run", "-h"], ["recommend", "-h"]):
        res = _invoke(*args)
        assert res.exit_code == 0 and "Usage:" in res.stdout, args
    res = _invoke("--help")
    assert "--install-completion" in res.stdout and "--show-completion" in res.stdout


def test_dry_run_names_the_source_of_every_resolved_hyperparameter(tmp_path):
    from bench.api import resolved_hyperparams
    from bench.suites.suite import load_suite

    f = _small(tmp_path)
    rows = resolved_hyperparams(load_suite(f, ["algorithms[0].hyperparams.gamma=0.9"]))
    src = {(r.label, r.name): r.source for r in rows}
    assert src[("ppo-bench", "gamma")] == "--set"
    assert src[("ppo-bench", "n_steps")] == "suite"
    assert src[("a2c-bench", "n_envs")] == "zoo"  # the zoo's CartPole A2C runs 8 envs
    assert src[("ppo-bench", "vf_coef")] == "default"
    # Every resolved value of every cell has a row, with the value the cell runs with.
    cells = {(c.label, c.env_id): c.hyperparams for c in load_suite(f, ["algorithms[0].hyperparams.gamma=0.9"]).cells}
    assert {(r.label, r.env): {} for r in rows}.keys() == cells.keys()
    for (label, env), hp in cells.items():
        assert {r.name: r.value for r in rows if (r.label, r.env) == (label, env)} == hp


def test_dry_run_labels_bench_own_values_as_bench_not_zoo_or_default(tmp_path):
    """Issue 66: PPO on Pendulum-v1 runs log_std_init 0.5, bench's addition to the zoo's block (ppo.yml has no
    policy_kwargs there), and normalize {obs: true, reward: false}, bench's continuous-control default where
    the zoo sets none: both are bench's, neither the zoo's nor SB3's default."""
    f = tmp_path / "pend.yaml"
    f.write_text("name: pend\nseeds: 1\ndefaults: {timesteps: 8192}\nenvs:\n  - id: Pendulum-v1\n"
                 "algorithms:\n  - {algo: ppo, impl: bench}\n  - {algo: a2c, impl: bench}\n")
    res = _invoke("run", str(f), "--dry-run", "--store", f"sqlite:///{tmp_path / 's.db'}")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    block = lines[lines.index("ppo-bench on Pendulum-v1:") + 1:lines.index("a2c-bench on Pendulum-v1:")]
    by_src: dict[str, str] = {}
    for ln in block:  # a source's values wrap onto lines indented by 11
        if ln.startswith(" " * 11):
            by_src[src] += " " + ln.strip()
        else:
            src, got = ln.split(":", 1)
            src = src.strip()
            by_src[src] = got.strip()
    assert by_src["bench"] == 'log_std_init=0.5, normalize={"obs": true, "reward": false}', block
    assert "log_std_init" not in by_src["zoo"] and "gamma=0.9" in by_src["zoo"], block
    assert "normalize=" not in by_src["default"] and "vf_coef=0.5" in by_src["default"], block
    # A2C's Pendulum block is the zoo's own, normalize included (a2c.yml `Pendulum-v1`: normalize: true).
    from bench.api import resolved_hyperparams
    from bench.suites.suite import load_suite

    src = {(r.label, r.name): r.source for r in resolved_hyperparams(load_suite(f))}
    assert src[("a2c-bench", "log_std_init")] == src[("a2c-bench", "normalize")] == "zoo"


def test_run_warns_in_one_line_when_the_random_policy_already_meets_the_threshold(tmp_path):
    """Issue 66: a suite threshold below the random policy's return means nothing (every run "solves" it);
    where `bench run` computes the env's anchor it says so, once, and says nothing of a threshold above it."""
    from bench.api import record_env_facts
    from bench.storage.store import Store
    from bench.suites.suite import load_suite

    f = tmp_path / "low.yaml"
    f.write_text("name: low\nseeds: 1\ndefaults: {timesteps: 2048}\nenvs:\n  - {id: CartPole-v1, threshold: 5}\n"
                 "  - {id: Acrobot-v1}\nalgorithms:\n  - {algo: reinforce, impl: bench}\n")
    said: list[str] = []
    db = Store(f"sqlite:///{tmp_path / 's.db'}")
    facts = record_env_facts(db, load_suite(f).env_meta, log=said.append)
    random = facts["CartPole-v1"]["anchor"]["random_return"]
    assert random > 5 and facts["Acrobot-v1"]["anchor"]["random_return"] < -100  # Acrobot's threshold is -100
    warned = [s for s in said if s.startswith("warning:")]
    assert warned == [f"warning: CartPole-v1: the random policy's mean return over "
                      f"{facts['CartPole-v1']['anchor']['episodes']} episodes, {random:.4g}, already meets the "
                      "threshold 5, so reaching it means nothing and the env is left out of cross-env scores; set a "
                      "higher threshold for it"], said
    db.dispose()


def test_validation_names_every_error_in_one_pass(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: x\nseeds: 1\ndefaults: {timesteps: 1000, windw: 5}\nenvs:\n  - id: CartPole-v1\nalgorithms:\n"
                 "  - {algo: ppo, impl: bench, hyperparams: {learning_rat: 0.1}}\n  - {algo: ddpg, impl: sb3}\n")
    res = _invoke("run", str(f), "--dry-run")
    lines = res.stderr.splitlines()
    assert res.exit_code == 2 and len(lines) == 3, lines
    assert any("defaults.windw: unknown key; allowed: " in ln and ln.endswith("; did you mean window? (got 5)")
               for ln in lines)
    assert any("algorithms[1].algo: unknown algorithm" in ln for ln in lines)
    assert any(":7: algorithms[0].hyperparams.learning_rat: unknown hyperparameter for ppo; allowed: " in ln
               and ln.endswith("; did you mean learning_rate?") for ln in lines)


def test_status_of_a_store_that_is_not_there_is_one_line_and_exit_2(tmp_path):
    f = _small(tmp_path)
    res = _invoke("status", str(f), "--store", f"sqlite:///{tmp_path / 'typo.db'}")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "no results store at" in res.stderr, res.stderr
    assert res.stdout == "" and not (tmp_path / "typo.db").exists()


def test_envs_lists_bench_own_sequence_tasks_too():
    res = _invoke("envs")
    assert res.exit_code == 0
    for task in ("bench/Sort-v0", "bench/Add-v0", "bench/Preference-v0", "CartPole-v1", "ALE/Pong-v5"):
        assert task in res.stdout, task
