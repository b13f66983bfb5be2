"""The service's own tables: analysts' tokens (hashed) and the log of queries.

They live in the same database as the privacy ledger (SQLite file or PostgreSQL), in tables
named ``dpkit_service_*``. A token is 256 random bits (dpkit's secure random source), shown
once when it is issued; only its SHA-256 is stored, and a presented token is compared with
every stored hash by :func:`hmac.compare_digest` (constant time per comparison).

A query is logged as ``pending`` *before* its charge is on disk and updated when it is
answered, refused or failed: a full disk refuses the query before anything is spent, and a
crash after the charge leaves a pending row beside the charge in the ledger. When the query
log shares its SQLite file with the ledger (the default), the pending row is written in the
same transaction as the charge (:meth:`ServiceState.take_turns_with`): on disk together or not
at all. Query-log writes are group-committed: the rows waiting when a transaction starts are
written together (:meth:`ServiceState._settle`), and every write returns only once its row is
committed, so an answer is sent only after its ``answered`` row.

The URL is read by the ledger layer's rules (:func:`dpkit.ledger.parse_url`: one spelling, one
file), and connections follow its fork rules: each thread of a process opens its own, and one
inherited from another process by ``fork`` is set aside, never used nor closed
(:func:`dpkit.ledger.abandon`).

Durability: a row written with a charge is committed by the ledger's commit
(``synchronous=FULL``: on disk when the charge returns). The service's own commits of these
tables (tokens, and rows that do not ride with a charge, such as most ``answered`` rows) are
written to the write-ahead log without waiting for the disk (``synchronous=NORMAL``): such a
commit survives the process being killed, and the next charge's commit in the same file
flushes the log up to it. A power cut can lose an ``answered`` status written after the last
charge: the row then reads ``pending`` beside its charge, the conservative reading of any
crash.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpkit.errors import DPKitError

__all__ = ["ServiceState", "StateError", "Token", "hash_token", "new_token"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS dpkit_service_tokens (
        name TEXT PRIMARY KEY, role TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,
        epsilon DOUBLE PRECISION, delta DOUBLE PRECISION, created DOUBLE PRECISION NOT NULL,
        revoked INTEGER NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS dpkit_service_queries (
        id TEXT PRIMARY KEY, analyst TEXT NOT NULL, kind TEXT NOT NULL,
        started DOUBLE PRECISION NOT NULL, finished DOUBLE PRECISION, request TEXT NOT NULL,
        epsilon DOUBLE PRECISION, delta DOUBLE PRECISION, status TEXT NOT NULL,
        result TEXT, error TEXT)""",
)


def _storable(value: Any) -> Any:
    """``value``, with a string SQLite cannot encode as UTF-8 escaped (``backslashreplace``);
    every other value as it is."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


@dataclass(eq=False)
class _Row:
    """A query-log write waiting for a transaction (see :meth:`ServiceState._settle`)."""

    owner: str  # the query's id
    stmt: str
    params: tuple[Any, ...]
    done: bool = False


class StateError(DPKitError):
    """The service's tables could not be read or written (e.g. the disk is full)."""


@dataclass(frozen=True)
class Token:
    """An issued token's public part (the token itself is never stored)."""

    name: str
    role: str  # "analyst" or "curator"
    token_hash: str
    epsilon: float | None
    delta: float | None
    revoked: bool


def new_token() -> str:
    """A fresh bearer token: 256 bits from dpkit's secure random source (the operating
    system's CSPRNG), as URL-safe text."""
    from dpkit.noise import resolve_source

    raw = resolve_source(None).bytes(32)
    return "dpk_" + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def hash_token(token: str) -> str:
    """The stored form of a token: hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class ServiceState:
    """Tokens and the query log in SQLite (``sqlite:///path``, ``memory://``) or PostgreSQL."""

    def __init__(self, url: str) -> None:
        from dpkit.errors import LedgerError
        from dpkit.ledger import parse_url

        self._lock = threading.Lock()
        self._lock_pid = os.getpid()
        self._shared_lock: Callable[[], threading.Lock] | None = None
        self._local = threading.local()
        self.url = url
        try:  # the ledger's own reading of the URL: one URL, one file, one name
            kind, target = parse_url(url)
        except LedgerError as exc:
            raise StateError(str(exc)) from exc
        self._kind = kind
        self._path = target if kind == "sqlite" else ""
        if kind == "memory":
            self._shared = sqlite3.connect(":memory:", check_same_thread=False)
        self._tokens: dict[str, Token] = {}
        self._tokens_read = 0.0
        # Query-log writes waiting for a transaction, in the order they were made; the
        # condition guards the list and ``_flushing`` (never held while writing).
        self._rows: list[_Row] = []
        self._rows_pid = os.getpid()
        self._rows_cond = threading.Condition(threading.Lock())
        self._flushing = False
        self._riding = False
        with self._tx() as cur:
            for stmt in _SCHEMA:
                cur.execute(stmt)

    # ------------------------------------------------------------------ connections
    def _connection(self) -> Any:
        """This thread's connection in this process (opened if needed; one inherited by
        ``fork`` from another process is set aside, never used nor closed)."""
        if self._kind == "memory":
            return self._shared
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid != os.getpid():
            from dpkit.ledger import abandon

            abandon(conn)
            conn = None
        if conn is None:
            if self._kind == "sqlite":
                conn = self._connect_sqlite()
            else:
                import psycopg

                conn = psycopg.connect(self.url, autocommit=True)
            self._local.conn = conn
            self._local.pid = os.getpid()
        return conn

    def _connect_sqlite(self) -> sqlite3.Connection:
        """A connection to the SQLite file, which must have one name (hard links and a single
        file mounted into the file system are refused, as for the ledger)."""
        from dpkit.errors import LedgerError
        from dpkit.ledger import check_sqlite_file

        try:
            check_sqlite_file(self._path)
            conn = sqlite3.connect(
                self._path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # see the module doc: Durability
            check_sqlite_file(self._path)
        except LedgerError as exc:
            raise StateError(str(exc)) from exc
        return conn

    def take_turns_with(self, ledger: Any) -> bool:
        """Write in turns with ``ledger`` when it is a SQLite ledger in the same file: this
        store's transactions then hold the ledger's :attr:`~dpkit.ledger.SqliteLedger.write_lock`
        instead of a lock of their own, so a query's log entry waits for a charge's commit on
        a lock that is handed over at once, not in SQLite's busy handler, which sleeps and
        retries (the cause of most of a request's waiting under many concurrent analysts).
        The query log's waiting rows then also ride with the ledger's appends
        (:meth:`~dpkit.ledger.SqliteLedger.add_rider`): a query's ``pending`` row, queued
        before its charge, is written in the charge's transaction. Returns whether the lock
        is shared (another file, PostgreSQL or memory: not)."""
        from dpkit.ledger import SqliteLedger

        if self._kind != "sqlite" or not isinstance(ledger, SqliteLedger):
            return False
        if ledger.path != self._path:
            return False
        self._shared_lock = lambda: ledger.write_lock  # read at each use: fork replaces it
        ledger.add_rider(self._ride)
        self._riding = True
        return True

    def _sql(self, stmt: str) -> str:
        return stmt.replace("?", "%s") if self._kind == "postgres" else stmt

    class _Tx:
        def __init__(self, state: ServiceState, locked: bool = False) -> None:
            self.state = state
            self.locked = locked  # the caller holds the writer lock already

        def __enter__(self) -> ServiceState._Tx:
            st = self.state
            self.lock = None if self.locked else st._writer_lock()
            if self.lock is not None:
                self.lock.acquire()
            self.conn = st._connection()
            try:
                if st._kind == "postgres":
                    self.tx = self.conn.transaction()
                    self.tx.__enter__()
                    self.cur = self.conn.cursor()
                else:
                    self.cur = self.conn.cursor()
                    self.cur.execute("BEGIN IMMEDIATE")
            except Exception as exc:
                if self.lock is not None:
                    self.lock.release()
                raise StateError(f"the service database is unavailable: {exc}") from None
            return self

        def execute(self, stmt: str, params: tuple[Any, ...] = ()) -> Any:
            self.cur.execute(self.state._sql(stmt), params)
            return self.cur

        def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
            st = self.state
            try:
                if st._kind == "postgres":
                    self.tx.__exit__(et, ev, tb)
                elif et is None:
                    self.cur.execute("COMMIT")
                else:
                    self.cur.execute("ROLLBACK")
            finally:
                if self.lock is not None:
                    self.lock.release()

    def _writer_lock(self) -> threading.Lock | None:
        """The lock that makes this process's transactions on the store take turns.

        An in-memory store has one shared connection. A SQLite file has a connection per
        thread, and SQLite's own write lock makes a second writer sleep and retry (in steps
        of 1 to 100 ms) until the first commits; taking turns on a lock in the process
        instead hands the file over as soon as it is free. Writers in other processes still
        wait through SQLite's lock. PostgreSQL needs none. A child process made by ``fork``
        gets a fresh lock (the parent's may have been held by a thread that does not exist
        in the child). Sharing a SQLite file with a ledger (:meth:`take_turns_with`), the
        ledger's lock is this lock.
        """
        if self._kind == "postgres":
            return None
        if self._shared_lock is not None:
            return self._shared_lock()
        if self._lock_pid != os.getpid():
            self._lock = threading.Lock()
            self._lock_pid = os.getpid()
        return self._lock

    def _tx(self, *, locked: bool = False) -> ServiceState._Tx:
        return ServiceState._Tx(self, locked)

    def _run(self, stmt: str, params: tuple[Any, ...] = (), *, fetch: bool = False) -> Any:
        try:
            with self._tx() as tx:
                cur = tx.execute(stmt, params)
                return cur.fetchall() if fetch else None
        except StateError:
            raise
        except Exception as exc:
            raise StateError(f"the service database refused the operation: {exc}") from None

    def close(self) -> None:
        from dpkit.ledger import close_owned

        conn = getattr(self._local, "conn", None)
        if conn is not None:
            close_owned(conn, self._local.pid)
            self._local.conn = None
        if self._kind == "memory":
            self._shared.close()

    # ------------------------------------------------------------------ tokens
    def add_token(
        self, name: str, *, role: str, epsilon: float | None = None, delta: float | None = None
    ) -> str:
        """Issue a token for ``name`` and return it (the only time it is shown)."""
        token = new_token()
        rows = self._run(
            "SELECT name FROM dpkit_service_tokens WHERE name = ?", (name,), fetch=True
        )
        if rows:
            raise StateError(
                f"{name!r} already has a token (names are never reused: their "
                "sub-budget stays in the ledger)"
            )
        self._run(
            "INSERT INTO dpkit_service_tokens (name, role, token_hash, epsilon, delta, "
            "created) VALUES (?, ?, ?, ?, ?, ?)",
            (name, role, hash_token(token), epsilon, delta, time.time()),
        )
        return token

    def revoke(self, name: str) -> bool:
        rows = self._run(
            "SELECT name FROM dpkit_service_tokens WHERE name = ?", (name,), fetch=True
        )
        self._run("UPDATE dpkit_service_tokens SET revoked = 1 WHERE name = ?", (name,))
        self._tokens_read = 0.0
        return bool(rows)

    def tokens(self) -> list[Token]:
        rows = self._run(
            "SELECT name, role, token_hash, epsilon, delta, revoked FROM "
            "dpkit_service_tokens ORDER BY created",
            fetch=True,
        )
        return [
            Token(
                name=r[0], role=r[1], token_hash=r[2], epsilon=r[3], delta=r[4], revoked=bool(r[5])
            )
            for r in rows
        ]

    def _reload_tokens(self) -> None:
        self._tokens = {t.token_hash: t for t in self.tokens()}
        self._tokens_read = time.monotonic()

    def authenticate(self, token: str | None) -> Token | None:
        """The live token matching ``token`` (constant-time comparison of hashes), or None.

        Tokens are re-read from the database at most once a second, so a token issued or
        revoked while the service runs takes effect within a second.
        """
        if not token:
            return None
        if time.monotonic() - self._tokens_read > 1.0:
            self._reload_tokens()
        presented = hash_token(token).encode()
        found: Token | None = None
        for h, t in self._tokens.items():
            if hmac.compare_digest(presented, h.encode()):
                found = t
        if found is None or found.revoked:
            return None
        return found

    def authenticate_hash(self, token_hash: str) -> Token | None:
        """The live token whose stored hash is ``token_hash`` (None if unknown or revoked);
        used to re-check a page session's token, with the same one-second refresh."""
        if time.monotonic() - self._tokens_read > 1.0:
            self._reload_tokens()
        found = self._tokens.get(token_hash)
        if found is None or found.revoked:
            return None
        return found

    # ------------------------------------------------------------------ query log
    def _condition(self) -> threading.Condition:
        """The condition guarding the waiting rows of this process: a child of ``fork`` gets a
        fresh one and no rows (the parent's belong to requests of the parent's threads)."""
        if self._rows_pid != os.getpid():
            self._rows, self._rows_pid = [], os.getpid()
            self._rows_cond = threading.Condition(threading.Lock())
            self._flushing = False
        return self._rows_cond

    def _enqueue(self, row: _Row) -> None:
        # Text SQLite cannot store (a lone surrogate, say, in an error message) is written
        # escaped: a row that can never be bound would otherwise fail every transaction it
        # rides in, other analysts' charges included, until its own writer drops it.
        row.params = tuple(_storable(v) for v in row.params)
        with self._condition():
            self._rows.append(row)

    def _take(self) -> list[_Row]:
        with self._condition():
            batch, self._rows = self._rows, []
            return batch

    def _settled(self, batch: list[_Row], committed: bool, failed: str | None = None) -> None:
        """After a transaction that wrote ``batch``: committed, the rows are done; else they go
        back to the front of the queue in their order (but those of the query ``failed``,
        whose writer reports the failure), for their writers to try again."""
        cond = self._condition()
        with cond:
            if committed:
                for row in batch:
                    row.done = True
            else:
                self._rows = [r for r in batch if r.owner != failed] + self._rows
            cond.notify_all()

    def _ride(self, conn: sqlite3.Connection) -> Callable[[bool], None]:
        """The ledger's rider (:meth:`take_turns_with`): the waiting rows are written in the
        transaction of a charge, by its commit and disk sync."""
        batch = self._take()
        try:
            for row in batch:
                conn.execute(row.stmt, row.params)
        except BaseException:
            self._settled(batch, False)
            raise
        return lambda committed: self._settled(batch, committed)

    def _settle(self, row: _Row) -> None:
        """Return once ``row`` is committed, else raise :class:`StateError`.

        Group commit: whichever writer finds no other one writing takes every row waiting,
        in order, and writes them in one transaction; the others wait (without the store's
        lock) and find their row done, or take their turn. A charge of a ledger sharing the
        file writes the rows waiting at its commit too (:meth:`_ride`). A transaction that
        fails puts the other writers' rows back, in order, and reports to its own writer."""
        cond = self._condition()
        while True:
            with cond:
                while not row.done and self._flushing:
                    cond.wait()
                if row.done:
                    return
                self._flushing = True
            try:
                self._flush(row.owner)
            finally:
                with cond:
                    self._flushing = False
                    cond.notify_all()

    def _flush(self, owner: str) -> None:
        """Write every waiting row in one transaction (see :meth:`_settle`)."""
        lock = self._writer_lock()
        if lock is not None:
            lock.acquire()
        try:
            batch = self._take()
            if not batch:  # written meanwhile (by a charge's transaction)
                return
            try:
                with self._tx(locked=True) as tx:
                    for r in batch:
                        tx.execute(r.stmt, r.params)
            except Exception as exc:
                self._settled(batch, False, failed=owner)
                if isinstance(exc, StateError):
                    raise
                raise StateError(f"the service database refused the operation: {exc}") from None
            except BaseException:
                self._settled(batch, False)
                raise
            self._settled(batch, True)
        finally:
            if lock is not None:
                lock.release()

    def log_pending(
        self,
        query_id: str,
        analyst: str,
        kind: str,
        request: Any,
        epsilon: float | None,
        delta: float | None,
        *,
        request_text: str | None = None,
    ) -> None:
        """Log a query as pending, before its charge; ``request_text``, when given, is
        ``request`` already encoded as JSON (a caller that logs the same request often encodes
        it once).

        Sharing its SQLite file with the ledger (:meth:`take_turns_with`), the row is written
        in the transaction of the query's charge (or, if no charge comes, with the query's end,
        :meth:`log_done`): the charge is never on disk without it, and a store that cannot be
        written refuses the charge. Otherwise it is written now."""
        row = _Row(
            query_id,
            # a row already written by a commit that reported failure is not written again
            "INSERT INTO dpkit_service_queries (id, analyst, kind, started, request, "
            "epsilon, delta, status) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending') "
            "ON CONFLICT (id) DO NOTHING",
            (
                query_id,
                analyst,
                kind,
                time.time(),
                json.dumps(request, sort_keys=True) if request_text is None else request_text,
                epsilon,
                delta,
            ),
        )
        self._enqueue(row)
        if not self._riding:
            self._settle(row)

    def log_done(
        self,
        query_id: str,
        status: str,
        *,
        result: Any = None,
        error: str | None = None,
        result_text: str | None = None,
    ) -> None:
        """Record how a query ended; ``result_text``, when given, is the result already
        encoded as JSON (instead of ``result``)."""
        if result_text is None and result is not None:
            result_text = json.dumps(result)
        row = _Row(
            query_id,
            "UPDATE dpkit_service_queries SET status = ?, finished = ?, result = ?, "
            "error = ? WHERE id = ?",
            (status, time.time(), result_text, error, query_id),
        )
        self._enqueue(row)
        self._settle(row)

    def queries(self, analyst: str | None = None, *, limit: int = 1000) -> list[dict[str, Any]]:
        """Logged queries, newest first; only ``analyst``'s when given."""
        cols = (
            "id",
            "analyst",
            "kind",
            "started",
            "finished",
            "request",
            "epsilon",
            "delta",
            "status",
            "result",
            "error",
        )
        sel = f"SELECT {', '.join(cols)} FROM dpkit_service_queries"
        if analyst is None:
            rows = self._run(sel + " ORDER BY started DESC LIMIT ?", (limit,), fetch=True)
        else:
            rows = self._run(
                sel + " WHERE analyst = ? ORDER BY started DESC LIMIT ?",
                (analyst, limit),
                fetch=True,
            )
        out = []
        for r in rows:
            d = dict(zip(cols, r, strict=True))
            d["request"] = json.loads(d["request"])
            d["result"] = None if d["result"] is None else json.loads(d["result"])
            out.append(d)
        return out
