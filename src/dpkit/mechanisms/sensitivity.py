"""Sensitivities of common queries under each neighbouring relation (Dwork and Roth, Def. 3.1).

* add/remove one record (symmetric difference 1);
* replace one record (same size).

Every sensitivity is computed exactly from the doubles given and rounded *up* (a sensitivity
rounded down would under-charge every mechanism calibrated with it); beyond the double range it
is ``inf``, which the mechanisms refuse.
"""

from __future__ import annotations

from fractions import Fraction

from dpkit._numeric.rounding import up
from dpkit._numeric.validation import check_bounds, check_integer
from dpkit.events import Neighbouring, as_neighbouring

__all__ = ["bounded_mean_sensitivity", "bounded_sum_sensitivity", "count_sensitivity"]


def count_sensitivity(*, neighbouring: str | Neighbouring) -> float:
    """Number of records matching a predicate: 1 under both relations."""
    as_neighbouring(neighbouring)
    return 1.0


def bounded_sum_sensitivity(
    *, lower: float, upper: float, neighbouring: str | Neighbouring
) -> float:
    """Sum of values clamped to [lower, upper].

    add/remove: ``max(|lower|, |upper|)`` (one value appears or disappears);
    replace: ``upper - lower`` (one value changes), rounded up.
    """
    lo, hi = check_bounds(lower, upper)
    if as_neighbouring(neighbouring) is Neighbouring.ADD_REMOVE:
        return max(abs(lo), abs(hi))
    return up(Fraction(hi) - Fraction(lo))


def bounded_mean_sensitivity(
    *, lower: float, upper: float, n: int, neighbouring: str | Neighbouring
) -> float:
    """Mean of values clamped to [lower, upper] over datasets of at least ``n`` records (public).

    replace (size fixed at n): ``(upper - lower) / n``.
    add/remove: adding x to a dataset of m >= n records moves the mean by
    ``(x - mean) / (m + 1)``, so ``(upper - lower) / (n + 1)``. Both rounded up.
    """
    lo, hi = check_bounds(lower, upper)
    size = check_integer(n, name="n", minimum=1)
    width = Fraction(hi) - Fraction(lo)
    if as_neighbouring(neighbouring) is Neighbouring.ADD_REMOVE:
        return up(width / (size + 1))
    return up(width / size)
