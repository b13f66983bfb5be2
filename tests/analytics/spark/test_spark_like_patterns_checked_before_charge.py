"""A ``where`` condition ``s LIKE pat`` with a column pattern raised after the charge on D (one
person's pattern ``a\\`` ends with the escape character; Spark refuses it row by row even with
ANSI off) and counted 40 on D' (tools/reproducers/spark2_like_column_pattern.py). LIKE/ILIKE
patterns are now string literals, checked before the charge."""

from __future__ import annotations

import uuid
from typing import Any

import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError


def _like_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """D: 40 persons with pattern ``a%`` plus person 1000 with ``a\\`` (a pattern ending with
    the escape character, which Spark refuses row by row); D' = D without person 1000."""
    rows = [{"user_id": i, "s": "abc", "pat": "a%"} for i in range(40)]
    rows.append({"user_id": 1000, "s": "abc", "pat": "a\\"})
    d = pd.DataFrame(rows)
    return d, d[d.user_id != 1000].reset_index(drop=True)


def _like_count(spark: Any, frame: pd.DataFrame) -> int | str:
    view = f"people_{uuid.uuid4().hex[:10]}"
    spark.createDataFrame(frame).createOrReplaceTempView(view)
    session = dpa.Session(spark, table=view, privacy_unit="user_id", budget=Budget(epsilon=10.0))
    try:
        p = (
            session.query()
            .where("s LIKE pat")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .prepare(epsilon=1.0)
        )
        session.validate(p)
    except DPKitError as exc:  # refused before the charge: a fix
        return f"refused: {type(exc).__name__}"
    try:
        return int(p.exact(session.engine).values["n:n"][0])
    except DPKitError as exc:
        return f"raised after the charge: {type(exc).__name__}"


def test_like_with_a_column_pattern_never_raises_after_the_charge(classic_spark: Any) -> None:
    d, d_prime = _like_tables()
    on_d = _like_count(classic_spark, d)
    on_d_prime = _like_count(classic_spark, d_prime)
    # Before a fix: D raises after the charge, D' counts 40. After: both refused before the
    # charge (LIKE patterns limited to literals) or both run (the row fails the condition).
    assert not str(on_d).startswith("raised after the charge"), (on_d, on_d_prime)
    assert type(on_d) is type(on_d_prime), (on_d, on_d_prime)
