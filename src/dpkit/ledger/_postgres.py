"""A ledger in a PostgreSQL database (see :class:`PostgresLedger`)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dpkit.accounting.ledger import LedgerRecord, check_budget_name, check_record, check_run
from dpkit.errors import LedgerError
from dpkit.ledger import _fork

__all__ = ["PostgresLedger"]

_T = TypeVar("_T")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS dpkit_budgets ("
    " name TEXT PRIMARY KEY, definition TEXT NOT NULL, last_seq BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dpkit_ledger ("
    " budget TEXT NOT NULL REFERENCES dpkit_budgets (name), seq BIGINT NOT NULL,"
    " time DOUBLE PRECISION NOT NULL, kind TEXT NOT NULL, analyst TEXT, payload TEXT NOT NULL,"
    " PRIMARY KEY (budget, seq))",
)
#: Key of the advisory lock that serialises creating the tables (CREATE TABLE IF NOT EXISTS
#: is not safe against a concurrent creator in PostgreSQL).
_SCHEMA_LOCK = 0x64706B6974  # "dpkit"


class _ConflictError(Exception):
    """Another writer appended first (rolls the transaction back; not an error)."""


class PostgresLedger:
    """A ledger kept in the PostgreSQL database at ``dsn`` (tables ``dpkit_budgets`` and
    ``dpkit_ledger``, created if missing).

    Each append is one transaction: ``UPDATE dpkit_budgets SET last_seq = k WHERE name = ... AND
    last_seq = k - 1`` takes the budget row's lock (a concurrent writer waits, then finds
    ``last_seq`` moved and updates no row), then the record is inserted and the transaction
    commits; a conflict rolls back and writes nothing. This is safe under PostgreSQL's default
    READ COMMITTED isolation, for any number of processes on any number of hosts.

    Needs psycopg 3 (the ``service`` extra). Database failures raise
    :class:`~dpkit.errors.LedgerError`; the connection is opened again on the next call. Any
    other exception during a call (``KeyboardInterrupt``, a signal handler's exception) closes
    the connection before it propagates, so the server rolls back whatever was not committed.
    If the connection is lost during a commit, the record may or may not have been written: the
    charge is reported as failed (no release) and a later read shows whether it was kept, which
    can only count privacy that was not used (the safe side).

    Processes: the connection (one socket, one server session) belongs to the process that
    opened it. A copy of the store in a child made by ``fork`` never uses the parent's
    connection and never closes it (closing would end the parent's session): it opens its own
    on first use.
    """

    def __init__(self, dsn: str, *, connect_timeout: float = 10.0) -> None:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - psycopg is a dependency of the extra
            raise LedgerError(
                "PostgresLedger needs psycopg 3: pip install 'dpkit[service]'"
            ) from exc
        if not isinstance(dsn, str) or not dsn:
            raise LedgerError(f"dsn must be a non-empty str, got {dsn!r}")
        self._psycopg = psycopg
        self._dsn = dsn
        self._timeout = connect_timeout
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = os.getpid()  # the process that opened self._conn
        _fork.track(self)
        self._run(self._setup)

    def _connection(self) -> Any:
        """This process's connection, opened if needed (lock held)."""
        if self._conn is not None and self._pid != os.getpid():
            _fork.abandon(self._conn)  # the parent's session: never used, never closed here
            self._conn = None
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = self._psycopg.connect(
                self._dsn, autocommit=True, connect_timeout=max(1, int(self._timeout))
            )
            self._pid = os.getpid()
        return self._conn

    def _setup(self) -> None:
        conn = self._connection()
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in _SCHEMA:
                conn.execute(statement)

    def _run(self, action: Callable[[], _T]) -> _T:
        with self._lock:
            try:
                return action()
            except self._psycopg.Error as exc:
                raise LedgerError(
                    f"the PostgreSQL ledger failed ({type(exc).__name__}: {exc}); the charge "
                    "is refused (if the connection was lost during a commit, the record may "
                    "still be stored, which only counts privacy that was not used)"
                ) from exc
            except LedgerError:
                raise
            except BaseException:  # interrupted, perhaps in the middle of the protocol
                self._drop()
                raise

    def _drop(self) -> None:
        """Close this process's connection after an interrupted call: the server rolls back
        an open transaction, and the next call connects again."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._pid != os.getpid():
            _fork.abandon(conn)
            return
        with contextlib.suppress(Exception):  # discarded anyway
            conn.close()

    # ------------------------------------------------------------------ fork (see _fork)
    def _before_fork(self) -> None:
        """Nothing: the child sets the copied connection aside."""

    def _after_fork_parent(self) -> None:
        """Nothing."""

    def _after_fork_child(self) -> None:
        self._lock = threading.Lock()
        if self._conn is not None:
            _fork.abandon(self._conn)
            self._conn = None

    def define(self, name: str, definition: str) -> str:
        check_budget_name(name)

        def act() -> str:
            conn = self._connection()
            with conn.transaction():
                conn.execute(
                    "INSERT INTO dpkit_budgets (name, definition, last_seq) VALUES (%s, %s, 0) "
                    "ON CONFLICT (name) DO NOTHING",
                    (name, definition),
                )
                row = conn.execute(
                    "SELECT definition FROM dpkit_budgets WHERE name = %s", (name,)
                ).fetchone()
            return str(row[0])

        return self._run(act)

    def definition(self, name: str) -> str | None:
        def act() -> str | None:
            row = (
                self._connection()
                .execute("SELECT definition FROM dpkit_budgets WHERE name = %s", (name,))
                .fetchone()
            )
            return None if row is None else str(row[0])

        return self._run(act)

    def read(self, name: str, after: int = 0) -> list[LedgerRecord]:
        def act() -> list[LedgerRecord]:
            rows = (
                self._connection()
                .execute(
                    "SELECT seq, time, kind, analyst, payload FROM dpkit_ledger "
                    "WHERE budget = %s AND seq > %s ORDER BY seq",
                    (name, after),
                )
                .fetchall()
            )
            return [
                LedgerRecord(seq=int(r[0]), time=float(r[1]), kind=r[2], analyst=r[3], payload=r[4])
                for r in rows
            ]

        return self._run(act)

    def append(self, name: str, record: LedgerRecord) -> bool:
        check_record(record)
        return self.append_many(name, [record])

    def append_many(self, name: str, records: Sequence[LedgerRecord]) -> bool:
        """Compare-and-append of a run of records in one transaction: one commit for all of
        them, or nothing written."""
        check_run(records)
        first, last = records[0].seq, records[-1].seq

        def act() -> bool:
            conn = self._connection()
            try:
                with conn.transaction():
                    moved = conn.execute(
                        "UPDATE dpkit_budgets SET last_seq = %s WHERE name = %s AND last_seq = %s",
                        (last, name, first - 1),
                    ).rowcount
                    if moved != 1:
                        raise _ConflictError
                    for r in records:
                        conn.execute(
                            "INSERT INTO dpkit_ledger (budget, seq, time, kind, analyst, "
                            "payload) VALUES (%s, %s, %s, %s, %s, %s)",
                            (name, r.seq, r.time, r.kind, r.analyst, r.payload),
                        )
            except _ConflictError:
                known = conn.execute(
                    "SELECT 1 FROM dpkit_budgets WHERE name = %s", (name,)
                ).fetchone()
                if known is None:
                    raise LedgerError(f"no budget named {name!r} in this ledger") from None
                return False
            return True

        return self._run(act)

    def names(self) -> list[str]:
        def act() -> list[str]:
            rows = self._connection().execute("SELECT name FROM dpkit_budgets ORDER BY name")
            return [str(r[0]) for r in rows]

        return self._run(act)

    def close(self) -> None:
        """Close this process's connection (a later call opens a new one). A connection that
        this process inherited by ``fork`` is set aside, not closed."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                _fork.close_owned(conn, self._pid)

    def __repr__(self) -> str:
        return "PostgresLedger(<dsn hidden>)"
