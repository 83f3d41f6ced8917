"""One trial: hyperparameters sampled from the target's space, trained on every tuning seed through the
path ``bench run`` uses, pruned at fixed budget fractions, and scored per seed (see :mod:`bench.tune.study`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from bench.storage.record import Diverged, Recorder
from bench.suites.spaces import sample
from bench.tune.targets import CENSORED_PENALTY, Target


# --------------------------------------------------------------------------- #
# Scores (pure)
# --------------------------------------------------------------------------- #
def seed_score(steps: np.ndarray, returns: np.ndarray, target: Target, *, upto: int | None = None) -> float | None:
    """One seed's objective from its finished episodes; ``None`` if it has none.

    :param steps, returns: shape ``(n_episodes,)``: the global env step at which each
        episode ended, and its return (``Recorder.summary_inputs()``).
    :param upto: the env steps the curve is scored over, for ``auc``: the budget
        for a finished seed, a checkpoint's steps for an intermediate value
        (default: the budget).

    ``auc`` is :func:`~bench.stats.metrics.normalised_auc` on ``(0, upto]``
    (``target.random_return`` must be set, see :func:`with_anchor`); the others come
    from :func:`~bench.stats.metrics.summarize`, the summary ``bench run`` stores,
    with a censored ``steps_to_threshold`` counted as :data:`CENSORED_PENALTY` × budget.
    """
    from bench.stats.metrics import normalised_auc, summarize

    steps = np.asarray(steps)
    returns = np.asarray(returns, dtype=float)
    if returns.size == 0:
        return None
    if target.objective == "auc":
        if target.random_return is None:
            raise ValueError(f"target {target.study!r}: auc needs the random-policy return; resolve it with with_anchor()")
        return normalised_auc(steps, returns, target.window, upto=target.timesteps if upto is None else upto,
                              low=target.random_return, high=target.threshold)
    s = summarize(steps, np.zeros(returns.shape), returns, threshold=target.threshold, window=target.window)
    if target.objective == "steps_to_threshold":
        return float(s.steps_to_threshold) if s.steps_to_threshold is not None else CENSORED_PENALTY * target.timesteps
    return float(s.final_return)


# --------------------------------------------------------------------------- #
# One trial
# --------------------------------------------------------------------------- #
class _Prune(Exception):
    """Raised from the recorder hook to unwind training when the pruner says stop."""


@dataclass
class CheckpointRecorder(Recorder):
    """A :class:`~bench.storage.record.Recorder` that calls ``on_mark(k)`` when env steps cross ``marks[k]``."""

    marks: Sequence[int] = ()
    on_mark: Callable[[int, "CheckpointRecorder"], None] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self._next = 0

    def after_update(self, policy: Any = None) -> None:
        super().after_update(policy)
        while self._next < len(self.marks) and self.steps >= self.marks[self._next]:
            self._next += 1
            if self.on_mark is not None:
                self.on_mark(self._next - 1, self)

    def finish_marks(self) -> None:
        """Report the marks no update reached (a run may stop just short of a fraction)."""
        while self._next < len(self.marks):
            self._next += 1
            if self.on_mark is not None:
                self.on_mark(self._next - 1, self)


def _partial_summary(rec: Recorder, target: Target) -> dict[str, Any]:
    from bench.stats.metrics import summarize

    a = rec.summary_inputs()
    return summarize(a["steps"], a["wall"], a["returns"], threshold=target.threshold, window=target.window).as_dict()


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".replace("\n", " ")[:500]


def _sampled(trial: Any, target: Target) -> dict[str, Any]:
    """The trial's hyperparameters: sampled from ``target``'s space over its fixed ones (both recorded as the
    trial's ``hyperparams``), then resolved and checked; ValueError (also the trial's ``error``) when invalid."""
    from pydantic import ValidationError

    from bench.algos.hyperparams import key_view

    base = key_view(target.params(target.fixed))
    values = sample(trial, target.space, rollout_of=lambda v: {**base, **v}["n_steps"] * {**base, **v}["n_envs"])
    hyperparams = {**target.fixed, **values}
    trial.set_user_attr("hyperparams", hyperparams)
    try:
        return key_view(target.params(hyperparams))
    except ValidationError as e:
        err = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors(include_url=False))
        trial.set_user_attr("error", f"invalid hyperparameters: {err}")
        raise ValueError(f"invalid hyperparameters: {err}") from None


def run_trial(trial: Any, target: Target) -> float:
    """The Optuna objective: sample, train every seed, return the mean objective (see module doc)."""
    import optuna

    from bench.algos.common import pin_one_thread
    from bench.run.runner import result_of, train_cell
    from bench.storage.owners import this_owner

    if target.objective == "auc" and target.random_return is None:
        raise ValueError(f"target {target.study!r}: auc needs the random-policy return; resolve it with with_anchor()")
    pin_one_thread()
    cpu0 = time.process_time()
    trial.set_user_attr("worker", this_owner())
    resolved = _sampled(trial, target)
    marks = target.marks()
    T = target.timesteps
    scores: list[float] = []
    solved: list[bool] = []

    def finish(state: str, current_solved: bool = False) -> None:
        n_solved = sum(solved) + int(current_solved)
        trial.set_user_attr("seed_scores", scores)
        trial.set_user_attr("solved", solved)
        trial.set_user_attr("solved_fraction", n_solved / len(target.seeds))
        trial.set_user_attr("outcome", state)
        # What the trial cost (a pack's CPU-hours): this process's CPU seconds, one thread pinned.
        trial.set_user_attr("cpu_s", round(time.process_time() - cpu0, 3))

    for i, seed in enumerate(target.seeds):
        cell = target.cell(resolved, seed)

        def on_mark(k: int, rec: CheckpointRecorder, i: int = i) -> None:
            a = rec.summary_inputs()
            # Over the checkpoint's steps, not rec.steps (which overshoots by part of a
            # rollout that differs between trials), so values at one step are comparable.
            partial = seed_score(a["steps"], a["returns"], target, upto=marks[k])
            if partial is None or not math.isfinite(partial):
                return
            trial.report(float(np.mean(scores + [partial])), step=i * T + marks[k])
            last = i == len(target.seeds) - 1 and k == len(marks) - 1
            if not last and trial.should_prune():
                raise _Prune(f"pruned at seed {seed}, {marks[k]:,} of {T:,} steps")

        rec = CheckpointRecorder(marks=marks, on_mark=on_mark)
        started = time.time()
        try:
            train_cell(cell, rec)
            rec.finish_marks()
        except _Prune as e:
            finish("pruned", _partial_summary(rec, target)["steps_to_threshold"] is not None)
            raise optuna.TrialPruned(str(e)) from None
        except Diverged as e:
            trial.set_user_attr("error", _one_line(e))
            finish("diverged")
            raise optuna.TrialPruned(f"diverged at seed {seed}: {e}") from None
        except Exception as e:  # noqa: BLE001 - any training error fails the trial, with its message
            trial.set_user_attr("error", _one_line(e))
            finish("failed")
            raise
        summary = result_of(cell, rec, started).summary
        a = rec.summary_inputs()
        score = seed_score(a["steps"], a["returns"], target, upto=T)
        if score is None:
            trial.set_user_attr("error", f"seed {seed}: no episode finished within {T:,} steps; nothing to score")
            finish("failed")
            raise RuntimeError(f"seed {seed}: no episode finished within {T:,} steps; nothing to score")
        if not math.isfinite(score):
            finish("diverged")
            raise optuna.TrialPruned(f"non-finite {target.objective} at seed {seed}")
        scores.append(score)
        solved.append(summary["steps_to_threshold"] is not None)
    finish("complete")
    return float(np.mean(scores))
