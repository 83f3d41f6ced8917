"""A PureJaxRL-style PPO on CartPole-v1: the speed anchor of docs/performance.md (issue 18).

Not part of the ``bench`` package. It answers one question: how fast is the fastest PPO a user could
pick instead on this CPU? Everything an update does (env physics, sampling, GAE, the epochs of loss,
gradient, clipping and Adam) is one XLA program, as in PureJaxRL (Lu et al. 2022, "Discovered Policy
Optimisation"); the env is gymnax's CartPole-v1 (Lange 2022), the same dynamics as Gymnasium's.

The work is identical to own PPO with rl-baselines3-zoo's CartPole-v1 settings (``bench speed --algo
ppo --env CartPole-v1``): 8 envs × 32 steps, 20 epochs of one shuffled 256-sample minibatch,
γ 0.98, λ 0.8, learning rate 1e-3 and clip range 0.2 both decayed linearly per update, value
coefficient 0.5, no entropy bonus, global gradient-norm clip 0.5, Adam with eps 1e-5, advantages
normalised per minibatch, separate 64-64 tanh actor and critic with orthogonal initialisation
(gains √2, 0.01 and 1, as SB3). As in ``bench``, a time-limit truncation bootstraps from V of the
final observation and a termination does not (PureJaxRL treats both as terminal).

One jitted call is one update (rollout and epochs), so that the episodes it finished can be read
between calls for the time to threshold; the Python loop around it costs tens of µs per 256 steps.
XLA runs on one thread (``XLA_FLAGS`` below), as every run in ``bench`` does.

    pip install -e '.[anchor]'     # or, beside nothing else: pip install jax==0.10.2 gymnax==1.0.1 optax==0.2.8 six
    python benchmarks/jax_ppo_cartpole.py --seeds 0 1 2 3 4 --timesteps 100000 --json results/anchor-jax.json

For each seed it prints and records: the compile seconds, env steps per second after compiling
(the whole run's updates), and the env steps and CPU seconds (one thread) to a 20-episode mean return
of 475, counted from the end of compiling and with the compile added; the run metadata also has the CPU
seconds that importing jax and gymnax took, once per process.
"""

from __future__ import annotations

import os

# One XLA thread before jax is imported: the comparison is one core against one core.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from collections import deque  # noqa: E402
from typing import Any, NamedTuple  # noqa: E402

import gymnax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

N_ENVS, N_STEPS, N_EPOCHS, MINIBATCH = 8, 32, 20, 256
GAMMA, LAM, LR, CLIP, VF_COEF, MAX_GRAD_NORM = 0.98, 0.8, 1e-3, 0.2, 0.5, 0.5
HIDDEN = 64
THRESHOLD, WINDOW = 475.0, 20


# --------------------------------------------------------------------------- networks
def _orthogonal(key: jax.Array, n_in: int, n_out: int, gain: float) -> jax.Array:
    return jax.nn.initializers.orthogonal(gain)(key, (n_in, n_out), jnp.float32)


def init_params(key: jax.Array, obs_dim: int, n_actions: int) -> dict[str, Any]:
    """Two MLPs ``obs → 64 → 64 → out``; weights ``(in, out)``, biases zero."""
    k = jax.random.split(key, 6)
    g = float(np.sqrt(2.0))

    def mlp(keys: jax.Array, out: int, head_gain: float) -> list[tuple[jax.Array, jax.Array]]:
        sizes = [(obs_dim, HIDDEN, g), (HIDDEN, HIDDEN, g), (HIDDEN, out, head_gain)]
        return [(_orthogonal(kk, i, o, gn), jnp.zeros(o, jnp.float32)) for kk, (i, o, gn) in zip(keys, sizes)]

    return {"pi": mlp(k[:3], n_actions, 0.01), "vf": mlp(k[3:], 1, 1.0)}


def _mlp(layers: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> jax.Array:
    for W, b in layers[:-1]:
        x = jnp.tanh(x @ W + b)
    W, b = layers[-1]
    return x @ W + b


def logits_value(params: dict[str, Any], obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``obs (B, d)`` → ``(logits (B, k), V (B,))``."""
    return _mlp(params["pi"], obs), _mlp(params["vf"], obs)[:, 0]


# --------------------------------------------------------------------------- state
class Runner(NamedTuple):
    params: Any
    opt_state: Any
    env_state: Any
    obs: jax.Array  # (N, d)
    ep_return: jax.Array  # (N,) return of the running episodes
    key: jax.Array
    update: jax.Array  # () the update's index, for the linear schedules


class Transition(NamedTuple):
    obs: jax.Array
    action: jax.Array
    logp: jax.Array
    value: jax.Array
    reward: jax.Array
    terminated: jax.Array
    ended: jax.Array
    next_value: jax.Array  # V of the true next state (the final observation where an episode ended)
    finished: jax.Array  # return of the episode that ended here, NaN where none did


def make_update(n_updates: int):
    env, env_params = gymnax.make("CartPole-v1")
    optimizer = optax.chain(
        optax.clip_by_global_norm(MAX_GRAD_NORM),
        optax.inject_hyperparams(optax.adam)(learning_rate=LR, eps=1e-5),
    )

    def env_step(carry: tuple, _: None) -> tuple[tuple, Transition]:
        params, env_state, obs, ep_ret, key = carry
        key, k_act, k_step = jax.random.split(key, 3)
        logits, value = logits_value(params, obs)
        action = jax.random.categorical(k_act, logits)
        logp = jax.nn.log_softmax(logits)[jnp.arange(N_ENVS), action]
        # gymnax ≥ 1.0 tells termination from the 500-step truncation, resets a finished env inside
        # step() and hands back its final observation, as Gymnasium's same-step autoreset does.
        keys = jax.random.split(k_step, N_ENVS)
        next_obs, env_state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(keys, env_state, action, env_params)
        ended = terminated | truncated
        final_value = logits_value(params, info["final_observation"])[1]
        ep_ret = ep_ret + reward
        finished = jnp.where(ended, ep_ret, jnp.nan)
        ep_ret = jnp.where(ended, 0.0, ep_ret)
        tr = Transition(obs, action, logp, value, reward, terminated.astype(jnp.float32), ended.astype(jnp.float32),
                        final_value, finished)
        return (params, env_state, next_obs, ep_ret, key), tr

    def gae(tr: Transition, last_value: jax.Array) -> tuple[jax.Array, jax.Array]:
        # next_value[t] is V(s_{t+1}) unless the episode ended at t, then V(final obs) (bootstrap on
        # truncation; the (1 − terminated) factor drops it on termination).
        nv = jnp.concatenate([tr.value[1:], last_value[None]], axis=0)
        nv = jnp.where(tr.ended > 0, tr.next_value, nv)
        delta = tr.reward + GAMMA * (1.0 - tr.terminated) * nv - tr.value

        def back(last: jax.Array, x: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            d, ended = x
            last = d + GAMMA * LAM * (1.0 - ended) * last
            return last, last

        _, adv = jax.lax.scan(back, jnp.zeros(N_ENVS), (delta, tr.ended), reverse=True)
        return adv, adv + tr.value

    def loss_fn(params: Any, obs, actions, old_logp, adv, returns, clip) -> jax.Array:
        logits, value = logits_value(params, obs)
        logp = jax.nn.log_softmax(logits)[jnp.arange(obs.shape[0]), actions]
        adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
        ratio = jnp.exp(logp - old_logp)
        pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
        return pg + VF_COEF * ((returns - value) ** 2).mean()

    grad_fn = jax.grad(loss_fn)

    def update(r: Runner) -> tuple[Runner, jax.Array]:
        progress = 1.0 - r.update / n_updates  # as own PPO: the schedule at the start of update k
        carry, tr = jax.lax.scan(env_step, (r.params, r.env_state, r.obs, r.ep_return, r.key), None, N_STEPS)
        params, env_state, obs, ep_ret, key = carry
        adv, returns = gae(tr, logits_value(params, obs)[1])
        flat = lambda x: x.reshape((N_STEPS * N_ENVS,) + x.shape[2:])  # noqa: E731
        data = (flat(tr.obs), flat(tr.action), flat(tr.logp), flat(adv), flat(returns))
        clip_state, adam_state = r.opt_state
        adam_state = adam_state._replace(hyperparams={**adam_state.hyperparams, "learning_rate": LR * progress})
        opt_state = (clip_state, adam_state)
        clip = CLIP * progress

        def epoch(c: tuple, _: None) -> tuple[tuple, None]:
            params, opt_state, key = c
            key, k = jax.random.split(key)
            perm = jax.random.permutation(k, N_STEPS * N_ENVS)[:MINIBATCH]  # one minibatch: the whole batch
            g = grad_fn(params, *(x[perm] for x in data), clip)
            upd, opt_state = optimizer.update(g, opt_state, params)
            return (optax.apply_updates(params, upd), opt_state, key), None

        (params, opt_state, key), _ = jax.lax.scan(epoch, (params, opt_state, key), None, N_EPOCHS)
        return Runner(params, opt_state, env_state, obs, ep_ret, key, r.update + 1), tr.finished

    def init(seed: int) -> Runner:
        key = jax.random.PRNGKey(seed)
        key, k_params, k_reset = jax.random.split(key, 3)
        params = init_params(k_params, 4, 2)
        obs, state = jax.vmap(env.reset_env, in_axes=(0, None))(jax.random.split(k_reset, N_ENVS), env_params)
        return Runner(params, optimizer.init(params), state, obs, jnp.zeros(N_ENVS), key, jnp.asarray(0))

    return init, update


def run(seed: int, timesteps: int) -> dict[str, Any]:
    n_updates = -(-timesteps // (N_ENVS * N_STEPS))
    init, update = make_update(n_updates)
    runner = init(seed)
    t = time.process_time()
    step = jax.jit(update).lower(runner).compile()
    compile_s = time.process_time() - t

    window: deque[float] = deque(maxlen=WINDOW)
    hit: dict[str, Any] = {}
    t0 = time.process_time()
    for k in range(n_updates):
        runner, finished = step(runner)
        done = np.asarray(finished)  # (T, N), NaN where no episode ended; blocks until the update is done
        for ret in done[~np.isnan(done)]:  # in time order, envs in index order within a step
            window.append(float(ret))
        if not hit and len(window) == WINDOW and np.mean(window) >= THRESHOLD:
            now = time.process_time()
            hit = {"steps_to_475": (k + 1) * N_ENVS * N_STEPS, "cpu_s_to_475_after_compile": now - t0,
                   "cpu_s_to_475_with_compile": now - t0 + compile_s}
    train_s = time.process_time() - t0
    steps = n_updates * N_ENVS * N_STEPS
    return {"seed": seed, "timesteps": steps, "compile_s": compile_s, "train_cpu_s": train_s,
            "steps_per_s_after_compile": steps / train_s, "final_window_mean": float(np.mean(window)) if window else None,
            **({"steps_to_475": None} if not hit else hit)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--timesteps", type=int, default=100_000)
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    import_cpu_s = time.process_time()  # interpreter start, imports (jax, gymnax, optax) and argument parsing
    rows = []
    for s in a.seeds:
        r = run(s, a.timesteps)
        rows.append(r)
        print(json.dumps(r))
    meta = {"jax": jax.__version__, "optax": optax.__version__, "python": platform.python_version(),
            "machine": platform.processor() or platform.machine(), "xla_flags": os.environ["XLA_FLAGS"],
            "import_cpu_s": import_cpu_s, "load_avg": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": rows, "meta": meta}, f, indent=1)


if __name__ == "__main__":
    main()
