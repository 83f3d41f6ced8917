"""Off-policy reference points (issue 43): SB3's DQN, SAC and TD3 recorded like every run, and set beside the
answers by ``bench recommend --verbose``, never in them. Seconds, not minutes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench import analysis
from bench.algos import offpolicy_params
from bench.analysis import offpolicy, scoring
from bench.cli import app
from bench.run.runner import record_cell, run_cell
from bench.storage.owners import this_owner
from bench.storage.store import Store
from bench.suites.suite import AVAILABLE, OFF_POLICY_ACTIONS, SuiteError, load_suite
from bench.storage.urls import StoreURL

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import Planted, write_store  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# A few hundred steps, a few gradient steps each: smoke runs, not learning.
TINY = """\
name: tiny-off-policy
seeds: [0]
defaults: {timesteps: 400, window: 5, eval: {every: 200, episodes: 1}, save: final}
envs:
  - id: CartPole-v1
  - id: Pendulum-v1
algorithms:
  - algo: dqn
    impl: sb3
    hyperparams: {learning_starts: 50, train_freq: 16, gradient_steps: 4, batch_size: 16, buffer_size: 1000,
                  target_update_interval: 50, net_arch: [16]}
  - algo: sac
    impl: sb3
    hyperparams: {learning_starts: 100, batch_size: 16, buffer_size: 1000, net_arch: [16]}
  - algo: td3
    impl: sb3
    hyperparams: {learning_starts: 100, batch_size: 16, buffer_size: 1000, net_arch: [16], noise_type: normal}
"""


def test_the_off_policy_names_agree_across_layers():
    # The analysis cannot import the algorithms' layer, so it keeps its own copy of the names.
    assert scoring.OFF_POLICY == offpolicy_params.OFF_POLICY == tuple(OFF_POLICY_ACTIONS)
    assert all(AVAILABLE[a] == ("sb3",) for a in offpolicy_params.OFF_POLICY)


def test_zoo_values_resolve_and_keep_normalisation_off():
    from bench.algos.hyperparams import ZOO_TIMESTEPS, resolve

    for algo, table in offpolicy_params.ZOO_OFF_POLICY.items():
        assert set(table) == set(ZOO_TIMESTEPS[algo])  # every zoo entry has its budget
        for env in table:
            p = resolve(algo, env)
            assert p.normalize is False  # no continuous-control default: the zoo normalises none of these
    sac = resolve("sac", "LunarLanderContinuous-v3")
    assert (sac.learning_rate, sac.lr_schedule, sac.net_arch, sac.learning_starts) == (7.3e-4, "linear", [400, 300], 10_000)
    assert resolve("td3", "Pendulum-v1").noise_type == "normal" and resolve("td3", "Hopper-v5").noise_type == "none"
    assert resolve("dqn", "LunarLander-v3").gradient_steps == -1


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("off")
    (d / "tiny.yaml").write_text(TINY)
    loaded = load_suite(d / "tiny.yaml")
    url = f"sqlite:///{d / 'tiny.db'}"
    db = Store(url)
    db.register("tiny-off-policy", "tiny.yaml", {}, loaded.env_meta, loaded.cells)
    outcomes = {(c.algo, c.env_id): run_cell(StoreURL.parse(url), c, this_owner()) for c in loaded.cells}
    return url, loaded, outcomes


def test_smoke_runs_are_recorded_like_every_run(tiny_store):
    url, loaded, outcomes = tiny_store
    # DQN on the discrete env only, SAC and TD3 on the continuous one: the suite expands to these three cells.
    assert set(outcomes) == {("dqn", "CartPole-v1"), ("sac", "Pendulum-v1"), ("td3", "Pendulum-v1")}
    assert all(o.status == "done" for o in outcomes.values()), {k: o.error for k, o in outcomes.items()}
    db = Store(url, readonly=True)
    runs = db.runs_frame("tiny-off-policy").set_index("algo")
    import sqlalchemy as sa

    from bench.storage import schema

    with db.engine.connect() as c:
        diags = schema.read_frame(c, sa.select(schema.diagnostics.c.key, schema.diagnostics.c.name))
        evals = schema.read_frame(c, sa.select(schema.evaluations.c.key))
        eps = schema.read_frame(c, sa.select(schema.episodes.c.key, schema.episodes.c.cpu_s))
    for algo, keys in (("dqn", {"loss/q", "policy/epsilon"}), ("sac", {"loss/critic", "loss/actor", "policy/ent_coef"}),
                       ("td3", {"loss/critic", "loss/actor"})):
        r = runs.loc[algo]
        assert r["total_steps"] >= 400 and r["cpu_s"] > 0 and r["final_return"] == r["final_return"]
        assert keys <= set(diags.loc[diags["key"] == r["key"], "name"]), algo
        assert (evals["key"] == r["key"]).sum() >= 1  # periodic evaluation of the deterministic policy
        assert (eps["key"] == r["key"]).sum() >= 1 and eps.loc[eps["key"] == r["key"], "cpu_s"].notna().all()
        meta = r["meta"] if isinstance(r["meta"], dict) else __import__("json").loads(r["meta"])
        assert "stable-baselines3" in meta.get("versions", {}) and meta.get("git_commit")
        # The saved policy (its state dict, rebuilt on SB3's policy class) acts in its env's action space and
        # plays the run's last evaluation episode to the same return (the last report is at the budget's end).
        from bench.api import evaluate, load_policy

        pi = load_policy(r["key"], url, kind="final")
        assert pi.action_space.contains(pi.act(pi.observation_space.sample()).astype(pi.action_space.dtype))
        last = db.evaluations_of(r["key"]).iloc[-1]
        assert pi.step == last["step"] and evaluate(pi, 1).mean == pytest.approx(last["mean_return"], rel=1e-6), algo


def test_the_same_seed_gives_the_same_returns(tiny_store):
    _, loaded, _ = tiny_store
    cell = next(c for c in loaded.cells if c.algo == "sac")
    (a, ea), (b, eb) = record_cell(cell), record_cell(cell)
    assert ea is None and eb is None and a.ep_return and a.ep_return == b.ep_return and a.diag == b.diag


@pytest.mark.parametrize("edit, words", [
    (("impl: sb3\n    hyperparams: {learning_starts: 50", "impl: bench\n    hyperparams: {learning_starts: 50"),
     "algorithms[0].impl: bench has no DQN of its own"),
    (("  - id: Pendulum-v1\n", ""),
     "algorithms[1].algo: sac acts in continuous action spaces, and this suite's envs have discrete actions only"),
    (("{learning_starts: 100, batch_size: 16, buffer_size: 1000, net_arch: [16]}",
      "{learning_starts: 500, batch_size: 16, buffer_size: 1000, net_arch: [16]}"),
     "budget ends before sac-sb3 takes its first gradient step on Pendulum-v1"),
    (("{learning_starts: 100, batch_size: 16, buffer_size: 1000, net_arch: [16]}",
      "{n_steps: 8, batch_size: 16, buffer_size: 1000, net_arch: [16]}"),
     "unknown hyperparameter for sac"),
    (("train_freq: 16", "train_freq: 500"), "budget is smaller than one training phase of dqn-sb3"),
    (("name: tiny-off-policy\n", "name: tiny-off-policy\ntune: {trials: 2}\n"),
     "tune: dqn is an off-policy reference point"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, edit, words):
    text = TINY.replace(*edit)
    assert text != TINY
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(SuiteError) as e:
        load_suite(f)
    assert any(words in ln for ln in e.value.lines), e.value.lines
    res = CliRunner().invoke(app, ["run", str(f), "--dry-run"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert any(words in ln for ln in res.stderr.splitlines())


def test_dry_run_lists_the_zoo_values(tmp_path):
    res = CliRunner().invoke(app, ["run", str(ROOT / "suites/reference/off-policy.yaml"), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "zoo:" in res.output and "sac-sb3 on LunarLanderContinuous-v3" in res.output


# --------------------------------------------------------------------------- #
# Beside the answers, never in them
# --------------------------------------------------------------------------- #
ENVS = ["CartPole-v1", "LunarLander-v3"]  # discrete · vector · dense
ON = [Planted("ppo-sb3", "ppo", "sb3", skill=1.0, tau=0.1), Planted("a2c-sb3", "a2c", "sb3", skill=0.5, tau=0.4)]
# Far better than either, and many more runs: as a candidate it would win, and its budget would be the env's.
DQN = [Planted("dqn-sb3", "dqn", "sb3", skill=1.2, tau=0.05)]


def _rows(url):
    data = analysis.load(url, anchors=False)
    recs = analysis.recommend(analysis.score(data), n_boot=200, track_record=False)
    return data, recs, analysis.recommendation_rows(recs)


def test_the_answers_do_not_change_when_off_policy_runs_are_added(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, ENVS, ON, seeds=5, timesteps=20_000)
    before_data, _, before = _rows(url)
    write_store(url, ENVS, DQN, seeds=5, timesteps=20_000, suite="same-budget")
    # 12 runs per env against the on-policy 10: the majority, at another budget.
    write_store(url, ENVS, DQN, seeds=12, timesteps=10_000, suite="majority-at-another-budget")
    after_data, recs, after = _rows(url)
    assert after == before
    assert after_data.budgets == before_data.budgets == {e: 20_000 for e in ENVS}
    assert after_data.off_budgets == {e: 10_000 for e in ENVS}  # their own majority, pooled apart
    (row,) = [r for r in after if r["envs"] and r["priority"] == "samples" and r["obs"] == "vector"]
    assert row["answer"] == "on CartPole-v1, LunarLander-v3: ppo"
    # ... while the line beside them names DQN, far ahead.
    (line,) = offpolicy.off_policy_lines(after_data, recs, n_boot=200)
    g = next(g for g in line.gaps if g.priority == "samples")
    assert (g.best, g.answer) == ("dqn", "ppo") and g.gap > 0.1 and g.p_value < 0.05
    assert line.budgets == {e: 10_000 for e in ENVS}  # equal samples: the common budget
    # Equal CPU time: over the table's own horizon (20,000 steps × 1,000 µs), so the answer's score is the table's.
    assert line.horizons == {e: pytest.approx(20.0) for e in ENVS}
    t = next(g for g in line.gaps if g.priority == "time")
    rec = next(r for r in recs if r.priority == "time" and r.envs and r.obs == "vector")
    assert t.answer == rec.algorithm == "ppo" and t.answer_score.point == pytest.approx(rec.best_score.point)


def test_at_one_budget_the_line_scores_the_answer_as_the_table_does(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, ENVS, ON, seeds=5, timesteps=20_000)
    write_store(url, ENVS, DQN, seeds=5, timesteps=20_000, suite="off")
    data, recs, _ = _rows(url)
    (line,) = offpolicy.off_policy_lines(data, recs, n_boot=200)
    for g in line.gaps:
        rec = next(r for r in recs if r.priority == g.priority and r.envs)
        assert g.answer == "ppo" and g.answer_score.point == pytest.approx(rec.best_score.point)
        assert g.gap == pytest.approx(g.best_score.point - rec.best_score.point)
    rows = offpolicy.off_policy_rows([line])
    assert {r["priority"] for r in rows} == {"samples", "time"} and all(r["best"] == "dqn" for r in rows)
    assert "equal samples: dqn" in rows[0]["text"] and "equal CPU time: dqn" in rows[0]["text"]


def test_recommend_verbose_prints_the_line_and_the_compact_table_does_not(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, ENVS, ON, seeds=5, timesteps=20_000)
    write_store(url, ENVS, DQN, seeds=5, timesteps=10_000, suite="off")
    verbose = CliRunner().invoke(app, ["recommend", "--store", url, "--verbose", "--obs", "vector"])
    assert verbose.exit_code == 0, verbose.output
    text = " ".join(verbose.stdout.split())
    assert "off-policy reference" in text
    assert ("discrete · vector · dense (on CartPole-v1 10,000 steps / 20 CPU s, LunarLander-v3 10,000 steps / 20 CPU "
            "s): equal samples: dqn") in text
    time_only = CliRunner().invoke(app, ["recommend", "--store", url, "--verbose", "--priority", "time"])
    assert time_only.exit_code == 0, time_only.output
    assert "(on CartPole-v1 20 CPU s, LunarLander-v3 20 CPU s): equal CPU time: dqn" in " ".join(time_only.stdout.split())
    compact = CliRunner().invoke(app, ["recommend", "--store", url, "--obs", "vector"])
    assert compact.exit_code == 0 and "off-policy" not in compact.stdout and "dqn" not in compact.stdout


def test_the_report_shows_the_line_under_the_recommendations(tmp_path):
    from bench.analysis.report import build

    url = f"sqlite:///{tmp_path / 's.db'}"
    write_store(url, ["CartPole-v1"], ON, seeds=3, timesteps=20_000, episodes=40)
    write_store(url, ["CartPole-v1"], DQN, seeds=3, timesteps=10_000, episodes=40, suite="off")
    page = build(url, tmp_path / "rep", anchors=False).read_text()
    lines = page[page.index('id="off-policy-lines"'):]
    assert page.index('id="recommendations"') < page.index('id="off-policy"') and "equal samples: dqn" in lines
    answers = page[page.index('id="answer-table"'):page.index('id="inventory"')]
    assert "dqn" not in answers  # never an answer


def test_the_cost_estimate_charges_the_gradient_steps():
    from types import SimpleNamespace as C

    from bench.suites.cost import estimate

    meta = {"Pendulum-v1": {"time_scale_us": 400.0}}
    ppo = C(algo="ppo", env_id="Pendulum-v1", timesteps=20_000, cpu_seconds=None, hyperparams={})
    sac = C(algo="sac", env_id="Pendulum-v1", timesteps=20_000, cpu_seconds=None,
            hyperparams={"learning_starts": 100, "train_freq": 1, "gradient_steps": 1})
    dqn = C(algo="dqn", env_id="Pendulum-v1", timesteps=20_000, cpu_seconds=None,
            hyperparams={"learning_starts": 0, "train_freq": 256, "gradient_steps": 128})
    env_s = 20_000 * 400e-6
    assert estimate([ppo], meta).cpu_hours * 3600 == pytest.approx(env_s)
    sac_s = env_s + 19_900 * offpolicy_params.GRADIENT_STEP_US["sac"] * 1e-6
    dqn_s = env_s + 20_000 * 0.5 * offpolicy_params.GRADIENT_STEP_US["dqn"] * 1e-6
    assert estimate([sac, dqn], meta).cpu_hours * 3600 == pytest.approx(sac_s + dqn_s)
