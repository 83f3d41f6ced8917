"""One-line runs without a suite file: `bench run --env ID --algo NAME [--impl] [--seeds] [--timesteps] [--set]`
(issue 66, item 3): the suite they make, written beside the store or printed, run like any suite; bad values
one line each, in one pass, exit 2, nothing written; shell completion of the flags."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bench.cli import app


def _bench(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), prog_name="bench", env=env)


def test_bad_flags_are_one_line_each_in_one_pass_and_write_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'r' / 'bench.db'}"
    res = _bench("run", "--env", "CartPol-v1", "--algo", "ppoo", "--impl", "foo", "--store", url)
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 3, lines
    assert lines[0] == "--impl: allowed: bench, sb3, numpy (a plugin, impl python, runs from a suite file) (got 'foo')"
    assert lines[1].startswith("--algo: unknown algorithm; allowed: reinforce,") and lines[1].endswith("(got 'ppoo')")
    assert lines[2].startswith("--env: unknown environment; did you mean CartPole-v1") and "(got 'CartPol-v1')" in lines[2]
    # No zoo budget for the pair and no --timesteps: the flag is named; a bad --set beside it too.
    res = _bench("run", "--env", "CartPole-v1", "--algo", "reinforce", "--set", "defaults.window=-3", "--store", url)
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 2, res.output
    assert "--timesteps: rl-baselines3-zoo has no budget for reinforce on CartPole-v1" in res.stderr
    assert "--set defaults.window: input should be greater than 0 (got -3)" in res.stderr
    for args, words in [(["--env", "CartPole-v1"], "--algo: missing; allowed: a suite file"),
                        (["--algo", "ppo"], "--env: missing"),
                        ([], "--env: missing"),
                        (["--env", "CartPole-v1", "--algo", "ppo", "--seeds", "0"], "'--seeds'"),
                        (["--env", "CartPole-v1", "--algo", "ppo", "--timesteps", "-5"], "'--timesteps'"),
                        (["suite.yaml", "--env", "CartPole-v1"], "--env: for a one-line run, which takes no suite file")]:
        res = _bench("run", *args, "--store", url)
        assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1 and words in res.stderr, (args, res.output)
    assert not (tmp_path / "r").exists() and "Traceback" not in res.output


def test_dry_run_prints_the_suite_and_writes_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    res = _bench("run", "--env", "CartPole-v1", "--algo", "ppo", "--dry-run", "--store", url)
    assert res.exit_code == 0, res.output
    text, _, rest = res.stdout.partition("# (dry run: not written; without --dry-run it goes to ")
    data = yaml.safe_load(text)
    # The zoo's budget for PPO on CartPole (ppo.yml n_timesteps 1e5) and the quick start's 3 seeds.
    assert data == {"name": "CartPole-v1.ppo-bench.100000x3",
                    "description": "bench run --env CartPole-v1 --algo ppo --impl bench --seeds 3 --timesteps 100000",
                    "seeds": 3, "defaults": {"timesteps": 100000}, "envs": [{"id": "CartPole-v1"}],
                    "algorithms": [{"algo": "ppo", "impl": "bench"}]}
    assert rest.startswith(f"{tmp_path / 'bench.suites' / 'CartPole-v1.ppo-bench.100000x3.yaml'})")
    assert "CartPole-v1.ppo-bench.100000x3: 3 cells (dry run, nothing written)" in rest
    assert list(tmp_path.iterdir()) == []


def test_the_file_is_written_once_the_suite_is_registered(tmp_path, monkeypatch):
    """No training (the pool is replaced): the file appears beside the store when the run starts, holds the
    suite registered under its name, and is left alone by a refused run."""
    import bench.run.pool as pool

    started = []
    monkeypatch.setattr(pool, "run_local", lambda url, todo, *a, **k: started.extend(c.key for c in todo))
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    flags = ["--env", "CartPole-v1", "--algo", "a2c", "--seeds", "2", "--timesteps", "1000", "--store", url]
    f = tmp_path / "bench.suites" / "CartPole-v1.a2c-bench.1000x2.yaml"
    # Refused before the store is touched (a cost over the confirmation limit): nothing written.
    res = _bench("run", *flags[:-4], "--timesteps", str(10**15), "--store", url)
    assert res.exit_code == 2 and "--yes" in res.stderr and not (tmp_path / "bench.suites").exists(), res.output
    res = _bench("run", *flags)
    assert res.exit_code == 0, res.output
    assert f"{f}: the suite of these flags" in res.stderr and len(started) == 2, res.output
    from bench.storage.store import Store

    db = Store(url, readonly=True)
    spec = db.suite_specs()["CartPole-v1.a2c-bench.1000x2"]
    db.dispose()
    assert yaml.safe_load(f.read_text()) == {k: spec[k] for k in ("name", "description", "seeds")} | {
        "defaults": {"timesteps": 1000}, "envs": [{"id": "CartPole-v1"}], "algorithms": [{"algo": "a2c", "impl": "bench"}]}


@pytest.mark.heavy
def test_a_one_line_run_is_the_suite_its_file_holds(tmp_path):
    """One seed of 1,000 CartPole steps: the file is written beside the store, the run is stored under the
    suite's name, and `bench run FILE` (and the same flags) find it done. About 26 s on a loaded 2-core
    machine (the worker's start-up), so in `nox -s heavy`."""
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    flags = ["--env", "CartPole-v1", "--algo", "ppo", "--seeds", "1", "--timesteps", "1000",
             "--set", "defaults.window=5", "--store", url]
    res = _bench("run", *flags)
    assert res.exit_code == 0, res.output
    f = tmp_path / "bench.suites" / "CartPole-v1.ppo-bench.1000x1.yaml"
    assert f"{f}: the suite of these flags" in res.stderr and "1 done, 0 failed" in res.stdout, res.output
    assert yaml.safe_load(f.read_text())["defaults"] == {"timesteps": 1000}
    res = _bench("run", str(f), "--set", "defaults.window=5", "--store", url)
    assert res.exit_code == 0 and "1 already done before" in res.stdout, res.output
    res = _bench("run", *flags)
    assert res.exit_code == 0 and "1 already done before" in res.stdout, res.output
    # An edited file is never overwritten: the flags' suite is refused, naming the file.
    f.write_text(f.read_text().replace("seeds: 1", "seeds: 2"))
    res = _bench("run", *flags)
    assert res.exit_code == 2 and f"{f}: already holds another suite" in res.stderr, res.output
    assert "seeds: 2" in f.read_text()


def test_shell_completion_offers_envs_algorithms_and_impls():
    def complete(words: str) -> list[str]:
        res = _bench(env={"_BENCH_COMPLETE": "complete_bash", "COMP_WORDS": words,
                          "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))})
        return res.stdout.split()

    assert "CartPole-v1" in complete("bench run --env CartP")
    assert all(v.startswith("CartP") for v in complete("bench run --env CartP"))
    assert complete("bench run --algo tr") == ["trpo"]
    assert complete("bench run --impl ") == ["bench", "sb3", "numpy"]


def test_the_docs_show_a_one_line_run():
    text = (Path(__file__).resolve().parent.parent / "docs" / "getting-started.md").read_text()
    assert "bench run --env CartPole-v1 --algo ppo" in text
