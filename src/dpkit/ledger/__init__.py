"""Durable ledgers for privacy budgets: SQLite (one host) and PostgreSQL (several hosts).

A :class:`~dpkit.accounting.Budget` given ``ledger=store`` writes every accepted charge to the
store before :meth:`~dpkit.accounting.Budget.charge` returns, and rebuilds its state by replaying
the stored records when it is opened again. Stores implement the
:class:`~dpkit.accounting.Ledger` protocol (compare-and-append); all of them pass one contract
test suite.

* :class:`SqliteLedger` ``(path)``: a file on this host; WAL journal, one ``BEGIN IMMEDIATE``
  transaction per charge; safe for threads and processes on one host.
* :class:`PostgresLedger` ``(dsn)``: a PostgreSQL database (psycopg 3, the ``service`` extra);
  for processes on several hosts.
* After ``fork``, a store object reused in the child opens its own connection (the parent's
  is never used nor closed there).
* :func:`check_sqlite_file` ``(path)``: refuses an SQLite file reached under several names
  (hard links, a file mounted on its own); :func:`sqlite_url_path` ``(url)``: the file a
  ``sqlite:///`` URL names.
* :func:`open_ledger` ``(url)``: ``memory://`` (or ``memory://name``), ``sqlite:///relative.db``,
  ``sqlite:////absolute/path.db``, ``postgresql://user@host/db`` (or ``postgres://``);
  :func:`parse_url` ``(url)``: which of these a URL names, read by the same rules (for other
  stores kept beside a ledger, such as the curator service's tables).
* :func:`close_owned` ``(connection, pid)`` and :func:`abandon` ``(connection)``: how a store
  with connections of its own treats one that another process opened (see ``_fork``).
"""

from __future__ import annotations

import os
import threading

from dpkit.accounting.ledger import Ledger, LedgerRecord, MemoryLedger
from dpkit.errors import LedgerError
from dpkit.ledger._fork import abandon, close_owned
from dpkit.ledger._postgres import PostgresLedger
from dpkit.ledger._sqlite import SqliteLedger, check_sqlite_file
from dpkit.ledger._sqlite import resolve_sqlite_path as _resolve_sqlite_path

__all__ = [
    "Ledger",
    "LedgerRecord",
    "MemoryLedger",
    "PostgresLedger",
    "SqliteLedger",
    "abandon",
    "check_sqlite_file",
    "close_owned",
    "open_ledger",
    "parse_url",
    "sqlite_url_path",
]


#: The in-memory stores named by ``memory://`` URLs in this process (kept until it exits).
_MEMORY_STORES: dict[str, MemoryLedger] = {}
_MEMORY_LOCK = threading.Lock()
#: Characters refused in the path of a ``sqlite:///`` URL: URL syntax (query, fragment,
#: percent-escapes) that some readers of the URL would interpret and others would keep as part
#: of the file name, so that two spellings could name two different files.
_AMBIGUOUS = ("?", "#", "%", "\\", "\x00")


def _fresh_lock_in_child() -> None:
    global _MEMORY_LOCK
    _MEMORY_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_fresh_lock_in_child)


def _memory_name(url: str) -> str:
    name = url[len("memory://") :]
    if name and (not name.isprintable() or any(c in name for c in "/?#%\\")):
        raise LedgerError(
            f"{url!r}: a memory ledger's name is printable text without '/', '?', '#', '%' "
            "or '\\' (or nothing: memory:// is the default store)"
        )
    return name


def _memory(url: str) -> MemoryLedger:
    _memory_name(url)
    with _MEMORY_LOCK:
        store = _MEMORY_STORES.get(url)
        if store is None:
            store = _MEMORY_STORES[url] = MemoryLedger()
        return store


def parse_url(url: str) -> tuple[str, str]:
    """``(kind, target)`` of a ledger URL, by the rules of :func:`open_ledger`: ``("memory",
    name)``, ``("sqlite", resolved file path)`` (see :func:`sqlite_url_path`) or
    ``("postgres", url)``; anything else raises :class:`~dpkit.errors.LedgerError`."""
    if not isinstance(url, str):
        raise LedgerError(f"a ledger URL is a str, got {url!r}")
    if url.startswith("memory://"):
        return "memory", _memory_name(url)
    if url.startswith("sqlite:///"):
        return "sqlite", sqlite_url_path(url)
    if url.startswith(("postgresql://", "postgres://")):
        return "postgres", url
    raise LedgerError(
        f"unknown ledger URL {url!r}: use memory://, sqlite:///path.db or postgresql://..."
    )


def sqlite_url_path(url: str) -> str:
    """The file path named by a ``sqlite:///`` URL, resolved as the operating system resolves it
    (:func:`~dpkit.ledger._sqlite.resolve_sqlite_path`: symbolic links followed, ``..`` applied
    after them), read the same way by the ledger and by the service's own tables; see
    :func:`open_ledger` for the spellings refused."""
    path = url[len("sqlite:///") :]
    if not path or path == ":memory:" or path.startswith("file:"):
        raise LedgerError(
            f"{url!r} names no file: give sqlite:///file.db (or memory:// for a ledger "
            "that lives in this process)"
        )
    bad = sorted({repr(c) for c in path if c in _AMBIGUOUS or not c.isprintable()})
    if path.startswith("~"):
        bad.append("a leading '~'")
    if path.endswith("/"):
        bad.append("a trailing '/'")
    if path != path.strip():
        bad.append("leading or trailing white space")
    if bad:
        raise LedgerError(
            f"{url!r}: the path of a sqlite:/// URL must be a plain file path; found "
            f"{', '.join(bad)}. Query strings, fragments, '%' escapes and '~' are not "
            "interpreted, so they would name another file than the same URL without them"
        )
    return _resolve_sqlite_path(path)


def open_ledger(url: str) -> Ledger:
    """The ledger store named by ``url``.

    * ``memory://``: this process's default :class:`MemoryLedger`; ``memory://name``: the one
      named ``name``. The same URL gives the same store every time in one process (so a budget
      opened from a configured URL per request keeps its charges); the stores live until the
      process exits and are never shared with another process (a child made by ``fork`` can
      read its copy but not charge it);
    * ``sqlite:///budget.db`` (relative to the working directory when the URL is opened) or
      ``sqlite:////var/lib/dpkit/budget.db`` (absolute): a :class:`SqliteLedger` on that file,
      its path resolved at once as the operating system resolves it (symbolic links
      followed, ``..`` applied after them). The path is taken literally, so URL syntax
      that would make two spellings name two files is refused: ``?`` (no query parameters),
      ``#``, ``%`` escapes, ``\\``, a leading ``~`` (not expanded), a trailing ``/``. The file
      must have one name: every process reaches it through the same directory (see
      :class:`SqliteLedger`);
    * ``postgresql://...`` or ``postgres://...``: a :class:`PostgresLedger`, the URL passed to
      the driver as is (user, password, host, port, database, ``?sslmode=...``).

    Anything else raises :class:`~dpkit.errors.LedgerError`.
    """
    kind, target = parse_url(url)
    if kind == "memory":
        return _memory(url)
    if kind == "sqlite":
        return SqliteLedger(target)
    return PostgresLedger(target)
