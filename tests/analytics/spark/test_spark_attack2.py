"""Attacks on the Spark ``join_public`` file rule (independent attacker, second round).

A "public" DataFrame that Spark reads from another parquet file, but whose Python UDF returns
the rows of the private file, read by the worker at query time: ``inputFiles()`` reports only
the other file and the optimized plan holds no node of the in-memory list (``BatchEvalPython``
/ ``Generate`` are not in it), so the join is accepted and the private rows become unbounded
public partners. D: 40 persons whose ``ref`` is person 1000 (``secret = 1``), plus person
1000; D' = D without person 1000; the exact count (sensitivity 1) moves by 40 (see
benchmarks/attack/spark2_udf_reads_private.py for the ``mapInPandas`` variant).

Expected: refused before the charge (e.g. an allow-list of plan nodes instead of a deny-list).

Also: a `where` condition `s LIKE pat` with a column pattern raises after the charge on D
(one person's pattern `a\\` ends with the escape character; Spark refuses it row by row even
with ANSI off) and counts 40 on D'. Expected: LIKE/ILIKE patterns limited to literals.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [{"user_id": 1000, "ref": -1, "secret": 1}]
    rows += [{"user_id": i, "ref": 1000, "secret": 0} for i in range(40)]
    d = pd.DataFrame(rows)
    return d, d[d.user_id != 1000].reset_index(drop=True)


def _udf_public(spark: Any, private_csv: str, decoy: str) -> Any:
    """Reads ``decoy`` as far as ``inputFiles()`` can tell; its rows are the private file's."""
    from pyspark.sql import functions as sf

    def rows(_: int) -> list[tuple[int, int, int]]:
        import csv
        with open(private_csv, newline="") as fh:
            return [(int(r["user_id"]), int(r["ref"]), int(r["secret"]))
                    for r in csv.DictReader(fh)]

    swap = sf.udf(rows, "array<struct<user_id: long, ref: long, secret: long>>",
                 useArrow=False)
    one = spark.read.parquet(decoy).limit(1)
    return one.select(sf.inline(swap(sf.lit(1))))


def _exact(spark: Any, frame: pd.DataFrame, tmp: Path) -> int | str:
    tag = uuid.uuid4().hex[:10]
    private_csv = str(tmp / f"private_{tag}.csv")
    decoy = str(tmp / f"decoy_{tag}.parquet")
    frame.to_csv(private_csv, index=False)
    pd.DataFrame({"user_id": [5], "ref": [5], "secret": [0]}).to_parquet(decoy, index=False)
    view = f"people_{tag}"
    (spark.read.option("header", True).schema("user_id long, ref long, secret long")
     .csv(private_csv).createOrReplaceTempView(view))
    session = dpa.Session(spark, table=view, privacy_unit="user_id",
                          budget=Budget(epsilon=10.0))
    try:
        p = (session.query().join_public(_udf_public(spark, private_csv, decoy),
                                         on={"ref": "user_id"},
                                         columns={"secret": "pub_secret"})
             .where("pub_secret = 1").bound(max_partitions=1, max_rows_per_partition=1)
             .agg(n=dpa.count()).prepare(epsilon=1.0))
        session._validate_plan(p.plan)
    except DPKitError as exc:
        return f"{type(exc).__name__}: {exc}"
    return int(p.exact(session.engine).values["n:n"][0])


def test_public_frame_whose_udf_reads_the_private_file_is_refused(
        classic_spark: Any, tmp_path: Path) -> None:
    d, d_prime = _tables()
    on_d = _exact(classic_spark, d, tmp_path)
    on_d_prime = _exact(classic_spark, d_prime, tmp_path)
    # Before a fix: 40 on D, 0 on D' (sensitivity 1). After: both refused before the charge.
    assert not (isinstance(on_d, int) and isinstance(on_d_prime, int)
                and abs(on_d - on_d_prime) > 1), (on_d, on_d_prime)
    assert isinstance(on_d, str) and isinstance(on_d_prime, str), (on_d, on_d_prime)


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
    session = dpa.Session(spark, table=view, privacy_unit="user_id",
                          budget=Budget(epsilon=10.0))
    try:
        p = (session.query().where("s LIKE pat")
             .bound(max_partitions=1, max_rows_per_partition=1)
             .agg(n=dpa.count()).prepare(epsilon=1.0))
        session._validate_plan(p.plan)
    except DPKitError as exc:  # refused before the charge: a fix
        return f"refused: {type(exc).__name__}"
    try:
        return int(p.exact(session.engine).values["n:n"][0])
    except DPKitError as exc:
        return f"raised after the charge: {type(exc).__name__}"


def test_like_with_a_column_pattern_never_raises_after_the_charge(
        classic_spark: Any) -> None:
    d, d_prime = _like_tables()
    on_d = _like_count(classic_spark, d)
    on_d_prime = _like_count(classic_spark, d_prime)
    # Before a fix: D raises after the charge, D' counts 40. After: both refused before the
    # charge (LIKE patterns limited to literals) or both run (the row fails the condition).
    assert not str(on_d).startswith("raised after the charge"), (on_d, on_d_prime)
    assert type(on_d) is type(on_d_prime), (on_d, on_d_prime)
