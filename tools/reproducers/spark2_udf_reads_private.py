"""Spark attack: a "public" table that reads another parquet file, but whose Python code
returns the rows of the private parquet file (read by the worker at query time): a
``mapInPandas`` step that swaps the decoy's rows for the private ones, or a Python UDF that
looks a person's secret up in the private file. ``inputFiles()`` reports only the decoy file.

D: 40 persons whose ``ref`` is person 1000 (secret = 1), plus person 1000; D' = D without
person 1000. Prints the exact pre-noise count (sensitivity 1) on D and D', or the refusal.

Before the plan allow-list (a deny-list of in-memory plan nodes), ``join_public`` accepted the
``mapInPandas`` frame: exact count 40 on D vs 0 on D'. Now both frames are refused before the
charge on D and D' alike (``MapInPandas`` and the UDF are not on the allow-list).

    cd /work/wt-allow && PYTHONPATH=$PWD/src nice -n 10 /work/main/.venv/bin/python \
        tools/reproducers/spark2_udf_reads_private.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError


def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [{"user_id": 1000, "ref": -1, "secret": 1}]
    rows += [{"user_id": i, "ref": 1000, "secret": 0} for i in range(40)]
    d = pd.DataFrame(rows)
    return d, d[d.user_id != 1000].reset_index(drop=True)


def udf_public(spark: Any, private_path: str, decoy_path: str) -> Any:
    """Reads ``decoy_path`` as far as Spark can tell; yields the private file's rows."""

    def swap(batches: Any) -> Any:
        import pyarrow.parquet as pq

        for _ in batches:
            pass
        yield pq.read_table(private_path).to_pandas()

    return (
        spark.read.parquet(decoy_path)
        .coalesce(1)
        .mapInPandas(swap, "user_id long, ref long, secret long")
    )


def python_udf_public(spark: Any, private_path: str, decoy_path: str) -> Any:
    """Reads ``decoy_path``; a Python UDF fills in person 1000's secret from the private file."""
    from pyspark.sql import functions as sf

    def lookup(uid: int) -> int:
        rows = pd.read_parquet(private_path)
        return int(rows.secret[rows.user_id == uid].sum())

    secret_of = sf.udf(lambda uid: lookup(uid), "long")
    return (
        spark.read.parquet(decoy_path)
        .withColumn("user_id", sf.lit(1000).cast("long"))
        .withColumn("secret", secret_of("user_id"))
    )


PUBLICS = {"mapInPandas": udf_public, "python_udf": python_udf_public}


def exact_count(spark: Any, frame: pd.DataFrame, folder: str, tag: str, attack: str) -> int | str:
    private_path = os.path.join(folder, f"private_{tag}.parquet")
    decoy_path = os.path.join(folder, f"decoy_{tag}.parquet")
    frame.to_parquet(private_path, index=False)
    pd.DataFrame({"user_id": [5], "ref": [5], "secret": [0]}).to_parquet(decoy_path, index=False)
    spark.read.parquet(private_path).createOrReplaceTempView(f"people_{tag}")
    session = dpa.Session(
        spark, table=f"people_{tag}", privacy_unit="user_id", budget=Budget(epsilon=10.0)
    )
    public = PUBLICS[attack](spark, private_path, decoy_path)
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
    except DPKitError as exc:
        return f"{type(exc).__name__}: {exc}"
    return int(p.exact(session.engine).values["n:n"][0])


def main() -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    try:
        d, d_prime = tables()
        moved = False
        with tempfile.TemporaryDirectory() as folder:
            for attack in PUBLICS:
                on_d = exact_count(spark, d, folder, f"d_{attack}", attack)
                on_d_prime = exact_count(spark, d_prime, folder, f"dp_{attack}", attack)
                print(f"{attack}: exact count on D  = {on_d}")
                print(f"{attack}: exact count on D' = {on_d_prime}")
                moved |= (
                    isinstance(on_d, int) and isinstance(on_d_prime, int) and on_d - on_d_prime > 1
                )
        print("BROKEN: moved by more than the sensitivity 1" if moved else "held")
        return 1 if moved else 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
