"""Env stepping (``vec_env``): every mode records what ``sync`` records, or differs where documented.

Where the modes differ from ``sync`` (docs/suites.md, "Env stepping"):
- ``async``: nowhere (same envs, same seeds, same autoreset; only in subprocesses).
- ``vector`` (CartPole): one generator draws every sub-env's start state, so start
  states (hence episodes) differ for the same seed; from the same state the dynamics,
  rewards, termination and truncation agree (to float rounding).
- ``envpool``: envpool's own implementation and seeding, so episodes differ; the
  protocol (same-step reset, final observations, truncation) is the same.
"""

from __future__ import annotations

import json
import sqlite3
import typing

import numpy as np
import pytest
from typer.testing import CliRunner

from bench.algos.hyperparams import PPOParams, resolve
from bench.algos.sb3 import sb3_vec_env
from bench.cli import app
from bench.envs import VEC_ENV_MODES, env_key, make_vec_env, vec_env_problem
from bench.envs import vector as vector_mod
from bench.suites import suite as suite_mod
from bench.suites.suite import load_suite

ENVPOOL = vector_mod.envpool_installed()
SHORT_CARTPOLE = env_key("CartPole-v1", {"max_episode_steps": 20})  # truncates often under balancing actions


class Tape:
    """A recorder that keeps (step count, return, length) of every episode."""

    def __init__(self) -> None:
        self.steps = 0
        self.eps: list[tuple[int, float, int]] = []

    def episode(self, ret: float, length: int) -> None:
        self.eps.append((self.steps, ret, length))


def actions_for(env_id: str, n_envs: int, t: int) -> np.ndarray:
    """A fixed action sequence: CartPole alternates pushes (keeps the pole up for a while), Pendulum a sine torque."""
    if "Pendulum" in env_id:
        return np.full((n_envs, 1), 2.0 * np.sin(0.1 * t), np.float32)
    return np.array([(t + i) % 2 for i in range(n_envs)], np.int64)


def play(env_id: str, mode: str, *, n_envs: int = 3, steps: int = 450, seed: int = 7):
    """Step ``steps`` times; returns the tape and the per-step (obs, reward, terminated, truncated, final_obs)."""
    tape = Tape()
    venv = make_vec_env(env_id, n_envs, recorder=tape, vec_env=mode)
    trace = []
    try:
        obs, _ = venv.reset(seed=seed)
        trace.append(obs)
        for t in range(steps):
            obs, r, te, tr, info = venv.step(actions_for(env_id, n_envs, t))
            done = te | tr
            final = [info["final_obs"][i] for i in np.flatnonzero(done)] if done.any() else []
            if done.any():
                assert np.array_equal(info["_final_obs"], done)
            trace.append((obs, r, te, tr, final))
    finally:
        venv.close()
    return tape, trace


def test_modes_are_the_same_everywhere():
    assert tuple(typing.get_args(PPOParams.model_fields["vec_env"].annotation)) == VEC_ENV_MODES
    assert tuple(typing.get_args(suite_mod.VecEnvMode)) == VEC_ENV_MODES


@pytest.mark.parametrize("env_id", ["CartPole-v1", SHORT_CARTPOLE, "Pendulum-v1"])
def test_async_records_exactly_what_sync_records(env_id):
    sync_tape, sync_trace = play(env_id, "sync")
    async_tape, async_trace = play(env_id, "async")
    assert sync_tape.eps and sync_tape.eps == async_tape.eps and sync_tape.steps == async_tape.steps
    np.testing.assert_array_equal(sync_trace[0], async_trace[0])
    for (o1, r1, te1, tr1, f1), (o2, r2, te2, tr2, f2) in zip(sync_trace[1:], async_trace[1:]):
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(te1, te2)
        np.testing.assert_array_equal(tr1, tr2)
        assert all(np.array_equal(a, b) for a, b in zip(f1, f2, strict=True))


def test_pendulum_truncates_in_every_mode_it_has():
    tape, trace = play("Pendulum-v1", "async")
    assert [length for _, _, length in tape.eps] == [200] * 6
    assert sum(tr.sum() for _, _, _, tr, _ in trace[1:]) == 6
    assert not any(te.any() for _, _, te, _, _ in trace[1:])


def test_vector_cartpole_start_states_differ_from_sync_for_the_same_seed():
    _, sync_trace = play("CartPole-v1", "sync", steps=0)
    _, vec_trace = play("CartPole-v1", "vector", steps=0)
    assert not np.allclose(sync_trace[0], vec_trace[0])  # one generator for all sub-envs (documented)
    assert np.all(np.abs(vec_trace[0]) <= 0.05)


@pytest.mark.parametrize("env_id", ["CartPole-v1", SHORT_CARTPOLE])
def test_vector_cartpole_from_the_same_states_steps_like_sync(env_id):
    """Start the vectorised CartPole in sync's start states: every sub-env's first episode is sync's."""
    n = 3
    sync_tape, vec_tape = Tape(), Tape()
    sync = make_vec_env(env_id, n, recorder=sync_tape)
    vec = make_vec_env(env_id, n, recorder=vec_tape, vec_env="vector")
    so, _ = sync.reset(seed=3)
    vec.reset(seed=3)
    vec.unwrapped.state = np.stack([np.asarray(e.unwrapped.state, np.float64) for e in sync.envs], axis=1)
    first_done = np.full(n, False)
    first_at: list[int] = []  # recorder step counts of each sub-env's first episode end
    for t in range(600):
        a = actions_for(env_id, n, t)
        o1, r1, te1, tr1, i1 = sync.step(a)
        o2, r2, te2, tr2, i2 = vec.step(a)
        live = ~first_done
        np.testing.assert_allclose(r1[live], r2[live])
        np.testing.assert_array_equal(te1[live], te2[live])
        np.testing.assert_array_equal(tr1[live], tr2[live])
        ended = live & (te1 | tr1)
        for i in np.flatnonzero(ended):
            np.testing.assert_allclose(i1["final_obs"][i], i2["final_obs"][i], atol=1e-5)
        np.testing.assert_allclose(o1[live & ~ended], o2[live & ~ended], atol=1e-5)
        first_at += [t * n + int(i) + 1 for i in np.flatnonzero(ended)]
        first_done |= ended
        if first_done.all():
            break
    assert first_done.all()
    # The first episode of each sub-env is recorded alike, at the same step count.
    firsts = lambda eps: [e for e in eps if e[0] in first_at]  # noqa: E731
    assert len(firsts(sync_tape.eps)) == n and firsts(sync_tape.eps) == firsts(vec_tape.eps)
    if env_id == SHORT_CARTPOLE:
        assert any(length == 20 for _, _, length in sync_tape.eps)  # truncated at the kwargs' limit
    sync.close()
    vec.close()


@pytest.mark.skipif(not ENVPOOL, reason="envpool is not installed")
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_envpool_keeps_the_same_step_protocol(env_id):
    tape, trace = play(env_id, "envpool", steps=450)
    assert tape.steps == 3 * 450
    lengths = [length for _, _, length in tape.eps]
    assert lengths and all(length >= 1 for length in lengths)
    for obs, _, te, tr, final in trace[1:]:
        done = te | tr
        assert len(final) == int(done.sum())
        if "CartPole" in env_id and done.any():
            assert np.all(np.abs(obs[done]) <= 0.05)  # reset in the same step: a fresh start state
    if env_id == "Pendulum-v1":
        assert lengths == [200] * 6  # truncated at Pendulum's 200 steps, as Gymnasium's


def _sb3_play(env_id: str, mode: str, *, n_envs: int = 3, steps: int = 300, seed: int = 5):
    tape = Tape()
    venv = sb3_vec_env(env_id, n_envs, recorder=tape, vec_env=mode)
    venv.seed(seed)
    venv.reset()
    terminal = []
    try:
        for t in range(steps):
            venv.step_async(actions_for(env_id, n_envs, t))
            _, _, dones, infos = venv.step_wait()
            for i in np.flatnonzero(dones):
                terminal.append((t, int(i), np.asarray(infos[i]["terminal_observation"]),
                                 infos[i]["TimeLimit.truncated"]))
    finally:
        venv.close()
    return tape, terminal


def _own_play(env_id: str, mode: str, *, n_envs: int = 3, steps: int = 300, seed: int = 5):
    tape = Tape()
    venv = make_vec_env(env_id, n_envs, recorder=tape, vec_env=mode)
    venv.reset(seed=seed)
    terminal = []
    try:
        for t in range(steps):
            _, _, te, tr, info = venv.step(actions_for(env_id, n_envs, t))
            for i in np.flatnonzero(te | tr):
                terminal.append((t, int(i), np.asarray(info["final_obs"][i]), bool(tr[i] and not te[i])))
    finally:
        venv.close()
    return tape, terminal


@pytest.mark.parametrize("mode", ["sync", "async", "vector"] + (["envpool"] if ENVPOOL else []))
def test_sb3_through_the_adapter_records_what_own_stepping_records(mode):
    # envpool takes no gym.make kwargs: its CartPole-v1, whose 500-step limit these actions do not reach.
    env_id, steps = (SHORT_CARTPOLE, 300) if mode != "envpool" else ("CartPole-v1", 600)
    own_tape, own_end = _own_play(env_id, mode, steps=steps)
    sb3_tape, sb3_end = _sb3_play(env_id, mode, steps=steps)
    assert own_tape.eps and own_tape.eps == sb3_tape.eps and own_tape.steps == sb3_tape.steps
    assert len(own_end) == len(sb3_end)
    for (t1, i1, o1, trunc1), (t2, i2, o2, trunc2) in zip(own_end, sb3_end):
        assert (t1, i1, trunc1) == (t2, i2, trunc2)
        np.testing.assert_array_equal(o1, o2)
    if mode != "envpool":  # (envpool's truncation: test_envpool_keeps_the_same_step_protocol, on Pendulum)
        assert any(trunc for *_, trunc in own_end), "the time limit should truncate some episodes"


def test_vector_param_reaches_both_implementations():
    p = resolve("ppo", "CartPole-v1", {"vec_env": "vector"})
    assert p.vec_env == "vector"
    assert resolve("ppo", "CartPole-v1").vec_env == "sync"


# -- suites ---------------------------------------------------------------------------------------
SUITE = """\
name: t
seeds: [0]
defaults: {timesteps: 256, window: 5}
envs:
  - id: CartPole-v1
algorithms:
  - algo: ppo
    impl: bench
    hyperparams: {n_envs: 2, n_steps: 64, batch_size: 64, n_epochs: 1}
  - algo: ppo
    impl: sb3
    hyperparams: {n_envs: 2, n_steps: 64, batch_size: 64, n_epochs: 1}
"""


# The one-line refusals of bad vec_env values are in tests/test_suite_validation.py (BAD).


def test_sync_keeps_keys_and_other_modes_change_them(tmp_path):
    def keys(text: str) -> list[str]:
        f = tmp_path / "s.yaml"
        f.write_text(text)
        return [c.key for c in load_suite(f).cells]

    plain = keys(SUITE)
    assert keys(SUITE.replace("window: 5}", "window: 5, vec_env: sync}")) == plain
    assert keys(SUITE.replace("  - id: CartPole-v1\n", "  - id: CartPole-v1\n    vec_env: sync\n")) == plain
    vec = keys(SUITE.replace("window: 5}", "window: 5, vec_env: vector}"))
    assert not set(vec) & set(plain)
    f = tmp_path / "s.yaml"
    f.write_text(SUITE.replace("window: 5}", "window: 5, vec_env: vector}"))
    assert all(c.hyperparams["vec_env"] == "vector" for c in load_suite(f).cells)


def test_vec_env_problem_names_allowed_values():
    assert vec_env_problem("CartPole-v1", "vector") is None
    assert "allowed: sync, async, vector, envpool" in vec_env_problem("CartPole-v1", "warp")
    assert "allowed here: sync, async" in vec_env_problem("Acrobot-v1", "vector")


def test_bench_run_vector_smoke_own_and_sb3(tmp_path):
    """One own PPO and one SB3 PPO cell with vec_env: vector through `bench run`, tiny budget."""
    f = tmp_path / "vec.yaml"
    f.write_text(SUITE.replace("window: 5}", "window: 5, vec_env: vector}"))
    db = tmp_path / "r.db"
    res = CliRunner().invoke(app, ["run", str(f), "--store", f"sqlite:///{db}", "--workers", "1"])
    assert res.exit_code == 0, res.output + res.stderr
    rows = sqlite3.connect(db).execute("select status, meta from runs").fetchall()
    assert len(rows) == 2 and all(status == "done" for status, _ in rows), rows
    assert all(json.loads(meta)["vec_env"] == "vector" for _, meta in rows)


def test_speed_refuses_a_bad_vec_env():
    res = CliRunner().invoke(app, ["speed", "--env", "Pendulum-v1", "--vec-env", "vector"])
    assert res.exit_code == 2
    assert "--vec-env" in res.stderr and "no vector entry point" in res.stderr and "Traceback" not in res.stderr


def test_tune_steps_envs_as_the_suite_says(tmp_path):
    from bench.tune.targets import targets_from_suite

    f = tmp_path / "t.yaml"
    f.write_text(SUITE.replace("window: 5}", "window: 5, vec_env: vector}") + "tune:\n  trials: 1\n  default_space: true\n")
    (own, sb3) = targets_from_suite(load_suite(f))
    assert own.fixed["vec_env"] == sb3.fixed["vec_env"] == "vector" and own.params(own.fixed).vec_env == "vector"
    f.write_text(SUITE + "tune:\n  trials: 1\n  default_space: true\n")
    assert all("vec_env" not in t.fixed for t in targets_from_suite(load_suite(f)))  # sync: identities unchanged


def test_report_states_the_stepping_of_each_label():
    import pandas as pd

    from bench.analysis.report import _stepping
    from bench.analysis.scoring import hardware_of

    done = pd.DataFrame({"label": ["ppo-bench", "ppo-sb3", "old"], "meta": [
        {"vec_env": "envpool", "vec_env_note": "envpool 1.2.5 steps its own C++ implementation"},
        {"vec_env": "envpool", "vec_env_note": "envpool 1.2.5 steps its own C++ implementation"},
        {},  # a run from before the option: sync
    ]})
    assert _stepping(done) == ["envpool: ppo-bench, ppo-sb3", "sync: old",
                               "note: envpool 1.2.5 steps its own C++ implementation"]
    meta = {"cpu_model": "EPYC", "torch_threads": 1}
    assert hardware_of(meta) == hardware_of({**meta, "vec_env": "sync"}) == "EPYC · 1 torch thread(s)"
    assert hardware_of({**meta, "vec_env": "vector"}) == "EPYC · 1 torch thread(s) · vector env stepping"
