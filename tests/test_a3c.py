"""A3C: the shared optimiser against torch's; with one worker, A2C's updates on the same data;
global step and episode accounting across workers; no worker outlives ``train``; the learning bar."""

from __future__ import annotations

import math
import multiprocessing as mp

import numpy as np
import pytest
import torch

from bench.algos import a2c, a3c
from bench.algos.hyperparams import resolve
from bench.analysis.metrics import first_crossing
from bench.run.record import Recorder


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


def test_steps_and_episodes_across_workers():
    rec = Recorder()
    p = resolve("a3c", "CartPole-v1", {"n_workers": 2, "n_steps": 16})
    a3c.train("CartPole-v1", p, seed=0, timesteps=3000, recorder=rec)
    # Workers claim whole rollouts until the budget: exactly ceil(3000 / 16) of them, all recorded.
    assert rec.updates == math.ceil(3000 / 16) and rec.steps == rec.updates * 16
    assert len(rec.ep_return) > 20 and np.all(np.diff(rec.ep_step) >= 0) and rec.ep_step[-1] <= rec.steps
    assert sum(rec.ep_length) <= rec.steps
    assert rec.child_cpu_s > 0 and rec.cpu_seconds() >= rec.child_cpu_s
    assert max(_diag(rec, "a3c/staleness")) >= 1  # two workers did overlap
    mem = rec.model_memory()
    assert mem["other_bytes"] == 2 * mem["params_bytes"] and mem["optimizer_bytes"] == mem["params_bytes"]  # RMSprop
    assert not [c for c in mp.active_children() if c.name.startswith("a3c-worker")]


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
    p = resolve("a3c", "CartPole-v1", {"n_workers": 2}).model_copy(update={"gamma": None})
    with pytest.raises(RuntimeError, match=r"(?s)A3C worker \d failed:.*TypeError"):
        a3c.train("CartPole-v1", p, seed=0, timesteps=10_000, recorder=Recorder())
    assert not [c for c in mp.active_children() if c.name.startswith("a3c-worker") and c.is_alive()]
