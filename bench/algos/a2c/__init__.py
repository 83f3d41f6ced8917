"""A2C (Mnih et al. 2016, synchronous): one folder, the algorithm's spec (``spec.py``) and its implementations.

Imports nothing: the registry reads ``spec.py`` without torch."""
