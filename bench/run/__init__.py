"""Execution: running cells, one function per cell, run by a local process pool or by Ray tasks.

What runs write to (the store, packs, the recorder) is :mod:`bench.storage`, below this package.

- :mod:`.runner`: the local pool, ``run_cell`` and provenance;
- :mod:`.ray_executor`: the same ``run_cell`` as Ray tasks on a cluster;
- :mod:`.saving`: saved policies (suite ``save:``), written beside the store;
- :mod:`.loggers`: ``--tensorboard`` / ``--wandb``, the recorder's scalars under SB3's tag names;
- :mod:`.speed`: ``bench speed``, own against SB3 side by side in one process.
"""
