"""Spark attack: a ``where`` condition ``s LIKE pat`` whose pattern is a column. Spark
compiles a non-literal LIKE pattern row by row and raises on a pattern that ends with the
escape character ``\\`` (also with ANSI mode off), so the release raises on D (which holds one
person whose ``pat`` is ``a\\``) and runs on D' = D without that person: an exception that
depends on one person's value, after the plan was accepted.

    cd /work/wt-atk2 && PYTHONPATH=$PWD/src nice -n 10 /work/main/.venv/bin/python \
        tools/reproducers/spark2_like_column_pattern.py
"""

from __future__ import annotations

import sys
from typing import Any

import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError


def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [{"user_id": i, "s": "abc", "pat": "a%"} for i in range(40)]
    rows.append({"user_id": 1000, "s": "abc", "pat": "a\\"})
    d = pd.DataFrame(rows)
    return d, d[d.user_id != 1000].reset_index(drop=True)


def exact_count(spark: Any, frame: pd.DataFrame, tag: str) -> int | str:
    spark.createDataFrame(frame).createOrReplaceTempView(f"people_{tag}")
    session = dpa.Session(
        spark, table=f"people_{tag}", privacy_unit="user_id", budget=Budget(epsilon=10.0)
    )
    p = (
        session.query()
        .where("s LIKE pat")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
        .prepare(epsilon=1.0)
    )
    session.validate(p)  # accepted: raises nothing before the charge
    try:
        return int(p.exact(session.engine).values["n:n"][0])
    except DPKitError as exc:
        return f"after the charge: {type(exc).__name__}: {str(exc)[:160]}"


def main() -> int:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    try:
        d, d_prime = tables()
        on_d = exact_count(spark, d, "d")
        on_d_prime = exact_count(spark, d_prime, "dp")
        print(f"exact count on D  = {on_d}")
        print(f"exact count on D' = {on_d_prime}")
        broken = isinstance(on_d, str) and isinstance(on_d_prime, int)
        print("BROKEN: raises after the charge on D only" if broken else "held")
        return 1 if broken else 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
