"""Suites: what a user writes, checked before anything runs.

- :mod:`.suite`: loading with one line per problem (file, line, YAML path, bad value, what is
  allowed), and the grid → cells; it re-exports :mod:`.schema` (the pydantic schema and its bounds),
  :mod:`.errors` (:class:`SuiteError`, bounded YAML reading) and :mod:`.cells` (cells, keys, filters);
- :mod:`.spaces`: search spaces for the suite's ``tune:`` block;
- :mod:`.problems`: the problem type both report, below both.

Which algorithms exist, and their typed hyperparameters, are :mod:`bench.algos.registry`; suites resolve
them with :mod:`bench.algos.hyperparams`: an algorithm never imports a suite.
"""
