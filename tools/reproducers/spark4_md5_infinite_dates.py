"""md5 attack (round 4): DuckDB's ``infinity``/``-infinity`` dates and timestamps.

With ``bounding_hash="md5"`` the DuckDB and Spark engines promise to keep the same rows. A
Parquet DATE of 2**31-1 days (or a TIMESTAMP of 2**63-1 microseconds) is ``infinity`` on
DuckDB, whose md5 text (the day count through ``try``) is NULL, while Spark reads the same
integer as an ordinary far date with a day count: the tokens differ and so do the kept rows.

60 persons with 5 rows each, keys drawn from {2024-01-01, +infinity, -infinity}; one row per
person kept. Prints the rows per group on each engine; exits 1 while they differ.

    cd /work/wt-atk4 && PYTHONPATH=$PWD/src /work/main/.venv/bin/python \
        tools/reproducers/spark4_md5_infinite_dates.py
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from _sparkatk import local_spark

from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine

CASES = {
    "DATE": (pa.int32(), pa.date32(), [19723, 2**31 - 1, -(2**31 - 1)]),
    "TIMESTAMP": (pa.int64(), pa.timestamp("us"), [1704067200000000, 2**63 - 1, -(2**63 - 1)]),
}


def counts(engine: Any, path: str) -> list[int] | str:
    plan = Plan(
        source=Source(kind="parquet", location=path),
        filters=(),
        bound=Bound(privacy_unit="uid", max_partitions=1, max_rows_per_partition=1, salt=12345),
        aggregate=Aggregate(group_by=("k",), measures=(Measure(name="n", kind="rows"),)),
    )
    try:
        return sorted(int(n) for n in engine.execute(plan).values["n"])
    except Exception as exc:
        return f"error ({type(exc).__name__})"


def main() -> int:
    differ = 0
    with local_spark() as spark, tempfile.TemporaryDirectory() as folder:
        for name, (raw, typ, values) in CASES.items():
            rng = random.Random(1)
            uid = [f"u{u}" for u in range(60) for _ in range(5)]
            keys = pa.array(values, raw).cast(typ)
            path = os.path.join(folder, f"{name}.parquet")
            pq.write_table(
                pa.table(
                    {
                        "uid": uid,
                        "k": keys.take(pa.array([rng.randrange(len(values)) for _ in uid])),
                    }
                ),
                path,
            )
            duck = counts(DuckDBEngine(hash="md5", threads=1), path)
            sp = counts(SparkEngine(spark, hash="md5"), path)
            differ += duck != sp
            print(f"{name:10s} DuckDB rows per group {duck}   Spark {sp}")
    print("OPEN: the engines keep different rows" if differ else "FIXED")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
