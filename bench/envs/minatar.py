"""The MinAtar network (Young & Tian 2019, arXiv:1903.03176, section 4), which every implementation
uses on MinAtar's small frames: the own policies (:mod:`bench.algos.policy`) and SB3's, as its features
extractor (:mod:`bench.algos.sb3`). It lives with the envs, as the task's network does for the reward
model, so that both sides build the very same module.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

#: The Nature CNN's three convolutions (8/4, 4/2, 3/1) need frames of at least 36×36; smaller frames
#: (MinAtar's 10×10) get :class:`MinAtarCNN`.
NATURE_MIN_SIZE = 36


class MinAtarCNN(nn.Module):
    """One 3×3 convolution with 16 filters, stride 1, ReLU, then a fully connected layer of 128 ReLU
    units: ``(B, C, H, W)`` frames of 0/1 object channels → ``(B, 128)`` features. No 1/255 scaling: the
    frames are already 0/1. ``ortho``: orthogonal weights with gain √2 and zero biases, as the own
    policies initialise every hidden layer (Huang et al. 2022; SB3's ``ortho_init``)."""

    def __init__(self, in_channels: int, height: int, width: int, ortho: bool = True):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, stride=1), nn.ReLU(),
            nn.Flatten(),
            nn.Linear(16 * (height - 2) * (width - 2), 128), nn.ReLU(),
        )
        if ortho:
            for layer in (self.net[0], self.net[3]):
                nn.init.orthogonal_(layer.weight, math.sqrt(2))
                nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.float())
