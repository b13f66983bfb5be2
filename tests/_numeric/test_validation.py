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

BAD_TYPES = [
    True,
    False,
    np.bool_(True),
    "1.0",
    1 + 0j,
    None,
    [1.0],
    (1.0,),
    {"e": 1},
    np.array([1.0, 2.0]),
    object(),
]
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
    for bad, kw in (
        (0.0, {"open_low": True}),
        (1.0, {"open_high": True}),
        (1.0000001, {}),
        (math.nan, {}),
    ):
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


# ------------------------------------------------------------- one argument order for all
def _scalar_checks() -> list[object]:
    from dpkit._numeric import validation

    return [
        getattr(validation, n)
        for n in validation.__all__
        if n.startswith("check_") and n != "check_bounds"
    ]


def test_every_check_takes_value_then_name() -> None:
    import inspect

    checks = _scalar_checks()
    assert len(checks) == 10  # all but check_bounds (two values, then their names)
    for fn in checks:
        params = list(inspect.signature(fn).parameters.values())  # type: ignore[arg-type]
        assert params[0].name in ("value", "values"), fn
        assert params[1].name == "name", fn
        assert params[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, fn
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[2:]), fn


def test_the_name_given_second_appears_in_the_message() -> None:
    from dpkit._numeric.validation import check_finite, check_nonnegative, check_positive

    for fn in (
        check_finite,
        check_positive,
        check_nonnegative,
        check_epsilon,
        check_delta,
        check_mu,
        check_sensitivity,
        check_probability,
    ):
        with pytest.raises(PrivacyParameterError, match="my_param"):
            fn(math.nan, "my_param")
    with pytest.raises(PrivacyParameterError, match="my_count"):
        check_integer(1.5, "my_count")


@pytest.mark.parametrize(
    "fn_name",
    [
        "check_finite",
        "check_positive",
        "check_nonnegative",
        "check_epsilon",
        "check_delta",
        "check_mu",
        "check_sensitivity",
        "check_probability",
        "check_integer",
        "check_real_array",
    ],
)
def test_a_call_in_the_old_order_fails_loudly(fn_name: str) -> None:
    from dpkit._numeric import validation

    fn = getattr(validation, fn_name)
    with pytest.raises((TypeError, PrivacyParameterError)):
        fn("scale", 0.5)  # name first: never a silent check of the wrong thing
    with pytest.raises(TypeError, match="name must be a str"):
        fn(0.5, 0.5)


# ------------------------------------------------------------------------ real arrays
def test_real_array_accepts_and_copies() -> None:
    from dpkit._numeric.validation import check_real_array

    src = np.array([0, 1, 2], dtype=np.int64)
    out = check_real_array(src, "eps", low=0.0)
    assert out.dtype == np.float64 and out.tolist() == [0.0, 1.0, 2.0]
    out[0] = 5.0
    assert src[0] == 0
    assert check_real_array([0.0, 1.0], "d", low=0.0, high=1.0).tolist() == [0.0, 1.0]


@pytest.mark.parametrize(
    ("values", "kwargs", "match"),
    [
        ([], {}, "non-empty 1-d"),
        ([[1.0]], {}, "non-empty 1-d"),
        (1.0, {}, "non-empty 1-d"),
        ([True, False], {}, "real numbers"),
        (["1"], {}, "real numbers"),
        ([1 + 0j], {}, "real numbers"),
        ([0.5, math.nan], {}, r"xs\[1\] must be finite"),
        ([math.inf], {}, r"xs\[0\] must be finite"),
        ([-1e-300], {"low": 0.0}, "out of range"),
        ([1.0 + 2**-52], {"high": 1.0}, "out of range"),
        ([1.0], {"high": 1.0, "high_open": True}, "out of range"),
    ],
)
def test_real_array_refuses(values: object, kwargs: dict[str, object], match: str) -> None:
    from dpkit._numeric.validation import check_real_array

    with pytest.raises(PrivacyParameterError, match=match):
        check_real_array(values, "xs", **kwargs)  # type: ignore[arg-type]


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=20))
def test_real_array_agrees_with_the_scalar_check(xs: list[float]) -> None:
    from dpkit._numeric.validation import check_nonnegative, check_real_array

    scalar_ok = True
    try:
        for x in xs:
            check_nonnegative(x, "x")
    except PrivacyParameterError:
        scalar_ok = False
    try:
        check_real_array(xs, "xs", low=0.0)
        array_ok = True
    except PrivacyParameterError:
        array_ok = False
    assert array_ok == scalar_ok
