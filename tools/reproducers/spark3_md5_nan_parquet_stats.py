"""Finding: a NaN group key read from Parquet is not NULL on DuckDB when the column chunk has
no NULL, so Spark and DuckDB (both ``bounding_hash="md5"``) keep different rows.

Writers (pyarrow here) leave NaN out of a chunk's min/max statistics, and DuckDB 2.0 uses them
to fold the ``isnan(k)`` inside the compiler's normalization ``CASE WHEN isnan(k) THEN NULL
WHEN k = 0 THEN 0.0 ELSE k END`` to false when the chunk holds no NULL (a stand-alone
``isnan(k)`` filter is still true, and one NULL in the chunk stops the folding). The NaN key
then stays NaN on DuckDB (its md5 token is that of NaN, not ``N``) but is NULL on Spark: with
one group per person (bounding binding) the exact per-group counts differ between the engines
for the same file, FLOAT and DOUBLE alike, against the md5 profile's promise and the documented
"NaN is NULL".

    PYTHONPATH=src /work/main/.venv/bin/python tools/reproducers/spark3_md5_nan_parquet_stats.py
"""

from __future__ import annotations

import math
import os
import random
import sys
import tempfile
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from _sparkatk import local_spark

from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine


def nan_table(typ: pa.DataType) -> pa.Table:
    """60 persons with 5 rows each; keys drawn from 0.0, -0.0, NaN, 1e-45, 3.4e38; no NULL
    anywhere (a NULL in the chunk keeps DuckDB from folding)."""
    rng = random.Random(1)
    uid = [f"u{u}" for u in range(60) for _ in range(5)]
    keys = [rng.choice([0.0, -0.0, math.nan, 1e-45, 3.4e38]) for _ in uid]
    return pa.table({"uid": uid, "k": pa.array(keys, typ)})


def plan(path: str) -> Plan:
    return Plan(
        source=Source(kind="parquet", location=path),
        filters=(),
        bound=Bound(privacy_unit="uid", max_partitions=1, max_rows_per_partition=1, salt=12345),
        aggregate=Aggregate(group_by=("k",), measures=(Measure(name="n", kind="rows"),)),
    )


def as_dict(result: Any) -> dict[str, int]:
    return {repr(k[0]): int(n) for k, n in zip(result.keys, result.values["n"], strict=True)}


def main() -> bool:
    with local_spark() as spark, tempfile.TemporaryDirectory() as tmp:
        same = True
        for name, typ in (("FLOAT", pa.float32()), ("DOUBLE", pa.float64())):
            path = os.path.join(tmp, f"nan_{name}.parquet")
            pq.write_table(nan_table(typ), path)
            folded = duckdb.sql(
                f"SELECT count(*) FILTER (WHERE isnan(k)), "
                f"count(*) FILTER (WHERE CAST(k AS VARCHAR) = 'nan') "
                f"FROM read_parquet('{path}')"
            ).fetchall()[0]
            duck = as_dict(DuckDBEngine(hash="md5", threads=1).execute(plan(path)))
            spark_r = as_dict(SparkEngine(spark, hash="md5").execute(plan(path)))
            same &= duck == spark_r
            print(f"{name}: DuckDB isnan(k) true on {folded[0]} of {folded[1]} NaN rows")
            print("  key                      DuckDB md5 rows   Spark md5 rows")
            for k in sorted(set(duck) | set(spark_r)):
                print(f"  {k:24s} {duck.get(k)!s:17s} {spark_r.get(k)!s}")
    return same


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
