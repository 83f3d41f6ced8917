"""A3C (Mnih et al. 2016, asynchronous): one folder, the algorithm's spec (``spec.py``) and its implementations.

Imports nothing: the registry reads ``spec.py`` without torch."""
