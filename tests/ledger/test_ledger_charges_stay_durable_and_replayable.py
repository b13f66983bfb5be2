"""Regression tests from an attack on the durable ledgers (each failed on the code it was
written against; see tools/reproducers/ for the longer reproducers).

Each test states the promise it checks: a charge that returned is durable, a charge that was
accepted can be replayed, a store URL names one store, a store failure never leaves the store
locked or the budget spinning, and replay does not silently accept an edited record.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dpkit.accounting import Budget, LedgerRecord, MemoryLedger
from dpkit.errors import BudgetExceededError, LedgerError
from dpkit.events import PureDpEvent, SelfComposedEvent
from dpkit.ledger import PostgresLedger, SqliteLedger, open_ledger


# ------------------------------------------------------------------ fork and inherited stores
def test_a_charge_through_an_inherited_sqlite_store_is_never_lost(tmp_path: Path) -> None:
    """A child that reuses the parent's SqliteLedger object (``Budget.open(budget.store)``)
    after the parent closed it wrote into a WAL file the parent had already checkpointed and
    deleted: ``charge`` returned (the child released) and the record vanished, so a fresh
    reader could spend the same privacy again. The store must refuse in the child instead."""
    path = tmp_path / "fork.db"
    store = SqliteLedger(path)
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    budget.charge(epsilon=0.5)
    go_r, go_w = os.pipe()

    def child() -> int:
        os.close(go_w)
        os.read(go_r, 1)  # the parent has closed its handle
        try:
            Budget.open(store, "people").charge(epsilon=0.5)
        except BudgetExceededError:  # refused (LedgerError / BudgetUnavailableError): safe
            return 0
        return 1  # charge returned: the child releases

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 255
        try:
            os.close(read)
            code = child()
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    os.close(go_r)
    store.close()
    os.write(go_w, b"x")
    released = os.read(read, 1)[0]
    os.waitpid(pid, 0)
    assert released in (0, 1)
    fresh = Budget.open(SqliteLedger(path), "people")
    if released:  # the child's charge returned: it must be in the ledger
        assert fresh.spent == (1.0, 0.0), "a charge that returned is missing from the ledger"
    with pytest.raises(BudgetExceededError):
        fresh.charge(epsilon=0.5) if released else fresh.charge(epsilon=0.75)


def test_an_inherited_postgres_store_reconnects_in_the_child(postgres_dsn: str) -> None:
    """The child's copy of a PostgresLedger shared one server session (one socket) with the
    parent; used by both at once, replies reached the wrong process and calls hung
    (tools/reproducers/pg_fork_shared_connection.py). The copy must never use the parent's
    connection in the child (nor close it): it opens its own.

    (Adjusted from "the copy must refuse in the child": the store now reconnects lazily in the
    child, so the child's charges succeed on their own session while the parent keeps
    charging on its session; the total counts both.)"""
    store = PostgresLedger(postgres_dsn)
    budget = Budget(epsilon=1.0, ledger=store, name="fork-pg")
    parent_conn = store._conn
    step = 2.0**-6

    def child() -> int:
        mine = Budget.open(store, "fork-pg")
        for _ in range(20):
            mine.charge(epsilon=step)
        return 1 if store._conn is not parent_conn else 2

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 255
        try:
            os.close(read)
            code = child()
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    for _ in range(20):  # at the same time, on the parent's own session
        budget.charge(epsilon=step)
    result = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert result == bytes([1])  # the child charged 20 times through a connection of its own
    assert store._conn is parent_conn and not parent_conn.closed  # the parent's session lives
    budget.refresh()
    assert budget.spent == (40 * step, 0.0)
    assert len(Budget.open(PostgresLedger(postgres_dsn), "fork-pg").history()) == 40
    store.close()


# ------------------------------------------------------------------ records replay cannot read
def test_an_accepted_charge_can_always_be_replayed(tmp_path: Path) -> None:
    """``charge`` accepted (and wrote) an event nested 101 levels deep, which the replay refuses
    (MAX_EVENT_DEPTH = 100): every later open of the budget, and every live writer's next read,
    raised LedgerError for good. A record must be checked for replay before it is written."""
    path = tmp_path / "deep.db"
    budget = Budget(epsilon=1.0, ledger=SqliteLedger(path), name="shared")
    event: Any = PureDpEvent(epsilon=0.01)
    for _ in range(101):
        event = SelfComposedEvent(event=event, count=1)
    with contextlib.suppress(BudgetExceededError, ValueError, TypeError):
        budget.charge(event)  # refused before writing would be fine
    fresh = Budget.open(SqliteLedger(path), "shared")  # must not raise
    fresh.charge(epsilon=0.5)


# ------------------------------------------------------------------ URLs
def test_a_sqlite_url_with_a_query_names_no_other_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sqlite:///b.db?mode=rwc`` opened the file literally named ``b.db?mode=rwc``: two
    services configured with and without the query each spent the whole budget."""
    monkeypatch.chdir(tmp_path)
    spent = 0
    for url in ("sqlite:///b.db?mode=rwc", "sqlite:///b.db", "sqlite:///b.db#frag"):
        try:
            Budget(epsilon=1.0, ledger=open_ledger(url), name="people").charge(epsilon=1.0)
        except (LedgerError, BudgetExceededError):
            continue
        spent += 1
    assert spent <= 1


def test_memory_urls_in_one_process_share_one_store() -> None:
    """Every ``open_ledger("memory://")`` made a new empty store: code that opens its ledger
    from a configured URL per request got a fresh budget each time (3 x the budget below);
    the same code with ``sqlite:///`` refuses the second charge."""
    spent = 0
    for _ in range(3):
        try:
            Budget(epsilon=1.0, ledger=open_ledger("memory://"), name="people").charge(epsilon=1.0)
        except (LedgerError, BudgetExceededError):
            continue
        spent += 1
    assert spent <= 1


# ------------------------------------------------------------------ store failures
class _InterruptAtCommit:
    """Stands in for the sqlite3 connection; raises KeyboardInterrupt (Ctrl-C, or a signal
    handler's exception) at the first COMMIT, as it would arrive between two statements."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.armed = True

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and self.armed:
            self.armed = False
            raise KeyboardInterrupt
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_an_interrupted_sqlite_append_leaves_no_open_transaction(tmp_path: Path) -> None:
    """An exception other than sqlite3.Error between BEGIN IMMEDIATE and COMMIT left the
    transaction open: every other writer on the host waited its busy timeout and failed, and
    the interrupted budget read its own uncommitted record (then spun 100000 attempts)."""
    path = tmp_path / "int.db"
    store = SqliteLedger(path)
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    budget.charge(epsilon=0.25)
    store._conn = _InterruptAtCommit(store._conn)  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        budget.charge(epsilon=0.25)
    assert not store._conn.in_transaction
    Budget.open(SqliteLedger(path, timeout=1.0), "people").charge(epsilon=0.25)
    budget.charge(epsilon=0.25)
    assert budget.spent == (0.75, 0.0)


class _ConflictWithoutRecords(MemoryLedger):
    """A damaged store: it refuses every append as a conflict yet shows no newer record (a
    SQLite file whose last record was deleted while ``last_seq`` stayed)."""

    def __init__(self) -> None:
        super().__init__()
        self.appends = 0

    def append(self, name: str, record: LedgerRecord) -> bool:
        self.appends += 1
        if self.appends > 1000:
            raise LedgerError("the attack test stops the spin")
        return False


def test_a_conflict_without_new_records_fails_at_once() -> None:
    """The budget retried up to 100000 times (18 s on SQLite) when the store reported a
    conflict but had no newer record: a lost conflict always shows another writer's record."""
    store = _ConflictWithoutRecords()
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    with pytest.raises(LedgerError):
        budget.charge(epsilon=0.25)
    assert store.appends <= 3


# ------------------------------------------------------------------ replay of edited records
def test_replay_refuses_records_that_disagree_with_their_spent_after(tmp_path: Path) -> None:
    """Each record stores the total spent after it; the replay ignored it, so editing record 1
    from epsilon 0.5 to 0 went unnoticed although record 2 says 1.0 was spent, and 0.5 more
    was granted. The replay must refuse (or count at least what the records say)."""
    path = tmp_path / "edit.db"
    budget = Budget(epsilon=1.0, ledger=SqliteLedger(path), name="people")
    budget.charge(epsilon=0.5)
    budget.charge(epsilon=0.5)
    db = sqlite3.connect(path)
    body = json.loads(db.execute("SELECT payload FROM dpkit_ledger WHERE seq = 1").fetchone()[0])
    body["event"]["epsilon"] = 0.0
    db.execute("UPDATE dpkit_ledger SET payload = ? WHERE seq = 1", (json.dumps(body),))
    db.commit()
    db.close()
    try:
        fresh = Budget.open(SqliteLedger(path), "people")
    except LedgerError:
        return
    with pytest.raises(BudgetExceededError):
        fresh.charge(epsilon=0.5)


# ------------------------------------------------------------------ reserve without ``with``
def test_reserve_charges_when_called() -> None:
    """``budget.reserve(epsilon=1.0)`` without ``with`` charged nothing (a generator-based
    context manager runs nothing until entered), so code that reads ``reserve`` as a verb
    released with nothing charged. The charge must happen (or be refused) at the call."""
    budget = Budget(epsilon=1.0)
    budget.reserve(epsilon=1.0)  # the caller would release now
    assert budget.spent == (1.0, 0.0)
