"""Faults at the ledger level: processes killed with SIGKILL while charging, a full disk, and
several processes racing for one budget, on SQLite and on a real PostgreSQL server.

A child process is forked from the test process (already importing dpkit, so a trial costs
milliseconds); it opens the store and the budget itself, charges in a loop and writes a marker
(the stand-in for a release) only after ``charge`` returned. After the children are killed or
done, a fresh handle replays the ledger and the tests check: the total is never exceeded, every
marker has its record, no record is duplicated, the replay succeeds.
"""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest

from dpkit.accounting import Budget, Ledger
from dpkit.errors import BudgetExceededError, LedgerError
from dpkit.ledger import PostgresLedger, SqliteLedger

StoreFactory = Callable[[], Ledger]


def _fork(child: Callable[[], int]) -> tuple[int, int]:
    """Run ``child`` in a forked process; returns (pid, read end of a pipe carrying its int)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.close(read)
            result = child()
            os.write(write, struct.pack("<q", result))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def _collect(pid: int, read: int) -> int:
    data = b""
    while chunk := os.read(read, 8):
        data += chunk
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    (value,) = struct.unpack("<q", data)
    return int(value)


# ---------------------------------------------------------------------- kill -9 while charging
STEP = 2.0**-12  # 4096 charges fit in epsilon = 1, exactly


def _kill_trials(factory: StoreFactory, name: str, markers: Path, trials: int) -> dict[str, int]:
    """Fork ``trials`` spenders one after another and SIGKILL each at a random moment while it
    charges (after it has opened the budget). Returns counts for the report."""
    rng = random.Random(20261123)  # schedules the kills only; no privacy role
    killed = 0
    for _ in range(trials):
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the spender
            try:
                os.close(ready_r)
                budget = Budget.open(factory(), name)
                alice = budget.sub_budget("alice")
                fd = os.open(markers, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                os.write(ready_w, b"r")
                for i in range(10**6):
                    tag = f"{os.getpid()}-{i}"
                    who = alice if i % 3 == 0 else budget
                    try:
                        who.charge(epsilon=STEP, metadata={"tag": tag})
                    except BudgetExceededError:
                        continue
                    os.write(fd, f"{tag}\n".encode())  # the release, after the charge
            finally:
                os._exit(0)
        os.close(ready_w)
        assert os.read(ready_r, 1) == b"r"
        os.close(ready_r)
        time.sleep(rng.uniform(0.0, 0.02))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        killed += os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    budget = Budget.open(factory(), name)  # a fresh handle replays everything
    history = budget.history()
    tags = [h.metadata["tag"] for h in history]
    released = markers.read_text().split()
    assert killed == trials
    assert len(set(tags)) == len(tags)  # no record written twice
    assert set(released) <= set(tags)  # every release has its charge
    assert budget.spent_epsilon_exact == Fraction(len(tags)) * Fraction(STEP)
    assert budget.spent_epsilon_exact <= 1  # never over the total
    alice = budget.sub_budget("alice")
    assert Fraction(alice.spent[0]) <= Fraction(1, 2)  # nor over the analyst's cap
    assert [h.seq for h in history] == list(range(2, len(history) + 2))
    return {
        "trials": trials,
        "charges": len(tags),
        "released": len(released),
        "charged_not_released": len(tags) - len(released),
    }


def _setup(factory: StoreFactory, name: str) -> None:
    budget = Budget(epsilon=1.0, ledger=factory(), name=name)
    budget.sub_budget("alice", epsilon=0.5)


def test_sigkill_during_charges_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "kill.db"

    def factory() -> Ledger:
        return SqliteLedger(path)

    _setup(factory, "people")
    counts = _kill_trials(factory, "people", tmp_path / "released.txt", trials=100)
    assert counts["released"] > 0, counts
    print("sqlite kill -9", json.dumps(counts))


def test_sigkill_during_charges_postgres(postgres_dsn: str, tmp_path: Path) -> None:
    def factory() -> Ledger:
        return PostgresLedger(postgres_dsn)

    _setup(factory, "kill-people")
    counts = _kill_trials(factory, "kill-people", tmp_path / "released.txt", trials=30)
    assert counts["released"] > 0, counts
    print("postgres kill -9", json.dumps(counts))


# ---------------------------------------------------------------------- kill at a chosen statement
class _PausingConnection:
    """A psycopg connection whose ``execute`` stops (to be killed) before one statement."""

    def __init__(self, conn: object, stop_at: str, signal_fd: int) -> None:
        self._conn, self._stop_at, self._fd = conn, stop_at, signal_fd

    def execute(self, query: str, *args: object) -> object:
        if query.startswith(self._stop_at):
            os.write(self._fd, b"p")
            time.sleep(60)
        return self._conn.execute(query, *args)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


def _kill_at(factory: StoreFactory, name: str, stop_at: str) -> tuple[int, int]:
    """Fork a spender that pauses just before the SQL statement ``stop_at`` of its next charge
    (inside the store's transaction), SIGKILL it there; returns (records before, after)."""
    before = len(Budget.open(factory(), name).history())
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the spender
        try:
            store = factory()
            budget = Budget.open(store, name)
            if isinstance(store, SqliteLedger):

                def trace(sql: str) -> None:
                    if sql.startswith(stop_at):
                        os.write(write, b"p")
                        time.sleep(60)

                store._conn.set_trace_callback(trace)
            else:
                assert isinstance(store, PostgresLedger)
                conn = _PausingConnection(store._connection(), stop_at, write)
                store._connection = lambda: conn  # type: ignore[method-assign]
            budget.charge(epsilon=STEP)
            os.write(write, b"c")  # charged without pausing: the test's hook is broken
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"p"  # paused inside the transaction
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(read)
    after = Budget.open(factory(), name)  # opens and replays: no lock left behind
    after.charge(epsilon=STEP)  # and the next writer is not blocked
    return before, len(after.history()) - 1


@pytest.mark.parametrize("stop_at", ["INSERT INTO dpkit_ledger", "COMMIT"])
def test_sigkill_inside_the_transaction_sqlite(tmp_path: Path, stop_at: str) -> None:
    path = tmp_path / "mid.db"

    def factory() -> Ledger:
        return SqliteLedger(path, timeout=5.0)

    _setup(factory, "people")
    before, after = _kill_at(factory, "people", stop_at)
    assert after == before  # the transaction died with the process: nothing half-written


def test_sigkill_inside_the_transaction_postgres(postgres_dsn: str) -> None:
    def factory() -> Ledger:
        return PostgresLedger(postgres_dsn)

    _setup(factory, "mid-people")
    before, after = _kill_at(factory, "mid-people", "INSERT INTO dpkit_ledger")
    assert after == before


# ---------------------------------------------------------------------- disk full
def test_disk_full_refuses_the_charge_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "full.db"
    store = SqliteLedger(path)
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    for i in range(5):
        budget.charge(epsilon=2.0**-6, metadata={"i": i})
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full now
    before = (budget.to_json(), budget.spent, store.read("people"))
    with pytest.raises(LedgerError, match="full") as err:
        budget.charge(epsilon=2.0**-6, metadata={"blob": "x" * 60_000})
    assert isinstance(err.value, BudgetExceededError)  # "except BudgetExceededError" holds
    assert "nothing was written" in str(err.value)
    assert (budget.to_json(), budget.spent, store.read("people")) == before
    replayed = Budget.open(SqliteLedger(path), "people")
    assert replayed.to_json() == before[0]
    store._conn.execute("PRAGMA max_page_count = 1073741823")  # space again
    budget.charge(epsilon=2.0**-6, metadata={"blob": "x" * 60_000})
    assert Budget.open(SqliteLedger(path), "people").spent == (6 * 2.0**-6, 0.0)


def test_store_failures_become_ledger_errors(tmp_path: Path) -> None:
    with pytest.raises(LedgerError):
        SqliteLedger(tmp_path / "missing-dir" / "x.db")
    path = tmp_path / "closed.db"
    store = SqliteLedger(path)
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    store.close()
    with pytest.raises(LedgerError):
        budget.charge(epsilon=0.5)
    assert budget.spent == (0.0, 0.0)
    with pytest.raises(LedgerError):
        PostgresLedger("postgresql://nobody@127.0.0.1:1/none", connect_timeout=1)


# ---------------------------------------------------------------------- processes racing
def _race(factory: StoreFactory, name: str, processes: int, analysts: bool) -> list[int]:
    def spender(i: int) -> Callable[[], int]:
        def run() -> int:
            budget = Budget.open(factory(), name)
            target = budget.sub_budget(f"a{i % 3}") if analysts else budget
            accepted = 0
            while True:
                try:
                    target.charge(epsilon=2.0**-6)
                except BudgetExceededError:
                    return accepted
                accepted += 1

        return run

    children = [_fork(spender(i)) for i in range(processes)]
    return [_collect(pid, read) for pid, read in children]


@pytest.mark.parametrize("analysts", [False, True])
def test_processes_racing_on_sqlite_never_overspend(tmp_path: Path, analysts: bool) -> None:
    path = tmp_path / "race.db"

    def factory() -> Ledger:
        return SqliteLedger(path)

    total = Budget(epsilon=1.0, ledger=factory(), name="people")
    for i in range(3):
        total.sub_budget(f"a{i}", epsilon=0.5)
    accepted = _race(factory, "people", 2 if not analysts else 3, analysts)
    final = Budget.open(factory(), "people")
    assert sum(accepted) == 64  # exactly the capacity: overspend 0, lost 0
    assert len(final.history()) == 64
    assert final.spent_epsilon_exact == 1


@pytest.mark.parametrize("analysts", [False, True])
def test_processes_racing_on_postgres_never_overspend(postgres_dsn: str, analysts: bool) -> None:
    name = f"race-{analysts}"

    def factory() -> Ledger:
        return PostgresLedger(postgres_dsn)

    total = Budget(epsilon=1.0, ledger=factory(), name=name)
    for i in range(3):
        total.sub_budget(f"a{i}", epsilon=0.5)
    accepted = _race(factory, name, 4, analysts)
    final = Budget.open(factory(), name)
    assert sum(accepted) == 64
    assert len(final.history()) == 64
    assert final.spent_epsilon_exact == 1
    if analysts:
        for i in range(3):
            assert final.sub_budget(f"a{i}").spent[0] <= 0.5
