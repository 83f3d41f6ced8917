"""Saved policies (suite ``save: final | best``), ``bench eval`` and ``bench.api.load_policy``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.run.runner import record_cell, run_cell
from bench.storage.owners import this_owner
from bench.storage.store import Store
from bench.suites.suite import Outputs, SuiteError, load_suite
from bench.storage.urls import StoreURL

SUITE = """\
name: saved
seeds: 1
defaults: {{timesteps: 2048, save: {save}, eval: {{every: 1024, episodes: 2}}}}
envs:
  - id: CartPole-v1
algorithms:
  - {{algo: ppo, impl: bench}}
  - {{algo: ppo, impl: sb3}}
"""


def _suite(tmp_path: Path, save: str = "best", name: str = "s.yaml") -> Path:
    f = tmp_path / name
    f.write_text(SUITE.format(save=save))
    return f


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A store with one own PPO run and one SB3 PPO run on CartPole-v1 that kept their best and final policies."""
    tmp = tmp_path_factory.mktemp("saved")
    url = f"sqlite:///{tmp}/results/bench.db"
    r = CliRunner().invoke(app, ["run", str(_suite(tmp)), "--store", url, "--workers", "1"])
    assert r.exit_code == 0, r.output + r.stderr
    return tmp, url


def test_save_is_not_part_of_the_key_and_reaches_each_cell(tmp_path):
    """Saving changes nothing a run computes, so a suite's keys are the same with it on or off."""
    keys = {}
    for save in ("none", "final", "best"):
        loaded = load_suite(_suite(tmp_path, save, f"{save}.yaml"))
        keys[save] = [c.key for c in loaded.cells]
        assert {c.save for c in loaded.cells} == {save}
        assert all("save" not in c.identity() and "outputs" not in c.identity() for c in loaded.cells)
    assert keys["none"] == keys["final"] == keys["best"]
    # Per label, over the suite's default.
    f = tmp_path / "per-label.yaml"
    f.write_text(SUITE.format(save="none").replace("{algo: ppo, impl: sb3}", "{algo: ppo, impl: sb3, save: final}"))
    assert [c.save for c in load_suite(f).cells] == ["none", "final"]


@pytest.mark.parametrize("edit, path, words", [
    (lambda s: s.replace(", eval: {every: 1024, episodes: 2}", ""), "defaults.save",
     "best keeps the policy at the best periodic evaluation"),
    (lambda s: s.replace("save: best", "save: always"), "defaults.save", "input should be 'none', 'final' or 'best'"),
    (lambda s: s.replace("envs:\n  - id: CartPole-v1", "envs:\n  - {id: bench/Sort-v0, threshold: 0.9}").replace(
        "{algo: ppo, impl: bench}", "{algo: ppo, impl: bench, save: final, hyperparams: {policy: sequence}}").replace(
        "  - {algo: ppo, impl: sb3}\n", ""), "algorithms[0].save", "a sequence policy"),
])
def test_a_save_that_cannot_be_kept_is_one_line(tmp_path, edit, path, words):
    f = tmp_path / "bad.yaml"
    f.write_text(edit(SUITE.format(save="best")))
    with pytest.raises(SuiteError) as e:
        load_suite(f)
    assert any(f": {path}:" in line and words in line for line in e.value.lines), e.value.lines


def test_eval_films_own_and_sb3_ppo(saved, tmp_path):
    """Done-when of issue 43: `bench eval RUN --episodes 5 --video out.mp4` writes a playable MP4, for own and SB3 PPO."""
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="onpolicy-bench[video] (imageio-ffmpeg) is not installed")
    from bench.api import evaluate, load_policy

    home, url = saved
    for label in ("ppo-bench", "ppo-sb3"):
        video = tmp_path / f"{label}.mp4"
        r = CliRunner().invoke(app, ["eval", f"label={label}", "--store", url, "--episodes", "5", "--video", str(video)])
        assert r.exit_code == 0, r.output + r.stderr
        assert f"{label} on CartPole-v1" in r.stdout and "over 5 episode(s)" in r.stdout
        # CartPole pays 1 per step, so the returns count the steps; a frame follows each reset and each step.
        returns = evaluate(load_policy(f"label={label}", url), 5).returns
        frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(video))
        assert frames == int(sum(returns)) + 5
        assert f"{frames} frames" in r.stdout
        assert seconds == pytest.approx(frames / 50, abs=0.1)  # CartPole's render_fps


def test_best_is_the_policy_of_the_best_evaluation_and_replays_it(saved):
    from bench.api import evaluate, load_policy

    home, url = saved
    db = Store(url, readonly=True)
    for label in ("ppo-bench", "ppo-sb3"):
        pi = load_policy(f"label={label}", url)
        assert pi.kind == "best"
        evals = db.evaluations_of(pi.key)
        assert len(evals) == 2  # every 1,024 of 2,048 steps
        best = evals.loc[evals["mean_return"].idxmax()]  # the first of equal means, as the recorder keeps it
        assert pi.eval_return == best["mean_return"] and pi.step == best["step"]
        # Its default seed is the run's evaluation seed: the same episodes, the same returns.
        assert evaluate(pi, 2).mean == pytest.approx(best["mean_return"])
        final = load_policy(pi.key[:8], url, kind="final")
        assert final.kind == "final" and final.step == db.rows([pi.key])[pi.key].total_steps


def test_load_policy_acts_on_one_observation_or_a_batch(saved):
    import gymnasium as gym

    from bench.api import load_policy

    home, url = saved
    pi = load_policy("label=ppo-sb3", url)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=3)
    a = pi.act(obs)
    assert np.ndim(a) == 0 and env.action_space.contains(int(a))
    batch = pi.act(np.stack([obs, obs, obs]))
    assert batch.shape == (3,) and (batch == a).all()


def test_the_run_records_where_its_policies_are_and_packs_leave_them_out(saved, tmp_path):
    home, url = saved
    runs = Store(url, readonly=True).runs_frame()
    for key, meta in zip(runs["key"], runs["meta"]):
        info = json.loads(meta)["policies"]
        folder = Path(info["dir"])
        assert folder == (home / "results" / "bench.policies" / key).resolve()
        assert set(info["kept"]) == {"best", "final"}
        assert sorted(p.name for p in folder.iterdir()) == sorted(f for k in info["kept"].values() for f in k["files"])
    out = tmp_path / "pack"
    r = CliRunner().invoke(app, ["export", "--store", url, "--suite", "saved", "--format", "pack", "--out", str(out)])
    assert r.exit_code == 0, r.output + r.stderr
    packed = pd.read_parquet(out / "runs.parquet")
    assert len(packed) == 2 and not any("policies" in json.loads(m) for m in packed["meta"])
    assert not [p for p in out.rglob("*") if p.suffix in (".pt", ".zip", ".npz", ".pkl")]


def test_eval_refuses_in_one_line(saved, tmp_path, monkeypatch):
    home, url = saved
    cases = [
        (["eval", "label=ppo", "--store", url], "matches none of the 2 runs"),
        (["eval", "env=CartPole-v1", "--store", url], "matches 2 runs with saved policies"),
        (["eval", "xyz", "--store", url], "neither a run key"),
        (["eval", "label=ppo-sb3", "--store", url, "--kind", "worst"], "--kind: 'worst' is not allowed"),
        (["eval", "label=ppo-sb3", "--store", f"sqlite:///{tmp_path}/none.db"], "does not exist"),
        (["eval", "label=ppo-sb3", "--store", url, "--video", str(tmp_path / "v.avi")], "not an .mp4 file"),
    ]
    for args, words in cases:
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "imageio_ffmpeg" else real(name, *a))
    r = CliRunner().invoke(app, ["eval", "label=ppo-sb3", "--store", url, "--video", str(tmp_path / "v.mp4")])
    assert r.exit_code == 2 and "pip install 'onpolicy-bench[video]'" in r.stderr and not (tmp_path / "v.mp4").exists()


def test_a_run_without_save_has_no_policy_to_load(tmp_path):
    url = f"sqlite:///{tmp_path}/b.db"
    loaded = load_suite(_suite(tmp_path, "none"))
    cell = loaded.cells[0]
    Store(url).register("saved", "s.yaml", {}, loaded.env_meta, [cell])
    assert run_cell(StoreURL.parse(url), cell, this_owner()).status == "done"
    assert not (tmp_path / "b.policies").exists()
    r = CliRunner().invoke(app, ["eval", cell.key, "--store", url])
    assert r.exit_code == 2 and "none with a saved policy" in r.stderr


ALGOS = """\
name: every-algo
seeds: [0]
defaults: {{timesteps: {t}, save: final, eval: {{every: {t}, episodes: 2}}}}
envs:
  - id: {env}
algorithms:
"""


@pytest.mark.parametrize("algo, impl, env, t, extra", [
    # A3C's parent applies its workers' updates as they come: ones that arrive after the evaluation at the
    # budget move the final policy on, so only its loading and acting are checked (exact=False below).
    ("a3c", "bench", "CartPole-v1", 600, {"n_workers": 2}),
    ("reinforce", "bench", "CartPole-v1", 600, {}),
    ("ac_mc", "bench", "CartPole-v1", 600, {}),
    ("ac_td", "bench", "CartPole-v1", 300, {}),
    ("a2c", "bench", "CartPole-v1", 600, {}),
    ("npg", "bench", "CartPole-v1", 1024, {"n_steps": 512}),
    ("trpo", "bench", "CartPole-v1", 1024, {}),
    ("grpo", "bench", "CartPole-v1", 600, {}),
    ("rloo", "bench", "CartPole-v1", 600, {}),
    ("reinforce", "numpy", "CartPole-v1", 600, {}),
    ("a2c", "sb3", "CartPole-v1", 600, {}),
    ("trpo", "sb3", "CartPole-v1", 1024, {}),
    # Continuous actions and observation statistics, own and SB3.
    ("ppo", "bench", "Pendulum-v1", 1024, {"normalize": True, "n_envs": 2, "n_steps": 256, "batch_size": 64}),
    ("ppo", "sb3", "Pendulum-v1", 1024, {"normalize": True, "n_envs": 2, "n_steps": 256, "batch_size": 64}),
])
def test_every_implementation_saves_a_policy_that_acts_as_the_trained_one(tmp_path, algo, impl, env, t, extra):
    """The final policy, loaded back, plays the run's last evaluation episodes to the same returns (the last
    update is the one at or past the budget, where the evaluation is due)."""
    from bench.api import evaluate, load_policy

    f = tmp_path / "s.yaml"
    f.write_text(ALGOS.format(t=t, env=env) + f"  - {{algo: {algo}, impl: {impl}, hyperparams: {json.dumps(extra)}}}\n")
    loaded = load_suite(f)
    url = f"sqlite:///{tmp_path}/b.db"
    cell = loaded.cells[0]
    Store(url).register("every-algo", str(f), {}, loaded.env_meta, [cell])
    out = run_cell(StoreURL.parse(url), cell, this_owner())
    assert out.status == "done", out.error
    last = Store(url, readonly=True).evaluations_of(cell.key).iloc[-1]
    pi = load_policy(cell.key, url)
    assert pi.kind == "final"
    if algo == "a3c":
        assert np.isfinite(evaluate(pi, 2).mean)
        return
    assert pi.step == last["step"]
    assert evaluate(pi, 2).mean == pytest.approx(last["mean_return"], rel=1e-6)


@pytest.mark.parametrize("impl", ["bench", "sb3"])
def test_saving_and_mirroring_leave_a_seeds_returns_unchanged(tmp_path, impl):
    pytest.importorskip("tensorboard", reason="onpolicy-bench[tensorboard] is not installed")
    cell = next(c for c in load_suite(_suite(tmp_path, "none")).cells if c.impl == impl)
    plain, e1 = record_cell(cell)
    busy = dataclasses.replace(cell, save="best", outputs=Outputs(tensorboard=str(tmp_path / "tb")))
    kept, e2 = record_cell(busy)
    kept.sink.close()
    assert e1 is None and e2 is None
    assert kept.best is not None and kept.final_checkpoint() is not None  # it did save
    assert list((tmp_path / "tb").rglob("events.out.tfevents.*"))  # and it did mirror
    assert plain.ep_return == kept.ep_return and plain.ep_step == kept.ep_step
    assert [e[:1] + e[2:] for e in plain.evals] == [e[:1] + e[2:] for e in kept.evals]  # wall clock aside


# --------------------------------------------------------------------------- #
# What bench trusts: saved files are data (docs/recorded.md#what-bench-trusts)
# --------------------------------------------------------------------------- #
class _Plant:
    """A pickle that, unpickled, creates the file ``path``: stands for any code a file can carry."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _torch_bytes(obj) -> bytes:
    import io

    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _old_zip(plant: _Plant) -> bytes:
    """SB3's zip layout (``save_util.save_to_zip_file``) with a cloudpickled object in its ``data`` entry, as SB3
    writes every attribute JSON cannot hold (``{":type:", ":serialized:"}``, base64 of the pickle)."""
    import base64
    import io
    import pickle
    import zipfile

    buf = io.BytesIO()
    data = {"policy_class": {":type:": "<class 'type'>", ":serialized:": base64.b64encode(pickle.dumps(plant)).decode()}}
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("data", json.dumps(data))
        z.writestr("_stable_baselines3_version", "2.9.0")
    return buf.getvalue()


def _plant_case(case: str, folder: Path, marker: Path) -> tuple[str, str]:
    """Tamper with the best policy in ``folder`` as ``case`` says; returns (the file the refusal must name, words)."""
    plant = _Plant(marker)
    manifest = json.loads((folder / "best.json").read_text())
    if case == "own .pt":
        (folder / "best.pt").write_bytes(_torch_bytes({"state_dict": plant, "share_features": True, "critic": True}))
        return "best.pt", "holds a pickle of objects other than tensors"
    if case == "own .pt, a bare pickle":
        import pickle

        (folder / "best.pt").write_bytes(pickle.dumps(plant))
        return "best.pt", "holds a pickle of objects other than tensors"
    if case == "sb3 weights":
        (folder / "best.sb3.pt").write_bytes(_torch_bytes({"mlp_extractor.policy_net.0.weight": plant}))
        return "best.sb3.pt", "holds a pickle of objects other than tensors"
    if case in ("sb3 normaliser", "sb3 normaliser, an object array"):
        import io
        import pickle

        buf = io.BytesIO()
        np.savez(buf, mean=np.array([plant], dtype=object), var=np.ones(4), count=1.0, clip_obs=10.0, epsilon=1e-8)
        (folder / "best.vecnormalize.npz").write_bytes(pickle.dumps(plant) if case == "sb3 normaliser" else buf.getvalue())
        manifest["files"]["vecnormalize.npz"] = "best.vecnormalize.npz"
        words = "holds pickled Python objects"
        name = "best.vecnormalize.npz"
    elif case == "sb3 spaces":
        meta = json.loads((folder / "best.sb3.json").read_text())
        (folder / "best.sb3.json").write_text(json.dumps({**meta, "policy": "builtins:open"}))
        return "best.sb3.json", "policy class 'builtins:open' is not one bench builds"
    elif case in ("old zip", "old vecnormalize.pkl"):
        import pickle

        (folder / "best.zip").write_bytes(_old_zip(plant))
        manifest.update(format="sb3", files={"zip": "best.zip"})
        name, words = "best.zip", "--trust"
        if case == "old vecnormalize.pkl":
            (folder / "best.vecnormalize.pkl").write_bytes(pickle.dumps(plant))
            manifest["files"]["vecnormalize.pkl"] = name = "best.vecnormalize.pkl"
    elif case == "manifest":
        (folder / "best.json").write_bytes(b"\x80\x04" + json.dumps(manifest).encode())
        return "best.json", "not JSON"
    elif case == "env module":
        (marker.parent / "plantmod.py").write_text(f"open({str(marker)!r}, 'w')\n")
        manifest["env_id"] = "plantmod:CartPole-v1"
        name, words = "best.json", "would import module 'plantmod'"
    (folder / "best.json").write_text(json.dumps(manifest))
    return name, words


@pytest.mark.parametrize("label, case", [
    ("ppo-bench", "own .pt"), ("ppo-bench", "own .pt, a bare pickle"), ("ppo-bench", "manifest"),
    ("ppo-bench", "env module"), ("ppo-sb3", "sb3 weights"), ("ppo-sb3", "sb3 normaliser"),
    ("ppo-sb3", "sb3 normaliser, an object array"), ("ppo-sb3", "sb3 spaces"), ("ppo-sb3", "old zip"),
    ("ppo-sb3", "old vecnormalize.pkl"),
])
def test_a_planted_file_is_refused_in_one_line_and_never_run(saved, tmp_path, monkeypatch, label, case):
    """A saved file that would run code when loaded (or is not bench's) is one line naming it, exit 2; the code
    in it never runs (the marker its pickle would create does not exist)."""
    import pickle
    import shutil
    import sys

    from bench.api import load_policy

    home, url = saved
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(_Plant(tmp_path / "control")))  # the plant is real: unpickling it runs its code
    assert (tmp_path / "control").exists()
    art = tmp_path / "policies"
    shutil.copytree(home / "results" / "bench.policies", art)
    folder = art / load_policy(f"label={label}", url).key
    monkeypatch.syspath_prepend(str(tmp_path))  # where the env module's file is, importable
    name, words = _plant_case(case, folder, marker)
    r = CliRunner().invoke(app, ["eval", f"label={label}", "--store", url, "--artifacts", str(art), "--episodes", "1"])
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, (r.exit_code, r.stderr, r.stdout)
    assert str(folder / name) in lines[0].split(": ")[0] and words in lines[0], lines[0]
    assert "internal error" not in lines[0] and not marker.exists() and "plantmod" not in sys.modules


def test_an_old_sb3_policy_loads_with_trust_and_acts_the_same(saved, tmp_path):
    """An SB3 policy in the layout bench wrote before (SB3's zip) is refused, naming --trust; with it, it goes
    through SB3's load and acts as the same weights saved as data."""
    import shutil

    import torch
    from stable_baselines3 import PPO

    from bench.algos.hyperparams import PARAMS
    from bench.api import evaluate, load_policy
    from bench.algos.sb3 import policy_kwargs

    home, url = saved
    pi = load_policy("label=ppo-sb3", url)
    art = tmp_path / "policies"
    shutil.copytree(home / "results" / "bench.policies", art)
    folder = art / pi.key
    manifest = json.loads((folder / "best.json").read_text())
    params = PARAMS["ppo"].model_validate(manifest["hyperparams"])
    model = PPO("MlpPolicy", "CartPole-v1", policy_kwargs=policy_kwargs(params, continuous=False), device="cpu")
    model.policy.load_state_dict(torch.load(folder / "best.sb3.pt", weights_only=True))
    model.save(folder / "best.zip")
    for f in ("best.sb3.pt", "best.sb3.json"):
        (folder / f).unlink()
    (folder / "best.json").write_text(json.dumps({**manifest, "format": "sb3", "files": {"zip": "best.zip"}}))
    args = ["eval", "label=ppo-sb3", "--store", url, "--artifacts", str(art), "--episodes", "2"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "best.zip" in r.stderr and "--trust" in r.stderr and "save: final or best" in r.stderr
    r = CliRunner().invoke(app, [*args, "--trust"])
    assert r.exit_code == 0, r.stderr
    old = load_policy("label=ppo-sb3", url, artifacts=str(art), trust=True)
    assert evaluate(old, 2).returns == evaluate(pi, 2).returns
