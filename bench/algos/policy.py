"""The policy the project's own algorithms share: networks, action distributions,
and what a policy-gradient step reports.

- :class:`ActorCritic`: an MLP (vector observations) or CNN (pixels: the Nature CNN, or MinAtar's for small frames) policy
  and value function, exposing ``actor_parameters()`` and ``critic_parameters()``
  explicitly (TRPO needs the split; nothing is picked by parameter name).
- :class:`CategoricalPd` / :class:`GaussianPd`: the two action distributions,
  written as a few tensor ops instead of ``torch.distributions`` (whose argument
  validation and object set-up cost more than the maths at these sizes);
  :class:`SDEGaussianPd`, the Gaussian of gSDE (state-dependent exploration).
- :data:`LOG_SQRT_2PI` and :class:`PGStats`, which the torch path here and the
  NumPy kernel (:mod:`bench.algos.npkernel`) both use: this module sits below both.

Shapes: ``B`` samples, ``n`` discrete actions, ``d`` action dimensions.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

# The MinAtar network sits with its envs, so that SB3's side builds the very same module.
from bench.envs.minatar import NATURE_MIN_SIZE, MinAtarCNN

#: log √(2π), the Gaussian log-density's constant (torch path and NumPy kernel alike).
LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


# --------------------------------------------------------------------------- #
# Networks
# --------------------------------------------------------------------------- #
def _init(layer: nn.Module, gain: float, ortho: bool) -> nn.Module:
    # Orthogonal init with gains sqrt(2) (hidden), 0.01 (policy head) and 1 (value
    # head), as in the PPO implementation details study (Huang et al. 2022) and SB3.
    if ortho and isinstance(layer, (nn.Linear, nn.Conv2d)):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


def mlp(sizes: Sequence[int], activation: str, out_gain: float, ortho: bool = True) -> nn.Sequential:
    act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        last = i == len(sizes) - 2
        layers.append(_init(nn.Linear(sizes[i], sizes[i + 1]), out_gain if last else math.sqrt(2), ortho))
        if not last:
            layers.append(act())
    return nn.Sequential(*layers)


class NatureCNN(nn.Module):
    """The DQN torso (Mnih et al. 2015): uint8 ``(C, H, W)`` frames → 512 features. Its convolutions take
    Atari's 84×84 to 7×7 maps; other sizes (MiniGrid's 56×56 view: 3×3) give the linear layer their own width."""

    def __init__(self, in_channels: int, h: int = 84, w: int = 84, ortho: bool = True):
        super().__init__()
        g = math.sqrt(2)
        # Each convolution has no padding: out = (in - kernel) // stride + 1.
        mh, mw = (((((x - 8) // 4 + 1) - 4) // 2 + 1) - 3 + 1 for x in (h, w))
        self.net = nn.Sequential(
            _init(nn.Conv2d(in_channels, 32, 8, stride=4), g, ortho), nn.ReLU(),
            _init(nn.Conv2d(32, 64, 4, stride=2), g, ortho), nn.ReLU(),
            _init(nn.Conv2d(64, 64, 3, stride=1), g, ortho), nn.ReLU(),
            nn.Flatten(),
            _init(nn.Linear(64 * mh * mw, 512), g, ortho), nn.ReLU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Frames in channels-last (NHWC) layout let oneDNN take its faster CPU convolutions: a PPO minibatch
        # step (256 frames, forward and backward) took 1.3× less time, the same function to float rounding
        # (docs/performance.md, "Pixels"). The uint8 frames are reordered, a quarter of the float bytes.
        # MinAtar's 10×10 frames are the other way round (channels-last 1.5× slower), so only here.
        return self.net(x.contiguous(memory_format=torch.channels_last).float() / 255.0)


def pixel_torso(obs_space: gym.spaces.Box, ortho: bool = True) -> tuple[nn.Module, int]:
    """The CNN for uint8 ``(C, H, W)`` frames and its feature count: the Nature CNN (512) for frames of at
    least 36×36 (Atari's 84×84), else the MinAtar CNN (128), which every implementation then uses."""
    c, h, w = obs_space.shape
    if min(h, w) >= NATURE_MIN_SIZE:
        return NatureCNN(c, h, w, ortho), 512
    return MinAtarCNN(c, h, w, ortho), 128


class CategoricalPd:
    """Categorical distribution from logits ``(B, n)``."""

    __slots__ = ("logp",)

    def __init__(self, logits: torch.Tensor):
        self.logp = torch.log_softmax(logits, dim=-1)

    def sample(self) -> torch.Tensor:
        # Gumbel-max: argmax(logits + Gumbel noise) is an exact categorical sample.
        u = torch.rand_like(self.logp).clamp_(min=1e-12)
        return (self.logp - torch.log(-torch.log(u))).argmax(dim=-1)

    def mode(self) -> torch.Tensor:
        return self.logp.argmax(dim=-1)

    def log_prob(self, a: torch.Tensor) -> torch.Tensor:
        return self.logp.gather(-1, a.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        return -(self.logp.exp() * self.logp).sum(-1)

    def kl(self, other: "CategoricalPd") -> torch.Tensor:
        """KL(self ‖ other), per sample."""
        return (self.logp.exp() * (self.logp - other.logp)).sum(-1)


class GaussianPd:
    """Diagonal Gaussian with a state-independent log-std: mean ``(B, d)``, log_std ``(d,)``."""

    __slots__ = ("mean", "log_std")

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor):
        self.mean, self.log_std = mean, log_std

    def sample(self) -> torch.Tensor:
        return self.mean + self.log_std.exp() * torch.randn_like(self.mean)

    def mode(self) -> torch.Tensor:
        return self.mean

    def log_prob(self, a: torch.Tensor) -> torch.Tensor:
        z = (a - self.mean) * torch.exp(-self.log_std)
        return (-0.5 * z.pow(2) - self.log_std - LOG_SQRT_2PI).sum(-1)

    def entropy(self) -> torch.Tensor:
        return (self.log_std + 0.5 + LOG_SQRT_2PI).sum(-1).expand(self.mean.shape[0])

    def kl(self, other: "GaussianPd") -> torch.Tensor:
        """KL(self ‖ other), per sample (closed form for diagonal Gaussians)."""
        var, ovar = (2 * self.log_std).exp(), (2 * other.log_std).exp()
        return (other.log_std - self.log_std + (var + (self.mean - other.mean).pow(2)) / (2 * ovar) - 0.5).sum(-1)


#: Added to the gSDE variance before its square root, as SB3's ``StateDependentNoiseDistribution`` (epsilon).
SDE_EPS = 1e-6


class SDEGaussianPd(GaussianPd):
    """The action distribution of generalized State-Dependent Exploration (gSDE; Raffin et al. 2022, "Smooth
    Exploration for Robotic Reinforcement Learning", CoRL, §3; SB3's ``StateDependentNoiseDistribution``).

    An action is a = μ(s) + z(s)·ε: ``z`` ``(B, m)`` is the policy's last hidden layer (detached: the noise does
    not train the features, SB3's ``learn_features=False``) and ε ``(m, d)`` a matrix of independent N(0, σ_ij²)
    entries, ``σ = exp(log_std_w)``, held fixed between resamples so that within a stretch the noise is a
    deterministic, smooth function of the state. Given s, a is Gaussian with a diagonal variance
    Var[a_j] = Σ_i z_i² σ_ij², which is what log-probabilities, entropy and KL use (:class:`GaussianPd` with a
    per-sample log-std). ``noise`` ``(N, m, d)``: one ε per env; a batch of N rows uses row i's, any other batch
    size the first (SB3's rule).
    """

    __slots__ = ("latent", "noise")

    def __init__(self, mean: torch.Tensor, latent: torch.Tensor, log_std_w: torch.Tensor,
                 noise: torch.Tensor | None):
        variance = latent.pow(2) @ (2 * log_std_w).exp()  # (B, d)
        super().__init__(mean, 0.5 * torch.log(variance + SDE_EPS))
        self.latent, self.noise = latent, noise

    def sample(self) -> torch.Tensor:
        if self.noise is None:
            raise RuntimeError("gSDE has no noise matrix yet: call ActorCritic.reset_noise(n_envs) before sampling")
        if self.latent.shape[0] == self.noise.shape[0]:
            return self.mean + torch.bmm(self.latent.unsqueeze(1), self.noise).squeeze(1)
        return self.mean + self.latent @ self.noise[0]


Pd = CategoricalPd | GaussianPd


class PGStats(NamedTuple):
    """What one policy-gradient minibatch step reports, from either path (torch autograd or the NumPy kernel)."""

    policy_loss: float
    value_loss: float
    entropy: float
    approx_kl: float  # k3 estimator of KL(π_old ‖ π) on the batch; 0 without old_logp
    clip_fraction: float  # share of samples with |r − 1| > ε; 0 without clipping

    @classmethod
    def mean(cls, steps: Sequence[PGStats]) -> PGStats:
        """Each field's mean over ``steps`` (the column means of one float64 array: the rounding they always had)."""
        return cls(*(float(v) for v in np.mean(np.asarray(steps, dtype=np.float64), axis=0)))

    def diagnostics(self) -> dict[str, float]:
        """The fields under their diagnostics keys."""
        return {"loss/policy": self.policy_loss, "loss/value": self.value_loss, "policy/entropy": self.entropy,
                "policy/approx_kl": self.approx_kl, "policy/clip_fraction": self.clip_fraction}


class ActorCritic(nn.Module):
    """Policy π(a|s) and value V(s).

    Vector observations: two separate MLPs (``net_arch`` ``{pi, vf}`` or one list for
    both; default [64, 64], SB3's). Pixels: one CNN (:func:`pixel_torso`) shared by both heads
    (SB3's CnnPolicy), unless ``share_features=False`` (TRPO fits the critic
    separately and must not move the policy while doing so).
    Continuous actions get a state-independent log-std parameter ``(d,)``, or with ``use_sde`` gSDE's
    ``(m, d)`` matrix of noise log-stds over the ``m`` units of the policy's last hidden layer
    (:class:`SDEGaussianPd`; draw its noise with :meth:`reset_noise`).
    """

    def __init__(
        self,
        obs_space: gym.spaces.Box,
        action_space: gym.spaces.Space,
        *,
        net_arch: Any = None,
        activation: str = "tanh",
        ortho_init: bool = True,
        log_std_init: float = 0.0,
        share_features: bool = True,
        use_sde: bool = False,
    ):
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if use_sde and self.discrete:
            raise ValueError("gSDE (use_sde) needs continuous actions, and this env's are discrete; set use_sde: false")
        self.use_sde = use_sde
        n_out = int(action_space.n) if self.discrete else int(np.prod(action_space.shape))
        self.pixels = obs_space.dtype == np.uint8 and len(obs_space.shape) == 3
        if self.pixels:
            self.pi_features, n_feat = pixel_torso(obs_space, ortho_init)
            self.vf_features = self.pi_features if share_features else pixel_torso(obs_space, ortho_init)[0]
            self.pi = _init(nn.Linear(n_feat, n_out), 0.01, ortho_init)
            self.vf = _init(nn.Linear(n_feat, 1), 1.0, ortho_init)
        else:
            pi_arch, vf_arch = _arch(net_arch)
            d = int(np.prod(obs_space.shape))
            self.pi_features = self.vf_features = nn.Identity()
            self.pi = mlp([d, *pi_arch, n_out], activation, 0.01, ortho_init)
            self.vf = mlp([d, *vf_arch, 1], activation, 1.0, ortho_init)
        self.shared = self.pixels and share_features
        if self.use_sde:
            # SB3's gSDE with full_std=True: one log-std per (hidden unit, action dimension), all log_std_init.
            m = n_feat if self.pixels else (pi_arch[-1] if pi_arch else d)
            self.log_std = nn.Parameter(torch.full((m, n_out), float(log_std_init)))
            self.sde_noise: torch.Tensor | None = None
            # gSDE's latent is the input of the action head: the MLP without its last Linear, or the CNN
            # features themselves (the head is then one Linear). Split once here, not at every step; a tuple,
            # so the shared layers are not registered (and saved in the state dict) a second time.
            mlp_pi = isinstance(self.pi, nn.Sequential)
            self._sde_parts = (self.pi[:-1], self.pi[-1]) if mlp_pi else (nn.Identity(), self.pi)
        elif not self.discrete:
            self.log_std = nn.Parameter(torch.full((n_out,), float(log_std_init)))

    # -- parameter groups ----------------------------------------------------
    def actor_parameters(self) -> list[nn.Parameter]:
        ps = list(self.pi_features.parameters()) + list(self.pi.parameters())
        return ps + ([] if self.discrete else [self.log_std])

    def critic_parameters(self) -> list[nn.Parameter]:
        own = list(self.vf.parameters())
        return own if self.shared else list(self.vf_features.parameters()) + own

    # -- evaluation ----------------------------------------------------------
    def dist(self, obs: torch.Tensor) -> Pd:
        if self.use_sde:
            return self._sde_dist(self.pi_features(obs))
        out = self.pi(self.pi_features(obs))
        return CategoricalPd(out) if self.discrete else GaussianPd(out, self.log_std)

    def _sde_dist(self, f: torch.Tensor) -> SDEGaussianPd:
        to_latent, head = self._sde_parts
        latent = to_latent(f)
        return SDEGaussianPd(head(latent), latent.detach(), self.log_std, self.sde_noise)

    def reset_noise(self, n: int) -> None:
        """gSDE: draw ``n`` new noise matrices ε ~ N(0, exp(log_std)²), one per env, from torch's generator."""
        std = self.log_std.detach().exp()
        self.sde_noise = torch.randn((n, *std.shape), dtype=std.dtype, device=std.device) * std

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.vf(self.vf_features(obs)).squeeze(-1)

    def dist_value(self, obs: torch.Tensor) -> tuple[Pd, torch.Tensor]:
        """``(dist(obs), value(obs))`` with a shared CNN run once, not once per head: on pixels the torso is
        most of the cost (profiled on MinAtar, issue 18: calling ``dist`` and ``value`` separately ran it twice
        forward and backward). Vector observations have no shared torso: this is the two calls."""
        if not self.shared:
            return self.dist(obs), self.value(obs)
        f = self.pi_features(obs)
        if self.use_sde:
            return self._sde_dist(f), self.vf(f).squeeze(-1)
        out = self.pi(f)
        return (CategoricalPd(out) if self.discrete else GaussianPd(out, self.log_std)), self.vf(f).squeeze(-1)


def _arch(net_arch: Any) -> tuple[list[int], list[int]]:
    if net_arch is None:
        return [64, 64], [64, 64]
    if isinstance(net_arch, (list, tuple)):
        return list(net_arch), list(net_arch)
    pi = net_arch["pi"] if isinstance(net_arch, dict) else net_arch.pi
    vf = net_arch["vf"] if isinstance(net_arch, dict) else net_arch.vf
    return list(pi), list(vf)


def make_policy(envs: gym.vector.VectorEnv, params: Any, *, share_features: bool = True) -> ActorCritic:
    """An :class:`ActorCritic` for a vector env from the shared hyperparameter fields."""
    return ActorCritic(
        envs.single_observation_space,
        envs.single_action_space,
        net_arch=params.net_arch,
        activation=params.activation,
        ortho_init=params.ortho_init,
        log_std_init=params.log_std_init,
        share_features=share_features,
        use_sde=getattr(params, "use_sde", False),
    )
