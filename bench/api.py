"""One public function per everyday job, for notebooks and scripts (the CLI is a thin layer over these).

- :func:`load_policy`: a run's saved policy, ready to act (``pi.act(obs)``);
- :func:`evaluate`: N episodes of a loaded policy on a fresh evaluation env, optionally filmed to an MP4.
"""

from __future__ import annotations

from bench.policies import Evaluation, LoadedPolicy, PolicyError, evaluate, load_policy, video_missing

__all__ = ["Evaluation", "LoadedPolicy", "PolicyError", "evaluate", "load_policy", "video_missing"]
