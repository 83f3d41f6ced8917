"""`bench run --tensorboard DIR` and `--wandb PROJECT`: the recorder's scalars, mirrored under SB3's tag names."""

from __future__ import annotations

import importlib.util

import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.run.loggers import SB3_TAGS, run_name, tag_of
from bench.storage.store import Store
from bench.suites.suite import load_suite

SUITE = """\
name: logged
seeds: 1
defaults: {timesteps: 2048, eval: {every: 1024, episodes: 2}}
envs:
  - id: CartPole-v1
algorithms:
  - {algo: ppo, impl: bench}
  - {algo: ppo, impl: sb3}
"""

#: Tags both implementations' PPO log (SB3's names), besides bench's own grad/norm.
PPO_TAGS = {"rollout/ep_rew_mean", "rollout/ep_len_mean", "time/fps", "train/policy_gradient_loss",
            "train/value_loss", "train/entropy_loss", "train/approx_kl", "train/clip_fraction",
            "train/explained_variance", "eval/mean_reward"}


def test_tags_follow_sb3_where_it_has_them():
    assert tag_of("loss/policy", 0.5) == ("train/policy_gradient_loss", 0.5)
    assert tag_of("policy/entropy", 0.7) == ("train/entropy_loss", -0.7)  # SB3 logs minus the entropy
    assert tag_of("grad/norm", 2.0) == ("grad/norm", 2.0)  # SB3 has none: bench's own name
    assert tag_of("train/learning_rate", 1e-3) == ("train/learning_rate", 1e-3)
    assert set(SB3_TAGS) == {"loss/policy", "loss/value", "loss/total", "policy/entropy", "policy/approx_kl",
                             "policy/clip_fraction", "value/explained_variance"}


def test_tensorboard_reads_the_scalars_of_a_two_run_suite(tmp_path):
    """Done-when of issue 43: `tensorboard --logdir` reads the scalars of a 2-run suite (its own reader here)."""
    pytest.importorskip("tensorboard", reason="onpolicy-bench[tensorboard] is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    f = tmp_path / "s.yaml"
    f.write_text(SUITE)
    url = f"sqlite:///{tmp_path}/b.db"
    r = CliRunner().invoke(app, ["run", str(f), "--store", url, "--workers", "2", "--tensorboard", str(tmp_path / "tb")])
    assert r.exit_code == 0, r.output + r.stderr
    # the run ends saying where its outputs are (no policies: the suite saves none)
    tail = r.stdout.splitlines()[-3:]
    assert tail == [f"store:       {url}", f"tensorboard: {tmp_path / 'tb'} (tensorboard --logdir {tmp_path / 'tb'})",
                    f"report:      bench report logged --store {url}"], r.stdout
    db = Store(url, readonly=True)
    rows = db.runs_frame("logged")
    assert sorted(p.relative_to(tmp_path / "tb").as_posix() for p in (tmp_path / "tb").glob("*/*/*")) == \
        ["ppo-bench/CartPole-v1/seed0", "ppo-sb3/CartPole-v1/seed0"]
    for row in rows.itertuples():
        ea = EventAccumulator(str(tmp_path / "tb" / row.label / "CartPole-v1" / "seed0"))
        ea.Reload()
        tags = set(ea.Tags()["scalars"])
        assert PPO_TAGS <= tags, PPO_TAGS - tags
        updates = row.total_steps // 256  # the zoo's CartPole PPO: 8 envs × 32 steps per update
        for tag in PPO_TAGS - {"eval/mean_reward"}:
            steps = [e.step for e in ea.Scalars(tag)]
            assert steps == [256 * (k + 1) for k in range(updates)], tag
        evals = db.evaluations_of(row.key)
        got = ea.Scalars("eval/mean_reward")
        assert [e.step for e in got] == list(evals["step"])
        assert [e.value for e in got] == pytest.approx(list(evals["mean_return"]))
        # The last trailing mean is the store's last 100 training episodes'.
        eps = db.episodes_of(row.key)
        assert ea.Scalars("rollout/ep_rew_mean")[-1].value == pytest.approx(eps["ret"].tail(100).mean())


def test_run_names_are_folders(tmp_path):
    import dataclasses

    f = tmp_path / "s.yaml"
    f.write_text(SUITE)
    cell = dataclasses.replace(load_suite(f).cells[0], label="a/b c", env_id="ALE/Pong-v5", seed=3)
    assert run_name(cell) == "a_b_c/ALE_Pong-v5/seed3"


@pytest.mark.parametrize("flag, value, package", [("--tensorboard", "tb", "tensorboard"), ("--wandb", "proj", "wandb")])
def test_a_missing_logger_package_is_one_line(tmp_path, monkeypatch, flag, value, package):
    f = tmp_path / "s.yaml"
    f.write_text(SUITE)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == package else real(name, *a))
    r = CliRunner().invoke(app, ["run", str(f), "--store", f"sqlite:///{tmp_path}/b.db", flag, value])
    assert r.exit_code == 2, r.output
    assert r.stderr.strip() == (f"{flag}: needs the {package} package, which is not installed; install it with "
                                f"pip install 'onpolicy-bench[{package}]', or pip install -e '.[{package}]' in a checkout")
    assert not (tmp_path / "b.db").exists()


def test_a_bad_wandb_project_is_one_line(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(SUITE)
    r = CliRunner().invoke(app, ["run", str(f), "--store", f"sqlite:///{tmp_path}/b.db", "--wandb", "me/proj"])
    if importlib.util.find_spec("wandb") is None:
        assert r.exit_code == 2 and "pip install 'onpolicy-bench[wandb]'" in r.stderr
    else:
        assert r.exit_code == 2 and "--wandb: 'me/proj' is not a W&B project name" in r.stderr


def test_wandb_offline_writes_one_run_per_cell(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="onpolicy-bench[wandb] is not installed")
    f = tmp_path / "s.yaml"
    f.write_text(SUITE.replace("timesteps: 2048", "timesteps: 512").replace("every: 1024", "every: 256"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    r = CliRunner().invoke(app, ["run", str(f), "--store", f"sqlite:///{tmp_path}/b.db", "--workers", "2",
                                 "--wandb", "bench-test", "--only", "impl=bench"])
    assert r.exit_code == 0, r.output + r.stderr
    runs = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1 and runs[0].stat().st_size > 0


def test_a_mirror_that_cannot_open_leaves_the_run_to_go_on(tmp_path, capsys):
    """A mirror is not the measurement: one that cannot start is a warning, and the run trains without it."""
    import dataclasses

    from bench.run.loggers import open_sinks
    from bench.suites.suite import Outputs

    pytest.importorskip("tensorboard", reason="onpolicy-bench[tensorboard] is not installed")
    f = tmp_path / "s.yaml"
    f.write_text(SUITE)
    (tmp_path / "file").write_text("not a folder")
    cell = dataclasses.replace(load_suite(f).cells[0], outputs=Outputs(tensorboard=str(tmp_path / "file")))
    assert open_sinks(cell) is None
    assert "warning: --tensorboard: not mirroring ppo-bench/CartPole-v1/seed0" in capsys.readouterr().err


def test_a_plans_outputs_name_the_policies_folder_when_its_cells_save(tmp_path):
    from bench import api

    f = tmp_path / "s.yaml"
    url = f"sqlite:///{tmp_path}/b.db"
    for save, has in (("none", False), ("final", True)):
        f.write_text(SUITE.replace("eval: {every: 1024, episodes: 2}", f"save: {save}"))
        plan = api.plan_run(f, url)
        where = plan.with_outputs(api.run_outputs(url)).outputs()
        assert ("policies" in where) is has and where["store"] == url
        assert where["report"] == f"bench report logged --store {url}" and "tensorboard" not in where
        if has:
            assert where["policies"] == str((tmp_path / "b.policies").resolve())
    default = api.plan_run(f, None).outputs()
    assert default["report"] == "bench report logged"  # the default store: no --store to type


@pytest.mark.parametrize("verbose", [False, True])
def test_wandb_is_silent_unless_verbose(tmp_path, monkeypatch, verbose):
    """W&B's client prints a banner and a summary per run; bench keeps it silent unless --verbose."""
    import dataclasses
    import os
    import sys
    import types

    from bench.run.loggers import WandbSink
    from bench.suites.suite import Outputs

    seen = {}
    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: seen.setdefault("silent", os.environ.get("WANDB_SILENT"))
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.delenv("WANDB_SILENT", raising=False)
    f = tmp_path / "s.yaml"
    f.write_text(SUITE)
    cell = dataclasses.replace(load_suite(f).cells[0], outputs=Outputs(wandb="p", verbose=verbose))
    WandbSink("p", cell)
    assert seen["silent"] == (None if verbose else "true")
