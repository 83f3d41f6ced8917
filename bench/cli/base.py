"""The ``bench`` command's frame: the Typer app, its error handling, its consoles and the helpers every
command shares. The commands live in :mod:`bench.cli.running` (run, status), :mod:`bench.cli.results`
(report, recommend, export, import, parity) and :mod:`bench.cli.tools` (tune, eval, envs, speed, schema);
each parses its arguments, calls one :mod:`bench.api` service and renders the result. The command line
imports nothing of bench but :mod:`bench.api` (``tests/test_layers.py``).

Bad input is one line per problem on stderr and exit status 2; nothing runs and
no store is created or touched. A run's own failure is a result, reported in the
closing summary (exit status 1 when any cell failed). Any other failure (a store
that cannot be reached or read, a disk that is full) is one line and exit status
1; ``bench --debug …`` (or ``--debug`` anywhere on the line) shows its traceback.

User strings (labels, errors, paths) are printed as literal text: rich's markup
is off on both consoles, and styled words are built as :class:`rich.text.Text`.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any, Optional

import sqlalchemy as sa
import typer
from rich.console import Console
from rich.text import Text
from typer._click.exceptions import UsageError  # typer's own copy of click: what its parser raises
from typer.core import TyperGroup

from bench import api
from bench.distribution import version
from bench.cli.streams import ensure_standard_streams, silence_output

#: Set by ``--debug``: errors show their traceback instead of one line.
DEBUG = False
#: This invocation's arguments (sys.argv's, or those given to ``app(...)`` in-process), for usage errors' lines.
_ARGS: list[str] = []


class _BenchGroup(TyperGroup):
    """Every command's errors end as one line on stderr and a non-zero exit (``--debug``: the traceback)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        global DEBUG, _STORE_IN_USE, _ARGS
        _STORE_IN_USE = None
        _SECRETS.clear()
        _ARGS = list(args)
        head, sep, tail = list(args), [], []
        if "--" in head:  # after "--" nothing is an option
            i = head.index("--")
            head, sep, tail = head[:i], ["--"], head[i + 1:]
        DEBUG = "--debug" in head  # per invocation: one in-process call (bench.cli.app) must not leak into the next
        head = [a for a in head if a != "--debug"]
        try:
            return super().parse_args(ctx, head + sep + tail)
        except UsageError as e:
            raise _usage_line(e) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            try:
                return super().invoke(ctx)
            finally:
                sys.stdout.flush()  # here, where a reader gone away is caught, not in the interpreter's last flush
        except UsageError as e:  # a bad option, value or argument of a command
            raise _usage_line(e) from None
        except (typer.Exit, typer.Abort, typer.exceptions.TyperException):  # click's own exits
            raise
        except api.PackError as e:  # a pack that fails its check is bad input: one line, naming the file
            raise _bad_input(str(e)) from None
        except BrokenPipeError:
            # The reader went away (`bench recommend | head`): nothing is wrong with the input or the store,
            # so no error line. Stop quietly as rich's console does for the commands that print through it
            # (stdout and stderr to /dev/null, so the interpreter's last flush cannot raise again; status 1).
            silence_output()
            raise typer.Exit(1) from None
        except Exception as e:  # noqa: BLE001 - the one place that turns any error into one line
            if DEBUG:
                traceback.print_exc()
            _say(_error_line(e))
            raise typer.Exit(1) from None


def _usage_line(e: UsageError) -> typer.Exit:
    """A usage error (unknown option, missing argument, value out of range) as the one line every other
    bad input gets, exit status 2: ``bench speed: Invalid value for '--timesteps': Input should be
    greater than or equal to 1 (got '0') (bench speed --help)``, not click's boxed usage text."""
    where = e.ctx.command_path if e.ctx is not None else "bench"
    got = _given(getattr(getattr(e, "param", None), "opts", []))
    text = e.format_message() + (f" (got {got!r})" if got is not None else "")
    _say(" ".join(f"{where}: {text} ({where} --help)".split()))
    return typer.Exit(2)


def _given(opts: list[str]) -> str | None:
    """The value given on the command line to the option named ``opts`` (its last use), if any."""
    args, got = _ARGS, None
    for i, a in enumerate(args):
        for o in opts:
            if a == o and i + 1 < len(args):
                got = args[i + 1]
            elif a.startswith(o + "="):
                got = a[len(o) + 1:]
    return got


def _error_line(e: BaseException) -> str:
    """One line for an error that reached the top (the store's own errors are already one line)."""
    if isinstance(e, api.StoreError):
        text = str(e)
    elif isinstance(e, (sa.exc.SQLAlchemyError, OSError)) and api.disk_full(e):
        orig = getattr(e, "orig", None) or e
        where = (f"the results store at {_STORE_IN_USE}" if isinstance(e, sa.exc.SQLAlchemyError) and _STORE_IN_USE
                 else getattr(orig, "filename", None) or "what bench writes")
        text = (f"the disk holding {where} is full ({orig}); free space on it, or give --store a store on another "
                "disk: runs that finished are kept, and the next bench run re-runs the rest")
    elif isinstance(e, sa.exc.SQLAlchemyError):
        orig = getattr(e, "orig", None) or e
        where = f" at {_STORE_IN_USE}" if _STORE_IN_USE else ""
        text = f"the results store{where} failed: {type(orig).__name__}: {orig}"
    elif isinstance(e, OSError):
        text = f"{e.filename}: {e.strerror or e}" if e.filename is not None else f"{type(e).__name__}: {e}"
    else:
        # Not a failure bench foresaw: still one line, but say so (the fuzz test looks for these).
        text = f"internal error: {type(e).__name__}: {e}"
    text = _redact(" ".join(text.split()))
    return f"error: {text}" + ("" if DEBUG else " (bench --debug shows the traceback)")


#: The store the running command opened, named in error lines.
_STORE_IN_USE: str | None = None
#: The passwords of the store URLs this command was given: never printed (:func:`_redact`).
_SECRETS: set[str] = set()


def _say(line: str) -> None:
    """One line on stderr, passwords hidden (:func:`_redact`); a stderr gone away (``2>&1 | head``) stops it quietly."""
    try:
        print(_redact(line), file=sys.stderr, flush=True)
    except BrokenPipeError:
        silence_output()


def _redact(line: str) -> str:
    """``line`` with every URL's password, and every password this command was given, hidden."""
    return api.redact(line, _SECRETS)


app = typer.Typer(
    cls=_BenchGroup,
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    help="Which on-policy RL algorithm should I use? Run benchmark suites and find out.",
)


def _version(value: bool) -> None:
    if value:
        print(f"bench {version()}")
        raise typer.Exit()


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error (also accepted after the command)."),
          _v: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print bench's version.")) -> None:
    global DEBUG
    DEBUG = DEBUG or debug


ensure_standard_streams()  # `bench … >&-`: before anything opens a file that would take descriptor 1 or 2
# Off a terminal (CI logs, pipes) rich would wrap at 80 columns; give tables room instead.
# Markup off: labels such as "[/]" and errors such as "[nan]" are text, not rich tags.
out = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, markup=False, width=None if sys.stderr.isatty() else 160)


def _styled(style: str, word: str, rest: str = "") -> Text:
    """``word`` in ``style``, then ``rest`` as literal text."""
    return Text.assemble((word, style), rest)


StoreOpt = typer.Option(api.DEFAULT_URL, "--store", help="SQLAlchemy URL of the results store (SQLite file or postgresql://…).")
SetOpt = typer.Option(None, "--set", metavar="PATH=VALUE",
                      help="Override the suite file, e.g. defaults.timesteps=2e5 or 'algorithms[0].hyperparams."
                           "learning_rate=1e-4' (repeatable; checked as the file is, recorded with each run).")


def _bad_input(lines: list[str] | str) -> typer.Exit:
    # Plain print, not rich: paths like algorithms[1] must not be read as markup.
    for line in [lines] if isinstance(lines, str) else lines:
        _say(line)
    return typer.Exit(2)


def _writable(flag: str, path: Path, *, folder: bool) -> Path:
    """``path`` if the command can write it there (:func:`bench.api.writable`), else one line naming
    ``flag`` and exit status 2."""
    try:
        return api.writable(flag, path, folder=folder)
    except api.BadInput as e:
        raise _bad_input(e.lines) from None


def _keep_secret(url: str) -> None:
    """Remember ``url``'s password, so that no line this command prints shows it (:func:`_redact`)."""
    if (secret := api.url_secret(url)) is not None:
        _SECRETS.add(secret)


def _check_url(url: str, flag: str = "--store") -> str:
    """The normalised store URL; a bad or in-memory URL is bad input (one line, exit 2)."""
    global _STORE_IN_USE
    _keep_secret(url)
    try:
        url = api.check_url(url)
    except api.StoreError as e:
        raise _bad_input(f"{flag}: {e}") from None
    _STORE_IN_USE = describe_url(url)
    return url


def describe_url(url: str) -> str:
    """How a store is named in a line: its URL with any password hidden."""
    return api.describe_url(url)


def _fmt(v, digits: int = 1) -> str:
    if v is None or v != v:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _results_store(store: str, *, need_done: bool = True, fallback: bool = True) -> tuple[str, str]:
    """The store to read, and a line saying which it is (:func:`bench.api.results_store`): bad input is one
    line and exit status 2; a store that cannot be reached or read is one line and exit status 1."""
    _check_url(store)  # its password hidden from every line, its name in later error lines
    try:
        return api.results_store(store, need_done=need_done, fallback=fallback, log=lambda s: err.print(s, markup=False))
    except api.BadInput as e:
        raise _bad_input(e.lines) from None


def _choice(flag: str, value: Optional[str], allowed: tuple[str, ...]) -> Optional[str]:
    if value is not None and value not in allowed:
        raise _bad_input(f"{flag}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
    return value


def main() -> None:  # pragma: no cover
    app()
