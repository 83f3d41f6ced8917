"""End to end: suites run into the store, resume without duplicates, survive SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from bench.run.runner import record_cell, run_cell
from bench.storage.owners import this_owner
from bench.storage.store import Store
from bench.suites.suite import load_suite
from bench.storage.urls import StoreURL

SUITES = Path(__file__).resolve().parent.parent / "suites"


def bench(*args, cwd, timeout=600, **kw):
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, **kw)


def done_rows(url, suite):
    df = Store(url).runs_frame(suite)
    return df


@pytest.mark.heavy
def test_smoke_suite_twice_then_export(tmp_path):
    """Every algorithm × implementation on both smoke envs (seed 0; the suite's second seed adds run time,
    not coverage), run twice: the second run re-runs nothing; then the export and what each run stored."""
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    first = bench("run", str(SUITES / "smoke.yaml"), "--store", url, "--workers", "2", "--only", "seed=0", cwd=tmp_path)
    assert first.returncode == 0, first.stderr + first.stdout
    cells = [c for c in load_suite(SUITES / "smoke.yaml").cells if c.seed == 0]
    assert {(c.algo, c.impl) for c in cells} == {(c.algo, c.impl) for c in load_suite(SUITES / "smoke.yaml").cells}
    second = bench("run", str(SUITES / "smoke.yaml"), "--store", url, "--only", "seed=0", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"{len(cells)} done already" in second.stderr and "0 to run" in second.stderr

    out = tmp_path / "runs.csv"
    exp = bench("export", "--store", url, "--suite", "smoke", "--format", "csv", "--out", str(out), cwd=tmp_path)
    assert exp.returncode == 0, exp.stderr
    df = pd.read_csv(out)
    assert (df.loc[df["seed"] != 0, "status"] == "pending").all()  # registered with the suite, not run
    df = df[df["seed"] == 0]
    required = {"suite", "env", "algo", "impl", "label", "seed", "status", "total_steps", "wall_s", "cpu_s",
                "steps_to_threshold", "seconds_to_threshold", "final_return", "auc"}
    assert required <= set(df.columns)
    assert len(df) == len(cells) and (df["status"] == "done").all()
    assert (df["attempt"] == 1).all()  # the second run re-ran nothing
    assert df.groupby(["env", "label", "seed"]).size().max() == 1
    assert (df["total_steps"] >= df["timesteps"]).all()
    assert df["final_return"].notna().all() and (df["wall_s"] > 0).all()

    # Every run stored its episodes, diagnostics and provenance.
    db = Store(url)
    for key in df["key"]:
        eps = db.episodes_of(key)
        assert len(eps) == df.loc[df.key == key, "episodes"].item() > 0
        assert eps["step"].is_monotonic_increasing and eps["wall_s"].is_monotonic_increasing
        names = set(db.diagnostics_of(key)["name"])
        assert "loss/policy" in names
        assert ("loss/value" in names) == (df.loc[df.key == key, "algo"].item() not in ("grpo", "rloo"))  # no critic
    import json

    meta = json.loads(df["meta"].iloc[0])
    for k in ("versions", "python", "torch_threads", "cpu_model", "host", "git_commit", "started_at", "finished_at"):
        assert k in meta
    assert meta["torch_threads"] == 1 and meta["blas_threads"] == 1  # one thread each per run (the NumPy kernel's BLAS too)
    # The speed probe as each run started and ended (the CPU's name does not tell machines apart), and CPUID.
    for m in df["meta"]:
        probe = json.loads(m)["cpu_probe_ms"]
        assert set(probe) == {"start", "end"} and all(0 < v < 10_000 for v in probe.values()), probe
    assert len(meta["cpu_id"].split("/")) == 3
    assert all("accelerator" not in json.loads(m) for m in df["meta"])  # CPU runs: no GPU recorded
    # What picks the float-rounding code paths (a seed's returns differ across CPUs): recorded with the run.
    import torch

    fp = meta["float_paths"]
    assert fp["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert set(fp["cpu_simd"]) <= {"avx2", "fma", "avx512f"} and "mkl_cbwr" in fp and isinstance(fp["blas_kernels"], list)
    # Every algorithm × implementation records its models' memory, optimiser state included.
    for m in df["meta"]:
        mem = json.loads(m)["model_memory"]
        assert mem["params_bytes"] > 0 and mem["optimizer_bytes"] > 0
        assert mem["total_bytes"] == mem["params_bytes"] + mem["other_bytes"] + mem["optimizer_bytes"]

    status = bench("status", str(SUITES / "smoke.yaml"), "--store", url, cwd=tmp_path)
    assert status.returncode == 0 and f"done: {len(cells)}" in status.stdout, status.stdout[-500:]

    pq = tmp_path / "runs.parquet"
    assert bench("export", "--store", url, "--format", "parquet", "--out", str(pq), cwd=tmp_path).returncode == 0
    assert len(pd.read_parquet(pq)) == 2 * len(cells)  # the seed-0 runs and the pending seed-1 cells


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc to find worker processes")
@pytest.mark.heavy
def test_sigkill_mid_suite_then_resume(tmp_path):
    suite = tmp_path / "kill.yaml"
    suite.write_text(
        "name: kill\nseeds: 4\ndefaults: {timesteps: 8000, window: 10}\n"
        "envs: [{id: CartPole-v1}]\nalgorithms: [{algo: ppo, impl: sb3}]\n"
    )
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    proc = subprocess.Popen([sys.executable, "-m", "bench", "run", str(suite), "--store", url, "--workers", "2"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    eng = None
    deadline = time.time() + 240
    statuses: list[str] = []
    while time.time() < deadline:
        time.sleep(0.2)
        if (tmp_path / "bench.db").exists():
            eng = eng or sa.create_engine(url)
            try:
                with eng.connect() as c:
                    statuses = [r[0] for r in c.execute(sa.text("select status from runs"))]
            except sa.exc.OperationalError:
                continue
            if statuses.count("done") >= 1 and statuses.count("running") >= 1:
                break
    else:
        proc.kill()
        pytest.fail(f"suite never reached a done + running state: {statuses}")
    workers = _children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # The workers die with their parent (PR_SET_PDEATHSIG): no orphan keeps training.
    t = time.time()
    while any(Path(f"/proc/{w}").exists() for w in workers) and time.time() - t < 10:
        time.sleep(0.1)
    assert not [w for w in workers if Path(f"/proc/{w}").exists()], "orphan workers survived"

    db = Store(url)
    before = db.runs_frame("kill")
    done_before = set(before.loc[before.status == "done", "key"])
    running_before = set(before.loc[before.status == "running", "key"])
    assert done_before and running_before
    # Interrupted attempts left no data behind.
    for key in before.loc[before.status != "done", "key"]:
        assert len(db.episodes_of(key)) == 0

    again = bench("run", str(suite), "--store", url, "--workers", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    after = db.runs_frame("kill")
    assert len(after) == 4 and (after.status == "done").all()
    assert after.key.is_unique
    # Runs finished before the kill were kept, not re-run.
    assert (after.set_index("key").loc[sorted(done_before), "attempt"] == 1).all()
    by_key = after.set_index("key")["attempt"]
    assert (by_key[sorted(running_before)] == 2).all()  # the killed attempts were re-run once
    untouched = set(after.key) - done_before - running_before
    assert (by_key[sorted(untouched)] == 1).all() if untouched else True


def test_same_sb3_cell_twice_gives_identical_returns():
    cell = next(c for c in load_suite(SUITES / "smoke.yaml").cells if c.algo == "ppo")
    r1, e1 = record_cell(cell)
    r2, e2 = record_cell(cell)
    assert e1 is None and e2 is None
    assert len(r1.ep_return) > 5
    assert r1.ep_return == r2.ep_return and r1.ep_step == r2.ep_step


def test_run_cell_in_process_records_a_done_row(store_url):
    loaded = load_suite(SUITES / "smoke.yaml")
    cell = loaded.cells[0]
    db = Store(store_url)
    db.register("smoke", "smoke.yaml", {}, loaded.env_meta, [cell])
    out = run_cell(StoreURL.parse(store_url), cell, this_owner())
    assert out.status == "done", out.error
    row = db.rows([cell.key])[cell.key]
    assert row.status == "done" and row.total_steps >= cell.timesteps and row.episodes > 0
    # A second call finds it done and does nothing.
    assert run_cell(StoreURL.parse(store_url), cell, this_owner()).status == "skipped"


@pytest.mark.heavy
def test_failures_are_recorded_and_the_suite_goes_on(tmp_path):
    """A diverging cell (NaN loss) and a cell that raises are failed runs; the rest completes."""
    import torch

    suite = tmp_path / "fail.yaml"
    cuda = "" if torch.cuda.is_available() else (
        "  - {algo: ppo, impl: sb3, label: no-gpu, hyperparams: {device: cuda}}\n"
    )
    suite.write_text(
        "name: fail\nseeds: [0]\ndefaults: {timesteps: 4096, window: 5}\nenvs: [{id: Pendulum-v1}]\nalgorithms:\n"
        # A learning rate of 1e6 without gradient clipping blows the policy up within one update.
        "  - {algo: a2c, impl: sb3, label: blowup, hyperparams: {learning_rate: 1000000.0, max_grad_norm: 1000000.0, use_rms_prop: false}}\n"
        "  - {algo: a2c, impl: sb3, label: fine}\n" + cuda
    )
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    p = bench("run", str(suite), "--store", url, "--workers", "1", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    n_failed = 2 if cuda else 1
    assert f"1 done, {n_failed} failed" in p.stdout
    df = Store(url).runs_frame("fail").set_index("label")
    assert df.loc["fine", "status"] == "done"
    assert df.loc["blowup", "status"] == "failed" and "Diverged" in df.loc["blowup", "error"]
    if cuda:
        assert df.loc["no-gpu", "status"] == "failed" and "CUDA is not available" in df.loc["no-gpu", "error"]
    # A re-run retries the failed cells only.
    again = bench("run", str(suite), "--store", url, cwd=tmp_path)
    assert "1 done already" in again.stderr and f"{n_failed} to run" in again.stderr


def _start_until_a_run_is_running(tmp_path, name):
    """Start `bench run` on 4 SB3 PPO CartPole cells in a new session; return once one is running.

    The budget is far more than any cell can finish in the test's time, so the signal that follows
    always finds work in flight, however fast or slow the machine (at 30k steps, a quick host could
    finish every cell before a loaded poller saw one running, and the run then exited 0).
    """
    suite = tmp_path / f"{name}.yaml"
    suite.write_text(
        f"name: {name}\nseeds: 4\ndefaults: {{timesteps: 2000000, window: 10}}\n"
        "envs: [{id: CartPole-v1}]\nalgorithms: [{algo: ppo, impl: sb3}]\n"
    )
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    # SIGINT back to its default first, as in a job a terminal runs in the foreground. A test session
    # that is itself a background job of a non-interactive shell (CI started with `&`) has SIGINT
    # ignored, the child inherits that, Python keeps an inherited SIG_IGN, and Ctrl-C would never reach it.
    start = ("import signal, runpy, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
             "sys.argv = ['bench', *sys.argv[1:]]; runpy.run_module('bench', run_name='__main__', alter_sys=True)")
    proc = subprocess.Popen([sys.executable, "-c", start, "run", str(suite), "--store", url, "--workers", "2"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    eng = sa.create_engine(url)
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.2)
        try:
            with eng.connect() as c:
                if c.execute(sa.text("select count(*) from runs where status = 'running'")).scalar() >= 1:
                    break
        except sa.exc.OperationalError:
            continue
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"no cell was running after 120 s: {proc.communicate()[1][-2000:]}")
    eng.dispose()
    time.sleep(1.0)
    return proc, url


def _communicate_or_kill_the_group(proc, timeout=60):
    """Wait for the signalled run; if it hangs, kill its whole group so no worker trains on after the test."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        pytest.fail(f"bench run did not stop within {timeout} s of the signal: {err[-2000:]}")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="POSIX signals and /proc")
def test_ctrl_c_stops_cleanly_and_marks_runs_interrupted(tmp_path):
    # Its own session, so the SIGINT goes to the whole process group as a terminal's Ctrl-C does.
    proc, url = _start_until_a_run_is_running(tmp_path, "intr")
    os.killpg(proc.pid, signal.SIGINT)
    out, err = _communicate_or_kill_the_group(proc)
    assert proc.returncode == 130, err
    assert "Interrupted" in err and "Traceback" not in err
    df = Store(url).runs_frame("intr")
    assert "running" not in set(df.status)
    assert (df.status == "interrupted").any()
    interrupted = df.loc[df.status == "interrupted", "key"]
    assert all(len(Store(url).episodes_of(k)) == 0 for k in interrupted)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="POSIX signals and /proc")
def test_sigterm_to_the_parent_alone_stops_cleanly_and_leaves_no_worker(tmp_path):
    # A background `bench run` started by a script has SIGINT ignored (POSIX shells do that to
    # background jobs), so `kill PID` is how it is stopped: only the parent gets the signal.
    proc, url = _start_until_a_run_is_running(tmp_path, "term")
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    workers = [int(c) for c in children if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()]
    assert len(workers) == 2
    os.kill(proc.pid, signal.SIGTERM)
    out, err = _communicate_or_kill_the_group(proc)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Interrupted" in err and "Traceback" not in err
    time.sleep(0.5)
    assert not [w for w in workers if Path(f"/proc/{w}").exists()
                and "spawn_main" in Path(f"/proc/{w}/cmdline").read_text()], "a worker outlived bench run"
    df = Store(url).runs_frame("term")
    assert "running" not in set(df.status)
    interrupted = df[df.status == "interrupted"]
    assert len(interrupted) >= 1 and set(interrupted.error) == {"interrupted by SIGTERM"}


def test_a_gpu_run_records_its_gpu_and_the_analysis_counts_it_as_part_of_the_machine(monkeypatch):
    """device: cuda (or auto where a GPU is) records the GPU; a CPU run, or auto without one, records none.
    The real path ran on an H100 (2026-11-26, docs/cluster.md); here torch.cuda is stood in for."""
    import torch

    from bench.analysis.scoring import hardware_of
    from bench.run.provenance import accelerator_meta
    from bench.suites.suite import Cell

    def cell(**hp):
        return Cell("gpu", "CartPole-v1", "ppo", "bench", "ppo-bench", 0, 1000, 475.0, 10, None, hp)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert accelerator_meta(cell()) == accelerator_meta(cell(device="cpu")) == accelerator_meta(cell(device="auto")) == {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"Test GPU {i}")
    assert accelerator_meta(cell(device="cpu")) == {}
    for device in ("cuda", "auto"):
        acc = accelerator_meta(cell(device=device))["accelerator"]
        assert acc == {"device": "cuda", "name": "Test GPU 1", "cuda": torch.version.cuda, "count": 2}
    meta = {"cpu_model": "Xeon", "torch_threads": 1}
    assert hardware_of({**meta, "accelerator": acc}) == "Xeon · 1 torch thread(s) · GPU Test GPU 1"
    assert hardware_of({**meta, "accelerator": acc}) != hardware_of(meta)  # never pooled with CPU runs as one machine


def test_avx512_blas_kernel_on_a_cpu_without_it_is_one_line(monkeypatch):
    """A run recorded with OpenBLAS's SkylakeX kernel cannot be reproduced on a CPU without AVX-512: the
    worker would die of SIGILL at its first matmul ("worker process died"), so `bench run` says why first."""
    from bench.run import provenance

    monkeypatch.setattr(provenance, "_cpuinfo", lambda f: "fpu avx2 fma" if f == "flags" else "AMD EPYC")
    why = provenance.blas_kernel_problem({"OPENBLAS_CORETYPE": "SkylakeX"})
    assert why is not None and why.startswith("OPENBLAS_CORETYPE=SkylakeX: that kernel needs AVX-512") and "\n" not in why
    assert provenance.blas_kernel_problem({"OPENBLAS_CORETYPE": "Haswell"}) is None
    assert provenance.blas_kernel_problem({}) is None
    monkeypatch.setattr(provenance, "_cpuinfo", lambda f: "fpu avx2 fma avx512f" if f == "flags" else "AMD EPYC")
    assert provenance.blas_kernel_problem({"OPENBLAS_CORETYPE": "skylakex"}) is None
