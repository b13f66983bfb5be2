"""The service's own tables: analysts' tokens (hashed) and the log of queries.

They live in the same database as the privacy ledger (SQLite file or PostgreSQL), in tables
named ``dpkit_service_*``. A token is 256 random bits (dpkit's secure random source), shown
once when it is issued; only its SHA-256 is stored, and a presented token is compared with
every stored hash by :func:`hmac.compare_digest` (constant time per comparison).

A query is logged as ``pending`` *before* its charge and updated when it is answered, refused or
failed: a full disk refuses the query before anything is spent, and a crash after the charge
leaves a pending row beside the charge in the ledger.

The URL is read by the ledger layer's rules (:func:`dpkit.ledger.parse_url`: one spelling, one
file), and connections follow its fork rules: each thread of a process opens its own, and one
inherited from another process by ``fork`` is set aside, never used nor closed
(:func:`dpkit.ledger.abandon`).

Durability: SQLite commits of these tables are written to the write-ahead log without waiting
for the disk (``synchronous=NORMAL``): a commit survives the process being killed, and the
ledger's own commit of a charge (``synchronous=FULL``, in the same file unless ``state_url``
names another) flushes the log up to it, so a query's ``pending`` row is on disk whenever its
charge is. A power cut can lose an ``answered`` status written after the last charge: the row
then reads ``pending`` beside its charge, the conservative reading of any crash.
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
        Returns whether the lock is shared (another file, PostgreSQL or memory: not)."""
        from dpkit.ledger import SqliteLedger

        if self._kind != "sqlite" or not isinstance(ledger, SqliteLedger):
            return False
        if ledger.path != self._path:
            return False
        self._shared_lock = lambda: ledger.write_lock  # read at each use: fork replaces it
        return True

    def _sql(self, stmt: str) -> str:
        return stmt.replace("?", "%s") if self._kind == "postgres" else stmt

    class _Tx:
        def __init__(self, state: ServiceState) -> None:
            self.state = state

        def __enter__(self) -> ServiceState._Tx:
            st = self.state
            self.lock = st._writer_lock()
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

    def _tx(self) -> ServiceState._Tx:
        return ServiceState._Tx(self)

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
        """Log a query as pending; ``request_text``, when given, is ``request`` already
        encoded as JSON (a caller that logs the same request often encodes it once)."""
        self._run(
            "INSERT INTO dpkit_service_queries (id, analyst, kind, started, request, "
            "epsilon, delta, status) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending')",
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
        self._run(
            "UPDATE dpkit_service_queries SET status = ?, finished = ?, result = ?, "
            "error = ? WHERE id = ?",
            (status, time.time(), result_text, error, query_id),
        )

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
