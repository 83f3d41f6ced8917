"""The env registry, the env factory and its wrappers (bench.envs)."""

from __future__ import annotations

import math
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from bench import envs
from bench.envs import families
from bench.storage.record import Recorder

#: The registry's ids, read off the families (bench.envs.families): the tests below check each entry against
#: Gymnasium, so a new family's entries are checked without touching this file.
REGISTERED_IDS = list(envs.REGISTRY)


def _find(env: gym.Env, cls: type) -> gym.Env:
    """The first wrapper of type ``cls`` in ``env``'s chain."""
    e = env
    while not isinstance(e, cls):
        assert isinstance(e, gym.Wrapper), f"no {cls.__name__} in the wrapper chain"
        e = e.env
    return e


# -- registry ----------------------------------------------------------------
def test_the_registry_is_its_families_entries():
    """The registry is every family's entries, in family order, none lost to a clash of ids; each entry is a
    valid trait record of its own family (bench.envs.traits' vocabulary, a threshold with its source)."""
    from bench.envs.traits import ACTIONS, OBS, REWARDS

    declared = [s for f in families.FAMILIES for s in f.envs]
    assert len(declared) > 0 and list(envs.REGISTRY.values()) == declared  # order kept, no id declared twice
    assert [s.id for s in envs.list_specs()] == [s.id for s in declared]
    names = [f.name for f in families.FAMILIES]
    assert len(set(names)) == len(names)
    for s in declared:
        assert s.registered and s.family in names and families.family_of_id(s.id).name == s.family, s.id
        assert (s.action, s.obs, s.reward) in {(a, o, r) for a in ACTIONS for o in OBS for r in REWARDS}, s.id
        assert s.threshold is not None and s.threshold_source, s.id
        assert s.horizon is None or s.horizon > 0, s.id
        assert s.time_scale_us is None or s.time_scale_us > 0, s.id
        assert envs.registry.TIME_SCALE_US.get(s.id) == s.time_scale_us, s.id


def test_a_family_entry_names_its_own_family():
    spec = envs.EnvSpec("X-v0", "classic", "discrete", "vector", "dense", 1, 1.0, "chosen")
    with pytest.raises(ValueError, match="name another family"):
        families.EnvFamily("toy", "Toy", envs=(spec,))


@pytest.mark.parametrize("env_id", REGISTERED_IDS)
def test_registry_agrees_with_gymnasium(env_id):
    spec = envs.REGISTRY[env_id]
    fam = families.family_of_id(env_id)
    if fam.extra is not None:  # an optional extra: skipped where it is not installed
        pytest.importorskip(fam.module)
    assert envs.env_exists(env_id)  # first: it registers the ALE (and MinAtar) ids gym.spec needs
    g = gym.spec(env_id)
    if g.reward_threshold is not None:
        assert spec.threshold == pytest.approx(float(g.reward_threshold))
        assert "Gymnasium" in spec.threshold_source
    else:
        assert spec.threshold is not None and "Gymnasium" not in spec.threshold_source
    if env_id.startswith("ALE/"):
        assert spec.horizon == g.kwargs["max_num_frames_per_episode"] // 4 == 27_000
    elif env_id.startswith("MinAtar/"):  # no TimeLimit; Freeway ends itself on step 2,501
        assert g.max_episode_steps is None and spec.horizon == (2501 if "Freeway" in env_id else None)
    elif env_id == "CarRacing-v3":  # agent steps: each action repeated for 2 of the 1,000 frames
        assert spec.horizon == g.max_episode_steps // 2 == 500
    elif env_id == "two-way-v0":  # highway-env gives this one a TimeLimit, not a duration
        assert spec.horizon == g.max_episode_steps == 15
    elif spec.family in ("minigrid", "highway"):  # step limits of their own, not a TimeLimit
        env = gym.make(env_id)
        u = env.unwrapped
        limit = u.max_steps if spec.family == "minigrid" else u.config["duration"] * u.config["policy_frequency"]
        env.close()
        assert g.max_episode_steps is None and spec.horizon == limit
    else:
        assert spec.horizon == g.max_episode_steps


def test_registry_traits():
    p, mc, pong = (envs.REGISTRY[i] for i in ("Pendulum-v1", "MountainCar-v0", "ALE/Pong-v5"))
    assert (p.action, p.obs, p.reward, p.threshold) == ("continuous", "vector", "dense", -200.0)
    assert mc.reward == "sparse" and mc.threshold == -110.0
    assert (pong.family, pong.action, pong.obs) == ("atari", "discrete", "pixels")
    assert envs.REGISTRY["ALE/Breakout-v5"].threshold == 31.8 and pong.threshold == 9.3
    # Sparse where the reward says so: MiniGrid rewards success alone, the robotics tasks reward being at the
    # goal; Freeway pays once per crossing. The dense envs' reward arrives at most steps.
    assert all(s.reward == "sparse" for s in envs.list_specs() if s.family in ("minigrid", "robotics"))
    assert envs.REGISTRY["MinAtar/Freeway-v1"].reward == "sparse" and envs.REGISTRY["CartPole-v1"].reward == "dense"
    assert all(s.reward == "dense" for s in envs.list_specs() if s.family in ("mujoco", "atari", "highway"))
    mcc = envs.REGISTRY["MountainCarContinuous-v0"]
    assert (mcc.family, mcc.action, mcc.obs, mcc.threshold) == ("classic", "continuous", "vector", 90.0)


def test_inferred_spec_for_unregistered_id():
    s = envs.get_spec("Acrobot-v1")
    assert (s.family, s.action, s.obs, s.reward) == ("classic", "discrete", "vector", "dense")
    assert s.threshold == -100.0 and s.horizon == 500 and s.registered is False
    assert envs.get_spec("Acrobot-v1") is s  # cached


def test_unknown_id():
    assert not envs.env_exists("CartPol-v1")
    assert "CartPole-v1" in envs.close_matches("CartPol-v1")
    with pytest.raises(KeyError, match="CartPole-v1"):  # the "did you mean" hint
        envs.get_spec("CartPol-v1")
    with pytest.raises(KeyError, match="unknown environment"):
        envs.make_env("NoSuchEnv-v0")


# -- continuous control from pixels ------------------------------------------------
def test_car_racing_frames_and_agent_steps():
    """CarRacing reaches every implementation as 4 stacked 84×84 grayscale frames, one agent step per two
    frames, and the monitor records the env's own summed rewards over agent steps."""
    rec = Recorder()
    env = envs.make_env("CarRacing-v3", recorder=rec)
    obs, _ = env.reset(seed=0)
    assert env.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8) and obs.shape == (4, 84, 84)
    assert envs.get_spec("CarRacing-v3").obs == "pixels"
    raw = gym.make("CarRacing-v3")
    raw.reset(seed=0)
    a = np.array([0.0, 0.5, 0.0], np.float32)
    total = 0.0
    for _ in range(3):
        env.step(a)
        total += sum(float(raw.step(a)[1]) for _ in range(2))
    assert rec.steps == 3  # agent steps, not frames
    assert _find(env, envs.EpisodeMonitor)._ret == pytest.approx(total)  # the env's rewards, summed over the frames


class EveryFrameDrawn(gym.Wrapper):
    """The reference for :class:`bench.envs.ActionRepeat` (also its benchmark's): each action repeated ``skip``
    frames, every frame drawn, rewards summed, the last frame's observation returned."""

    def __init__(self, env: gym.Env, skip: int) -> None:
        super().__init__(env)
        self.skip = skip

    def step(self, action):
        total = 0.0
        for _ in range(self.skip):
            obs, r, term, trunc, info = self.env.step(action)
            total += float(r)
            if term or trunc:
                break
        return obs, total, term, trunc, info


@pytest.mark.heavy
def test_action_repeat_returns_what_the_fully_drawn_env_gives():
    """CarRacing's undrawn frames change nothing the learner sees: over 600 agent steps (a 500-step time limit
    and a reset), and on an episode that ends on an undrawn frame (the car moved off the playfield), every
    observation, reward and flag equals the one from the env stepped frame by frame and drawn every frame."""
    fast = envs.ActionRepeat(gym.make("CarRacing-v3"), 2)
    slow = EveryFrameDrawn(gym.make("CarRacing-v3"), 2)
    rng = np.random.default_rng(0)
    for env in (fast, slow):
        env.reset(seed=3)
    ends = 0
    for t in range(600):
        a = rng.uniform([-1, 0, 0], [1, 1, 0.3]).astype(np.float32)
        got, want = fast.step(a), slow.step(a)
        assert np.array_equal(got[0], want[0]) and got[1] == want[1] and got[2:4] == want[2:4], t
        if got[2] or got[3]:
            ends += 1
            for env in (fast, slow):
                env.reset(seed=4)
    assert ends == 1  # the time limit: 1,000 frames
    for env in (fast, slow):  # off the playfield: the episode ends on the first frame, which is not drawn
        env.unwrapped.car.hull.position = (1000.0, 0.0)
    got, want = fast.step(a), slow.step(a)
    assert got[2] and got[1] == want[1] == pytest.approx(-100.0) and np.array_equal(got[0], want[0])


def test_action_repeat_draws_only_the_frames_it_returns(monkeypatch):
    from gymnasium.envs.box2d.car_racing import CarRacing

    drawn = []
    original = CarRacing._render
    monkeypatch.setattr(CarRacing, "_render", lambda self, mode: drawn.append(mode) or original(self, mode))
    env = envs.ActionRepeat(gym.make("CarRacing-v3"), 2)
    env.reset(seed=0)
    drawn.clear()
    for _ in range(10):
        env.step(np.array([0.0, 0.5, 0.0], np.float32))
    assert drawn == ["state_pixels"] * 10  # 10 agent steps, 20 frames


def test_pixels_with_continuous_actions_normalise_rewards_not_frames():
    from bench.algos.hyperparams import resolve

    for algo in ("ppo", "a2c", "trpo"):
        n = resolve(algo, "CarRacing-v3").normalize
        assert (n.obs, n.reward) == (False, True)


# -- optional families -------------------------------------------------------------
@pytest.mark.parametrize("env_id, shape, dtype", [
    ("MiniGrid-DoorKey-5x5-v0", (147,), np.float32),  # the 7×7×3 view
    ("PointMaze_UMaze-v3", (8,), np.float64),  # achieved goal 2 + desired goal 2 + observation 4
    ("FetchReach-v4", (16,), np.float64),  # achieved goal 3 + desired goal 3 + observation 10
    ("highway-fast-v0", (25,), np.float32),  # 5 vehicles × 5 features
    ("intersection-v0", (105,), np.float32),  # 15 vehicles × 7 features
    ("two-way-v0", (45,), np.float32),  # time-to-collision grid, 3 × 3 × 5
])
def test_family_observations_reach_the_learner_flat(env_id, shape, dtype):
    pytest.importorskip(families.family_of_id(env_id).module)
    rec = Recorder()
    env = envs.make_env(env_id, recorder=rec)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == shape and obs.shape == shape and obs.dtype == dtype
    assert env.observation_space.contains(obs)
    raw = gym.make(env_id)
    raw_obs, _ = raw.reset(seed=0)
    if env_id.startswith("MiniGrid-"):  # the view itself, in its own order
        np.testing.assert_array_equal(obs, raw_obs["image"].reshape(-1))
    elif env_id.startswith(("PointMaze_", "Fetch")):  # Dict keys in sorted order
        np.testing.assert_array_equal(obs, np.concatenate([raw_obs[k] for k in sorted(raw_obs)]))
    else:
        np.testing.assert_array_equal(obs, raw_obs.reshape(-1))
    env.step(env.action_space.sample())
    assert rec.steps == 1
    facts = envs.space_facts(env_id)  # what a suite's traits are checked against: the learner's view
    assert facts["obs_box"] and facts["obs_ndim"] == 1


def test_fetch_builds_when_its_package_was_imported_first():
    """gymnasium-robotics registers its ids on its own import; bench's Fetch adjustment for MuJoCo 4.0 must
    still be made before the env is built (a fresh process: the adjustment is made once per process)."""
    pytest.importorskip("gymnasium_robotics")
    code = ("import gymnasium_robotics, gymnasium as gym; from bench import envs; "
            "envs.make_env('PointMaze_UMaze-v3'); env = envs.make_env('FetchReach-v4'); "
            "obs, _ = env.reset(seed=0); print(obs.shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("(16,)")


@pytest.mark.parametrize("env_id, title, extra", [
    ("MiniGrid-Empty-5x5-v0", "MiniGrid", "minigrid"), ("PointMaze_Open-v3", "gymnasium-robotics", "robotics"),
    ("highway-v0", "highway-env", "highway"), ("MinAtar/Breakout-v1", "MinAtar", "minatar"),
])
def test_a_family_id_without_its_extra_names_the_extra(monkeypatch, env_id, title, extra):
    monkeypatch.setattr(families, "register", lambda name: False)
    assert envs.missing_extra(env_id) == (f"a {title} id, and {title} is not installed; allowed: install the optional "
                                          f"extra (pip install 'onpolicy-bench[{extra}]', or pip install -e '.[{extra}]' in a "
                                          f"checkout{', GPL-3.0' if extra == 'minatar' else ''}), "
                                          "or another env")
    assert envs.missing_extra("CartPole-v1") is None


# -- EpisodeMonitor --------------------------------------------------------------
def test_episode_monitor_matches_plain_loop():
    seed, n_steps = 3, 300
    rec = Recorder()
    env = envs.make_env("CartPole-v1", recorder=rec)
    plain = gym.make("CartPole-v1")
    actions = np.random.default_rng(seed).integers(0, 2, size=n_steps)

    env.reset(seed=seed)
    plain.reset(seed=seed)
    rets, lens, ret, length = [], [], 0.0, 0
    for a in actions:
        env.step(int(a))
        _, r, term, trunc, _ = plain.step(int(a))
        ret, length = ret + float(r), length + 1
        if term or trunc:
            rets.append(ret)
            lens.append(length)
            ret, length = 0.0, 0
            env.reset()
            plain.reset()

    assert rec.steps == n_steps
    assert len(rets) >= 3  # random CartPole episodes are short: several finished
    assert rec.ep_return == rets and rec.ep_length == lens
    assert rec.ep_step == list(np.cumsum(lens))  # recorded at the global step of the episode end


def test_reset_drops_unfinished_episode():
    rec = Recorder()
    env = envs.make_env("CartPole-v1", recorder=rec)
    env.reset(seed=0)
    for _ in range(5):
        env.step(0)
    env.reset()  # abandons the first episode
    length = 0
    while True:
        length += 1
        _, _, term, trunc, _ = env.step(1)
        if term or trunc:
            break
    assert rec.ep_length == [length] and rec.steps == 5 + length


def test_vec_env_shares_recorder():
    rec = Recorder()
    venv = envs.make_vec_env("CartPole-v1", 3, recorder=rec)
    assert isinstance(venv, gym.vector.SyncVectorEnv)
    assert venv.autoreset_mode == gym.vector.AutoresetMode.SAME_STEP
    venv.reset(seed=1)
    for _ in range(100):
        venv.step(np.zeros(3, dtype=np.int64))  # always left: episodes of about ten steps
    assert rec.steps == 300
    assert len(rec.ep_return) >= 3 * 5 and all(r == l for r, l in zip(rec.ep_return, rec.ep_length))
    with pytest.raises(ValueError, match="n_envs"):
        envs.make_vec_env("CartPole-v1", 0)


# -- Atari -----------------------------------------------------------------------------
def test_atari_training_env_episodic_life_and_raw_returns():
    rec = Recorder()
    env = envs.make_env("ALE/Breakout-v5", recorder=rec, training=True)
    assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8

    # Spy under the monitor: scale the raw reward by 7 so a clipped sum can be told from a raw one.
    mon = _find(env, envs.EpisodeMonitor)
    inner_step = mon.env.step
    raw: list[float] = []

    def spy(action):
        obs, r, term, trunc, info = inner_step(action)
        raw.append(7.0 * float(r))
        return obs, 7.0 * float(r), term, trunc, info

    mon.env.step = spy
    ale = env.unwrapped.ale

    obs, _ = env.reset(seed=3)
    env.action_space.seed(3)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    start_lives = ale.lives()
    learner_terms, learner_rewards, steps = 0, [], 0
    while not rec.ep_return:
        obs, r, term, trunc, _ = env.step(env.action_space.sample())
        steps += 1
        learner_rewards.append(float(r))
        assert steps < 5_000, "a random Breakout game should end within a few hundred steps"
        if term or trunc:
            learner_terms += 1
            lives_at_loss = ale.lives()
            env.reset()
            if lives_at_loss > 0:  # a life loss: the game goes on, it was not reset
                assert ale.lives() == lives_at_loss < start_lives

    assert learner_terms == start_lives == 5  # one learner episode per life
    assert len(rec.ep_return) == 1  # but exactly one recorded episode per game
    assert rec.ep_return[0] == pytest.approx(sum(raw)) and sum(raw) > 0  # seed 3 scores
    assert set(learner_rewards) <= {-1.0, 0.0, 1.0}
    assert sum(learner_rewards) < sum(raw)  # learner saw sign-clipped rewards
    # The no-op step after each life loss is a real env step, counted by the monitor.
    assert rec.steps == steps + (learner_terms - 1) == len(raw)


def test_atari_eval_env_ignores_life_loss():
    env = envs.make_env("ALE/Breakout-v5", training=False)
    assert env.observation_space.shape == (4, 84, 84)
    ale = env.unwrapped.ale
    env.reset(seed=0)
    env.action_space.seed(0)
    lives = ale.lives()
    for _ in range(2_000):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if ale.lives() < lives:
            break
        assert not (term or trunc)
    else:
        pytest.fail("no life lost in 2000 random steps")
    assert not (term or trunc) and ale.lives() > 0  # lost a life, the episode goes on


# -- evaluate_policy ---------------------------------------------------------------------
def test_evaluate_policy_deterministic():
    def always_right(obs: np.ndarray) -> np.ndarray:
        return np.ones(len(obs), dtype=np.int64)

    a = envs.evaluate_policy("CartPole-v1", always_right, 4, seed=11)
    b = envs.evaluate_policy("CartPole-v1", always_right, 4, seed=11)
    assert len(a) == 4 and all(math.isfinite(x) and 0 < x < 500 for x in a)
    assert a == b
    with pytest.raises(ValueError, match="n_episodes"):
        envs.evaluate_policy("CartPole-v1", always_right, 0, seed=0)


def test_evaluate_policy_atari_whole_game():
    seen: list[tuple[int, ...]] = []
    rng = np.random.default_rng(0)

    def random_policy(obs: np.ndarray) -> np.ndarray:
        seen.append(obs.shape)
        return rng.integers(0, 4, size=len(obs))

    (ret,) = envs.evaluate_policy("ALE/Breakout-v5", random_policy, 1, seed=5)
    assert set(seen) == {(1, 4, 84, 84)}
    # A whole game (five lives) in one evaluation episode, far below the 27,000-step cap.
    assert ret >= 0 and 5 * 20 < len(seen) < 27_000


@pytest.mark.parametrize("env_id, n_envs, steps", [("CartPole-v1", 3, 300), ("Pendulum-v1", 2, 450),
                                                   ("HalfCheetah-v5", 1, 40)])
def test_sync_stepper_matches_gymnasium_sync_vector_env(env_id, n_envs, steps):
    """``sync``'s lean step gives the parent ``SyncVectorEnv``'s transitions and final observations, bit for
    bit, across episode ends (CartPole terminates, Pendulum truncates at 200), on a fixed action sequence."""
    if env_id.startswith("HalfCheetah"):
        pytest.importorskip("mujoco")
    from functools import partial

    from bench.envs.vector import SameStepSyncVectorEnv

    fns = [partial(envs.make_env, env_id) for _ in range(n_envs)]
    lean = SameStepSyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    assert lean._lean
    lean.action_space.seed(3)
    actions = [lean.action_space.sample() for _ in range(steps)]
    a, _ = lean.reset(seed=5)
    b, _ = ref.reset(seed=5)
    np.testing.assert_array_equal(a, b)
    ended = 0
    for act in actions:
        got, want = lean.step(act), ref.step(act)
        for x, y in zip(got[:4], want[:4]):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)
        done = got[2] | got[3]
        ended += int(done.sum())
        if done.any():
            np.testing.assert_array_equal(got[4]["_final_obs"], want[4]["_final_obs"])
            np.testing.assert_array_equal(got[4]["_final_info"], want[4]["_final_info"])
            for i in np.flatnonzero(done):
                np.testing.assert_array_equal(got[4]["final_obs"][i], want[4]["final_obs"][i])
        else:
            assert got[4] == {}
        got[0][...] = 0  # the caller owns what it was given: the next step must not depend on it
    assert ended > 0 or env_id.startswith("HalfCheetah")


def test_fetch_envs_build_under_mujoco_4():
    """gymnasium-robotics 1.4.2's joint helpers compare MuJoCo enum members with NumPy ints from the enum's
    side, which MuJoCo 4.0 answers False (bench.envs.families._joint_types_as_ints): without the adjustment
    FetchReach-v4's set-up raised AssertionError. Its initial joint positions are set as the env asks."""
    pytest.importorskip("gymnasium_robotics")
    import mujoco

    assert families.register("robotics")
    from gymnasium_robotics.utils import mujoco_utils

    assert mujoco_utils.mujoco.mj_name2id is mujoco.mj_name2id  # every other name is the real module's
    env = gym.make("FetchReach-v4")
    obs, _ = env.reset(seed=0)
    u = env.unwrapped
    slide = mujoco_utils.get_joint_qpos(u.model, u.data, "robot0:slide0")  # a joint the assertion failed on
    assert slide.shape == (1,) and np.isfinite(slide).all()
    _, reward, *_ = env.step(np.zeros(4, np.float32))
    assert reward in (-1.0, 0.0) and obs["desired_goal"].shape == (3,)


# -- the same tasks as pixels (issue 68) ----------------------------------------------------------------
@pytest.mark.parametrize("pixels, task", sorted(__import__("bench.envs.pixels", fromlist=["x"]).MINIGRID_PIXELS.items()))
def test_minigrid_as_pixels_is_the_same_task_through_its_rgb_view(pixels, task):
    """Same rewards and ends as the vector version under the same actions; the learner sees MiniGrid's RGB view
    of the agent's 7×7 tiles, 8 pixels a tile, channel-first uint8."""
    pytest.importorskip("minigrid")
    px, vec = envs.make_env(pixels), envs.make_env(task)
    assert px.observation_space.shape == (3, 56, 56) and px.observation_space.dtype == np.uint8
    o, _ = px.reset(seed=3)
    vec.reset(seed=3)
    assert o.shape == (3, 56, 56) and o.dtype == np.uint8 and o.max() > 0
    rng = np.random.default_rng(0)
    for _ in range(300):
        a = int(rng.integers(px.action_space.n))
        got, want = px.step(a)[1:4], vec.step(a)[1:4]
        assert got == want
        if got[1] or got[2]:
            px.reset(), vec.reset()
    assert envs.get_spec(pixels).obs == "pixels" and envs.get_spec(task).obs == "vector"


def test_own_policy_takes_minigrid_pixel_frames():
    """MiniGrid's 56×56 view leaves 3×3 maps after the Nature CNN's convolutions, not Atari's 7×7: the own
    policy sizes its linear layer to the frame (64·3·3 = 576 inputs) and acts on a real frame."""
    pytest.importorskip("minigrid")
    import torch

    from bench.algos.policy import ActorCritic

    env = envs.make_env("bench/MiniGrid-DoorKey-5x5-Pixels-v0")
    pol = ActorCritic(env.observation_space, env.action_space)
    assert pol.pi_features.net[-2].in_features == 576
    o, _ = env.reset(seed=0)
    pd, v = pol.dist_value(torch.as_tensor(o[None]))
    assert pd.logp.shape == (1, env.action_space.n) and v.shape == (1,)


@pytest.mark.parametrize("pixels", ["bench/LunarLanderContinuous-Pixels-v3", "bench/BipedalWalker-Pixels-v3"])
def test_box2d_drawn_repeats_each_action_twice_and_draws_once(pixels):
    """The rendered task's reward is the task's over the 2 repeated frames; one frame is drawn per agent step; the
    learner sees 4 stacked grey 84×84 frames."""
    from bench.envs.pixels import RENDERED

    task, skip = RENDERED[pixels]
    px = envs.make_env(pixels)
    raw = gym.make(task)
    assert px.observation_space.shape == (4, 84, 84) and px.observation_space.dtype == np.uint8
    px.reset(seed=1)
    raw.reset(seed=1)
    drawn = []
    u = px.unwrapped
    real = u.render
    u.render = lambda: drawn.append(1) or real()
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.uniform(-1, 1, px.action_space.shape).astype(np.float32)
        o, r, term, trunc, _ = px.step(a)
        want = 0.0
        for _ in range(skip):
            _, rr, t2, tr2, _ = raw.step(a)
            want += rr
            if t2 or tr2:
                break
        assert r == pytest.approx(want) and o.shape == (4, 84, 84)
        if term or trunc:
            break
    assert len(drawn) == 20
    assert envs.get_spec(pixels).horizon == gym.spec(task).max_episode_steps // skip
