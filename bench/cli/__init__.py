"""The ``bench`` command: run | status | export | import | tune | report | recommend | parity | eval | envs |
schema | speed.

Bad input is one line per problem on stderr and exit status 2; nothing runs and
no store is created or touched. A run's own failure is a result, reported in the
closing summary (exit status 1 when any cell failed). Any other failure (a store
that cannot be reached or read, a disk that is full) is one line and exit status
1; ``bench --debug …`` (or ``--debug`` anywhere on the line) shows its traceback.

User strings (labels, errors, paths) are printed as literal text: rich's markup
is off on both consoles, and styled words are built as :class:`rich.text.Text`.

Each command parses its arguments, calls one :mod:`bench.api` service and renders
what it returns; the command line imports nothing else of bench.
"""

from bench.cli import results, running, tools
from bench.cli.app import app, main

# The commands, in the order `bench --help` lists them.
app.command()(running.run)
app.command()(running.status)
app.command()(results.export)
app.command("import")(results.import_)
app.command()(tools.envs)
app.command()(tools.speed)
app.command()(tools.tune)
app.command()(results.report)
app.command()(results.recommend)
app.command()(results.parity)
app.command("eval")(tools.eval_)
app.command()(tools.schema)

__all__ = ["app", "main"]
