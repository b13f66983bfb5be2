"""A Parquet glob whose files disagree on a column's type is decided before the charge (Spark).

Spark takes a glob's schema from one file's footer (``mergeSchema`` off) and reads every other
file with it: a file whose column has another type fails the scan when a row of it is read,
so an empty text file beside the numeric one answers, and the same file with one person's row
fails after the charge. Exact check on neighbouring tables D / D' (one row apart): both must
behave the same, or be refused with nothing spent.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import duckdb

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.spark import SparkEngine


def _glob(folder: Path, person: bool) -> str:
    folder.mkdir()
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT i AS uid, i % 3 AS g FROM range(100) r(i)) "
        f"TO '{folder}/a.parquet' (FORMAT parquet)"
    )
    rows = "SELECT '200' AS uid, '1' AS g" + ("" if person else " WHERE false")
    con.execute(f"COPY ({rows}) TO '{folder}/b.parquet' (FORMAT parquet)")
    con.close()
    return str(folder)


def _outcome(spark: Any, location: str) -> tuple[str, float]:
    budget = Budget(epsilon=10.0)
    try:
        s = dpa.Session(location, privacy_unit="uid", budget=budget, engine=SparkEngine(spark))
        q = (
            s.query()
            .group_by("g", keys=[0, 1, 2])
            .bound(max_partitions=1, max_rows_per_partition=1)
        )
        q.agg(n=dpa.count()).run(epsilon=1.0)
        return "answered", budget.spent[0]
    except Exception as exc:  # what matters: the same outcome on D and D', or nothing spent
        return type(exc).__name__, budget.spent[0]


def test_spark_glob_with_mixed_file_types_fails_the_same_on_neighbours(
    classic_spark: Any, tmp_path: Path
) -> None:
    warnings.simplefilter("ignore")
    on_d = _outcome(classic_spark, _glob(tmp_path / "d", False))
    on_d1 = _outcome(classic_spark, _glob(tmp_path / "d1", True))
    assert on_d[0] == on_d1[0] or (on_d[1] == 0.0 and on_d1[1] == 0.0), (on_d, on_d1)


def test_spark_glob_with_one_type_per_column_answers(classic_spark: Any, tmp_path: Path) -> None:
    """Files that agree on every column's type (in any column order) are read as before."""
    folder = tmp_path / "same"
    folder.mkdir()
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT i AS uid, i % 3 AS g FROM range(50) r(i)) "
        f"TO '{folder}/a.parquet' (FORMAT parquet)"
    )
    con.execute(
        "COPY (SELECT i % 3 AS g, 50 + i AS uid FROM range(50) r(i)) "
        f"TO '{folder}/b.parquet' (FORMAT parquet)"
    )
    con.close()
    assert _outcome(classic_spark, str(folder))[0] == "answered"
