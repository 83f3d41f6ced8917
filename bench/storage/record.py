"""What one run records, the same for every implementation.

A :class:`Recorder` lives inside one training run. The environment factory's
:class:`~bench.envs.EpisodeMonitor` wrapper feeds it env steps and finished
episodes, so the project's own algorithms and the SB3 baselines are measured by
the very same code. Algorithms feed it diagnostics and call
:meth:`Recorder.after_update` once per update, which is where heartbeats and
periodic deterministic evaluation happen.

The recorder knows nothing of stores or suites: it only collects. The runner
turns what it holds into rows (see :mod:`bench.storage.store`).
"""

from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol

import numpy as np

#: A policy used for evaluation: a batch of observations in, a batch of actions out.
PolicyFn = Callable[[np.ndarray], np.ndarray]


class SavablePolicy:
    """A deterministic policy for evaluation that can also be saved: callable as a :data:`PolicyFn`,
    and :meth:`checkpoint` returns what acting needs later (see :mod:`bench.algos.checkpoint`).

    :param act: the policy itself, a batch of raw observations in, a batch of actions out.
    :param checkpoint: ``() -> {"format": str, "files": {suffix: bytes}}``, a serialised copy of
        the policy as it is now (bytes, so a copy kept for later does not follow training).
    """

    __slots__ = ("act", "checkpoint")

    def __init__(self, act: PolicyFn, checkpoint: Callable[[], dict[str, Any]]):
        self.act = act
        self.checkpoint = checkpoint

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.act(obs)


class ScalarSink(Protocol):
    """Where :class:`Recorder` mirrors its scalars as they come (TensorBoard, W&B: bench.run.loggers)."""

    def scalars(self, step: int, values: Mapping[str, float]) -> None: ...


#: Episodes in the trailing mean mirrored as ``rollout/ep_rew_mean`` (SB3's ``stats_window_size`` default).
SINK_EPISODES = 100


class Diverged(RuntimeError):
    """Raised when a run produces a non-finite loss, return or diagnostic."""


class BudgetReached(Exception):
    """Raised from :meth:`Recorder.after_update` when the run's CPU-seconds budget is used up:
    it unwinds the algorithm at an update boundary, and the run is done (``stopped_by``)."""


class RecorderProtocol(Protocol):
    """What an algorithm may call. Algorithms depend on this, never on a store."""

    steps: int

    def diagnostics(self, values: Mapping[str, float], step: int | None = None) -> None: ...

    def after_update(self, policy: PolicyFn | None = None) -> None: ...

    def note_models(self, params: Iterable[Any], optimizers: Iterable[Any] = (), *,
                    other: Iterable[Any] = ()) -> None: ...


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation with the deterministic policy on a separate env.

    :param every: evaluate each time this many env steps have passed (checked after updates).
    :param episodes: episodes per evaluation.
    """

    every: int
    episodes: int = 5


@dataclass
class Recorder:
    """Collects episodes, diagnostics and evaluations for one run.

    :param heartbeat: called at most every ``heartbeat_every`` seconds from
        :meth:`after_update`; the runner uses it to keep the run's row alive.
    :param evaluate: ``evaluate(policy, n_episodes) -> returns`` runs the
        deterministic policy on a fresh env; required when ``eval`` is set.
    :param eval: when and how much to evaluate; ``None`` disables evaluation.
    :param cpu_limit: an equal-compute budget in training CPU seconds: the first
        :meth:`after_update` at or past it raises :class:`BudgetReached` (``stopped_by``
        says which budget ended the run).
    """

    heartbeat: Callable[[], None] | None = None
    heartbeat_every: float = 10.0
    evaluate: Callable[[PolicyFn, int], list[float]] | None = None
    eval: EvalConfig | None = None
    cpu_limit: float | None = None
    #: Keep the policy to save: ``none``, ``final`` (the policy after the last update) or ``best`` (also
    #: a copy at the best periodic evaluation so far, and the final one). Saving reads the policy only:
    #: it takes no random numbers and changes nothing that training computes.
    save: str = "none"
    #: Mirror scalars here as they are recorded (episode means, diagnostics, evaluations), or ``None``.
    sink: ScalarSink | None = None
    #: Which budget ended the run: ``cpu_seconds`` when :attr:`cpu_limit` did, else ``timesteps``.
    stopped_by: str = "timesteps"
    #: Where the run's mid-run checkpoints go and come from (:class:`bench.run.checkpoints.Checkpoints`), or
    #: ``None``: the training driver takes them; the recorder only gives and takes back its progress
    #: (:meth:`progress`, :meth:`load_progress`).
    checkpoints: Any = None

    #: Global env steps (transitions over all vectorised envs) taken so far.
    steps: int = 0
    #: Columns of finished training episodes (parallel lists, appended in order).
    ep_step: list[int] = field(default_factory=list)
    ep_wall: list[float] = field(default_factory=list)
    ep_cpu: list[float] = field(default_factory=list)
    ep_return: list[float] = field(default_factory=list)
    ep_length: list[int] = field(default_factory=list)
    #: (step, key, value) rows.
    diag: list[tuple[int, str, float]] = field(default_factory=list)
    #: (step, wall_s, mean, std, n) rows.
    evals: list[tuple[int, float, float, float, int]] = field(default_factory=list)
    updates: int = 0
    #: CPU seconds of helper processes that trained for this run (A3C's workers), as they report them;
    #: added to :meth:`cpu_seconds`. The run's own process is measured directly.
    child_cpu_s: float = 0.0

    def __post_init__(self) -> None:
        if self.eval is not None and self.evaluate is None:
            raise ValueError("Recorder: eval is set but no evaluate function was given.")
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()
        self._paused = 0.0  # seconds spent evaluating, excluded from training time
        self._paused_cpu = 0.0  # CPU seconds spent evaluating, likewise
        #: The 1-minute load average when the run started (``None`` where the OS has none).
        self.load_start = _load_average()
        self._last_beat = self._t0
        self._next_eval = self.eval.every if self.eval else None
        self._models: tuple[list[Any], list[Any], list[Any]] | None = None
        #: The policy of the last update, and a copy of the one at the best evaluation (``save``).
        self.last_policy: PolicyFn | None = None
        self.best: dict[str, Any] | None = None  # {"step", "eval_return", "checkpoint"}
        self._sunk = 0  # diagnostics rows already mirrored to the sink
        self._wall_before = self._cpu_before = 0.0  # the clocks of a run continued from a checkpoint, until then

    # -- clocks -------------------------------------------------------------
    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside is not the run's: evaluation, saving, mirroring to a sink."""
        t, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self._paused += time.perf_counter() - t
            self._paused_cpu += time.process_time() - c

    def restart_clocks(self) -> None:
        """Start the run's clocks now (before any training): what ran in between is not the run's."""
        self._t0, self._cpu0 = time.perf_counter(), time.process_time()
        self._last_beat = self._t0

    def clock(self) -> float:
        """Training wall-clock seconds since the run started (evaluation excluded)."""
        return self._wall_before + time.perf_counter() - self._t0 - self._paused

    def cpu_seconds(self) -> float:
        """Training process CPU seconds since the run started (evaluation excluded).

        Runs are single-threaded (one torch and one BLAS thread), so CPU seconds
        measure the work a run did: they do not count the time other processes
        take, as wall-clock seconds do (see :meth:`contention`). They still grow
        when the core is shared (caches, memory bandwidth): a contended run is
        flagged, and ``bench run --remeasure contended`` measures it again.
        """
        return self._cpu_before + time.process_time() - self._cpu0 - self._paused_cpu + self.child_cpu_s

    def contention(self) -> dict[str, float | None]:
        """What the machine was like during the run: the load averages at its start and now,
        and wall / CPU seconds (about 1 for a single-threaded run that had a core to itself)."""
        cpu, wall = self.cpu_seconds(), self.clock()
        return {"load_start": self.load_start, "load_end": _load_average(),
                "wall_per_cpu": wall / cpu if cpu > 0 else None}

    # -- fed by the env monitor ----------------------------------------------
    def episode(self, ret: float, length: int) -> None:
        """One finished training episode, at the current global step."""
        if not math.isfinite(ret):
            raise Diverged(f"non-finite episode return {ret} at step {self.steps}")
        self.ep_step.append(self.steps)
        self.ep_wall.append(self.clock())
        self.ep_cpu.append(self.cpu_seconds())
        self.ep_return.append(float(ret))
        self.ep_length.append(int(length))

    # -- fed by the algorithm ------------------------------------------------
    def diagnostics(self, values: Mapping[str, float], step: int | None = None) -> None:
        """Diagnostics of one update, keyed like ``loss/policy`` or ``policy/entropy``.

        A non-finite loss means the run has diverged: it raises :class:`Diverged`
        so the runner records the run as failed rather than as a finished one.
        """
        at = self.steps if step is None else int(step)
        for key, value in values.items():
            v = float(value)
            if not math.isfinite(v) and key.startswith("loss/"):
                raise Diverged(f"non-finite {key} = {v} at step {at}")
            self.diag.append((at, key, v))

    def note_models(self, params: Iterable[Any], optimizers: Iterable[Any] = (), *,
                    other: Iterable[Any] = ()) -> None:
        """Name the tensors a run's models hold, for :meth:`model_memory` (measured when asked,
        so optimiser state created lazily by the first step is counted).

        :param params: the parameters the algorithm trains (torch tensors).
        :param optimizers: torch optimisers (their per-parameter state is counted) or plain
            tensors of optimiser state kept elsewhere (A3C's shared RMSprop statistics).
        :param other: further parameter copies the run keeps (GRPO's frozen reference policy,
            A3C's per-worker local copies).
        """
        self._models = (list(params), list(optimizers), list(other))

    def model_memory(self) -> dict[str, int] | None:
        """Bytes held by the noted models (see :func:`model_memory`); ``None`` if none were noted."""
        if self._models is None:
            return None
        return model_memory(*self._models)

    def after_update(self, policy: PolicyFn | None = None) -> None:
        """Call once after each update: heartbeat, and evaluation when it is due."""
        self.updates += 1
        if self.save != "none" and policy is not None:
            self.last_policy = policy
        if self.sink is not None:
            with self.paused():
                self._mirror()
        now = time.perf_counter()
        if self.heartbeat is not None and now - self._last_beat >= self.heartbeat_every:
            self.heartbeat()
            self._last_beat = now
        if self._next_eval is not None and policy is not None and self.steps >= self._next_eval:
            self.run_eval(policy)
            while self._next_eval <= self.steps:
                self._next_eval += self.eval.every  # type: ignore[union-attr]
        if self.cpu_limit is not None and self.cpu_seconds() >= self.cpu_limit:
            self.stopped_by = "cpu_seconds"
            raise BudgetReached(f"{self.cpu_seconds():.1f} CPU seconds used of {self.cpu_limit:g} at step {self.steps}")

    def run_eval(self, policy: PolicyFn) -> None:
        """Evaluate now; its time is excluded from the training clock."""
        assert self.eval is not None and self.evaluate is not None
        with self.paused():
            returns = self.evaluate(policy, self.eval.episodes)
            arr = np.asarray(returns, dtype=float)
            mean = float(arr.mean())
            # The first best wins a tie: a later evaluation must be strictly better to replace it.
            if (self.save == "best" and math.isfinite(mean) and hasattr(policy, "checkpoint")
                    and (self.best is None or mean > self.best["eval_return"])):
                self.best = {"step": self.steps, "eval_return": mean, "checkpoint": policy.checkpoint()}
            if self.sink is not None:
                self.sink.scalars(self.steps, {"eval/mean_reward": mean})
        self.evals.append((self.steps, self.clock(), mean, float(arr.std()), len(arr)))

    def final_checkpoint(self) -> dict[str, Any] | None:
        """The policy after the last update, serialised (``None`` when there is none or it cannot be saved)."""
        pol = self.last_policy
        return pol.checkpoint() if pol is not None and hasattr(pol, "checkpoint") else None

    def _mirror(self) -> None:
        """Send the sink what was recorded since the last update: the diagnostics at their own steps, then
        the trailing means of training episodes and the frames per second, as SB3 logs them per rollout."""
        assert self.sink is not None
        rows = self.diag[self._sunk:]
        self._sunk = len(self.diag)
        by_step: dict[int, dict[str, float]] = {}
        for step, key, value in rows:
            by_step.setdefault(step, {})[key] = value
        for step, values in by_step.items():
            self.sink.scalars(step, values)
        out: dict[str, float] = {}
        if self.ep_return:  # SB3 logs them once an episode has finished
            out["rollout/ep_rew_mean"] = float(np.mean(self.ep_return[-SINK_EPISODES:]))
            out["rollout/ep_len_mean"] = float(np.mean(self.ep_length[-SINK_EPISODES:]))
        wall = self.clock()
        if wall > 0:
            out["time/fps"] = self.steps / wall
        self.sink.scalars(self.steps, out)

    # -- mid-run checkpoints -------------------------------------------------
    def progress(self) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, Any]]:
        """What the run has recorded so far, as ``(arrays, JSON values, tensors)``, for a checkpoint: its
        episodes, diagnostics and evaluations, step and update counts, clocks, the next evaluation and the
        policy kept at the best one (its files' bytes, as ``uint8`` tensors)."""
        import torch  # a checkpoint's only bytes are tensors (torch.load(weights_only=True) reads them back)

        keys = list(dict.fromkeys(r[1] for r in self.diag))  # each key once, as an index: rows are many
        index = {k: i for i, k in enumerate(keys)}
        arrays = {"ep_step": np.asarray(self.ep_step, np.int64), "ep_wall": np.asarray(self.ep_wall, np.float64),
                  "ep_cpu": np.asarray(self.ep_cpu, np.float64), "ep_return": np.asarray(self.ep_return, np.float64),
                  "ep_length": np.asarray(self.ep_length, np.int64),
                  "diag_step": np.asarray([r[0] for r in self.diag], np.int64),
                  "diag_key": np.asarray([index[r[1]] for r in self.diag], np.int32),
                  "diag_value": np.asarray([r[2] for r in self.diag], np.float64),
                  "evals": np.asarray(self.evals, np.float64).reshape(-1, 5)}
        meta: dict[str, Any] = {"steps": self.steps, "updates": self.updates, "wall_s": self.clock(),
                                "cpu_s": self.cpu_seconds() - self.child_cpu_s, "child_cpu_s": self.child_cpu_s,
                                "next_eval": self._next_eval, "best": None, "diag_keys": keys}
        tensors: dict[str, Any] = {}
        if self.best is not None:
            ck = self.best["checkpoint"]
            meta["best"] = {"step": self.best["step"], "eval_return": self.best["eval_return"],
                            "format": ck["format"], "files": sorted(ck["files"])}
            for suffix, data in ck["files"].items():
                tensors[f"best.{suffix}"] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        return arrays, meta, tensors

    def load_progress(self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any],
                      tensors: Mapping[str, Any]) -> None:
        """Continue from :meth:`progress`: the recorded columns and counts are put back, and the clocks go on
        from the checkpoint's (the time the killed process spent after it is not the run's: it is redone)."""
        self.steps, self.updates = int(meta["steps"]), int(meta["updates"])
        self.ep_step = [int(x) for x in arrays["ep_step"]]
        self.ep_wall = [float(x) for x in arrays["ep_wall"]]
        self.ep_cpu = [float(x) for x in arrays["ep_cpu"]]
        self.ep_return = [float(x) for x in arrays["ep_return"]]
        self.ep_length = [int(x) for x in arrays["ep_length"]]
        keys = [str(k) for k in meta["diag_keys"]]
        self.diag = [(int(s), keys[k], float(v)) for s, k, v in zip(arrays["diag_step"], arrays["diag_key"],
                                                                      arrays["diag_value"])]
        self.evals = [(int(r[0]), float(r[1]), float(r[2]), float(r[3]), int(r[4])) for r in arrays["evals"]]
        self._next_eval = None if meta["next_eval"] is None else int(meta["next_eval"])
        self._sunk = len(self.diag)  # mirrored before the kill
        best = meta["best"]
        self.best = None if best is None else {
            "step": int(best["step"]), "eval_return": float(best["eval_return"]),
            "checkpoint": {"format": best["format"],
                           "files": {s: tensors[f"best.{s}"].numpy().tobytes() for s in best["files"]}}}
        self.child_cpu_s = float(meta["child_cpu_s"])
        self._t0, self._cpu0 = time.perf_counter(), time.process_time()
        self._paused = self._paused_cpu = 0.0
        self._wall_before, self._cpu_before = float(meta["wall_s"]), float(meta["cpu_s"])

    def align_episodes(self) -> None:
        """Drop a last episode that was only partly appended (the columns' lengths differ): a run stopped by
        its limit from another thread (:class:`bench.run.limits.LimitStop`) may be stopped inside :meth:`episode`."""
        cols = (self.ep_step, self.ep_wall, self.ep_cpu, self.ep_return, self.ep_length)
        n = min(len(c) for c in cols)
        for c in cols:
            del c[n:]

    def summary_inputs(self) -> dict[str, Any]:
        """Arrays the metrics functions take, as NumPy arrays."""
        return {
            "steps": np.asarray(self.ep_step, dtype=np.int64),
            "wall": np.asarray(self.ep_wall, dtype=float),
            "cpu": np.asarray(self.ep_cpu, dtype=float),
            "returns": np.asarray(self.ep_return, dtype=float),
        }


def _nbytes(tensors: Iterable[Any]) -> int:
    """Σ numel × element size over distinct tensors (by identity): torch tensors, or NumPy arrays (``nbytes``)."""
    seen: dict[int, Any] = {}
    for t in tensors:
        seen.setdefault(id(t), t)
    return int(sum(t.nbytes if isinstance(t, np.ndarray) else t.numel() * t.element_size() for t in seen.values()))


def _optimizer_tensors(opt: Any) -> list[Any]:
    """The tensors of a torch optimiser's per-parameter state, or ``[opt]`` for a plain tensor."""
    state = getattr(opt, "state", None)
    if state is None:  # a tensor of optimiser state held outside a torch optimiser
        return [opt]
    return [v for per_param in state.values() for v in per_param.values() if hasattr(v, "element_size")]


def model_memory(params: Iterable[Any], optimizers: Iterable[Any] = (), other: Iterable[Any] = ()) -> dict[str, int]:
    """The memory a run's models hold, in bytes, as stored in each run's ``meta["model_memory"]``.

    - ``params_bytes``: Σ numel × element size over the distinct trained parameter tensors;
    - ``other_bytes``: the same over further parameter copies (a frozen reference policy, per-worker copies);
    - ``optimizer_bytes``: the same over every tensor of optimiser state (Adam: ``step``, ``exp_avg``,
      ``exp_avg_sq`` per parameter tensor; RMSprop: ``step``, ``square_avg``), as allocated when measured;
    - ``total_bytes``: their sum.

    Not counted: gradient buffers, activations, rollout buffers and anything outside torch tensors.
    Tensors are told apart by identity, so a parameter listed twice counts once.
    """
    p = _nbytes(params)
    o = _nbytes(t for opt in optimizers for t in _optimizer_tensors(opt))
    x = _nbytes(other)
    return {"params_bytes": p, "other_bytes": x, "optimizer_bytes": o, "total_bytes": p + x + o}


def _load_average() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):  # not on every OS
        return None


#: Diagnostics whose peaks matter (the collapse detector looks for gradient-norm spikes).
PEAK_KEYS = frozenset({"grad/norm"})


def downsample_diagnostics(rows: list[tuple[int, str, float]], points: int) -> list[tuple[int, str, float, int]]:
    """At most ``points`` rows per diagnostics key, each the mean over a stretch of consecutive updates.

    :param rows: ``(step, key, value)`` in recording order (the recorder's ``diag``).
    :param points: rows kept per key; ``0`` keeps every row.
    :returns: ``(step, key, mean, n)`` rows: ``step`` is the stretch's last step and ``n`` its
        number of updates, so ``sum(mean × n) / sum(n)`` is exactly the mean of the key over the
        run (non-finite values are kept out of both, as they would make every mean NaN).

    Stretches are as equal as the count allows (``numpy.array_split``): a long run's A2C, updating
    every 40 steps, records ~25,000 rows per key per million steps, which is what made the shipped
    reference store grow by 45 MB for 63 runs; 500 points still draw every curve the report shows.
    A mean hides a one-update spike, so keys in :data:`PEAK_KEYS` also get a ``<key>_max`` row per
    stretch (its largest value) when they are downsampled.
    """
    by_key: dict[str, list[tuple[int, float]]] = {}
    for step, key, value in rows:
        by_key.setdefault(key, []).append((step, value))
    out: list[tuple[int, str, float, int]] = []
    for key, seq in by_key.items():
        if points <= 0 or len(seq) <= points:
            out += [(s, key, v, 1) for s, v in seq]
            continue
        steps = np.array([s for s, _ in seq])
        values = np.array([v for _, v in seq], dtype=float)
        for idx in np.array_split(np.arange(len(seq)), points):
            v = values[idx]
            ok = np.isfinite(v)
            out.append((int(steps[idx[-1]]), key, float(v[ok].mean()) if ok.any() else float("nan"), int(ok.sum())))
            if key in PEAK_KEYS:
                out.append((int(steps[idx[-1]]), f"{key}_max", float(v[ok].max()) if ok.any() else float("nan"),
                            int(ok.sum())))
    return out
