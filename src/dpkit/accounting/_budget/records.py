"""The values a budget hands out, and the first sentence of a budget refusal."""

from __future__ import annotations

import dataclasses
from typing import Any

from dpkit._numeric.display import fmt, left
from dpkit.events import DpEvent

__all__ = ["ChargeCost", "ChargeRecord", "Pair", "Share", "refusal_message"]


class Pair(tuple[float, float]):
    """An ``(epsilon, delta)`` pair that prints rounded: ``(epsilon=1, delta=1e-07)``.

    A plain tuple of the exact doubles otherwise (``pair[0]``, unpacking, ``==`` with a
    tuple); ``.epsilon``/``.delta`` name its parts. A remaining pair knows its total
    (``of``) and shows a residue at most :data:`dpkit._numeric.display.TINY` of it as 0.
    """

    _of: tuple[float | None, float] | None

    def __new__(
        cls, epsilon: float, delta: float, *, of: tuple[float | None, float] | None = None
    ) -> Pair:
        out = super().__new__(cls, (epsilon, delta))
        out._of = of
        return out

    @property
    def epsilon(self) -> float:
        return self[0]

    @property
    def delta(self) -> float:
        return self[1]

    def __repr__(self) -> str:
        e, d = self
        if self._of is not None:
            return f"(epsilon={fmt(left(e, self._of[0]))}, delta={fmt(left(d, self._of[1]))})"
        return f"(epsilon={fmt(e)}, delta={fmt(d)})"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        return (tuple, (tuple(self),))


def _amounts(pairs: list[tuple[str, float]]) -> str:
    return " and ".join(f"{name} {fmt(value)}" for name, value in pairs)


def refusal_message(
    what: str,
    need: list[tuple[str, float]],
    left_now: list[tuple[str, float]],
    total: list[tuple[str, float]],
    fix: str,
    analyst: str | None = None,
    note: str = "",
) -> str:
    """The first sentence of a budget refusal, in rounded numbers: ``This query needs epsilon
    0.5 but only epsilon 0.3 is left of the budget of epsilon 1; ask for less or use a larger
    budget.`` ``need``/``left_now``/``total`` are ``(name, value)`` lists; a remaining value
    at most ``TINY`` of its total is shown as 0; ``note`` follows the total (e.g. its
    ``(epsilon, delta)`` when the budget counts in rho)."""
    totals = dict(total)
    shown = [(name, left(value, totals.get(name))) for name, value in left_now]
    verb = "is" if len(shown) == 1 else "are"
    owner = "the budget" if analyst is None else f"the budget of analyst {analyst!r}"
    return (
        f"This {what} needs {_amounts(need)} but only {_amounts(shown)} {verb} left of "
        f"{owner}, {_amounts(total)}{note}; {fix}."
    )


@dataclasses.dataclass(frozen=True)
class ChargeCost:
    """What one charge costs, as the budget reads it (see :meth:`Budget.cost_of`).

    ``epsilon``/``delta``: the charge on its own as an (epsilon, delta) guarantee: the pair
    charged (pure and basic budgets), or the conversion at the budget's delta (zcdp, gdp, rdp),
    rounded up. ``native``: the cost in the budget's own unit (``unit``: ``"epsilon"`` for a
    pure budget, ``"rho"`` for zcdp, ``"mu"`` for gdp, the charge's own mu; ``None`` for basic
    and rdp). ``pmf_slack``: the floating-point slack the charge adds (zcdp, gdp).
    ``spent_after``: the budget's :attr:`Budget.spent` if the charge were accepted.
    """

    epsilon: float
    delta: float
    native: float | None
    unit: str | None
    pmf_slack: float
    spent_after: tuple[float, float]

    def __str__(self) -> str:
        native = "" if self.unit is None else f"{self.unit}={self.native!r}, "
        return f"{native}(epsilon={self.epsilon!r}, delta={self.delta!r})"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChargeRecord:
    """One charge as the ledger keeps it (see :meth:`Budget.history`).

    ``seq``: its place in the ledger (from 1); ``time``: when it was written (UNIX seconds,
    UTC); ``analyst``: the sub-budget charged (``None``: the total itself); ``event`` and
    ``count``: what was charged; ``metadata``: what the caller attached (a query, a summary);
    ``spent_after``: the total's ``(epsilon, delta)`` spent after it, rounded up.
    """

    seq: int
    time: float
    analyst: str | None
    event: DpEvent
    count: int
    metadata: dict[str, Any]
    spent_after: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class Share:
    """One of k equal parts of a budget's remaining privacy (see :meth:`Budget.split`).

    Fields that do not apply to the budget's method are ``None``. ``rho`` and ``mu`` describe
    Gaussian noise (``mu = sqrt(2 rho)``); ``pmf_slack`` is the floating-point slack one part
    may use.
    """

    epsilon: float | None
    delta: float | None
    rho: float | None
    mu: float | None
    pmf_slack: float | None
