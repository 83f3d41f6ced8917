"""REINFORCE (Williams 1992): one folder, the algorithm's spec (``spec.py``) and its implementations.

Imports nothing: the registry reads ``spec.py`` without torch."""
