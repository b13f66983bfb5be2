"""Columns of Python objects (pandas ``object``, categories of objects, Polars ``Object``).

Such a column is text, decided by its dtype, each value written by ``object_text`` so that
values Python holds equal are one text. Exact pre-noise checks on neighbouring tables: D has
100 people (one row each); D' adds one person whose rows spell one value several equal ways.
Before, ``str`` wrote each spelling differently: 0.0 / -0.0 were 2 units (and 2 keys), 1 / 1.0 /
True / Decimal('1.00') 4 units (4 keys), and Polars sent its objects as memory addresses.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._object_text import object_text
from dpkit.errors import PrivacyParameterError

UTC = dt.timezone.utc
PLUS1 = dt.timezone(dt.timedelta(hours=1))

# Each list: one value in several spellings Python holds equal (the first is the plain one).
SPELLINGS: dict[str, list[Any]] = {
    "zero": [0.0, -0.0, 0, False, Decimal("-0.00"), np.float32(-0.0), complex(-0.0, 0.0)],
    "one": [1, 1.0, True, Decimal("1.00"), Fraction(1), np.int8(1), np.float16(1), 1 + 0j],
    "half": [0.5, Decimal("0.50"), Fraction(1, 2), np.float32(0.5), np.longdouble(0.5)],
    "big int": [2**53 + 1, Decimal(2**53 + 1), Fraction(2**53 + 1)],
    "instant": [
        dt.datetime(2024, 1, 1, tzinfo=UTC),
        dt.datetime(2024, 1, 1, 1, tzinfo=PLUS1),
        pd.Timestamp("2024-01-01 01:00", tz="Europe/Paris"),
    ],
    "day": [
        dt.date(2024, 1, 1),
        dt.datetime(2024, 1, 1),
        pd.Timestamp("2024-01-01"),
        np.datetime64("2024-01-01"),
    ],
    "duration": [dt.timedelta(days=1), pd.Timedelta("1 day"), np.timedelta64(24, "h")],
    "bytes": [b"ab", bytearray(b"ab"), memoryview(b"ab")],
    "tuple": [(1, "a"), (1.0, "a"), (True, "a")],
    "set": [{1, 2}, frozenset({2.0, 1})],
}


def _exact(frame: Any, *, group: bool, max_partitions: int = 1) -> Any:
    s = dpa.Session(frame, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    q = s.query()
    if group:
        q = q.group_by("k")
    q = q.bound(max_partitions=max_partitions, max_rows_per_partition=1).agg(
        n=dpa.count(), u=dpa.count_distinct()
    )
    return q.prepare(epsilon=1.0, delta=1e-6).exact(s.engine)


def _units(uids: list[Any]) -> tuple[int, int]:
    """(units, rows counted) of a table whose privacy unit column holds ``uids``."""
    frame = pd.DataFrame({"uid": pd.Series(uids, dtype=object), "k": ["a"] * len(uids)})
    values = _exact(frame, group=False).values
    return values["u:n"][0], values["n:n"][0]


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_spellings_of_one_person_are_one_unit(name: str) -> None:
    spellings = SPELLINGS[name]
    others = [f"person-{i}" for i in range(100)]
    d_units, d_rows = _units(others)
    d2_units, d2_rows = _units(others + spellings)
    assert (d_units, d_rows) == (100, 100)
    # one person: one unit, and at most max_rows_per_partition = 1 more row counted
    assert (d2_units - d_units, d2_rows - d_rows) == (1, 1)


def _groups(keys: list[Any], uids: list[Any], max_partitions: int) -> dict[Any, tuple[int, int]]:
    frame = pd.DataFrame({"uid": uids, "k": pd.Series(keys, dtype=object)})
    r = _exact(frame, group=True, max_partitions=max_partitions)
    return {
        k[0]: (n, u) for k, n, u in zip(r.keys, r.values["n:n"], r.values["__units"], strict=True)
    }


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_spellings_of_one_key_are_one_group(name: str) -> None:
    """100 people hold the key's plain spelling; the added person holds every spelling of it
    (in up to len(spellings) groups if they were different keys)."""
    spellings = SPELLINGS[name]
    plain = [spellings[0]] * 100
    d = _groups(plain, list(range(100)), len(spellings))
    d2 = _groups(plain + spellings, list(range(100)) + [1000] * len(spellings), len(spellings))
    assert list(d2) == list(d), (d, d2)  # no new group
    ((key, (n, u)),) = d.items()
    assert key == object_text(spellings[0])
    assert d2[key] == (n + 1, u + 1)  # the person is counted once, one row


def test_issue_figures_units_zero_and_one() -> None:
    """The figures reported: 0.0 / -0.0 counted 2 units, 1 / 1.0 / True / Decimal('1.00') 4."""
    assert _units([0.0, -0.0]) == (1, 1)
    assert _units([1, 1.0, True, Decimal("1.00")]) == (1, 1)


def test_object_column_type_does_not_depend_on_the_rows() -> None:
    """D holds only integers, D' adds a person whose id is text: the column is text on both,
    the same query compiles and runs on both (no refusal that one person decides), and the
    other people's units and keys keep their text."""
    ints = list(range(100))
    d = pd.DataFrame({"uid": pd.Series(ints, dtype=object), "k": pd.Series(ints, dtype=object)})
    d2 = pd.DataFrame(
        {"uid": pd.Series([*ints, "x"], dtype=object), "k": pd.Series([*ints, "x"], dtype=object)}
    )
    for frame in (d, d2):
        s = dpa.Session(frame, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
        assert s.engine.columns(s.table.source) == {"uid": "VARCHAR", "k": "VARCHAR"}
    keys_d = set(_groups(list(d["k"]), ints, 1))
    keys_d2 = set(_groups(list(d2["k"]), [*ints, 1000], 1))
    assert keys_d == {str(i) for i in ints}
    assert keys_d2 - keys_d == {"x"}


def test_missing_values_of_every_kind_are_one_null_unit() -> None:
    missing = [None, float("nan"), np.nan, pd.NA, pd.NaT, Decimal("NaN"), np.datetime64("NaT")]
    assert _units(missing) == (1, 1)


def test_huge_integer_in_an_object_column_does_not_raise() -> None:
    """``str(10**5000)`` raises (Python's digit limit): the frame was refused, by a value."""
    assert _units([10**5000, 1, 2]) == (3, 3)


def test_the_number_clamp_is_the_numeric_conversions_clamp() -> None:
    from dpkit._numeric import values
    from dpkit.analytics import _object_text

    assert _object_text._DECIMAL_HUGE == values._DECIMAL_HUGE
    assert object_text(Decimal("1E+400")) == object_text(10**400) == "inf"
    assert object_text(Decimal("1E-401")) == object_text(Fraction(1, 10**401)) == "0"


def test_categories_of_objects_use_the_same_text() -> None:
    col = pd.Series(pd.Categorical([1, "x", 1.5, None]))
    frame = pd.DataFrame({"uid": range(4), "k": col})
    assert set(_groups(list(frame["k"]), list(range(4)), 1)) == {"1", "x", "1.5", None}


def test_unsupported_object_is_refused_when_the_session_is_created() -> None:
    class Opaque:
        pass

    frame = pd.DataFrame({"uid": pd.Series([1, Opaque()], dtype=object), "k": ["a", "b"]})
    budget = Budget(epsilon=1.0)
    with pytest.raises(
        PrivacyParameterError,
        match=r"column 'uid' holds Python objects of "
        r"type Opaque.*cast the column",
    ):
        dpa.Session(frame, privacy_unit="uid", budget=budget)
    assert budget.spent == (0.0, 0.0)


def test_polars_object_units_are_values_not_memory_addresses() -> None:
    """Polars hands Object columns to Arrow as the objects' addresses: two equal ids held by
    two objects were two units."""
    ids = ["".join(["p", "1"]) for _ in range(3)] + [1, 1.0, True]
    frame = pl.DataFrame({"uid": pl.Series(ids, dtype=pl.Object), "k": ["a"] * len(ids)})
    assert _exact(frame, group=False).values["u:n"] == (2,)


def test_lone_surrogate_in_an_object_column_never_raises() -> None:
    """A lone surrogate is text Polars (and Arrow-backed pandas strings) cannot hold: read as
    ``?`` whatever the string storage option says."""
    ids = ["a\udcff", "a?", "b"]
    frame = pl.DataFrame({"uid": pl.Series(ids, dtype=pl.Object), "k": ["a"] * 3})
    assert _exact(frame, group=False).values["u:n"] == (2,)
    with pd.option_context("mode.string_storage", "pyarrow"):
        assert _units(ids) == (2, 2)


@pytest.mark.parametrize(
    "series",
    [
        pd.Series([0.0, -0.0, np.nan]),
        pd.Series([0.0, -0.0, pd.NA, np.nan], dtype="Float64"),
        pd.Series([0.0, -0.0], dtype="double[pyarrow]"),
        pd.Series(pd.Categorical([0.0, -0.0])),
        pd.Series([uuid.UUID(int=1), uuid.UUID(int=1)], dtype=object),
    ],
    ids=["float64", "Float64", "arrow", "categorical", "uuid"],
)
def test_typed_columns_keep_negative_zero_one_unit(series: pd.Series) -> None:
    frame = pd.DataFrame({"uid": series, "k": ["a"] * len(series)})
    units = _exact(frame, group=False).values["u:n"][0]
    nulls = int(series.isna().any())
    assert units == 1 + nulls


def test_equal_numbers_of_every_type_have_one_text() -> None:
    """Python-equal numbers of different types (exact conversions of random doubles and
    integers, near zero, at the ends of the double range and past 2^53) have one text."""
    rng = np.random.default_rng(20)
    doubles = list(rng.standard_normal(300) * 10.0 ** rng.integers(-320, 300, 300))
    doubles += [5e-324, -5e-324, 1.7976931348623157e308, 2.0**53, 0.1, 1 / 3]
    for f in doubles:
        spellings = [f, Decimal(f), Fraction(f), np.float64(f), np.longdouble(f), complex(f, 0)]
        if f.is_integer():
            spellings += [int(f), Decimal(int(f))]
        assert len({object_text(v) for v in spellings}) == 1, f
    for n in [*map(int, rng.integers(-(2**62), 2**62, 300)), 2**53 + 1, -(2**63), 10**399]:
        spellings = [n, Decimal(n), Fraction(n), Decimal(n).scaleb(-3) * 1000]
        assert len({object_text(v) for v in spellings}) == 1, n
    zones = [dt.timezone(dt.timedelta(minutes=m)) for m in (-600, -90, 0, 45, 330, 840)]
    for us in map(int, rng.integers(0, 10**17, 50)):
        instant = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=us)
        assert (
            len(
                {object_text(instant.astimezone(z)) for z in zones}
                | {object_text(pd.Timestamp(instant).tz_convert("Asia/Kolkata"))}
            )
            == 1
        )
