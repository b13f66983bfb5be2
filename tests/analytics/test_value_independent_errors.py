"""Regression tests: no query raises on one neighbouring table and not on the other.

An exception that depends on a value in the data is an infinite-epsilon leak (the analyst sees
"raised" or "released"). Each case below pairs neighbouring tables D and D' (one privacy unit
added) on which the query used to raise only on D'.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget

_TEXT = pd.DataFrame({"u": [1, 2, 3], "s": ["1", "2", "abc"]})
_INT_EMPTY = pd.DataFrame({"u": pd.Series([], dtype="int64"), "s": pd.Series([], dtype="int64")})
_INT_ONE = pd.DataFrame({"u": [1], "s": [7]})


def _run(
    frame: pd.DataFrame, pred: str | None = None, keys: Any = None, stat: Any = None
) -> dict[str, Any]:
    s = dpa.Session(frame, privacy_unit="u", budget=Budget(epsilon=100.0))
    q = s.query()
    if pred is not None:
        q = q.where(pred)
    if keys is not None:
        q = q.group_by("s", keys=keys)
    q = q.bound(max_partitions=1, max_rows_per_partition=1).agg(
        n=dpa.count() if stat is None else stat
    )
    prepared = q.prepare(epsilon=1.0)
    return {"exact": s.engine.execute(prepared.plan), "released": q.run(epsilon=1.0)}


@pytest.mark.parametrize("pred", ["s = 1", "s IN (1, 2)", "s NOT IN (1, 2)", "s <> 1"])
def test_implicit_cast_of_a_text_column_never_raises(pred: str) -> None:
    # D' holds the text 'abc', which DuckDB cannot cast to an integer
    out = _run(_TEXT, pred)
    expected = {"s = 1": 1, "s IN (1, 2)": 2, "s NOT IN (1, 2)": 0, "s <> 1": 1}[pred]
    assert out["exact"].values["n:n"] == (expected,)  # the junk row fails the predicate


def test_public_int_keys_on_a_text_column_never_raise() -> None:
    out = _run(_TEXT, keys=[1, 2])
    assert len(out["exact"].values["n:n"]) == 2  # rows '1' and '2' pass the key filter


def test_implicit_cast_of_a_literal_never_raises() -> None:
    for frame in (_INT_EMPTY, _INT_ONE):
        out = _run(frame, "s = 'abc'")
        assert out["exact"].values["n:n"] in ((0,), ())


@pytest.mark.parametrize(
    "cat",
    [2**200, -(2**200), 2**64, 2.0**80, 2**2000],
    ids=["2^200", "-2^200", "2^64", "2.0^80", "2^2000"],
)
def test_integer_category_beyond_the_column_type_counts_zero(cat: Any) -> None:
    for frame in (_INT_EMPTY, _INT_ONE):
        st = dpa.histogram("s", categories=[cat, 7])
        out = _run(frame, stat=st)
        values = out["exact"].values["n:bins"]
        assert tuple(values[0]) == (0, len(frame))


def test_integer_category_at_the_edge_of_a_small_type_matches() -> None:
    frame = pd.DataFrame({"u": [1, 2], "s": pd.Series([127, -128], dtype="int8")})
    st = dpa.histogram("s", categories=[127, -128, 128, -129])
    out = _run(frame, stat=st)
    assert tuple(out["exact"].values["n:bins"][0]) == (1, 1, 0, 0)


@pytest.mark.parametrize("kind", ["list", "struct", "map", "array"])
@pytest.mark.parametrize("keys", [None, "public"])
def test_nested_group_key_is_refused_by_type_before_any_charge(kind: str, keys: Any) -> None:
    import pyarrow as pa

    from dpkit.analytics.engines._compiler import PlanError

    typ, val = {
        "list": (pa.list_(pa.int64()), [1]),
        "struct": (pa.struct([("a", pa.int64())]), {"a": 1}),
        "map": (pa.map_(pa.string(), pa.int64()), [("a", 1)]),
        "array": (pa.list_(pa.int64(), 1), [1]),
    }[kind]
    # D = all keys NULL, D' = one more unit with a non-NULL key: both refused the same way
    for g in ([None, None], [None, None, val]):
        table = pa.table({"u": list(range(len(g))), "g": pa.array(g, type=typ)})
        budget = Budget(epsilon=10.0, delta=1e-3)
        s = dpa.Session(table, privacy_unit="u", budget=budget)
        q = s.query().group_by("g", keys=None if keys is None else [((1,),)])
        q = q.bound(max_partitions=1, max_rows_per_partition=1).agg(n=dpa.count())
        with pytest.raises(PlanError, match="nested type"):
            q.run(epsilon=1.0, delta=1e-6)
        assert budget.spent == (0.0, 0.0)


def test_released_groups_come_sorted_by_key() -> None:
    from dpkit.analytics._release import _sorted_keys

    keys = [f"k{i:03d}" for i in range(60)]
    order = [(i * 37) % 60 for i in range(60)]  # a fixed shuffle
    frame = pd.DataFrame({"u": range(60 * 30), "g": [keys[order[i % 60]] for i in range(1800)]})
    s = dpa.Session(frame, privacy_unit="u", budget=Budget(epsilon=100.0, delta=1e-3))
    q = s.query().group_by("g").bound(max_partitions=1, max_rows_per_partition=1)
    out = q.agg(n=dpa.count()).run(epsilon=20.0, delta=1e-6)  # 30 units per key: all kept
    assert list(out["g"]) == sorted(out["g"]) and len(out) == 60
    # NULL first, then by value; keys that do not compare fall back to (type name, repr)
    assert _sorted_keys([("b",), (None,), ("a",)]) == [(None,), ("a",), ("b",)]
    assert _sorted_keys([(2,), ("a",), (None,)]) == [(None,), (2,), ("a",)]
