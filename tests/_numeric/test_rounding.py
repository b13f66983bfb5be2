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


# ------------------------------------------------------------------ square roots, certified
fractions = st.fractions(min_value=0, max_value=10**300, max_denominator=10**30)
doubles = st.floats(min_value=0.0, max_value=1.7976931348623157e308)


@given(st.one_of(fractions, doubles.map(Fraction), st.integers(0, 10**400).map(Fraction)))
def test_sqrt_up_and_down_are_the_tightest_certified_doubles(x: Fraction) -> None:
    from dpkit._numeric.rounding import sqrt_down, sqrt_up

    u, d = sqrt_up(x), sqrt_down(x)
    if math.isinf(u):  # only beyond the double range
        assert x > Fraction(1.7976931348623157e308) ** 2
        assert d == 1.7976931348623157e308
        return
    assert Fraction(u) ** 2 >= x >= Fraction(d) ** 2  # exact: rationals, no rounding
    # tight: the double below u is too small, the double above d too large
    assert u == 0.0 or Fraction(math.nextafter(u, 0.0)) ** 2 < x
    assert Fraction(math.nextafter(d, math.inf)) ** 2 > x
    assert u == d or math.nextafter(d, math.inf) == u


def test_sqrt_edge_cases() -> None:
    from dpkit._numeric.rounding import sqrt_down, sqrt_up

    assert sqrt_up(Fraction(4)) == 2.0 == sqrt_down(4) and sqrt_up(0.0) == 0.0 == sqrt_down(0)
    assert sqrt_up(Fraction(-1)) == 0.0 and sqrt_up(math.inf) == math.inf
    tiny = Fraction(1, 2**1074) ** 2  # below the square of the smallest subnormal
    assert sqrt_up(tiny) == 5e-324 and sqrt_down(tiny) == 5e-324
    assert sqrt_up(tiny / 2) == 5e-324 and sqrt_down(tiny / 2) == 0.0
    r = math.sqrt(2.0)  # correctly rounded; this double happens to lie above sqrt(2)
    assert Fraction(r) ** 2 > 2
    assert sqrt_up(2.0) == r and sqrt_down(2.0) == math.nextafter(r, 0.0)


# ----------------------------------------------------------- float_up / float_down vs mpmath
@given(st.floats(min_value=1e-300, max_value=1e300))
def test_float_up_and_down_bracket_libm_chains(x: float) -> None:
    import mpmath

    from dpkit._numeric.rounding import float_down, float_up

    mpmath.mp.prec = 200
    for computed, exact in (
        (math.log(x), mpmath.log(mpmath.mpf(x))),
        (math.log1p(x), mpmath.log1p(mpmath.mpf(x))),
        (math.exp(-x) if x < 700 else 0.0, mpmath.exp(-mpmath.mpf(x))),
        (
            math.log(math.expm1(1.0 / x)) if x > 1e-2 else 1.0 / x,
            mpmath.log(mpmath.expm1(1 / mpmath.mpf(x))) if x > 1e-2 else 1 / mpmath.mpf(x),
        ),
    ):
        if computed == 0.0:  # exp underflow: 0 is a lower bound, float_up(0) is 0
            assert float_down(computed) <= exact
            continue
        assert mpmath.mpf(float_up(computed)) >= exact
        assert mpmath.mpf(float_down(computed)) <= exact


def test_float_up_and_down_special_values() -> None:
    from dpkit._numeric.rounding import float_down, float_up

    assert float_up(math.nan) == math.inf and float_down(math.nan) == -math.inf
    assert float_up(math.inf) == math.inf and float_down(-math.inf) == -math.inf
    assert float_up(0.0) == 5e-324 and float_down(0.0) == -5e-324
    assert float_up(1.0) > 1.0 + 2.0**-41 and float_down(1.0) < 1.0 - 2.0**-41
