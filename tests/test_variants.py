"""`bench run SUITE --set ...` on a store that holds SUITE with another grid: a variant stored beside it
(issue 66, item 2), its name stable and safe, the first run's results kept, the report setting both side by side."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.suites.overrides import parse_override
from bench.suites.suite import load_suite
from bench.suites.variants import as_variant, grid, variant_name

TINY = """\
name: tiny
seeds: 1
defaults: {timesteps: 1000, window: 5}
envs:
  - id: CartPole-v1
algorithms:
  - {algo: ppo, impl: bench, hyperparams: {n_envs: 1, n_steps: 128, batch_size: 64}}
  - {algo: a2c, impl: bench}
"""


def _bench(*args: str):
    return CliRunner().invoke(app, list(args), prog_name="bench")


def _sets(*texts: str) -> tuple:
    return tuple(parse_override(t) for t in texts)


def test_a_variant_s_name_is_stable_safe_and_its_own():
    name = variant_name("tiny", _sets("defaults.timesteps=60000"))
    assert re.fullmatch(r"tiny\.timesteps-60000\.[0-9a-f]{6}", name), name
    # The same overrides, however spelled or ordered, name the same variant; others another.
    assert variant_name("tiny", _sets("defaults.timesteps=6e4")) == name
    two = variant_name("tiny", _sets("defaults.timesteps=2000", "algorithms[0].hyperparams.learning_rate=1e-4"))
    assert two == variant_name("tiny", _sets("algorithms[0].hyperparams.learning_rate=0.0001", "defaults.timesteps=2000"))
    assert two != variant_name("tiny", _sets("defaults.timesteps=2000", "algorithms[1].hyperparams.learning_rate=1e-4"))
    # Within the store's 64 characters of file- and URL-safe ones, whatever the values hold.
    for sets in [_sets("description=a b/c?d#e%f"), _sets("algorithms[0].hyperparams.net_arch=[64, 64]"),
                 _sets(*(f"algorithms[0].hyperparams.x{i}=1" for i in range(30)))]:
        for base in ("tiny", "n" * 64):
            got = variant_name(base, sets)
            assert len(got) <= 64 and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", got), got


def test_only_the_labels_an_override_changes_are_renamed(tmp_path):
    f = tmp_path / "tiny.yaml"
    f.write_text(TINY)
    base = load_suite(f)
    lr = load_suite(f, ["algorithms[0].hyperparams.learning_rate=1e-4"])
    v = as_variant(lr, grid(base))
    assert v.suite.name == variant_name("tiny", lr.overrides) and v.suite.variant == "learning_rate=0.0001"
    assert v.variant_of == "tiny" and {c.suite for c in v.cells} == {v.suite.name}
    # ppo's cells changed and are labelled so; a2c's are the very runs of the base, under its label.
    assert {c.label for c in v.cells} == {"ppo-bench [learning_rate=0.0001]", "a2c-bench"}
    assert [c.key for c in v.cells] == [c.key for c in lr.cells]  # keys hold no suite name or label


def test_a_set_plan_is_a_variant_only_beside_another_grid_of_its_name(tmp_path, monkeypatch):
    """The plan (no training): a --set run is the file's suite on a store without it, its variant on a store
    that holds the file's name with another grid, and the file's suite again with --replace."""
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "tiny.yaml"
    f.write_text(TINY)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    sets = ["--set", "defaults.timesteps=1500"]
    name = variant_name("tiny", _sets("defaults.timesteps=1500"))
    res = _bench("run", str(f), *sets, "--store", url, "--dry-run")
    assert res.exit_code == 0 and "tiny: 2 cells (dry run" in res.stdout and "variant" not in res.stdout, res.stdout
    from bench.storage.store import Store

    loaded = load_suite(f)
    db = Store(url)
    db.register("tiny", str(f), loaded.suite.model_dump(mode="json"), loaded.env_meta, loaded.cells)
    db.dispose()
    res = _bench("run", str(f), *sets, "--store", url, "--dry-run")
    assert res.exit_code == 0, res.output
    assert f"{name}: 2 cells (dry run" in res.stdout and "a variant of suite tiny" in res.stdout, res.stdout
    assert "ppo-bench [timesteps=1500] on CartPole-v1:" in res.stdout  # its hyperparameters, under its labels
    res = _bench("run", str(f), *sets, "--store", url, "--dry-run", "--only", "label=a2c-bench")  # the file's labels
    assert res.exit_code == 0 and f"{name}: 1 cells" in res.stdout, res.output
    res = _bench("run", str(f), *sets, "--store", url, "--dry-run", "--replace")
    assert res.exit_code == 0 and "tiny: 2 cells (dry run" in res.stdout, res.stdout
    # Overrides that leave the grid as stored are the stored suite (a limit, a description).
    res = _bench("run", str(f), "--set", "defaults.max_wall_minutes=5", "--store", url, "--dry-run")
    assert res.exit_code == 0 and "tiny: 2 cells (dry run" in res.stdout, res.stdout
    # Without --set, another grid under the file's name is still refused, as it was.
    f.write_text(TINY.replace("timesteps: 1000", "timesteps: 1200"))
    res = _bench("run", str(f), "--store", url)
    assert res.exit_code == 2 and "already in the store with another grid" in res.stderr, res.output


@pytest.mark.heavy
def test_a_set_run_on_a_stored_suite_is_a_variant_beside_it(tmp_path, monkeypatch):
    """First run, then `--set defaults.timesteps=N`: the variant runs, the first run's results are kept, and
    the report sets both side by side (each side at its own budget). Four runs of 1,000-1,500 CartPole steps
    and a report: about 70 s on a loaded 2-core machine, so in `nox -s heavy`."""
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "tiny.yaml"
    f.write_text(TINY)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    res = _bench("run", str(f), "--store", url, "--workers", "2")
    assert res.exit_code == 0, res.output
    from bench.storage.store import Store

    db = Store(url, readonly=True)
    first = db.runs_frame("tiny")[["key", "label", "status", "final_return"]]
    db.dispose()
    assert list(first["status"]) == ["done", "done"]

    sets = ["--set", "defaults.timesteps=1500"]
    res = _bench("run", str(f), *sets, "--store", url, "--dry-run")
    assert res.exit_code == 0, res.output
    name = variant_name("tiny", _sets("defaults.timesteps=1500"))
    assert f"{name}: 2 cells (dry run" in res.stdout and "a variant of suite tiny" in res.stdout, res.stdout
    res = _bench("run", str(f), *sets, "--store", url, "--workers", "2")
    assert res.exit_code == 0, res.output
    assert f"{name}: 2 done" in res.stdout, res.stdout
    assert "another grid" not in res.stdout + res.stderr or "its variant" in res.stderr

    db = Store(url, readonly=True)
    kept = db.runs_frame("tiny")[["key", "label", "status", "final_return"]]
    mine = db.runs_frame(name)
    spec = db.suite_specs()[name]
    db.dispose()
    assert kept.equals(first)  # the first run's grid and results, as they were
    assert set(mine["label"]) == {"ppo-bench [timesteps=1500]", "a2c-bench [timesteps=1500]"}
    assert set(mine["timesteps"]) == {1500} and set(mine["status"]) == {"done"}
    assert spec["variant_of"] == "tiny" and spec["overrides"] == ["defaults.timesteps=1500"]
    assert spec["variant"] == "timesteps=1500"
    # `bench status` with the same overrides names the variant and finds its runs.
    res = _bench("status", str(f), *sets, "--store", url)
    assert res.exit_code == 0 and f"{name}: 2 cells" in res.stdout and "done: 2" in res.stdout, res.stdout
    # Running it again resumes the variant: nothing to do.
    res = _bench("run", str(f), *sets, "--store", url)
    assert res.exit_code == 0 and "2 already done before" in res.stdout, res.output

    res = _bench("report", "--store", url, "--out", str(tmp_path / "rep"))
    assert res.exit_code == 0, res.output
    page = (tmp_path / "rep" / "index.html").read_text()
    section = page[page.index('<section id="variant-1">'):]
    section = section[:section.index("</section>")]
    assert f"Variant: timesteps=1500 <span class=\"note\">(suite {name})" in section
    for label in ("ppo-bench", "a2c-bench", "ppo-bench [timesteps=1500]", "a2c-bench [timesteps=1500]"):
        assert f">{label}</td>" in section, label
    assert "CartPole-v1 1,000 steps" in section and "CartPole-v1 1,500 steps" in section
    # --replace keeps its meaning: the file's name takes the new grid, no variant.
    res = _bench("run", str(f), *sets, "--store", url, "--replace", "--dry-run")
    assert res.exit_code == 0 and "tiny: 2 cells (dry run" in res.stdout, res.stdout
    assert json.dumps(spec)  # the stored spec is plain JSON
