"""The shared validator refuses every malformed privacy parameter with a message naming it."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpkit._numeric.validation import (
    check_bounds,
    check_delta,
    check_epsilon,
    check_integer,
    check_mu,
    check_probability,
    check_sensitivity,
)
from dpkit.errors import DPKitError, PrivacyParameterError

BAD_TYPES = [True, False, np.bool_(True), "1.0", 1 + 0j, None, [1.0], (1.0,), {"e": 1},
             np.array([1.0, 2.0]), object()]
NON_FINITE = [math.nan, math.inf, -math.inf, np.float64("nan"), np.float32("inf")]


@pytest.mark.parametrize("bad", BAD_TYPES + NON_FINITE + [0.0, -0.0, -1.0, -1e-300])
def test_epsilon_refuses(bad: object) -> None:
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        check_epsilon(bad)


@pytest.mark.parametrize("bad", BAD_TYPES + NON_FINITE + [-1e-300, 1.0, 1.5, -0.5])
def test_delta_refuses(bad: object) -> None:
    with pytest.raises(PrivacyParameterError, match="delta"):
        check_delta(bad)


def test_message_names_parameter_and_value() -> None:
    with pytest.raises(PrivacyParameterError) as info:
        check_epsilon(-2.5, name="epsilon_total")
    assert "epsilon_total" in str(info.value) and "-2.5" in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, DPKitError)


def test_accepts_numeric_types_and_returns_float() -> None:
    for v in (1, 1.0, np.float32(1.0), np.int64(1), Fraction(1, 1), np.array(1.0)):
        out = check_epsilon(v)
        assert type(out) is float and out == 1.0
    assert check_delta(0.0) == 0.0
    with pytest.raises(PrivacyParameterError):
        check_delta(0.0, allow_zero=False)
    assert check_epsilon(0.0, allow_zero=True) == 0.0
    assert check_epsilon(math.inf, allow_inf=True) == math.inf


def test_probability_bounds_and_open_ends() -> None:
    assert check_probability(0.0) == 0.0 and check_probability(1.0) == 1.0
    for bad, kw in ((0.0, {"open_low": True}), (1.0, {"open_high": True}), (1.0000001, {}),
                    (math.nan, {})):
        with pytest.raises(PrivacyParameterError):
            check_probability(bad, **kw)


def test_integer_and_bounds() -> None:
    assert check_integer(5, name="count", minimum=0) == 5
    for bad in (True, 1.0, "3", -1, None):
        with pytest.raises(PrivacyParameterError, match="count"):
            check_integer(bad, name="count", minimum=0)
    assert check_bounds(-1, 2) == (-1.0, 2.0)
    with pytest.raises(PrivacyParameterError, match="lower"):
        check_bounds(3.0, 2.0)
    with pytest.raises(PrivacyParameterError):
        check_bounds(math.nan, 2.0)
    with pytest.raises(PrivacyParameterError, match="mu"):
        check_mu(math.nan)
    with pytest.raises(PrivacyParameterError, match="sensitivity"):
        check_sensitivity(0.0)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_epsilon_accepts_exactly_positive_finite(x: float) -> None:
    if math.isfinite(x) and x > 0:
        assert check_epsilon(x) == x
    else:
        with pytest.raises(PrivacyParameterError):
            check_epsilon(x)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_delta_accepts_exactly_unit_interval(x: float) -> None:
    if 0.0 <= x < 1.0:
        assert check_delta(x) == x
    else:
        with pytest.raises(PrivacyParameterError):
            check_delta(x)
