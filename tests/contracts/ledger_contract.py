"""Abstract contract tests that every ledger store (the budget's storage seam) inherits.

Subclass :class:`LedgerContract` and provide ``make_store()`` (a store handle) and
``other_handle(store)`` (a second, independent handle on the same stored data: a new
connection for a database, the same object for memory). Budget names are unique per test, so a
store may be shared between tests.

The contract: definitions are stored once and never replaced; ``append`` is compare-and-append
(exactly one of several writers with the same ``seq`` wins; gaps are refused); records come back
exactly as written; a budget on the store is rebuilt exactly by replay (``to_json`` equal, the
same refusals); budgets in several handles, and analysts' sub-budgets, never overspend the total
together, and no accepted charge is missing from the ledger.
"""

from __future__ import annotations

import abc
import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import pytest

from dpkit.accounting import Budget, Ledger, LedgerRecord
from dpkit.errors import BudgetExceededError, LedgerError, PrivacyParameterError
from dpkit.events import GaussianEvent, LaplaceEvent, PureDpEvent

__all__ = ["LedgerContract"]

#: A charge of 2^-6: exactly 64 fit in epsilon = 1 (exact dyadic arithmetic, no rounding).
STEP = 2.0**-6


def _name() -> str:
    return f"b-{uuid.uuid4().hex[:12]}"


def _record(seq: int, **kw: Any) -> LedgerRecord:
    base: dict[str, Any] = {
        "seq": seq,
        "time": 1.5 + seq,
        "kind": "charge",
        "analyst": None,
        "payload": '{"x": 1}',
    }
    return LedgerRecord(**{**base, **kw})


class LedgerContract(abc.ABC):
    """Base class of the ledger store contract tests (see the module docstring)."""

    @abc.abstractmethod
    def make_store(self) -> Ledger: ...

    @abc.abstractmethod
    def other_handle(self, store: Ledger) -> Ledger: ...

    # ------------------------------------------------------------------ the store itself
    def test_is_a_ledger(self) -> None:
        assert isinstance(self.make_store(), Ledger)

    def test_definition_is_stored_once(self) -> None:
        store, name = self.make_store(), _name()
        assert store.definition(name) is None
        assert store.define(name, '{"a": 1}') == '{"a": 1}'
        assert store.define(name, '{"a": 2}') == '{"a": 1}'  # never replaced
        assert self.other_handle(store).definition(name) == '{"a": 1}'
        assert name in store.names()

    def test_compare_and_append(self) -> None:
        store, name = self.make_store(), _name()
        store.define(name, "{}")
        assert store.append(name, _record(1))
        assert not store.append(name, _record(1, payload='{"x": 2}'))  # seq taken
        assert not store.append(name, _record(3))  # a gap
        assert store.append(name, _record(2, analyst="alice", kind="sub_budget"))
        assert [r.seq for r in store.read(name)] == [1, 2]
        assert store.read(name)[0] == _record(1)  # the loser wrote nothing
        assert [r.seq for r in store.read(name, 1)] == [2]
        assert store.read(name, 2) == []

    def test_records_round_trip_exactly(self) -> None:
        store, name = self.make_store(), _name()
        store.define(name, "{}")
        rec = _record(
            1,
            time=1795476129.1174953,
            analyst="Zoë 'x\" --",
            payload='{"q": "SELECT \\"a\\" -- \u00e9\u4e2d"}',
        )
        assert store.append(name, rec)
        assert self.other_handle(store).read(name) == [rec]

    def test_malformed_records_and_unknown_budgets_are_refused(self) -> None:
        store, name = self.make_store(), _name()
        with pytest.raises(LedgerError):
            store.append(name, _record(1))  # not defined
        store.define(name, "{}")
        for bad in (
            _record(0),
            _record(1, kind="refund"),
            _record(1, analyst=""),
            _record(1, time=3),
        ):
            with pytest.raises(LedgerError):
                store.append(name, bad)
        assert store.read(name) == []
        with pytest.raises(LedgerError):
            store.define("", "{}")

    def test_one_winner_per_seq_across_handles(self) -> None:
        store, name = self.make_store(), _name()
        store.define(name, "{}")
        handles = [self.other_handle(store) for _ in range(4)]
        wins: list[int] = []
        start = threading.Barrier(len(handles))

        def writer(i: int, handle: Ledger) -> None:
            start.wait()
            for seq in range(1, 21):
                if handle.append(name, _record(seq, payload=f'{{"w": {i}}}')):
                    wins.append(seq)

        threads = [threading.Thread(target=writer, args=(i, h)) for i, h in enumerate(handles)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(wins) == list(range(1, 21))  # each seq won exactly once
        assert [r.seq for r in store.read(name)] == list(range(1, 21))

    # ------------------------------------------------------------------ budgets on the store
    def test_budget_replays_exactly(self) -> None:
        store, name = self.make_store(), _name()
        budget = Budget(epsilon=3.0, delta=1e-6, method="zcdp", ledger=store, name=name)
        alice = budget.sub_budget("alice", epsilon=1.0, delta=1e-7)
        alice.charge(GaussianEvent(noise_multiplier=10.0), metadata={"query": "count"})
        budget.charge(epsilon=0.1, count=2)
        alice.charge(PureDpEvent(epsilon=0.05))
        again = Budget.open(self.other_handle(store), name)
        assert again.to_json() == budget.to_json()
        assert again.spent == budget.spent
        assert again.sub_budget("alice").spent == alice.spent
        assert [(h.seq, h.analyst, h.metadata) for h in again.history()] == [
            (2, "alice", {"query": "count"}),
            (3, None, {}),
            (4, "alice", {}),
        ]
        assert [h.seq for h in again.history(analyst="alice")] == [2, 4]
        assert [h.seq for h in again.history(analyst=None)] == [3]
        assert again.history() == budget.history()
        # both refuse exactly the same next charge
        big = GaussianEvent(noise_multiplier=1.0)
        assert budget.can_charge(big) == again.can_charge(big)
        assert alice.can_charge(big) == again.sub_budget("alice").can_charge(big)

    def test_definition_mismatch_is_refused(self) -> None:
        store, name = self.make_store(), _name()
        Budget(epsilon=1.0, ledger=store, name=name).charge(epsilon=0.5)
        for other in (
            {"epsilon": 2.0},
            {"epsilon": 1.0, "delta": 1e-6},
            {"epsilon": 1.0, "neighbouring": "replace"},
            {"epsilon": 1.0, "mode": "odometer"},
        ):
            with pytest.raises(LedgerError, match="another definition"):
                Budget(**other, ledger=self.other_handle(store), name=name)
        same = Budget(epsilon=1.0, ledger=self.other_handle(store), name=name)
        assert same.spent == (0.5, 0.0)
        with pytest.raises(LedgerError):
            Budget.open(store, _name())

    def test_budgets_in_several_handles_never_overspend(self) -> None:
        store, name = self.make_store(), _name()
        Budget(epsilon=1.0, ledger=store, name=name)
        accepted: list[int] = []
        start = threading.Barrier(4)

        def spender() -> None:
            mine = Budget.open(self.other_handle(store), name)
            start.wait()
            n = 0
            while True:
                try:
                    mine.charge(epsilon=STEP)
                except BudgetExceededError:
                    break
                n += 1
            accepted.append(n)

        threads = [threading.Thread(target=spender) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        final = Budget.open(self.other_handle(store), name)
        assert sum(accepted) == 64  # exactly the capacity: none lost, none over
        assert final.spent_epsilon_exact == Fraction(1)
        assert len(final.history()) == 64

    def test_sub_budgets_never_exceed_the_total(self) -> None:
        store, name = self.make_store(), _name()
        total = Budget(epsilon=1.0, ledger=store, name=name)
        for who in ("a", "b", "c"):
            total.sub_budget(who, epsilon=0.5)  # caps add up to 1.5 > 1
        accepted: dict[str, int] = {}
        start = threading.Barrier(3)

        def analyst(who: str) -> None:
            sub = Budget.open(self.other_handle(store), name).sub_budget(who)
            start.wait()
            n = 0
            for _ in range(40):
                try:
                    sub.charge(epsilon=STEP, metadata={"who": who})
                    n += 1
                except BudgetExceededError:
                    pass
            accepted[who] = n

        threads = [threading.Thread(target=analyst, args=(w,)) for w in ("a", "b", "c")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        final = Budget.open(self.other_handle(store), name)
        assert sum(accepted.values()) == 64
        assert all(n <= 32 for n in accepted.values())  # each cap: 0.5 / 2^-6
        assert final.spent_epsilon_exact == Fraction(1)
        for who, n in accepted.items():
            assert len(final.history(analyst=who)) == n
            assert final.sub_budget(who).spent == (n * STEP, 0.0)

    def test_sub_budget_caps_are_fixed(self) -> None:
        store, name = self.make_store(), _name()
        total = Budget(epsilon=1.0, delta=1e-6, ledger=store, name=name)
        bob = total.sub_budget("bob", epsilon=0.25, delta=1e-7)
        assert total.sub_budget("bob", epsilon=0.25, delta=1e-7).budget == bob.budget
        with pytest.raises(LedgerError, match="exists with caps"):
            total.sub_budget("bob", epsilon=0.5, delta=1e-7)
        with pytest.raises(LedgerError, match="no sub-budget"):
            total.sub_budget("carol")
        with pytest.raises(PrivacyParameterError):
            total.sub_budget("carol", epsilon=float("nan"))
        with pytest.raises(PrivacyParameterError):
            total.sub_budget("carol", epsilon=-1.0)
        bob.charge(epsilon=0.25, delta=1e-7)
        before = (total.spent, bob.spent, len(total.history()))
        with pytest.raises(BudgetExceededError, match="'bob'"):
            bob.charge(LaplaceEvent(noise_multiplier=1e6))
        assert (total.spent, bob.spent, len(total.history())) == before
        assert bob.remaining == (0.0, 0.0)
        assert total.sub_budgets() == ["bob"]

    def test_refused_charges_write_nothing(self) -> None:
        store, name = self.make_store(), _name()
        budget = Budget(epsilon=1.0, ledger=store, name=name)
        budget.charge(epsilon=0.75)
        with pytest.raises(BudgetExceededError):
            budget.charge(epsilon=0.5)
        with pytest.raises(PrivacyParameterError):
            budget.charge(epsilon=0.1, metadata={"x": float("nan")})
        with pytest.raises(PrivacyParameterError):
            budget.charge(epsilon=0.1, metadata={1: "x"})  # type: ignore[dict-item]
        assert len(store.read(name)) == 1
        assert Budget.open(self.other_handle(store), name).spent == (0.75, 0.0)

    # ------------------------------------------------------------------ runs of records
    def test_append_many_is_compare_and_append_of_a_whole_run(self) -> None:
        store, name = self.make_store(), _name()
        if not hasattr(store, "append_many"):
            pytest.skip("this store writes one record per append")
        store.define(name, "{}")
        run = [_record(1, payload='{"r": 1}'), _record(2, analyst="bob"), _record(3)]
        assert store.append_many(name, run)  # type: ignore[attr-defined]
        assert self.other_handle(store).read(name) == run  # in order, exactly as written
        # another writer's run starting at a taken seq, or after a gap: nothing of it lands
        assert not store.append_many(name, [_record(3, payload='{"l": 1}'), _record(4)])  # type: ignore[attr-defined]
        assert not store.append_many(name, [_record(5), _record(6)])  # type: ignore[attr-defined]
        assert store.read(name) == run
        # the sequence continues from the run's last record, by either kind of append
        assert store.append(name, _record(4))
        assert store.append_many(name, [_record(5)])  # type: ignore[attr-defined]
        assert [r.seq for r in store.read(name)] == [1, 2, 3, 4, 5]
        assert [r.seq for r in store.read(name, 3)] == [4, 5]

    def test_append_many_refuses_a_bad_run_and_writes_none_of_it(self) -> None:
        store, name = self.make_store(), _name()
        if not hasattr(store, "append_many"):
            pytest.skip("this store writes one record per append")
        with pytest.raises(LedgerError):
            store.append_many(name, [_record(1)])  # type: ignore[attr-defined]  # not defined
        store.define(name, "{}")
        for bad in (
            [],  # empty
            [_record(1), _record(3)],  # not numbered one after another
            [_record(1), _record(1)],
            [_record(2), _record(1)],
            [_record(1), _record(2, kind="refund"), _record(3)],  # malformed in the middle
            [_record(1), _record(2), _record(3, time=3)],  # malformed last
            [_record(0), _record(1)],
        ):
            with pytest.raises(LedgerError):
                store.append_many(name, bad)  # type: ignore[attr-defined]
        assert store.read(name) == []
        assert store.append_many(name, [_record(1), _record(2)])  # type: ignore[attr-defined]

    def test_concurrent_runs_land_whole_and_never_interleave(self) -> None:
        store, name = self.make_store(), _name()
        if not hasattr(store, "append_many"):
            pytest.skip("this store writes one record per append")
        store.define(name, "{}")
        handles = [self.other_handle(store) for _ in range(4)]
        target = 60
        won: list[tuple[int, int, int]] = []  # (writer, first seq, length)
        start = threading.Barrier(len(handles))

        def writer(i: int, handle: Ledger) -> None:
            start.wait()
            size, attempt = i + 1, 0  # writer i writes runs of i + 1 records
            while True:
                stored = handle.read(name)
                first = len(stored) + 1
                if first > target:
                    return
                run = [
                    _record(first + k, payload=json.dumps({"w": i, "a": attempt, "k": k}))
                    for k in range(size)
                ]
                if handle.append_many(name, run):  # type: ignore[attr-defined]
                    won.append((i, first, size))
                attempt += 1

        threads = [threading.Thread(target=writer, args=(i, h)) for i, h in enumerate(handles)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stored = store.read(name)
        assert [r.seq for r in stored] == list(range(1, len(stored) + 1))  # no gap, no repeat
        assert len(stored) == sum(size for _, _, size in won)
        for i, first, size in won:  # each accepted run is there whole, contiguous, alone
            run = [json.loads(r.payload) for r in stored[first - 1 : first - 1 + size]]
            assert [(p["w"], p["k"]) for p in run] == [(i, k) for k in range(size)]
            assert len({p["a"] for p in run}) == 1

    # ------------------------------------------------------------------ group commit of a budget
    def test_concurrent_charges_never_overspend_and_match_the_rows(self) -> None:
        counting = _CountingStore(self.make_store())
        name = _name()
        budget = Budget(epsilon=1.0, ledger=counting, name=name)
        accepted: list[int] = []
        start = threading.Barrier(8)

        def spender() -> None:
            start.wait()
            n = 0
            while True:
                try:
                    budget.charge(epsilon=STEP, metadata={"t": threading.get_ident()})
                except BudgetExceededError:
                    break
                n += 1
            accepted.append(n)

        threads = [threading.Thread(target=spender) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rows = self.other_handle(counting.inner).read(name)
        assert sum(accepted) == 64 == len(rows)  # exactly the capacity: none lost, none over
        assert [r.seq for r in rows] == list(range(1, 65))
        assert sum(counting.written) == 64  # every write the budget made is a stored row
        assert budget.spent_epsilon_exact == Fraction(1)
        assert Budget.open(self.other_handle(counting.inner), name).spent_epsilon_exact == 1

    def test_charges_queued_behind_a_write_share_one_commit(self) -> None:
        counting = _CountingStore(self.make_store(), hold_first=True)
        name = _name()
        budget = Budget(epsilon=1.0, ledger=counting, name=name)
        waiting = 6
        errors: dict[int, BaseException] = {}

        def charge(i: int, epsilon: float) -> None:
            try:
                budget.charge(epsilon=epsilon, metadata={"i": i})
            except BaseException as exc:  # the test reads it below
                errors[i] = exc

        first = threading.Thread(target=charge, args=(0, 0.5))
        first.start()
        assert counting.entered.wait(30)  # the first charge is inside the store's write
        # while it writes, six more queue up: five small ones and one that cannot fit after
        # 0.5 (0.75), whatever their order
        others = [
            threading.Thread(target=charge, args=(i, 0.75 if i == 3 else STEP))
            for i in range(1, waiting + 1)
        ]
        for t in others:
            t.start()
        _wait_for(lambda: len(budget._book.queue) == waiting)
        counting.release.set()
        for t in [first, *others]:
            t.join()
        assert set(errors) == {3} and isinstance(errors[3], BudgetExceededError)
        # one write for the first charge, ONE for the five accepted ones queued behind it
        assert counting.written == [1, waiting - 1]
        rows = self.other_handle(counting.inner).read(name)
        assert [r.seq for r in rows] == list(range(1, waiting + 1))
        assert sorted(json.loads(r.payload)["metadata"]["i"] for r in rows) == [0, 1, 2, 4, 5, 6]
        assert budget.spent_epsilon_exact == Fraction(1, 2) + 5 * Fraction(STEP)
        again = Budget.open(self.other_handle(counting.inner), name)
        assert again.to_json() == budget.to_json()

    def test_a_store_without_append_many_gets_one_write_per_charge(self) -> None:
        counting = _SingleWriteStore(self.make_store(), hold_first=True)
        name = _name()
        budget = Budget(epsilon=1.0, ledger=counting, name=name)
        threads = [
            threading.Thread(target=budget.charge, kwargs={"epsilon": STEP}) for _ in range(4)
        ]
        threads[0].start()
        assert counting.entered.wait(30)
        for t in threads[1:]:
            t.start()
        _wait_for(lambda: len(budget._book.queue) == 3)
        counting.release.set()
        for t in threads:
            t.join()
        assert counting.written == [1, 1, 1, 1]  # queued together, still written one by one
        rows = self.other_handle(counting.inner).read(name)
        assert [r.seq for r in rows] == [1, 2, 3, 4]
        assert budget.spent_epsilon_exact == 4 * Fraction(STEP)


def _wait_for(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds (a liveness guard of 30 s, never a measured time)."""
    for _ in range(30_000):
        if condition():
            return
        time.sleep(0.001)
    raise AssertionError("the condition never held")


class _CountingStore:
    """A store that hands everything to ``inner`` and counts the records of each write
    (``written``: one entry per successful ``append``/``append_many``). With ``hold_first``,
    the first write waits inside the store until ``release`` is set (``entered`` says it is
    there), so charges made meanwhile queue up behind it."""

    def __init__(self, inner: Ledger, *, hold_first: bool = False) -> None:
        self.inner = inner
        self.written: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        if not hold_first:
            self.release.set()

    def _hold(self) -> None:
        if not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(30)

    def define(self, name: str, definition: str) -> str:
        return self.inner.define(name, definition)

    def definition(self, name: str) -> str | None:
        return self.inner.definition(name)

    def read(self, name: str, after: int = 0) -> list[LedgerRecord]:
        return self.inner.read(name, after)

    def append(self, name: str, record: LedgerRecord) -> bool:
        self._hold()
        ok = self.inner.append(name, record)
        if ok:
            self.written.append(1)
        return ok

    def append_many(self, name: str, records: Sequence[LedgerRecord]) -> bool:
        self._hold()
        ok = bool(self.inner.append_many(name, records))  # type: ignore[attr-defined]
        if ok:
            self.written.append(len(records))
        return ok

    def names(self) -> list[str]:
        return self.inner.names()

    def close(self) -> None:
        self.inner.close()


class _SingleWriteStore(_CountingStore):
    """A :class:`_CountingStore` that offers no ``append_many`` (a third-party store's case)."""

    append_many = None  # type: ignore[assignment]
