"""AC-MC, REINFORCE with a learned value baseline: one folder, the algorithm's spec (``spec.py``) and its implementations.

Imports nothing: the registry reads ``spec.py`` without torch."""
