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
* :func:`open_ledger` ``(url)``: ``memory://``, ``sqlite:///relative.db``,
  ``sqlite:////absolute/path.db``, ``postgresql://user@host/db`` (or ``postgres://``).
"""

from __future__ import annotations

from dpkit.accounting.ledger import Ledger, LedgerRecord, MemoryLedger
from dpkit.errors import LedgerError
from dpkit.ledger._postgres import PostgresLedger
from dpkit.ledger._sqlite import SqliteLedger

__all__ = [
    "Ledger",
    "LedgerRecord",
    "MemoryLedger",
    "PostgresLedger",
    "SqliteLedger",
    "open_ledger",
]


def open_ledger(url: str) -> Ledger:
    """The ledger store named by ``url``.

    * ``memory://``: a :class:`MemoryLedger` (this process only, lost at exit);
    * ``sqlite:///budget.db`` (relative to the working directory) or
      ``sqlite:////var/lib/dpkit/budget.db`` (absolute): a :class:`SqliteLedger`;
    * ``postgresql://...`` or ``postgres://...``: a :class:`PostgresLedger`, the URL passed to
      the driver as is (user, password, host, port, database, ``?sslmode=...``).

    Anything else raises :class:`~dpkit.errors.LedgerError`.
    """
    if not isinstance(url, str):
        raise LedgerError(f"a ledger URL is a str, got {url!r}")
    if url == "memory://":
        return MemoryLedger()
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if not path or path == ":memory:":
            raise LedgerError(
                f"{url!r} names no file: give sqlite:///file.db (or memory:// for a ledger "
                "that lives in this process)"
            )
        return SqliteLedger(path)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresLedger(url)
    raise LedgerError(
        f"unknown ledger URL {url!r}: use memory://, sqlite:///path.db or postgresql://..."
    )
