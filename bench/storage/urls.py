"""Where a results store is: its URL checked and normalised once into a :class:`StoreURL` (passwords never
shown), the engine options for reading and writing, and whether a file at a SQLite URL is a bench store at all.

The functions here that take a URL as text (``url: str``) are the parser's own steps, which run before there
is a :class:`StoreURL`; every layer above takes a ``store_url: StoreURL`` (``tests/test_store_url.py``)."""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import sqlalchemy as sa

from bench.storage.schema import StoreError, metadata

DEFAULT_URL = "sqlite:///results/bench.db"
#: Seconds a PostgreSQL server may take to accept a connection before the store counts as
#: unreachable (libpq's ``connect_timeout``; a URL's own ``?connect_timeout=N`` wins).
CONNECT_TIMEOUT_S = 5


def sqlite_path(url: str) -> Path | None:
    u = sa.engine.make_url(url)
    if u.get_backend_name() != "sqlite" or is_in_memory(url):
        return None
    return Path(u.database)


def is_in_memory(url: str) -> bool:
    """Whether a SQLite URL names an in-memory database (``sqlite://``, ``:memory:``, ``mode=memory``)."""
    u = sa.engine.make_url(url)
    if u.get_backend_name() != "sqlite":
        return False
    db = u.database or ""
    return not db or ":memory:" in db or "mode=memory" in str(url)


#: ``scheme://user:`` at the start of a URL: what follows, up to the URL's last ``@``, is its password.
_USER_PART = re.compile(r"([A-Za-z0-9+.\-]*://[^:/@]*:)(.*)", re.DOTALL)
#: A URL with a user part inside a line of text (it runs to the next white space).
_URL_IN_TEXT = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.\-]*)?://[^:/@\s]*:\S*")
MASK = "***"
#: Shorter passwords are not replaced wherever they appear (a password "a" would blank every "a" of a
#: line); the URL pattern still hides them inside URLs.
MIN_SECRET = 4


def hide_password(url: str) -> str:
    """``url`` with its password replaced by ``***``, whether or not SQLAlchemy can parse it.

    The password is everything between ``scheme://user:`` and the URL's *last* ``@``: SQLAlchemy ends it
    at the first, but a password typed with a raw ``@``, ``/`` or ``:`` in it is still a password. With no
    ``@`` at all, what follows ``user:`` is shown only if it is a port (digits) and a database name:
    ``postgresql://postgres:secret/db`` is a password whose host was left out more often than a port, and
    a password may hold ``/`` and ``:``, so all up to the last ``/`` is hidden. So is all after ``user:@``:
    an empty password there, or a password typed with a raw leading ``@`` whose own ``@host`` was left out,
    cannot be told apart (:func:`check_url` refuses the form).
    A string with an ``@`` but no ``://`` shows only what follows its last ``@``.
    """
    m = _USER_PART.match(url)
    if m is None:  # not even scheme:// to go by: hide all before the last '@' (a user part, if any)
        return MASK + url[url.rfind("@"):] if "@" in url and "://" not in url else url
    head, rest = m.groups()
    at = rest.rfind("@")
    if at > 0:
        return head + MASK + rest[at:]
    if _shown_as_port(rest):
        return head + rest
    last = rest.rfind("/")
    return head + MASK + (rest[last:] if last >= 0 else "")


def _shown_as_port(rest: str) -> bool:
    """Whether what follows ``scheme://user:`` in a URL with no ``@`` is shown: nothing, or a port (digits)
    and a database name. Anything else may be a password whose ``@host`` was left out, and a password may
    hold ``/`` and ``:``, so all of it up to the last ``/`` is hidden."""
    port, _, tail = rest.partition("/")
    return not rest or port.isdigit() and "/" not in tail


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the password of every URL in it hidden (:func:`hide_password`), and every string of
    ``secrets`` (passwords the command was given) replaced wherever it appears: the one net every line
    bench prints passes through, for messages that quote a URL in a form :func:`hide_password` cannot see
    whole (escaped, or cut at a space)."""
    text = _URL_IN_TEXT.sub(lambda m: hide_password(m.group(0)), text)
    for s in secrets:
        if len(s) >= MIN_SECRET:
            text = text.replace(s, MASK)
    return text


def url_secret(url: str) -> str | None:
    """The password part of ``url`` as :func:`hide_password` reads it (None: there is none)."""
    m = _USER_PART.match(url)
    if m is None:
        return None
    rest = m.group(2)
    at = rest.rfind("@")
    if at > 0:
        secret = rest[:at]
    elif _shown_as_port(rest):
        return None
    else:
        secret = rest[:rest.rfind("/")] if "/" in rest else rest
    return secret or None


def describe_url(url: str) -> str:
    """The URL with any password hidden, for messages; any string, parsed or not."""
    try:
        shown = sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: hide what looks like a password
        return hide_password(url)
    secret = url_secret(url)
    if secret and secret.startswith("@"):  # 'user:@…': SQLAlchemy shows as a host what may be a password
        return hide_password(url)
    return hide_password(shown) if secret and secret in shown else shown


def normalise_url(url: str) -> str:
    """Accept ``postgresql://`` and use the psycopg 3 driver the project installs."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


#: What a SQLite URL's path may not hold: SQLAlchemy reads ``?`` as the start of query parameters (the
#: file would be named by what comes before it) and decodes ``%XX`` (``%20`` names another folder).
_SQLITE_RESERVED = {"?": "a '?' (SQLAlchemy would take what follows as query parameters, which bench does not "
                         "allow for SQLite stores, and name the file by what comes before it)",
                    "%": "a '%' (SQLAlchemy would decode %XX escapes, so the store would land in another file)"}


def check_url(url: str) -> str:
    """The normalised URL of a usable store, or :class:`StoreError` (one line, password hidden) saying why not.

    A SQLite path is taken literally or refused: one holding ``?`` or ``%`` is refused
    (:data:`_SQLITE_RESERVED`), never silently read as another path.
    """
    url = normalise_url(url)
    shown = hide_password(url)
    try:
        u = sa.engine.make_url(url)
        backend = u.get_backend_name()
    except Exception:  # noqa: BLE001 - any parse failure is the same user error
        backend = None
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(f"{shown!r} is not a usable store URL; allowed: sqlite:///PATH or postgresql://USER@HOST:PORT/DB")
    if (m := _USER_PART.match(url)) is not None and m.group(2).startswith("@"):
        raise StoreError(f"{shown!r} has ':@' after its user: an empty password, or a password holding '@'; allowed: "
                         "USER@HOST without the ':', or a password with each '@' written as %40")
    if "@" in (url_secret(url) or ""):
        # SQLAlchemy ends the password at the first '@' and takes the rest for the host, which its errors then show.
        raise StoreError(f"{shown!r} has more than one '@' before its host; allowed: a password with each '@' "
                         "written as %40")
    if is_in_memory(url):
        raise StoreError(
            f"{shown!r} is an in-memory SQLite database: every worker process would get its own empty one and "
            "nothing would be kept; allowed: a file, sqlite:///PATH, or postgresql://USER@HOST:PORT/DB"
        )
    if backend == "sqlite" and (u.username or u.password or u.host or u.port):
        raise StoreError(f"{shown!r} names a user, password or host, which a SQLite file has none of; allowed: "
                         "sqlite:///PATH (three slashes, then the path)")
    if backend == "postgresql" and "connect_timeout" in u.query:
        value = u.query["connect_timeout"]
        if not (isinstance(value, str) and value.isascii() and value.isdigit()):
            raise StoreError(f"{shown!r} has connect_timeout={value!r}; allowed: one whole number of seconds, "
                             "e.g. ?connect_timeout=10")
    if backend == "sqlite":
        for ch, why in _SQLITE_RESERVED.items():
            if ch in url:
                raise StoreError(f"{shown!r} has {why}; allowed: sqlite:///PATH with a path that has no '?' or '%' "
                                 "(rename the folder or file)")
    return url


@dataclass(frozen=True, repr=False)
class StoreURL:
    """A results store's URL, checked and normalised once where it enters bench (the command line's
    ``--store``, a public :mod:`bench.api` function, ``Store(text)``) and passed down as this type, as
    ``timesteps`` is: no layer below checks it again, and nothing hands it back up.

    ``text`` is the normalised URL, password included, for the engine alone; ``str()`` and ``repr()`` show
    :attr:`shown`, so a URL printed by mistake shows no password. Make one with :meth:`parse`.
    """

    text: str

    @classmethod
    def parse(cls, store: "StoreURL | str | None" = None) -> "StoreURL":
        """``store``'s URL: text (default :data:`DEFAULT_URL`) checked and normalised (:func:`check_url`); a
        StoreURL returned as it is, not checked again.

        :raises StoreError: one line, password hidden, saying what is allowed.
        """
        if isinstance(store, StoreURL):
            return store
        return cls(check_url(store or DEFAULT_URL))

    @property
    def shown(self) -> str:
        """The URL with any password hidden, for lines a user reads (:func:`describe_url`)."""
        return describe_url(self.text)

    @property
    def secret(self) -> str | None:
        """Its password (:func:`url_secret`), for the command line to hide wherever it appears."""
        return url_secret(self.text)

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return sa.engine.make_url(self.text).get_backend_name()

    @property
    def host(self) -> str | None:
        return sa.engine.make_url(self.text).host

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite file (None: a PostgreSQL store)."""
        return sqlite_path(self.text)

    @property
    def is_default(self) -> bool:
        """Whether it is :data:`DEFAULT_URL` (``bench report`` then needs no ``--store``)."""
        return self.text == normalise_url(DEFAULT_URL)

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return f"StoreURL({self.shown!r})"


def engine_kwargs(url: str, *, readonly: bool = False) -> dict[str, Any]:
    """``create_engine`` arguments for a store URL (also Optuna's storage on it): a connect
    timeout on PostgreSQL, read-only sessions when asked; a busy timeout on SQLite."""
    u = sa.engine.make_url(url)
    if u.get_backend_name() == "sqlite":
        return {"connect_args": {"timeout": 60}}
    args: dict[str, Any] = {"connect_timeout": int(u.query.get("connect_timeout", CONNECT_TIMEOUT_S))}
    if readonly:
        args["options"] = "-c default_transaction_read_only=on"
    return {"connect_args": args, "pool_pre_ping": True}


def readonly_engine_args(url: str) -> tuple[str, dict[str, Any]]:
    """``(url, create_engine kwargs)`` that read a store without changing anything beside it.

    SQLite: ``mode=ro`` when a ``-wal`` file lies beside the database (a writer has it
    open: share its WAL index, read-only), else ``immutable=1``: no writer has it open,
    so it is read as it is on disk and no ``-wal``/``-shm`` files are created (a
    read-only mount could not hold them). A writer that starts during such a read is
    not seen by it. PostgreSQL: read-only transactions, with the connect timeout.
    """
    path = sqlite_path(url)
    if path is None:
        return url, engine_kwargs(url, readonly=True)
    wal = path.with_name(path.name + "-wal").exists()
    uri = path.absolute().as_uri() + ("?mode=ro" if wal else "?immutable=1")
    return "sqlite://", {
        "poolclass": sa.pool.NullPool,
        "creator": lambda: sqlite3.connect(uri, uri=True, timeout=60, check_same_thread=False),
    }


def disk_full(e: BaseException) -> bool:
    """Whether ``e`` (a SQLAlchemy error, or an OSError) says the disk under the store is full: SQLite's
    ``SQLITE_FULL`` ("database or disk is full"), PostgreSQL's ``disk_full`` (SQLSTATE 53100, "could not extend
    file ...: No space left on device") or the OS's ``ENOSPC``."""
    import errno

    orig = getattr(e, "orig", None) or e
    if isinstance(orig, OSError) and orig.errno == errno.ENOSPC:
        return True
    if getattr(orig, "sqlstate", None) == "53100" or getattr(orig, "pgcode", None) == "53100":
        return True
    text = str(orig)
    return "database or disk is full" in text or "No space left on device" in text


def one_line_error(e: BaseException) -> str:
    orig = getattr(e, "orig", None) or e
    text = " ".join(str(orig).split())
    return text if len(text) <= 300 else text[:297] + "..."


def check_sqlite_file(path: Path) -> bool:
    """Whether ``path`` holds a SQLite database (False: no file, or an empty one); StoreError when it
    is a directory, unreadable, not SQLite, or truncated or otherwise corrupt.

    The file is read through SQLite only, never through a file descriptor of bench's own: closing any
    descriptor of a file drops every POSIX lock the process holds on it, SQLite's included ("How To Corrupt
    An SQLite Database File", https://www.sqlite.org/howtocorrupt.html, section 2.2). A ``bench run`` that
    opened a second :class:`Store` while its first held a connection (as its pool did for each worker that
    died) lost its lock on the database that way; the next worker to close its connection cleanly (a plugin's
    ``sys.exit()``) then took itself for the last connection, checkpointed and deleted the WAL under the
    parent, and the store was corrupt ("database disk image is malformed", then "disk I/O error"). SQLite
    itself keeps a descriptor open while another connection of the process holds a lock on the file.
    """
    if not path.exists():
        return False
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a SQLite store file")
    try:
        size = path.stat().st_size
    except OSError as e:
        raise StoreError(f"cannot read the store {path}: {e.strerror or e}") from None
    if size == 0:
        return False  # SQLite's own empty database: nothing there yet
    if not os.access(path, os.R_OK):
        raise StoreError(f"cannot read the store {path}: permission denied")
    _, kwargs = readonly_engine_args(f"sqlite:///{path}")
    try:
        con = kwargs["creator"]()
        try:
            # Reads page 1: SQLite checks the header (magic, sizes) and that the file holds as many pages as
            # the header says (lockBtree), and parses the schema.
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            con.close()
    except sqlite3.Error as e:
        code = getattr(e, "sqlite_errorname", "")
        if code == "SQLITE_NOTADB":
            raise StoreError(f"{path} is not a SQLite database, so not a bench results store; bench leaves it as it "
                             "is (give --store another path)") from None
        if code == "SQLITE_CORRUPT":
            raise StoreError(f"{path} is truncated or corrupt (SQLite: {one_line_error(e)}; the file has {size:,} bytes); "
                             "bench leaves it as it is") from None
        raise StoreError(f"cannot read the store {path}: {one_line_error(e)}") from None
    return True


def table_names(conn: Any) -> set[str]:
    return set(sa.inspect(conn).get_table_names())


def _foreign(path_or_url: Any, tables: set[str]) -> StoreError:
    shown = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
    return StoreError(f"{path_or_url} is a database of something else, not a bench results store (its tables: {shown}); "
                      "bench will not write to it (give --store another path)")


def refuse_foreign(path: Path, tables: set[str]) -> None:
    """StoreError unless the tables are none, or bench's (or its tuner's, Optuna's)."""
    if tables and not tables & (set(metadata.tables) | {"studies", "version_info", "alembic_version"}):
        raise _foreign(path, tables)


def sqlite_tables(path: Path) -> set[str]:
    """The tables of a SQLite file, read without changing it or leaving files beside it."""
    _, kwargs = readonly_engine_args(f"sqlite:///{path}")
    try:
        con = kwargs["creator"]()
        try:
            return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.Error as e:
        raise StoreError(f"{path} cannot be read as a SQLite database ({one_line_error(e)}); bench leaves it as it is") from None
