"""Directed rounding brackets the exact rational value."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from dpkit._numeric.rounding import add_up, div_down, div_up, down, mul_up, up

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
positive = st.floats(min_value=1e-300, max_value=1e300)


@given(st.fractions(max_denominator=10**12))
def test_up_and_down_bracket_and_are_tight(x: Fraction) -> None:
    u, d = up(x), down(x)
    assert Fraction(d) <= x <= Fraction(u)
    assert u == d or math.nextafter(d, math.inf) == u


@given(finite, finite, finite)
def test_add_up_is_an_upper_bound(a: float, b: float, c: float) -> None:
    assert Fraction(add_up(a, b, c)) >= Fraction(a) + Fraction(b) + Fraction(c)


@given(positive, positive)
def test_products_and_quotients(a: float, b: float) -> None:
    prod = mul_up(a, b)
    assert prod == math.inf or Fraction(prod) >= Fraction(a) * Fraction(b)
    quo_up, quo_down = div_up(a, b), div_down(a, b)
    exact = Fraction(a) / Fraction(b)
    assert quo_up == math.inf or Fraction(quo_up) >= exact
    assert Fraction(quo_down) <= exact


def test_overflow_goes_to_the_safe_side() -> None:
    huge = Fraction(10) ** 400
    assert up(huge) == math.inf and down(huge) == 1.7976931348623157e308
    assert down(-huge) == -math.inf and up(-huge) == -1.7976931348623157e308


def test_known_case() -> None:
    third_up, third_down = div_up(1.0, 3.0), div_down(1.0, 3.0)
    assert third_up > third_down and math.nextafter(third_down, 1.0) == third_up
