"""Typed columns with nulls (pandas nullable / arrow dtypes, polars, pyarrow) in every release.

``np.asarray`` turns a nullable integer column into int64 when no value is missing and into
float64 (rounding integers beyond 2**53) or object when one is: a path, or an exception, that
depends on the data. Every release reads such columns by their declared dtype instead
(``dpkit._numeric.values.read_column``). Regressions for tools/reproducers/
selection_arrow_nulls.py and nullable_counts_exception.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms import (
    BinnedQuantile,
    DiscreteGaussian,
    DiscreteLaplace,
    ExponentialMechanism,
    Gaussian,
    GaussianPartitionSelection,
    Laplace,
    PartitionSelection,
    RandomizedResponse,
    ReportNoisyMax,
)
from dpkit.noise import RandomSource

Make = Callable[[list[Any]], Any]

INT_COLUMNS: dict[str, Make] = {
    "polars": lambda v: pl.Series(v, dtype=pl.Int64),
    "pyarrow": lambda v: pa.array(v, type=pa.int64()),
    "pyarrow-chunked": lambda v: pa.chunked_array([v[:1], v[1:]], type=pa.int64()),
    "pandas-Int64": lambda v: pd.array(v, dtype="Int64"),
    "pandas-Series-Int64": lambda v: pd.Series(v, dtype="Int64"),
    "pandas-int64[pyarrow]": lambda v: pd.Series(v, dtype="int64[pyarrow]"),
}
FLOAT_COLUMNS: dict[str, Make] = {
    "polars": lambda v: pl.Series(v, dtype=pl.Float64),
    "pyarrow": lambda v: pa.array(v, type=pa.float64()),
    "pandas-Float64": lambda v: pd.Series(v, dtype="Float64"),
}
OTHER_COLUMNS: dict[str, Make] = {
    "polars-str": lambda v: pl.Series([None if x is None else str(x) for x in v]),
    "pyarrow-str": lambda v: pa.array([None if x is None else str(x) for x in v]),
    "pandas-string": lambda v: pd.Series(
        [None if x is None else str(x) for x in v], dtype="string"
    ),
}


def seeded(seed: int = 3) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


B = 2**60


# ---------------------------------------------------------------------------------------------
# selection: integer scores stay exact integers, a null is a NaN score
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", INT_COLUMNS.values(), ids=INT_COLUMNS.keys())
def test_selection_integer_columns_with_a_null_stay_exact(make: Make) -> None:
    # Neighbours one apart (the sensitivity). Rounded to doubles, B + 128 and B + 129 become
    # B and B + 256 (epsilon 127 instead of 1/2 with the factor epsilon / 2).
    em = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    p = em.probabilities(make([B + 128, B, None]))
    q = em.probabilities(make([B + 129, B, None]))
    ref = em.probabilities(np.array([B + 128, B], dtype=np.int64))
    assert p[2] == 0.0 and q[2] == 0.0
    np.testing.assert_array_equal(p[:2], ref)
    assert abs(math.log(p[1] / q[1])) <= 0.5 + 1e-9
    assert abs(math.log(p[0] / q[0])) <= 0.5 + 1e-9


@pytest.mark.parametrize("make", FLOAT_COLUMNS.values(), ids=FLOAT_COLUMNS.keys())
def test_selection_float_columns_with_a_null(make: Make) -> None:
    em = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    np.testing.assert_array_equal(
        em.probabilities(make([1.5, None, 0.5])), em.probabilities([1.5, math.nan, 0.5])
    )


def test_selection_none_in_a_list_is_a_nan_score() -> None:
    for mech in (
        ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
        ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="exponential"),
    ):
        np.testing.assert_array_equal(
            mech.probabilities([B + 1, None, B]), mech.probabilities([B + 1, math.nan, B])
        )
        assert mech.probabilities([2, None, 1])[1] == 0.0
        np.testing.assert_array_equal(
            mech.probabilities([None, None]), mech.probabilities([math.nan, math.nan])
        )
        assert mech.release_many([None, None], count=20, source=seeded()).tolist() == [0] * 20
        # exact integers next to None: B + 1 and B stay one apart
        p = mech.probabilities([B + 1, None, B])
        np.testing.assert_array_equal(p[[0, 2]], mech.probabilities([B + 1, B]))
        assert mech.release_many([None, 5, None], count=50, source=seeded()).tolist() == [1] * 50


@pytest.mark.parametrize("make", INT_COLUMNS.values(), ids=INT_COLUMNS.keys())
def test_selection_release_matches_the_filled_integer_path(make: Make) -> None:
    mech = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="laplace")
    got = mech.release_many(make([3, None, 1]), count=200, source=seeded())
    assert 1 not in got.tolist()
    ref = mech.release_many([3, math.nan, 1], count=200, source=seeded())
    np.testing.assert_array_equal(got, ref)


# ---------------------------------------------------------------------------------------------
# counts: a missing count is 0 units, never an exception
# ---------------------------------------------------------------------------------------------
COUNT_MECHS: dict[str, Any] = {
    "PartitionSelection": PartitionSelection(epsilon=1.0, delta=1e-6),
    "GaussianPartitionSelection": GaussianPartitionSelection.from_epsilon_delta(
        epsilon=1.0, delta=1e-6
    ),
    "BinnedQuantile": BinnedQuantile.from_epsilon(
        epsilon=1.0, quantiles=0.5, edges=[0.0, 1.0, 2.0, 3.0]
    ),
}


@pytest.mark.parametrize("make", INT_COLUMNS.values(), ids=INT_COLUMNS.keys())
@pytest.mark.parametrize("name", COUNT_MECHS)
def test_missing_counts_are_zero_units(name: str, make: Make) -> None:
    mech = COUNT_MECHS[name]
    got = mech.release(make([30, None, 1]), source=seeded())
    ref = mech.release(np.array([30, 0, 1], dtype=np.int64), source=seeded())
    np.testing.assert_array_equal(got, ref)
    for lst in ([30, None, 1], [30, pd.NA, 1]):
        np.testing.assert_array_equal(mech.release(lst, source=seeded()), ref)


def test_frames_of_counts_with_nulls() -> None:
    mech = COUNT_MECHS["BinnedQuantile"]
    ref = mech.release(np.array([[3, 0, 1], [0, 5, 2]], dtype=np.int64), source=seeded())
    pdf = pd.DataFrame(
        {"a": pd.array([3, None], dtype="Int64"), "b": [0, 5], "c": pd.array([1, 2], dtype="Int64")}
    )
    pldf = pl.DataFrame({"a": [3, None], "b": [0, 5], "c": [1, 2]})
    for frame in (pdf, pldf, [[3, None, 1], [None, 5, 2]]):
        np.testing.assert_array_equal(mech.release(frame, source=seeded()), ref)


# ---------------------------------------------------------------------------------------------
# additive / discrete / randomized response (parse_values): same rule
# ---------------------------------------------------------------------------------------------
VALUE_MECHS: dict[str, Any] = {
    "Laplace": Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0),
    "Gaussian": Gaussian.from_mu(mu=1.0, sensitivity=1.0),
    "DiscreteLaplace": DiscreteLaplace.from_epsilon(epsilon=1.0, sensitivity=1),
    "DiscreteGaussian": DiscreteGaussian.from_sigma(sigma=2.0, sensitivity=1),
    "RandomizedResponse": RandomizedResponse.from_epsilon(epsilon=1.0),
}


@pytest.mark.parametrize("make", INT_COLUMNS.values(), ids=INT_COLUMNS.keys())
@pytest.mark.parametrize("name", VALUE_MECHS)
def test_integer_columns_with_nulls_release_as_zero(name: str, make: Make) -> None:
    mech = VALUE_MECHS[name]
    big = 2**53 + 1  # exact on the integer path, rounded on a float64 one
    got = mech.release(make([big, None, 1]), source=seeded())
    ref = mech.release(np.array([big, 0, 1], dtype=np.int64), source=seeded())
    np.testing.assert_array_equal(np.asarray(got), ref)


@pytest.mark.parametrize("make", FLOAT_COLUMNS.values(), ids=FLOAT_COLUMNS.keys())
def test_float_columns_with_nulls_release_nan_as_zero(make: Make) -> None:
    for name in ("Laplace", "Gaussian"):
        mech = VALUE_MECHS[name]
        got = mech.release(make([1.5, None]), source=seeded())
        ref = mech.release(np.array([1.5, 0.0]), source=seeded())
        np.testing.assert_array_equal(np.asarray(got), ref)


# ---------------------------------------------------------------------------------------------
# the decision never depends on whether a value is missing
# ---------------------------------------------------------------------------------------------
ALL_MECHS: dict[str, Any] = {
    **VALUE_MECHS,
    **COUNT_MECHS,
    "ExponentialMechanism": ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
}
EVERY_COLUMN = {
    **{f"int-{k}": v for k, v in INT_COLUMNS.items()},
    **{f"float-{k}": v for k, v in FLOAT_COLUMNS.items()},
    **{f"other-{k}": v for k, v in OTHER_COLUMNS.items()},
    "bool-polars": lambda v: pl.Series([None if x is None else x > 1 for x in v]),
    "bool-pandas": lambda v: pd.Series([None if x is None else x > 1 for x in v], dtype="boolean"),
    "list": lambda v: list(v),
}


@pytest.mark.parametrize("make", EVERY_COLUMN.values(), ids=EVERY_COLUMN.keys())
@pytest.mark.parametrize("name", ALL_MECHS)
def test_a_missing_value_never_decides_whether_a_release_raises(name: str, make: Make) -> None:
    mech = ALL_MECHS[name]

    def outcome(v: list[Any]) -> str:
        try:
            mech.release(make(v), source=seeded())
        except PrivacyParameterError:
            return "refused"
        return "released"

    assert outcome([3, 2, 1]) == outcome([3, None, 1])
