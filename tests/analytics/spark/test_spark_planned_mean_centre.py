"""A planned mean of a pure session is centred (``dpkit.analytics._planner.mean_centre``) from
its noisy bounds histogram; Spark and DuckDB compute the same histogram, contribution bins and
fixed-point sums, so one seed gives the same centre, count share and released frame on both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.noise import RandomSource


def test_planned_centred_mean_on_spark_and_duckdb_agree(spark: Any, odd_parquet: Path) -> None:
    frames, plans = [], []
    for source in (spark.read.parquet(str(odd_parquet)), str(odd_parquet)):
        s = dpa.Session(
            source,
            privacy_unit="uid",
            budget=Budget(epsilon=100.0),
            source_of_randomness=RandomSource(seed=5, insecure=True),
            bounding_hash="md5",
        )
        q = s.query().group_by("kind", keys=[1, 2, 3])
        frame = q.agg(a=dpa.mean("age", bounds="auto"), n=dpa.count()).run(epsilon=20.0)
        frames.append(frame)
        plans.append(frame.attrs["dpkit"]["plan"])
    assert plans[0] == plans[1]
    assert "a" in plans[0]["centres"]  # the rule applied (values within [0, inf))
    assert frames[0].equals(frames[1])
