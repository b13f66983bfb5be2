"""Values Python holds equal (``==`` and equal hashes: one element of a ``set``) get one object
text, for generated values mixing the kinds whose equality crosses types: ints, floats,
``Fraction``, ``Decimal``, numpy numbers (extended precision and complex included), ``bool``
and ``numpy.bool_``, ``IntEnum``; ``numpy.timedelta64`` in nominal (years, months) and fixed
units, ``timedelta``; ``numpy.datetime64`` of several units, dates, naive and aware datetimes
(both folds of an ambiguous local time, several zones)."""

from __future__ import annotations

import datetime as dt
import enum
import itertools
from decimal import Decimal
from fractions import Fraction
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.analytics._object_text import object_text


class Small(enum.IntEnum):
    ZERO = 0
    ONE = 1
    TWELVE = 12


def _numbers(q: Fraction) -> list[Any]:
    out: list[Any] = [
        q,
        float(q),
        np.float64(q),
        np.longdouble(q.numerator) / q.denominator,
        complex(float(q), 0),
        np.clongdouble(np.longdouble(q.numerator) / q.denominator),
    ]
    out.append(Decimal(q.numerator) / Decimal(q.denominator))
    if q.denominator == 1:
        n = int(q)
        out += [n, np.int64(n), np.int8(n), Decimal(n).quantize(Decimal("0.01"))]
        out += [Small(n)] if n in (0, 1, 12) else []
        out += [bool(n), np.bool_(n)] if n in (0, 1) else []
        out += [np.timedelta64(n, "M")] + ([np.timedelta64(n // 12, "Y")] if n % 12 == 0 else [])
    if float(q) == np.float32(float(q)):
        out += [np.float32(q), np.complex64(float(q))]
    return out


def _extended() -> list[Any]:
    x = np.longdouble(1) + np.longdouble(2) ** -60
    return [x, np.clongdouble(x), np.clongdouble(x) + 0j * np.longdouble(1)]


def _spans(seconds: int) -> list[Any]:
    return (
        [
            dt.timedelta(seconds=seconds),
            pd.Timedelta(seconds=seconds),
            np.timedelta64(seconds, "s"),
            np.timedelta64(seconds * 1000, "ms"),
            np.timedelta64(seconds * 10**9, "ns"),
        ]
        + ([np.timedelta64(seconds // 3600, "h")] if seconds % 3600 == 0 else [])
        + ([np.timedelta64(seconds // 86400, "D")] if seconds % 86400 == 0 else [])
    )


NY, LON, UTC = ZoneInfo("America/New_York"), ZoneInfo("Europe/London"), dt.timezone.utc
FIXED = dt.timezone(dt.timedelta(hours=-5))


def _naive(day: int, hour: int) -> list[Any]:
    d = dt.datetime(2021, 11, 1) + dt.timedelta(days=day, hours=hour)
    out: list[Any] = [
        d,
        pd.Timestamp(d),
        np.datetime64(d, "s"),
        np.datetime64(d, "ns"),
        np.datetime64(d, "h"),
    ]
    if hour == 0:
        out += [d.date(), np.datetime64(d.date(), "D")]
        if d.day == 1:
            out += [np.datetime64(d.date(), "M")]
    return out


def _aware(hour: int, fold: int) -> list[Any]:
    """Wall times around New York's and London's clock changes, and instants."""
    out: list[Any] = []
    for zone in (NY, LON):
        for day in (6, 7):
            wall = dt.datetime(
                2021, 11 if zone is NY else 10, day if zone is NY else day + 24, hour, 30, fold=fold
            )
            aware = wall.replace(tzinfo=zone)
            out += [aware, pd.Timestamp(aware)]
    instant = dt.datetime(2021, 11, 7, hour, 30, tzinfo=UTC)
    out += [instant, instant.astimezone(FIXED), instant.astimezone(LON)]
    return out


KINDS = st.one_of(
    st.builds(
        lambda n, d: _numbers(Fraction(n, d)), st.integers(-2, 14), st.sampled_from([1, 2, 4])
    ),
    st.just(_extended()),
    st.builds(_spans, st.sampled_from([0, 1, 60, 3600, 86400, 2 * 86400])),
    st.builds(_naive, st.integers(0, 2), st.sampled_from([0, 1, 5])),
    st.builds(_aware, st.integers(0, 7), st.integers(0, 1)),
)
VALUES = KINDS.flatmap(st.sampled_from)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and hash(a) == hash(b)
    except (TypeError, ValueError):  # numpy, pandas: years and days have no common unit
        return False


@settings(max_examples=400, deadline=None)
@given(st.lists(VALUES, min_size=2, max_size=8))
def test_python_equal_values_get_one_text(values: list[Any]) -> None:
    for a, b in itertools.combinations(values, 2):
        if _same(a, b):
            assert object_text(a) == object_text(b), (a, b)


def test_the_generator_meets_the_known_spellings() -> None:
    """The pairs the rule once split are among the generated values."""
    fold0 = dt.datetime(2021, 11, 7, 1, 30, tzinfo=NY)
    pairs = [
        (fold0, fold0.replace(fold=1)),
        (np.timedelta64(1, "Y"), np.timedelta64(12, "M")),
        (np.timedelta64(12, "M"), 12),
        tuple(_extended()[:2]),
    ]
    for a, b in pairs:
        assert _same(a, b)
        assert object_text(a) == object_text(b), (a, b)
    assert fold0 in _aware(1, 0) and fold0.replace(fold=1) in _aware(1, 1)
