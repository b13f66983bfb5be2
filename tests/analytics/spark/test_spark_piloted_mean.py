"""A pure mean with fixed bounds chooses its centre per group from a pilot
(:class:`dpkit.analytics._pricing.Pilot`); Spark and DuckDB compute the same fixed-point sums
and counts, so one seed gives the same pilot, centres and released frame on both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.noise import RandomSource


def test_piloted_mean_and_sum_on_spark_and_duckdb_agree(spark: Any, odd_parquet: Path) -> None:
    frames = []
    for source in (spark.read.parquet(str(odd_parquet)), str(odd_parquet)):
        s = dpa.Session(
            source,
            privacy_unit="uid",
            budget=Budget(epsilon=100.0),
            source_of_randomness=RandomSource(seed=5, insecure=True),
            bounding_hash="md5",
        )
        q = s.query().group_by("kind", keys=[1, 2, 3])
        q = q.bound(max_partitions=2, max_rows_per_partition=3)
        frame = q.agg(
            a=dpa.mean("age", bounds=(0.0, 1000.0)), t=dpa.sum("age", bounds=(0.0, 1000.0))
        ).run(epsilon=20.0)
        frames.append(frame)
    assert "pilot" in frames[0].attrs["dpkit"]["columns"]["a"]["centre"]
    assert frames[0].equals(frames[1])
