"""The pure statistics: functions over arrays and frames, with no I/O, no SQL and nothing of bench above them.

- :mod:`.metrics`: per-run statistics (threshold crossing, censoring, AUC);
- :mod:`.aggregate`: cross-run statistics (IQM, stratified bootstrap, performance profiles, P(improvement),
  Kaplan–Meier summaries);
- :mod:`.permutation`: stratified permutation tests; :mod:`.survival`: censored steps-to-threshold;
- :mod:`.distributions`: the t, normal and chi-square functions the tests use (scipy.special);
- :mod:`.parity`: Welch and equivalence (TOST) tests; :mod:`.generalise`: random-effects meta-analysis over envs;
- :mod:`.selection`: multiple comparisons with the best; :mod:`.simulation`: the simulations behind their rules.

Each function takes NumPy arrays (or pandas frames) and returns numbers, as rliable's do. Every layer that
computes a score uses these: the runner's run summary, the tuner's trial value and the report's scores are one
computation. Importing this package, or any module of it, loads no SQLAlchemy, Arrow or torch
(``tests/test_layers.py`` checks it), so this file imports nothing: import the module you need.
"""
