"""User environments in suites: gym.make kwargs, Gymnasium's module:EnvId form, and stated traits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.envs import env_key, get_spec, make_env, parse_env_key
from bench.suites.suite import SuiteError, load_suite

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "bench_example_plugin"
CORRIDOR = "bench_example_plugin.corridor:bench_example/Corridor-v0"


# -- the key --------------------------------------------------------------------------------
def test_a_key_is_the_id_alone_without_kwargs_and_sorted_json_with_them():
    assert env_key("CartPole-v1", {}) == env_key("CartPole-v1") == "CartPole-v1"
    a = env_key("LunarLander-v3", {"enable_wind": True, "continuous": True})
    assert a == "LunarLander-v3[continuous=true,enable_wind=true]"
    assert a == env_key("LunarLander-v3", {"continuous": True, "enable_wind": True})
    assert parse_env_key(a) == (None, "LunarLander-v3", {"continuous": True, "enable_wind": True})
    assert parse_env_key("CartPole-v1") == (None, "CartPole-v1", {})
    assert parse_env_key("pkg.mod:ns/Env-v0[n=3]") == ("pkg.mod", "ns/Env-v0", {"n": 3})
    for bad in ({"not an identifier": 1}, {"x": float("nan")}, {"x": object()}):
        with pytest.raises(ValueError):
            env_key("CartPole-v1", bad)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), json_values, max_size=4))
def test_any_json_kwargs_round_trip_through_the_key(kwargs):
    # Strings with commas, brackets and '=' inside values must not confuse the parser.
    key = env_key("Some-v0", kwargs)
    assert parse_env_key(key) == (None, "Some-v0", kwargs)
    assert env_key("Some-v0", parse_env_key(key)[2]) == key


def test_kwargs_reach_gym_make_and_the_inferred_traits():
    env = make_env("LunarLander-v3[continuous=true]")
    try:
        assert env.action_space.shape == (2,)  # the continuous variant, built from the discrete id
    finally:
        env.close()
    s = get_spec("LunarLander-v3[continuous=true]")
    assert (s.action, s.family, s.threshold) == ("continuous", "box2d", 200.0)
    assert get_spec("LunarLander-v3").action == "discrete"
    assert get_spec("CartPole-v1[max_episode_steps=50]").horizon == 50


# -- suites ---------------------------------------------------------------------------------
def _suite(tmp_path: Path, envs: str, name: str = "kw") -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text(f"name: {name}\nseeds: 1\ndefaults: {{timesteps: 2048, window: 5}}\nenvs:\n{envs}"
                 "algorithms:\n  - {algo: ppo, impl: bench, hyperparams: {n_envs: 2, n_steps: 64, batch_size: 64}}\n")
    return f


def test_kwargs_and_traits_change_the_cell_key_and_the_profile(tmp_path):
    loaded = load_suite(_suite(tmp_path, "  - id: LunarLander-v3\n"
                                         "  - id: LunarLander-v3\n    kwargs: {continuous: true}\n"
                                         "  - id: CartPole-v1\n"
                                         "  - id: CartPole-v1\n    kwargs: {max_episode_steps: 200}\n    threshold: 190\n"
                                         "    traits: {reward: sparse, horizon: 200}\n"))
    keys = {c.env_id: c.key for c in loaded.cells}
    assert set(keys) == {"LunarLander-v3", "LunarLander-v3[continuous=true]", "CartPole-v1",
                         "CartPole-v1[max_episode_steps=200]"}
    assert len(set(keys.values())) == 4  # four distinct cells
    m = loaded.env_meta
    assert (m["LunarLander-v3"]["action"], m["LunarLander-v3[continuous=true]"]["action"]) == ("discrete", "continuous")
    # The continuous variant gets continuous control's default normalisation, as LunarLanderContinuous would.
    by_env = {c.env_id: c.hyperparams for c in loaded.cells}
    assert by_env["LunarLander-v3[continuous=true]"]["normalize"] and not by_env["LunarLander-v3"]["normalize"]
    sparse = m["CartPole-v1[max_episode_steps=200]"]
    assert (sparse["reward"], sparse["horizon"], sparse["traits_declared"]) == ("sparse", 200, ["horizon", "reward"])
    assert m["CartPole-v1"]["reward"] == "dense" and "traits_declared" not in m["CartPole-v1"]
    # Without kwargs the key is what it always was: adding the option changed no existing cell.
    plain = load_suite(_suite(tmp_path, "  - id: CartPole-v1\n", name="plain"))
    assert plain.cells[0].env_id == "CartPole-v1"


def test_env_hyperparams_by_id_apply_to_every_variant_and_by_key_to_one(tmp_path):
    f = tmp_path / "hp.yaml"
    f.write_text("name: hp\nseeds: 1\ndefaults: {timesteps: 4096}\nenvs:\n  - id: CartPole-v1\n"
                 "  - id: CartPole-v1\n    kwargs: {max_episode_steps: 100}\n    threshold: 95\n"
                 "algorithms:\n  - algo: ppo\n    impl: bench\n    hyperparams: {n_envs: 2, n_steps: 64, batch_size: 64}\n"
                 "    env_hyperparams:\n      CartPole-v1: {learning_rate: 0.001}\n"
                 "      'CartPole-v1[max_episode_steps=100]': {learning_rate: 0.002}\n")
    lr = {c.env_id: c.hyperparams["learning_rate"] for c in load_suite(f).cells}
    assert lr == {"CartPole-v1": 0.001, "CartPole-v1[max_episode_steps=100]": 0.002}


@pytest.mark.parametrize("envs, path, words", [
    ("  - id: CartPole-v1\n    traits: {action: continuous}\n", "envs[0].traits.action",
     "CartPole-v1 has a Discrete action space; allowed: discrete"),
    ("  - id: Pendulum-v1\n    traits: {action: discrete}\n", "envs[0].traits.action", "Box action space; allowed: continuous"),
    ("  - id: CartPole-v1\n    traits: {obs: pixels}\n", "envs[0].traits.obs", "pixels needs an image"),
    ("  - id: CartPole-v1\n    traits: {horizon: 100}\n", "envs[0].traits.horizon", "truncated at 500 steps"),
    ("  - id: CartPole-v1\n    traits: {reward: very}\n", "envs[0].traits.reward", "'dense' or 'sparse'"),
    ("  - id: CartPole-v1\n    kwargs: {no_such_arg: 3}\n", "envs[0].kwargs", "unexpected keyword argument 'no_such_arg'"),
    ("  - id: CartPole-v1\n    kwargs: {'bad name': 3}\n", "envs[0].kwargs", "is not an identifier"),
    ("  - id: CartPole-v1\n    kwargs: {x: .nan}\n", "envs[0].kwargs.x", "not a finite number"),
    ("  - id: CartPole-v1\n    kwargs: {x: 2024-01-01}\n", "envs[0].kwargs", "is not a JSON value"),
    ("  - id: CartPole-v1\n    kwargs: {pad: " + "'" + "x" * 200 + "'}\n", "envs[0].kwargs", "allowed: at most 128"),
    ("  - id: 'CartPole-v1[x=1]'\n", "envs[0].id", "brackets are not allowed"),
    ("  - id: no_such_module_xyz:Foo-v0\n", "envs[0].id", "cannot import module 'no_such_module_xyz'"),
    ("  - id: CartPole-v1\n  - id: CartPole-v1\n", "envs[1].id", "listed twice"),
])
def test_bad_kwargs_and_contradicting_traits_get_one_line_each(tmp_path, envs, path, words):
    with pytest.raises(SuiteError) as e:
        load_suite(_suite(tmp_path, envs))
    lines = str(e.value).splitlines()
    hit = [ln for ln in lines if f": {path}:" in ln]
    assert len(hit) == 1 and words in hit[0], lines


def test_a_user_env_by_module_and_kwargs_runs_and_reports(tmp_path, monkeypatch):
    # module:EnvId imports the user's module (it registers the env), in the validating process and
    # in the run's own worker process; the kwargs reach its constructor; reward: sparse is stated.
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE)}
    f = tmp_path / "user.yaml"
    f.write_text(f"name: user\nseeds: 2\ndefaults: {{timesteps: 3000, window: 5}}\nenvs:\n"
                 f"  - id: '{CORRIDOR}'\n    kwargs: {{length: 6}}\n    threshold: 0.5\n    traits: {{reward: sparse}}\n"
                 "algorithms:\n  - {algo: ppo, impl: bench, hyperparams: {n_envs: 2, n_steps: 64, batch_size: 64}}\n")
    url = f"sqlite:///{tmp_path / 's.db'}"

    def bench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=tmp_path,
                              env=env, timeout=600)

    p = bench("run", str(f), "--store", url, "--workers", "1")
    assert p.returncode == 0, p.stderr + p.stdout
    # The readers in this process (a subprocess each would pay Python's and torch's start-up).
    from typer.testing import CliRunner

    from bench.cli import app

    monkeypatch.syspath_prepend(str(EXAMPLE))  # status checks the suite, which imports the user's module
    p = CliRunner().invoke(app, ["status", str(f), "--store", url])
    assert "done: 2" in p.stdout, p.stdout
    p = CliRunner().invoke(app, ["export", "--store", url, "--format", "json", "--out", str(tmp_path / "runs.json")])
    runs = json.loads((tmp_path / "runs.json").read_text())
    assert [r["env"] for r in runs] == [f"{CORRIDOR}[length=6]"] * 2, p.stderr
    p = CliRunner().invoke(app, ["recommend", "--store", url, "--reward", "sparse", "--verbose"])
    assert p.exit_code == 0 and "discrete vector sparse" in p.stdout, p.stderr + p.stdout
    # The same env without the module on the path: one line, exit 2, nothing written.
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-m", "bench", "run", str(f), "--store", f"sqlite:///{tmp_path / 'n.db'}"],
                       capture_output=True, text=True, cwd=tmp_path, env=bare, timeout=600)
    assert p.returncode == 2 and "cannot import module 'bench_example_plugin.corridor'" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "n.db").exists()
