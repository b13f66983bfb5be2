"""A budget's group commit killed with SIGKILL at its COMMIT, on SQLite and on PostgreSQL.

Several threads of a forked child charge one budget at once, so that their charges are written
together in one transaction (group commit). The child is killed with SIGKILL just before the
batch's COMMIT, just after it, or while it runs. Afterwards the ledger holds the whole batch or
none of it, never a part; a reopened budget never shows less spent than the child released
(a release is announced through a pipe only after its ``charge`` returned); and the ledger is
left unlocked for the next writer.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from fork import start_child

from dpkit.accounting import Budget, Ledger
from dpkit.ledger import PostgresLedger, SqliteLedger

STEP = 2.0**-8  # exact dyadic charges: 256 fit in epsilon = 1
CHARGES = 6  # one charge alone, then five queued behind it and written together

StoreFactory = Callable[[], Ledger]


class _Tx:
    """A psycopg transaction block whose commit calls ``hook("before")`` / ``hook("after")``."""

    def __init__(self, real: Any, owner: _HookedConnection) -> None:
        self._real, self._owner = real, owner

    def __enter__(self) -> Any:
        return self._real.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        committing = exc[0] is None and self._owner.take_write()
        if committing:
            self._owner.hook("before")
        out = self._real.__exit__(*exc)
        if committing:
            self._owner.hook("after")
        return out


class _HookedConnection:
    """A store's database connection that calls ``hook("before"/"after")`` around the COMMIT of
    each transaction that inserted ledger records (SQLite: the ``COMMIT`` statement;
    PostgreSQL: the end of the ``transaction()`` block)."""

    def __init__(self, conn: Any, hook: Callable[[str], None]) -> None:
        self._conn, self.hook = conn, hook
        self._wrote = False

    def take_write(self) -> bool:
        wrote, self._wrote = self._wrote, False
        return wrote

    def _note(self, query: Any) -> None:
        if str(query).lstrip().upper().startswith("INSERT INTO DPKIT_LEDGER"):
            self._wrote = True

    def execute(self, query: Any, *args: Any) -> Any:
        self._note(query)
        if str(query).strip().upper() == "COMMIT" and self.take_write():
            self.hook("before")
            out = self._conn.execute(query, *args)
            self.hook("after")
            return out
        return self._conn.execute(query, *args)

    def executemany(self, query: Any, *args: Any) -> Any:
        self._note(query)
        return self._conn.executemany(query, *args)

    def transaction(self) -> _Tx:
        return _Tx(self._conn.transaction(), self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _hook_store(store: Ledger, hook: Callable[[str], None]) -> None:
    """Route the store's connection through :class:`_HookedConnection` (test-only seam)."""
    hooked = _HookedConnection(store._connection(), hook)  # type: ignore[attr-defined]
    store._connection = lambda: hooked  # type: ignore[attr-defined]


def _child(factory: StoreFactory, name: str, when: str, fd: int) -> None:  # pragma: no cover
    """The spender: one charge alone, five queued behind it; stops (to be killed) at the
    second batch's COMMIT as ``when`` says; announces each release after its charge."""
    store = factory()
    budget = Budget.open(store, name)
    book = budget._book
    first_inside = threading.Event()
    first_released = threading.Event()
    commits = 0

    def hook(moment: str) -> None:
        nonlocal commits
        if moment == "before":
            commits += 1
        if commits == 1 and moment == "before":
            first_inside.set()  # the others queue up while the first charge writes
            for _ in range(30_000):
                if len(book.queue) == CHARGES - 1:
                    break
                time.sleep(0.001)
        elif commits == 2:
            if moment == "before":
                assert first_released.wait(30)  # the first release is announced first
                os.write(fd, b"p")
                if when == "before":
                    time.sleep(60)  # killed here, the batch's records inserted, not committed
            elif when == "after":
                os.write(fd, b"a")
                time.sleep(60)  # killed here, the batch committed, no caller told yet

    _hook_store(store, hook)

    def charge(i: int) -> None:
        budget.charge(epsilon=STEP, metadata={"i": i})
        os.write(fd, f"r{i}\n".encode())  # the release, after the charge returned
        if i == 0:
            first_released.set()

    threads = [threading.Thread(target=charge, args=(0,))]
    threads[0].start()
    assert first_inside.wait(30)
    threads += [threading.Thread(target=charge, args=(i,)) for i in range(1, CHARGES)]
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join()
    time.sleep(60)  # stay alive until killed, whatever the moment


def _kill_at_commit(factory: StoreFactory, name: str, when: str) -> tuple[int, set[int]]:
    """Run :func:`_child`, SIGKILL it at the batch's COMMIT (``when``: before, during or
    after); returns (records in the ledger, releases the child announced)."""
    Budget(epsilon=1.0, ledger=factory(), name=name)
    pid, read = start_child(lambda fd: _child(factory, name, when, fd))
    stop = b"a" if when == "after" else b"p"
    seen = b""
    while stop not in seen:
        chunk = os.read(read, 64)
        assert chunk, f"the child ended before the batch's COMMIT: {seen!r}"
        seen += chunk
    os.kill(pid, signal.SIGKILL)
    while chunk := os.read(read, 64):
        seen += chunk
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    released = {int(x) for x in seen.replace(b"p", b"").replace(b"a", b"").decode().split("r")[1:]}
    reopened = Budget.open(factory(), name)
    history = reopened.history()
    assert [h.seq for h in history] == list(range(1, len(history) + 1))
    tags = {h.metadata["i"] for h in history}
    assert len(tags) == len(history)  # no record written twice
    assert released <= tags  # every release has its charge
    # never less spent than released
    assert reopened.spent_epsilon_exact == len(history) * Fraction(STEP)
    assert reopened.spent_epsilon_exact >= len(released) * Fraction(STEP)
    reopened.charge(epsilon=STEP)  # nothing left locked
    return len(history), released


def _expect(when: str, rows: int, released: set[int]) -> None:
    assert 0 in released  # the first charge, committed alone, was released before the batch
    if when == "before":
        assert (rows, released) == (1, {0})  # none of the batch
    elif when == "after":
        assert rows == CHARGES  # the whole batch
    else:
        assert rows in (1, CHARGES)  # whole or none, never a part


@pytest.mark.parametrize("when", ["before", "during", "after"])
def test_sqlite_batch_killed_at_commit_lands_whole_or_not_at_all(tmp_path: Path, when: str) -> None:
    path = tmp_path / "group.db"

    def factory() -> Ledger:
        return SqliteLedger(path, timeout=5.0)

    rows, released = _kill_at_commit(factory, "people", when)
    _expect(when, rows, released)


@pytest.mark.parametrize("when", ["before", "during", "after"])
def test_postgres_batch_killed_at_commit_lands_whole_or_not_at_all(
    postgres_dsn: str, when: str
) -> None:
    def factory() -> Ledger:
        return PostgresLedger(postgres_dsn)

    rows, released = _kill_at_commit(factory, f"group-{uuid.uuid4().hex[:12]}", when)
    _expect(when, rows, released)
