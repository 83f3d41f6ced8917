"""Mirror what a run records to TensorBoard and Weights & Biases, under SB3's tag names.

``bench run SUITE --tensorboard DIR`` gives every run its own event file under
``DIR/<label>/<env>/seed<k>/`` (so ``tensorboard --logdir DIR`` shows one run per label, env and
seed), and ``--wandb PROJECT`` one W&B run each (named ``<label>/<env>/seed<k>``, grouped by suite;
``WANDB_MODE=offline`` writes it locally without a network). Each worker process writes its own
run's files, as the run goes.

What is mirrored is what the :class:`~bench.storage.record.Recorder` records, at the env step it
was recorded at:

- after each update, as SB3 logs them per rollout: ``rollout/ep_rew_mean`` and ``rollout/ep_len_mean``
  (the last 100 training episodes, SB3's ``stats_window_size``) and ``time/fps`` (env steps per second of
  training wall-clock, evaluation and saving excluded, where SB3's includes them);
- each update's diagnostics, renamed to SB3's tags where SB3 logs the same quantity (:data:`SB3_TAGS`,
  the inverse of :data:`bench.algos.sb3.SB3_KEYS`), under bench's own name elsewhere (``grad/norm``,
  ``policy/log_std``, ``kl/reference`` ...);
- each periodic evaluation's mean return as ``eval/mean_reward`` (SB3's ``EvalCallback`` tag).

Writing is outside the run's clocks (:meth:`~bench.storage.record.Recorder.paused`), so a run's CPU seconds
are the same with mirroring on or off.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Mapping

from bench.algos.sb3 import SB3_KEYS
from bench.distribution import install_hint
from bench.suites.suite import Cell

#: SB3 logger tags that bench's diagnostics map back onto (SB3 PPO's names: A2C's ``train/policy_loss`` and
#: TRPO's ``train/policy_objective`` are the same bench key, ``loss/policy``, shown under PPO's tag).
_PREFERRED = ("train/policy_gradient_loss", "train/value_loss", "train/loss", "train/entropy_loss",
              "train/approx_kl", "train/clip_fraction", "train/explained_variance")
#: bench diagnostics key → (SB3 tag, sign): the inverse of :data:`bench.algos.sb3.SB3_KEYS` (SB3's entropy
#: *loss* is minus the entropy bench records). ``train/learning_rate`` and ``train/ent_coef`` are SB3's
#: names already.
SB3_TAGS: dict[str, tuple[str, float]] = {SB3_KEYS[tag][0]: (tag, SB3_KEYS[tag][1]) for tag in _PREFERRED}


def tag_of(key: str, value: float) -> tuple[str, float]:
    """``(tag, value)`` as mirrored: SB3's tag and sign where it has one, else bench's key and the value."""
    tag, sign = SB3_TAGS.get(key, (key, 1.0))
    return tag, sign * value


def run_name(cell: Cell) -> str:
    """``<label>/<env>/seed<k>``, each part made a safe folder name (``ALE/Pong-v5`` → ``ALE_Pong-v5``)."""
    def part(s: str) -> str:
        s = re.sub(r"[^\w.=,+\[\]-]", "_", s)
        return "_" if s in ("", ".", "..") else s

    return f"{part(cell.label)}/{part(cell.env_id)}/seed{cell.seed}"


class TensorBoardSink:
    """One run's TensorBoard event file, written with ``torch.utils.tensorboard`` (needs ``tensorboard``)."""

    def __init__(self, folder: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder))

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(*tag_of(key, float(value)), global_step=int(step))

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """One run in a Weights & Biases project (needs ``wandb``; ``WANDB_MODE=offline`` works without a network)."""

    def __init__(self, project: str, cell: Cell):
        import os

        if not cell.outputs.verbose:
            # W&B's documented switch for all its terminal output (docs.wandb.ai, "How do I stop wandb from writing
            # to my terminal"), read when wandb starts; a user's own WANDB_SILENT wins.
            os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        # A worker runs its cells one after another, finishing each W&B run before the next init.
        self.run = wandb.init(project=project, name=run_name(cell), group=cell.suite,
                              config={"key": cell.key, "env_id": cell.env_id, "algo": cell.algo, "impl": cell.impl,
                                      "label": cell.label, "seed": cell.seed, "timesteps": cell.timesteps,
                                      **cell.hyperparams})

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        self.run.log(dict(tag_of(k, float(v)) for k, v in values.items()), step=int(step))

    def close(self) -> None:
        self.run.finish()


class Sinks:
    """Several sinks as one (what :func:`open_sinks` returns)."""

    def __init__(self, sinks: list[Any]):
        self.sinks = sinks

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        for s in self.sinks:
            s.scalars(step, values)

    def close(self) -> None:
        for s in self.sinks:
            s.close()


def open_sinks(cell: Cell) -> Sinks | None:
    """The sinks ``cell.outputs`` asks for, opened (``None`` when it asks for none).

    A sink that cannot be opened (a W&B login or network that is not there, a folder gone) is one line on
    stderr, and the run goes on without it: a mirror must not cost a measurement.
    """
    sinks: list[Any] = []
    wanted = [("--tensorboard", cell.outputs.tensorboard, lambda v: TensorBoardSink(Path(v) / run_name(cell))),
              ("--wandb", cell.outputs.wandb, lambda v: WandbSink(v, cell))]
    for flag, value, opener in wanted:
        if not value:
            continue
        try:
            sinks.append(opener(value))
        except Exception as e:  # noqa: BLE001 - any failure of a mirror leaves the run as it is
            why = " ".join(f"{type(e).__name__}: {e}".split())
            print(f"warning: {flag}: not mirroring {run_name(cell)} ({why}); the run goes on", file=sys.stderr)
    return Sinks(sinks) if sinks else None


#: What each mirror needs installed, and the extra that installs it.
NEEDS = {"--tensorboard": ("tensorboard", "tensorboard"), "--wandb": ("wandb", "wandb")}


def missing(flag: str) -> str | None:
    """One line saying what to install when the package ``flag`` needs is missing, else ``None``."""
    import importlib.util

    module, extra = NEEDS[flag]
    if importlib.util.find_spec(module) is not None:
        return None
    return f"{flag}: needs the {module} package, which is not installed; install it with {install_hint(extra)}"
