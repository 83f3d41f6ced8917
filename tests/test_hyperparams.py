"""Hyperparameter models, zoo values and layered resolution (bench.algos.hyperparams)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bench.envs import REGISTRY
from bench.algos.hyperparams import (
    PARAMS,
    ZOO,
    ZOO_TIMESTEPS,
    A2CParams,
    NetArch,
    NormalizeSpec,
    PPOParams,
    TRPOParams,
    resolve,
    zoo_defaults,
)

#: The registry's ids: every zoo entry is for one of them.
BENCH_IDS = set(REGISTRY)


def _locs(err: ValidationError) -> list[tuple]:
    return [e["loc"] for e in err.errors()]


# -- defaults ------------------------------------------------------------------
def test_defaults_are_sb3s():
    import inspect

    from sb3_contrib import TRPO
    from stable_baselines3 import A2C, PPO

    for cls, model in ((PPO, PPOParams), (A2C, A2CParams), (TRPO, TRPOParams)):
        sig = inspect.signature(cls.__init__).parameters
        defaults = model()
        for name in model.model_fields:
            # device: the bench runs on CPU unless asked (SB3's default is "auto").
            if name != "device" and name in sig and sig[name].default is not inspect.Parameter.empty:
                assert getattr(defaults, name) == sig[name].default, (cls.__name__, name)
    assert A2CParams().gae_lambda == 1.0 and A2CParams().n_steps == 5 and A2CParams().learning_rate == 7e-4
    assert TRPOParams().target_kl == 0.01
    p = PPOParams()
    assert p.n_envs == 1 and p.lr_schedule == "constant" and p.normalize is False and p.net_arch is None
    assert p.activation == "tanh" and p.ortho_init is True and p.log_std_init == 0.0 and p.device == "cpu"


def test_every_field_is_documented_and_models_are_strict():
    for model in PARAMS.values():
        assert model.model_config["extra"] == "forbid" and model.model_config["frozen"] is True
        for name, f in model.model_fields.items():
            assert f.description, f"{model.__name__}.{name} has no description"
    with pytest.raises(ValidationError):
        PPOParams().n_steps = 3  # type: ignore[misc]


# -- layering -------------------------------------------------------------------
def test_resolve_layers_defaults_zoo_overrides():
    p = resolve("ppo", "CartPole-v1")
    assert p.n_steps == 32  # zoo over default 2048
    assert p.vf_coef == 0.5  # default, the zoo does not set it
    p = resolve("ppo", "CartPole-v1", {"n_steps": 64, "gamma": 0.9}, {"gamma": 0.95})
    assert p.n_steps == 64 and p.gamma == 0.95  # later override wins
    assert p.batch_size == 256  # zoo value kept
    p = resolve("ppo", "NoZoo-v0", {"n_steps": 128})
    assert p.n_steps == 128 and p.batch_size == 64 and p.gamma == 0.99


def test_nested_override_replaces_whole_value():
    p = resolve("ppo", "HalfCheetah-v5", {"net_arch": {"pi": [32], "vf": [16, 16]}, "normalize": {"reward": False}})
    assert p.net_arch == NetArch(pi=[32], vf=[16, 16])
    assert p.normalize == NormalizeSpec(obs=True, reward=False)
    assert p.normalize_obs and not p.normalize_reward
    p = resolve("ppo", "HalfCheetah-v5", {"net_arch": [8, 8], "normalize": False})
    assert p.net_arch == [8, 8] and p.normalize is False and not p.normalize_obs


def test_plain_dicts_from_yaml_parse_and_round_trip():
    import yaml

    block = yaml.safe_load("normalize: {obs: true, reward: false}\nnet_arch: {pi: [64], vf: [64]}\nn_envs: 2\n")
    p = resolve("trpo", "Pendulum-v1", block)
    assert isinstance(p.normalize, NormalizeSpec) and isinstance(p.net_arch, NetArch)
    again = TRPOParams.model_validate(p.model_dump(mode="json"))
    assert again == p


def test_unknown_key_rejected_with_its_loc():
    with pytest.raises(ValidationError) as e:
        resolve("ppo", "CartPole-v1", {"n_step": 64})
    assert ("n_step",) in _locs(e.value)
    with pytest.raises(ValidationError) as e:
        resolve("a2c", "CartPole-v1", {"batch_size": 64})  # not an A2C hyperparameter
    assert ("batch_size",) in _locs(e.value)
    with pytest.raises(ValidationError) as e:
        resolve("ppo", "CartPole-v1", {"normalize": {"obs": True, "rewards": False}})
    assert ("normalize", "rewards") in _locs(e.value)


def test_bad_values_rejected():
    with pytest.raises(ValidationError) as e:
        resolve("ppo", "CartPole-v1", {"learning_rate": -1e-3})
    assert ("learning_rate",) in _locs(e.value)
    for bad in ({"gamma": 0}, {"gamma": 1.5}, {"gae_lambda": 1.1}, {"n_envs": 0}, {"lr_schedule": "cosine"},
                {"activation": "gelu"}, {"ent_coef": -0.1}, {"net_arch": [64, 0]}, {"normalize": "maybe"}):
        with pytest.raises(ValidationError):
            resolve("ppo", "CartPole-v1", bad)
    with pytest.raises(ValidationError) as e:
        resolve("ppo", "CartPole-v1", {"net_arch": {"pi": [64, "x"], "vf": [64]}})
    assert _locs(e.value) == [("net_arch", "pi", 1)]


def test_batch_larger_than_rollout_explains_the_fix():
    with pytest.raises(ValidationError) as e:
        resolve("ppo", "CartPole-v1", {"n_envs": 2})  # zoo batch_size 256 > 32 * 2
    err = e.value.errors()[0]
    assert err["loc"] == ("batch_size",)
    assert "n_steps * n_envs" in err["msg"] and "64" in err["msg"] and "lower batch_size" in err["msg"]
    with pytest.raises(ValidationError):
        resolve("trpo", "CartPole-v1", {"n_envs": 1, "n_steps": 256})  # zoo batch_size 512


def test_single_sample_rollout_rejected_as_sb3_does():
    with pytest.raises(ValidationError) as e:
        PPOParams(n_steps=1, n_envs=1, batch_size=1)
    assert "greater than 1" in str(e.value)
    with pytest.raises(ValidationError) as e:
        PPOParams(n_steps=1, n_envs=1, batch_size=1, normalize_advantage=True)
    PPOParams(n_steps=2, n_envs=1, batch_size=2)  # fine
    A2CParams(n_steps=1, n_envs=1)  # A2C's default normalize_advantage is off
    with pytest.raises(ValidationError):
        A2CParams(n_steps=1, n_envs=1, normalize_advantage=True)


# -- zoo -------------------------------------------------------------------------
def test_zoo_entries_all_validate_and_have_budgets():
    assert set(ZOO) == set(PARAMS) == set(ZOO_TIMESTEPS)
    for algo, table in ZOO.items():
        assert set(table) <= BENCH_IDS
        assert set(table) == set(ZOO_TIMESTEPS[algo])
        for env_id, values in table.items():
            assert all(isinstance(v, (int, float, bool, str, dict, list)) for v in values.values())
            resolve(algo, env_id)  # valid
    assert "ALE/Breakout-v5" not in ZOO["trpo"]  # trpo.yml has no atari entry


def test_zoo_ppo_cartpole_matches_zoo_file():
    # hyperparams/ppo.yml, CartPole-v1
    p = resolve("ppo", "CartPole-v1")
    assert (p.n_envs, p.n_steps, p.batch_size, p.gae_lambda, p.gamma, p.n_epochs, p.ent_coef) == (8, 32, 256, 0.8, 0.98, 20, 0.0)
    assert (p.learning_rate, p.lr_schedule) == (0.001, "linear")
    assert (p.clip_range, p.clip_range_schedule) == (0.2, "linear")
    assert ZOO_TIMESTEPS["ppo"]["CartPole-v1"] == 100_000


def test_zoo_spot_checks():
    # ppo.yml atari
    p = resolve("ppo", "ALE/Pong-v5")
    assert (p.n_envs, p.n_steps, p.n_epochs, p.batch_size, p.vf_coef, p.ent_coef) == (8, 128, 4, 256, 0.5, 0.01)
    assert (p.learning_rate, p.lr_schedule, p.clip_range, p.clip_range_schedule) == (2.5e-4, "linear", 0.1, "linear")
    # ppo.yml HalfCheetah-v4 with its policy_kwargs
    p = resolve("ppo", "HalfCheetah-v5")
    assert p.normalize is True and p.learning_rate == 2.0633e-05 and p.ent_coef == 0.000401762 and p.vf_coef == 0.58096
    assert p.net_arch == NetArch(pi=[256, 256], vf=[256, 256]) and p.activation == "relu"
    assert p.log_std_init == -2 and p.ortho_init is False
    # ppo.yml MountainCar-v0: normalize: true
    assert resolve("ppo", "MountainCar-v0").normalize is True
    # a2c.yml Pendulum-v1
    a = resolve("a2c", "Pendulum-v1")
    assert (a.n_envs, a.n_steps, a.gae_lambda, a.vf_coef, a.gamma, a.max_grad_norm) == (8, 8, 0.9, 0.4, 0.9, 0.5)
    assert a.normalize_advantage is False and (a.learning_rate, a.lr_schedule) == (7e-4, "linear")
    # a2c.yml LunarLander-v2
    a = resolve("a2c", "LunarLander-v3")
    assert (a.n_envs, a.gamma, a.n_steps, a.learning_rate, a.lr_schedule, a.ent_coef) == (8, 0.995, 5, 0.00083, "linear", 1e-5)
    # trpo.yml CartPole-v1 and HalfCheetah-v4 (pybullet-defaults + target_kl 0.04)
    t = resolve("trpo", "CartPole-v1")
    assert (t.n_envs, t.n_steps, t.batch_size, t.cg_damping, t.gae_lambda, t.n_critic_updates) == (2, 512, 512, 1e-3, 0.98, 20)
    t = resolve("trpo", "HalfCheetah-v5")
    assert (t.n_envs, t.n_steps, t.batch_size, t.cg_max_steps, t.cg_damping, t.n_critic_updates, t.target_kl) == (
        2, 1024, 128, 25, 0.1, 20, 0.04)
    assert resolve("trpo", "Hopper-v5").target_kl == 0.01


def test_zoo_defaults_is_a_copy():
    d = zoo_defaults("ppo", "HalfCheetah-v5")
    d["net_arch"]["pi"].append(1)
    d["n_envs"] = 99
    assert ZOO["ppo"]["HalfCheetah-v5"]["net_arch"]["pi"] == [256, 256]
    assert zoo_defaults("ppo", "Acrobot-v1") == {}
    with pytest.raises(KeyError):
        zoo_defaults("ddpg", "CartPole-v1")


def test_normalize_defaults_on_for_continuous_control_only():
    # Pendulum's zoo block does not name normalize: the continuous default turns it on.
    assert resolve("ppo", "LunarLanderContinuous-v3").normalize is True
    pend = resolve("ppo", "Pendulum-v1")  # the documented exception: observations only
    assert (pend.normalize_obs, pend.normalize_reward) == (True, False)
    # Discrete envs keep the model default (off) ...
    assert resolve("ppo", "CartPole-v1").normalize is False
    # ... and any layer that names it wins, even to turn it off.
    assert resolve("ppo", "Pendulum-v1", {"normalize": False}).normalize is False
    spec = resolve("a2c", "Pendulum-v1", {"normalize": {"obs": True, "reward": False}})
    assert (spec.normalize_obs, spec.normalize_reward) == (True, False)
