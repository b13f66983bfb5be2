"""The budget's storage seam: a ledger of charge records, appended only by compare-and-append.

A :class:`~dpkit.accounting.budget.Budget` keeps its check-then-commit logic; its state is the
replay of an ordered list of records kept by a :class:`Ledger`. Each record has a sequence
number ``seq`` (1, 2, 3, ... per budget name). A budget that has replayed the records up to
``seq = k`` checks a new charge against that state and asks the store to append the record as
``seq = k + 1``; the store writes it only if its last record is still ``k``
(:meth:`Ledger.append` returns ``False`` otherwise, and the budget reads the new records,
checks again and retries). Two writers can therefore never both add a charge checked against the
same state: the sequence is the lock. A store only keeps records; it never reads them.

Stores: :class:`MemoryLedger` here (the default of every budget, one process); durable stores
(SQLite, PostgreSQL) live in :mod:`dpkit.ledger`. Every store passes one contract test suite.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from dpkit.errors import LedgerError

__all__ = [
    "Ledger",
    "LedgerRecord",
    "MemoryLedger",
    "check_budget_name",
    "check_record",
    "check_run",
]

#: Record kinds a budget writes.
KINDS = ("charge", "sub_budget")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LedgerRecord:
    """One stored record: its place ``seq`` (from 1), the UNIX ``time`` it was written, its
    ``kind`` (``"charge"`` or ``"sub_budget"``), the sub-budget it belongs to (``analyst``,
    ``None`` for the total) and its ``payload``, JSON text that only the budget interprets."""

    seq: int
    time: float
    kind: str
    analyst: str | None
    payload: str


def check_budget_name(name: object, what: str = "name") -> str:
    """A budget or analyst name: a non-empty ``str`` of at most 200 printable characters."""
    if not isinstance(name, str) or not name or len(name) > 200 or not name.isprintable():
        raise LedgerError(
            f"{what} must be a non-empty printable string of at most 200 characters, got {name!r}"
        )
    return name


def check_record(record: LedgerRecord) -> None:
    """Refuse a malformed record before any store writes it (shared by every store)."""
    if not isinstance(record, LedgerRecord):
        raise LedgerError(f"a ledger stores LedgerRecord objects, got {record!r}")
    if type(record.seq) is not int or record.seq < 1:
        raise LedgerError(f"record seq must be an int >= 1, got {record.seq!r}")
    if record.kind not in KINDS:
        raise LedgerError(f"record kind must be one of {KINDS}, got {record.kind!r}")
    if record.analyst is not None:
        check_budget_name(record.analyst, "analyst")
    if not isinstance(record.payload, str) or not isinstance(record.time, float):
        raise LedgerError("record payload must be str and time a float")


def check_run(records: Sequence[LedgerRecord]) -> None:
    """Refuse, before any store writes it, a run of records that is empty, malformed or not
    numbered ``k, k + 1, ...`` (shared by every store's ``append_many``)."""
    if not isinstance(records, Sequence) or not records:
        raise LedgerError("append_many needs a non-empty sequence of records")
    for i, record in enumerate(records):
        check_record(record)
        if record.seq != records[0].seq + i:
            raise LedgerError(
                f"the records of one append are numbered one after another, got seq "
                f"{record.seq} after {records[i - 1].seq}"
            )


@runtime_checkable
class Ledger(Protocol):
    """What a budget store provides. Every method is atomic; storage failures raise
    :class:`~dpkit.errors.LedgerError` and leave the stored records as they were."""

    def define(self, name: str, definition: str) -> str:
        """Store ``definition`` (JSON text) for the budget ``name`` unless one is stored;
        return the stored definition (the caller compares it with its own)."""
        ...

    def definition(self, name: str) -> str | None:
        """The stored definition of ``name``, or ``None``."""
        ...

    def read(self, name: str, after: int = 0) -> list[LedgerRecord]:
        """The records of ``name`` with ``seq > after``, in order."""
        ...

    def append(self, name: str, record: LedgerRecord) -> bool:
        """Compare-and-append: store ``record`` durably iff the last stored ``seq`` of ``name``
        is ``record.seq - 1``; ``False`` (nothing written) if another writer came first."""
        ...

    # A store may also provide ``append_many(name, records) -> bool``: compare-and-append of a
    # run of records numbered one after another, all stored durably in one transaction iff
    # the last stored ``seq`` is ``records[0].seq - 1`` (else ``False``, nothing written).
    # A budget then writes the charges of concurrent callers together (one disk sync for
    # several charges); without it, one ``append`` per charge.

    def names(self) -> list[str]:
        """The budget names defined in this store."""
        ...

    def close(self) -> None:
        """Release the store's connections (the records stay)."""
        ...


class MemoryLedger:
    """A ledger kept in this process's memory: today's behaviour of a budget, the default.

    Thread-safe (one lock); lost when the process ends. A child made by ``fork`` gets a copy
    that it can read but never write: ``append`` (and ``define`` of a new name) there raises
    :class:`~dpkit.errors.LedgerError`, since the parent still charges the original and the
    two copies could each spend what remains.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._definitions: dict[str, str] = {}
        self._records: dict[str, list[LedgerRecord]] = {}
        _LIVE_MEMORY.add(self)

    def _refuse_copy(self, what: str) -> None:
        if os.getpid() != self._pid:
            raise LedgerError(
                f"this in-memory ledger was copied into a forked process, where {what} could "
                "spend the same privacy twice (the parent keeps charging the original); use a "
                "durable ledger (dpkit.ledger) shared by both processes; nothing was written"
            )

    def define(self, name: str, definition: str) -> str:
        check_budget_name(name)
        with self._lock:
            if name not in self._definitions:
                self._refuse_copy("defining a budget")
            self._records.setdefault(name, [])
            return self._definitions.setdefault(name, definition)

    def definition(self, name: str) -> str | None:
        with self._lock:
            return self._definitions.get(name)

    def read(self, name: str, after: int = 0) -> list[LedgerRecord]:
        with self._lock:
            records = self._records.get(name, [])
            return records[max(after, 0) :]  # seq k sits at index k - 1

    def append(self, name: str, record: LedgerRecord) -> bool:
        check_record(record)
        return self.append_many(name, [record])

    def append_many(self, name: str, records: Sequence[LedgerRecord]) -> bool:
        """Compare-and-append of a run of records (all of them, or none)."""
        check_run(records)
        with self._lock:
            self._refuse_copy("a charge")
            if name not in self._definitions:
                raise LedgerError(f"no budget named {name!r} in this ledger")
            stored = self._records[name]
            if len(stored) != records[0].seq - 1:
                return False
            stored.extend(records)
            return True

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._definitions)

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return f"MemoryLedger(budgets={self.names()!r})"


# Every live MemoryLedger: a forked child gets fresh (unheld) locks for its read-only copies.
_LIVE_MEMORY: weakref.WeakSet[MemoryLedger] = weakref.WeakSet()


def _fresh_locks_in_child() -> None:
    for store in list(_LIVE_MEMORY):
        store._lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_fresh_locks_in_child)
