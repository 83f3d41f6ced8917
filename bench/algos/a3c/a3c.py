"""Asynchronous Advantage Actor-Critic (Mnih et al. 2016, "Asynchronous Methods for Deep
Reinforcement Learning", Algorithm S3 and §4 "Optimization": shared RMSProp).

``n_workers`` worker processes each own an env (``n_envs`` of them) and a local copy θ' of the
policy and value function. In a loop each worker

1. synchronises θ' ← θ from the parameters in shared memory,
2. collects ``n_steps`` steps, computes n-step returns R_t (GAE(λ) with ``gae_lambda`` < 1) and
   the gradient of A2C's loss at θ' (the very code of :func:`bench.algos.a2c.a2c.a2c_gradient`),
   clipped to ``max_grad_norm``,
3. applies it to θ without any lock (Hogwild, Recht et al. 2011), with RMSprop statistics g
   that are shared by all workers too, as the paper's "shared RMSProp":
   g ← α g + (1 − α) Δθ²,  θ ← θ − η Δθ / (√g + ε)  (torch's RMSprop; Adam with ``use_rms_prop: false``).

The parent process owns θ (a FlatParams buffer moved to shared memory), the optimiser
statistics and the recorder. Workers report every update through a queue: its env steps, the
episodes that finished in it (with their offsets inside the rollout) and its diagnostics. The
parent drains the queue in arrival order, so the recorder counts global env steps across workers
and records episodes in the order they finished, calls ``after_update`` once per worker update
(heartbeats and evaluation happen in the parent) and adds the workers' CPU seconds to the run's.

Not bit-reproducible, by nature: which worker's gradient lands first, and on which parameters,
depends on the OS scheduler, so the same seed gives different runs. With ``n_workers: 1`` there is
no race and a run is A2C with one env (``tests/test_a3c.py`` checks the update against A2C's).

Workers are spawn-started (fork after torch's threads exist is unsafe), pinned to one torch and
one BLAS thread each, die with the parent (Linux ``PR_SET_PDEATHSIG``) and are stopped and joined
whenever ``train`` returns or raises.
"""

from __future__ import annotations

import ctypes
import math
import os
import queue as queue_mod
import signal
import sys
import time
import traceback
from typing import Any

import torch
import torch.multiprocessing as tmp

from bench.algos.checkpoint import savable
from bench.algos.a2c.a2c import a2c_gradient
from bench.algos.collect import Acting, rollout_collector
from bench.algos.common import FlatParams, Normalizer, explained_variance, pick_device, pin_one_thread, seed_everything
from bench.algos.loop import schedule_at
from bench.algos.a3c.spec import A3CParams
from bench.algos.policy import make_policy
from bench.envs import make_vec_env
from bench.storage.record import RecorderProtocol

#: Seconds the parent waits on the queue before checking that its workers are still alive.
POLL_S = 1.0


# --------------------------------------------------------------------------- #
# Shared optimiser
# --------------------------------------------------------------------------- #
class SharedOptimizer:
    """RMSprop (α 0.99, as SB3's A2C) or Adam (ε 1e-5) whose statistics live in shared memory.

    :meth:`step` is torch's update rule (``torch.optim.RMSprop`` / ``Adam`` without momentum,
    weight decay or amsgrad) on one flat parameter tensor, done in place without locks.
    """

    def __init__(self, n: int, p: A3CParams):
        self.rms, self.eps = p.use_rms_prop, p.rms_prop_eps if p.use_rms_prop else 1e-5
        self.alpha, self.betas = 0.99, (0.9, 0.999)
        # RMSprop: [square_avg]; Adam: [step, exp_avg, exp_avg_sq] (the step count as a float64 tensor).
        shapes = [(n,)] if self.rms else [(1,), (n,), (n,)]
        self.state = [torch.zeros(s, dtype=torch.float64 if s == (1,) else torch.float32).share_memory_()
                      for s in shapes]

    def step(self, param: torch.Tensor, grad: torch.Tensor, lr: float) -> None:
        with torch.no_grad():
            if self.rms:
                (sq,) = self.state
                sq.mul_(self.alpha).addcmul_(grad, grad, value=1 - self.alpha)
                param.addcdiv_(grad, sq.sqrt().add_(self.eps), value=-lr)
                return
            t, m, v = self.state
            b1, b2 = self.betas
            t += 1
            k = float(t)
            m.lerp_(grad, 1 - b1)
            v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            denom = (v.sqrt() / math.sqrt(1 - b2 ** k)).add_(self.eps)
            param.addcdiv_(m, denom, value=-lr / (1 - b1 ** k))


# --------------------------------------------------------------------------- #
# Workers
# --------------------------------------------------------------------------- #
class _Tally:
    """A worker's stand-in recorder for its envs' monitors: steps and finished episodes."""

    def __init__(self) -> None:
        self.steps = 0
        self.episodes: list[tuple[int, float, int]] = []  # (steps so far, return, length)

    def episode(self, ret: float, length: int) -> None:
        self.episodes.append((self.steps, float(ret), int(length)))


def _die_with_parent() -> None:
    # As the runner's workers (bench.run.pool.init_worker): a parent killed with SIGKILL must
    # not leave workers training on. Ctrl-C is the parent's to handle.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass
    if os.getppid() == 1:
        os._exit(1)


def _worker(rank: int, env_id: str, p: A3CParams, seed: int, timesteps: int, shared: torch.Tensor,
            opt: SharedOptimizer, counters: Any, out: Any, stop: Any) -> None:
    """One actor-learner: sync θ' ← θ, roll out, take A2C's gradient, apply it to θ; report each update."""
    _die_with_parent()
    pin_one_thread()
    try:
        # The start of a run as in a2c.py (common.setup's order), on this worker's own seeds;
        # worker 0 gets exactly A2C's, so a one-worker run is A2C with one env.
        device = pick_device(p.device)
        rng = seed_everything(seed + rank)
        tally = _Tally()
        envs = make_vec_env(env_id, p.n_envs, recorder=tally, vec_env=p.vec_env)
        norm = Normalizer(envs.single_observation_space.shape, p.n_envs, p.gamma,
                          obs=p.normalize_obs, reward=p.normalize_reward)
        policy = make_policy(envs, p).to(device)
        flat = FlatParams(list(policy.parameters()))  # θ', this worker's copy
        collector = rollout_collector(envs, policy, norm, p, seed=seed + rank * p.n_envs, device=device, rng=rng)
        kern = collector.kernel
        rng.integers(2**31)  # a2c.py draws its gradient-noise generator's seed here: keep the streams equal
        batch = p.n_steps * p.n_envs
        steps, updates = counters
        cpu0 = 0.0  # the first report carries the worker's start-up too (interpreter, imports, envs)
        while not stop.is_set():
            with steps.get_lock():
                if steps.value >= timesteps:
                    break
                steps.value += batch  # claimed before the rollout, so the workers together stop at the budget
                progress = 1.0 - (steps.value - batch) / timesteps
            lr = schedule_at(p, progress).learning_rate  # the driver's schedule (bench.algos.loop), per worker

            flat.param.data.copy_(shared)  # θ' ← θ
            seen = updates.value
            tally.steps, tally.episodes = 0, []
            ro = collector.collect(p.n_steps)
            g = a2c_gradient(ro, policy, flat, kern, p, device)
            gnorm = float(flat.clip_grad_norm(p.max_grad_norm))
            opt.step(shared, flat.grad, lr)  # Hogwild: no lock around θ or the statistics
            with updates.get_lock():
                staleness = updates.value - seen  # other workers' updates since this one synchronised
                updates.value += 1

            diag = {
                "loss/policy": g.stats.policy_loss,
                "loss/value": g.stats.value_loss,
                "policy/entropy": g.stats.entropy,
                "grad/norm": gnorm,
                "value/explained_variance": explained_variance(g.values, g.returns),
                "train/learning_rate": lr,
                "a3c/staleness": float(staleness),
            }
            if not policy.discrete:
                diag["policy/log_std"] = float(policy.log_std.detach().mean())
            cpu = time.process_time()
            rms = (norm.obs_rms.mean, norm.obs_rms.var) if norm.do_obs else None
            out.put(("update", rank, tally.steps, tally.episodes, diag, cpu - cpu0, rms))
            cpu0 = cpu
        envs.close()
        out.put(("done", rank))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
        out.put(("error", rank, traceback.format_exc()))


# --------------------------------------------------------------------------- #
# Training (the parent)
# --------------------------------------------------------------------------- #
def train(env_id: str, params: A3CParams, *, seed: int, timesteps: int, recorder: RecorderProtocol) -> None:
    """Train A3C on ``env_id`` until the workers together have taken at least ``timesteps`` env steps."""
    p = params
    device = pick_device(p.device)
    seed_everything(seed)
    probe = make_vec_env(env_id, 1)  # for the spaces only; the workers step their own envs
    policy = make_policy(probe, p).to(device)  # θ: initialised as a2c.py initialises (same seed, same order)
    norm = Normalizer(probe.single_observation_space.shape, 1, p.gamma, obs=p.normalize_obs, reward=False)
    acting = Acting(probe, policy, norm, device)  # the evaluation policy θ, acting as every collector does
    probe.close()
    flat = FlatParams(list(policy.parameters()))
    flat.param.share_memory_()  # the policy's parameters are views of it: they follow it into shared memory
    opt = SharedOptimizer(flat.param.numel(), p)
    # The workers' local copies θ' live in their processes: a meta tensor of their size stands for them.
    copies = torch.empty(p.n_workers * flat.param.numel(), dtype=flat.param.dtype, device="meta")
    recorder.note_models(policy.parameters(), opt.state, other=[copies])

    ctx = tmp.get_context("spawn")
    counters = (ctx.Value("q", 0), ctx.Value("q", 0))  # env steps claimed, updates applied
    out, stop = ctx.Queue(), ctx.Event()
    workers = [ctx.Process(target=_worker, name=f"a3c-worker-{i}", daemon=True,
                           args=(i, env_id, p, seed, timesteps, flat.param.data, opt, counters, out, stop))
               for i in range(p.n_workers)]
    policy_fn = savable(acting.policy_fn(), policy, norm)
    try:
        for w in workers:
            w.start()
        running = set(range(p.n_workers))
        while running:
            try:
                msg = out.get(timeout=POLL_S)
            except queue_mod.Empty:
                dead = [w.name for i, w in enumerate(workers) if i in running and not w.is_alive()]
                if dead:
                    raise RuntimeError(f"A3C worker(s) {', '.join(dead)} died without reporting (killed or crashed)")
                continue
            if msg[0] == "done":
                running.discard(msg[1])
            elif msg[0] == "error":
                raise RuntimeError(f"A3C worker {msg[1]} failed:\n{msg[2]}")
            else:
                _, rank, n, episodes, diag, cpu, rms = msg
                base = recorder.steps
                for at, ret, length in episodes:  # in the order they finished, at their global step
                    recorder.steps = base + at
                    recorder.episode(ret, length)
                recorder.steps = base + n
                recorder.child_cpu_s += cpu
                if rms is not None and rank == 0:  # evaluation normalises as worker 0 does now
                    norm.obs_rms.mean, norm.obs_rms.var = rms
                recorder.diagnostics(diag)
                recorder.after_update(policy_fn)
    finally:
        stop.set()
        deadline = time.monotonic() + 5
        while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
            try:  # drain the queue, so no worker blocks at exit flushing its last reports into a full pipe
                out.get(timeout=0.05)
            except queue_mod.Empty:
                pass
        for w in workers:
            if w.is_alive():
                w.terminate()
                w.join(timeout=5)
        out.cancel_join_thread()
        out.close()
