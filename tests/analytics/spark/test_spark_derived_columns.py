"""Derived columns give the same pre-noise aggregates on DuckDB and Spark (md5 profile).

One Parquet file with dates, doubles (NaN, +-inf, 1e308, -0.0), 64-bit integers at the ends of
their range and odd text; plans grouped by derived keys (date parts, date_trunc, CASE, string
functions, casts of text) and summing derived values (an indicator, a product with 64-bit
overflow, a clamped product of doubles). The exact integers of both engines must be equal.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _engine_reference import as_dict

from dpkit.analytics._plan import Aggregate, Bound, Derived, Measure, Plan, Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine

BIG = 2**63 - 1


def _file(path: Path) -> Path:
    rng = np.random.default_rng(8)
    n = 400
    start = dt.date(2019, 11, 1)
    days = [start + dt.timedelta(days=int(x)) for x in rng.integers(0, 1200, n)]
    days[:3] = [None, dt.date(1, 1, 1), dt.date(9999, 12, 31)]
    price = rng.uniform(-5, 100, n)
    price[:6] = [math.nan, math.inf, -math.inf, 1e308, -0.0, 5e-324]
    q = [int(v) for v in rng.integers(-3, 12, n)]
    q[:4] = [BIG, -BIG - 1, 0, 3]
    words = [
        "flu",
        "Flu ",
        " cold",
        "x1",
        "12",
        " -7 ",
        "1e3",
        "nan",
        "Ärger",
        "",
        "2024-02-30",
        "2024-02-29",
    ]
    s = [words[int(i)] for i in rng.integers(0, len(words), n)]
    s[5] = None  # type: ignore[call-overload]
    table = pa.table(
        {
            "uid": pa.array([int(u) for u in rng.integers(0, 120, n)], pa.int64()),
            "d": pa.array(days, pa.date32()),
            "price": pa.array(price, pa.float64()),
            "q": pa.array(q, pa.int64()).cast(pa.int64()),
            "s": pa.array(s, pa.string()),
        }
    )
    out = path / "derived.parquet"
    pq.write_table(table, out)
    return out


DERIVED = (
    Derived(name="yr", expression="year(d)"),
    Derived(name="mo", expression="date_trunc('month', d)"),
    Derived(
        name="band", expression="CASE WHEN price < 10 THEN 'low' WHEN price < 50 THEN 'mid' END"
    ),
    Derived(name="word", expression="lower(trim(s))"),
    Derived(name="head", expression="substring(upper(s), 1, 2)"),
    Derived(name="num", expression="TRY_CAST(s AS DOUBLE)"),
    Derived(name="int", expression="CAST(s AS BIGINT)"),
    Derived(name="flu", expression="CASE WHEN lower(trim(s)) = 'flu' THEN 1 ELSE 0 END"),
    Derived(name="qq", expression="q * q + 1"),
    Derived(name="rev", expression="price * q - abs(q)"),
    Derived(name="wk", expression="date_trunc('week', d)"),
    Derived(name="qd", expression="quarter(d) * 100 + day(d)"),
    Derived(name="ex", expression="EXTRACT(month FROM d)"),
    Derived(name="txt", expression="CAST(q AS VARCHAR)"),
    Derived(name="dt", expression="CAST(s AS DATE)"),
    Derived(name="len", expression="length(s) - 1"),
    Derived(name="cond", expression="s LIKE '%l%' OR q BETWEEN 1 AND 5 OR s IN ('12', 'x1')"),
    Derived(name="neg", expression="coalesce(-q, 0)"),
)
MEASURES = (
    Measure(name="n", kind="rows"),
    Measure(name="u", kind="units"),
    Measure(name="flu", kind="sum", column="flu", lower=0, upper=1, frac_bits=0),
    Measure(name="qq", kind="sum", column="qq", lower=-100, upper=150, frac_bits=2),
    Measure(name="rev", kind="sum", column="rev", lower=-50.0, upper=1000.0, frac_bits=8),
)


def _plan(path: Path, group_by: tuple[str, ...]) -> Plan:
    return Plan(
        source=Source(kind="parquet", location=str(path)),
        filters=(),
        bound=Bound(privacy_unit="uid", max_partitions=3, max_rows_per_partition=2, salt=77),
        aggregate=Aggregate(group_by=group_by, measures=MEASURES),
        derived=DERIVED,
    )


def test_md5_derived_aggregates_identical_on_duckdb_and_spark(
    classic_spark: Any, tmp_path: Path
) -> None:
    path = _file(tmp_path)
    duck = DuckDBEngine(hash="md5", threads=1)
    spark = SparkEngine(classic_spark, hash="md5")
    groupings = [
        ("yr", "band"),
        ("mo",),
        ("word", "head"),
        ("num", "int"),
        ("wk",),
        ("qd", "ex"),
        ("txt", "dt"),
        ("len", "cond", "neg"),
    ]
    for group_by in groupings:
        plan = _plan(path, group_by)
        want = as_dict(duck.execute(plan))
        assert as_dict(spark.execute(plan)) == want, group_by
        assert len(want) > 3
    # the companion: a different definition changes the aggregates
    other = dataclasses.replace(
        _plan(path, ("yr",)),
        derived=tuple(
            dataclasses.replace(d, expression="price * q") if d.name == "rev" else d
            for d in DERIVED
        ),
    )
    assert as_dict(spark.execute(other)) != as_dict(duck.execute(_plan(path, ("yr",))))
