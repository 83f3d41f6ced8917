"""`bench speed`: the side-by-side measurement runs, and bad input is refused before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest


def bench(*args, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


@pytest.mark.parametrize("args,needle", [
    (["--kernel", "cuda"], "--kernel: 'cuda' is not a kernel; allowed: auto, numpy, torch"),
    (["--algo", "reinforce"], "--algo: reinforce not comparable with SB3; allowed: ppo, a2c, trpo"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, needle):
    r = bench("speed", *args, "--json", "out.json", cwd=tmp_path)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.json").exists()


def test_tiny_side_by_side_run_writes_both_speeds(tmp_path):
    r = bench("speed", "--algo", "a2c", "--timesteps", "400", "--rounds", "1", "--kernel", "torch",
              "--json", "out.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "out.json").read_text())["results"][0]
    assert res["algo"] == "a2c" and res["kernel"] == "torch" and res["timesteps"] == 400
    assert len(res["own_steps_per_s"]) == 1 and len(res["sb3_steps_per_s"]) == 1
    assert res["own_steps_per_s"][0] > 0 and res["sb3_steps_per_s"][0] > 0
    assert res["ratio"] == pytest.approx(res["own_steps_per_s"][0] / res["sb3_steps_per_s"][0])
    # Every BLAS library in the process ran one thread, including SciPy's, which loads after the pinning.
    meta = json.loads((tmp_path / "out.json").read_text())["meta"]
    assert meta["torch_threads"] == 1 and meta["blas_threads"] == 1


def test_time_to_threshold_is_the_cpu_time_of_the_crossing_episode(monkeypatch):
    """Each seed's steps and CPU seconds to threshold come from the same (first crossing) episode, for
    both implementations; a threshold no run can reach gives None for both."""
    from bench.stats.metrics import first_crossing
    from bench.run import speed

    sampled = []  # the recorders of the samples-to-threshold runs, in order: seed 0 own, sb3, seed 1 own, sb3
    real = speed._timed

    def keep(fn, *args, **kw):
        out = real(fn, *args, **kw)
        if kw["timesteps"] == 800:
            sampled.append(out[1])
        return out

    monkeypatch.setattr(speed, "_timed", keep)
    res = speed.compare("a2c", "CartPole-v1", timesteps=400, rounds=1, sample_seeds=2, sample_timesteps=800,
                        threshold=12.0, window=2, overrides={"kernel": "numpy"})
    got = list(zip(res.own_steps_to_threshold, res.own_cpu_s_to_threshold, res.sb3_steps_to_threshold,
                   res.sb3_cpu_s_to_threshold))
    assert len(got) == 2 and len(sampled) == 4
    for (own_n, own_t, sb3_n, sb3_t), own, sb3 in zip(got, sampled[0::2], sampled[1::2]):
        for n, t, rec in ((own_n, own_t, own), (sb3_n, sb3_t, sb3)):
            i = first_crossing(np.asarray(rec.ep_return), 12.0, 2)
            assert i is not None  # random CartPole episodes last ~22 steps: 12 is reached
            assert i < len(rec.ep_cpu) - 1  # the crossing episode is not the last one
            assert (n, t) == (rec.ep_step[i], rec.ep_cpu[i]) and 0 < n <= 800 and 0 < t < rec.ep_cpu[-1]
    never = speed.compare("a2c", "CartPole-v1", timesteps=400, rounds=1, sample_seeds=1, sample_timesteps=400,
                          threshold=1e9, window=2)
    assert never.own_cpu_s_to_threshold == [None] and never.sb3_cpu_s_to_threshold == [None]
