"""Bad suites: one clear line per problem, exit status 2, no traceback, nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.suites.suite import SuiteError, load_suite

GOOD = """\
name: t
seeds: [0, 1]
defaults: {timesteps: 4096, window: 10}
envs:
  - id: CartPole-v1
algorithms:
  - algo: ppo
    impl: sb3
    hyperparams: {n_envs: 2, n_steps: 64, batch_size: 64}
"""

# (name, suite text, the YAML path the message must name, words the message must contain)
BAD = [
    ("empty file", "", "", "empty"),
    ("malformed yaml", "name: t\nseeds: [0, 1\nenvs: []\n", "", "malformed YAML"),
    ("not a mapping", "- just\n- a list\n", "", "must be a mapping"),
    ("unknown top-level key", GOOD + "nmae: x\n", "nmae", "unknown key; allowed: name"),
    ("missing algorithms", GOOD.split("algorithms:")[0], "algorithms", "missing required key"),
    ("unknown algorithm", GOOD.replace("algo: ppo", "algo: ddpg"), "algorithms[0].algo", "unknown algorithm; allowed: reinforce, ac_mc, ac_td, a2c, a3c, npg, trpo, ppo, grpo, rloo, dqn, sac, td3, or a plugin's own name"),
    ("unknown impl", GOOD.replace("impl: sb3", "impl: rllib"), "algorithms[0].impl", "'bench', 'sb3', 'numpy' or 'python'"),
    ("sb3 has no reinforce", GOOD.replace("algo: ppo", "algo: reinforce").replace("    hyperparams: {n_envs: 2, n_steps: 64, batch_size: 64}\n", ""),
     "algorithms[0].impl", "Stable-Baselines3 has no REINFORCE"),
    ("sb3 has no a3c", GOOD.replace("algo: ppo", "algo: a3c").replace("    hyperparams: {n_envs: 2, n_steps: 64, batch_size: 64}\n", ""),
     "algorithms[0].impl", "Stable-Baselines3 has no A3C; allowed for a3c: impl bench"),
    ("sb3 has no grpo", GOOD.replace("algo: ppo", "algo: grpo").replace("    hyperparams: {n_envs: 2, n_steps: 64, batch_size: 64}\n", ""),
     "algorithms[0].impl", "Stable-Baselines3 has no GRPO; allowed for grpo: impl bench"),
    ("unknown env id", GOOD.replace("CartPole-v1", "CartPol-v1"), "envs[0].id", "did you mean CartPole-v1"),
    ("budget of the wrong type", GOOD.replace("timesteps: 4096", "timesteps: lots"), "defaults.timesteps", "valid integer"),
    ("negative budget", GOOD.replace("timesteps: 4096", "timesteps: -5"), "defaults.timesteps", "greater than 0"),
    ("budget below one rollout", GOOD.replace("timesteps: 4096", "timesteps: 100"), "defaults.timesteps", "smaller than one rollout"),
    ("unknown hyperparameter", GOOD.replace("n_steps: 64", "n_stepz: 64"), "algorithms[0].hyperparams.n_stepz", "unknown hyperparameter for ppo"),
    ("bad hyperparameter value", GOOD.replace("n_envs: 2", "n_envs: 2, learning_rate: -0.1"), "algorithms[0].hyperparams.learning_rate", "greater than 0"),
    ("env_hyperparams for a missing env", GOOD + "    env_hyperparams:\n      Pendulum-v1: {n_steps: 8}\n",
     "algorithms[0].env_hyperparams.Pendulum-v1", "not an env of this suite"),
    ("duplicate key", GOOD.replace("seeds: [0, 1]\n", "seeds: [0, 1]\nseeds: 3\n"), "seeds", "duplicate key"),
    ("repeated seeds", GOOD.replace("seeds: [0, 1]", "seeds: [1, 1]"), "seeds", "must not repeat"),
    ("zero seeds", GOOD.replace("seeds: [0, 1]", "seeds: 0"), "seeds", ">= 1"),
    ("no threshold outside the registry", GOOD.replace("CartPole-v1", "ALE/Seaquest-v5"), "envs[0].threshold", "set a threshold"),
    ("bench-only hyperparameter on sb3", GOOD.replace("n_envs: 2", "n_envs: 2, grad_noise_chunks: 4"),
     "algorithms[0].hyperparams.grad_noise_chunks", "only the project's own implementations"),
    ("duplicate label", GOOD + "  - algo: ppo\n    impl: sb3\n", "algorithms[1].label", "label used twice"),
    ("bad kernel", GOOD.replace("impl: sb3", "impl: bench").replace("n_envs: 2", "n_envs: 2, kernel: gpu"),
     "algorithms[0].hyperparams.kernel", "'auto', 'torch' or 'numpy'"),
    ("numpy kernel on pixels", GOOD.replace("impl: sb3", "impl: bench").replace("CartPole-v1", "ALE/Pong-v5")
     .replace("n_envs: 2", "n_envs: 2, kernel: numpy"),
     "algorithms[0].hyperparams.kernel", "ALE/Pong-v5 has pixel observations; allowed here: auto, torch"),
    ("gsde on discrete actions", GOOD.replace("n_envs: 2", "n_envs: 2, use_sde: true"),
     "algorithms[0].hyperparams.use_sde", "gSDE needs continuous actions, and CartPole-v1's are discrete; allowed here: false"),
    ("gsde with the numpy kernel", GOOD.replace("impl: sb3", "impl: bench").replace("CartPole-v1", "Pendulum-v1")
     .replace("n_envs: 2", "n_envs: 2, use_sde: true, kernel: numpy"),
     "algorithms[0].hyperparams.kernel", "allowed with use_sde: auto, torch"),
    ("sde_sample_freq without gsde", GOOD.replace("n_envs: 2", "n_envs: 2, sde_sample_freq: 4"),
     "algorithms[0].hyperparams.sde_sample_freq", "only applies with use_sde: true"),
    ("bad name", GOOD.replace("name: t", "name: 'my suite!'"), "name", "pattern"),
    ("numpy reinforce on pixels", GOOD.replace("algo: ppo", "algo: reinforce").replace("impl: sb3", "impl: numpy")
     .replace("CartPole-v1", "ALE/Pong-v5").replace("n_envs: 2, n_steps: 64, batch_size: 64", "n_envs: 2"),
     "algorithms[0].impl", "ALE/Pong-v5 has pixel observations; allowed here: impl bench"),
    ("entropy schedule on a3c", GOOD.replace("algo: ppo", "algo: a3c").replace("impl: sb3", "impl: bench")
     .replace("n_envs: 2, n_steps: 64, batch_size: 64", "n_workers: 2, n_steps: 8, ent_schedule: linear"),
     "algorithms[0].hyperparams.ent_schedule", "constant entropy bonus"),
    ("zero cpu budget", GOOD.replace("timesteps: 4096", "timesteps: 4096, cpu_seconds: 0"), "defaults.cpu_seconds",
     "greater than 0"),
    ("negative cpu budget", GOOD.replace("  - id: CartPole-v1", "  - id: CartPole-v1\n    cpu_seconds: -3"),
     "envs[0].cpu_seconds", "greater than 0"),
    ("non-numeric cpu budget", GOOD.replace("timesteps: 4096", "timesteps: 4096, cpu_seconds: an hour"),
     "defaults.cpu_seconds", "valid number"),
    ("infinite cpu budget", GOOD.replace("timesteps: 4096", "timesteps: 4096, cpu_seconds: .inf"),
     "defaults.cpu_seconds", "finite number"),
    ("negative time scale", GOOD.replace("  - id: CartPole-v1", "  - id: CartPole-v1\n    time_scale_us: -1"),
     "envs[0].time_scale_us", "greater than 0"),
    # Env stepping (vec_env, bench.envs.vector)
    ("unknown env stepping", GOOD.replace("window: 10}", "window: 10, vec_env: warp}"), "defaults.vec_env",
     "'sync', 'async', 'vector' or 'envpool' (got 'warp')"),
    ("vector without a vector entry point", GOOD.replace("  - id: CartPole-v1\n", "  - id: Pendulum-v1\n    vec_env: vector\n"),
     "envs[0].vec_env", "Pendulum-v1 has no vector entry point (gym.make_vec's vectorization_mode='vector_entry_point'); "
                        "allowed here: sync, async"),
    ("env stepping as a hyperparameter", GOOD.replace("batch_size: 64}", "batch_size: 64, vec_env: async}"),
     "algorithms[0].hyperparams.vec_env", "env stepping is set per env"),
    ("Atari steps only sync", GOOD.replace("  - id: CartPole-v1\n", "  - id: ALE/Pong-v5\n    vec_env: async\n"),
     "envs[0].vec_env", "allowed for Atari: sync"),
    ("a3c cannot step async", GOOD.replace("algo: ppo", "algo: a3c").replace("impl: sb3", "impl: bench")
     .replace("    hyperparams: {n_envs: 2, n_steps: 64, batch_size: 64}\n", "").replace("window: 10}", "window: 10, vec_env: async}"),
     "defaults.vec_env", "allowed for a3c: sync, vector, envpool"),
    ("variant with a control character", GOOD.replace("name: t\n", "name: t\nvariant: \"tuned\\u0007\"\n"),
     "variant", "control characters are not allowed; allowed: printable text"),
    ("empty variant", GOOD.replace("name: t\n", "name: t\nvariant: ''\n"), "variant", "at least 1 character"),
]


def test_the_good_suite_is_good(tmp_path):
    f = tmp_path / "good.yaml"
    f.write_text(GOOD)
    loaded = load_suite(f)
    assert len(loaded.cells) == 2 and len({c.key for c in loaded.cells}) == 2


@pytest.mark.parametrize("name,text,path,words", BAD, ids=[b[0] for b in BAD])
def test_bad_suite_gives_one_clear_line_and_writes_nothing(tmp_path, name, text, path, words):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    db = tmp_path / "results" / "bench.db"
    res = CliRunner().invoke(app, ["run", str(f), "--store", f"sqlite:///{db}"])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines, "no message"
    assert all(ln.startswith(f"{f}:") for ln in lines), lines  # every line names the file (and line)
    hit = [ln for ln in lines if (f": {path}:" in ln if path else True) and words in ln]
    assert hit, f"expected path {path!r} and {words!r} in: {lines}"
    assert "Traceback" not in res.output + res.stderr
    assert not db.exists() and not db.parent.exists(), "the store must not be created"
    assert res.exception is None or isinstance(res.exception, SystemExit)


def test_envpool_without_the_package_is_one_line(tmp_path, monkeypatch):
    from bench.envs import vector

    monkeypatch.setattr(vector, "envpool_installed", lambda: False)
    test_bad_suite_gives_one_clear_line_and_writes_nothing(
        tmp_path, "envpool missing", GOOD.replace("window: 10}", "window: 10, vec_env: envpool}"), "defaults.vec_env",
        "the envpool package is not installed (pip install envpool); allowed here: sync, async")


def test_several_problems_give_one_line_each(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(GOOD.replace("algo: ppo", "algo: ddpg").replace("timesteps: 4096", "timesteps: -1"))
    with pytest.raises(SuiteError) as e:
        load_suite(f)
    assert len(e.value.lines) == 2
    assert any("defaults.timesteps" in ln and "(got -1)" in ln for ln in e.value.lines)
    # Line numbers point at the offending key.
    assert any(ln.startswith(f"{f}:3: defaults.timesteps") for ln in e.value.lines), e.value.lines


FOUR_MISTAKES = """\
name: four
seeds: 1
defaults: {timesteps: -100}
envs:
  - id: CartPol-v1
    treshold: 475
algorithms:
  - algo: ppoo
    impl: bench
"""


def test_every_stage_s_problems_in_one_pass(tmp_path):
    """Schema (a bad budget, a typo'd key, an unknown algorithm) and registry (an unknown env id) problems
    come out of one run, one line each: the env id used to show only once the schema's were fixed."""
    f = tmp_path / "four.yaml"
    f.write_text(FOUR_MISTAKES)
    db = tmp_path / "r" / "bench.db"
    res = CliRunner().invoke(app, ["run", str(f), "--store", f"sqlite:///{db}"])
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 4, lines
    for where, words in [("3: defaults.timesteps", "greater than 0 (got -100)"),
                         ("6: envs[0].treshold", "unknown key; allowed: id, kwargs"),
                         ("8: algorithms[0].algo", "unknown algorithm; allowed: reinforce"),
                         ("5: envs[0].id", "unknown environment; did you mean CartPole-v1")]:
        assert any(ln.startswith(f"{f}:{where}: ") and words in ln for ln in lines), (where, lines)
    assert not db.parent.exists() and "Traceback" not in res.output


def test_every_bad_override_in_one_pass(tmp_path):
    """Two bad --set values (one the schema refuses, one only the algorithm's hyperparameters do) give two
    lines in one run; an override that cannot be read, or names no place, is a line beside them."""
    f = tmp_path / "good.yaml"
    f.write_text(GOOD)
    db = tmp_path / "r" / "bench.db"
    sets = ["--set", "algorithms[0].hyperparams.learning_rate=-1", "--set", "defaults.timesteps=abc"]
    res = CliRunner().invoke(app, ["run", str(f), *sets, "--store", f"sqlite:///{db}"])
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert lines == [f"{f}: --set defaults.timesteps: input should be a valid integer, unable to parse string as an "
                     "integer (got 'abc')",
                     f"{f}: --set algorithms[0].hyperparams.learning_rate: input should be greater than 0 (got -1)"], lines
    res = CliRunner().invoke(app, ["run", str(f), *sets, "--set", "nonsense", "--set", "algorithms[4].label=x",
                                   "--store", f"sqlite:///{db}"])
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 4, res.stderr
    assert "'nonsense' is not PATH=VALUE" in res.stderr and "algorithms has 1 item(s)" in res.stderr
    # With the schema passing, a bad value resolved beside an unknown env is named in the same pass.
    res = CliRunner().invoke(app, ["run", str(f), "--set", "envs[0].id=CartPol-v1", "--set",
                                   "algorithms[0].hyperparams.n_steps=-64", "--store", f"sqlite:///{db}"])
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 2, res.stderr
    assert "envs[0].id: unknown environment" in res.stderr and "hyperparams.n_steps" in res.stderr
    assert not db.parent.exists()


def test_bad_suite_from_a_real_process(tmp_path):
    """The installed entry point, as a user runs it: exit 2, no traceback, no store."""
    f = tmp_path / "bad.yaml"
    f.write_text(GOOD.replace("n_steps: 64", "n_steps: -64"))
    p = subprocess.run(
        [sys.executable, "-m", "bench", "run", str(f), "--store", f"sqlite:///{tmp_path}/r/bench.db"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert p.returncode == 2
    assert "algorithms[0].hyperparams.n_steps" in p.stderr and "(got -64)" in p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    assert not (tmp_path / "r").exists()


def test_bad_only_filter_and_store_url(tmp_path):
    f = tmp_path / "good.yaml"
    f.write_text(GOOD)
    r = CliRunner().invoke(app, ["run", str(f), "--only", "colour=blue", "--store", f"sqlite:///{tmp_path}/x.db"])
    assert r.exit_code == 2 and "allowed keys: env, algo" in r.stderr
    r = CliRunner().invoke(app, ["run", str(f), "--store", "mongodb://nope"])
    assert r.exit_code == 2 and "not a usable store URL" in r.stderr
    assert not (tmp_path / "x.db").exists()


def test_missing_file(tmp_path):
    r = CliRunner().invoke(app, ["run", str(tmp_path / "nope.yaml")])
    assert r.exit_code == 2 and "no such suite file" in r.stderr


def test_folder_or_device_is_not_a_suite(tmp_path):
    # They exist, so "no such suite file" would send the user looking for a typo.
    for path, said in ((tmp_path, "a folder; allowed: a suite YAML file"),
                       ("/dev/null", "not a regular file; allowed: a suite YAML file")):
        r = CliRunner().invoke(app, ["run", str(path), "--store", f"sqlite:///{tmp_path}/x.db"])
        assert r.exit_code == 2 and said in r.stderr and "Traceback" not in r.output, r.output
    assert not (tmp_path / "x.db").exists()


def test_dry_run_lists_cells_and_writes_nothing(tmp_path):
    f = tmp_path / "good.yaml"
    f.write_text(GOOD)
    r = CliRunner().invoke(app, ["run", str(f), "--dry-run", "--store", f"sqlite:///{tmp_path}/x.db"])
    assert r.exit_code == 0, r.output
    assert "2 cells" in r.stdout and "CartPole-v1" in r.stdout
    assert not (tmp_path / "x.db").exists()


def test_keys_are_stable_and_cover_the_resolved_config(tmp_path):
    f = tmp_path / "good.yaml"
    f.write_text(GOOD)
    a = load_suite(f).cells
    b = load_suite(f).cells
    assert [c.key for c in a] == [c.key for c in b]
    f.write_text(GOOD.replace("n_steps: 64", "n_steps: 128"))
    c = load_suite(f).cells
    assert {x.key for x in a}.isdisjoint({x.key for x in c})
    # The label is display only: renaming it keeps the runs.
    f.write_text(GOOD + "    label: mine\n")
    d = load_suite(f).cells
    assert [x.key for x in d] == [x.key for x in a] and d[0].label == "mine"


def test_schema_is_json_and_forbids_extra_keys():
    import json

    r = CliRunner().invoke(app, ["schema"])
    assert r.exit_code == 0
    s = json.loads(r.stdout)
    assert s["additionalProperties"] is False
    assert {"name", "seeds", "envs", "algorithms"} <= set(s["required"])


def test_every_suite_file_in_the_repository_validates():
    """Every suite file of the checkout (``suites/**/*.yaml``, and any under ``examples/``) passes the
    validator (no runs) and has cells; the problems of all files are reported together. The quick-start and
    reference suites are loaded by tests/test_cell_keys.py, which checks their cell keys as well."""
    from pathlib import Path

    from test_cell_keys import RECORDED

    root = Path(__file__).resolve().parents[1]
    files = sorted(str(p.relative_to(root)) for p in (*root.glob("suites/**/*.yaml"), *root.glob("examples/**/*.yaml")))
    assert {"suites/smoke.yaml", "suites/demos/collapse.yaml", "suites/lm/kl-sweep.yaml"} <= set(files)
    problems = []
    for f in files:
        if f in RECORDED:
            continue
        try:
            if not load_suite(root / f).cells:
                problems.append(f"{f}: no cells")
        except SuiteError as e:
            problems.append(str(e))
    assert not problems, "\n".join(problems)

