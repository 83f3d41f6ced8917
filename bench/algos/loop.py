"""The training driver every on-policy algorithm shares: a budget becomes iterations, each iteration gets
its schedules' values, runs the algorithm's own update and reports it.

An algorithm's ``train`` builds its parts (policy, optimiser, collector), then hands :func:`drive` one
function, ``update(schedule) -> diagnostics``, that collects a batch and updates on it. The driver owns
everything around it:

- **the budget** (:class:`Rollouts` or :class:`Steps`): how many iterations, and the progress
  ``progress_remaining`` (1 at the start, → 0 at the end) that schedules read;
- **the schedules** (:class:`ScheduleValues`): the learning rate, written into the optimisers before the update,
  and the entropy weight, with their ``train/…`` diagnostics;
- **progress reporting**: the update's diagnostics, then ``recorder.after_update`` with the policy to
  evaluate or save.

Two budgets, because two families of algorithms spend steps two ways (SB3 draws the same line between its
``OnPolicyAlgorithm`` rollouts and its episode-based callbacks):

- whole rollouts of a fixed size (A2C, PPO, NPG, TRPO): ``n = ⌈timesteps / batch⌉`` iterations, iteration
  k at progress ``1 − k/n`` (the progress at its start, so the first update gets the full learning rate
  and none gets 0; docs/parity.md says how SB3 differs);
- batches of whole episodes of varying size (REINFORCE, AC-MC, GRPO, RLOO): iterate while fewer than
  ``timesteps`` steps are done, at progress ``1 − done / timesteps``.

A3C's workers share one step counter across processes, claimed before each rollout; they use
:func:`schedule_at` for their learning rate but not this loop, which runs in one process.

The driver also owns mid-run checkpoints: given the algorithm's :class:`~bench.algos.resume.TrainState`,
it puts a run's last checkpoint back before the first update and takes one when due
(:func:`drive`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np
import torch

from bench.algos.resume import Checkpointing, TrainState


def scheduled(value: float, kind: str, progress_remaining: float) -> float:
    """``value`` under schedule ``kind`` at ``progress_remaining``: itself (``constant``), or decayed linearly to 0
    (``linear``, SB3 / zoo ``lin_X``)."""
    return value * progress_remaining if kind == "linear" else value


def ent_coef_at(p: Any, progress_remaining: float) -> float:
    """The entropy-bonus weight at ``progress_remaining`` (1 at the start of training, → 0 at its end),
    from ``p.ent_coef`` and ``p.ent_schedule``:

    - constant: c₀;
    - linear: c₀ · progress_remaining (to 0 at the end, as the zoo's ``lin_X``);
    - exponential: c₀ · exp(−k · (1 − progress_remaining)), k = ``p.ent_schedule_rate``
      (ends at c₀·e⁻ᵏ; halves every ln 2 / k of the budget).

    Decaying the bonus keeps early exploration without holding a collapsed
    policy's log-std up late in training (issue 15's HalfCheetah story).
    """
    c0 = p.ent_coef
    if p.ent_schedule == "exponential":
        return c0 * math.exp(-p.ent_schedule_rate * (1.0 - progress_remaining))
    return scheduled(c0, p.ent_schedule, progress_remaining)


class ScheduleValues(NamedTuple):
    """The schedules' values at one iteration."""

    progress_remaining: float  # 1 at the start of training, → 0 at its end
    learning_rate: float
    ent_coef: float | None  # None for an algorithm without an entropy bonus (NPG, TRPO)

    def diagnostics(self, p: Any) -> dict[str, float]:
        """``train/learning_rate``, and ``train/ent_coef`` where the entropy weight is scheduled."""
        out = {"train/learning_rate": self.learning_rate}
        if self.ent_coef is not None and p.ent_schedule != "constant":
            out["train/ent_coef"] = self.ent_coef
        return out


def schedule_at(p: Any, progress_remaining: float) -> ScheduleValues:
    """``p``'s learning rate (``learning_rate``, ``lr_schedule``) and entropy weight (``ent_coef``,
    ``ent_schedule``; :func:`ent_coef_at`) at ``progress_remaining``."""
    lr = scheduled(p.learning_rate, p.lr_schedule, progress_remaining)
    ent = ent_coef_at(p, progress_remaining) if hasattr(p, "ent_schedule") else None
    return ScheduleValues(progress_remaining, lr, ent)


def torch_generator(rng: np.random.Generator) -> torch.Generator:
    """torch's generator for minibatch shuffles, sub-samples and gradient-noise chunks, seeded by one draw
    from the run's NumPy stream (after the collector's set-up, so every algorithm draws in the same place)."""
    return torch.Generator().manual_seed(int(rng.integers(2**31)))


class Rollouts:
    """A budget of whole rollouts of ``batch`` env steps: ``n_iters = ⌈timesteps / batch⌉``."""

    def __init__(self, timesteps: int, batch: int):
        self.batch = batch
        self.n_iters = math.ceil(timesteps / batch)
        self.it = 0  # iterations done

    def __iter__(self) -> Iterator[float]:
        while self.it < self.n_iters:
            yield 1.0 - self.it / self.n_iters
            self.it += 1

    def position(self) -> dict[str, int]:
        """Where the budget stands after an update (for a checkpoint)."""
        return {"done": self.it + 1}

    def seek(self, pos: Mapping[str, Any]) -> None:
        self.it = int(pos["done"])

    def more(self) -> bool:
        """Whether an iteration is left after the current one."""
        return self.it + 1 < self.n_iters


class Steps:
    """A budget of ``timesteps`` env steps spent in batches of varying size: the update adds what each
    batch took (:meth:`spend`), and :meth:`stop` ends the run after the current iteration."""

    def __init__(self, timesteps: int):
        self.timesteps, self.done, self.stopped = timesteps, 0, False

    @property
    def left(self) -> int:
        return self.timesteps - self.done

    def spend(self, steps: int) -> None:
        self.done += steps

    def stop(self) -> None:
        self.stopped = True

    def __iter__(self) -> Iterator[float]:
        while self.done < self.timesteps and not self.stopped:
            yield 1.0 - self.done / self.timesteps

    def position(self) -> dict[str, Any]:
        return {"done": self.done, "stopped": self.stopped}

    def seek(self, pos: Mapping[str, Any]) -> None:
        self.done, self.stopped = int(pos["done"]), bool(pos["stopped"])

    def more(self) -> bool:
        return self.done < self.timesteps and not self.stopped


#: ``update(schedule) -> diagnostics``: one iteration's collection and update; ``None`` when there was
#: nothing to update on (the run ends there, and nothing is reported for it).
Update = Callable[[ScheduleValues], "Mapping[str, float] | None"]


def drive(budget: Rollouts | Steps, p: Any, update: Update, recorder: Any, *, policy: Callable[[], Any],
          optimizers: Sequence[Any] = (), state: TrainState | None = None) -> None:
    """Run ``update`` once per iteration of ``budget``: set the learning rate of ``optimizers`` from
    ``p``'s schedule first, report the update's diagnostics and then ``policy()`` (the deterministic
    policy, for evaluation and saving) through ``recorder`` after it.

    With ``state`` (what the algorithm holds across updates, :class:`~bench.algos.resume.TrainState`) and a
    recorder with ``checkpoints`` (:mod:`bench.run.checkpoints`), the run starts from the last checkpoint
    when there is one, and takes one after each update that reaches the next ``checkpoint_every`` steps
    (never after the last: a finished run needs none)."""
    checkpoints = Checkpointing.begin(state, budget, recorder, policy)  # None where the run takes none
    for progress in budget:
        sched = schedule_at(p, progress)
        for opt in optimizers:
            for g in opt.param_groups:
                g["lr"] = sched.learning_rate
        diag = update(sched)
        if diag is None:
            break
        recorder.diagnostics(diag)
        recorder.after_update(policy())
        if checkpoints is not None:
            checkpoints.after_update()
