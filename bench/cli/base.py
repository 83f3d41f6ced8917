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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import sqlalchemy as sa
import typer
from rich.console import Console
from rich.text import Text
from typer._click.exceptions import UsageError  # typer's own copy of click: what its parser raises
from typer.core import TyperGroup

from bench import api
from bench.distribution import version
from bench.cli.streams import ensure_standard_streams, silence_output


@dataclass(frozen=True)
class Invocation:
    """One ``bench`` command line, as its error lines need it: made once from its arguments when they are parsed,
    kept on click's context (``ctx.meta``) and handed to whatever prints, never a module global, so that one
    in-process call (``bench.cli.app([...])``) cannot leak into the next.

    :param args: the arguments (sys.argv's, or those given to ``app(...)``), for usage errors' lines.
    :param debug: ``--debug`` was given (anywhere before ``--``): errors show their traceback.
    :param secrets: the password of every URL among the arguments: never printed (:func:`_redact`).
    :param store: the store the command names (its ``--store``/``--storage``, else that option's default),
        password hidden, for error lines about it; None for a command without one.
    """

    args: tuple[str, ...] = ()
    debug: bool = False
    secrets: frozenset[str] = frozenset()
    store: str | None = None


_INVOCATION = "bench.invocation"
#: The options that name a store URL.
_STORE_FLAGS = ("--store", "--storage")


def _invocation(ctx: Any) -> Invocation:
    """The :class:`Invocation` of the command line ``ctx`` belongs to (a bare one before parsing)."""
    return ctx.meta.get(_INVOCATION, Invocation()) if ctx is not None else Invocation()


class _BenchGroup(TyperGroup):
    """Every command's errors end as one line on stderr and a non-zero exit (``--debug``: the traceback)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        head, sep, tail = list(args), [], []
        if "--" in head:  # after "--" nothing is an option
            i = head.index("--")
            head, sep, tail = head[:i], ["--"], head[i + 1:]
        inv = Invocation(tuple(args), "--debug" in head, _secrets(args), self._store_named(ctx, args))
        ctx.meta[_INVOCATION] = inv
        head = [a for a in head if a != "--debug"]
        try:
            return super().parse_args(ctx, head + sep + tail)
        except UsageError as e:
            raise _usage_line(e, inv) from None

    def _store_named(self, ctx: Any, args: list[str]) -> str | None:
        """How error lines name the store of the command ``args`` run: its ``--store`` (``--storage``) as given,
        else that option's default; None where the command takes no store."""
        name = next((a for a in args if not a.startswith("-")), None)
        cmd = self.commands.get(name) if name is not None else None
        opts = [p for p in getattr(cmd, "params", []) if set(getattr(p, "opts", [])) & set(_STORE_FLAGS)]
        if not opts:
            return None
        # Named as given, password hidden: the command itself parses (and checks) it, once.
        return api.describe_url(_given(args, _STORE_FLAGS) or opts[0].default or api.DEFAULT_URL)

    def invoke(self, ctx: Any) -> Any:
        inv = _invocation(ctx)
        try:
            try:
                return super().invoke(ctx)
            finally:
                sys.stdout.flush()  # here, where a reader gone away is caught, not in the interpreter's last flush
        except UsageError as e:  # a bad option, value or argument of a command
            raise _usage_line(e, inv) from None
        except _Refused as e:  # bad input a command found: one line per problem, exit status 2
            for line in e.lines:
                _say(line, inv)
            raise typer.Exit(2) from None
        except (typer.Exit, typer.Abort, typer.exceptions.TyperException):  # click's own exits
            raise
        except api.PackError as e:  # a pack that fails its check is bad input: one line, naming the file
            _say(str(e), inv)
            raise typer.Exit(2) from None
        except BrokenPipeError:
            # The reader went away (`bench recommend | head`): nothing is wrong with the input or the store,
            # so no error line. Stop quietly as rich's console does for the commands that print through it
            # (stdout and stderr to /dev/null, so the interpreter's last flush cannot raise again; status 1).
            silence_output()
            raise typer.Exit(1) from None
        except Exception as e:  # noqa: BLE001 - the one place that turns any error into one line
            if inv.debug:
                traceback.print_exc()
            _say(_error_line(e, inv), inv)
            raise typer.Exit(1) from None


def _secrets(args: list[str]) -> frozenset[str]:
    """The password of every URL among ``args`` (an option's ``--flag=URL`` too)."""
    values = [a.split("=", 1)[1] if a.startswith("--") and "=" in a else a for a in args]
    return frozenset(s for v in values if (s := api.url_secret(v)) is not None)


def _usage_line(e: UsageError, inv: Invocation) -> typer.Exit:
    """A usage error (unknown option, missing argument, value out of range) as the one line every other
    bad input gets, exit status 2: ``bench speed: Invalid value for '--timesteps': Input should be
    greater than or equal to 1 (got '0') (bench speed --help)``, not click's boxed usage text."""
    where = e.ctx.command_path if e.ctx is not None else "bench"
    got = _given(inv.args, getattr(getattr(e, "param", None), "opts", []))
    text = e.format_message() + (f" (got {got!r})" if got is not None else "")
    _say(" ".join(f"{where}: {text} ({where} --help)".split()), inv)
    return typer.Exit(2)


def _given(args: Sequence[str], opts: Sequence[str]) -> str | None:
    """The value given in ``args`` to the option named ``opts`` (its last use), if any."""
    got = None
    for i, a in enumerate(args):
        for o in opts:
            if a == o and i + 1 < len(args):
                got = args[i + 1]
            elif a.startswith(o + "="):
                got = a[len(o) + 1:]
    return got


def _error_line(e: BaseException, inv: Invocation) -> str:
    """One line for an error that reached the top (the store's own errors are already one line)."""
    if isinstance(e, api.StoreError):
        text = str(e)
    elif isinstance(e, (sa.exc.SQLAlchemyError, OSError)) and api.disk_full(e):
        orig = getattr(e, "orig", None) or e
        where = (f"the results store at {inv.store}" if isinstance(e, sa.exc.SQLAlchemyError) and inv.store
                 else getattr(orig, "filename", None) or "what bench writes")
        text = (f"the disk holding {where} is full ({orig}); free space on it, or give --store a store on another "
                "disk: runs that finished are kept, and the next bench run re-runs the rest")
    elif isinstance(e, sa.exc.SQLAlchemyError):
        orig = getattr(e, "orig", None) or e
        where = f" at {inv.store}" if inv.store else ""
        text = f"the results store{where} failed: {type(orig).__name__}: {orig}"
    elif isinstance(e, OSError):
        text = f"{e.filename}: {e.strerror or e}" if e.filename is not None else f"{type(e).__name__}: {e}"
    else:
        # Not a failure bench foresaw: still one line, but say so (the fuzz test looks for these).
        text = f"internal error: {type(e).__name__}: {e}"
    text = _redact(" ".join(text.split()), inv)
    return f"error: {text}" + ("" if inv.debug else " (bench --debug shows the traceback)")


def _say(line: str, inv: Invocation) -> None:
    """One line on stderr, passwords hidden (:func:`_redact`); a stderr gone away (``2>&1 | head``) stops it quietly."""
    try:
        print(_redact(line, inv), file=sys.stderr, flush=True)
    except BrokenPipeError:
        silence_output()


def _redact(line: str, inv: Invocation) -> str:
    """``line`` with every URL's password, and every password this command was given, hidden."""
    return api.redact(line, inv.secrets)


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
    # --debug is read where the arguments are parsed (Invocation); it is declared here for --help only.
    del debug, _v


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


class _Refused(typer.Exit):
    """Bad input a command found: its ``lines`` (one per problem), printed by the frame
    (:meth:`_BenchGroup.invoke`, which holds the :class:`Invocation` whose passwords they must not show),
    then exit status 2."""

    def __init__(self, lines: list[str]):
        super().__init__(2)
        self.lines = lines


def _bad_input(lines: list[str] | str) -> typer.Exit:
    # Printed plain, not through rich: paths like algorithms[1] must not be read as markup.
    return _Refused([lines] if isinstance(lines, str) else list(lines))


def _writable(flag: str, path: Path, *, folder: bool) -> Path:
    """``path`` if the command can write it there (:func:`bench.api.writable`), else one line naming
    ``flag`` and exit status 2."""
    try:
        return api.writable(flag, path, folder=folder)
    except api.BadInput as e:
        raise _bad_input(e.lines) from None


def _store_url(given: str | None, flag: str = "--store") -> api.StoreURL:
    """The command's ``--store`` (``--storage``) parsed, once, into the :class:`bench.api.StoreURL` every layer
    below takes; a bad or in-memory URL is bad input (one line, exit 2)."""
    try:
        return api.StoreURL.parse(given)
    except api.StoreError as e:
        raise _bad_input(f"{flag}: {e}") from None


def _fmt(v, digits: int = 1) -> str:
    if v is None or v != v:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _results_store(store_url: api.StoreURL, *, need_done: bool = True,
                   fallback: bool = True) -> tuple[api.StoreURL | str, str]:
    """The store to read, and a line saying which it is (:func:`bench.api.results_store`): bad input is one
    line and exit status 2; a store that cannot be reached or read is one line and exit status 1."""
    try:
        return api.results_store(store_url, need_done=need_done, fallback=fallback,
                                 log=lambda s: err.print(s, markup=False))
    except api.BadInput as e:
        raise _bad_input(e.lines) from None


def _choice(flag: str, value: Optional[str], allowed: tuple[str, ...]) -> Optional[str]:
    if value is not None and value not in allowed:
        raise _bad_input(f"{flag}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
    return value


def main() -> None:  # pragma: no cover
    app()
