"""pandas ``object`` columns sent to Spark: text by one rule, never a type inferred from rows.

Before, ``createDataFrame`` inferred the column's type from its values: an id spelled ``1``,
``1.0``, ``True`` and ``Decimal('1.00')`` made the session fail (``CANNOT_MERGE_TYPE``) when
it was created, and a column of missing values only was the NULL type, a text id among them
made it text. Exact pre-noise figures on D (100 people) and D' (plus one person).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.spark import SparkEngine


def _session(spark: Any, ids: list[Any]) -> Any:
    frame = pd.DataFrame({"uid": pd.Series(ids, dtype=object), "k": ["a"] * len(ids)})
    return dpa.Session(
        frame,
        privacy_unit="uid",
        engine=SparkEngine(spark),
        budget=Budget(epsilon=10.0, delta=1e-5),
    )


def _units(spark: Any, ids: list[Any]) -> int:
    s = _session(spark, ids)
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1).agg(u=dpa.count_distinct())
    return int(q.prepare(epsilon=1.0, delta=1e-6).exact(s.engine).values["u:n"][0])


@pytest.mark.parametrize(
    "spellings", [[0.0, -0.0], [1, 1.0, True, Decimal("1.00")]], ids=["zero", "one"]
)
def test_spark_object_column_spellings_are_one_unit(spark: Any, spellings: list[Any]) -> None:
    others = [f"person-{i}" for i in range(100)]
    assert _units(spark, others + spellings) - _units(spark, others) == 1


def test_spark_object_column_type_does_not_depend_on_the_rows(spark: Any) -> None:
    missing = [None] * 5
    for ids in (missing, [*missing, "x"], [*missing, 1]):
        s = _session(spark, ids)
        assert s.engine.columns(s.table.source)["uid"] == "VARCHAR"
