"""The ``bench`` command: run | status | race | export | import | envs | speed | tune | report | recommend | parity |
eval | schema.

Each command parses its arguments, calls one :mod:`bench.api` service and renders what it returns; the
command line imports nothing else of bench. How errors end (one line, exit status 2 for bad input, 1 for
anything else) is :mod:`bench.cli.base`'s.
"""

from bench.cli import racing, results, running, tools
from bench.cli.base import app, main

# The commands, in the order `bench --help` lists them.
app.command()(running.run)
app.command()(running.status)
app.command()(racing.race)
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
