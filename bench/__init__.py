"""bench: which on-policy RL algorithm should I use? Measured, with the evidence.

Layers (an arrow is "may import"): cli → runner → {suite, envs, baselines,
record, store}; baselines → {envs, hyperparams, record}; metrics is pure NumPy.
Algorithms never see a suite, a store or the CLI.
"""

__version__ = "0.1.0"
