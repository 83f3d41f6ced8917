"""A3C: the shared optimiser against torch's; with one worker, A2C's updates on the same data;
global step and episode accounting across workers; no worker outlives ``train``; the learning bar."""

from __future__ import annotations

import math
import multiprocessing as mp

import numpy as np
import pytest
import torch

from bench.algos.a2c import a2c
from bench.algos.a3c import a3c
from bench.algos.hyperparams import resolve
from bench.stats.metrics import first_crossing
from bench.storage.record import Recorder


class _Keep(Recorder):
    """Keeps the parameters the algorithm notes, to read them after training."""

    def note_models(self, params, optimizers=(), *, other=()):
        super().note_models(params, optimizers, other=other)
        self.kept = list(self._models[0])

    def flat(self) -> torch.Tensor:
        return torch.cat([q.detach().reshape(-1) for q in self.kept]).clone()


def _diag(rec: Recorder, key: str) -> list[float]:
    return [v for _, k, v in rec.diag if k == key]


@pytest.mark.parametrize("rms", [True, False])
def test_shared_optimizer_is_torchs_rule(rms):
    p = resolve("a3c", "CartPole-v1", {"use_rms_prop": rms})
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(7, generator=g)
    ref = torch.nn.Parameter(theta.clone())
    torch_opt = a2c.make_optimizer([ref], p)
    mine, opt = theta.clone(), a3c.SharedOptimizer(7, p)
    for _ in range(5):
        grad = torch.randn(7, generator=g)
        ref.grad = grad.clone()
        torch_opt.step()
        opt.step(mine, grad, p.learning_rate)
    torch.testing.assert_close(mine, ref.detach(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kernel", ["numpy", "torch"])
def test_one_worker_takes_a2cs_updates_on_the_same_data(kernel):
    """n_workers 1: the same rollouts, gradients (norms and losses per update) and parameters as A2C, n_envs 1."""
    over = {"n_steps": 8, "kernel": kernel, "learning_rate": 1e-3}
    steps = 3 * 8  # three updates: the later rollouts depend on the earlier updates
    ra, rb = _Keep(), _Keep()
    a2c.train("CartPole-v1", resolve("a2c", "CartPole-v1", {**over, "n_envs": 1}), seed=4, timesteps=steps, recorder=ra)
    a3c.train("CartPole-v1", resolve("a3c", "CartPole-v1", {**over, "n_workers": 1}), seed=4, timesteps=steps,
              recorder=rb)
    assert ra.steps == rb.steps == steps and rb.updates == ra.updates == 3
    assert ra.ep_return == rb.ep_return and ra.ep_step == rb.ep_step
    for key in ("grad/norm", "loss/policy", "loss/value", "policy/entropy"):
        np.testing.assert_allclose(_diag(rb, key), _diag(ra, key), rtol=1e-5, err_msg=key)
    torch.testing.assert_close(rb.flat(), ra.flat(), rtol=1e-5, atol=1e-6)


def test_steps_and_episodes_across_workers_and_a_fast_learning_check():
    rec = Recorder()
    p = resolve("a3c", "CartPole-v1", {"n_workers": 2, "n_steps": 8})
    a3c.train("CartPole-v1", p, seed=0, timesteps=15_000, recorder=rec)
    # Workers claim whole rollouts until the budget: exactly ceil(15000 / 8) of them, all recorded.
    assert rec.updates == math.ceil(15_000 / 8) and rec.steps == rec.updates * 8
    assert len(rec.ep_return) > 20 and np.all(np.diff(rec.ep_step) >= 0) and rec.ep_step[-1] <= rec.steps
    assert sum(rec.ep_length) <= rec.steps
    assert rec.child_cpu_s > 0 and rec.cpu_seconds() >= rec.child_cpu_s
    assert max(_diag(rec, "a3c/staleness")) >= 1  # two workers did overlap
    mem = rec.model_memory()
    assert mem["other_bytes"] == 2 * mem["params_bytes"] and mem["optimizer_bytes"] == mem["params_bytes"]  # RMSprop
    assert not [c for c in mp.active_children() if c.name.startswith("a3c-worker")]
    # Learning (not bit-reproducible, so a loose check): the last 20 episodes well above the first 20 (~22).
    r = np.asarray(rec.ep_return)
    assert r[-20:].mean() > 1.5 * r[:20].mean(), (r[:20].mean(), r[-20:].mean())


class _Boom(Exception):
    pass


def test_no_worker_outlives_a_failed_run():
    class R(Recorder):
        def after_update(self, policy=None):
            super().after_update(policy)
            if self.updates == 5:
                raise _Boom

    with pytest.raises(_Boom):
        a3c.train("CartPole-v1", resolve("a3c", "CartPole-v1", {"n_workers": 2}), seed=0, timesteps=10**6,
                  recorder=R())
    assert not [c for c in mp.active_children() if c.name.startswith("a3c-worker") and c.is_alive()]


def test_a_worker_error_reaches_the_parent():
    # A γ that only the workers' return computation touches (model_copy skips validation): it fails there.
    p = resolve("a3c", "CartPole-v1", {"n_workers": 1}).model_copy(update={"gamma": None})
    with pytest.raises(RuntimeError, match=r"(?s)A3C worker \d failed:.*TypeError"):
        a3c.train("CartPole-v1", p, seed=0, timesteps=10_000, recorder=Recorder())
    assert not [c for c in mp.active_children() if c.name.startswith("a3c-worker") and c.is_alive()]


# -- the learning bar ---------------------------------------------------------------
class _Solved(Exception):
    pass


class _StopWhenSolved(Recorder):
    """Ends a run once the 20-episode trailing mean reaches 475 (the workers are stopped by ``train``)."""

    def after_update(self, policy=None):
        super().after_update(policy)
        if self.ep_return and self.ep_return[-1] >= 475 and first_crossing(np.asarray(self.ep_return), 475, 20) is not None:
            raise _Solved


@pytest.mark.learning
def test_a3c_cartpole_bar_five_seeds(learning_record):
    crossed = {}
    for seed in range(5):
        rec = _StopWhenSolved()
        try:
            a3c.train("CartPole-v1", resolve("a3c", "CartPole-v1", {}), seed=seed, timesteps=500_000, recorder=rec)
        except _Solved:
            pass
        i = first_crossing(np.asarray(rec.ep_return), 475, 20)
        crossed[seed] = None if i is None else rec.ep_step[i]
    ok = sum(s is not None for s in crossed.values()) >= 3
    learning_record(bar="A3C (defaults: 4 workers x 1 env, n_steps 5, RMSprop lr 7e-4) CartPole-v1: 475 within 500k "
                        "steps on >= 3/5 seeds (steps-to-475 per seed; not bit-reproducible)",
                    values=list(crossed.values()), passed=ok)
    assert ok, crossed
