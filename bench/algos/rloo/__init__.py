"""RLOO, REINFORCE with a leave-one-out baseline: one folder, the algorithm's spec (``spec.py``) and its implementations.

Imports nothing: the registry reads ``spec.py`` without torch."""
