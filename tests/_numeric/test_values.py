"""The one input conversion of the releases (``dpkit._numeric.values.parse_values``).

Decided by type, never by value: for each accepted type no value raises (hypothesis over the
whole type, including NaN, infinities, huge and tiny magnitudes, sNaN); for each refused type
every value raises the same dpkit error naming ``values``. And the mechanisms' releases all go
through it (same behaviour for Laplace, Gaussian, DiscreteLaplace, DiscreteGaussian and
RandomizedResponse).
"""

from __future__ import annotations

import datetime
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit._numeric.values import parse_values
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    RandomizedResponse,
)
from dpkit.noise import RandomSource


def src(seed: int = 0) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


LAP = Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
GAU = Gaussian.from_mu(mu=1.0, sensitivity=1.0)
DL = DiscreteLaplace.from_epsilon(epsilon=1.0, sensitivity=1)
DL_EXACT = DiscreteLaplace.from_epsilon(epsilon=1e-4, sensitivity=1)
DG = DiscreteGaussian.from_sigma(sigma=2.0, sensitivity=1)
RR = RandomizedResponse.from_epsilon(epsilon=1.0)
REAL = [LAP, GAU]
INTEGER = [DL, DL_EXACT, DG]
ALL = [*REAL, *INTEGER, RR]

# ---------------------------------------------------------------------------------------------
# The repros of the issue: each raised (or was accepted) depending on the value.
# ---------------------------------------------------------------------------------------------
HUGE_INTS = [[0, 2**1023], [0, 2**1024], [0, 10**400], [0, -(10**400)], [2**64, 2**63]]


@pytest.mark.parametrize("values", HUGE_INTS, ids=str)
@pytest.mark.parametrize("mech", [*REAL, *INTEGER], ids=lambda m: type(m).__name__)
def test_python_ints_of_any_size_are_released(mech: Any, values: list[int]) -> None:
    out = mech.release(values, source=src())
    assert out.shape == (2,)
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize(
    "value",
    [
        Fraction(10**400),
        Fraction(-(10**400), 3),
        Fraction(1, 3),
        Decimal("sNaN"),
        Decimal("NaN"),
        Decimal("-Infinity"),
        Decimal("1e999999999"),
        Decimal("-1e-999999999"),
        Decimal("0.1"),
        np.longdouble(2) ** 70,
        2**2000,
        0.5,
    ],
    ids=repr,
)
@pytest.mark.parametrize("mech", REAL, ids=lambda m: type(m).__name__)
def test_rational_scalars_are_released_as_floats(mech: Any, value: Any) -> None:
    out = mech.release(value, source=src())
    assert isinstance(out, float)


def test_decimal_and_fraction_special_values_follow_the_rules() -> None:
    g = LAP.granularity
    bound = 2.0**62 * g

    def same(a: Any, b: Any) -> bool:
        return bool(LAP.release([a], source=src(3))[0] == LAP.release([b], source=src(3))[0])

    assert same(Decimal("sNaN"), 0.0) and same(Decimal("NaN"), 0.0)  # NaN is released as 0
    assert same(Decimal("Infinity"), bound) and same(Decimal("-Infinity"), -bound)
    assert same(Decimal("1e999999999"), bound) and same(Fraction(10**400), bound)
    assert same(Decimal("1e-999999999"), 0.0)
    assert same(Decimal("0.5"), 0.5) and same(Fraction(1, 2), 0.5)


REFUSED_SCALARS: list[Any] = [
    "1.5",
    "abc",
    "",
    b"1",
    1 + 2j,
    complex(1, 0),
    [1, "a"],
    np.datetime64("2020-01-01"),
    np.timedelta64(3, "D"),
    datetime.date(2020, 1, 1),
    {1, 2},
    {"a": 1},
    object(),
]
REFUSED_ARRAYS: list[Any] = [
    np.array(["1.5"], dtype=object),
    np.array(["abc"], dtype=object),
    np.array(["1.5", "abc"]),
    np.array([1 + 0j, 2 + 0j]),
    np.array(["2020-01-01"], dtype="datetime64[D]"),
    np.array([1, 2], dtype="timedelta64[s]"),
    np.zeros(2, dtype=[("a", "f8")]),
    [[1, 2], [3]],
    [1.0, "2"],
    [[1.0], [2.0, 3.0]],
]


def _value_id(value: Any) -> str:
    """``repr``, less the memory address of a bare ``object()``: ids must be the same in every
    process (pytest-xdist checks that its workers collected the same tests)."""
    return "object()" if type(value) is object else repr(value)


@pytest.mark.parametrize("values", [*REFUSED_SCALARS, *REFUSED_ARRAYS], ids=_value_id)
@pytest.mark.parametrize("mech", ALL, ids=lambda m: type(m).__name__)
def test_refused_types_raise_a_dpkit_error_naming_values(mech: Any, values: Any) -> None:
    with pytest.raises(PrivacyParameterError, match="values"):
        mech.release(values, source=src())


@pytest.mark.parametrize(
    "values",
    [
        np.array([0.5, 1.5]),
        np.array([1.0, 2.0]),
        np.array([np.nan]),
        np.float32(1.0),
        1.0,
        [1, 2.0],
        [Fraction(1)],
        [Decimal(1)],
        np.array([1.0], np.longdouble),
    ],
    ids=repr,
)
@pytest.mark.parametrize("mech", [*INTEGER, RR], ids=lambda m: type(m).__name__)
def test_integer_mechanisms_refuse_floats_by_type(mech: Any, values: Any) -> None:
    # 0.5 and 1.5 would round (half to even) to 0 and 2: two apart for neighbours one apart.
    with pytest.raises(PrivacyParameterError, match="values"):
        mech.release(values, source=src())


def test_discrete_laplace_half_integers_repro_is_refused() -> None:
    for x in (0.5, 1.5):
        with pytest.raises(PrivacyParameterError, match="values"):
            DL.release(np.array([x]), source=src())


# ---------------------------------------------------------------------------------------------
# Hypothesis: an accepted type never raises, whatever its value
# ---------------------------------------------------------------------------------------------
_big_ints = st.integers(min_value=-(2**1100), max_value=2**1100)
_reals = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    _big_ints,
    st.fractions(),
    st.builds(Fraction, _big_ints, st.integers(1, 2**1100)),
    st.decimals(allow_nan=True, allow_infinity=True),
    # built from a string: exact, beyond any decimal context's exponent range
    st.builds(
        lambda m, e: Decimal(f"{m}E{e}"),
        st.integers(-(10**30), 10**30),
        st.integers(-(10**9), 10**9),
    ),
    st.just(Decimal("sNaN")),
    st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(_reals, max_size=6))
def test_any_list_of_accepted_reals_is_released(values: list[Any]) -> None:
    out = LAP.release(values, source=src())
    assert out.shape == (len(values),) and out.dtype == np.float64
    assert np.all(np.isfinite(out))


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.one_of(_big_ints, st.booleans()), max_size=6))
def test_any_list_of_integers_is_released_by_the_integer_mechanisms(values: list[Any]) -> None:
    for mech in (DL, DG):
        out = mech.release(values, source=src())
        assert out.shape == (len(values),) and out.dtype == np.int64


@settings(max_examples=100, deadline=None)
@given(
    dtype=st.sampled_from(
        [
            np.int8,
            np.int16,
            np.int32,
            np.int64,
            np.uint8,
            np.uint16,
            np.uint32,
            np.uint64,
            np.float16,
            np.float32,
            np.float64,
            np.longdouble,
            np.bool_,
        ]
    ),
    data=st.data(),
)
def test_every_numeric_dtype_is_released_whatever_its_values(dtype: Any, data: Any) -> None:
    from hypothesis.extra import numpy as hnp

    arr = data.draw(hnp.arrays(dtype, st.integers(0, 8)))
    out = GAU.release(arr, source=src())
    assert out.shape == arr.shape and np.all(np.isfinite(out))
    if np.dtype(dtype).kind in "iub":
        assert DL.release(arr, source=src()).shape == arr.shape
        assert RR.release(arr, source=src()).dtype == np.bool_


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.text(max_size=4), min_size=1, max_size=4))
def test_strings_are_refused_whatever_they_say(values: list[str]) -> None:
    for mech in ALL:
        with pytest.raises(PrivacyParameterError, match="values"):
            mech.release(values, source=src())
        with pytest.raises(PrivacyParameterError, match="values"):
            mech.release(np.array(values, dtype=object), source=src())


# ---------------------------------------------------------------------------------------------
# Exactness of lists: never numpy's value-dependent dtype inference
# ---------------------------------------------------------------------------------------------
def test_lists_mixing_ints_and_floats_are_exact() -> None:
    parsed = parse_values([2**53 + 1, 0.5], accept="real")
    assert parsed.kind == "exact"
    assert parsed.array[0] == 2**53 + 1  # np.asarray would have made it float 2**53
    assert parse_values([1.0, 2.5], accept="real").kind == "float"
    assert parse_values([1, 2], accept="real").kind == "int"
    assert parse_values([1, 2**70], accept="integer").kind == "exact"
    assert parse_values([], accept="integer").array.dtype == np.int64
    assert parse_values([], accept="real").array.dtype == np.float64


# ---------------------------------------------------------------------------------------------
# Containers: Series in, Series out; scalar in, scalar out
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mech", ALL, ids=lambda m: type(m).__name__)
def test_series_in_series_out_with_the_index(mech: Any) -> None:
    s = pd.Series([1, 0, 1], index=["a", "b", "c"], name="x", dtype=np.int64)
    out = mech.release(s, source=src())
    assert isinstance(out, pd.Series)
    assert list(out.index) == ["a", "b", "c"] and out.name == "x"
    plain = mech.release(s.to_numpy(), source=src())
    assert np.array_equal(out.to_numpy(), plain)


def test_series_of_a_non_numeric_extension_dtype_is_refused_by_dtype() -> None:
    for s in (pd.Series(["a"], dtype="category"), pd.Series(["a", None], dtype="string")):
        for mech in ALL:
            with pytest.raises(PrivacyParameterError, match="values"):
                mech.release(s, source=src())


def test_scalars_give_scalars() -> None:
    assert type(LAP.release(3, source=src())) is np.float64  # a float subclass
    assert isinstance(GAU.release(2.5, source=src()), float)
    assert type(DL.release(3, source=src())) is int
    assert type(DL_EXACT.release(np.int32(3), source=src())) is int
    assert type(DG.release(True, source=src())) is int
    assert type(RR.release(True, source=src())) is bool
    assert LAP.release(np.zeros(()), source=src()).shape == ()  # a 0-d array stays an array


def test_importing_and_releasing_does_not_import_pandas() -> None:
    code = (
        "import sys, numpy as np\nfrom dpkit.mechanisms import Laplace\n"
        "Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0).release([1.0, 2])\n"
        "assert 'pandas' not in sys.modules, 'pandas imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
