"""One walk over composite events for every accountant whose costs simply add up.

Pure and approximate DP (basic composition: epsilons and deltas add, Dwork and Roth Thm 3.16),
zCDP (rho adds, Bun and Steinke 2016 Lemma 2.3), approximate zCDP (rho and delta add) and
mu-GDP (mu^2 adds, Dong, Roth and Su Cor. 3.3) all price a :class:`ComposedEvent` as the sum
of its parts and a :class:`SelfComposedEvent` as ``count`` times its part. Each accountant gives
the cost of one leaf event as a tuple whose first entry may be ``math.inf`` (a non-private
release: it absorbs everything added to it) and whose other entries are exact ``Fraction``
values; the sums are exact.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from dpkit.accounting._base import PrivacyAccountant
from dpkit.events import ComposedEvent, DpEvent, SelfComposedEvent

__all__ = ["AdditiveAccountant", "sum_of_parts"]


def sum_of_parts(
    event: ComposedEvent | SelfComposedEvent, cost_of: Callable[[DpEvent], Any], width: int
) -> Any:
    """The exact sum of ``cost_of`` over the parts of ``event`` (a ``width``-tuple), or ``None``
    when ``cost_of`` cannot price one of them (the accountant refuses the whole event)."""
    parts: list[tuple[DpEvent, int]]
    if isinstance(event, ComposedEvent):
        parts = [(e, 1) for e in event.events]
    else:
        parts = [(event.event, event.count)]
    first: Fraction | float = Fraction(0)
    rest = [Fraction(0)] * (width - 1)
    for inner, n in parts:
        c = cost_of(inner)
        if c is None:
            return None
        if n == 0:
            continue
        if isinstance(c[0], float) or isinstance(first, float):
            first = math.inf
        else:
            first += n * c[0]
        for i in range(1, width):
            rest[i - 1] += n * c[i]
    return (first, *rest)


class AdditiveAccountant(PrivacyAccountant):
    """An accountant whose whole state is the exact sum of per-event costs.

    Subclasses set ``_width`` and implement :meth:`_cost` (the cost tuple of one occurrence of
    an event, ``None`` if unsupported); composition, dry runs and copies are shared. The first
    total is ``math.inf`` once a non-private release has been composed.
    """

    _width: int = 2

    def __init__(self) -> None:
        super().__init__()
        self._totals: tuple[Any, ...] = (Fraction(0),) * self._width

    @staticmethod
    @abc.abstractmethod
    def _cost(event: DpEvent) -> Any:
        """The exact cost of one ``event`` as a tuple of ``_width`` totals, ``None`` if the
        accountant does not support it (each concrete accountant defines its own)."""

    @property
    def _infinite(self) -> bool:
        return isinstance(self._totals[0], float)

    def _walk(self, event: DpEvent, count: int, apply: bool) -> bool:
        cost = self._cost(event)
        if cost is None:
            return False
        if apply and count > 0:
            old = self._totals
            first = (
                math.inf
                if isinstance(cost[0], float) or isinstance(old[0], float)
                else old[0] + count * cost[0]
            )
            self._totals = (first, *(t + count * c for t, c in zip(old[1:], cost[1:], strict=True)))
        return True

    def clone(self) -> Any:
        """An independent copy with the same state (used by budgets to try a charge)."""
        with self._lock:
            new = type(self)()
            new._totals = self._totals
            self._copy_history_to(new)
            return new
