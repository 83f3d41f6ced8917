"""Synthetic results stores for the report and recommendation tests and the report benchmark.

Runs are written through the store's real path (``register`` → ``claim`` →
``finish``) with summaries computed by :func:`bench.stats.metrics.summarize`, so the
report reads exactly what ``bench run`` would have written. Each run's learning
curve is planted: ``random + (threshold - random) * skill * (1 - exp(-steps / tau))``
plus Gaussian noise, so the right answer of every comparison is known.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from bench.envs import get_spec
from bench.stats.metrics import summarize
from bench.storage.schema import RunResult
from bench.storage.store import Store
from bench.suites.suite import Cell, cell_key

#: Random-policy returns used as planted anchors (so tests never simulate an env for them).
RANDOM = {"CartPole-v1": 20.0, "MountainCar-v0": -200.0, "Pendulum-v1": -1200.0, "LunarLander-v3": -180.0,
          "LunarLanderContinuous-v3": -180.0, "HalfCheetah-v5": -280.0, "Hopper-v5": 18.0, "Walker2d-v5": 0.0, "Humanoid-v5": 120.0,
          "ALE/Breakout-v5": 1.7, "ALE/Pong-v5": -20.7, "Acrobot-v1": -500.0}


@dataclass(frozen=True)
class Planted:
    """How one algorithm label behaves: final level (1 = threshold; per env in ``env_skill``), learning speed,
    seconds per step, noise, wall seconds per CPU second (above 1: the run shared its core), and the CPU model
    its runs record (``cpu_models``, one per seed, cycled, overrides it)."""

    label: str
    algo: str
    impl: str
    skill: float
    tau: float = 0.25  # fraction of the budget at which 63% of the skill is reached
    sec_per_kstep: float = 0.5
    noise: float = 0.05  # per-run skill noise (fraction of the threshold gap)
    env_skill: tuple[tuple[str, float], ...] = ()  # (env id, skill) pairs that override ``skill`` on those envs
    wall_per_cpu: float = 1.0
    cpu_model: str = "synthetic CPU"
    cpu_models: tuple[str, ...] = ()
    probe_ms: float | None = 10.0  # the speed probe its runs record (bench.run.probe); None: none (an unknown machine)
    cpu_speed: tuple[tuple[str, float], ...] = ()  # (CPU model, factor on CPU seconds) pairs: slower machines


def write_store(url: str, envs: list[str], algos: list[Planted], seeds: int, *, timesteps: int = 20_000,
                episodes: int = 120, suite: str = "synthetic", diag_every: int = 8, anchors: bool = True,
                meta_extra: dict | None = None, time_scale_us: float = 1000.0, spec_extra: dict | None = None,
                eval_offset: float | None = None, cpu_seconds: float | None = None) -> Store:
    """Write ``len(envs) × len(algos) × seeds`` done runs; returns the store.

    :param cpu_seconds: an equal-compute budget: each run's cells carry it, and each run stops at the
        first episode at or past that many CPU seconds (``meta.stopped_by``), so faster labels run more steps.

    :param eval_offset: when given, each run also has one periodic evaluation at its last step, whose mean
        return is its final training return plus this offset (so tests can tell the two apart).
    """
    db = Store(url)
    env_meta = {}
    cells = []
    for e in envs:
        s = get_spec(e)
        env_meta[e] = dict(threshold=s.threshold, threshold_source=s.threshold_source, action=s.action, obs=s.obs,
                           reward=s.reward, family=s.family, time_scale_us=time_scale_us)
        for a in algos:
            for seed in range(seeds):
                c = Cell(suite=suite, env_id=e, algo=a.algo, impl=a.impl, label=a.label, seed=seed, timesteps=timesteps,
                         threshold=s.threshold, window=10, eval=None, hyperparams={"planted": a.label},
                         cpu_seconds=cpu_seconds)
                cells.append((Cell(**{**c.__dict__, "key": cell_key(c.identity())}), a))
    db.register(suite, f"{suite}.yaml", {"name": suite, **(spec_extra or {})}, env_meta, [c for c, _ in cells])
    for c, a in cells:
        thr = env_meta[c.env_id]["threshold"]
        lo = RANDOM.get(c.env_id, 0.0)
        rng = np.random.default_rng(zlib.crc32(f"{c.env_id}|{a.label}|{c.seed}".encode()))
        skill = dict(a.env_skill).get(c.env_id, a.skill) + a.noise * rng.standard_normal()
        steps = np.sort(rng.integers(1, timesteps + 1, episodes))
        steps[-1] = timesteps
        curve = lo + (thr - lo) * skill * (1 - np.exp(-steps / (a.tau * timesteps)))
        ret = curve + 0.05 * abs(thr - lo) * rng.standard_normal(episodes)
        cpu_model = a.cpu_models[c.seed % len(a.cpu_models)] if a.cpu_models else a.cpu_model
        cpu = steps * a.sec_per_kstep / 1000.0 * dict(a.cpu_speed).get(cpu_model, 1.0)
        stopped_by = "timesteps"
        if cpu_seconds is not None and cpu[-1] > cpu_seconds:
            n = int(np.searchsorted(cpu, cpu_seconds)) + 1  # up to the first episode at or past the budget
            steps, curve, ret, cpu = steps[:n], curve[:n], ret[:n], cpu[:n]
            stopped_by = "cpu_seconds"
        wall = cpu * a.wall_per_cpu
        sm = summarize(steps, wall, ret, threshold=thr, window=c.window)
        upd = steps[::diag_every]
        diag = [(int(s), "policy/entropy", float(1.0 - s / timesteps)) for s in upd]
        diag += [(int(s), "policy/approx_kl", float(0.01 + 0.001 * rng.standard_normal())) for s in upd]
        meta = {"versions": {"bench": "0.1.0"}, "cpu_model": cpu_model, "torch_threads": 1, "cpu_count": 2,
                "host": "synthetic", "git_commit": "0" * 40, "git_dirty": False, "python": "3.11",
                "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:01:00+00:00",
                **({"cpu_probe_ms": {"start": a.probe_ms, "end": a.probe_ms}} if a.probe_ms else {}),
                **({"stopped_by": stopped_by} if cpu_seconds is not None else {}), **(meta_extra or {})}
        attempt = db.claim(c.key, "synthetic:1:1")
        if attempt is None:  # the same cell in another suite already ran: shared by key, as in bench run
            assert db.rows([c.key])[c.key].status == "done"
            continue
        db.finish(c.key, attempt, "done", RunResult(
            summary=dict(total_steps=int(steps[-1]), episodes=sm.episodes, wall_s=float(wall[-1]), cpu_s=float(cpu[-1]),
                         steps_to_threshold=sm.steps_to_threshold, seconds_to_threshold=sm.seconds_to_threshold,
                         final_return=sm.final_return, auc=sm.auc),
            episodes={"step": steps, "wall_s": wall, "cpu_s": cpu, "ret": ret, "length": np.full(len(steps), 10)},
            diagnostics=diag, meta=meta,
            evaluations=[] if eval_offset is None else [(int(steps[-1]), float(wall[-1]), sm.final_return + eval_offset, 0.0, 5)]))
    if anchors:
        for e in envs:
            db.put_anchor(e, RANDOM.get(e, 0.0), env_meta[e]["threshold"], 20, 0)
    return db


def write_status_suite(folder, *, seeds: int, envs: list[str], algos: list[tuple[str, str]], done: int = 0,
                       failed: int = 0, running: int = 0, timesteps: int = 100_000):
    """A suite of ``len(envs) × len(algos) × seeds`` cells registered in a store, its first ``done`` cells
    done, the next ``failed`` failed (error ``planted failure <i>``) and the next ``running`` running, a
    quarter of their steps done (``bench status``'s summary and its benchmark). Returns (suite file, URL)."""
    from pathlib import Path

    from bench.suites.suite import load_suite

    folder = Path(folder)
    f = folder / "status.yaml"
    f.write_text(f"name: status\nseeds: {seeds}\ndefaults: {{timesteps: {timesteps}}}\n"
                 f"envs: [{', '.join('{id: ' + e + '}' for e in envs)}]\n"
                 f"algorithms: [{', '.join(f'{{algo: {a}, impl: {i}}}' for a, i in algos)}]\n")
    loaded = load_suite(f)
    url = f"sqlite:///{folder / 'status.db'}"
    db = Store(url)
    db.register("status", str(f), loaded.suite.model_dump(mode="json"), loaded.env_meta, loaded.cells)
    from bench.storage.owners import this_owner

    me = this_owner()  # this process, alive: its running runs are not stale
    one = {"step": [100], "wall_s": [1.0], "cpu_s": [1.0], "ret": [10.0], "length": [100]}
    for i, c in enumerate(loaded.cells[:done + failed + running]):
        attempt = db.claim(c.key, me)
        if i < done + failed:
            db.finish(c.key, attempt, "done" if i < done else "failed",
                      RunResult({"total_steps": timesteps, "final_return": 10.0}, one, [], [], {}),
                      error=None if i < done else f"planted failure {i - done}")
        else:
            db.heartbeat(c.key, attempt, timesteps // 4, 1.0)
    db.dispose()
    return f, url
