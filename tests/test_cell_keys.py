"""Cell keys name runs in existing stores and in the shipped reference: a change to how cells are built
(the registry, typed params travelling with a cell, the suite modules' split) must leave every key as it was.

The digests below were recorded from the code before the algorithm registry (commit 23be780): for each suite,
the number of cells and the SHA-256 (first 16 hex digits) of its sorted cell keys, one per line. A change that
means to change keys bumps ``KEY_VERSION`` and records new digests here, saying why.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bench.suites.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]

#: suite file → (cells, digest of its sorted cell keys).
RECORDED: dict[str, tuple[int, str]] = {
    "suites/quickstart.yaml": (42, "4f1c65fb3f76cff6"),
    "suites/reference/atari-1e6.yaml": (24, "e5de150c6bcec08f"),
    "suites/reference/atari.yaml": (24, "bcce8c3113dfe4b0"),
    "suites/reference/box2d.yaml": (70, "7a989a458b33534f"),
    "suites/reference/car-racing.yaml": (12, "56405f433907ce4d"),
    "suites/reference/classic-tune.yaml": (210, "1b77edb4b8f15f4b"),
    "suites/reference/classic-tuned.yaml": (210, "65426370917295e5"),
    "suites/reference/classic.yaml": (280, "d76efd597f16809d"),
    "suites/reference/continuous-dense.yaml": (105, "5257929ea703ba41"),
    "suites/reference/fetchreach.yaml": (35, "088465d40d91795c"),
    "suites/reference/highway.yaml": (35, "ead55d96342bda71"),
    "suites/reference/highway-intersection.yaml": (35, "2275d4e8121db1e0"),
    "suites/reference/highway-two-way.yaml": (35, "ad3bbfbcb3ef640c"),
    "suites/reference/minatar.yaml": (105, "6b47cf3518313968"),
    "suites/reference/minatar-seaquest.yaml": (35, "4c7622a2e3d7c1be"),
    "suites/reference/minigrid.yaml": (140, "d8d850f706b6477f"),
    "suites/reference/minigrid-pixels.yaml": (105, "8f23d195f4a78e9e"),
    "suites/reference/box2d-pixels.yaml": (24, "ae3a7c79a058d0cb"),
    "suites/reference/mujoco-reinforce.yaml": (3, "77652e16a1bf490f"),
    "suites/reference/mujoco.yaml": (90, "0fd7dc0798bfbd1b"),
    "suites/reference/off-policy.yaml": (55, "7ef8be6e4bfbb3ec"),
    "suites/reference/pointmaze.yaml": (35, "3cdcdadeb74453b2"),
    "suites/reference/sequence.yaml": (120, "9247f033ccb4f1df"),
}


def digest(keys: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:16]


def test_every_quickstart_and_reference_suite_is_recorded():
    on_disk = {str(p.relative_to(ROOT)) for p in [ROOT / "suites" / "quickstart.yaml",
                                                   *(ROOT / "suites" / "reference").glob("*.yaml")]}
    assert on_disk == set(RECORDED)


@pytest.mark.parametrize("suite", sorted(RECORDED))
def test_cell_keys_are_as_recorded(suite):
    keys = [c.key for c in load_suite(ROOT / suite).cells]
    assert (len(keys), digest(keys)) == RECORDED[suite]


def test_the_digest_sees_one_changed_key():
    keys = [c.key for c in load_suite(ROOT / "suites" / "quickstart.yaml").cells]
    assert digest(keys) == RECORDED["suites/quickstart.yaml"][1]
    assert digest(keys[:-1] + [keys[-1][:-1] + ("0" if keys[-1][-1] != "0" else "1")]) != digest(keys)
