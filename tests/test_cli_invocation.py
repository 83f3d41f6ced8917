"""One command line's state (``--debug``, the passwords it was given) belongs to that command line alone
(issue 65): ``bench.cli.base.Invocation``, made when its arguments are parsed and handed to what prints, not
module globals, so in-process calls (``bench.cli.app([...])``, a notebook, CliRunner) do not leak into each
other."""

from __future__ import annotations

import socket

from typer.testing import CliRunner

from bench.cli import app
from bench.cli.base import Invocation, _secrets

SUITE = ("name: inv\nseeds: 1\ndefaults:\n  timesteps: 256\nenvs:\n- id: CartPole-v1\nalgorithms:\n"
         "- algo: ppo\n  impl: bench\n  hyperparams: {}\n")
PASSWORD = "Zq7InvocationPw"


def _unreachable() -> str:
    """A PostgreSQL URL with a password, on a port where no server listens (refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/bench"


def test_debug_and_passwords_hold_for_their_own_command_line_only(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    url = _unreachable()
    runs = [CliRunner().invoke(app, args) for args in (
        ["--debug", "status", str(suite), "--store", url],
        ["status", str(suite), f"--store={url}"],
        ["status", str(suite), "--store", url, "--debug"],
    )]
    for r in runs:
        assert r.exit_code == 1, r.stderr
        assert PASSWORD not in r.stdout + r.stderr  # hidden in every call, whichever form gave it
        assert "cannot open the results store at postgresql+psycopg://postgres:***@127.0.0.1" in r.stderr, r.stderr
    debug, plain, debug_after = (r.stderr for r in runs)
    assert "Traceback" in debug and "Traceback" in debug_after
    # The call between the two --debug calls is its own: one line, no traceback.
    assert "Traceback" not in plain and plain.count("\n") == 1 and "(bench --debug shows the traceback)" in plain


def test_the_invocation_is_made_from_the_arguments_alone():
    assert _secrets(["run", "--store", "postgresql://u:pw12345@h/db", "--store=sqlite:///x.db", "x"]) == {"pw12345"}
    inv = Invocation(("a",), True)
    try:
        inv.debug = False  # type: ignore[misc]
    except AttributeError:
        pass
    assert inv.debug, "an Invocation cannot be changed once made"
