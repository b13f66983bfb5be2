"""A quick timing of one release on DuckDB, classic Spark (local) and Spark Connect (local).

    PYTHONPATH=src python benchmarks/spark_quick.py [rows]   (default 1,000,000)

One table (``uid`` with about 5 rows per unit, ``region`` of 8 values, ``x`` uniform), one query
(group by region with public keys, bound 1 x 5, count + mean), native bounding hash; the first
run of each engine warms it up and the best of the next two is printed. Spark runs with
``local[2]`` and two shuffle partitions per core's worth of data.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.spark import LocalConnectServer, SparkEngine

REGIONS = [f"r{i}" for i in range(8)]


def table(n: int, path: Path) -> None:
    rng = np.random.default_rng(1)
    pq.write_table(
        pa.table(
            {
                "uid": rng.integers(0, max(n // 5, 1), n),
                "region": np.array(REGIONS)[rng.integers(0, len(REGIONS), n)],
                "x": rng.uniform(0, 100, n),
            }
        ),
        path,
    )


def release(session: dpa.Session) -> float:
    q = (
        session.query()
        .group_by("region", keys=REGIONS)
        .bound(max_partitions=1, max_rows_per_partition=5)
        .agg(n=dpa.count(), m=dpa.mean("x", bounds=(0, 100)))
    )
    t = time.perf_counter()
    q.run(epsilon=0.1)
    return time.perf_counter() - t


def best(session: dpa.Session) -> float:
    release(session)  # warm-up
    return min(release(session) for _ in range(2))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    conf = {"spark.sql.shuffle.partitions": "4"}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.parquet"
        table(n, path)
        out = {
            "duckdb": best(dpa.Session(str(path), privacy_unit="uid", budget=Budget(epsilon=100.0)))
        }
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master("local[2]").config("spark.driver.memory", "1g")
        for k, v in conf.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        out["spark classic"] = best(
            dpa.Session(spark, table=str(path), privacy_unit="uid", budget=Budget(epsilon=100.0))
        )
        spark.stop()
        with LocalConnectServer(conf=conf) as server:
            engine = SparkEngine(remote=server.url)
            out["spark connect"] = best(
                dpa.Session(
                    str(path), engine=engine, privacy_unit="uid", budget=Budget(epsilon=100.0)
                )
            )
            engine.spark.stop()
    for name, t in out.items():
        print(f"{name:14s} {n:>11,d} rows  {t:6.2f} s")


if __name__ == "__main__":
    main()
