"""Continuing a killed run: what a mid-run checkpoint holds of the project's own algorithms, taken at an
update boundary and put back bit for bit, so that the continued run records the returns the uninterrupted
one would have.

A checkpoint is a :class:`Snapshot` of data only: tensors (``torch.save`` of plain dicts of tensors, read
back with ``weights_only=True``), NumPy arrays (an ``.npz`` without objects) and JSON. The driver
(:func:`bench.algos.loop.drive`) takes one every ``checkpoint_every`` env steps through the recorder's
``checkpoints`` (the run layer writes and reads the files, :mod:`bench.run.checkpoints`), and puts the
last one back before the first update of a run that has one. What it holds of training
(:class:`TrainState`):

- the networks' and optimisers' state dicts (Adam's moments and step counts), the normaliser's running
  statistics and running returns, the observation the collector acts on next;
- the random streams: the run's NumPy generator (its bit generator's state, as JSON), the torch
  generator of minibatch shuffles and torch's global generator (as tensors);
- each training env's episode in progress (:class:`EnvTape`): envs cannot be serialised in general, so
  the tape keeps how the episode began (the reset's seed, or the env's NumPy generator just before an
  unseeded reset) and the actions taken since, and the env is put back by replaying them. The replay
  is checked: the env's last observation and its generator's state must equal those saved, else the
  checkpoint is refused rather than continued from a different env.

:class:`Checkpointing` (the driver's side) adds the budget's position and the recorder's progress
(episodes, diagnostics, evaluations, clocks). Taking a checkpoint reads state only: it draws no random
numbers.

Where it cannot be bit for bit, no checkpoint is taken and a killed run starts again from step 0
(:meth:`TrainState.unsupported` says why): envs stepped outside this process (``vec_env`` other than
``sync``), envs whose randomness is not the Gymnasium ``np_random`` they reset from (Atari's emulator,
MinAtar, third-party families: only Gymnasium's own envs and this project's are known to keep it there),
and the language-model (``sequence``) policy. A3C, whose workers update asynchronously, SB3 and plugins
hand the driver no state and take none either.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np
import torch

#: The format version of a snapshot's contents; a checkpoint of another version is refused.
VERSION = 1
#: The env modules whose randomness is the unwrapped env's ``np_random`` (so a tape can put them back).
TAPED_MODULES = ("gymnasium.envs.", "bench.envs.")
#: The longest episode a tape keeps (an env without a time limit would otherwise keep every action of the
#: run); past it the tape lets go, and the run takes no more checkpoints (the last one taken stays).
MAX_TAPE = 1_000_000


class Snapshot(NamedTuple):
    """A checkpoint's contents, by kind of file: ``tensors`` (a flat dict of tensors), ``arrays``
    (a flat dict of non-object NumPy arrays) and ``meta`` (JSON values). Keys are namespaced by their owner
    (``train.``, ``recorder.``)."""

    tensors: dict[str, torch.Tensor]
    arrays: dict[str, np.ndarray]
    meta: dict[str, Any]


class ResumeError(RuntimeError):
    """A checkpoint that cannot be put back (another format, other shapes, an env that replays otherwise)."""


class Paused(Exception):
    """The run stopped at its pause step (a race's rung) right after writing a checkpoint there: not a
    failure and not a finished run; the next run of its cell continues from that checkpoint."""

    def __init__(self, steps: int):
        super().__init__(f"paused at step {steps}")
        self.steps = steps


# --------------------------------------------------------------------------- #
# The training envs' episodes in progress
# --------------------------------------------------------------------------- #
class EnvTape(gym.Wrapper):
    """Keeps what it takes to put this env back where it is: how its current episode began (the reset's
    seed, or the state of the env's NumPy generator just before an unseeded reset) and the actions since.
    The outermost wrapper of a training sub-env, installed only when the run takes checkpoints."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.seed: int | None = None
        self.rng_state: dict[str, Any] | None = None
        self.actions: list[np.ndarray] = []
        self.last_obs: Any = None
        self.too_long = False  # an episode went past MAX_TAPE steps

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.seed, self.actions = seed, []
        # Read before the reset draws from it (reading a bit generator's state draws nothing).
        self.rng_state = None if seed is not None else self.env.unwrapped.np_random.bit_generator.state
        obs, info = self.env.reset(seed=seed, options=options)
        self.last_obs = obs
        return obs, info

    def step(self, action: Any):
        if len(self.actions) < MAX_TAPE:
            self.actions.append(np.array(action, copy=True))
        elif not self.too_long:
            self.too_long, self.actions = True, []
        out = self.env.step(action)
        self.last_obs = out[0]
        return out


def tape_envs(envs: gym.vector.VectorEnv) -> None:
    """Wrap each in-process sub-env of ``envs`` in an :class:`EnvTape` (before its first reset), where a
    replay can put it back (nothing otherwise: such a run takes no checkpoints)."""
    if _env_problem(envs) is None:
        subs = envs.envs
        for i, sub in enumerate(subs):
            subs[i] = EnvTape(sub)


def _tapes(envs: Any) -> list[EnvTape] | None:
    subs = getattr(envs, "envs", None) if isinstance(envs, gym.vector.SyncVectorEnv) else None
    return subs if subs and all(isinstance(s, EnvTape) for s in subs) else None


def _env_problem(envs: Any) -> str | None:
    if not isinstance(envs, gym.vector.SyncVectorEnv):
        return "its envs are stepped outside this process (vec_env other than sync)"
    mod = type(envs.envs[0].unwrapped).__module__ + "."
    if not mod.startswith(TAPED_MODULES):
        return (f"its env ({mod.rstrip('.')}) may keep randomness outside Gymnasium's np_random, so replaying "
                "its episode is not known to put it back")
    return None


def _save_tapes(tapes: list[EnvTape], arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    out = []
    for i, t in enumerate(tapes):
        if t.actions:
            arrays[f"train.env{i}.actions"] = np.stack(t.actions)
        arrays[f"train.env{i}.obs"] = np.asarray(t.last_obs)
        out.append({"seed": t.seed, "rng_start": t.rng_state, "steps": len(t.actions),
                    "rng_now": t.env.unwrapped.np_random.bit_generator.state})
    return out


def _replay(tapes: list[EnvTape], saved: list[dict[str, Any]], arrays: dict[str, np.ndarray]) -> None:
    """Put each sub-env back by replaying its episode in progress; checked against what was saved."""
    if len(saved) != len(tapes):
        raise ResumeError(f"it holds {len(saved)} envs and this run has {len(tapes)}")
    for i, (t, s) in enumerate(zip(tapes, saved)):
        if s["seed"] is not None:
            t.reset(seed=int(s["seed"]))
        else:
            t.env.unwrapped.np_random.bit_generator.state = s["rng_start"]
            t.reset()
        for a in arrays.get(f"train.env{i}.actions", ())[: s["steps"]]:
            t.step(a)
        obs = arrays[f"train.env{i}.obs"]
        if (len(t.actions) != s["steps"] or not np.array_equal(np.asarray(t.last_obs), obs)
                or t.env.unwrapped.np_random.bit_generator.state != s["rng_now"]):
            raise ResumeError(f"env {i} replayed its episode of {s['steps']} steps to another state than the one "
                              "saved (the env is not deterministic given its seed and actions)")


# --------------------------------------------------------------------------- #
# Random streams and normaliser
# --------------------------------------------------------------------------- #
def _norm_arrays(norm: Any, arrays: dict[str, np.ndarray]) -> None:
    for name in ("obs_rms", "ret_rms"):
        rms = getattr(norm, name)
        arrays[f"train.norm.{name}.mean"] = np.asarray(rms.mean)
        arrays[f"train.norm.{name}.var"] = np.asarray(rms.var)
        arrays[f"train.norm.{name}.count"] = np.asarray(rms.count, dtype=np.float64)
    arrays["train.norm.ret"] = np.asarray(norm.ret)


def _load_norm(norm: Any, arrays: dict[str, np.ndarray]) -> None:
    for name in ("obs_rms", "ret_rms"):
        rms = getattr(norm, name)
        mean, var = arrays[f"train.norm.{name}.mean"], arrays[f"train.norm.{name}.var"]
        if mean.shape != np.shape(rms.mean):
            raise ResumeError(f"its normaliser's {name} has shape {mean.shape}, this run's {np.shape(rms.mean)}")
        rms.mean, rms.var, rms.count = mean.copy(), var.copy(), float(arrays[f"train.norm.{name}.count"])
    norm.ret = arrays["train.norm.ret"].copy()


def _prefixed(prefix: str, d: dict[str, Any]) -> dict[str, Any]:
    return {f"{prefix}{k}": v for k, v in d.items()}


def _unprefixed(prefix: str, d: dict[str, Any]) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in d.items() if k.startswith(prefix)}


class TrainState:
    """What an own algorithm's ``train`` holds across updates, to snapshot and put back.

    :param modules: the networks by name (state dicts: the policy, GRPO's frozen reference).
    :param optimizers: the torch optimisers by name.
    :param norm: the run's :class:`~bench.algos.common.Normalizer`, or ``None``.
    :param rng: the run's NumPy generator.
    :param generators: torch generators by name (minibatch shuffles).
    :param envs: the training vector env (its episodes in progress, through :class:`EnvTape`), or
        ``None`` where no episode is in progress at an update boundary (GRPO's groups reset with a seed).
    :param holder: an object whose ``obs`` (the observation acted on next) is kept, e.g. a collector.
    :param extra: ``(get, put)`` of further NumPy arrays of the algorithm's own (the NumPy REINFORCE's
        weights and Adam moments).
    :param unsupported: why this run cannot be continued bit for bit, where the algorithm knows
        (a language-model policy).
    """

    def __init__(self, *, modules: dict[str, torch.nn.Module] | None = None,
                 optimizers: dict[str, torch.optim.Optimizer] | None = None, norm: Any = None,
                 rng: np.random.Generator | None = None, generators: dict[str, torch.Generator] | None = None,
                 envs: Any = None, holder: Any = None,
                 extra: tuple[Callable[[], dict[str, np.ndarray]], Callable[[dict[str, np.ndarray]], None]] | None = None,
                 unsupported: str | None = None):
        self.modules, self.optimizers = modules or {}, optimizers or {}
        self.norm, self.rng, self.generators = norm, rng, generators or {}
        self.envs, self.holder, self.extra, self._why = envs, holder, extra, unsupported

    def unsupported(self) -> str | None:
        """Why this run takes no checkpoints (``None``: it does)."""
        if self._why is not None:
            return self._why
        if self.envs is not None:
            why = _env_problem(self.envs)
            tapes = _tapes(self.envs) if why is None else None
            if why is None and tapes is None:
                why = "its envs were built without tapes (checkpoints were off when they were made)"
            if tapes is not None and any(t.too_long for t in tapes):
                why = f"an episode went past {MAX_TAPE:,} steps, more than a checkpoint keeps to replay"
            return why
        return None

    def snapshot(self) -> Snapshot:
        """The state now, as data (copies: training may go on after)."""
        tensors: dict[str, torch.Tensor] = {"train.torch_rng": torch.get_rng_state()}
        arrays: dict[str, np.ndarray] = {}
        meta: dict[str, Any] = {"version": VERSION}
        for name, m in self.modules.items():
            tensors.update(_prefixed(f"train.module.{name}.", {k: v.detach().cpu().clone()
                                                                for k, v in m.state_dict().items()}))
        for name, opt in self.optimizers.items():
            sd = opt.state_dict()
            # The per-parameter tensors as tensors, the rest (param groups, plain numbers) as JSON.
            state_meta: dict[str, dict[str, Any]] = {}
            for idx, per in sd["state"].items():
                for k, v in per.items():
                    if isinstance(v, torch.Tensor):
                        tensors[f"train.optim.{name}.{idx}.{k}"] = v.detach().cpu().clone()
                    else:
                        state_meta.setdefault(str(idx), {})[k] = v
            meta[f"optim.{name}"] = {"groups": sd["param_groups"], "state": state_meta,
                                     "tensors": {str(i): sorted(k for k, v in per.items() if isinstance(v, torch.Tensor))
                                                 for i, per in sd["state"].items()}}
        for name, g in self.generators.items():
            tensors[f"train.gen.{name}"] = g.get_state()
        if self.rng is not None:
            meta["rng"] = self.rng.bit_generator.state
        if self.norm is not None:
            _norm_arrays(self.norm, arrays)
        if self.holder is not None:
            arrays["train.obs"] = np.array(self.holder.obs, copy=True)
        if self.extra is not None:
            arrays.update(_prefixed("train.extra.", {k: np.array(v, copy=True) for k, v in self.extra[0]().items()}))
        tapes = _tapes(self.envs) if self.envs is not None else None
        if tapes is not None:
            meta["envs"] = _save_tapes(tapes, arrays)
        return Snapshot(tensors, arrays, meta)

    def restore(self, snap: Snapshot) -> None:
        """Put ``snap`` back. :raises ResumeError: it does not fit this run."""
        t, a, meta = snap.tensors, snap.arrays, snap.meta
        if meta.get("version") != VERSION:
            raise ResumeError(f"its format version is {meta.get('version')!r}; allowed: {VERSION}")
        try:
            for name, m in self.modules.items():
                m.load_state_dict(_unprefixed(f"train.module.{name}.", t))
            for name, opt in self.optimizers.items():
                om = meta[f"optim.{name}"]
                state = {int(i): {**om["state"].get(i, {}), **{k: t[f"train.optim.{name}.{i}.{k}"] for k in keys}}
                         for i, keys in om["tensors"].items()}
                groups = opt.param_groups
                opt.load_state_dict({"state": state, "param_groups": om["groups"]})
                # torch puts new group dicts in place; the old ones are kept, updated, because others hold
                # them (fused_adam_step reads the learning rate the driver writes from its group).
                for mine, loaded in zip(groups, opt.param_groups):
                    mine.update(loaded)
                opt.param_groups = groups
            for name, g in self.generators.items():
                g.set_state(t[f"train.gen.{name}"])
            torch.set_rng_state(t["train.torch_rng"])
            if self.rng is not None:
                self.rng.bit_generator.state = meta["rng"]
            if self.norm is not None:
                _load_norm(self.norm, a)
            if self.holder is not None:
                if a["train.obs"].shape != np.shape(self.holder.obs):
                    raise ResumeError(f"its observation has shape {a['train.obs'].shape}, this run's "
                                      f"{np.shape(self.holder.obs)}")
                self.holder.obs = a["train.obs"].copy()
            if self.extra is not None:
                self.extra[1]({k: v.copy() for k, v in _unprefixed("train.extra.", a).items()})
            tapes = _tapes(self.envs) if self.envs is not None else None
            if tapes is not None:
                _replay(tapes, meta["envs"], a)
        except (KeyError, RuntimeError, ValueError, TypeError, IndexError) as e:
            if isinstance(e, ResumeError):
                raise
            raise ResumeError(f"it does not fit this run ({type(e).__name__}: {e})".replace("\n", " ")) from e


def restore_all(state: TrainState, snap: Snapshot, budget: Any, recorder: Any) -> None:
    """Put ``snap`` back into the training state, the budget and the recorder, in this order (replaying
    the envs counts their steps again, which the recorder's saved progress then overwrites)."""
    state.restore(snap)
    budget.seek(snap.meta["budget"])
    recorder.load_progress(_unprefixed("recorder.", snap.arrays), snap.meta["recorder"],
                           _unprefixed("recorder.", snap.tensors))


def snapshot_all(state: TrainState, budget: Any, recorder: Any) -> Snapshot:
    """The whole checkpoint: the training state, the budget's position, the recorder's progress."""
    snap = state.snapshot()
    arrays, meta, tensors = recorder.progress()
    snap.arrays.update(_prefixed("recorder.", arrays))
    snap.tensors.update(_prefixed("recorder.", tensors))
    snap.meta.update(budget=budget.position(), recorder=meta)
    return snap


class Checkpointing:
    """The driver's side of a run's checkpoints: the last one put back before the first update
    (:meth:`begin`), one taken after each update that reaches the next interval (:meth:`after_update`).
    ``recorder.checkpoints`` (:class:`bench.run.checkpoints.Checkpoints`) reads and writes the files."""

    def __init__(self, state: TrainState, budget: Any, recorder: Any, files: Any):
        self.state, self.budget, self.recorder, self.files = state, budget, recorder, files
        self.stopped = False

    @classmethod
    def begin(cls, state: TrainState | None, budget: Any, recorder: Any,
              policy: Callable[[], Any]) -> "Checkpointing | None":
        """Continue from the last checkpoint if there is one; ``None`` where the run takes none (no
        ``recorder.checkpoints``, or a run that cannot be continued bit for bit, which its note says).
        ``policy()`` is the driver's: a continued run keeps it as its last policy, as the checkpointed
        run had (its final policy, should no update follow).

        :raises Exception: the checkpoint files' own refusal (``files.refuse``) of one that does not fit.
        :raises Paused: the checkpoint put back is at or past the files' pause step."""
        files = getattr(recorder, "checkpoints", None)
        if files is None:
            return None
        why = state.unsupported() if state is not None else "its algorithm keeps no checkpoint state"
        if why is not None or state is None:
            files.off(why)
            return None
        saved = files.load()
        if saved is not None:
            try:
                restore_all(state, saved, budget, recorder)
            except ResumeError as e:
                files.refuse(str(e))
            if getattr(recorder, "save", "none") != "none":
                recorder.last_policy = policy()
        files.start(recorder.steps)
        if saved is not None and getattr(files, "pause_due", lambda _: False)(recorder.steps):
            # Already past its pause step (a rung that one update overshot reaches the next rung too): stop at
            # once, where the checkpoint is, instead of running an update past it.
            raise Paused(recorder.steps)
        return cls(state, budget, recorder, files)

    def after_update(self) -> None:
        """Take a checkpoint when one is due, unless the budget is spent (a finished run needs none). At the
        files' pause step (``files.pause_at``, a race's rung) take one whether due or not, and stop there.

        :raises Paused: the run reached its pause step and its checkpoint there was written."""
        rec = self.recorder
        pause = getattr(self.files, "pause_due", lambda _: False)(rec.steps)
        if self.stopped or not ((pause or self.files.due(rec.steps)) and self.budget.more()):
            return
        why = self.state.unsupported()
        if why is not None:  # an episode too long to keep: no more checkpoints (the last one stays valid), and no
            self.files.off(why)  # pause either: the run goes on to its full budget
            self.stopped = True
            return
        with rec.paused():  # not training time, as evaluation is not
            written = self.files.save(snapshot_all(self.state, self.budget, rec), rec.steps)
        if pause and written:  # a checkpoint that could not be written is no place to continue from: run on
            raise Paused(rec.steps)
