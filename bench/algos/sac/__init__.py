"""SAC: one folder, the algorithm's spec (``spec.py``).

Imports nothing: the registry reads ``spec.py`` without torch."""
