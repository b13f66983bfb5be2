"""On Spark the privacy unit follows the group keys' type rule too, and the md5 bounding of the
accepted unit types keeps the same rows as DuckDB's.

A STRUCT or ARRAY unit whose doubles are ``0.0`` or ``-0.0`` is one value to Spark's window
(which normalizes signed zeros) but eight texts to the md5 hash: one person took eight slots
of one group (count and unit count +8, charged 1). Such units are refused by type, before the
charge, with both hashes. Accepted units with several spellings (signed zeros, NaN and NULL,
instants) hash by their canonical text on both engines alike.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine
from dpkit.errors import DPKitError

SIGNED_ZEROS = [
    [(0.0, -0.0)[i % 2], (0.0, -0.0)[i // 2 % 2], (0.0, -0.0)[i // 4 % 2]] for i in range(8)
]


@pytest.mark.parametrize("hash_kind", ["native", "md5"])
@pytest.mark.parametrize("kind", ["struct", "array"])
def test_nested_units_with_signed_zeros_are_refused_on_spark(
    classic_spark: Any, tmp_path: Path, kind: str, hash_kind: str
) -> None:
    units = [[1.0 + i, 0.0, 0.0] for i in range(20)] + SIGNED_ZEROS
    col = (
        pa.array([dict(zip("abc", u, strict=True)) for u in units])
        if kind == "struct"
        else pa.array(units, pa.list_(pa.float64()))
    )
    path = tmp_path / f"{kind}.parquet"
    pq.write_table(pa.table({"uid": col, "k": ["g"] * len(units)}), path)
    budget = Budget(epsilon=1.0, delta=1e-6)
    s = dpa.Session(
        classic_spark.read.parquet(str(path)),
        privacy_unit="uid",
        budget=budget,
        bounding_hash=hash_kind,
    )
    with pytest.raises(DPKitError, match="privacy unit column 'uid' has the type"):
        s.query().group_by("k").bound(max_partitions=1, max_rows_per_partition=1).agg(
            n=dpa.count()
        ).run(epsilon=1.0, delta=1e-7)
    assert budget.spent == (0.0, 0.0)


def _kept(engine: Any, path: Path) -> dict[Any, tuple[int, int]]:
    plan = Plan(
        source=Source(kind="parquet", location=str(path)),
        filters=(),
        bound=Bound(privacy_unit="uid", max_partitions=2, max_rows_per_partition=1, salt=20261128),
        aggregate=Aggregate(
            group_by=("k",),
            measures=(Measure(name="n", kind="rows"), Measure(name="u", kind="units")),
        ),
    )
    r = engine.execute(plan)
    return {
        k[0]: (int(n), int(u)) for k, n, u in zip(r.keys, r.values["n"], r.values["u"], strict=True)
    }


UTC = dt.timezone.utc
UNITS: dict[str, tuple[pa.DataType, list[Any]]] = {
    # several spellings of few persons: signed zeros, NaN and NULL (one unit), instants
    "double": (pa.float64(), [0.0, -0.0, float("nan"), None, 1.5, -1.5, 2.0**60, 5e-324]),
    "timestamp": (
        pa.timestamp("us", tz="UTC"),
        [
            dt.datetime(2024, 6, 1, 12, tzinfo=UTC),
            dt.datetime(2024, 6, 1, 14, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            None,
        ],
    ),
    "decimal": (
        pa.decimal128(12, 3),
        [decimal.Decimal(v) for v in ("1", "1.000", "-0.000", "0", "123456789.5")],
    ),
}


@pytest.mark.parametrize("kind", list(UNITS))
def test_md5_units_with_several_spellings_agree_between_engines(
    classic_spark: Any, tmp_path: Path, kind: str
) -> None:
    typ, values = UNITS[kind]
    uid = [values[i % len(values)] for i in range(400)]
    keys = [f"k{(i // len(values)) % 5}" for i in range(400)]
    path = tmp_path / f"{kind}.parquet"
    pq.write_table(pa.table({"uid": pa.array(uid, typ), "k": keys}), path)
    duck = _kept(DuckDBEngine(hash="md5", threads=1), path)
    spark = _kept(SparkEngine(classic_spark, hash="md5"), path)
    assert duck == spark
    # each person (one SQL equality class of the unit: Python's equality agrees here, NaN is
    # the NULL unit) has rows in all five groups and is kept in exactly two
    persons = {None if isinstance(v, float) and v != v else v for v in values}
    assert sum(u for _, u in duck.values()) == 2 * len(persons)
