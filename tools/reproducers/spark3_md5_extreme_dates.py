"""Finding: with ``bounding_hash="md5"`` Spark and DuckDB keep different rows for DATE and
naive TIMESTAMP (TIMESTAMP_NTZ) keys outside the years 1..9999.

The md5 token of a DATE or TIMESTAMP_NTZ is the engine's own ``CAST(col AS STRING/VARCHAR)``,
and the two engines write years outside 1..9999 differently: Spark ``+10000-01-01`` and
``0000-12-31`` / ``-0001-01-01 00:00:00`` (astronomical years), DuckDB ``10000-01-01`` and
``0001-12-31 (BC)``. So the group hashes differ and, with one group kept per unit (bounding
binding), the pre-noise counts differ between the engines for the same Parquet file, against
the md5 profile's promise (the same rows kept on both engines). Years 1..9999 agree.

    PYTHONPATH=src /work/main/.venv/bin/python tools/reproducers/spark3_md5_extreme_dates.py
"""

from __future__ import annotations

import os
import random
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
from _sparkatk import local_spark

from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine

# (arrow type, raw values: days or microseconds since 1970-01-01); the first value of each
# case is an ordinary date (2024-01-01), the others lie outside the years 1..9999
CASES: dict[str, tuple[pa.DataType, pa.DataType, list[int]]] = {
    "date, year 10000": (pa.int32(), pa.date32(), [19723, 2932897, 2932898]),
    "date, BC": (pa.int32(), pa.date32(), [19723, -719163, -719528]),
    "timestamp_ntz, year 10000": (
        pa.int64(),
        pa.timestamp("us"),
        [1704067200000000, 253402300800000000, 253402300800000001],
    ),
    "timestamp_ntz, BC": (
        pa.int64(),
        pa.timestamp("us"),
        [1704067200000000, -62135596800000001, -62198755200000000],
    ),
}


def key_table(raw: pa.DataType, typ: pa.DataType, values: list[int]) -> pa.Table:
    """60 persons with 5 rows each, keys drawn from ``values``."""
    rng = random.Random(1)
    uid = [f"u{u}" for u in range(60) for _ in range(5)]
    keys = [rng.choice(values) for _ in uid]
    return pa.table({"uid": uid, "k": pa.array(keys, raw).cast(typ)})


def plan(path: str) -> Plan:
    return Plan(
        source=Source(kind="parquet", location=path),
        filters=(),
        bound=Bound(privacy_unit="uid", max_partitions=1, max_rows_per_partition=1, salt=12345),
        aggregate=Aggregate(group_by=("k",), measures=(Measure(name="n", kind="rows"),)),
    )


def main() -> bool:
    same = True
    with local_spark() as spark, tempfile.TemporaryDirectory() as tmp:
        spark_md5, duck_md5 = SparkEngine(spark, hash="md5"), DuckDBEngine(hash="md5", threads=1)
        print("key type                    DuckDB md5 counts   Spark md5 counts")
        for i, (name, (raw, typ, values)) in enumerate(CASES.items()):
            path = os.path.join(tmp, f"k{i}.parquet")
            pq.write_table(key_table(raw, typ, values), path)
            duck = sorted(int(n) for n in duck_md5.execute(plan(path)).values["n"])
            spark_counts = sorted(int(n) for n in spark_md5.execute(plan(path)).values["n"])
            same &= duck == spark_counts
            print(
                f"{name:27s} {duck!s:19s} {spark_counts!s:19s}"
                f"{'' if duck == spark_counts else 'DIFFERENT'}"
            )
    return same


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
