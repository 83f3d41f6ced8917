"""`bench tune`: studies that complete and resume, pruning, faults, export, validation, sensitivity.

Budgets are tiny (2k-8k env steps of the project's own A2C on CartPole, a few
hundred milliseconds per run) and runs are deterministic per seed, so every
number below is reproducible; nothing here checks that tuning finds good
hyperparameters, only that the machinery does what it says.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import optuna
import pytest
import yaml
from optuna.trial import TrialState
from typer.testing import CliRunner

from bench.stats.metrics import normalised_auc
from bench.analysis.sensitivity import sensitivity_table
from bench.cli import app
from bench.suites.spaces import DEFAULT_SPACES, Dim, parse_dim, sample
from bench.storage.urls import StoreURL
from bench.tune import (
    STUDY_ATTR, BadInput, Target, check_studies, make_storage, open_study, optimize, run_trial,
    target_from_flags, with_anchor,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)
ROOT = Path(__file__).resolve().parent.parent


def bench(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def trials_of(url: str, study: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=study, storage=url).get_trials(deepcopy=False)


def finished(trials) -> list:
    return [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]


# --------------------------------------------------------------------------- #
# A small study: completes, resumes, exports
# --------------------------------------------------------------------------- #
TUNE_ARGS = ("--algo", "a2c", "--impl", "bench", "--env", "CartPole-v1", "--timesteps", "2048", "--seeds", "3")


@pytest.fixture(scope="module")
def small_study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tune")
    url = f"sqlite:///{tmp / 'bench.db'}"
    export = tmp / "best.yaml"
    r = bench("tune", *TUNE_ARGS, "--trials", "4", "--storage", url, "--export", export)
    assert r.exit_code == 0, r.output
    return url, export, r


def test_small_study_completes_with_multi_seed_scores_and_checkpoints(small_study):
    url, _, r = small_study
    trials = trials_of(url, "a2c-bench-CartPole-v1")
    assert len(trials) == 4 and len(finished(trials)) == 4
    assert "a2c-bench-CartPole-v1: 4 complete" in r.stdout
    # The study keeps what its auc depends on: the objective's version and the stored random-policy anchor.
    from bench.envs.anchors import stored_anchors
    from bench.storage.store import Store

    settings = optuna.load_study(study_name="a2c-bench-CartPole-v1", storage=url).user_attrs["bench"]
    anchor = stored_anchors(Store(url), {"CartPole-v1": 475.0})["CartPole-v1"]
    assert settings["objective_version"] == 2 and settings["random_return"] == anchor.random_return
    T, marks = 2048, [512, 1024, 1536, 2048]
    for t in trials:
        if t.state != TrialState.COMPLETE:
            continue
        scores = t.user_attrs["seed_scores"]
        assert len(scores) == 3 and t.value == pytest.approx(np.mean(scores))
        # Reports at 4 fixed fractions of each of the 3 seeds' budgets, in trial env steps.
        assert sorted(t.intermediate_values) == [i * T + m for i in range(3) for m in marks]
        assert t.intermediate_values[3 * T] == pytest.approx(t.value)  # the last report is the objective
        # 1 - gamma is searched on a log scale; the readable gamma is a user attribute.
        assert t.user_attrs["gamma"] == pytest.approx(1 - t.params["one_minus_gamma"])
        assert t.user_attrs["hyperparams"]["n_steps"] == 2 ** t.params["log2_n_steps"]
        assert 0.0 <= t.user_attrs["solved_fraction"] <= 1.0
        assert t.user_attrs["cpu_s"] > 0  # what the trial cost, for a pack's CPU-hours


def test_rerun_with_more_trials_adds_to_the_same_study(small_study, tmp_path):
    url, _, _ = small_study
    before = {t.number: t.params for t in trials_of(url, "a2c-bench-CartPole-v1")}
    r = bench("tune", *TUNE_ARGS, "--trials", "6", "--storage", url)
    assert r.exit_code == 0, r.output
    after = trials_of(url, "a2c-bench-CartPole-v1")
    assert optuna.study.get_all_study_names(url) == ["a2c-bench-CartPole-v1"]
    assert len(finished(after)) == 6 and len(after) == 6  # exactly 2 more, none repeated
    assert {t.number: t.params for t in after if t.number in before} == before
    # Resumed TPE is seeded past the existing trials: it does not replay the first start-up draws.
    assert after[4].params != before[0] and after[5].params != before[1]


def test_changed_settings_on_an_existing_study_are_refused(small_study):
    url, _, _ = small_study
    r = bench("tune", *TUNE_ARGS[:-4], "--timesteps", "4096", "--seeds", "3", "--trials", "9", "--storage", url)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "timesteps 2048 (now 4096)" in lines[0] and "--study" in lines[0]
    assert len(trials_of(url, "a2c-bench-CartPole-v1")) <= 6  # nothing ran


def test_exported_suite_runs_and_reproduces_the_tuned_objective(small_study, tmp_path):
    url, export, _ = small_study
    study = optuna.load_study(study_name="a2c-bench-CartPole-v1", storage=url)
    best = study.best_trial
    text = export.read_text()
    assert f"study 'a2c-bench-CartPole-v1', trial {best.number}" in text  # provenance comment
    spec = yaml.safe_load(text)
    assert spec["seeds"] == [3, 4, 5]  # fresh: the tuning seeds were 0, 1, 2
    # A variant beside the zoo-default runs: its own labels, kept out of the answers by algorithm.
    assert spec["variant"] == "tuned" and [a["label"] for a in spec["algorithms"]] == ["a2c-bench-tuned"]
    run_url = f"sqlite:///{tmp_path / 'run.db'}"
    r = bench("run", export, "--store", run_url, "--workers", "1")
    assert r.exit_code == 0, r.output
    from bench.storage.store import Store

    # The tuned auc is the report's normalised AUC: score the fresh runs' stored episodes the same way.
    settings = study.user_attrs["bench"]
    low, high, T = settings["random_return"], settings["threshold"], settings["timesteps"]
    db = Store(run_url)
    fresh = np.array([normalised_auc(ep["step"], ep["ret"], settings["window"], upto=T, low=low, high=high)
                      for ep in map(db.episodes_of, db.runs_frame(spec["name"])["key"])])
    tuned = np.asarray(best.user_attrs["seed_scores"])
    assert fresh.size == 3 and np.isfinite(fresh).all()
    # Within the seed spread of the tuned objective: mean ± 2 sd of the tuning seeds.
    assert abs(fresh.mean() - tuned.mean()) <= 2 * tuned.std(ddof=1), (fresh, tuned)

    # On the tuning seeds, the suite's cells reproduce every tuning run exactly: the same
    # cell, through the same functions a `bench run` worker calls (run in-process here to
    # save a worker pool's start-up).
    from bench.run.runner import record_cell
    from bench.suites.suite import load_suite

    spec2 = {**spec, "name": "tuned-on-tuning-seeds", "seeds": [0, 1, 2]}
    (tmp_path / "same.yaml").write_text(yaml.safe_dump(spec2))
    again = []
    for cell in load_suite(tmp_path / "same.yaml").cells:
        rec, error = record_cell(cell)
        assert error is None
        a = rec.summary_inputs()
        again.append(normalised_auc(a["steps"], a["returns"], cell.window, upto=cell.timesteps, low=low,
                                    high=cell.threshold))
    np.testing.assert_allclose(again, tuned, rtol=1e-12)


# --------------------------------------------------------------------------- #
# Bad input: one line with the YAML path, exit 2, nothing created
# --------------------------------------------------------------------------- #
SUITE = """\
name: badtune
seeds: 1
defaults: {{timesteps: 4096}}
envs:
  - id: CartPole-v1
algorithms:
  - algo: ppo
    impl: bench
tune:
  trials: 2
  space:
{space}
"""


@pytest.mark.parametrize(
    "space, path, words",
    [
        ("    learning_rat: {type: float, low: 0.0001, high: 0.001}", "tune.space.learning_rat", "unknown hyperparameter for ppo"),
        ("    learning_rate: {type: float, low: 0.1, high: 0.001, log: true}", "tune.space.learning_rate.low", "low must be <= high"),
        ("    learning_rate: {type: gaussian, low: 0.0001, high: 0.001}", "tune.space.learning_rate.type", "unknown distribution"),
        ("    n_steps: {type: pow2, low: 16, high: 48}", "tune.space.n_steps.high", "power of two"),
        ("    gamma: {type: float, low: 0.9, high: 1.5}", "tune.space.gamma.high", "not a valid gamma"),
        ("    trpo: {target_kl: {type: float, low: 0.001, high: 0.1}}", "tune.space.trpo", "not an algorithm of this suite"),
        ("    clip_range: {type: categorical, choices: [0.1, 0.2], low: 0}", "tune.space.clip_range.low", "not used by a categorical"),
    ],
)
def test_malformed_search_space_is_one_line_with_its_yaml_path(tmp_path, space, path, words):
    suite = tmp_path / "bad.yaml"
    suite.write_text(SUITE.format(space=space))
    db = tmp_path / "bench.db"
    for cmd in (["tune", suite, "--storage", f"sqlite:///{db}"], ["run", suite, "--store", f"sqlite:///{db}"]):
        r = bench(*cmd)
        assert r.exit_code == 2, r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"{suite}:12: {path}: ") and words in lines[0], lines[0]
        assert "Traceback" not in r.output
    assert not db.exists()


def test_sqlite_with_several_workers_is_refused(tmp_path):
    db = tmp_path / "bench.db"
    r = bench("tune", *TUNE_ARGS, "--trials", "2", "--workers", "2", "--storage", f"sqlite:///{db}")
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "SQLite" in lines[0] and "PostgreSQL" in lines[0]
    assert not db.exists()


def test_bad_flags_are_one_line(tmp_path):
    db = tmp_path / "bench.db"
    for args, words in [
        (("--algo", "ddpg", "--env", "CartPole-v1"), "--algo: unknown algorithm 'ddpg'"),
        (("--algo", "sac", "--env", "Pendulum-v1"), "--algo: sac is an off-policy reference point"),
        (("--algo", "reinforce", "--impl", "sb3", "--env", "CartPole-v1"), "--impl: 'sb3' is not available for reinforce"),
        (("--algo", "ppo", "--env", "CartPoel-v1"), "--env: unknown environment"),
    ]:
        r = bench("tune", *args, "--storage", f"sqlite:///{db}")
        assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and words in r.stderr, r.output
    assert not db.exists()


# --------------------------------------------------------------------------- #
# Search spaces
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("algo", sorted(DEFAULT_SPACES))
def test_default_spaces_are_valid_dimensions_of_their_algorithm(algo):
    for name, dim in DEFAULT_SPACES[algo].items():
        parsed, issues = parse_dim(dim.describe(), f"x.{name}", [algo], name)
        assert issues == [] and parsed == dim, (name, issues)


def test_batch_size_is_clamped_to_one_rollout():
    space = {"n_steps": Dim("pow2", 8, 64), "batch_size": Dim("pow2", 8, 512)}
    trial = optuna.trial.FixedTrial({"log2_n_steps": 4, "log2_batch_size": 9})
    values = sample(trial, space, rollout_of=lambda v: v["n_steps"] * 2)
    assert values == {"n_steps": 16, "batch_size": 32}
    assert trial.user_attrs["batch_size_sampled"] == 512 and trial.user_attrs["n_steps"] == 16


# --------------------------------------------------------------------------- #
# Trial outcomes: pruned at a checkpoint, diverged → pruned, exception → failed
# --------------------------------------------------------------------------- #
def _lr_target(study: str, **pruner) -> Target:
    t = target_from_flags("a2c", "bench", "CartPole-v1", timesteps=4096, seeds=1, study=study)
    return Target(**{**t.__dict__, "space": {"learning_rate": Dim("float", 1e-4, 10.0, log=True)},
                     "pruner": {"type": "median", "n_startup_trials": 1, "n_warmup_checkpoints": 0, **pruner}})


def test_pruner_stops_a_hopeless_trial_at_a_checkpoint(tmp_path):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    target = with_anchor(_lr_target("prune"), StoreURL.parse(url))
    from bench.tune import make_storage

    study = open_study(target, make_storage(StoreURL.parse(url)))
    study.enqueue_trial({"learning_rate": 3e-3})  # learns
    study.enqueue_trial({"learning_rate": 5.0})  # collapses to a deterministic policy at once
    optimize(target, StoreURL.parse(url), trials=2)
    good, bad = trials_of(url, "prune")
    assert good.state == TrialState.COMPLETE
    assert bad.state == TrialState.PRUNED and bad.user_attrs["outcome"] == "pruned"
    assert len(bad.intermediate_values) < len(good.intermediate_values) == 4


def test_diverged_run_prunes_and_an_exception_fails_with_its_message(monkeypatch):
    import bench.run.runner
    from bench.storage.record import Diverged

    target = Target(**{**_lr_target("faults").__dict__, "random_return": 20.0})
    study = optuna.create_study(direction="maximize")

    def diverge(cell, recorder):
        raise Diverged("non-finite loss/policy = nan at step 40")

    def crash(cell, recorder):
        raise RuntimeError("boom in the env")

    for fn in (diverge, crash):
        monkeypatch.setattr(bench.run.runner, "train_cell", fn)
        study.optimize(lambda t: run_trial(t, target), n_trials=1, catch=(Exception,))
    diverged, crashed = study.trials
    assert diverged.state == TrialState.PRUNED and diverged.user_attrs["outcome"] == "diverged"
    assert "Diverged: non-finite loss/policy" in diverged.user_attrs["error"]
    assert crashed.state == TrialState.FAIL and crashed.user_attrs["error"] == "RuntimeError: boom in the env"


# --------------------------------------------------------------------------- #
# The auc objective is the report's normalised AUC
# --------------------------------------------------------------------------- #
#: Episodes (end step, return) a planted training run records, per seed.
PLANTED = {0: [(25, 20.0), (50, 20.0), (75, 100.0), (100, 100.0)], 1: [(50, 180.0), (100, 180.0)]}


def _planted_target() -> Target:
    """100 env steps per seed, checkpoints at 25/50/75/100, window 1, random return 20, threshold 100."""
    return Target(
        study="planted", algo="a2c", impl="bench", label="a2c-bench", env_id="CartPole-v1", threshold=100.0,
        window=1, timesteps=100, seeds=(0, 1), objective="auc", checkpoints=4,
        space={"learning_rate": Dim("float", 1e-4, 1e-3, log=True)}, pruner={"type": "none"}, random_return=20.0,
    )


def test_auc_objective_and_its_checkpoints_are_the_reports_normalised_auc(monkeypatch):
    import bench.run.runner

    def planted(cell, rec):
        for step, ret in PLANTED[cell.seed]:
            rec.steps = step
            rec.episode(ret, 10)
            rec.after_update()

    monkeypatch.setattr(bench.run.runner, "train_cell", planted)
    study = optuna.create_study(direction="maximize")
    study.optimize(lambda t: run_trial(t, _planted_target()), n_trials=1)
    (trial,) = study.trials
    # Seed 0 on the grid 1..100 (window 1): 20 = random (0) up to step 50, a straight line to
    # 1 at step 75, 1 after: (0 × 50 + (1 + ... + 24) / 25 + 26 × 1) / 100 = (12 + 26) / 100.
    # Seed 1 returns 180, above the threshold: capped at 1 from the first grid point on.
    assert trial.user_attrs["seed_scores"] == pytest.approx([0.38, 1.0])
    assert trial.value == pytest.approx(0.69)
    # The very number the report gives each run (its episodes, its window, the budget, the anchors).
    for seed, score in zip((0, 1), trial.user_attrs["seed_scores"]):
        steps, returns = zip(*PLANTED[seed])
        assert score == normalised_auc(steps, returns, 1, upto=100, low=20.0, high=100.0)
    # Checkpoints score the curve so far over the checkpoint's steps. Seed 0 at 75 steps, grid
    # 0.75 j: 0 up to j = 66 (49.5 steps), (0.75 j - 50) / 25 for j = 67..99 (sum 16.17), 1 at
    # j = 100: 17.17 / 100. Seed 1's reports are the mean of seed 0's 0.38 and its own 1.
    assert trial.intermediate_values == pytest.approx(
        {25: 0.0, 50: 0.0, 75: 0.1717, 100: 0.38, 125: 0.69, 150: 0.69, 175: 0.69, 200: 0.69})


def test_a_study_tuned_with_the_old_auc_is_refused_with_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    t = target_from_flags("a2c", "bench", "CartPole-v1", timesteps=2048, seeds=3)
    # What `bench tune` stored before objectives had versions (auc was the mean return per episode).
    old = {k: v for k, v in t.identity().items() if k not in ("objective_version", "random_return")}
    for name, objective in (("a2c-bench-CartPole-v1", "auc"), ("old-final", "final_return")):
        study = optuna.create_study(storage=make_storage(StoreURL.parse(url)), study_name=name, direction="maximize")
        study.set_user_attr(STUDY_ATTR, {**old, "objective": objective})
    r = bench("tune", *TUNE_ARGS, "--trials", "1", "--storage", url)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "'a2c-bench-CartPole-v1' was tuned with version 1 of the auc objective (the mean training return per episode)" in lines[0]
    assert "--study NEW_NAME" in lines[0]
    assert trials_of(url, "a2c-bench-CartPole-v1") == []  # nothing ran
    # An objective whose definition did not change keeps its older studies.
    check_studies([replace(t, objective="final_return", study="old-final")], StoreURL.parse(url))


def test_auc_needs_a_threshold_above_the_random_policy_return(tmp_path):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    t = target_from_flags("a2c", "bench", "CartPole-v1", timesteps=2048, seeds=1)
    low = with_anchor(t, StoreURL.parse(url)).random_return
    assert 10 < low < 40  # a random CartPole policy lasts about 22 steps
    from bench.envs.anchors import stored_anchors
    from bench.storage.store import Store

    assert stored_anchors(Store(url), {"CartPole-v1": t.threshold})["CartPole-v1"].random_return == low  # the report's
    with pytest.raises(BadInput) as e:
        with_anchor(replace(t, threshold=10.0), StoreURL.parse(url))
    assert "threshold of CartPole-v1 (10) is not above its random-policy return" in str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(BadInput, match="CartPole-v1 has no threshold"):
        with_anchor(replace(t, threshold=None), StoreURL.parse(url))
    # Objectives that are not normalised by it still tune; final_return keeps the anchor for the sensitivity scale.
    assert with_anchor(replace(t, objective="final_return", threshold=10.0), StoreURL.parse(url)).random_return == low
    assert with_anchor(replace(t, objective="steps_to_threshold"), StoreURL.parse(url)).random_return is None


# --------------------------------------------------------------------------- #
# Faults and cooperation on a real PostgreSQL server
# --------------------------------------------------------------------------- #
KILL_SUITE = """\
name: kill
seeds: 1
defaults: {timesteps: 65536}
envs: [{id: CartPole-v1}]
algorithms: [{algo: a2c, impl: bench}]
tune:
  trials: 1
  seeds: 1
  default_space: false
  space: {learning_rate: {type: float, low: 0.0001, high: 0.01, log: true}, gamma: {type: one_minus_log, low: 0.9, high: 0.999}}
"""


@pytest.mark.postgres
@pytest.mark.heavy
def test_killed_worker_trial_is_failed_and_retried_with_the_same_params(pg_url, tmp_path):
    (tmp_path / "kill.yaml").write_text(KILL_SUITE)
    KILL_ARGS = (tmp_path / "kill.yaml", "--study", "killed", "--heartbeat", "1", "--grace", "2")
    proc = subprocess.Popen([sys.executable, "-m", "bench", "tune", *map(str, KILL_ARGS), "--storage", pg_url],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        running = None
        while running is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            try:
                ts = trials_of(pg_url, "killed")
            except KeyError:  # the study is not created yet
                continue
            # Sampled and training: its hyperparameters are recorded just before the first seed starts.
            running = next((t for t in ts if t.state == TrialState.RUNNING and "hyperparams" in t.user_attrs), None)
        assert running is not None, f"no running trial seen; worker exited {proc.poll()}: {proc.stderr.read() if proc.poll() is not None else ''}"
        os.kill(proc.pid, signal.SIGKILL)  # mid-trial: it trains 64k steps (over a second), we saw it start
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    (stuck,) = trials_of(pg_url, "killed")
    assert stuck.state == TrialState.RUNNING  # what a SIGKILL leaves behind, before the heartbeat check
    time.sleep(3.0)  # > grace (2 s) since its last heartbeat

    r = bench("tune", *KILL_ARGS, "--storage", pg_url)
    assert r.exit_code == 0, r.output
    trials = trials_of(pg_url, "killed")
    killed = trials[0]
    assert killed.state == TrialState.FAIL and killed.value is None
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == killed.number]
    assert len(retries) == 1
    assert retries[0].params == killed.params and retries[0].state == TrialState.COMPLETE
    assert retries[0].system_attrs["retry_history"] == [killed.number]
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]


@pytest.mark.postgres
@pytest.mark.heavy
def test_two_worker_processes_share_one_study_on_postgres(pg_url):
    # Each worker stops starting trials 6 s after its own start: long enough that both run
    # trials whatever their start-up takes, where a fixed small trial count could all go
    # to the first worker up (a 2048-step trial takes a fraction of a second).
    r = bench("tune", *TUNE_ARGS[:-4], "--timesteps", "2048", "--seeds", "1", "--trials", "10000", "--timeout", "6",
              "--workers", "2", "--storage", pg_url, "--study", "shared")
    assert r.exit_code == 0, r.output
    trials = trials_of(pg_url, "shared")
    assert len(finished(trials)) >= 2 and len(trials) == len(finished(trials))  # none left running
    workers = {t.user_attrs["worker"] for t in trials}
    assert len(workers) == 2  # both processes ran trials
    assert r.stderr.count("trial ") >= len(finished(trials))  # the parent reported each finished trial


# --------------------------------------------------------------------------- #
# Sensitivity summary: a known answer
# --------------------------------------------------------------------------- #
SENS = """\
name: {name}
seeds: 1
defaults: {{timesteps: 8192, window: 10}}
envs:
  - id: CartPole-v1
    threshold: 100     # reachable at this budget by a learning A2C (about 2-5k steps)
algorithms:
  - algo: a2c
    impl: bench
tune:
  trials: 3
  seeds: 2
  default_space: false
  pruner: {{type: none}}
  space:
    learning_rate: {{type: float, low: {low}, high: {high}, log: true}}
"""


def test_sensitivity_shows_a_too_large_learning_rate_as_lower_success(tmp_path):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    for name, low, high in (("sane", 2e-3, 6e-3), ("huge", 1.0, 10.0)):
        (tmp_path / f"{name}.yaml").write_text(SENS.format(name=name, low=low, high=high))
        r = bench("tune", tmp_path / f"{name}.yaml", "--storage", url)
        assert r.exit_code == 0, r.output
    df = sensitivity_table(url).set_index("study")
    assert set(df.index) == {"sane-a2c-bench-CartPole-v1", "huge-a2c-bench-CartPole-v1"}
    sane, huge = df.loc["sane-a2c-bench-CartPole-v1"], df.loc["huge-a2c-bench-CartPole-v1"]
    assert (sane.algo, sane.impl, sane.env_id, sane.n_trials, sane.n_complete) == ("a2c", "bench", "CartPole-v1", 3, 3)
    # A learning rate of 1-10 collapses the policy at once: no seed of any trial reaches 100.
    assert huge.success_fraction == 0.0
    assert sane.success_fraction > huge.success_fraction
    assert set(sane.importances) == {"learning_rate"} and sane.importances["learning_rate"] == pytest.approx(1.0)
    for row in (sane, huge):
        assert 0.0 <= row.score_iqr <= 1.0 and not math.isnan(row.score_iqr)


def _planted_study(url: str, name: str, settings: dict, complete=(), pruned=(), failed: int = 0) -> None:
    """A bench study with trials of known values: ``pruned`` is one intermediate-values dict per pruned trial."""
    from optuna.distributions import FloatDistribution
    from optuna.trial import create_trial

    study = optuna.create_study(storage=make_storage(StoreURL.parse(url)), study_name=name)
    base = {"algo": "a2c", "impl": "bench", "env_id": "CartPole-v1", "threshold": 100.0, "timesteps": 1000,
            "objective": "auc", "objective_version": 2, "random_return": 20.0}
    study.set_user_attr(STUDY_ATTR, {**base, **settings})
    dist = {"learning_rate": FloatDistribution(1e-5, 1.0, log=True)}
    n = 0
    for state, value, iv in ([(TrialState.COMPLETE, v, {}) for v in complete]
                             + [(TrialState.PRUNED, None, iv) for iv in pruned] + [(TrialState.FAIL, None, {})] * failed):
        n += 1
        study.add_trial(create_trial(state=state, value=value, intermediate_values=iv, distributions=dist,
                                     params={"learning_rate": 1e-3 * n},
                                     user_attrs={"solved_fraction": 1.0 if state == TrialState.COMPLETE else 0.0}))


def test_sensitivity_is_on_a_fixed_scale_per_study_and_counts_pruned_trials(tmp_path):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    # auc: 4 complete trials, one pruned at -0.5 (its last report), one pruned before any report, one failed.
    _planted_study(url, "A", {}, complete=[0.1, 0.2, 0.3, 0.4], pruned=[{250: 0.9, 500: -0.5}, {}], failed=1)
    alone = sensitivity_table(url).set_index("study").loc["A"]
    # Scores [-0.5, 0.1, 0.2, 0.3, 0.4]: quartiles (linear) 0.1 and 0.3. Without the pruned
    # trial they would be 0.175 and 0.325 (IQR 0.15).
    assert alone.score_iqr == pytest.approx(0.2)
    assert (alone.n_trials, alone.n_complete, alone.n_pruned, alone.note) == (5, 4, 2, "")
    assert alone.success_fraction == pytest.approx(4 / 6)  # complete and pruned trials; the failed one stays out

    # More studies on the same env leave A's row as it was (no scale pooled over studies).
    _planted_study(url, "B", {}, complete=[-3.0, 1.0])
    _planted_study(url, "C", {"objective": "final_return", "random_return": None}, complete=[20, 60, 100, 100, 100])
    _planted_study(url, "D", {"objective": "final_return", "random_return": None, "env_id": "Pendulum-v1",
                              "threshold": -200.0}, complete=[-900.0, -150.0])
    _planted_study(url, "E", {"objective": "steps_to_threshold"}, complete=[500, 1000, 2000])
    _planted_study(url, "F", {"objective_version": 1}, complete=[30.0, 90.0])
    from bench.storage.store import Store

    Store(url).put_anchor("CartPole-v1", 20.0, 100.0, 20, 0)  # what the tuner stores for C's env and threshold
    import pandas as pd

    df = sensitivity_table(url).set_index("study")
    pd.testing.assert_series_equal(df.loc["A"], alone)
    assert df.loc["B", "score_iqr"] == pytest.approx(2.0)  # quartiles -2 and 0 of [-3, 1]
    # final_return on the anchor's scale, read from the store: [0, 0.5, 1, 1, 1] → quartiles 0.5 and 1.
    assert df.loc["C", "score_iqr"] == pytest.approx(0.5)
    assert math.isnan(df.loc["D", "score_iqr"]) and "no stored random-policy anchor for Pendulum-v1" in df.loc["D", "note"]
    # steps_to_threshold over the budget: [0.5, 1, 2] (a censored seed is 2 budgets) → quartiles 0.75 and 1.5.
    assert df.loc["E", "score_iqr"] == pytest.approx(0.75)
    assert math.isnan(df.loc["F", "score_iqr"]) and "auc version 1" in df.loc["F", "note"]


def test_only_tunes_a_chunk_of_a_suites_studies_and_a_bad_filter_is_one_line(tmp_path):
    suite = tmp_path / "chunked.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "chunked", "seeds": 4, "defaults": {"timesteps": 2048},
        "envs": [{"id": "CartPole-v1"}],
        "algorithms": [{"algo": "a2c", "impl": "bench"}, {"algo": "reinforce", "impl": "bench"}],
        "tune": {"trials": 1, "seeds": 1},
    }))
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    r = bench("tune", suite, "--only", "algo=a2c,impl=bench", "--storage", url)
    assert r.exit_code == 0, r.output
    assert optuna.get_all_study_names(url) == ["chunked-a2c-bench-CartPole-v1"]  # the whole suite's name for it
    for args, words in [
        (("--only", "seed=0"), "--only: seed= picks runs"),
        (("--only", "algo=ppo"), "--only: 'algo=ppo' matches none of the 2 (algorithm, env) targets"),
        (("--only", "colour=red"), "--only: unknown key 'colour'"),
        (("--only", "algo"), "--only: 'algo' is not key=value"),
    ]:
        r = bench("tune", suite, *args, "--storage", url)
        assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and words in r.stderr, r.output
    r = bench("tune", *TUNE_ARGS, "--only", "algo=a2c", "--storage", url)
    assert r.exit_code == 2 and "--only: picks studies of a suite file" in r.stderr, r.output
    assert optuna.get_all_study_names(url) == ["chunked-a2c-bench-CartPole-v1"]  # nothing written by the refusals
    # The chunk's best, exported to run beside the suite: the suite's 4 seeds, fresh (tuning used seed 0).
    out = tmp_path / "tuned.yaml"
    r = bench("tune", suite, "--only", "algo=a2c", "--storage", url, "--export", out)
    assert r.exit_code == 0, r.output
    spec = yaml.safe_load(out.read_text())
    assert spec["seeds"] == [1, 2, 3, 4] and spec["variant"] == "tuned"
    assert [a["label"] for a in spec["algorithms"]] == ["a2c-bench-tuned"]


def test_export_of_a_label_too_long_for_its_suffix_is_refused_before_tuning(tmp_path):
    # 123 characters is a valid label, but '<label>-tuned' (129) would not be: refused before any trial,
    # since tuning takes hours and the export comes last. 122 is the longest that exports.
    suite = tmp_path / "long.yaml"
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    for n, ok in ((123, False), (122, True)):
        suite.write_text(yaml.safe_dump({
            "name": "long", "seeds": 1, "defaults": {"timesteps": 2048}, "envs": [{"id": "CartPole-v1"}],
            "algorithms": [{"algo": "a2c", "impl": "bench", "label": "a" * n}], "tune": {"trials": 1, "seeds": 1},
        }))
        out = tmp_path / f"tuned-{n}.yaml"
        r = bench("tune", suite, "--storage", url, "--export", out)
        if ok:
            assert r.exit_code == 0, r.output
            assert [a["label"] for a in yaml.safe_load(out.read_text())["algorithms"]] == ["a" * 122 + "-tuned"]
        else:
            lines = r.stderr.strip().splitlines()
            assert r.exit_code == 2 and len(lines) == 1, r.output
            assert "--export: label" in lines[0] and "at most 122 characters" in lines[0], lines[0]
            assert not out.exists() and not (tmp_path / "bench.db").exists()
