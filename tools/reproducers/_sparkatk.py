"""Shared helper of the Spark attack scripts: one small classic ``local[1]`` session."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget


@contextmanager
def local_spark() -> Iterator[Any]:
    """A classic ``local[1]`` SparkSession (no UI, 512 MB driver), always stopped."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("dpkit-spark-attack")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "512m")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield spark
    finally:
        spark.stop()


def referencing_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """D: 40 persons referencing person 1000 (``secret = 1``) plus person 1000; D' = D
    without person 1000. A self-join as "public" makes the count of
    ``ref -> public.secret = 1`` move by 40 between D and D'."""
    rows = [{"user_id": 1000, "ref": -1, "secret": 1}]
    rows += [{"user_id": i, "ref": 1000, "secret": 0} for i in range(40)]
    d = pd.DataFrame(rows)
    return d, d[d.user_id != 1000].reset_index(drop=True)


def budget() -> Budget:
    return Budget(epsilon=10.0)


def exact_join_count(session: Any, public: Any) -> int | str:
    """The pre-noise count of rows whose "public" partner has ``secret = 1`` (one row per
    unit), after the checks ``run()`` does before the charge; or the refusal's class name."""
    try:
        p = (
            session.query()
            .join_public(public, on={"ref": "user_id"}, columns={"secret": "pub_secret"})
            .where("pub_secret = 1")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .prepare(epsilon=1.0)
        )
        session.validate(p)
    except Exception as exc:  # refused before the charge: what a fix should do
        return f"refused ({type(exc).__name__}: {str(exc)[:60]})"
    return int(p.exact(session.engine).values["n:n"][0])
