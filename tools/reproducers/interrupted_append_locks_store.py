"""Attack: an exception that is not an sqlite3.Error (KeyboardInterrupt, a signal handler's
exception) between BEGIN IMMEDIATE and COMMIT leaves the transaction open. Every other writer
on the host times out; the interrupted budget reads its own uncommitted record, then spins
100000 compare-and-append attempts per charge and never charges again.

Run: PYTHONPATH=src python tools/reproducers/interrupted_append_locks_store.py
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from typing import Any

from dpkit.accounting import Budget
from dpkit.errors import LedgerError
from dpkit.ledger import SqliteLedger


class InterruptAtCommit:
    """The real connection, with a KeyboardInterrupt arriving just before the first COMMIT."""

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


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(), "b.db")
    store = SqliteLedger(path)
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    budget.charge(epsilon=0.25)
    store._conn = InterruptAtCommit(store._conn)  # type: ignore[assignment]
    try:
        budget.charge(epsilon=0.25)
    except KeyboardInterrupt:
        print("interrupted (no release); transaction still open:", store._conn.in_transaction)
    start = time.time()
    try:
        Budget.open(SqliteLedger(path, timeout=2.0), "people").charge(epsilon=0.1)
    except LedgerError as exc:
        print(f"another writer: LedgerError after {time.time() - start:.1f} s: {exc}"[:150])
    budget.refresh()
    print("the interrupted budget believes spent", budget.spent)
    for i in range(2):
        start = time.time()
        try:
            budget.charge(epsilon=0.1)
        except LedgerError as exc:
            print(f"charge {i}: LedgerError after {time.time() - start:.1f} s: {exc}"[:150])
    print("the store holds", Budget.open(SqliteLedger(path), "people").spent)


if __name__ == "__main__":
    main()
