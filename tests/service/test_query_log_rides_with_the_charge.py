"""The query log's rows are group-committed, and a query's ``pending`` row is written in its
charge's transaction when the log shares the ledger's SQLite file.

Promises checked: a charge is never on disk without its pending row (same transaction, or
neither); a write of the log returns only once its row is committed (read back through a
connection of its own); a transaction that fails writes none of its rows, reports the failure
to its own writer only, and hands the other writers' rows back in their order.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dpkit.accounting import Budget
from dpkit.errors import LedgerError
from dpkit.ledger import SqliteLedger, open_ledger
from dpkit.service._state import ServiceState, StateError


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[ServiceState, Any, Path]]:
    path = tmp_path / "one.db"
    state = ServiceState(f"sqlite:///{path}")
    ledger = open_ledger(f"sqlite:///{path}")
    assert state.take_turns_with(ledger)
    try:
        yield state, ledger, path
    finally:
        state.close()
        ledger.close()


def _on_disk(path: Path) -> dict[str, str]:
    """Query id -> status as another connection reads the file (committed rows only)."""
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT id, status FROM dpkit_service_queries").fetchall())


def _pending(state: ServiceState, qid: str) -> None:
    state.log_pending(qid, "alice", "run", {"q": 1}, 0.1, None)


def test_the_pending_row_is_written_by_the_charge_commit(shared: Any) -> None:
    state, ledger, path = shared
    budget = Budget(epsilon=1.0, ledger=ledger)
    _pending(state, "q1")
    assert _on_disk(path) == {}  # queued: it goes with the charge
    budget.charge(epsilon=0.1, metadata={"query_id": "q1"})
    assert _on_disk(path) == {"q1": "pending"}
    state.log_done("q1", "answered", result={"n": 1})
    assert _on_disk(path) == {"q1": "answered"}


def test_a_charge_that_fails_writes_neither_and_hands_the_row_back(shared: Any) -> None:
    state, ledger, path = shared
    budget = Budget(epsilon=1.0, ledger=ledger)

    def broken(conn: sqlite3.Connection) -> Callable[[bool], None]:
        raise sqlite3.OperationalError("database or disk is full")

    _pending(state, "q1")
    ledger.add_rider(broken)  # after the query log's rider: its rows are already written
    with pytest.raises(Exception) as info:
        budget.charge(epsilon=0.1, metadata={"query_id": "q1"})
    assert isinstance(info.value, LedgerError) or isinstance(info.value.__cause__, LedgerError)
    ledger._riders.remove(broken)  # type: ignore[attr-defined]
    assert list(Budget.open(ledger, "budget").history()) == []  # nothing charged
    assert _on_disk(path) == {}  # nor logged
    state.log_done("q1", "refused", error="ledger unavailable")  # the row was handed back
    assert _on_disk(path) == {"q1": "refused"}


def test_a_failed_log_write_reports_to_its_writer_and_keeps_the_others_rows(
    shared: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, ledger, path = shared
    _pending(state, "other")  # another query's row, waiting for its charge
    _pending(state, "mine")
    real = state._tx

    def failing(*, locked: bool = False) -> Any:
        monkeypatch.setattr(state, "_tx", real)  # fails once
        raise StateError("disk full")

    monkeypatch.setattr(state, "_tx", failing)
    with pytest.raises(StateError):
        state.log_done("mine", "refused", error="x")
    assert _on_disk(path) == {}
    # Only the failed writer's rows were dropped; the other query's row is still queued.
    Budget(epsilon=1.0, ledger=ledger).charge(epsilon=0.1, metadata={"query_id": "other"})
    assert _on_disk(path) == {"other": "pending"}


def test_concurrent_log_writes_are_each_committed_when_they_return(tmp_path: Path) -> None:
    path = tmp_path / "one.db"
    state = ServiceState(f"sqlite:///{path}")
    ledger = SqliteLedger(path)
    state.take_turns_with(ledger)
    budget = Budget(epsilon=100.0, ledger=ledger)
    seen: dict[str, str] = {}
    errors: list[BaseException] = []

    def query(k: int) -> None:
        try:
            qid = f"q{k}"
            _pending(state, qid)
            budget.charge(epsilon=0.01, metadata={"query_id": qid})
            state.log_done(qid, "answered", result={"k": k})
            seen[qid] = _on_disk(path)[qid]  # committed when log_done returned
        except BaseException as exc:  # reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=query, args=(k,)) for k in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        state.close()
        ledger.close()
    assert errors == []
    assert seen == {f"q{k}": "answered" for k in range(24)}
    charged = {h.metadata["query_id"] for h in Budget.open(SqliteLedger(path)).history()}
    assert charged == set(seen)


def test_a_log_text_sqlite_cannot_store_is_escaped_and_blocks_no_charge(
    shared: tuple[ServiceState, Any, Path],
) -> None:
    """A lone surrogate in a logged error (text SQLite cannot encode) is stored escaped; it
    used to fail every transaction its row rode in, other analysts' charges included."""
    state, ledger, path = shared
    state.log_pending("a", "alice", "run", {"q": 1}, 0.1, None)
    state.log_done("a", "failed", error="bad \ud800")
    with sqlite3.connect(path) as db:
        (error,) = db.execute("SELECT error FROM dpkit_service_queries WHERE id = 'a'").fetchone()
    assert error == "bad \\ud800"
    bob = Budget(epsilon=1.0, ledger=ledger)
    state.log_pending("b", "bob", "run", {"q": 2}, 0.1, None)
    bob.charge(epsilon=0.1, metadata={"query_id": "b"})
    assert _on_disk(path)["b"] == "pending"
