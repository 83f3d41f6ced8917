"""The new algorithm names and impl numpy in suites: validation lines, unchanged keys,
and ranking by `bench recommend` from a tiny store of real runs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.suites.suite import SuiteError, load_suite

SUITE = """\
name: t
seeds: [0]
defaults: {timesteps: 4096, window: 5}
envs:
  - id: CartPole-v1
algorithms:
  - algo: ALGO
    impl: IMPL
    hyperparams: HP
"""


def _load(tmp_path, algo, impl, hp="{}"):
    f = tmp_path / "s.yaml"
    f.write_text(SUITE.replace("ALGO", algo).replace("IMPL", impl).replace("HP", hp))
    return load_suite(f)


@pytest.mark.parametrize("algo, impl, hp, words", [
    ("npg", "sb3", "{}", "Stable-Baselines3 and sb3-contrib have no NPG; allowed for npg: impl bench"),
    ("ac_td", "sb3", "{}", "ac_td is the project's name for one-env A2C; for SB3 use algo a2c with n_envs 1"),
    ("ac_mc", "sb3", "{}", "Stable-Baselines3 has no REINFORCE with a value baseline"),
    ("ppo", "numpy", "{}", "impl numpy is the pure-NumPy REINFORCE only; allowed for ppo: impl bench, sb3"),
    ("ac_mc", "numpy", "{}", "impl numpy is the pure-NumPy REINFORCE only; allowed for ac_mc: impl bench"),
    ("a2c", "sb3", "{ent_coef: 0.01, ent_schedule: linear}",
     "algorithms[0].hyperparams.ent_schedule: Stable-Baselines3 has no entropy-coefficient schedule; "
     "allowed for impl sb3: constant"),
    ("reinforce", "numpy", "{net_arch: [64]}", "algorithms[0].hyperparams.net_arch: only the project's own"),
    ("ac_td", "bench", "{n_envs: 4}", "algorithms[0].hyperparams.n_envs"),
])
def test_one_clear_line(tmp_path, algo, impl, hp, words):
    with pytest.raises(SuiteError) as e:
        _load(tmp_path, algo, impl, hp)
    assert len(e.value.lines) == 1 and words in e.value.lines[0], e.value.lines


def test_accepted_and_late_defaults_stay_out_of_the_key(tmp_path):
    for algo, impl in [("npg", "bench"), ("ac_td", "bench"), ("ac_mc", "bench"), ("reinforce", "numpy")]:
        assert _load(tmp_path, algo, impl).cells
    plain = _load(tmp_path, "ppo", "bench").cells[0]
    assert "ent_schedule" not in plain.hyperparams and "ent_schedule_rate" not in plain.hyperparams
    explicit = _load(tmp_path, "ppo", "bench", "{ent_schedule: constant}").cells[0]
    assert explicit.key == plain.key  # the default, spelled out, is the same run
    sched = _load(tmp_path, "ppo", "bench", "{ent_schedule: exponential}").cells[0]
    assert sched.hyperparams["ent_schedule"] == "exponential" and sched.key != plain.key


def test_recommend_ranks_the_new_names(tmp_path):
    """A tiny store of real runs of the new names: `bench recommend` lists each by its algo name."""
    f = tmp_path / "ladder.yaml"
    f.write_text("""\
name: ladder
seeds: [0]
defaults: {timesteps: 600, window: 5}
envs:
  - id: CartPole-v1
algorithms:
  - {algo: npg, impl: bench, hyperparams: {n_envs: 1, n_steps: 300, batch_size: 100}}
  - {algo: ac_td, impl: bench}
  - {algo: ac_mc, impl: bench, hyperparams: {n_steps: 100}}
  - {algo: reinforce, impl: numpy, hyperparams: {n_steps: 100}}
""")
    url = f"sqlite:///{tmp_path / 'b.db'}"
    res = CliRunner().invoke(app, ["run", str(f), "--store", url, "--workers", "1"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["recommend", "--store", url, "--format", "json"])
    assert res.exit_code == 0, res.output
    text = json.dumps(json.loads(res.stdout))
    for name in ("npg", "ac_td", "ac_mc", "reinforce"):
        assert name in text, (name, text[:2000])
