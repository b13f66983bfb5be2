"""The ledger's answers to the attack in test_ledger_charges_stay_durable_and_replayable.py,
checked beyond its reproducers:
URL forms, in-memory stores across fork, connections across fork, interrupted appends on
PostgreSQL, conflicts that resolve, records checked before they are written, and the replay's
check of the stored ``spent_after``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fork import in_child

from dpkit.accounting import Budget, LedgerRecord, MemoryLedger
from dpkit.errors import LedgerError, UnsupportedEventError
from dpkit.events import PureDpEvent, SelfComposedEvent
from dpkit.ledger import PostgresLedger, SqliteLedger, open_ledger

STEP = 2.0**-6  # dyadic: sums are exact


# ------------------------------------------------------------------ URLs
def test_memory_urls_name_one_store_each() -> None:
    assert open_ledger("memory://") is open_ledger("memory://")
    one, two = open_ledger("memory://hardening-a"), open_ledger("memory://hardening-b")
    assert one is open_ledger("memory://hardening-a") and one is not two
    assert one is not open_ledger("memory://")
    Budget(epsilon=1.0, ledger=one, name="people").charge(epsilon=1.0)
    Budget(epsilon=1.0, ledger=two, name="people").charge(epsilon=1.0)  # another store
    assert Budget.open(open_ledger("memory://hardening-a"), "people").spent == (1.0, 0.0)
    for bad in ("memory://a/b", "memory://a?x", "memory://a#x", "memory://a%20", "memory://\n"):
        with pytest.raises(LedgerError):
            open_ledger(bad)


def test_ambiguous_sqlite_urls_are_refused_and_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for bad in (
        "sqlite:///b.db?mode=rwc",
        "sqlite:///b.db#x",
        "sqlite:///b%2Edb",
        "sqlite:///~/b.db",
        "sqlite:///dir/",
        "sqlite:///a\\b.db",
        "sqlite:///file:b.db",
        "sqlite:///b\x01.db",
        "sqlite:///b.db ",
    ):
        with pytest.raises(LedgerError):
            open_ledger(bad)
    assert list(tmp_path.iterdir()) == []


def test_a_relative_sqlite_url_keeps_naming_its_file_after_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(here)
    store = open_ledger("sqlite:///rel.db")
    assert isinstance(store, SqliteLedger) and store.path == str(here / "rel.db")
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    monkeypatch.chdir(elsewhere)
    assert in_child(lambda: 0) == 0  # a fork closes the parent's connection ...
    assert store._conn is None
    budget.charge(epsilon=0.5)  # ... which reopens the resolved path, not ./rel.db
    assert list(elsewhere.iterdir()) == []
    assert Budget.open(SqliteLedger(here / "rel.db"), "people").spent == (0.5, 0.0)


# ------------------------------------------------------------------ fork
def test_a_forked_copy_of_a_memory_ledger_reads_but_never_charges() -> None:
    store = MemoryLedger()
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    budget.charge(epsilon=0.25)

    def child() -> int:
        copy = Budget.open(store, "people")  # reading the copy is fine
        if copy.spent != (0.25, 0.0) or len(copy.history()) != 1:
            return 3
        try:
            copy.charge(epsilon=0.25)
        except LedgerError:
            pass
        else:
            return 4  # the parent can still spend the same 0.75
        try:
            Budget(epsilon=1.0, ledger=store, name="new")
        except LedgerError:
            return 0
        return 5

    assert in_child(child) == 0
    budget.charge(epsilon=0.75)
    assert budget.spent == (1.0, 0.0)


def test_parent_and_child_charge_one_sqlite_store_object_at_once(tmp_path: Path) -> None:
    store = SqliteLedger(tmp_path / "both.db")
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 255
        try:
            os.close(read)
            mine = Budget.open(store, "people")  # the inherited store object
            for _ in range(20):
                mine.charge(epsilon=STEP)
            code = 0
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    for _ in range(20):
        budget.charge(epsilon=STEP)
    assert os.read(read, 1) == bytes([0])
    os.close(read)
    os.waitpid(pid, 0)
    store.close()
    fresh = Budget.open(SqliteLedger(tmp_path / "both.db"), "people")
    assert fresh.spent == (40 * STEP, 0.0) and len(fresh.history()) == 40


# ------------------------------------------------------------------ interrupted appends
class _InterruptAtInsert:
    """Stands in for the psycopg connection; raises KeyboardInterrupt at the first INSERT of a
    record (inside the transaction)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.armed = True

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("INSERT INTO dpkit_ledger") and self.armed:
            self.armed = False
            raise KeyboardInterrupt
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_an_interrupted_postgres_append_rolls_back_and_reconnects(postgres_dsn: str) -> None:
    store = PostgresLedger(postgres_dsn)
    budget = Budget(epsilon=1.0, ledger=store, name="interrupt-pg")
    budget.charge(epsilon=0.25)
    real = store._conn
    store._conn = _InterruptAtInsert(real)
    with pytest.raises(KeyboardInterrupt):
        budget.charge(epsilon=0.25)
    assert budget.spent == (0.25, 0.0)  # the state did not move ahead of the store
    assert real.closed and store._conn is None  # the session was dropped: the server rolled back
    other = Budget.open(PostgresLedger(postgres_dsn), "interrupt-pg")  # not blocked
    other.charge(epsilon=0.25)
    budget.charge(epsilon=0.25)  # reconnects
    assert budget.spent == (0.75, 0.0) and len(budget.history()) == 3
    store.close()


# ------------------------------------------------------------------ conflicts
class _Contended(MemoryLedger):
    """Before each of the first ``rivals`` appends, a rival budget on the same store charges
    first, so the append loses its compare-and-append."""

    def __init__(self, rivals: int) -> None:
        super().__init__()
        self.rivals = rivals
        self.rival: Budget | None = None
        self.appends = 0
        self._inside = False

    def append(self, name: str, record: LedgerRecord) -> bool:
        self.appends += 1
        if self.rival is not None and self.rivals > 0 and not self._inside:
            self.rivals -= 1
            self._inside = True
            try:
                self.rival.charge(epsilon=STEP)
            finally:
                self._inside = False
        return super().append(name, record)


def test_lost_conflicts_are_retried_until_the_charge_lands() -> None:
    store = _Contended(rivals=6)
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    store.rival = Budget.open(store, "people")
    budget.charge(epsilon=0.25)  # loses 6 times, then lands
    assert store.appends == 6 + 7
    assert budget.spent == (0.25 + 6 * STEP, 0.0)
    assert [h.seq for h in budget.history()] == list(range(1, 8))


# ------------------------------------------------------------------ records checked first
def test_a_record_that_would_not_replay_is_refused_before_writing() -> None:
    event: Any = PureDpEvent(epsilon=0.01)
    for _ in range(101):
        event = SelfComposedEvent(event=event, count=1)
    store = MemoryLedger()
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    with pytest.raises(UnsupportedEventError, match="could not be replayed"):
        budget.charge(event)
    assert store.read("people") == [] and budget.spent == (0.0, 0.0)
    shallow: Any = PureDpEvent(epsilon=0.01)
    for _ in range(100):  # the deepest the replay restores: accepted
        shallow = SelfComposedEvent(event=shallow, count=1)
    budget.charge(shallow)
    assert Budget.open(store, "people").spent == budget.spent


# ------------------------------------------------------------------ replay checks spent_after
def _edit(store: MemoryLedger, seq: int, change: Any) -> None:
    old = store._records["people"][seq - 1]
    body = json.loads(old.payload)
    change(body)
    store._records["people"][seq - 1] = LedgerRecord(
        seq=old.seq, time=old.time, kind=old.kind, analyst=old.analyst, payload=json.dumps(body)
    )


@pytest.mark.parametrize("field", ["event", "spent_after", "analyst_spent_after", "count"])
def test_replay_refuses_an_edited_cost(field: str) -> None:
    store = MemoryLedger()
    total = Budget(epsilon=1.0, delta=1e-6, method="zcdp", ledger=store, name="people")
    alice = total.sub_budget("alice", epsilon=0.5, delta=1e-7)
    alice.charge(epsilon=STEP)
    total.charge(epsilon=STEP)
    changes = {
        "event": lambda b: b["event"].update(epsilon=STEP / 2),
        "spent_after": lambda b: b.update(spent_after=[b["spent_after"][0] / 2, 0.0]),
        "analyst_spent_after": lambda b: b.update(analyst_spent_after=[0.0, 0.0]),
        "count": lambda b: b.update(count=0),
    }
    assert Budget.open(store, "people").to_json() == total.to_json()  # unedited: replays
    _edit(store, 2, changes[field])  # record 2: alice's charge
    with pytest.raises(LedgerError, match="record 2"):
        Budget.open(store, "people")


def test_history_of_a_damaged_payload_raises_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    budget = Budget(epsilon=1.0, ledger=SqliteLedger(path), name="people")
    budget.charge(epsilon=0.25)
    db = sqlite3.connect(path)
    db.execute("UPDATE dpkit_ledger SET payload = '{' WHERE seq = 1")
    db.commit()
    db.close()
    with pytest.raises(LedgerError, match="record 1"):
        budget.history()  # already replayed: only history reads it again
    with pytest.raises(LedgerError, match="record 1"):
        Budget.open(SqliteLedger(path), "people")
