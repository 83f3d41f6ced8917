"""Stable-Baselines3 baselines, recorded exactly like the project's own algorithms.

:func:`train_sb3` runs one SB3 (PPO, A2C) or sb3-contrib (TRPO) training run on
envs from :func:`bench.envs.make_env` / :func:`bench.envs.make_vec_env` (stepped as the
hyperparameter ``vec_env`` says, see :func:`sb3_vec_env`), whose episode monitor feeds the
recorder its env steps and raw episode returns: the very code that measures the
project's own implementations. SB3's logger output is mapped onto the bench's
namespaced diagnostics (``loss/value``, ``policy/entropy`` ...) and the recorder's
``after_update`` is called once after each update, which is where periodic
evaluation of the deterministic policy happens.

When in SB3 2.9's on-policy loop (``OnPolicyAlgorithm.learn``) things happen, per
iteration: ``collect_rollouts`` (callback ``on_rollout_start``, ``on_step`` ×
n_steps, ``on_rollout_end``), then ``dump_logs`` (with ``log_interval=1``), then
``train()``. So SB3's own dump of iteration k carries the ``train/*`` values of
update k-1, at the step count of rollout k, and the last update is never dumped.
There is no callback hook right after ``train()``; the first one is the next
iteration's ``on_rollout_start`` (or ``on_training_end`` after the last update).
The callback here uses exactly those hooks: it dumps the logger itself (so each
update's diagnostics are recorded at the step count the update happened at, and
the final update's too), then calls ``recorder.after_update``.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any, Callable

import numpy as np
from pydantic import BaseModel

from bench.algos.param_types import NetArch
from bench.algos.registry import ALGOS
from bench.algos.spec import sb3_schedule
from bench.algos.saved_files import RESAVE, Refused
from bench.algos.sb3_saved import SB3_ZIP, acting, read, restore_zip, sb3_checkpoint
from bench.storage.record import SavablePolicy

__all__ = ["train_sb3", "sb3_vec_env", "SB3_KEYS", "SB3_OFF_POLICY_KEYS", "policy_kwargs", "schedule", "sb3_checkpoint",
           "restore_sb3"]

#: SB3 logger key → (bench diagnostics key, sign). Keys not listed (time/*, rollout/*,
#: train/std, train/n_updates, train/clip_range ...) are dropped.
SB3_KEYS: dict[str, tuple[str, float]] = {
    "train/policy_gradient_loss": ("loss/policy", 1.0),  # PPO
    "train/policy_loss": ("loss/policy", 1.0),  # A2C
    # TRPO logs the surrogate objective it maximises; negated so that, like every
    # other loss/*, lower is better.
    "train/policy_objective": ("loss/policy", -1.0),
    "train/value_loss": ("loss/value", 1.0),
    "train/loss": ("loss/total", 1.0),  # PPO: total loss of the last minibatch
    # SB3 logs the entropy *loss*, i.e. minus the mean entropy.
    "train/entropy_loss": ("policy/entropy", -1.0),
    "train/approx_kl": ("policy/approx_kl", 1.0),  # PPO
    "train/kl_divergence_loss": ("policy/approx_kl", 1.0),  # TRPO: KL of the accepted step
    "train/clip_fraction": ("policy/clip_fraction", 1.0),
    "train/explained_variance": ("value/explained_variance", 1.0),
    "train/is_line_search_success": ("trpo/step_accepted", 1.0),
    # Recorded by the callback (not SB3): the mean log std after the update.
    "bench/log_std": ("policy/log_std", 1.0),
}


#: SB3 schedule of a value (constant, or the zoo's ``lin_X``): the specs' ``sb3_kwargs`` use it too.
schedule = sb3_schedule


def _minatar_extractor_class() -> type:
    """SB3 features extractor wrapping :class:`~bench.envs.minatar.MinAtarCNN`, the module the own policies use, so both
    implementations run the same torso on small frames (built lazily: SB3 is imported on use)."""
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    from bench.envs.minatar import MinAtarCNN

    class MinAtarExtractor(BaseFeaturesExtractor):
        def __init__(self, observation_space: Any, features_dim: int = 128) -> None:
            super().__init__(observation_space, features_dim)
            # SB3's ortho_init re-initialises it with gain √2, as the own policy does.
            self.cnn = MinAtarCNN(*observation_space.shape, ortho=False)

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            return self.cnn(observations)

    return MinAtarExtractor


def policy_kwargs(params: BaseModel, *, continuous: bool, frames: tuple[int, ...] | None = None,
                  separate_critic: bool = False) -> dict[str, Any]:
    """SB3 ``policy_kwargs`` from the structured fields.

    ``frames``: the ``(C, H, W)`` observation shape of a pixel env. Frames too small for the Nature CNN
    (MinAtar's 10×10) get the own policy's MinAtar CNN with the heads right on its 128 features, as
    :class:`~bench.algos.policy.ActorCritic` builds them (SB3 would otherwise add 64-64 layers after a
    custom extractor). ``separate_critic`` (TRPO on pixels): a CNN of its own for the critic, as the own
    TRPO has, so that fitting the critic trains features and never moves the policy.
    """
    import torch.nn as nn

    from bench.envs.minatar import NATURE_MIN_SIZE

    kw: dict[str, Any] = {
        "activation_fn": {"tanh": nn.Tanh, "relu": nn.ReLU}[params.activation],  # type: ignore[attr-defined]
        "ortho_init": params.ortho_init,  # type: ignore[attr-defined]
    }
    arch = params.net_arch  # type: ignore[attr-defined]
    if isinstance(arch, NetArch):
        kw["net_arch"] = dict(pi=list(arch.pi), vf=list(arch.vf))
    elif arch is not None:
        kw["net_arch"] = list(arch)
    if frames is not None:
        if min(frames[1:]) < NATURE_MIN_SIZE:
            kw["features_extractor_class"] = _minatar_extractor_class()
            kw["net_arch"] = []
        if separate_critic:
            kw["share_features_extractor"] = False
    if continuous:
        kw["log_std_init"] = params.log_std_init  # type: ignore[attr-defined]
    return kw


def _algo_kwargs(algo: str, params: BaseModel, action_space: Any = None) -> dict[str, Any]:
    """SB3 constructor arguments of on-policy ``algo``: those every on-policy SB3 algorithm shares, then the
    algorithm's own (its spec's ``sb3_kwargs``)."""
    p: Any = params
    own = ALGOS[algo].sb3_kwargs if algo in ALGOS else None
    if own is None:
        allowed = ", ".join(n for n, s in ALGOS.items() if s.sb3_kwargs and s.policy == "on")
        raise ValueError(f"no SB3 baseline for {algo!r}; allowed: {allowed}")
    common = dict(
        learning_rate=schedule(p.learning_rate, p.lr_schedule),
        n_steps=p.n_steps,
        gamma=p.gamma,
        gae_lambda=p.gae_lambda,
        normalize_advantage=p.normalize_advantage,
        # gSDE: SB3's ActorCriticPolicy then builds StateDependentNoiseDistribution (full_std, exp, no squashing,
        # learn_features off), as bench.algos.policy.SDEGaussianPd.
        use_sde=p.use_sde,
        sde_sample_freq=p.sde_sample_freq,
    )
    return dict(common, **own(params, action_space))


def _model_class(algo: str) -> type:
    """The SB3 / sb3-contrib model class of ``algo``: its spec's ``sb3_class`` (imported here, on first use)."""
    import importlib

    name = ALGOS[algo].sb3_class if algo in ALGOS else None
    if name is None:
        raise ValueError(f"no SB3 baseline for {algo!r}; allowed: {', '.join(n for n, s in ALGOS.items() if s.sb3_class)}")
    module, _, cls = name.partition(":")
    return getattr(importlib.import_module(module), cls)


def _writer_class() -> type:
    from stable_baselines3.common.logger import KVWriter

    class RecorderWriter(KVWriter):
        """Forwards SB3 logger dumps to ``recorder.diagnostics``, renamed by ``keys`` (:data:`SB3_KEYS`)."""

        def __init__(self, recorder: Any, keys: dict[str, tuple[str, float]] = SB3_KEYS) -> None:
            self.recorder = recorder
            self.keys = keys

        def write(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0) -> None:
            out: dict[str, float] = {}
            for key, value in key_values.items():
                hit = self.keys.get(key)
                if hit is None or value is None:
                    continue
                name, sign = hit
                out[name] = sign * float(value)
            if out:
                self.recorder.diagnostics(out, step=int(step))

        def close(self) -> None:
            pass

    return RecorderWriter


def _callback_class() -> type:
    from stable_baselines3.common.callbacks import BaseCallback

    class AfterUpdate(BaseCallback):
        """Once per update, right after it: dump diagnostics, then ``recorder.after_update``.

        ``on_rollout_end`` marks that an update (``train()``) follows; the next
        ``on_rollout_start`` or ``on_training_end`` is the first hook after it.
        """

        def __init__(self, recorder: Any, policy_fn: Callable[[np.ndarray], np.ndarray], continuous: bool) -> None:
            super().__init__(verbose=0)
            self.recorder = recorder
            self.policy_fn = policy_fn
            self.continuous = continuous
            self._pending = False

        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            self._pending = True

        def _on_rollout_start(self) -> None:
            if self._pending:
                self._after_update()

        def _on_training_end(self) -> None:
            if self._pending:
                self._after_update()

        def _after_update(self) -> None:
            self._pending = False
            model = self.model
            log_std = getattr(model.policy, "log_std", None)
            if self.continuous and log_std is not None:
                model.logger.record("bench/log_std", float(log_std.detach().mean().item()))
            model.logger.dump(step=model.num_timesteps)
            self.recorder.after_update(self.policy_fn)

    return AfterUpdate


def _adapter_class() -> type:
    from stable_baselines3.common.vec_env import VecEnv

    class GymVectorVecEnv(VecEnv):
        """An SB3 ``VecEnv`` over a Gymnasium vector env with same-step autoreset (:func:`bench.envs.make_vec_env`).

        SB3's conventions, as its ``DummyVecEnv`` keeps them: ``step_wait`` returns
        ``dones = terminated | truncated`` with the reset observation of a finished
        sub-env, its last observation in ``infos[i]["terminal_observation"]`` and
        ``infos[i]["TimeLimit.truncated"] = truncated and not terminated`` (which SB3's
        on-policy collection reads to bootstrap V(s') at time limits). SB3 seeds
        with ``seed(s)`` → sub-env ``i`` gets ``s + i``, exactly what a Gymnasium
        vector env's ``reset(seed=s)`` does, so the seed is passed on as one int.
        """

        def __init__(self, venv: Any) -> None:
            self.venv = venv
            super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
            self._actions: np.ndarray | None = None

        def reset(self) -> np.ndarray:
            seed = self._seeds[0] if self._seeds and self._seeds[0] is not None else None
            obs, _ = self.venv.reset(seed=seed, options=self._options[0] or None)
            self.reset_infos = [{} for _ in range(self.num_envs)]
            self._reset_seeds()
            self._reset_options()
            return obs

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = actions

        def step_wait(self) -> Any:
            obs, reward, terminated, truncated, info = self.venv.step(self._actions)
            dones = np.logical_or(terminated, truncated)
            infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
            for i in np.flatnonzero(dones):
                infos[i]["terminal_observation"] = info["final_obs"][i]
                infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            return obs, np.asarray(reward, dtype=np.float32), dones, infos

        def close(self) -> None:
            self.venv.close()

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            # The vector env's attribute for every sub-env asked (SB3 asks for render_mode and the like).
            return [getattr(self.venv, attr_name, None) for _ in self._get_indices(indices)]

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            setattr(self.venv, attr_name, value)

        def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
            raise NotImplementedError(f"env_method({method_name!r}): the sub-envs of a vector env are not reachable")

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return [False for _ in self._get_indices(indices)]

    return GymVectorVecEnv


def sb3_vec_env(env_id: str, n_envs: int, *, recorder: Any, vec_env: str) -> Any:
    """The SB3 ``VecEnv`` of a run: SB3's ``DummyVecEnv`` over :func:`bench.envs.make_env` for ``sync`` (as
    every run before the option existed), else an SB3 ``VecEnv`` over :func:`bench.envs.make_vec_env`'s
    vector env, so that SB3 steps envs exactly as the project's own algorithms do in that mode."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from bench.envs import make_env, make_vec_env

    if vec_env == "sync":
        return DummyVecEnv([partial(make_env, env_id, recorder=recorder) for _ in range(n_envs)])
    return _adapter_class()(make_vec_env(env_id, n_envs, recorder=recorder, vec_env=vec_env))


def _check_device(device: str) -> None:
    # SB3 silently falls back to the CPU when CUDA is missing; a benchmark must not
    # report CPU wall-clock under a "cuda" label.
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' was asked for but CUDA is not available on this host; allowed here: cpu")


def train_sb3(env_id: str, algo: str, params: BaseModel, *, seed: int, timesteps: int, recorder: Any) -> None:
    """Train one SB3 baseline (``ppo``, ``a2c`` or sb3-contrib ``trpo``; off-policy ``dqn``, ``sac`` and ``td3``
    go to :func:`_train_off_policy`), recording into ``recorder``.

    :param params: resolved hyperparameters (``PARAMS[algo]`` instance, see :mod:`bench.algos.hyperparams`).
    :param seed: seeds SB3 (Python, NumPy, torch, action space) and the training envs
        (env ``i`` is reset with ``seed + i``).
    :param timesteps: the budget in env steps. SB3 only stops between rollouts, so the
        run takes ``ceil(timesteps / (n_steps * n_envs))`` whole rollouts and
        ``recorder.steps`` ends at or above ``timesteps`` (by less than one rollout).
    :param recorder: a :class:`bench.storage.record.Recorder` (or anything with its protocol);
        episodes and steps arrive through the env monitor, diagnostics through SB3's
        logger, and ``after_update`` is called once after each update with the
        deterministic policy (observations normalised with the training
        ``VecNormalize`` statistics when normalisation is on; evaluation envs are raw).

    Raises whatever training raises, including :class:`bench.storage.record.Diverged`.
    """
    from stable_baselines3.common.logger import Logger

    from bench.envs import get_spec

    if ALGOS[algo].policy == "off":
        _train_off_policy(env_id, algo, params, seed=seed, timesteps=timesteps, recorder=recorder)
        return
    p: Any = params
    _check_device(p.device)
    spec = get_spec(env_id)
    continuous = spec.action == "continuous"
    policy = "CnnPolicy" if spec.obs == "pixels" else "MlpPolicy"
    kwargs = _algo_kwargs(algo, params)

    with warnings.catch_warnings():
        # Episodes are counted by bench's EpisodeMonitor, not SB3's Monitor.
        warnings.filterwarnings("ignore", message=r".*not wrapped with a ``Monitor`` wrapper.*")

        venv, vecnorm = _normalised_vec_env(env_id, p, recorder)
        try:
            model = _model_class(algo)(
                policy,
                venv,
                policy_kwargs=policy_kwargs(params, continuous=continuous, separate_critic=ALGOS[algo].sb3_separate_critic,
                                            frames=venv.observation_space.shape if spec.obs == "pixels" else None),
                seed=seed,
                device=p.device,
                verbose=0,
                **kwargs,
            )
            model.set_logger(Logger(folder=None, output_formats=[_writer_class()(recorder)]))
            # The policy holds actor and critic (SB3's ActorCriticPolicy); its one optimiser's state is
            # created by the first step and measured when the run ends.
            recorder.note_models(model.policy.parameters(), [model.policy.optimizer])

            policy_fn = SavablePolicy(_acting(model, vecnorm, True), partial(sb3_checkpoint, model, vecnorm))
            callback = _callback_class()(recorder, policy_fn, continuous)
            model.learn(total_timesteps=int(timesteps), log_interval=1, callback=callback, progress_bar=False)
            # The callback dumps after every update, the last one included (on_training_end);
            # this flush only matters if SB3 records anything after that.
            model.logger.dump(step=model.num_timesteps)
        finally:
            venv.close()



# --------------------------------------------------------------------------- #
# Off-policy reference points: SB3's DQN, SAC and TD3
# --------------------------------------------------------------------------- #
#: SB3 logger key → (bench diagnostics key, sign) for DQN, SAC and TD3 (``train/*`` are the means over the
#: gradient steps of SB3's last ``train()`` call).
SB3_OFF_POLICY_KEYS: dict[str, tuple[str, float]] = {
    "train/loss": ("loss/q", 1.0),  # DQN: Huber TD loss
    "train/critic_loss": ("loss/critic", 1.0),  # SAC, TD3: the twin critics' summed MSE
    "train/actor_loss": ("loss/actor", 1.0),  # SAC, TD3 (TD3 only on its delayed actor updates)
    "train/ent_coef": ("policy/ent_coef", 1.0),  # SAC's α
    "train/ent_coef_loss": ("loss/ent_coef", 1.0),  # SAC with ent_coef auto
    "rollout/exploration_rate": ("policy/epsilon", 1.0),  # DQN's ε
}
#: Off-policy runs report (diagnostics, ``recorder.after_update``: evaluation, heartbeat, CPU budget) once at
#: least this many env steps have passed since the last report, after a training phase: SAC and TD3 train
#: after every step, and one report per step would hold a million diagnostics rows in memory.
OFF_POLICY_REPORT_STEPS = 1000


def _off_policy_policy_kwargs(p: Any) -> dict[str, Any]:
    """SB3 ``policy_kwargs`` of DQN, SAC or TD3 (SAC's gSDE ones aside, :func:`_off_policy_kwargs`)."""
    import torch.nn as nn

    pk: dict[str, Any] = {"activation_fn": {"tanh": nn.Tanh, "relu": nn.ReLU}[p.activation]}
    if p.net_arch is not None:
        pk["net_arch"] = list(p.net_arch)
    return pk


def _off_policy_kwargs(algo: str, p: Any, action_space: Any) -> dict[str, Any]:
    """SB3 constructor arguments of DQN, SAC or TD3: those the three share, then the algorithm's own (its spec's
    ``sb3_kwargs``; ``policy_kwargs`` entries there are merged into the shared ``policy_kwargs``)."""
    pk = _off_policy_policy_kwargs(p)
    kw: dict[str, Any] = dict(
        learning_rate=schedule(p.learning_rate, p.lr_schedule), buffer_size=p.buffer_size,
        learning_starts=p.learning_starts, batch_size=p.batch_size, tau=p.tau, gamma=p.gamma,
        train_freq=p.train_freq, gradient_steps=p.gradient_steps, policy_kwargs=pk)
    own = dict(ALGOS[algo].sb3_kwargs(p, action_space))  # type: ignore[misc]
    pk.update(own.pop("policy_kwargs", {}))
    kw.update(own)
    return kw


def _off_policy_callback_class() -> type:
    from stable_baselines3.common.callbacks import BaseCallback

    class AfterTraining(BaseCallback):
        """After a training phase (SB3 trains between ``on_rollout_end`` and the next ``on_rollout_start``),
        once :data:`OFF_POLICY_REPORT_STEPS` env steps have passed since the last report, and at the end:
        dump the logger's diagnostics, then ``recorder.after_update``. Nothing is reported before the first
        gradient step (``learning_starts``)."""

        def __init__(self, recorder: Any, policy_fn: Callable[[np.ndarray], np.ndarray]) -> None:
            super().__init__(verbose=0)
            self.recorder, self.policy_fn = recorder, policy_fn
            self._updates = 0
            self._reported_at = 0

        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            if self.model.num_timesteps - self._reported_at >= OFF_POLICY_REPORT_STEPS:
                self._report()

        def _on_training_end(self) -> None:
            self._report()

        def _report(self) -> None:
            model = self.model
            if model._n_updates == self._updates:  # no gradient step since the last report
                return
            self._updates, self._reported_at = model._n_updates, model.num_timesteps
            model.logger.dump(step=model.num_timesteps)
            self.recorder.after_update(self.policy_fn)

    return AfterTraining


def _normalised_vec_env(env_id: str, p: Any, recorder: Any) -> tuple[Any, Any]:
    """The run's SB3 vec env under bench's episode monitor, wrapped in ``VecNormalize`` when the params ask
    for observation or reward normalisation: ``(venv, the VecNormalize or None)``."""
    from stable_baselines3.common.vec_env import VecNormalize

    venv: Any = sb3_vec_env(env_id, p.n_envs, recorder=recorder, vec_env=p.vec_env)
    if not (p.normalize_obs or p.normalize_reward):
        return venv, None
    vecnorm = VecNormalize(venv, norm_obs=p.normalize_obs, norm_reward=p.normalize_reward, gamma=p.gamma)
    return vecnorm, vecnorm


def _train_off_policy(env_id: str, algo: str, params: BaseModel, *, seed: int, timesteps: int, recorder: Any) -> None:
    """Train SB3's DQN, SAC or TD3 (see :func:`train_sb3`; the budget is met within one training phase,
    ``train_freq × n_envs`` steps, as SB3 stops only between them)."""
    from stable_baselines3.common.logger import Logger

    p: Any = params
    _check_device(p.device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*not wrapped with a ``Monitor`` wrapper.*")
        venv, vecnorm = _normalised_vec_env(env_id, p, recorder)
        try:
            model = _model_class(algo)("MlpPolicy", venv, seed=seed, device=p.device, verbose=0,
                                       **_off_policy_kwargs(algo, p, venv.action_space))
            model.set_logger(Logger(folder=None, output_formats=[_writer_class()(recorder, SB3_OFF_POLICY_KEYS)]))
            optimizers = [getattr(m, "optimizer", None) for m in (model.policy, getattr(model, "actor", None),
                                                                   getattr(model, "critic", None))]
            optimizers.append(getattr(model, "ent_coef_optimizer", None))
            # The policy module holds every network, the target copies included; the replay buffer is not counted.
            recorder.note_models(model.policy.parameters(), [o for o in dict.fromkeys(optimizers) if o is not None])
            policy_fn = SavablePolicy(_acting(model, vecnorm, True), partial(sb3_checkpoint, model, vecnorm))
            # log_interval None: SB3's own per-episode dumps would write the diagnostics at other steps.
            model.learn(total_timesteps=int(timesteps), log_interval=None,  # type: ignore[arg-type]
                        callback=_off_policy_callback_class()(recorder, policy_fn), progress_bar=False)
        finally:
            venv.close()


# --------------------------------------------------------------------------- #
# Acting, and saved policies (their files: bench.algos.sb3_saved)
# --------------------------------------------------------------------------- #
def _acting(model: Any, vecnorm: Any, deterministic: bool) -> Callable[[np.ndarray], np.ndarray]:
    """An SB3 model as a policy on raw observations: normalised as in training (its VecNormalize, if any),
    then ``model.predict``; a batch in, a batch of actions out."""
    return acting(model.predict, vecnorm.normalize_obs if vecnorm is not None and vecnorm.norm_obs else None,
                  deterministic)


def restore_sb3(fmt: str, files: dict[str, bytes], algo: str, params: BaseModel, *, deterministic: bool = True,
                trust: bool = False) -> Callable[[np.ndarray], np.ndarray]:
    """A saved SB3 policy (:func:`bench.algos.sb3_saved.sb3_checkpoint`) on raw observations: a batch in, a batch of
    actions out (``policy.predict``, which clips continuous actions to the action space as the run's evaluation did).

    Built as the algorithm's ``_setup_model`` builds it (SB3 2.9, ``on_policy_algorithm.py`` /
    ``off_policy_algorithm.py``): the class the saved name picks of the algorithm's ``policy_aliases``, on the saved
    spaces, with the ``policy_kwargs`` :func:`train_sb3` derives from ``params`` (the run's hyperparameters); then the
    saved state dict is loaded into it. Nothing is unpickled.

    ``fmt`` :data:`~bench.algos.sb3_saved.SB3_ZIP` (bench before): through SB3's ``load``, only with ``trust``.

    :raises bench.algos.saved_files.Refused: a file that is not what bench writes, or weights that do not fit.
    """
    import gymnasium as gym

    if fmt == SB3_ZIP:
        if not trust:
            raise Refused("zip", f"SB3's zip of pickled objects, loaded only with trust=True (bench eval --trust); "
                                 f"allowed: {RESAVE}")
        return restore_zip(files, _model_class(algo), deterministic=deterministic)
    saved = read(files)
    p: Any = params
    cls = _model_class(algo).policy_aliases[saved.policy]  # type: ignore[attr-defined]
    spaces = (saved.observation_space, saved.action_space)
    try:
        if ALGOS[algo].policy == "off":
            pk = _off_policy_policy_kwargs(p)
            own = ALGOS[algo].sb3_kwargs(p, saved.action_space)  # type: ignore[misc]
            if "use_sde" in own:  # OffPolicyAlgorithm gives gSDE to the policies of algorithms that support it
                pk.update(use_sde=own["use_sde"], **own.get("policy_kwargs", {}))
            policy = cls(*spaces, lambda _: 0.0, **pk)
        else:
            policy = cls(*spaces, lambda _: 0.0, use_sde=p.use_sde, **policy_kwargs(
                params, continuous=isinstance(saved.action_space, gym.spaces.Box), separate_critic=ALGOS[algo].sb3_separate_critic,
                frames=saved.observation_space.shape if saved.policy == "CnnPolicy" else None))
    except (AssertionError, TypeError, ValueError, RuntimeError) as e:  # SB3's own checks of spaces and kwargs
        raise Refused("sb3.json", f"spaces SB3's {saved.policy} of {algo} cannot be built on ({type(e).__name__}); "
                                  f"allowed: {RESAVE}") from None
    try:
        policy.load_state_dict(saved.state_dict)
    except RuntimeError:  # names or shapes that differ from the network the hyperparameters build
        raise Refused("sb3.pt", f"weights that do not fit the {algo} network the manifest's hyperparameters build; "
                                f"allowed: the files bench saved with that manifest ({RESAVE})") from None
    policy.set_training_mode(False)
    return acting(policy.predict, saved.normalize, deterministic, exploration_rate=saved.exploration_rate,
                  action_space=saved.action_space)
