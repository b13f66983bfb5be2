"""Python-equal values in an object column are one unit: two spellings the text rule misses.

Exact pre-noise check on neighbouring tables: D has 100 people (one row each, distinct ids of
the same type); D' adds one person whose two rows hold two spellings of one id that Python
holds equal (equal, same hash, one element in a set). ``count_distinct()`` and ``count()`` with
``max_partitions=1``, ``max_rows_per_partition=1`` may move by 1.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._object_text import object_text

NY = ZoneInfo("America/New_York")
CASES: dict[str, tuple[list[Any], list[Any]]] = {
    # same zoneinfo: compared as wall times, fold ignored; the instants differ by one hour
    "aware datetime fold": (
        [
            dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=i)
            for i in range(100)
        ],
        [
            dt.datetime(2021, 11, 7, 1, 30, tzinfo=NY, fold=0),
            dt.datetime(2021, 11, 7, 1, 30, tzinfo=NY, fold=1),
        ],
    ),
    # nominal numpy spans: one year is twelve months to numpy
    "timedelta64 years and months": (
        [np.timedelta64(i, "D") for i in range(100)],
        [np.timedelta64(1, "Y"), np.timedelta64(12, "M")],
    ),
    # numpy extended precision: complex() of a clongdouble drops the bits beyond a double
    "clongdouble / longdouble": (
        [np.longdouble(i) for i in range(2, 102)],
        [
            np.longdouble(1) + np.longdouble(2) ** -60,
            np.clongdouble(np.longdouble(1) + np.longdouble(2) ** -60),
        ],
    ),
}


def _units(ids: list[Any]) -> tuple[int, int]:
    frame = pd.DataFrame({"uid": pd.Series(ids, dtype=object), "k": ["a"] * len(ids)})
    s = dpa.Session(frame, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    q = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(u=dpa.count_distinct(), n=dpa.count())
    )
    v = q.prepare(epsilon=1.0, delta=1e-6).exact(s.engine).values
    return int(v["u:n"][0]), int(v["n:n"][0])


@pytest.mark.parametrize("case", sorted(CASES))
def test_python_equal_unit_spellings_are_one_person(case: str) -> None:
    others, person = CASES[case]
    a, b = person
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert object_text(a) == object_text(b)
    (u0, n0), (u1, n1) = _units(others), _units(others + person)
    assert u1 - u0 <= 1
    assert n1 - n0 <= 1
