"""One line style per label for the report's figures: colour from the algorithm, dash and marker from the
implementation, so that a report with many labels (the quick start has 14) shows distinct series, and
the own and SB3 versions of one algorithm read as a pair (one hue, two shades, solid and dashed).

A label's style depends only on its algorithm, its implementation and, where several labels share both
(configurations of one algorithm), its rank among them, never on which other algorithms are in the
store: the same label looks the same in every figure and every report. Algorithms bench does not know
(plugins) take the extra hues in name order.

The base hues were picked for their separation in CIELAB (CIE 1976 ΔE ≥ 30 between the own algorithms,
≥ 19 between the SB3 tints; ``tests/test_report_style.py`` checks the bound on the first 20 styles).
Pure: no matplotlib, colours are RGB triples in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

RGB = tuple[float, float, float]

#: Hue per known algorithm, in the order the report's figures list them (on-policy, then off-policy SB3).
HUES: dict[str, str] = {
    "ppo": "#1f5fa8", "a2c": "#e8710a", "trpo": "#1e8a3c", "reinforce": "#c4262e", "a3c": "#7b4fb0",
    "npg": "#8c564b", "grpo": "#d9559f", "rloo": "#0f9fb0", "ac_mc": "#a6a20d", "ac_td": "#303030",
    "dqn": "#5b8c00", "sac": "#b0006e", "td3": "#c09000",
}
#: Hues for algorithms outside :data:`HUES` (plugins), taken in name order.
EXTRA_HUES: tuple[str, ...] = ("#4a7fb5", "#b5651d", "#2f6f5f", "#9b59b6", "#6b6b00", "#a0522d", "#3d5a80", "#8b1e3f")

#: Per implementation: (dash, marker, how far the hue is mixed towards white (+) or black (−)).
#: SB3 a lighter shade and dashed, NumPy a darker one and dotted, Python plugins dash-dotted.
IMPL: dict[str, tuple[Any, str, float]] = {
    "bench": ("-", "o", 0.0),
    "sb3": ((0, (5, 2)), "s", 0.45),
    "numpy": ((0, (1.5, 1.5)), "^", -0.3),
    "python": ((0, (6, 2, 1.5, 2)), "D", 0.25),
}
#: Dashes and markers for the second, third, ... label of one algorithm and implementation.
REPEATS: tuple[tuple[Any, str], ...] = (((0, (3, 1, 1, 1)), "v"), ((0, (8, 2)), "P"), ((0, (1, 3)), "X"),
                                        ((0, (4, 2, 1, 2, 1, 2)), "*"))


def hex_rgb(h: str) -> RGB:
    return tuple(int(h[i:i + 2], 16) / 255 for i in (1, 3, 5))  # type: ignore[return-value]


def mix(rgb: RGB, t: float) -> RGB:
    """``rgb`` mixed towards white by ``t`` > 0 or towards black by ``-t`` for ``t`` < 0."""
    return tuple(c + (1 - c) * t if t >= 0 else c * (1 + t) for c in rgb)  # type: ignore[return-value]


def cielab(rgb: RGB) -> np.ndarray:
    """sRGB in [0, 1] → CIELAB (D65), shape ``(3,)`` (the sRGB and CIE 1976 formulas)."""
    c = np.asarray(rgb, float)
    c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ c
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@dataclass(frozen=True)
class LineStyle:
    color: RGB
    dash: Any
    marker: str


def styles(labels: list[tuple[str, str, str]]) -> dict[str, LineStyle]:
    """The style of each ``(label, algo, impl)``; see the module docstring for the rule."""
    unknown = sorted({a for _, a, _ in labels if a not in HUES})
    hue = {**{a: hex_rgb(h) for a, h in HUES.items()},
           **{a: hex_rgb(EXTRA_HUES[i % len(EXTRA_HUES)]) for i, a in enumerate(unknown)}}
    out: dict[str, LineStyle] = {}
    rank: dict[tuple[str, str], int] = {}
    for label, algo, impl in sorted(labels):
        dash, marker, t = IMPL.get(impl, IMPL["python"])
        k = rank[(algo, impl)] = rank.get((algo, impl), -1) + 1
        if k:  # another configuration of the same algorithm and implementation
            dash, marker = REPEATS[(k - 1) % len(REPEATS)]
            t = t + (0.2 if t <= 0 else -0.2) * ((k + 1) // 2) * (1 if k % 2 else -1)
        out[label] = LineStyle(mix(hue[algo], max(-0.6, min(0.7, t))), dash, marker)
    return out


def algo_order(algo: str) -> tuple[int, str]:
    """Sort key: known algorithms in :data:`HUES` order, then the others by name."""
    known = list(HUES)
    return (known.index(algo), algo) if algo in HUES else (len(known), algo)


def guess_algo(label: str) -> str:
    """The algorithm of a label that came without one: its name less the last ``-impl`` part."""
    return label.rsplit("-", 1)[0] if "-" in label else label
