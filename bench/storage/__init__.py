"""Storage: the ground floor everything else writes to or reads from. It imports nothing of bench above it.

- :mod:`.store`: the results store (SQLite WAL | PostgreSQL), claims and atomic finishes;
- :mod:`.packed`: Parquet packs, written and verified; :mod:`.packread`: a pack read in place as a store;
- :mod:`.record`: the recorder every implementation records through (its protocol is all an
  algorithm sees of storage);
- :mod:`.vocabulary`: the words writers and readers share (contention, a run's CPU budget, what makes a
  bench study).
"""
