"""User algorithms as plugins (impl: python): both declarations, the same recording, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "bench_example_plugin"
ENTRY = "bench_example_plugin.tiny_reinforce:train"

SUITE = f"""\
name: plug
seeds: 2
defaults: {{timesteps: 3000, window: 5}}
envs: [{{id: CartPole-v1}}]
algorithms:
  - {{algo: tiny_reinforce, impl: python, label: by-entry, entry: "{ENTRY}", hyperparams: {{learning_rate: 0.02}}}}
  - {{algo: tiny_reinforce, impl: python, label: by-entry-point}}
  - {{algo: reinforce, impl: bench}}
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """PYTHONPATH with the example package and an installed-looking dist-info declaring its entry
    point, so both the test process's children and their spawned workers find it."""
    site = tmp_path_factory.mktemp("site")
    info = site / "bench_example_plugin-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-example-plugin\nVersion: 0.1.0\n")
    (info / "top_level.txt").write_text("bench_example_plugin\n")
    (info / "entry_points.txt").write_text(f"[bench.algorithms]\ntiny_reinforce = {ENTRY}\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(site)])}


def bench(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600)


def _returns(url: str, label: str) -> list[list[float]]:
    eng = sa.create_engine(url)
    with eng.connect() as c:
        keys = [k for (k,) in c.execute(sa.text(
            "select r.key from runs r join suite_cells s on s.key = r.key where s.label = :l order by r.seed"), {"l": label})]
        return [[x for (x,) in c.execute(sa.text("select ret from episodes where key = :k order by idx"), {"k": k})]
                for k in keys]


@pytest.mark.heavy
def test_a_plugin_declared_both_ways_runs_beside_a_built_in_and_is_reported(tmp_path, env):
    suite = tmp_path / "plug.yaml"
    suite.write_text(SUITE)
    url = f"sqlite:///{tmp_path / 'a.db'}"
    p = bench("run", str(suite), "--store", url, "--workers", "1", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert "6 done, 0 failed" in p.stdout + p.stderr
    eng = sa.create_engine(url)
    with eng.connect() as c:
        rows = {lb: json.loads(cfg) for lb, cfg in c.execute(sa.text(
            "select s.label, r.config from runs r join suite_cells s on s.key = r.key where r.seed = 0"))}
    # The entry (and, installed, its version) is part of what the key covers.
    assert rows["by-entry"]["entry"] == ENTRY and rows["by-entry-point"]["entry"] == ENTRY
    assert rows["by-entry-point"]["plugin_version"] == "0.1.0"
    assert rows["by-entry"]["hyperparams"]["learning_rate"] == 0.02
    assert "entry" not in rows["reinforce-bench"]  # built-ins' keys are as they were
    # Recorded like a built-in: episodes and the plugin's diagnostics.
    assert all(len(r) > 5 for r in _returns(url, "by-entry"))
    # Same seed, same returns (the plugin's cells alone: the built-in's are checked in tests/test_same_returns.py).
    url2 = f"sqlite:///{tmp_path / 'b.db'}"
    assert bench("run", str(suite), "--store", url2, "--workers", "1", "--only", "label=by-entry", cwd=tmp_path,
                 env=env).returncode == 0
    assert _returns(url, "by-entry") == _returns(url2, "by-entry")
    # In the report and the recommendation table.
    p = bench("report", "plug", "--store", url, "--out", str(tmp_path / "rep"), cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "by-entry-point" in html and "by-entry" in html
    p = bench("recommend", "--store", url, "--verbose", "--format", "json", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert "tiny_reinforce" in p.stdout


@pytest.mark.parametrize("entry_line, words", [
    ('{algo: mine, impl: python, entry: "no_such_module.x:train"}', ["algorithms[0].entry", "cannot import module"]),
    ('{algo: mine, impl: python, entry: "bench_example_plugin.tiny_reinforce:missing"}', ["has no attribute 'missing'"]),
    ('{algo: mine, impl: python, entry: "bench_example_plugin.tiny_reinforce:TinyParams"}', ["contract's signature"]),
    ('{algo: mine, impl: python, entry: "not an entry"}', ["is not module.path:function"]),
    ('{algo: not_installed, impl: python}', ["algorithms[0].algo", "no entry point 'not_installed'"]),
    (f'{{algo: mine, impl: python, entry: "{ENTRY}", hyperparams: {{hidden: 0}}}}', ["hyperparams.hidden", "greater than"]),
    (f'{{algo: mine, impl: python, entry: "{ENTRY}", hyperparams: {{bogus: 1}}}}', ["unknown hyperparameter for mine"]),
    ('{algo: ppo, impl: python, entry: "x:y"}', ["algorithms[0].algo", "is a built-in algorithm"]),
    ('{algo: mine, impl: bench}', ["algorithms[0].algo", "unknown algorithm"]),
    ('{algo: ppo, impl: sb3, entry: "x:y"}', ["algorithms[0].entry", "only with impl: python"]),
])
def test_bad_plugin_declarations_are_one_line_and_write_nothing(tmp_path, env, entry_line, words):
    suite = tmp_path / "bad.yaml"
    suite.write_text(f"name: bad\nseeds: 1\ndefaults: {{timesteps: 3000}}\nenvs: [{{id: CartPole-v1}}]\n"
                     f"algorithms:\n  - {entry_line}\n")
    p = bench("run", str(suite), "--store", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path, env=env)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(lines) == 1, p.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert not (tmp_path / "x.db").exists()


def test_a_tune_block_checks_a_plugins_space_against_its_own_model(tmp_path, env):
    suite = tmp_path / "t.yaml"
    suite.write_text(SUITE.replace("name: plug", "name: t") + "tune: {trials: 2, space: {tiny_reinforce: {n_epochs: "
                     "{type: int, low: 1, high: 4}}}}\n")
    p = bench("run", str(suite), "--store", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path, env=env)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "tune.space.tiny_reinforce.n_epochs: unknown hyperparameter for tiny_reinforce" in lines[0]
    assert "hidden" in lines[0] and not (tmp_path / "x.db").exists()  # allowed: the plugin's own fields


def test_the_public_api_imports_from_bench():
    import bench
    from bench.algos.hyperparams import HyperParams
    from bench.storage.record import RecorderProtocol

    assert bench.HyperParams is HyperParams and bench.RecorderProtocol is RecorderProtocol
    with pytest.raises(AttributeError):
        bench.NoSuchThing  # noqa: B018


def test_a_study_samples_a_plugins_space_within_its_declared_ranges(tmp_path, monkeypatch):
    """In-process, what the two-trial study below checks of its trials: every value drawn from the plugin's
    ``search_space`` is in its range, ``hidden`` a power of two, a value the label fixes is not searched, and the
    plugin's own model accepts what is drawn."""
    import optuna

    from bench.suites.spaces import sample
    from bench.suites.suite import load_suite
    from bench.tune.targets import targets_from_suite

    monkeypatch.syspath_prepend(str(EXAMPLE))
    suite = tmp_path / "plug.yaml"
    suite.write_text(SUITE.replace("  - {algo: tiny_reinforce, impl: python, label: by-entry-point}\n", "")
                     .replace("  - {algo: reinforce, impl: bench}\n", ""))
    (target,) = targets_from_suite(load_suite(suite))
    assert target.entry == ENTRY
    space = {"learning_rate": (1e-3, 1e-1), "hidden": (8, 128), "baseline_decay": (0.5, 0.99)}  # TinyParams.search_space
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    drawn = []
    for _ in range(32):
        values = sample(study.ask(), target.space, rollout_of=lambda v: 1)
        # The label fixes learning_rate (its hyperparams), so the study searches the other two.
        assert set(values) == set(space) - {"learning_rate"}, values
        assert all(lo <= values[k] <= hi for k, (lo, hi) in space.items() if k in values), values
        assert values["hidden"] & (values["hidden"] - 1) == 0  # pow2
        target.params({**target.fixed, **values})  # the plugin's model validates them
        drawn.append(values["hidden"])
    assert len(set(drawn)) > 1  # sampled, not fixed


# `bench tune` end to end is tests/test_tune.py's, and a plugin's search space against its model is
# test_a_tune_block_checks_a_plugins_space_against_its_own_model's: sampling a plugin's space in a real study is
# `nox -s heavy`'s, for CI's time (docs/testing.md).
@pytest.mark.heavy
def test_bench_tune_runs_a_two_trial_study_of_the_plugin_declared_both_ways(tmp_path, env):
    import optuna

    suite = tmp_path / "plug.yaml"
    suite.write_text(SUITE.replace("  - {algo: reinforce, impl: bench}\n", ""))
    url = f"sqlite:///{tmp_path / 't.db'}"
    out = tmp_path / "tuned.yaml"
    p = bench("tune", str(suite), "--store", url, "--trials", "2", "--seeds", "1", "--timesteps", "3000",
              "--export", str(out), cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr + p.stdout
    space = {"learning_rate": (1e-3, 1e-1), "hidden": (8, 128), "baseline_decay": (0.5, 0.99)}  # TinyParams.search_space
    for label in ("by-entry", "by-entry-point"):
        study = optuna.load_study(study_name=f"plug-{label}-CartPole-v1", storage=url)
        done = [t for t in study.trials if t.state.is_finished()]
        assert len(done) == 2 and all(t.state == optuna.trial.TrialState.COMPLETE for t in done)
        for t in done:
            hp = t.user_attrs["hyperparams"]
            assert all(lo <= hp[k] <= hi for k, (lo, hi) in space.items()), hp
            assert hp["hidden"] & (hp["hidden"] - 1) == 0  # pow2
    # The exported best configuration is a suite bench accepts, with the plugin's entry kept.
    text = out.read_text()
    assert ENTRY in text
    p = bench("run", str(out), "--store", f"sqlite:///{tmp_path / 'r.db'}", "--dry-run", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr


def test_bench_tune_of_a_plugin_without_a_space_is_one_line(tmp_path, env):
    # A plugin whose model declares no search_space, and a suite that names none: nothing to search.
    mod = tmp_path / "spaceless.py"
    mod.write_text("from bench_example_plugin.tiny_reinforce import train as _t, TinyParams\n"
                   "class P(TinyParams):\n    search_space = {}\n"
                   "def train(env_id: str, params: P, *, seed: int, timesteps: int, recorder) -> None:\n"
                   "    _t(env_id, params, seed=seed, timesteps=timesteps, recorder=recorder)\n")
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nseeds: 1\ndefaults: {timesteps: 3000}\nenvs: [{id: CartPole-v1}]\n"
                     "algorithms: [{algo: bare, impl: python, entry: 'spaceless:train'}]\n")
    env = {**env, "PYTHONPATH": env["PYTHONPATH"] + os.pathsep + str(tmp_path)}
    p = bench("tune", str(suite), "--store", f"sqlite:///{tmp_path / 't.db'}", "--trials", "1", cwd=tmp_path, env=env)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "nothing to search for bare-python" in lines[0], p.stderr
    assert "declares no search_space" in lines[0] and not (tmp_path / "t.db").exists()
