"""An analyst's share of a budget: its own cap, checked together with the budget's total."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dpkit._numeric.display import fmt
from dpkit._numeric.validation import check_integer
from dpkit.accounting._budget import kinds
from dpkit.accounting._budget.filter import Account, check_metadata, to_event
from dpkit.accounting._budget.records import ChargeCost, ChargeRecord, Pair
from dpkit.accounting._budget.replay import Book

if TYPE_CHECKING:
    from dpkit.accounting.budget import Budget

__all__ = ["SubBudget"]


class SubBudget:
    """An analyst's share of a :class:`Budget` (made by :meth:`Budget.sub_budget`).

    It has the budget's ``charge``/``can_charge``/``cost_of``/``reserve``/``spent``/``remaining``
    API. A charge is accepted only if it fits both the analyst's cap and the parent's total, and
    is recorded as one ledger record under the parent, so no interleaving of analysts (threads
    or processes) can exceed the total.
    """

    def __init__(self, parent: Budget, book: Book, analyst: str) -> None:
        self._parent = parent
        self._book = book
        self._analyst = analyst

    @property
    def analyst(self) -> str:
        """The analyst's name (the sub-budget's name in the ledger)."""
        return self._analyst

    @property
    def parent(self) -> Budget:
        """The budget whose total this sub-budget draws on."""
        return self._parent

    def _own(self) -> Account:
        return self._book.caps[self._analyst]

    @property
    def budget(self) -> tuple[float | None, float]:
        """The analyst's own cap, ``(epsilon, delta)`` as given."""
        terms = self._own().terms
        return terms.epsilon, terms.delta

    @property
    def spent(self) -> tuple[float, float]:
        """What the analyst has spent, read like :attr:`Budget.spent` (as of the last read)."""
        return Pair(*kinds.spent_pair_of(self._own().state))

    @property
    def remaining(self) -> tuple[float, float]:
        """What the analyst may still spend: the smaller, component by component, of what
        remains of the own cap and of the total (each rounded down)."""
        own = self._own()
        mine = kinds.remaining_exact(own.terms, own.state)
        total = self._parent.remaining
        return Pair(min(mine[0], total[0]), min(mine[1], total[1]), of=self.budget)

    def charge(
        self,
        event: Any = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Charge the analyst's cap and the total at once (see :meth:`Budget.charge`); refused
        with :class:`~dpkit.errors.BudgetExceededError` if either would be exceeded."""
        book = self._book
        ev = to_event(book.total.terms, event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        meta = check_metadata(metadata)
        book.charge(ev, n, meta, self._analyst)

    def can_charge(
        self,
        event: Any = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
    ) -> bool:
        """Whether :meth:`charge` would accept this charge now (changes nothing)."""
        ev = to_event(self._book.total.terms, event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        return self._book.can_charge(ev, n, self._analyst)

    def cost_of(
        self,
        event: Any = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
    ) -> ChargeCost:
        """What the charge would cost, read by the analyst's own cap (changes nothing)."""
        book = self._book
        ev = to_event(book.total.terms, event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        with book.lock:
            book.sync()
            return self._own().cost_of(ev, n)

    def reserve(
        self,
        event: Any = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
        metadata: Mapping[str, Any] | None = None,
    ) -> contextlib.AbstractContextManager[SubBudget]:
        """Charge now (see :meth:`Budget.reserve`: at the call, with or without ``with``) and
        return a context manager for the release (never refunded)."""
        self.charge(event, epsilon=epsilon, delta=delta, count=count, metadata=metadata)
        return contextlib.nullcontext(self)

    def refresh(self) -> None:
        """Read what other writers appended to the ledger (see :meth:`Budget.refresh`)."""
        self._parent.refresh()

    def history(self) -> list[ChargeRecord]:
        """The analyst's charges, in order."""
        return self._parent.history(analyst=self._analyst)

    def __repr__(self) -> str:
        e, d = self.spent
        return (
            f"SubBudget(analyst={self._analyst!r}, budget={self.budget!r}, "
            f"spent=({fmt(e)}, {fmt(d)}), parent={self._parent.name!r})"
        )
