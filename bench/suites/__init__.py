"""Suites: what a user writes, checked before anything runs.

- :mod:`.suite`: the suite schema (pydantic), loading with one line per problem
  (file, line, YAML path, bad value, what is allowed), and the grid → cells;
- :mod:`.spaces`: search spaces for the suite's ``tune:`` block;
- :mod:`.problems`: the problem type both report, below both.

The algorithms' typed hyperparameters, which suites resolve, are
:mod:`bench.algos.hyperparams`: an algorithm never imports a suite.
"""
