"""A ledger in an SQLite file (see :class:`SqliteLedger`)."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from dpkit.accounting.ledger import LedgerRecord, check_budget_name, check_record, check_run
from dpkit.errors import LedgerError
from dpkit.ledger import _fork

__all__ = ["Rider", "SqliteLedger", "check_sqlite_file", "resolve_sqlite_path"]

_T = TypeVar("_T")

#: A writer of other tables in the ledger's file that adds its rows to the store's append
#: transactions (see :meth:`SqliteLedger.add_rider`): called with the connection inside the
#: transaction, it returns the function told whether that transaction committed.
Rider = Callable[[sqlite3.Connection], Callable[[bool], None]]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS dpkit_budgets ("
    " name TEXT PRIMARY KEY, definition TEXT NOT NULL, last_seq INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dpkit_ledger ("
    " budget TEXT NOT NULL, seq INTEGER NOT NULL, time REAL NOT NULL, kind TEXT NOT NULL,"
    " analyst TEXT, payload TEXT NOT NULL, PRIMARY KEY (budget, seq)) WITHOUT ROWID",
)


def _mount_points() -> frozenset[str] | None:
    """The mount points of this process's mount namespace (``/proc/self/mountinfo``, field 5,
    octal escapes decoded), or None where that file is not readable (not Linux)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    points = set()
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return frozenset(points)


def check_sqlite_file(path: str, *, mounts: bool = True) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of the SQLite database file ``path`` (None if it does not exist
    yet), after checking that the file has one name only; else raise
    :class:`~dpkit.errors.LedgerError`.

    SQLite keeps a database's write-ahead log (``-wal``), shared-memory index (``-shm``, which
    carries the WAL locks) and rollback journal beside the *name* it was opened with (symbolic
    links resolved). Two processes reaching one file under two names therefore lock and log
    separately: each commits to its own log, neither sees the other's charges, and a charge can
    be lost when the logs are checkpointed. No lock dpkit could add would make the two logs
    agree, so such a file is refused:

    * ``st_nlink > 1``: the file has hard links (another directory entry names it);
    * the file is a mount point: a single file bind-mounted into this file system (as a
      container does with ``-v host.db:/data/ledger.db``); seen as a device that differs from
      its directory's, or as a mount point in ``/proc/self/mountinfo`` (``mounts=True``).

    Symbolic links, and a *directory* mounted in several places, are safe: the sibling files
    are the same files whichever path is used.
    """
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LedgerError(f"cannot read the ledger file {path!r}: {exc}") from exc
    if st.st_nlink > 1:
        raise LedgerError(
            f"the SQLite ledger file {real!r} has {st.st_nlink} names (hard links); reach the "
            "database through one path and remove the other links. SQLite keeps its "
            "write-ahead log and locks beside each name, so processes using different names "
            "would not see each other's charges"
        )
    parent = os.stat(os.path.dirname(real))
    points = _mount_points() if mounts else None
    if st.st_dev != parent.st_dev or (points is not None and real in points):
        raise LedgerError(
            f"the SQLite ledger file {real!r} is a mount point (a single file mounted into this "
            "file system); mount the directory that holds it instead, and reach the database "
            "through that directory in every process. SQLite keeps its write-ahead log and locks "
            "beside the file's name, so processes outside this mount would not see this one's "
            "charges"
        )
    return st.st_dev, st.st_ino


def resolve_sqlite_path(path: str) -> str:
    """The one path of the SQLite file ``path``, as the operating system resolves it:
    ``os.path.realpath`` (relative to the working directory now; every symbolic link followed,
    and ``..`` applied *after* the link it follows, so ``x/link/../ledger.db`` with
    ``x/link -> y/sub`` is ``y/ledger.db``; repeated and trailing ``/`` dropped). A lexical
    ``abspath`` would drop ``link/..`` as text and name another file than every other process.

    A path that reaches no file of its own through ``/proc`` or ``/dev/fd`` (a pipe, a socket,
    a deleted file's descriptor) raises :class:`~dpkit.errors.LedgerError`; a descriptor of an
    existing file (``/proc/self/fd/3``) is that file's path."""
    real = os.path.realpath(path)
    lexical = os.path.abspath(path)
    magic = ("/proc/", "/dev/fd/", "/dev/std")
    if real.startswith(magic) or (
        not os.path.lexists(real) and (lexical.startswith(magic) or real.endswith(" (deleted)"))
    ):
        raise LedgerError(
            f"the SQLite ledger path {path!r} resolves to {real!r}, which is not a file path "
            "another process could reach; give the database file's own path"
        )
    return real


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

    ``path`` is resolved once, when the store is made (:func:`resolve_sqlite_path`: relative
    to the working directory at that moment, symbolic links followed, ``..`` applied as the
    operating system does), and :attr:`path`, that resolved path, is used from then on for
    opening, for the one-name checks and (by SQLite) for the ``-wal``/``-shm`` files beside it.

    Any exception between ``BEGIN`` and ``COMMIT`` (an SQLite failure such as a full disk, a
    lock timeout or a damaged file, but also ``KeyboardInterrupt`` or a signal handler's
    exception) rolls the transaction back before it propagates, so the file is never left
    locked; SQLite failures are raised as :class:`~dpkit.errors.LedgerError` (nothing was
    written), other exceptions as they are.

    One file, one name: every process must reach the database through the same directory
    (symbolic links are fine). A file with hard links, or a single file mounted into the file
    system (mount its directory instead), is refused with :class:`~dpkit.errors.LedgerError`
    when the store connects and again inside every write transaction, as is a file that was
    replaced or renamed since it was opened (see :func:`check_sqlite_file`).

    Processes: the connection belongs to the process that opened it. The store closes it just
    before ``os.fork`` and opens a new one lazily in the parent and in the child; a copy of the
    store in another process (however it got there) never uses nor closes a connection it did
    not open itself, and opens its own.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        raw = os.fspath(path)
        if not isinstance(raw, str) or not raw or raw == ":memory:" or "\x00" in raw:
            raise LedgerError("SqliteLedger needs a file path (MemoryLedger keeps no file)")
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not (0 < timeout < 1e6)
        ):
            raise LedgerError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._path = resolve_sqlite_path(raw)
        self._timeout = float(timeout)
        self._lock = threading.Lock()
        self._closed = False
        self._fork_held = False
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()  # the process that opened self._conn
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the file connected to
        self._riders: list[Rider] = []
        self._run(self._setup)
        _fork.track(self)

    def _connect(self) -> sqlite3.Connection:
        """A new connection of this process, set up (lock held); the file is checked to have one
        name before it is opened (if it exists) and after."""
        check_sqlite_file(self._path)
        try:
            conn = sqlite3.connect(
                self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open the ledger file {self._path!r}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000):d}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            self._ident = check_sqlite_file(self._path)
        except BaseException:
            conn.close()
            raise
        return conn

    def _begin_write(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, then check that the path still names the file connected to,
        under one name (see :func:`check_sqlite_file`); the caller rolls back if this raises."""
        conn.execute("BEGIN IMMEDIATE")
        if check_sqlite_file(self._path, mounts=False) != self._ident:
            raise LedgerError(
                f"the SQLite ledger file {self._path!r} was removed, renamed or replaced since "
                "it was opened; nothing was written. Reopen the ledger, and reach the database "
                "through one path in every process"
            )

    def _connection(self) -> sqlite3.Connection:
        """This process's connection, opened if needed (lock held)."""
        if self._closed:
            raise LedgerError(f"the SQLite ledger {self._path!r} is closed")
        if self._conn is not None and self._pid != os.getpid():
            _fork.abandon(self._conn)  # the parent's: never used, never closed here
            self._conn = None
        if self._conn is None:
            self._conn = self._connect()
            self._pid = os.getpid()
        return self._conn

    def _setup(self, conn: sqlite3.Connection) -> None:
        self._begin_write(conn)
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute("COMMIT")

    def _run(self, action: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``action`` on this process's connection under the lock. On ANY exception an
        open transaction is rolled back first; SQLite failures become LedgerError."""
        with self._lock:
            conn: sqlite3.Connection | None = None
            try:
                conn = self._connection()
                return action(conn)
            except BaseException as exc:
                if conn is not None:
                    self._abort(conn)
                if isinstance(exc, sqlite3.Error):
                    raise LedgerError(
                        f"the SQLite ledger {self._path!r} failed ({exc}); nothing was written"
                    ) from exc
                raise

    def _abort(self, conn: sqlite3.Connection) -> None:
        """Roll back ``conn``'s open transaction; if even that fails, close the connection
        (SQLite rolls back what was not committed) and open a new one on the next call."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return
        except BaseException:
            self._conn = None
            with contextlib.suppress(Exception):
                conn.close()
            raise

    # ------------------------------------------------------------------ fork (see _fork)
    def _before_fork(self) -> None:
        # Wait for a call in another thread to finish (up to the busy timeout), then close the
        # connection: the child must inherit none of SQLite's state for this file.
        self._fork_held = self._lock.acquire(timeout=self._timeout + 1.0)
        if self._fork_held and self._conn is not None and self._pid == os.getpid():
            conn, self._conn = self._conn, None
            with contextlib.suppress(Exception):
                conn.close()

    def _after_fork_parent(self) -> None:
        if self._fork_held:
            self._fork_held = False
            self._lock.release()

    def _after_fork_child(self) -> None:
        self._fork_held = False
        self._lock = threading.Lock()
        if self._conn is not None:  # still open (another thread held it past the timeout)
            _fork.abandon(self._conn)
            self._conn = None

    @property
    def path(self) -> str:
        """The ledger file."""
        return self._path

    @property
    def write_lock(self) -> threading.Lock:
        """The lock every call of this store holds in this process (its transactions, their
        commit and disk sync included; a new one after ``fork``).

        Another writer of the same file in this process (the service's own tables, say) may
        hold it around its transactions too: the writers then take turns on this lock, and the
        next one starts as soon as the file is free, instead of finding SQLite's write lock
        taken and sleeping in SQLite's busy handler (1, 2, 5, 10, ... ms) before it retries.
        Read it at each use (never keep it): ``fork`` replaces it in the child."""
        return self._lock

    def add_rider(self, rider: Rider) -> None:
        """Have ``rider`` add rows of its own tables (in this file) to every append transaction
        of this store in this process, so that they are committed together with the records,
        by the same ``COMMIT`` and disk sync, or not at all.

        ``rider(conn)`` is called with the write lock held, inside the transaction, after the
        records are inserted and before ``COMMIT``; it writes through ``conn`` and returns a
        function ``settle(committed)``, called once the transaction has committed (``True``) or
        rolled back (``False``). An exception from ``rider`` rolls the whole transaction back:
        the records are not written either (their append raises
        :class:`~dpkit.errors.LedgerError` if it is an SQLite failure). A conflict that rolls
        the transaction back before the records are inserted does not call it."""
        self._riders.append(rider)

    def _commit_with_riders(self, conn: sqlite3.Connection) -> None:
        """Let the riders write (see :meth:`add_rider`), then ``COMMIT``; each rider that wrote
        is told whether the transaction committed."""
        settles: list[Callable[[bool], None]] = []
        try:
            for rider in self._riders:
                settles.append(rider(conn))
            conn.execute("COMMIT")
        except BaseException:
            for settle in settles:
                settle(False)
            raise
        for settle in settles:
            settle(True)

    def define(self, name: str, definition: str) -> str:
        check_budget_name(name)

        def act(conn: sqlite3.Connection) -> str:
            self._begin_write(conn)
            conn.execute(
                "INSERT OR IGNORE INTO dpkit_budgets (name, definition, last_seq) VALUES (?, ?, 0)",
                (name, definition),
            )
            row = conn.execute(
                "SELECT definition FROM dpkit_budgets WHERE name = ?", (name,)
            ).fetchone()
            conn.execute("COMMIT")
            return str(row[0])

        return self._run(act)

    def definition(self, name: str) -> str | None:
        def act(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT definition FROM dpkit_budgets WHERE name = ?", (name,)
            ).fetchone()
            return None if row is None else str(row[0])

        return self._run(act)

    def read(self, name: str, after: int = 0) -> list[LedgerRecord]:
        def act(conn: sqlite3.Connection) -> list[LedgerRecord]:
            rows = conn.execute(
                "SELECT seq, time, kind, analyst, payload FROM dpkit_ledger "
                "WHERE budget = ? AND seq > ? ORDER BY seq",
                (name, after),
            ).fetchall()
            return [
                LedgerRecord(seq=r[0], time=float(r[1]), kind=r[2], analyst=r[3], payload=r[4])
                for r in rows
            ]

        return self._run(act)

    def append(self, name: str, record: LedgerRecord) -> bool:
        check_record(record)
        return self.append_many(name, [record])

    def append_many(self, name: str, records: Sequence[LedgerRecord]) -> bool:
        """Compare-and-append of a run of records in one ``BEGIN IMMEDIATE`` transaction: one
        commit (one disk sync) for all of them, or nothing written."""
        check_run(records)
        first, last = records[0].seq, records[-1].seq

        def act(conn: sqlite3.Connection) -> bool:
            self._begin_write(conn)
            moved = conn.execute(
                "UPDATE dpkit_budgets SET last_seq = ? WHERE name = ? AND last_seq = ?",
                (last, name, first - 1),
            ).rowcount
            if moved != 1:
                known = conn.execute(
                    "SELECT 1 FROM dpkit_budgets WHERE name = ?", (name,)
                ).fetchone()
                conn.execute("ROLLBACK")
                if known is None:
                    raise LedgerError(f"no budget named {name!r} in this ledger")
                return False
            conn.executemany(
                "INSERT INTO dpkit_ledger (budget, seq, time, kind, analyst, payload) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(name, r.seq, r.time, r.kind, r.analyst, r.payload) for r in records],
            )
            self._commit_with_riders(conn)
            return True

        return self._run(act)

    def names(self) -> list[str]:
        def act(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT name FROM dpkit_budgets ORDER BY name")
            return [str(r[0]) for r in rows]

        return self._run(act)

    def close(self) -> None:
        """Close this process's connection; later calls raise LedgerError. In a process that
        did not open the connection (a child of ``fork``), the copy is set aside unclosed."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                _fork.close_owned(conn, self._pid)

    def __repr__(self) -> str:
        return f"SqliteLedger({self._path!r})"
