"""Directed rounding of privacy arithmetic.

Privacy bounds are computed exactly (``fractions.Fraction`` from the doubles involved, which are
exact rationals) and then rounded to a double *towards more privacy spent*: ``up`` gives the
smallest double >= the exact value (use it for epsilon, delta, sensitivity, spent budget);
``down`` the largest double <= it (use it for remaining budget, noise scales that must not grow
optimistic). ``sqrt_up``/``sqrt_down`` do the same for square roots of exact rationals. Where no
exact arithmetic is possible (logarithms, exponentials), ``float_up``/``float_down`` widen the
result of a few libm calls by a relative margin that covers their error. Every function
documents its direction; this module is the one home of these helpers.
"""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = [
    "add_up",
    "div_down",
    "div_up",
    "down",
    "float_down",
    "float_up",
    "mul_up",
    "sqrt_down",
    "sqrt_up",
    "up",
]


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
    NaN becomes ``+inf`` (never let a NaN through as a privacy bound); infinities stay.
    """
    if math.isnan(x):
        return math.inf
    if math.isinf(x):
        return x
    return math.nextafter(x + abs(x) * 2.0**-40, math.inf)


def float_down(x: float) -> float:
    """Mirror image of :func:`float_up`: a lower bound of the exact value (NaN gives ``-inf``)."""
    if math.isnan(x):
        return -math.inf
    if math.isinf(x):
        return x
    return math.nextafter(x - abs(x) * 2.0**-40, -math.inf)


def sqrt_up(x: Fraction | int | float) -> float:
    """Smallest double whose exact square is >= x (rounds ``sqrt(x)`` up; 0.0 for x <= 0).

    The square root is taken of ``x * 4^k`` scaled into the normal range, so neither tiny nor
    huge x underflows or overflows on the way; the result is then nudged up until its exact
    square is at least x, and down while the next double below still qualifies (a couple of
    steps at most; ``math.sqrt`` is correctly rounded). ``+inf`` beyond the double range.
    """
    q = Fraction(x) if not isinstance(x, float) or math.isfinite(x) else None
    if q is None:
        if math.isnan(x):
            raise ValueError("sqrt_up of NaN")
        return math.inf if x > 0 else 0.0
    if q <= 0:
        return 0.0
    k = (q.denominator.bit_length() - q.numerator.bit_length()) // 2
    y = q * Fraction(4) ** k if k >= 0 else q / Fraction(4) ** (-k)
    try:
        r = math.ldexp(math.sqrt(float(y)), -k)
    except OverflowError:
        return math.inf
    if math.isinf(r):
        return r
    if r == 0.0:
        r = math.nextafter(0.0, 1.0)
    while Fraction(r) ** 2 < q:
        r = math.nextafter(r, math.inf)
        if math.isinf(r):
            return r
    while r > 0.0 and Fraction(below := math.nextafter(r, 0.0)) ** 2 >= q:
        r = below
    return r


def sqrt_down(x: Fraction | int | float) -> float:
    """Largest double whose exact square is <= x (rounds ``sqrt(x)`` down; 0.0 for x <= 0)."""
    r = sqrt_up(x)
    if math.isinf(r):
        return _MAX
    q = Fraction(x)
    while r > 0.0 and Fraction(r) ** 2 > q:
        r = math.nextafter(r, 0.0)
    return r
