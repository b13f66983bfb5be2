"""Abstract contract tests that every privacy budget (filter) inherits.

Subclass :class:`BudgetContract` (``from budget_contract import BudgetContract``;
``tests/contracts`` is on the pytest ``pythonpath``) and provide ``make_budget()`` (a fresh
budget in filter mode) and ``supported_event()`` (an event of which a few, but not
``max_charges``, fit in the budget).

The contract: a refused charge (over budget, unsupported event, bad count) raises and leaves
everything unchanged (spent, remaining, ledger, saved JSON); concurrent charges from many threads
never overspend and accept exactly as many charges as the same calls made one after another;
``to_json``/``from_json`` round-trips the state, and the rebuilt budget refuses exactly when the
original does.
"""

from __future__ import annotations

import abc
import threading
from typing import Any

import pytest
from accountant_contract import UnknownEvent

from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError, PrivacyParameterError, UnsupportedEventError
from dpkit.events import DpEvent

__all__ = ["BudgetContract"]


def _snapshot(budget: Budget) -> tuple[Any, ...]:
    return budget.spent, budget.remaining, budget.ledger, budget.exceeded, budget.to_json()


def _charge_until_refused(budget: Budget, event: DpEvent, limit: int) -> int:
    for accepted in range(limit):
        try:
            budget.charge(event)
        except BudgetExceededError:
            return accepted
    return limit


class BudgetContract(abc.ABC):
    """Base class of the budget contract tests (see the module docstring)."""

    max_charges: int = 400

    @abc.abstractmethod
    def make_budget(self) -> Budget: ...

    @abc.abstractmethod
    def supported_event(self) -> DpEvent: ...

    def _serial_capacity(self) -> int:
        n = _charge_until_refused(self.make_budget(), self.supported_event(), self.max_charges)
        assert 1 < n < self.max_charges, n
        return n

    # -------------------------------------------------------------- tests
    def test_refused_charge_leaves_the_budget_unchanged(self) -> None:
        budget = self.make_budget()
        event = self.supported_event()
        n = _charge_until_refused(budget, event, self.max_charges)
        assert 1 < n < self.max_charges
        before = _snapshot(budget)
        assert not budget.exceeded
        with pytest.raises(BudgetExceededError):
            budget.charge(event)
        with pytest.raises(UnsupportedEventError):
            budget.charge(UnknownEvent())
        with pytest.raises(PrivacyParameterError):
            budget.charge(event, count=-1)
        with pytest.raises(PrivacyParameterError):
            budget.charge(event, count=True)
        assert _snapshot(budget) == before

    def test_refused_charge_on_a_fresh_budget(self) -> None:
        budget = self.make_budget()
        before = _snapshot(budget)
        with pytest.raises(BudgetExceededError):
            budget.charge(self.supported_event(), count=self.max_charges)
        assert _snapshot(budget) == before
        assert budget.spent == (0.0, 0.0) or budget.spent[0] == 0.0

    def test_threads_never_overspend(self) -> None:
        capacity = self._serial_capacity()
        budget = self.make_budget()
        event = self.supported_event()
        accepted: list[int] = []
        lock = threading.Lock()
        start = threading.Barrier(8)

        def worker() -> None:
            start.wait()
            mine = 0
            for _ in range(capacity):
                try:
                    budget.charge(event)
                    mine += 1
                except BudgetExceededError:
                    pass
            with lock:
                accepted.append(mine)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(accepted) == capacity
        assert not budget.exceeded
        assert sum(n for _, n in budget.ledger) == capacity

    def test_json_round_trip(self) -> None:
        budget = self.make_budget()
        event = self.supported_event()
        budget.charge(event, count=2)
        copy = Budget.from_json(budget.to_json())
        assert copy.spent == budget.spent
        assert copy.remaining == budget.remaining
        assert copy.ledger == budget.ledger
        assert copy.budget == budget.budget
        assert copy.to_json() == budget.to_json()
        left = _charge_until_refused(budget, event, self.max_charges)
        assert _charge_until_refused(copy, event, self.max_charges) == left
        assert copy.spent == budget.spent
