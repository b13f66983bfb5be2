"""A ledger in an SQLite file (see :class:`SqliteLedger`)."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

from dpkit.accounting.ledger import LedgerRecord, check_budget_name, check_record
from dpkit.errors import LedgerError

__all__ = ["SqliteLedger"]

_T = TypeVar("_T")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS dpkit_budgets ("
    " name TEXT PRIMARY KEY, definition TEXT NOT NULL, last_seq INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dpkit_ledger ("
    " budget TEXT NOT NULL, seq INTEGER NOT NULL, time REAL NOT NULL, kind TEXT NOT NULL,"
    " analyst TEXT, payload TEXT NOT NULL, PRIMARY KEY (budget, seq)) WITHOUT ROWID",
)


class SqliteLedger:
    """A ledger kept in the SQLite file ``path`` (created if missing).

    The file uses the write-ahead log (``journal_mode=WAL``) with ``synchronous=FULL``, so a
    committed record survives a crash of the process and of the machine. Each append is one
    ``BEGIN IMMEDIATE`` transaction, which takes SQLite's single write lock: it checks that the
    budget's last record is the one the writer read (``UPDATE ... SET last_seq = k WHERE
    last_seq = k - 1``), inserts the record and commits, or rolls back and writes nothing.
    Writers from other threads and processes on this host wait for the lock up to ``timeout``
    seconds. Not for network file systems (their file locks are unreliable): use
    :class:`~dpkit.ledger.PostgresLedger` across hosts.

    Any SQLite failure (disk full, lock timeout, damaged file) raises
    :class:`~dpkit.errors.LedgerError` after the transaction is rolled back: nothing is written.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self._path = os.fspath(path)
        if not self._path or self._path == ":memory:":
            raise LedgerError("SqliteLedger needs a file path (MemoryLedger keeps no file)")
        if not isinstance(timeout, (int, float)) or not 0 < timeout < 1e6:
            raise LedgerError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(self._path, timeout=float(timeout),
                                         isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open the ledger file {self._path!r}: {exc}") from exc
        self._run(self._setup, int(timeout * 1000))

    def _setup(self, busy_ms: int) -> None:
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {busy_ms:d}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("BEGIN IMMEDIATE")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute("COMMIT")

    def _run(self, action: Callable[..., _T], *args: object) -> _T:
        """Run ``action`` under the lock; roll back and raise LedgerError on any failure."""
        with self._lock:
            try:
                return action(*args)
            except sqlite3.Error as exc:
                try:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                except sqlite3.Error:  # pragma: no cover - the connection is gone
                    pass
                raise LedgerError(
                    f"the SQLite ledger {self._path!r} failed ({exc}); nothing was written"
                ) from exc

    @property
    def path(self) -> str:
        """The ledger file."""
        return self._path

    def define(self, name: str, definition: str) -> str:
        check_budget_name(name)

        def act() -> str:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT OR IGNORE INTO dpkit_budgets (name, definition, last_seq) "
                "VALUES (?, ?, 0)", (name, definition),
            )
            row = conn.execute("SELECT definition FROM dpkit_budgets WHERE name = ?",
                               (name,)).fetchone()
            conn.execute("COMMIT")
            return str(row[0])

        return self._run(act)

    def definition(self, name: str) -> str | None:
        def act() -> str | None:
            row = self._conn.execute("SELECT definition FROM dpkit_budgets WHERE name = ?",
                                     (name,)).fetchone()
            return None if row is None else str(row[0])

        return self._run(act)

    def read(self, name: str, after: int = 0) -> list[LedgerRecord]:
        def act() -> list[LedgerRecord]:
            rows = self._conn.execute(
                "SELECT seq, time, kind, analyst, payload FROM dpkit_ledger "
                "WHERE budget = ? AND seq > ? ORDER BY seq", (name, after),
            ).fetchall()
            return [LedgerRecord(seq=r[0], time=float(r[1]), kind=r[2], analyst=r[3],
                                 payload=r[4]) for r in rows]

        return self._run(act)

    def append(self, name: str, record: LedgerRecord) -> bool:
        check_record(record)

        def act() -> bool:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            moved = conn.execute(
                "UPDATE dpkit_budgets SET last_seq = ? WHERE name = ? AND last_seq = ?",
                (record.seq, name, record.seq - 1),
            ).rowcount
            if moved != 1:
                known = conn.execute("SELECT 1 FROM dpkit_budgets WHERE name = ?",
                                     (name,)).fetchone()
                conn.execute("ROLLBACK")
                if known is None:
                    raise LedgerError(f"no budget named {name!r} in this ledger")
                return False
            conn.execute(
                "INSERT INTO dpkit_ledger (budget, seq, time, kind, analyst, payload) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (name, record.seq, record.time, record.kind, record.analyst, record.payload),
            )
            conn.execute("COMMIT")
            return True

        return self._run(act)

    def names(self) -> list[str]:
        def act() -> list[str]:
            rows = self._conn.execute("SELECT name FROM dpkit_budgets ORDER BY name")
            return [str(r[0]) for r in rows]

        return self._run(act)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"SqliteLedger({self._path!r})"
