"""Directed rounding of privacy arithmetic.

Privacy bounds are computed exactly (``fractions.Fraction`` from the doubles involved, which are
exact rationals) and then rounded to a double *towards more privacy spent*: ``up`` gives the
smallest double >= the exact value (use it for epsilon, delta, sensitivity, spent budget);
``down`` the largest double <= it (use it for remaining budget, noise scales that must not grow
optimistic). Every function documents its direction.
"""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["add_up", "div_down", "div_up", "down", "float_down", "float_up", "mul_up", "up"]


_MAX = 1.7976931348623157e308


def _to_float(x: Fraction | int | float) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def up(x: Fraction | int | float) -> float:
    """Smallest double >= x (rounds towards +inf; beyond the double range: +inf)."""
    f = _to_float(x)
    if f == -math.inf:
        return -_MAX
    if math.isinf(f):
        return f
    if Fraction(f) < Fraction(x):
        f = math.nextafter(f, math.inf)
    return f


def down(x: Fraction | int | float) -> float:
    """Largest double <= x (rounds towards -inf; beyond the double range: -inf)."""
    f = _to_float(x)
    if f == math.inf:
        return _MAX
    if math.isinf(f):
        return f
    if Fraction(f) > Fraction(x):
        f = math.nextafter(f, -math.inf)
    return f


def add_up(*terms: float) -> float:
    """Exact sum of doubles, rounded up."""
    return up(sum((Fraction(t) for t in terms), Fraction(0)))


def mul_up(a: float, b: float) -> float:
    """Exact product of two doubles, rounded up."""
    return up(Fraction(a) * Fraction(b))


def div_up(a: float, b: float) -> float:
    """Exact quotient a / b of two doubles (b != 0), rounded up."""
    return up(Fraction(a) / Fraction(b))


def div_down(a: float, b: float) -> float:
    """Exact quotient a / b of two doubles (b != 0), rounded down."""
    return down(Fraction(a) / Fraction(b))


def float_up(x: float) -> float:
    """Inflate a result of a few libm operations so it bounds the exact value from above.

    CPython's ``math`` functions are accurate to about one ulp each; a chain of a handful of
    them is therefore within a relative ``1e-15`` of the exact value. We add a relative
    ``2**-40`` (about ``9e-13``) and one more ulp, which covers that error with a wide margin.
    Used only where exact rational arithmetic is impossible (logarithms, exponentials).
    """
    if math.isnan(x):
        return math.inf  # never let a NaN through as a privacy bound
    if math.isinf(x):
        return x
    return math.nextafter(x + abs(x) * 2.0**-40, math.inf)


def float_down(x: float) -> float:
    """Mirror image of :func:`float_up`: a lower bound of the exact value."""
    if math.isnan(x):
        return -math.inf
    if math.isinf(x):
        return x
    return math.nextafter(x - abs(x) * 2.0**-40, -math.inf)
