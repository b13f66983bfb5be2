"""The ledger-backed book of a budget: records written by compare-and-append, and replayed.

A :class:`Book` holds the budget's total (an :class:`~dpkit.accounting._budget.filter.Account`),
the analysts' caps, its store and the last record read. The state is the replay of the records
in the store. An accepted charge is appended by compare-and-append before ``charge`` returns;
if another writer appended first, the book replays its records, checks again and retries, so
writers in several processes never overspend together. Every record is read back through the
replay's own reader (:func:`decode_charge`) before it is written, and the replay checks each
record's stored ``spent_after`` against the state it recomputes.

``fork`` copies a book's lock in whatever state it had and its spent total; the child's copies
get a fresh lock and refuse every charge (see :func:`_disable_in_child`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from dpkit.accounting import ledger as _ledger
from dpkit.accounting._budget import kinds
from dpkit.accounting._budget.filter import Account
from dpkit.accounting._budget.records import ChargeRecord
from dpkit.accounting._budget.terms import Terms
from dpkit.errors import (
    BudgetUnavailableError,
    LedgerError,
    SerializationError,
    UnsupportedEventError,
)
from dpkit.events import DpEvent, event_from_dict, event_to_dict

__all__ = ["ALL", "Book", "store_call"]

#: Compare-and-append attempts before a charge gives up. Each lost attempt is another writer's
#: accepted record (a conflict that shows no newer record fails at once), so the ledger always
#: moves on; after a few losses in a row the writer pauses briefly (randomised, at most
#: ``_MAX_PAUSE`` seconds) so that it is not starved by faster writers.
_MAX_ATTEMPTS = 1000
_MAX_PAUSE = 0.05
#: Relative difference allowed between a record's stored ``spent_after`` and its replay: the
#: conversions (zCDP, GDP, RDP, the Gaussian pair of a basic budget) use floating-point
#: functions whose last bits may differ between machines sharing one ledger.
_REPLAY_TOLERANCE = 1e-9

_T = TypeVar("_T")
ALL: Any = object()  # history(): every analyst

# Every live book, so that a forked child can disable its copies (see ``_disable_in_child``).
_LIVE_BOOKS: weakref.WeakSet[Book] = weakref.WeakSet()


def _disable_in_child() -> None:
    """``os.register_at_fork`` child handler: fresh locks, and no charges on copied budgets.

    ``fork`` copies the budget's lock in whatever state it had: if another thread was charging,
    the child's first charge would wait forever. It also copies the spent total: parent and child
    could then each spend the whole remaining budget, and the two releases together would exceed
    it. The child's copy therefore gets a fresh lock and refuses every charge with
    :class:`~dpkit.errors.BudgetUnavailableError` (reading what was spent still works).
    """
    for book in list(_LIVE_BOOKS):
        book.lock = threading.Lock()
        book.queue_lock = threading.Lock()
        book.queue = []  # the parent's waiting charges are the parent's
        book.forked = True


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_disable_in_child)


def store_call(call: Callable[[], _T]) -> _T:
    """Run a store operation; any failure of the store becomes a :class:`LedgerError` (the
    stores raise it themselves; this also catches what a third-party store might raise)."""
    try:
        return call()
    except LedgerError:
        raise
    except (OSError, RuntimeError, ValueError, TypeError, AttributeError) as exc:
        raise LedgerError(f"the ledger store failed; nothing was charged: {exc!r}") from exc


def _pause(attempt: int) -> None:
    """Back off after ``attempt`` compare-and-append losses in a row (none for the first 3):
    a random pause up to ``min(_MAX_PAUSE, 2**-10 * 2**(attempt - 3))`` seconds. The randomness
    only spreads writers in time; it plays no privacy role."""
    if attempt >= 3:
        cap = min(_MAX_PAUSE, 2.0 ** (min(attempt, 20) - 13))
        fraction = int.from_bytes(os.urandom(2), "big") / 65536.0  # uniform in [0, 1)
        time.sleep(fraction * cap)


@dataclasses.dataclass(frozen=True)
class _Charge:
    """A charge record's payload, read as the replay reads it."""

    event: DpEvent
    count: int
    metadata: dict[str, Any]
    spent_after: tuple[float, float]
    analyst_spent_after: tuple[float, float] | None


def _spent_pair(value: Any, what: str) -> tuple[float, float]:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        raise ValueError(f"{what} must be a list of two numbers, got {value!r}")
    return float(value[0]), float(value[1])


def decode_charge(payload: str, analyst: str | None) -> _Charge:
    """Read the payload of a charge record: the one reader used by the replay, by
    ``history`` and, before anything is written, by ``charge`` (so an accepted record always
    replays). Raises ValueError (SerializationError), TypeError, KeyError or RecursionError on
    anything malformed."""
    body = json.loads(payload)
    if not isinstance(body, dict):
        raise ValueError(f"a charge record is a JSON object, got {type(body).__name__}")
    event = event_from_dict(body["event"])
    count = body["count"]
    if type(count) is not int or count < 0:
        raise ValueError(f"count must be an int >= 0, got {count!r}")
    metadata = body["metadata"]
    if not isinstance(metadata, dict):
        raise ValueError(f"metadata must be a JSON object, got {metadata!r}")
    spent = _spent_pair(body["spent_after"], "spent_after")
    sub = body.get("analyst_spent_after")
    if (analyst is None) != (sub is None):
        raise ValueError("analyst_spent_after goes with an analyst's charge, and only there")
    sub_spent = None if sub is None else _spent_pair(sub, "analyst_spent_after")
    return _Charge(event, count, metadata, spent, sub_spent)


#: What a malformed payload raises from :func:`decode_charge` or the replay of its event.
_UNREADABLE = (KeyError, TypeError, ValueError, RecursionError, UnsupportedEventError)


def _agree(stored: tuple[float, float], replayed: tuple[float, float]) -> bool:
    """Whether a stored ``spent_after`` matches the replay (relative ``_REPLAY_TOLERANCE``)."""
    for a, b in zip(stored, replayed, strict=True):
        if a == b:
            continue
        if not (math.isfinite(a) and math.isfinite(b)):
            return False
        if abs(a - b) > _REPLAY_TOLERANCE * max(abs(a), abs(b)):
            return False
    return True


def _event_data(ev: DpEvent) -> dict[str, Any]:
    """The event as stored (the allow-list of :func:`event_to_dict`)."""
    try:
        return event_to_dict(ev)
    except (SerializationError, RecursionError) as exc:
        raise UnsupportedEventError(
            f"a {type(ev).__name__} cannot be recorded in the ledger ({exc}); nothing was charged"
        ) from exc


def _check_replays(payload: str, ev: DpEvent, n: int, sub_name: str | None) -> None:
    """Refuse, before anything is written, a record that the replay would not read back
    as this very charge (an event nested deeper than the replay restores, say): one
    accepted record must never make the ledger unreadable for every later reader."""
    try:
        stored = decode_charge(payload, sub_name)
    except _UNREADABLE as exc:
        raise UnsupportedEventError(
            f"the record of this {type(ev).__name__} charge could not be replayed from "
            f"the ledger ({type(exc).__name__}: {exc}); nothing was charged"
        ) from exc
    if stored.event != ev or stored.count != n:
        raise UnsupportedEventError(
            f"the record of this {type(ev).__name__} charge would be replayed as another "
            "event; nothing was charged"
        )


@dataclasses.dataclass(eq=False)
class _Queued:
    """A charge waiting for the lock (see :meth:`Book.charge`)."""

    ev: DpEvent
    n: int
    meta: dict[str, Any]
    sub_name: str | None
    done: bool = False
    error: BaseException | None = None


class Book:
    """The total, the analysts' caps and the ledger records they are replayed from.

    ``lock`` makes check-and-update atomic across threads (the methods that say "lock held"
    expect the caller to hold it); ``forked`` is set in a forked child (no charges there).
    """

    def __init__(self, terms: Terms, ledger: _ledger.Ledger | None, name: str) -> None:
        if ledger is not None and not isinstance(ledger, _ledger.Ledger):
            raise LedgerError(f"ledger must be a Ledger store, got {ledger!r}")
        self.total = Account.empty(terms)
        self.lock = threading.Lock()
        self.queue_lock = threading.Lock()  # guards ``queue`` only (never held while waiting)
        self.queue: list[_Queued] = []  # charges waiting for the lock, in arrival order
        self.forked = False
        _LIVE_BOOKS.add(self)
        self.store: _ledger.Ledger = _ledger.MemoryLedger() if ledger is None else ledger
        self.durable = ledger is not None and not isinstance(ledger, _ledger.MemoryLedger)
        self.name = _ledger.check_budget_name(name)
        self.seq = 0  # the last record replayed into the state
        self.caps: dict[str, Account] = {}

    def attach(self) -> None:
        """Store the definition under the book's name (or check it against the stored one),
        then replay every stored record."""
        mine = json.dumps(self.total.terms.definition(), sort_keys=True)
        stored = store_call(lambda: self.store.define(self.name, mine))
        if stored != mine:
            raise LedgerError(
                f"the ledger already holds a budget named {self.name!r} with another "
                f"definition: stored {stored}, given {mine}; open it with Budget.open() or "
                "use another name"
            )
        with self.lock:
            self.sync()

    def refuse_if_forked(self) -> None:
        if self.forked:
            if self.durable:
                raise BudgetUnavailableError(
                    "this budget was copied into a forked process, where its ledger "
                    "connection must not be used; open the ledger again in this process "
                    "(Budget.open); nothing was charged"
                )
            raise BudgetUnavailableError(
                "this in-memory budget was copied into a forked process, where charging "
                "it could spend the same privacy twice; charge it in the process that "
                "created it; nothing was charged"
            )

    def _damaged(self, lost: bool, read: int) -> None:
        if lost and read == 0:
            raise LedgerError(
                f"the ledger store refused record {self.seq + 1} of {self.name!r} as a "
                "conflict but holds no newer record: the store is damaged (its records and "
                "its sequence counter disagree); nothing was charged"
            )

    def charge(self, ev: DpEvent, n: int, meta: dict[str, Any], sub_name: str | None) -> None:
        """Check the charge against the total (and the cap ``sub_name``) and write its record;
        raise what refused it (called WITHOUT the lock).

        Group commit: the caller queues its charge, then takes the lock. Whoever holds the lock
        takes every charge queued so far, in arrival order, checks them one after another
        (each against the state the earlier ones leave, exactly as if they had come one at a
        time) and writes the accepted ones' records in one compare-and-append
        (``append_many``: one transaction, one disk sync); the callers whose charge it already
        wrote find it done when they get the lock. A charge returns only after its record is
        stored; the check stays serial, under the one lock."""
        entry = _Queued(ev, n, meta, sub_name)
        with self.queue_lock:
            self.queue.append(entry)
        with self.lock:
            if not entry.done:
                with self.queue_lock:
                    batch, self.queue = self.queue, []
                self._commit_batch(batch)
        if entry.error is not None:
            raise entry.error

    def _commit_batch(self, batch: list[_Queued]) -> None:
        """Decide every queued charge of ``batch`` (lock held): each ends ``done``, with
        ``error`` set if it was refused or could not be written."""
        together = callable(getattr(self.store, "append_many", None))
        # a store without append_many: one compare-and-append per charge
        groups = [batch] if together else [[entry] for entry in batch]
        try:
            for group in groups:
                try:
                    self.refuse_if_forked()
                    self._commit_group(group)
                except Exception as exc:  # nothing of this group was charged
                    for entry in group:
                        if not entry.done:
                            entry.error = exc
                            entry.done = True
        finally:  # an interrupt (BaseException) also leaves no caller waiting undecided
            for entry in batch:
                if not entry.done:
                    entry.error = LedgerError(
                        "the charge was interrupted before its record was confirmed; it may "
                        "have been stored (a later read counts it)"
                    )
                    entry.done = True

    def _commit_group(self, group: list[_Queued]) -> None:
        """Check ``group`` one charge after another and append the accepted records together
        by compare-and-append; on a conflict, replay what the other writer added and check all
        of them again (lock held). The state changes only after the store accepted the
        records: an exception from the store (or an interrupt) leaves it as it was, and
        records that were committed all the same are read by the next replay."""
        lost = False
        for attempt in range(_MAX_ATTEMPTS):
            self._damaged(lost, self.sync())
            # Shadow accounts: the group is checked against the states the earlier charges of
            # the group leave, without touching the book's until the store has the records.
            total = dataclasses.replace(self.total)
            caps: dict[str, Account] = {}
            records: list[_ledger.LedgerRecord] = []
            accepted: list[_Queued] = []
            refused: list[tuple[_Queued, Exception]] = []
            for entry in group:
                try:
                    record, new, sub_new = self._record_of(entry, total, caps, len(records))
                except Exception as why:  # refused or unrecordable: this charge only
                    refused.append((entry, why))
                    continue
                total.state = new
                if entry.sub_name is not None and sub_new is not None:
                    caps[entry.sub_name].state = sub_new
                records.append(record)
                accepted.append(entry)
            if records and not store_call(
                functools.partial(self._append, records)
            ):  # another writer came first: replay its records and check everything again
                lost = True
                _pause(attempt)
                continue
            self.total.state = total.state  # the only state changes
            for name, cap in caps.items():
                self.caps[name].state = cap.state
            if records:
                self.seq = records[-1].seq
            for entry in accepted:
                entry.done = True
            for entry, reason in refused:
                entry.error = reason
                entry.done = True
            return
        raise LedgerError(
            f"gave up after {_MAX_ATTEMPTS} attempts lost to other writers; nothing was charged"
        )

    def _append(self, records: list[_ledger.LedgerRecord]) -> bool:
        if len(records) == 1:
            return self.store.append(self.name, records[0])
        return bool(self.store.append_many(self.name, records))  # type: ignore[attr-defined]

    def _record_of(
        self, entry: _Queued, total: Account, caps: dict[str, Account], before: int
    ) -> tuple[_ledger.LedgerRecord, Any, Any]:
        """The record of ``entry`` checked against the shadow ``total`` and cap, numbered after
        the ``before`` records accepted ahead of it; raises what refuses it."""
        ev, n, sub_name = entry.ev, entry.n, entry.sub_name
        if total.terms.mode == "filter":
            new = total.check(ev, n, None)
        else:
            new, _ = total.trial(ev, n)
        body: dict[str, Any] = {
            "event": _event_data(ev),
            "count": n,
            "metadata": entry.meta,
            "spent_after": list(kinds.spent_pair_of(new)),
        }
        sub_new = None
        if sub_name is not None:
            if sub_name not in caps:
                caps[sub_name] = dataclasses.replace(self.caps[sub_name])
            sub_new = caps[sub_name].check(ev, n, sub_name)
            body["analyst_spent_after"] = list(kinds.spent_pair_of(sub_new))
        payload = json.dumps(body, sort_keys=True)
        _check_replays(payload, ev, n, sub_name)
        record = _ledger.LedgerRecord(
            seq=self.seq + before + 1,
            time=time.time(),
            kind="charge",
            analyst=sub_name,
            payload=payload,
        )
        return record, new, sub_new

    def define_cap(self, analyst: str, caps: dict[str, Any], given: bool) -> None:
        """Create the cap of ``analyst`` (stored in the ledger), or check it against the stored
        one; without ``given`` caps only reopen an existing one (lock held)."""
        self.refuse_if_forked()
        lost = False
        for attempt in range(_MAX_ATTEMPTS):
            if self.sync() == 0 and lost:
                raise LedgerError(
                    f"the ledger store refused record {self.seq + 1} of {self.name!r} "
                    "as a conflict but holds no newer record: the store is damaged"
                )
            if analyst in self.caps:
                stored = self.caps[analyst].terms.caps()
                if given and stored != caps:
                    raise LedgerError(
                        f"sub-budget {analyst!r} exists with caps {stored}, not {caps}"
                    )
                return
            if not given:
                raise LedgerError(f"no sub-budget {analyst!r}: give its caps to create it")
            record = _ledger.LedgerRecord(
                seq=self.seq + 1,
                time=time.time(),
                kind="sub_budget",
                analyst=analyst,
                payload=json.dumps({"definition": caps}, sort_keys=True),
            )
            if store_call(functools.partial(self.store.append, self.name, record)):
                self._apply(record)
                return
            lost = True
            _pause(attempt)
        raise LedgerError(  # pragma: no cover - needs _MAX_ATTEMPTS lost races in a row
            f"gave up after {_MAX_ATTEMPTS} attempts lost to other writers"
        )

    def sync(self) -> int:
        """Replay the records other writers appended since the last one read (lock held);
        return how many were read."""
        if self.forked:
            return 0  # a forked copy must not use the parent's store connection
        records = store_call(lambda: self.store.read(self.name, self.seq))
        for record in records:
            self._apply(record)
        return len(records)

    def _apply(self, record: _ledger.LedgerRecord) -> None:
        """Replay one stored record, as it was checked when written (no budget check again: a
        record over the budget, which only a damaged store could hold, stays counted,
        conservatively, and the budget reports ``exceeded``). The ``spent_after`` (and
        ``analyst_spent_after``) stored in a charge record must agree with the replayed state
        (relative ``_REPLAY_TOLERANCE``), else LedgerError: a record whose cost was edited after
        it was written is detected, not silently counted at its new cost."""
        if record.seq != self.seq + 1:
            raise LedgerError(
                f"ledger of {self.name!r} skips from record {self.seq} to {record.seq}"
            )
        try:
            if record.kind == "sub_budget":
                self._apply_cap(record)
            else:
                self._apply_charge(record)
        except (*_UNREADABLE, AssertionError) as exc:
            raise LedgerError(
                f"record {record.seq} of budget {self.name!r} cannot be replayed: {exc!r}"
            ) from exc
        self.seq = record.seq

    def _apply_cap(self, record: _ledger.LedgerRecord) -> None:
        body = json.loads(record.payload)
        if record.analyst is None or not isinstance(body, dict):
            raise ValueError("a sub-budget record names its analyst and definition")
        if record.analyst in self.caps:
            raise LedgerError(f"sub-budget {record.analyst!r} is defined twice")
        definition: Mapping[str, Any] = body["definition"]
        self.caps[record.analyst] = Account.empty(self.total.terms.sub_terms(definition))

    def _apply_charge(self, record: _ledger.LedgerRecord) -> None:
        charge = decode_charge(record.payload, record.analyst)
        new, _ = self.total.trial(charge.event, charge.count)
        self._verify(record, "spent_after", charge.spent_after, kinds.spent_pair_of(new))
        cap = sub_new = None
        if record.analyst is not None:
            cap = self.caps[record.analyst]
            sub_new, _ = cap.trial(charge.event, charge.count)
            assert charge.analyst_spent_after is not None
            self._verify(
                record,
                "analyst_spent_after",
                charge.analyst_spent_after,
                kinds.spent_pair_of(sub_new),
            )
        self.total.state = new
        if cap is not None and sub_new is not None:
            cap.state = sub_new

    def _verify(
        self,
        record: _ledger.LedgerRecord,
        field: str,
        stored: tuple[float, float],
        replayed: tuple[float, float],
    ) -> None:
        if not _agree(stored, replayed):
            raise LedgerError(
                f"record {record.seq} of budget {self.name!r} stores {field}={list(stored)} "
                f"but its replay gives {list(replayed)}: the ledger was changed after it was "
                "written; refusing to replay it"
            )

    def history(self, analyst: str | None = ALL) -> list[ChargeRecord]:
        """Every recorded charge, in order, read from the store (see ``Budget.history``)."""
        with self.lock:
            self.sync()
            records = store_call(lambda: self.store.read(self.name, 0))
        out = []
        for record in records:
            if record.kind != "charge" or (analyst is not ALL and record.analyst != analyst):
                continue
            try:
                charge = decode_charge(record.payload, record.analyst)
            except _UNREADABLE as exc:
                raise LedgerError(
                    f"record {record.seq} of budget {self.name!r} cannot be read: {exc!r}"
                ) from exc
            out.append(
                ChargeRecord(
                    seq=record.seq,
                    time=record.time,
                    analyst=record.analyst,
                    event=charge.event,
                    count=charge.count,
                    metadata=charge.metadata,
                    spent_after=charge.spent_after,
                )
            )
        return out

    def can_charge(self, ev: DpEvent, n: int, analyst: str | None) -> bool:
        """Whether ``commit`` would accept this charge now (changes nothing)."""
        with self.lock:
            if self.forked:
                return False
            self.sync()
            odometer = self.total.terms.mode == "odometer"
            if analyst is None:
                try:
                    probe, _ = self.total.trial(ev, n)
                except UnsupportedEventError:
                    return False
                return odometer or self.total.within(probe)
            try:
                total, _ = self.total.trial(ev, n)
                mine, _ = self.caps[analyst].trial(ev, n)
            except UnsupportedEventError:
                return False
            return self.caps[analyst].within(mine) and (odometer or self.total.within(total))
