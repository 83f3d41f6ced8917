"""NumPy kernels for small MLP actor-critics on CPU: acting, and the policy-gradient
loss with its gradient written by hand.

Why this exists (measured, not assumed; see docs/performance.md). On this
project's 2-core machines (AMD EPYC, torch 2.13 CPU wheel, one thread) one PPO
minibatch step on CartPole (256 samples, two 64-64 tanh MLPs) costs ~790 µs
through torch autograd, and most of it is not arithmetic:

- the ~15 small loss ops cost ~190 µs forward and backward, nearly all dispatch and
  autograd book-keeping;
- torch's CPU ``tanh`` takes ~35 µs on a 256×64 tensor where NumPy's takes ~3 µs.

The matmuls cost about the same either way (a 256×64 @ 64×64 product ~20 µs on
one thread, MKL or OpenBLAS) and are the floor. The same maths as explicit
forward and backward passes in NumPy takes ~320 µs for that step
(``tests/benchmarks/test_kernel_step.py`` measures all of these, side by side). SB3 pays the
torch costs too; they are what ``impl: bench`` avoids here.

What stays in torch: the parameters and their gradient buffer (NumPy works on
zero-copy views of :class:`~bench.algos.common.FlatParams`' buffers), gradient
clipping and the optimizer (torch's fused Adam / RMSprop), so the two paths share
one state and can be switched per run (hyperparameter ``kernel``). The torch code
in ``ppo.py``, ``a2c.py`` and ``trpo.py`` stays the readable statement of each
algorithm; this module computes exactly its losses, and ``tests/test_npkernel.py`` checks every
gradient here against torch autograd on the torch path.

Shapes: ``B`` samples, ``d`` observation size, ``k`` action logits or dimensions.
"""

from __future__ import annotations

import math
import numpy as np
import torch
import torch.nn as nn

from bench.algos.policy import LOG_SQRT_2PI, PGStats


def supported(policy: nn.Module, device: torch.device) -> bool:
    """Whether :class:`ActorCriticKernel` can run ``policy``: CPU, MLP (vector) observations, no gSDE."""
    return (device.type == "cpu" and not policy.pixels and not getattr(policy, "sequence", False)
            and not getattr(policy, "use_sde", False))


def use_kernel(kernel: str, policy: nn.Module, device: torch.device) -> bool:
    """Resolve the ``kernel`` hyperparameter (``auto`` | ``torch`` | ``numpy``) for this policy."""
    if kernel == "torch":
        return False
    ok = supported(policy, device)
    if kernel == "numpy" and not ok:
        raise ValueError(
            f"kernel 'numpy' needs an MLP policy on the CPU (vector observations, device cpu); this run has "
            f"{'pixel observations' if policy.pixels else 'a sequence policy' if getattr(policy, 'sequence', False) else 'gSDE (use_sde)' if getattr(policy, 'use_sde', False) else 'device ' + device.type}. Allowed here: auto, torch"
        )
    return ok


class MLP:
    """An ``nn.Sequential`` of Linear layers with tanh/ReLU between them, evaluated and
    differentiated in NumPy on zero-copy views of its torch parameters and ``.grad``.

    The views stay valid while the tensors keep their storage: torch's in-place
    optimizer steps keep it (FlatParams' buffers), re-assigning ``.data`` would not.
    """

    def __init__(self, seq: nn.Sequential):
        linears = [m for m in seq if isinstance(m, nn.Linear)]
        acts = {type(m) for m in seq if not isinstance(m, nn.Linear)}
        if not acts <= {nn.Tanh, nn.ReLU} or len(acts) > 1:
            raise ValueError(f"MLP kernel supports Linear layers with tanh or ReLU between them, got {seq}")
        self.relu = acts == {nn.ReLU}
        self.W = [m.weight.detach().numpy() for m in linears]  # (out, in)
        self.b = [m.bias.detach().numpy() for m in linears]
        # Gradient buffers (FlatParams gives them); an MLP without them can only act.
        self.has_grads = all(m.weight.grad is not None and m.bias.grad is not None for m in linears)
        self.gW = [m.weight.grad.numpy() for m in linears] if self.has_grads else []
        self.gb = [m.bias.grad.numpy() for m in linears] if self.has_grads else []

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """``x (B, d)`` → ``(output (B, out), inputs of each layer)``; the second is what :meth:`backward` needs."""
        hs = [x]
        h = x
        last = len(self.W) - 1
        for i, (W, b) in enumerate(zip(self.W, self.b)):
            z = h @ W.T
            z += b
            if i < last:
                if self.relu:
                    np.maximum(z, 0, out=z)
                else:
                    np.tanh(z, out=z)
                hs.append(z)
            h = z
        return h, hs

    def backward(self, g: np.ndarray, hs: list[np.ndarray]) -> None:
        """Write dL/dW and dL/db into the gradient views (overwriting them), given
        ``g = dL/d(output)`` ``(B, out)`` and ``hs`` from :meth:`forward`."""
        if not self.has_grads:
            raise ValueError("this MLP has no gradient buffers; wrap its parameters in FlatParams first")
        ones = _ones(g.shape[0])
        for i in range(len(self.W) - 1, -1, -1):
            h = hs[i]
            np.matmul(g.T, h, out=self.gW[i])
            np.matmul(ones, g, out=self.gb[i])  # the column sums, as a BLAS call (3× faster than g.sum(0) here)
            if i > 0:
                # A one-output layer (the critic's head) makes g @ W an outer product, which BLAS does
                # ~3× slower than a broadcast multiply; the two give the same floats (one product each).
                g = g * self.W[i] if g.shape[1] == 1 else g @ self.W[i]
                # Derivative of the activation from its output h: tanh' = 1 − h², ReLU' = [h > 0].
                if self.relu:
                    g *= h > 0
                else:
                    d = h * h
                    np.subtract(1, d, out=d)
                    g *= d


class ActorCriticKernel:
    """NumPy twin of an MLP :class:`~bench.algos.policy.ActorCritic`, sharing its parameters."""

    def __init__(self, policy: nn.Module):
        self.pi, self.vf = MLP(policy.pi), MLP(policy.vf)
        self.discrete = policy.discrete
        if not self.discrete:
            self.log_std = policy.log_std.detach().numpy()  # (k,)
            g = policy.log_std.grad
            self.g_log_std = g.numpy() if g is not None else None

    # -- acting ----------------------------------------------------------------
    def value(self, obs: np.ndarray) -> np.ndarray:
        """V(s) ``(B,)``."""
        return self.vf.forward(obs)[0][:, 0]

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample a ~ π(·|s): ``(actions, log π(a|s) (B,), V(s) (B,))``; continuous actions unclipped."""
        out = self.pi.forward(obs)[0]
        if self.discrete:
            logp_all = _log_softmax(out)
            # Gumbel-max: argmax(log p + Gumbel noise) is an exact categorical sample.
            u = rng.random(out.shape, dtype=np.float32)
            np.maximum(u, 1e-12, out=u)
            a = np.argmax(logp_all - np.log(-np.log(u)), axis=1)
            logp = logp_all[_rows(len(a)), a]
        else:
            a = out + np.exp(self.log_std) * rng.standard_normal(out.shape, dtype=np.float32)
            logp = self.log_prob_of(out, a)
        return a, logp, self.value(obs)

    def mode(self, obs: np.ndarray) -> np.ndarray:
        """The deterministic action: argmax for discrete, the mean for continuous."""
        out = self.pi.forward(obs)[0]
        return np.argmax(out, axis=1) if self.discrete else out

    def log_prob_of(self, out: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """log π(a|s) ``(B,)`` from the policy head's output ``out``."""
        if self.discrete:
            return _log_softmax(out)[_rows(len(actions)), actions]
        return self._gaussian(out, actions)[0]

    def _gaussian(self, mean: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(log π(a|s) (B,), z = (a − μ)/σ (B, k), 1/σ (k,))`` for the diagonal Gaussian."""
        inv_std = np.exp(-self.log_std)
        z = (actions - mean) * inv_std
        return _row_sum(-0.5 * z * z - self.log_std - LOG_SQRT_2PI), z, inv_std

    def log_prob(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return self.log_prob_of(self.pi.forward(obs)[0], actions)

    # -- losses and their gradients ---------------------------------------------
    def value_step(self, obs: np.ndarray, returns: np.ndarray) -> float:
        """L_v = E[(V(s) − R)²] on one batch; writes dL_v/dθ_V into the critic's gradient
        buffers (overwriting them) and returns L_v. (TRPO fits its critic this way.)"""
        v_out, hs = self.vf.forward(obs)
        err = v_out[:, 0] - returns
        self.vf.backward((err * (2.0 / obs.shape[0]))[:, None].astype(np.float32, copy=False), hs)
        return _mean(err * err)

    def pg_step(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        adv: np.ndarray,
        returns: np.ndarray,
        *,
        vf_coef: float,
        ent_coef: float,
        old_logp: np.ndarray | None = None,
        clip_range: float | None = None,
        old_values: np.ndarray | None = None,
        clip_range_vf: float | None = None,
    ) -> PGStats:
        """Compute L = L_pg + c_v·L_v − c_e·E[H] on one batch and write dL/dθ into the
        policy's gradient buffers (overwriting them). All inputs ``(B,)`` except
        ``obs (B, d)`` and continuous ``actions (B, k)``; ``adv`` as trained on
        (normalise it first if the algorithm does).

        - PPO (``old_logp`` and ``clip_range`` given): L_pg = −E[min(r·Â, clip(r, 1±ε)·Â)],
          r = π/π_old, exactly ``ppo.ppo_losses``.
        - A2C (neither): L_pg = −E[Â · log π], exactly ``a2c.a2c_losses``.
        - L_v = E[(R − V)²], with ``clip_range_vf`` SB3's clipped prediction.
        """
        B = obs.shape[0]
        out, hs_pi = self.pi.forward(obs)
        v_out, hs_vf = self.vf.forward(obs)
        v = v_out[:, 0]

        # log π(a|s) and what its derivative with respect to the head output needs.
        if self.discrete:
            logp_all = _log_softmax(out)
            p = np.exp(logp_all)
            logp = logp_all[_rows(B), actions]
            ent = -_row_sum(p * logp_all)  # (B,)
            entropy = _mean(ent)
        else:
            logp, z, inv_std = self._gaussian(out, actions)
            entropy = float((self.log_std + 0.5 + LOG_SQRT_2PI).sum())

        pg_loss, d_logp, approx_kl, clip_fraction = _policy_loss(logp, adv, old_logp, clip_range)
        value_loss, d_v = _value_loss(v, returns, old_values, clip_range_vf, vf_coef)

        # Back to the head outputs: d log π / d logits = onehot(a) − p; dH/d logits = −p (log p + H).
        if self.discrete:
            d_out = p * (-d_logp[:, None])
            d_out[_rows(B), actions] += d_logp
            if ent_coef:
                d_out += p * (logp_all + ent[:, None]) * (ent_coef / B)
        else:
            # d log π / dμ = z/σ; d log π / d log σ = z² − 1; dH/d log σ = 1 per dimension.
            d_out = d_logp[:, None] * z * inv_std
            self.g_log_std[...] = (d_logp[:, None] * (z * z - 1)).sum(axis=0) - ent_coef

        self.pi.backward(d_out.astype(np.float32, copy=False), hs_pi)
        self.vf.backward(d_v.astype(np.float32, copy=False)[:, None], hs_vf)
        return PGStats(pg_loss, value_loss, entropy, approx_kl, clip_fraction)


def standardize(x: np.ndarray) -> np.ndarray:
    """``(x − mean) / (std + 1e-8)`` with the unbiased std (ddof 1), as torch's ``std()``
    in the torch path; ``x (B,)`` with B > 1."""
    d = x - float(np.add.reduce(x)) / x.size
    return d / (math.sqrt(float(np.add.reduce(d * d)) / (x.size - 1)) + 1e-8)


def _mean(x: np.ndarray) -> float:
    # np.add.reduce skips ndarray.mean's Python-level wrapper (~2 µs a call at these sizes).
    return float(np.add.reduce(x, axis=None)) / x.size


_ONES: dict[int, np.ndarray] = {}
_ROWS: dict[int, np.ndarray] = {}


def _rows(n: int) -> np.ndarray:
    """A cached ``arange(n)`` (read-only), to pick one entry per row."""
    v = _ROWS.get(n)
    if v is None:
        v = _ROWS[n] = np.arange(n)
        v.flags.writeable = False
    return v


def _ones(n: int) -> np.ndarray:
    """A cached float32 vector of ``n`` ones (read-only)."""
    v = _ONES.get(n)
    if v is None:
        v = _ONES[n] = np.ones(n, np.float32)
        v.flags.writeable = False
    return v


#: Below this many columns a row reduction runs as one NumPy op per column (see :func:`_row_sum`).
_COLUMN_LOOP_MAX = 7


def _row_sum(x: np.ndarray) -> np.ndarray:
    """``x.sum(axis=1)`` ``(B, k) → (B,)``, the same floats, faster for the few columns of an action head.

    NumPy reduces a row of fewer than 8 elements left to right (pairwise summation starts at 8), so
    adding the columns one by one is the same sum, bit for bit (``tests/test_npkernel.py``). Along a
    2-wide axis the ufunc reduction costs ~3.6 µs for 256 rows where one column add costs ~0.6 µs.
    """
    k = x.shape[1]
    if k > _COLUMN_LOOP_MAX or x.shape[0] == 1:  # one row (acting in one env): one call beats k
        return np.add.reduce(x, axis=1)
    s = x[:, 0].copy()
    for j in range(1, k):
        s += x[:, j]
    return s


def _row_max(x: np.ndarray) -> np.ndarray:
    """``x.max(axis=1)`` ``(B, k) → (B,)``; a maximum is exact in any order, and column by column it
    costs ~0.7 µs for 256 × 2 where the axis-1 reduction costs ~8 µs."""
    k = x.shape[1]
    if k > _COLUMN_LOOP_MAX:
        return x.max(axis=1)
    m = x[:, 0].copy()
    for j in range(1, k):
        np.maximum(m, x[:, j], out=m)
    return m


def _log_softmax(x: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax ``(B, k)``, shifted by the row max for stability."""
    z = x - _row_max(x)[:, None]
    return z - np.log(_row_sum(np.exp(z)))[:, None]


def _policy_loss(logp: np.ndarray, adv: np.ndarray, old_logp: np.ndarray | None,
                 clip_range: float | None) -> tuple[float, np.ndarray, float, float]:
    """(L_pg, dL_pg / d log π per sample, approximate KL, clip fraction) on a batch of ``B`` samples:
    −E[Â · log π] (A2C), or with ``clip_range`` PPO's clipped surrogate (its KL and clip fraction; 0 otherwise)."""
    B = logp.shape[0]
    if clip_range is None:
        return -_mean(adv * logp), adv * (-1.0 / B), 0.0, 0.0
    assert old_logp is not None, "PPO's loss needs old_logp"
    log_ratio = logp - old_logp
    ratio = np.exp(log_ratio)
    s1 = ratio * adv
    s2 = np.clip(ratio, 1 - clip_range, 1 + clip_range) * adv
    pg_loss = -_mean(np.minimum(s1, s2))
    # The gradient flows through r only where the unclipped term is the minimum
    # (where the two are equal, r is inside the clip range and both give r·Â).
    d_logp = np.where(s1 <= s2, ratio * adv * (-1.0 / B), 0.0).astype(np.float32)
    return pg_loss, d_logp, _mean(ratio - 1 - log_ratio), _mean(np.abs(ratio - 1) > clip_range)


def _value_loss(v: np.ndarray, returns: np.ndarray, old_values: np.ndarray | None, clip_range_vf: float | None,
                vf_coef: float) -> tuple[float, np.ndarray]:
    """(L_v = E[(R − V)²], c_v · dL_v/dV per sample); with ``clip_range_vf`` SB3's clipped prediction."""
    B = v.shape[0]
    if clip_range_vf is None:
        err = v - returns
        d_v = err * (2.0 * vf_coef / B)
    else:
        assert old_values is not None, "value clipping needs old_values"
        delta = v - old_values
        err = old_values + np.clip(delta, -clip_range_vf, clip_range_vf) - returns
        d_v = err * (2.0 * vf_coef / B) * (np.abs(delta) <= clip_range_vf)
    return _mean(err * err), d_v
