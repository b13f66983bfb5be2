"""A pure mean with fixed bounds chooses its centre per group from a pilot
(:class:`dpkit.analytics._pricing.Pilot`), or, beside a sum alone, is released from the
complementary pair (:class:`dpkit.analytics._pricing.Complement`); Spark and DuckDB compute the
same fixed-point sums and counts, so one seed gives the same released frame on both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.noise import RandomSource


@pytest.mark.parametrize("count", [True, False])
def test_piloted_mean_and_sum_on_spark_and_duckdb_agree(
    spark: Any, odd_parquet: Path, count: bool
) -> None:
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
        aggs = {
            "a": dpa.mean("age", bounds=(0.0, 1000.0)),
            "t": dpa.sum("age", bounds=(0.0, 1000.0)),
        }
        if count:  # a count of the column keeps the pilot
            aggs["n"] = dpa.count("age")
        frame = q.agg(**aggs).run(epsilon=20.0)
        frames.append(frame)
    info = frames[0].attrs["dpkit"]["columns"]["a"]
    assert "pilot" in info["centre"] if count else "pair" in info
    assert frames[0].equals(frames[1])
