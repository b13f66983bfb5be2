"""The DuckDB engine's pre-noise aggregates against an independent pure-Python implementation.

The reference (``_engine_reference.py``) recomputes the md5 profile's bounding with hashlib and
plain Python, row by row, and the exact aggregates with Fractions; the engine must agree
exactly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dpkit.analytics._plan import Filter, Source
from dpkit.analytics.engines.duckdb import DuckDBEngine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _engine_reference import MEASURES as MEASURES_ALL
from _engine_reference import as_dict, people, plan_for, reference

# ------------------------------------------------------------------ tests


@pytest.mark.parametrize(
    ("group_by", "max_partitions", "max_rows", "salt"),
    [(("region",), 1, 1, 1), (("region",), 2, 3, 2**64 - 1), (("region", "kind"), 3, 2, 7),
     ((), 1, 4, 12345), (("kind",), 10, 10, 99)],
)
def test_md5_engine_equals_python_reference(group_by: tuple[str, ...], max_partitions: int,
                                            max_rows: int, salt: int) -> None:
    df = people(300, seed=salt % 1000)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    plan = plan_for(Source(kind="table", location="people"), group_by=group_by,
                    max_partitions=max_partitions, max_rows=max_rows, salt=salt)
    got = as_dict(engine.execute(plan))
    want = reference(df, plan)
    assert got == want


def test_md5_reference_with_a_predicate() -> None:
    df = people(200, seed=3)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    plan = plan_for(Source(kind="table", location="people"),
                    filters=(Filter(predicate="age >= 18 AND kind IN (1, 3)"),
                             Filter(predicate="x > 5 OR x IS NULL")))
    # NaN behaves as NULL in predicates: `x > 5` is not true for NaN (NaN sorts above every
    # number in DuckDB, so without normalization it would be).
    got = as_dict(engine.execute(plan))
    want = reference(df, plan, keep=lambda r: r["age"] >= 18 and r["kind"] in (1, 3)
                     and (r["x"] is None or r["x"] > 5))
    assert got == want


def test_md5_reference_without_privacy_unit() -> None:
    df = people(150, seed=5)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    plan = plan_for(Source(kind="table", location="people"), unit=None, max_partitions=1,
                    max_rows=1)
    got = as_dict(engine.execute(plan))
    assert got == reference(df, plan)
    assert sum(v["n"] for v in got.values()) == len(df)  # every row kept: each is its own unit
    assert all(v["n"] == v["units"] for v in got.values())


def test_md5_profile_is_a_salted_choice() -> None:
    """Different salts keep different rows (else the salt would not be mixed in)."""
    df = people(300, seed=11)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    src = Source(kind="table", location="people")
    a = as_dict(engine.execute(plan_for(src, max_partitions=1, max_rows=1, salt=1)))
    b = as_dict(engine.execute(plan_for(src, max_partitions=1, max_rows=1, salt=2)))
    assert a != b


@pytest.mark.parametrize("unit", ["uid", None])
@pytest.mark.parametrize("group_by", [("region",), ()])
@pytest.mark.parametrize("kind", ["rows", "units", "values", "sum", "sum_sq", "bin_counts",
                                  "category_counts"])
def test_every_measure_alone_with_and_without_unit_and_keys(
        unit: str | None, group_by: tuple[str, ...], kind: str) -> None:
    """Each measure kind alone compiles and runs for (unit / none) x (group_by / none).

    The case without unit, keys or value columns reads no column at all (it used to compile
    to a SELECT without a selection list).
    """
    df = people(60, seed=17)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    measure = next(m for m in MEASURES_ALL if m.kind == kind)
    plan = plan_for(Source(kind="table", location="people"), unit=unit, group_by=group_by,
                    max_partitions=1, max_rows=2, measures=(measure,))
    got = as_dict(engine.execute(plan))
    assert got == reference(df, plan)
    if unit is None and kind == "rows":
        assert sum(v[measure.name] for v in got.values()) == len(df)


def test_count_alone_with_a_predicate_and_no_unit_or_keys() -> None:
    df = people(80, seed=19)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    plan = plan_for(Source(kind="table", location="people"), unit=None, group_by=(),
                    filters=(Filter(predicate="age >= 18"),),
                    measures=(next(m for m in MEASURES_ALL if m.kind == "rows"),))
    got = as_dict(engine.execute(plan))
    assert got == reference(df, plan, keep=lambda r: r["age"] >= 18)
    assert got[()]["n"] == int((df["age"] >= 18).sum())
