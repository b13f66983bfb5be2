"""Quantiles and histograms of DATE and TIMESTAMP columns read the same exact numbers on Spark
as on DuckDB: days since 1970-01-01 for a date, microseconds since the epoch for an instant
(``timestamp``) and for a wall-clock ``timestamp_ntz``. The bin counts of date and timestamp
edges agree to the microsecond, and a date quantile is the same date on both engines."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.noise import RandomSource

UTC = dt.timezone.utc


def test_date_and_timestamp_bins_and_quantiles_agree_with_duckdb(
    classic_spark: Any, tmp_path: Path
) -> None:
    n = 300
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=(i * 37) % 366) for i in range(n)]
    times = [
        dt.datetime(1965, 1, 1)
        + dt.timedelta(days=(i * 53) % 30000, minutes=97 * i, microseconds=i)
        for i in range(n)
    ]
    path = tmp_path / "dates.parquet"
    pq.write_table(
        pa.table(
            {
                "uid": [i % 30 for i in range(n)],
                "d": pa.array(days, pa.date32()),
                "ts": pa.array(times, pa.timestamp("us")),
                "tz": pa.array(
                    [t.replace(tzinfo=UTC) for t in times], pa.timestamp("us", tz="UTC")
                ),
            }
        ),
        path,
    )
    # an edge at a row's exact time and one a microsecond later; one before the epoch
    t = min(x for x in times if x > dt.datetime(1975, 1, 1))
    edges = [
        "1960-01-01",
        "1969-12-31T23:59:59.999999",
        t,
        t + dt.timedelta(microseconds=1),
        "2060-01-01",
    ]
    aware = [e.replace(tzinfo=UTC) if isinstance(e, dt.datetime) else e for e in edges]

    def release(src: Any) -> tuple[Any, Any]:
        s = dpa.Session(
            src,
            privacy_unit="uid",
            budget=Budget(epsilon=100.0),
            source_of_randomness=RandomSource(seed=1, insecure=True),
        )
        q = (
            s.query()
            .bound(max_partitions=1, max_rows_per_partition=10)
            .agg(
                h=dpa.histogram("ts", edges=edges),
                z=dpa.histogram("tz", edges=aware),
                d=dpa.histogram("d", edges=["2024-01-01", dt.date(2024, 3, 17), "2024-12-31"]),
                q=dpa.quantile("d", [0.5], bounds=("2024-01-01", dt.date(2024, 12, 31))),
            )
        )
        prepared = q.prepare(epsilon=50.0)
        exact = prepared.exact(s.engine)
        out = prepared.release_from(exact, source=RandomSource(seed=2, insecure=True))
        return {k: v[0] for k, v in exact.values.items()}, out["q_p50"].iloc[0]

    duck_counts, duck_q = release(str(path))
    spark_counts, spark_q = release(classic_spark.read.parquet(str(path)))
    assert spark_counts == duck_counts
    assert duck_counts["h:bins"] == duck_counts["z:bins"]
    ref = tuple(
        sum(1 for x in times if a <= x < b)
        for a, b in zip(
            [
                dt.datetime(1960, 1, 1),
                dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
                t,
                t + dt.timedelta(microseconds=1),
            ],
            [
                dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
                t,
                t + dt.timedelta(microseconds=1),
                dt.datetime(2060, 1, 1),
            ],
            strict=True,
        )
    )
    assert duck_counts["h:bins"] == ref and ref[2] >= 1
    assert isinstance(duck_q, dt.date) and spark_q == duck_q
