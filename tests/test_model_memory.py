"""The model memory every run records in its provenance (``meta["model_memory"]``), checked by hand."""

from __future__ import annotations

import torch
import torch.nn as nn

from bench.storage.record import Recorder, model_memory


def test_memory_of_a_tiny_model_by_hand():
    net = nn.Linear(3, 2)  # weight 2×3 + bias 2 = 8 float32 = 32 bytes
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    before = model_memory(net.parameters(), [opt])
    assert before == {"params_bytes": 32, "other_bytes": 0, "optimizer_bytes": 0, "total_bytes": 32}  # Adam's state is lazy
    net(torch.ones(1, 3)).sum().backward()
    opt.step()
    # Per parameter tensor: exp_avg and exp_avg_sq (its numel × 4 bytes each) and a float32 `step` scalar (4 bytes):
    # weight 2 × 24 + 4, bias 2 × 8 + 4 = 72.
    after = model_memory(net.parameters(), [opt])
    assert after == {"params_bytes": 32, "other_bytes": 0, "optimizer_bytes": 72, "total_bytes": 104}


def test_shared_tensors_count_once_and_plain_state_tensors_count():
    w = torch.zeros(5, dtype=torch.float64)  # 40 bytes
    state = torch.zeros(5)  # 20 bytes of optimiser state held outside a torch optimiser (A3C's shared RMSprop)
    ref = torch.zeros(2, 2)  # 16 bytes: a frozen copy
    m = model_memory([w, w], [state], [ref])
    assert m == {"params_bytes": 40, "other_bytes": 16, "optimizer_bytes": 20, "total_bytes": 76}


def test_the_recorder_measures_when_asked():
    net = nn.Linear(2, 1)  # 3 floats = 12 bytes
    opt = torch.optim.RMSprop(net.parameters(), lr=1e-2)
    rec = Recorder()
    assert rec.model_memory() is None
    rec.note_models(net.parameters(), [opt])  # a generator: the recorder keeps a list
    net(torch.ones(1, 2)).sum().backward()
    opt.step()  # RMSprop: square_avg (12 bytes) + step (2 × 4 bytes)
    assert rec.model_memory() == {"params_bytes": 12, "other_bytes": 0, "optimizer_bytes": 20, "total_bytes": 32}
