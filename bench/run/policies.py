"""Acting with saved policies: ``bench eval`` and :func:`bench.api.load_policy`.

A run keeps its policies when its suite says ``save: final | best`` (:mod:`bench.run.saving`).
A run is named by its key or a unique prefix of it (``bench status`` and ``bench export`` show
keys), or by a selector in ``--only``'s syntax, ``label=ppo-bench,env=CartPole-v1,seed=0``
(keys ``env``, ``algo``, ``impl``, ``label``, ``seed``), which must pick one run that has a saved policy.

Example (a notebook)::

    from bench.api import load_policy
    pi = load_policy("label=ppo-bench,env=CartPole-v1,seed=0", store="sqlite:///results/bench.db")
    obs, _ = env.reset(seed=0)
    action = pi.act(obs)          # one observation in, one action out (a batch in, a batch out)
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np

from bench.algos.saved_files import RESAVE, Refused
from bench.distribution import install_hint
from bench.run.saving import policies_dir
from bench.storage.urls import DEFAULT_URL, StoreURL

#: Which saved policy to load: the one at the best evaluation when the run kept it, else the final one.
Kind = Literal["auto", "best", "final"]


#: The flag of ``bench eval`` (``trust=True`` in :func:`load_policy`) that loads files which run code.
TRUST_FLAG = "--trust"


class PolicyError(ValueError):
    """A run that cannot be found or has no saved policy, as one line saying what is allowed."""


@dataclass
class LoadedPolicy:
    """A saved policy, ready to act. :meth:`act` takes one observation (or a batch) of the raw env.

    :param key: the run's key; ``label``, ``env_id``, ``algo``, ``impl``, ``seed`` are the run's.
    :param kind: ``best`` or ``final``; ``step`` the env step it was saved at; ``eval_return`` (``best``)
        the mean return of the periodic evaluation that chose it.
    :param folder: where its files are.
    """

    key: str
    label: str
    env_id: str
    algo: str
    impl: str
    seed: int
    kind: str
    step: int
    eval_return: float | None
    folder: Path
    observation_space: Any = field(repr=False)
    action_space: Any = field(repr=False)
    batch_act: Callable[[np.ndarray], np.ndarray] = field(repr=False)

    def act(self, obs: Any) -> np.ndarray:
        """The action for one observation of the env's shape (or actions for a batch ``(B, *shape)``)."""
        x = np.asarray(obs)
        single = x.shape == tuple(self.observation_space.shape)
        a = self.batch_act(x[None] if single else x)
        return a[0] if single else a

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.batch_act(obs)


# --------------------------------------------------------------------------- #
# Finding a run
# --------------------------------------------------------------------------- #
def find_run(store: Any, run: str, where: str = "the store") -> dict[str, Any]:
    """The one run ``run`` names in ``store`` (a :class:`~bench.storage.store.Store`, described as ``where`` in
    errors), as a dict of its ``runs_frame`` row with ``meta`` parsed. Raises :class:`PolicyError` with one line."""
    from bench.suites.suite import matches_only, parse_only

    frame = store.runs_frame().drop_duplicates("key")
    if frame.empty:
        raise PolicyError(f"RUN: {where} holds no runs")
    if "=" in run:
        try:
            only = parse_only(run)
        except ValueError as e:
            raise PolicyError(f"RUN: {str(e).removeprefix('--only: ')}") from None
        hit = frame[[matches_only(only, {"env": r.env, "algo": r.algo, "impl": r.impl, "label": r.label,
                                          "seed": r.seed}) for r in frame.itertuples()]]
        what = f"selector {run!r}"
    else:
        if len(run) < 4 or any(c not in "0123456789abcdef" for c in run):
            raise PolicyError(f"RUN: {run!r} is neither a run key (or a prefix of 4 or more of its hex digits) nor a "
                              "selector; allowed: a key prefix, or label=…,env=…,seed=… (keys env, algo, impl, label, seed)")
        hit = frame[frame["key"].str.startswith(run)]
        what = f"key prefix {run!r}"
    if hit.empty:
        raise PolicyError(f"RUN: {what} matches none of the {len(frame)} runs in {where}")
    metas = [json.loads(m) if isinstance(m, str) and m else {} for m in hit["meta"]]
    saved = [i for i, m in enumerate(metas) if m.get("policies")]
    if not saved:
        n = len(hit)
        raise PolicyError(f"RUN: {what} matches {n} run{'s' if n > 1 else ''}, none with a saved policy (set save: final "
                          "or best in the suite, in defaults or per label, before the run); allowed: a run with one")
    if len(saved) > 1:
        some = ", ".join(f"{hit.iloc[i]['key'][:8]} ({hit.iloc[i]['label']} {hit.iloc[i]['env']} seed "
                         f"{hit.iloc[i]['seed']})" for i in saved[:4])
        raise PolicyError(f"RUN: {what} matches {len(saved)} runs with saved policies: {some}"
                          f"{' …' if len(saved) > 4 else ''}; allowed: a key prefix or a selector that picks one")
    row = hit.iloc[saved[0]].to_dict()
    row["meta"] = metas[saved[0]]
    return row


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #
def load_policy(run: str, store: StoreURL | str = DEFAULT_URL, *, kind: Kind = "auto", artifacts: str | None = None,
                deterministic: bool = True, trust: bool = False) -> LoadedPolicy:
    """Load a run's saved policy from ``store`` (a store URL).

    Its files are read as data (tensors, arrays, JSON: :mod:`bench.algos.saved_files`); nothing in them is run.

    :param run: a run key or unique prefix of one, or a selector such as ``label=ppo-bench,env=CartPole-v1,seed=0``.
    :param kind: ``best`` (the policy at the best periodic evaluation), ``final`` (after the last update), or
        ``auto``: best where the run kept it, else final.
    :param artifacts: the policies folder, where it is no longer where the run wrote it (its store's
        default, :func:`bench.run.saving.policies_dir`, is tried next).
    :param deterministic: act with the distribution's mode, as the periodic evaluation did; else sample.
    :param trust: also load what runs code: an SB3 policy saved by an earlier bench (SB3's zip and
        VecNormalize's pickle, unpickled), and an env key ``module:EnvId`` whose module is not imported yet
        (imported). Only for files you trust (``bench eval --trust``).
    :raises PolicyError: no such run, no saved policy of that kind, or a file refused (one line that names it).
    """
    from bench.algos.sb3_saved import SB3_STATE, SB3_ZIP
    from bench.envs.registry import parse_env_key
    from bench.storage.schema import StoreMissing
    from bench.storage.store import Store

    store_url = StoreURL.parse(store)  # text checked here, once (a StoreURL as it is)
    try:
        db = Store(store_url, readonly=True)
    except StoreMissing:
        raise PolicyError(f"--store: {store_url.shown} does not exist; allowed: a store that bench run wrote") from None
    row = find_run(db, run, store_url.shown)
    info = row["meta"]["policies"]
    kept = info.get("kept", {})
    chosen = ("best" if "best" in kept else "final") if kind == "auto" else kind
    if chosen not in kept:
        raise PolicyError(f"--kind: run {row['key']} kept {', '.join(sorted(kept)) or 'no policy'}, not {chosen}; "
                          f"allowed: {', '.join(sorted(kept))} or auto")
    folder = _folder(row["key"], info.get("dir"), store_url, artifacts, f"{chosen}.json")
    manifest, params = _manifest(folder / f"{chosen}.json")
    names: dict[str, str] = manifest["files"]
    if manifest["format"] == SB3_ZIP and not trust:
        old = " and ".join(str(folder / n) for n in names.values())
        raise PolicyError(f"{old}: an SB3 policy saved by an earlier bench as SB3's zip (and VecNormalize's pickle), "
                          f"whose pickled objects run code when loaded; bench loads it only with {TRUST_FLAG} "
                          f"(bench.api: trust=True); allowed: {RESAVE}, or {TRUST_FLAG} for files you trust")
    module = parse_env_key(manifest["env_id"])[0]
    if module and module not in sys.modules and not trust:
        raise PolicyError(f"{folder / f'{chosen}.json'}: env {manifest['env_id']!r} would import module {module!r}, "
                          f"which the saved policy names; bench imports it only with {TRUST_FLAG} (bench.api: "
                          f"trust=True); allowed: {TRUST_FLAG} for a module you trust, or import it first")
    files = {suffix: (folder / name).read_bytes() for suffix, name in names.items() if (folder / name).is_file()}
    try:
        env = _env(manifest["env_id"])
    except (KeyError, ValueError) as e:  # an env this machine does not have (or a manifest that names none)
        raise PolicyError(f"{folder / f'{chosen}.json'}: env {manifest['env_id']!r}: {str(e).strip(chr(34) + chr(39))}") from None
    obs_space, action_space = env.observation_space, env.action_space
    env.close()
    try:
        if manifest["format"] in (SB3_STATE, SB3_ZIP):
            from bench.algos.sb3 import restore_sb3

            act = restore_sb3(manifest["format"], files, manifest["algo"], params, deterministic=deterministic,
                              trust=trust)
        else:
            from bench.algos.checkpoint import restore

            act = restore(manifest["format"], files, algo=manifest["algo"], params=params, obs_space=obs_space,
                          action_space=action_space, deterministic=deterministic)
    except Refused as e:
        raise PolicyError(f"{folder / names.get(e.suffix, f'{chosen}.{e.suffix}')}: {e.why}") from None
    except Exception as e:  # noqa: BLE001 - only a trusted old SB3 zip gets here: SB3's load, whatever it raises
        if manifest["format"] != SB3_ZIP:
            raise
        raise PolicyError(f"{folder / names.get('zip', f'{chosen}.zip')}: SB3 could not load it "
                          f"({type(e).__name__}: {' '.join(str(e).split())[:200]}); allowed: {RESAVE}") from None
    eval_return = manifest.get("eval_return")
    return LoadedPolicy(key=row["key"], label=row["label"], env_id=manifest["env_id"], algo=manifest["algo"],
                        impl=manifest["impl"], seed=int(manifest["seed"]), kind=chosen, step=int(manifest["step"]),
                        eval_return=None if eval_return is None else float(eval_return), folder=folder,
                        observation_space=obs_space, action_space=action_space, batch_act=act)


def _manifest(path: Path) -> tuple[dict[str, Any], Any]:
    """A policy's manifest (:func:`bench.run.saving.save_policies`) and the hyperparameters it holds, checked:
    a manifest bench did not write is one line that names it."""
    from pydantic import ValidationError

    from bench.algos.checkpoint import TORCH
    from bench.algos.hyperparams import PARAMS
    from bench.algos.reinforce.reinforce_numpy import LINEAR
    from bench.algos.sb3_saved import SB3_STATE, SB3_ZIP
    from bench.envs.registry import parse_env_key

    formats = (TORCH, LINEAR, SB3_STATE, SB3_ZIP)

    def bad(what: str) -> PolicyError:
        return PolicyError(f"{path}: {what}; not a manifest bench wrote (or changed since); allowed: {RESAVE}")

    try:
        m = json.loads(path.read_text())
    except (UnicodeDecodeError, ValueError):
        raise bad("not JSON") from None
    if not isinstance(m, dict):
        raise bad("not a JSON object")
    for key, types in (("format", str), ("files", dict), ("env_id", str), ("algo", str), ("impl", str),
                       ("hyperparams", dict), ("seed", int), ("step", int)):
        if not isinstance(m.get(key), types):
            raise bad(f"{key!r} missing or of the wrong type")
    if m["format"] not in formats:
        raise bad(f"format {m['format']!r}, allowed: {', '.join(formats)}")
    for suffix, name in m["files"].items():  # plain names in the policy's own folder, nowhere else
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise bad(f"files.{suffix}: {name!r} is not a file name in the policy's folder")
    if m["algo"] not in PARAMS:
        raise bad(f"algo {m['algo']!r}, allowed: {', '.join(sorted(PARAMS))}")
    try:
        params = PARAMS[m["algo"]].model_validate(m["hyperparams"])
        parse_env_key(m["env_id"])
    except (ValidationError, ValueError) as e:
        raise bad(" ".join(str(e).split())[:200]) from None
    return m, params


def _folder(key: str, recorded: str | None, store_url: StoreURL, artifacts: str | None, probe: str) -> Path:
    """The run's policies folder: under ``artifacts`` when given, else where the run wrote it, else under the
    store's default folder (a results folder moved as a whole)."""
    tried = []
    for base in ([Path(artifacts) / key] if artifacts else [Path(recorded)] if recorded else []) + \
            [policies_dir(store_url) / key]:
        if (base / probe).is_file():
            return base
        tried.append(str(base))
    raise PolicyError(f"--artifacts: the saved policy of run {key} is not in {' nor '.join(dict.fromkeys(tried))}; "
                      "allowed: the policies folder the run wrote (pass --artifacts DIR where it is now)")


def _env(env_id: str) -> Any:
    from bench.envs import make_env

    return make_env(env_id, training=False)


# --------------------------------------------------------------------------- #
# Evaluating, and filming
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class Evaluation:
    """What :func:`evaluate` measured: one return per episode; ``frames`` written to ``video``, if any."""

    returns: list[float]
    seed: int
    video: Path | None = None
    frames: int = 0

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def sd(self) -> float:
        """Sample standard deviation (n − 1); 0 for one episode."""
        return float(np.std(self.returns, ddof=1)) if len(self.returns) > 1 else 0.0


#: The evaluation seed of run seed ``s`` is ``s + EVAL_SEED_OFFSET``, as the runner's periodic evaluation
#: (bench.run.runner.make_recorder): ``bench eval`` replays the episodes a best policy was chosen on.
EVAL_SEED_OFFSET = 1_000_000


def video_missing() -> str | None:
    """One line saying what to install for ``--video``, or ``None`` when imageio-ffmpeg is there."""
    import importlib.util

    if importlib.util.find_spec("imageio_ffmpeg") is None:
        return ("--video: needs imageio-ffmpeg (it ships its own ffmpeg), which is not installed; install it with "
                + install_hint("video"))
    return None


def evaluate(policy: LoadedPolicy, episodes: int = 10, *, seed: int | None = None,
             video: Path | None = None) -> Evaluation:
    """Run ``episodes`` episodes of ``policy`` on a fresh evaluation env (:func:`bench.envs.evaluate_policy`:
    the first reset with ``seed``, default the run's evaluation seed, later ones continuing its stream), and with
    ``video`` write every frame to that MP4 (H.264, the env's ``render_fps``) through imageio-ffmpeg.

    Gymnasium's ``RecordVideo`` and ``save_video`` need moviepy; imageio-ffmpeg alone writes the same file with
    less to install.
    """
    from bench.envs import evaluate_policy

    if episodes < 1:
        raise PolicyError(f"--episodes: {episodes}; allowed: 1 or more")
    seed = policy.seed + EVAL_SEED_OFFSET if seed is None else seed
    if video is None:
        return Evaluation(evaluate_policy(policy.env_id, policy, episodes, seed=seed), seed)
    # Frames come from render_mode="rgb_array", which needs no display; without this, pygame's SDL (the classic
    # control envs' renderer) looks for one and prints "XDG_RUNTIME_DIR is invalid" on a headless machine.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    writer = _VideoWriter(video, _fps(policy.env_id))
    try:
        returns = evaluate_policy(policy.env_id, policy, episodes, seed=seed, on_frame=writer.add)
    finally:
        writer.close()
    return Evaluation(returns, seed, video, writer.frames)


def _fps(env_id: str) -> float:
    env = _env(env_id)
    fps = env.metadata.get("render_fps") or 30
    env.close()
    return float(fps) if math.isfinite(float(fps)) and float(fps) > 0 else 30.0


class _VideoWriter:
    """Frames to an MP4 through imageio-ffmpeg, streamed (a long film is never held in memory)."""

    def __init__(self, path: Path, fps: float):
        self.path, self.fps, self.frames = path, fps, 0
        self._gen: Any = None

    def add(self, frame: np.ndarray) -> None:
        f = np.asarray(frame, dtype=np.uint8)
        if f.ndim == 2:
            f = np.repeat(f[..., None], 3, axis=2)
        # yuv420p (what every player reads) needs even sides: pad by one edge row / column where odd.
        f = np.pad(f, ((0, f.shape[0] % 2), (0, f.shape[1] % 2), (0, 0)), mode="edge")
        if self._gen is None:
            import imageio_ffmpeg

            self._gen = imageio_ffmpeg.write_frames(str(self.path), (f.shape[1], f.shape[0]), fps=self.fps,
                                                    codec="libx264", pix_fmt_out="yuv420p", macro_block_size=1,
                                                    ffmpeg_log_level="error")
            self._gen.send(None)
        self._gen.send(np.ascontiguousarray(f[..., :3]))
        self.frames += 1

    def close(self) -> None:
        if self._gen is not None:
            self._gen.close()
