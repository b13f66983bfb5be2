"""Regression tests for attacks on the Spark engine (tools/reproducers/spark_*.py).

Each test compares neighbouring tables D (with one extra privacy unit) and D' (without it)
under one plan and asserts what differential privacy needs: the pre-noise aggregate moves by at
most the sensitivity the plan charges, or the query is refused before the charge, and an
exception after the charge never depends on the extra unit's values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError

# The private table joined as "public" under another Spark name (spark_public_self_alias.py):
# tests/analytics/spark/test_spark_public_alias.py.


# ------------------------------------------------------------ bucket conditions under ANSI


@pytest.mark.parametrize("condition", ["s = 1", "x + 1 > 0"])
def test_bucket_condition_never_raises_after_the_charge_under_ansi(
    spark: Any, condition: str
) -> None:
    """A bucket grouped by partition selection has no ``where``: the statement runs with the
    session's ANSI mode (on by default in Spark 4). ``'abc' = 1`` (a cast) and
    ``(2**63 - 1) + 1`` (an overflow) must make the row fail the condition, as in a ``where``,
    not raise after the charge on D only (classic Spark and Spark Connect)."""
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")  # Spark 4's default, made explicit
    try:
        base = {"uid": [1, 2], "s": ["1", "2"], "x": [1, 2]}
        extra = {"uid": [3], "s": ["abc"], "x": [2**63 - 1]}
        outcomes = []
        for table in (pd.DataFrame({k: base[k] + extra[k] for k in base}), pd.DataFrame(base)):
            budget = Budget(epsilon=10.0, delta=1e-5)
            s = dpa.Session(spark.createDataFrame(table), privacy_unit="uid", budget=budget)
            q = (
                s.query()
                .bucket("b", [(condition, "one")], "other")
                .group_by("b")
                .bound(max_partitions=1, max_rows_per_partition=1)
                .agg(n=dpa.count())
            )
            try:
                q.run(epsilon=1.0, delta=1e-6)
                outcome = "released"
            except Exception as exc:
                outcome = type(exc).__name__
            outcomes.append((outcome, budget.spent))
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)
    assert outcomes[0] == outcomes[1], outcomes


# ------------------------------------------------------------ md5 profile: DuckDB == Spark


def _key_rows(key_type: Any, values: list[Any], n_units: int = 60, seed: int = 1) -> Any:
    import random

    import pyarrow as pa

    rng = random.Random(seed)
    uid, keys = [], []
    for u in range(n_units):
        for _ in range(5):
            uid.append(f"u{u}")
            keys.append(rng.choice(values))
    return pa.table({"uid": pa.array(uid), "k": pa.array(keys, key_type)})


@pytest.mark.parametrize("kind", ["timestamp_tz", "binary"])
def test_md5_bounding_keeps_the_same_rows_as_duckdb_for_these_key_types(
    classic_spark: Any, tmp_path: Path, kind: str
) -> None:
    """docs/spark.md: with the md5 hash both engines keep the same rows. Keys whose text
    differs between the engines (``TIMESTAMP WITH TIME ZONE``: DuckDB adds ``+00``; ``BLOB``:
    DuckDB escapes bytes) hash differently, and one group per unit keeps other rows."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
    from dpkit.analytics.engines.duckdb import DuckDBEngine
    from dpkit.analytics.engines.spark import SparkEngine

    if kind == "timestamp_tz":
        utc = dt.timezone.utc
        table = _key_rows(
            pa.timestamp("us", tz="UTC"),
            [dt.datetime(2024, 1, 1, h, tzinfo=utc) for h in (0, 1, 5)],
        )
    else:
        table = _key_rows(pa.binary(), [b"a", b"\xff\x00", b""])
    path = tmp_path / f"{kind}.parquet"
    pq.write_table(table, path)
    plan = Plan(
        source=Source(kind="parquet", location=str(path)),
        filters=(),
        bound=Bound(privacy_unit="uid", max_partitions=1, max_rows_per_partition=1, salt=12345),
        aggregate=Aggregate(group_by=("k",), measures=(Measure(name="n", kind="rows"),)),
    )

    def counts(result: Any) -> dict[Any, int]:
        # instants compared as epoch seconds: DuckDB returns aware datetimes, Spark naive ones
        # in the driver's zone (which .timestamp() reads as local time)
        return {
            repr(k[0].timestamp() if isinstance(k[0], dt.datetime) else bytes(k[0])): int(n)
            for k, n in zip(result.keys, result.values["n"], strict=True)
        }

    try:
        spark = counts(SparkEngine(classic_spark, hash="md5").execute(plan))
    except DPKitError:
        return  # a key type whose text the engines cannot agree on may be refused
    duck = counts(DuckDBEngine(hash="md5", threads=1).execute(plan))
    assert sum(duck.values()) == 60  # one row per unit: bounding is binding
    assert duck == spark


# ------------------------------------------------------------ collated group keys


@pytest.mark.parametrize("hash_kind", ["native", "md5"])
def test_collated_group_key_takes_one_partition_slot_per_group(
    classic_spark: Any, hash_kind: str
) -> None:
    """Under ``UTF8_LCASE`` four spellings of ``paris`` are one group: one unit must add at most
    ``max_rows_per_partition`` (1) rows and 1 unit to it (before the fix: 4 and 4), or the key
    is refused before the charge."""

    def paris(values: str) -> tuple[int, int] | None:
        df = classic_spark.sql(
            f"SELECT uid, city COLLATE UTF8_LCASE AS city FROM VALUES {values} AS t(uid, city)"
        )
        s = dpa.Session(
            df, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5), bounding_hash=hash_kind
        )
        try:
            p = (
                s.query()
                .group_by("city")
                .bound(max_partitions=4, max_rows_per_partition=1)
                .agg(n=dpa.count())
                .prepare(epsilon=1.0, delta=1e-6)
            )
            s.validate(p)
        except DPKitError:
            return None
        r = p.exact(s.engine)
        i = [str(k[0]).lower() for k in r.keys].index("paris")
        return int(r.values["n:n"][i]), int(r.values["__units"][i])

    rows = "(1, 'lyon'), (2, 'paris')"
    with_unit = paris(rows + ", (1000, 'paris'), (1000, 'Paris'), (1000, 'PARIS'), (1000, 'pAris')")
    without = paris(rows)
    if with_unit is None or without is None:
        return  # refused before the charge
    assert with_unit[0] - without[0] <= 1, f"count moved by {with_unit[0] - without[0]}"
    assert with_unit[1] - without[1] <= 1, f"units moved by {with_unit[1] - without[1]}"


# ------------------------------------------------------------ timestamps in a DST fold


def test_timestamp_keys_in_a_dst_fold_keep_their_own_aggregates(
    classic_spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """05:30 and 06:30 UTC on 2024-11-03 are both 01:30 in a New York driver: two groups must
    not become one key whose aggregates are the last row's (before the fix: the added unit's
    group of 1 replaced the 100 units' group, count 100 -> 1, sensitivity 1)."""
    import time

    base = ", ".join(f"({i}, TIMESTAMP'2024-11-03 05:30:00')" for i in range(100))
    unit = ", (1000, TIMESTAMP'2024-11-03 06:30:00')"

    def biggest(values: str) -> tuple[int, int] | None:
        df = classic_spark.sql(f"SELECT * FROM VALUES {values} AS t(uid, ts)")
        s = dpa.Session(df, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
        try:
            p = (
                s.query()
                .group_by("ts")
                .bound(max_partitions=1, max_rows_per_partition=1)
                .agg(n=dpa.count())
                .prepare(epsilon=1.0, delta=1e-6)
            )
            s.validate(p)
        except DPKitError:
            return None
        r = p.exact(s.engine)
        return max(int(n) for n in r.values["n:n"]), len(r.keys)

    zone = classic_spark.conf.get("spark.sql.session.timeZone")
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    classic_spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        with_unit, without = biggest(base + unit), biggest(base)
    finally:
        classic_spark.conf.set("spark.sql.session.timeZone", zone)
        monkeypatch.undo()
        time.tzset()
    if with_unit is None or without is None:
        return  # refused before the charge
    assert without == (100, 1)
    assert with_unit[0] >= 99, f"the 100 units' group now counts {with_unit[0]}"
    assert with_unit[1] == 2, "two instants, two groups"


def test_invalid_utf8_text_keys_keep_their_own_aggregates(classic_spark: Any) -> None:
    """``CAST(X'FF' AS STRING)`` and ``CAST(X'FE' AS STRING)`` are two Spark groups but one
    Python string (``'\\ufffd'``): the added unit's group must not replace the 100 units' group
    (before the fix: count 100 -> 1, sensitivity 1)."""
    base = ", ".join(f"({i}, X'FF')" for i in range(100))

    def counts(values: str) -> list[int] | None:
        df = classic_spark.sql(
            f"SELECT uid, CAST(b AS STRING) AS k FROM VALUES {values} AS t(uid, b)"
        )
        s = dpa.Session(df, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
        try:
            p = (
                s.query()
                .group_by("k")
                .bound(max_partitions=1, max_rows_per_partition=1)
                .agg(n=dpa.count())
                .prepare(epsilon=1.0, delta=1e-6)
            )
            s.validate(p)
        except DPKitError:
            return None
        return sorted(int(n) for n in p.exact(s.engine).values["n:n"])

    with_unit, without = counts(base + ", (1000, X'FE')"), counts(base)
    if with_unit is None or without is None:
        return  # refused before the charge
    assert without == [100]
    assert with_unit == [1, 100]


@pytest.mark.parametrize(
    ("zone", "extreme"),
    [("America/New_York", "0001-01-01 00:00:00"), ("Asia/Tokyo", "9999-12-31 23:00:00")],
)
def test_extreme_timestamp_key_never_raises_after_the_charge(
    classic_spark: Any, monkeypatch: pytest.MonkeyPatch, zone: str, extreme: str
) -> None:
    """A key at either end of Spark's TIMESTAMP range is outside Python's ``datetime`` range in
    the driver's time zone: the release must not raise after the charge on D only."""
    import time

    base = ", ".join(f"({i}, TIMESTAMP'2024-01-01 00:00:00')" for i in range(10))
    outcomes = []
    session_zone = classic_spark.conf.get("spark.sql.session.timeZone")
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    classic_spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        for values in (base + f", (1000, TIMESTAMP'{extreme}')", base):
            budget = Budget(epsilon=10.0, delta=1e-5)
            df = classic_spark.sql(f"SELECT * FROM VALUES {values} AS t(uid, ts)")
            s = dpa.Session(df, privacy_unit="uid", budget=budget)
            q = (
                s.query()
                .group_by("ts")
                .bound(max_partitions=1, max_rows_per_partition=1)
                .agg(n=dpa.count())
            )
            try:
                q.run(epsilon=1.0, delta=1e-6)
                outcome = "released"
            except Exception as exc:
                outcome = type(exc).__name__
            outcomes.append((outcome, budget.spent))
    finally:
        classic_spark.conf.set("spark.sql.session.timeZone", session_zone)
        monkeypatch.undo()
        time.tzset()
    assert outcomes[0] == outcomes[1], outcomes


def test_invalid_utf8_text_key_never_raises_after_the_charge_on_connect(connect_spark: Any) -> None:
    """On Spark Connect the driver decodes text keys from Arrow as UTF-8: one unit's key
    ``CAST(X'FE' AS STRING)`` made ``run()`` raise after the charge on D only (its message,
    withheld by the session, quoted the byte)."""
    base = ", ".join(f"({i}, X'61')" for i in range(100))
    outcomes = []
    for values in (base + ", (1000, X'FE')", base):
        budget = Budget(epsilon=10.0, delta=1e-5)
        df = connect_spark.sql(
            f"SELECT uid, CAST(b AS STRING) AS k FROM VALUES {values} AS t(uid, b)"
        )
        s = dpa.Session(df, privacy_unit="uid", budget=budget)
        q = (
            s.query()
            .group_by("k")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
        )
        try:
            q.run(epsilon=1.0, delta=1e-6)
            outcome = "released"
        except Exception as exc:
            outcome = type(exc).__name__
        outcomes.append((outcome, budget.spent))
    assert outcomes[0] == outcomes[1], outcomes
