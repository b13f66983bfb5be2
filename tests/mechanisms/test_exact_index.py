"""Integer and rational inputs reach the lattice exactly (never rounded to a double first).

Before, an int64 beyond 2**53 was converted to float64 and then rounded to the lattice: with
``Laplace.from_epsilon(epsilon=1, sensitivity=8194)`` (granularity 2) the neighbours
4611686018427388415 and 4611686018427396609 (8194 apart, charged 8194 + 2 = 4098 lattice steps)
landed 4608 steps apart. The index is now ``round(x / s)`` (half to even) in exact arithmetic
for int64, uint64, Python int, longdouble, Fraction and Decimal; the reference below is Python's
exact ``round(Fraction(x) / Fraction(s))``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit._numeric.values import parse_values
from dpkit.mechanisms import Laplace
from dpkit.mechanisms._lattice import lattice_index

LIMIT = 2**62


def reference(x: Any, s: float) -> int:
    """The exact clamped index: round(x / s) half to even, clamped to +-2**62."""
    return max(-LIMIT, min(LIMIT, round(Fraction(x) / Fraction(s))))


def index_of(values: Any, s: float) -> list[int]:
    return [
        int(v)
        for v in np.asarray(lattice_index(parse_values(values, accept="real"), s)).reshape(-1)
    ]


A, B = 4611686018427388415, 4611686018427396609  # 8194 apart


@pytest.mark.parametrize(
    "convert",
    [
        lambda v: np.array(v, dtype=np.int64),
        lambda v: np.array(v, dtype=np.uint64),
        lambda v: list(v),
        lambda v: (
            np.array(v, dtype=np.longdouble)
            if np.finfo(np.longdouble).nmant >= 63
            else np.array(v, dtype=np.int64)
        ),
        lambda v: [Fraction(x) for x in v],
        lambda v: [Decimal(x) for x in v],
        lambda v: np.array(list(v), dtype=object),
    ],
    ids=["int64", "uint64", "pyint", "longdouble", "Fraction", "Decimal", "object"],
)
def test_the_big_integer_repro_is_within_the_charge(convert: Any) -> None:
    mech = Laplace.from_epsilon(epsilon=1.0, sensitivity=8194)
    s = mech.granularity
    assert s == 2.0
    ia, ib = index_of(convert([A, B]), s)
    charged = (mech.sensitivity + s) / s  # 4098 steps
    print(f"index distance {ib - ia} (before the fix: 4608), charged {charged}")
    assert (ia, ib) == (reference(A, s), reference(B, s))
    assert abs(ib - ia) <= charged


S_VALUES = [
    2.0**e
    for e in (-1074, -1000, -80, -63, -62, -61, -12, -1, 0, 1, 2, 11, 52, 62, 63, 64, 65, 100, 1000)
]


@settings(max_examples=300, deadline=None)
@given(x=st.integers(-(2**63), 2**63 - 1), s=st.sampled_from(S_VALUES))
def test_int64_index_is_exact(x: int, s: float) -> None:
    assert index_of(np.array([x], dtype=np.int64), s) == [reference(x, s)]
    assert index_of([x], s) == [reference(x, s)]


@settings(max_examples=300, deadline=None)
@given(x=st.integers(0, 2**64 - 1), s=st.sampled_from(S_VALUES))
def test_uint64_index_is_exact(x: int, s: float) -> None:
    assert index_of(np.array([x], dtype=np.uint64), s) == [reference(x, s)]


@settings(max_examples=200, deadline=None)
@given(x=st.one_of(st.integers(-(2**1100), 2**1100), st.fractions()), s=st.sampled_from(S_VALUES))
def test_python_int_and_fraction_index_is_exact(x: Any, s: float) -> None:
    assert index_of([x], s) == [reference(x, s)]


@settings(max_examples=200, deadline=None)
@given(m=st.integers(-(2**64), 2**64), e=st.integers(-20, 20), s=st.sampled_from(S_VALUES))
def test_longdouble_index_is_exact(m: int, e: int, s: float) -> None:
    x = np.longdouble(m) * np.longdouble(2.0) ** e  # whatever the platform's longdouble
    num, den = x.as_integer_ratio()
    assert index_of(np.array([x]), s) == [reference(Fraction(int(num), int(den)), s)]


@settings(max_examples=200, deadline=None)
@given(x=st.floats(allow_nan=False, allow_infinity=False), s=st.sampled_from(S_VALUES))
def test_float_index_is_exact_too(x: float, s: float) -> None:
    assert index_of(np.array([x]), s) == [reference(x, s)]
    assert index_of([x, Fraction(0)], s)[0] == reference(x, s)  # the rational path agrees


def test_special_floats_in_every_path() -> None:
    s = 2.0**-12
    for values in (
        np.array([math.nan, math.inf, -math.inf]),
        np.array([math.nan, math.inf, -math.inf], dtype=np.longdouble),
        [math.nan, math.inf, -math.inf, Fraction(0)],
    ):
        assert index_of(values, s)[:3] == [0, LIMIT, -LIMIT]
