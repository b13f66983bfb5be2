"""Top-k on Spark: the score measure the selection ranks is the same plan on both engines, so
one prepared top-k query gives identical exact scores on DuckDB and Spark (md5 bounding hash),
and ``session.sql``'s ``ORDER BY COUNT(*) DESC LIMIT k`` charges once and releases on Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _engine_reference import as_dict
from _sql_corpus import people

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.spark import SparkEngine


def test_top_k_scores_match_duckdb_and_release_on_spark(tmp_path: Path, classic_spark: Any) -> None:
    path = str(tmp_path / "people.parquet")
    people().to_parquet(path)
    duck = dpa.Session(
        path, privacy_unit="user_id", budget=Budget(epsilon=10.0, delta=1e-3), bounding_hash="md5"
    )
    q = duck.query().group_by("rid").bound(max_partitions=2, max_rows_per_partition=2)
    prepared = q.agg(n=dpa.count()).top_k(2).prepare(epsilon=1.0, delta=1e-6)
    want = as_dict(prepared.exact(duck.engine))
    assert len(want) >= 3
    assert as_dict(prepared.exact(SparkEngine(classic_spark, hash="md5"))) == want

    budget = Budget(epsilon=10.0, delta=1e-3)
    s = dpa.Session(classic_spark, table=path, privacy_unit="user_id", budget=budget)
    frame = s.sql(
        "SELECT rid, COUNT(*) AS n FROM people GROUP BY rid ORDER BY n DESC LIMIT 2",
        epsilon=5.0,
        delta=1e-6,
        max_partitions=2,
        max_rows_per_partition=2,
    )
    assert list(frame.columns) == ["rid", "n", "n_low", "n_high"] and len(frame) <= 2
    assert frame.attrs["dpkit"]["top_k"]["k"] == 2
    assert [r.count for r in budget.history()] == [1] and budget.spent[0] <= 5.0
