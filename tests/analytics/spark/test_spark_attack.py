"""Regression tests for attacks on the Spark engine (benchmarks/attack/spark_*.py).

Each test compares neighbouring tables D (with one extra privacy unit) and D' (without it)
under one plan and asserts what differential privacy needs: the pre-noise aggregate moves by at
most the sensitivity the plan charges, or the query is refused before the charge, and an
exception after the charge never depends on the extra unit's values.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError

# ------------------------------------------------------------ the private table as "public"


def _referencing_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """D: 40 persons whose ``ref`` is person 1000 (``secret = 1``), plus person 1000; D' = D
    without person 1000. Joined to itself as a public table, person 1000's row becomes the
    public partner of 40 persons: the count of ``pub_secret = 1`` moves by 40."""
    rows = [{"user_id": 1000, "ref": -1, "secret": 1}]
    rows += [{"user_id": i, "ref": 1000, "secret": 0} for i in range(40)]
    d = pd.DataFrame(rows)
    return d, d[d.user_id != 1000].reset_index(drop=True)


def _join_count(session: Any, public: Any) -> int | None:
    """The exact count (one row per unit, sensitivity 1), or None when the join is refused
    before the charge (by the same checks ``run()`` does)."""
    try:
        p = (session.query().join_public(public, on={"ref": "user_id"},
                                         columns={"secret": "pub_secret"})
             .where("pub_secret = 1").bound(max_partitions=1, max_rows_per_partition=1)
             .agg(n=dpa.count()).prepare(epsilon=1.0))
        session._validate_plan(p.plan)
    except DPKitError:
        return None
    return int(p.exact(session.engine).values["n:n"][0])


def _name() -> str:
    return f"atk_{uuid.uuid4().hex[:10]}"


def _session(spark: Any, table: Any) -> Any:
    return dpa.Session(spark, table=table, privacy_unit="user_id", budget=Budget(epsilon=10.0))


def _temp_view(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    people, pub = _name(), _name()
    frame.createOrReplaceTempView(people)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {pub} AS SELECT * FROM {people}")
    return _session(spark, people), pub


def _global_view(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    people, pub = _name(), _name()
    frame.createOrReplaceTempView(people)
    spark.sql(f"CREATE OR REPLACE GLOBAL TEMP VIEW {pub} AS SELECT * FROM {people}")
    return _session(spark, people), f"global_temp.{pub}"


def _spark_table(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    people = _name()
    frame.createOrReplaceTempView(people)
    return _session(spark, people), spark.table(people)


def _select_star(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    return (dpa.Session(frame, privacy_unit="user_id", budget=Budget(epsilon=10.0)),
            frame.select("*"))


def _frame_view(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    pub = _name()
    frame.createOrReplaceTempView(pub)
    return dpa.Session(frame, privacy_unit="user_id", budget=Budget(epsilon=10.0)), pub


def _parquet_file(frame: Any, tmp: Path) -> str:
    path = str(tmp / f"{_name()}.parquet")
    frame.toPandas().to_parquet(path)
    return path


def _sql_on_file(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    path = _parquet_file(frame, tmp)
    return _session(spark, path), f"parquet.`{path}`"


def _file_url(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    path = _parquet_file(frame, tmp)
    return _session(spark, path), "file://" + path


def _engine_file_view(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    path = _parquet_file(frame, tmp)
    session = _session(spark, path)
    own = [name for (_, loc), name in session.engine._files.items() if loc == path]
    return session, own[0]  # listed by spark.catalog.listTables() too


def _part_file(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    folder = tmp / _name()
    folder.mkdir()
    part = str(folder / "part-0.parquet")
    frame.toPandas().to_parquet(part)
    return _session(spark, str(folder)), part


ALIASES: dict[str, Callable[[Any, Any, Path], tuple[Any, Any]]] = {
    "temp-view": _temp_view, "global-temp-view": _global_view, "spark-table": _spark_table,
    "select-star": _select_star, "frame-own-view": _frame_view, "sql-on-file": _sql_on_file,
    "file-url": _file_url, "part-file": _part_file, "engine-file-view": _engine_file_view,
}


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_private_rows_are_never_joined_as_public_under_another_spark_name(
        classic_spark: Any, tmp_path: Path, alias: str) -> None:
    """The private rows under another Spark spelling (a view over them, ``spark.table`` of the
    same name, a derived DataFrame, ``parquet.`path```, a ``file://`` URL, a part file of the
    private directory) are refused as a public table, or at least cannot move the count past
    its sensitivity 1 (before the fix: 40 vs 0)."""
    counts = []
    for table in _referencing_tables():
        session, public = ALIASES[alias](classic_spark, classic_spark.createDataFrame(table),
                                         tmp_path)
        counts.append(_join_count(session, public))
    if None not in counts:
        d, d1 = counts
        assert d is not None and d1 is not None
        assert abs(d - d1) <= 1, f"count moved by {d - d1} vs sensitivity 1"


def test_sql_front_end_refuses_a_spark_view_over_the_private_table(classic_spark: Any) -> None:
    """``session.sql`` with ``pub`` declared public and ``pub`` a Spark temp view selecting
    the private table: refused, or the count moves by at most 1 (before the fix: 40 vs 0)."""
    people, pub = _name(), _name()
    meta = {"tables": {people: {"privacy_unit": "user_id", "max_partitions": 1,
                                "max_rows_per_partition": 1}, pub: {"public": True}}}
    sql = (f"SELECT COUNT(*) AS n FROM {people} p JOIN {pub} ON p.ref = {pub}.user_id "
           f"WHERE {pub}.secret = 1")
    counts = []
    for table in _referencing_tables():
        classic_spark.createDataFrame(table).createOrReplaceTempView(people)
        classic_spark.sql(f"CREATE OR REPLACE TEMP VIEW {pub} AS SELECT * FROM {people}")
        s = _session(classic_spark, people)
        try:
            p = s.sql_query(sql, metadata=meta).query.prepare(epsilon=1.0)
            s._validate_plan(p.plan)
        except DPKitError:
            return  # refused before the charge
        counts.append(int(p.exact(s.engine).values["n:n"][0]))
    assert abs(counts[0] - counts[1]) <= 1, f"count moved by {counts[0] - counts[1]}"


# ------------------------------------------------------------ bucket conditions under ANSI


@pytest.mark.parametrize("condition", ["s = 1", "x + 1 > 0"])
def test_bucket_condition_never_raises_after_the_charge_under_ansi(
        spark: Any, condition: str) -> None:
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
            s = dpa.Session(spark.createDataFrame(table), privacy_unit="uid",
                            budget=budget)
            q = (s.query().bucket("b", [(condition, "one")], "other").group_by("b")
                 .bound(max_partitions=1, max_rows_per_partition=1).agg(n=dpa.count()))
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
        classic_spark: Any, tmp_path: Path, kind: str) -> None:
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
        table = _key_rows(pa.timestamp("us", tz="UTC"),
                          [dt.datetime(2024, 1, 1, h, tzinfo=utc) for h in (0, 1, 5)])
    else:
        table = _key_rows(pa.binary(), [b"a", b"\xff\x00", b""])
    path = tmp_path / f"{kind}.parquet"
    pq.write_table(table, path)
    plan = Plan(source=Source(kind="parquet", location=str(path)), filters=(),
                bound=Bound(privacy_unit="uid", max_partitions=1, max_rows_per_partition=1,
                            salt=12345),
                aggregate=Aggregate(group_by=("k",), measures=(Measure(name="n", kind="rows"),)))

    def counts(result: Any) -> dict[Any, int]:
        # instants compared as epoch seconds: DuckDB returns aware datetimes, Spark naive ones
        # in the driver's zone (which .timestamp() reads as local time)
        return {repr(k[0].timestamp() if isinstance(k[0], dt.datetime) else bytes(k[0])):
                int(n) for k, n in zip(result.keys, result.values["n"], strict=True)}

    try:
        spark = counts(SparkEngine(classic_spark, hash="md5").execute(plan))
    except DPKitError:
        return  # a key type whose text the engines cannot agree on may be refused
    duck = counts(DuckDBEngine(hash="md5", threads=1).execute(plan))
    assert sum(duck.values()) == 60  # one row per unit: bounding is binding
    assert duck == spark


# ------------------------------------------------------------ collated group keys


@pytest.mark.parametrize("hash_kind", ["native", "md5"])
def test_collated_group_key_takes_one_partition_slot_per_group(classic_spark: Any,
                                                              hash_kind: str) -> None:
    """Under ``UTF8_LCASE`` four spellings of ``paris`` are one group: one unit must add at most
    ``max_rows_per_partition`` (1) rows and 1 unit to it (before the fix: 4 and 4), or the key
    is refused before the charge."""
    def paris(values: str) -> tuple[int, int] | None:
        df = classic_spark.sql(f"SELECT uid, city COLLATE UTF8_LCASE AS city FROM VALUES "
                               f"{values} AS t(uid, city)")
        s = dpa.Session(df, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5),
                        bounding_hash=hash_kind)
        try:
            p = (s.query().group_by("city").bound(max_partitions=4, max_rows_per_partition=1)
                 .agg(n=dpa.count()).prepare(epsilon=1.0, delta=1e-6))
            s._validate_plan(p.plan)
        except DPKitError:
            return None
        r = p.exact(s.engine)
        i = [str(k[0]).lower() for k in r.keys].index("paris")
        return int(r.values["n:n"][i]), int(r.values["__units"][i])

    rows = "(1, 'lyon'), (2, 'paris')"
    with_unit = paris(rows + ", (1000, 'paris'), (1000, 'Paris'), (1000, 'PARIS'), "
                             "(1000, 'pAris')")
    without = paris(rows)
    if with_unit is None or without is None:
        return  # refused before the charge
    assert with_unit[0] - without[0] <= 1, f"count moved by {with_unit[0] - without[0]}"
    assert with_unit[1] - without[1] <= 1, f"units moved by {with_unit[1] - without[1]}"


# ------------------------------------------------------------ timestamps in a DST fold


def test_timestamp_keys_in_a_dst_fold_keep_their_own_aggregates(
        classic_spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
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
            p = (s.query().group_by("ts").bound(max_partitions=1, max_rows_per_partition=1)
                 .agg(n=dpa.count()).prepare(epsilon=1.0, delta=1e-6))
            s._validate_plan(p.plan)
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
        df = classic_spark.sql(f"SELECT uid, CAST(b AS STRING) AS k FROM VALUES {values} "
                               "AS t(uid, b)")
        s = dpa.Session(df, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
        try:
            p = (s.query().group_by("k").bound(max_partitions=1, max_rows_per_partition=1)
                 .agg(n=dpa.count()).prepare(epsilon=1.0, delta=1e-6))
            s._validate_plan(p.plan)
        except DPKitError:
            return None
        return sorted(int(n) for n in p.exact(s.engine).values["n:n"])

    with_unit, without = counts(base + ", (1000, X'FE')"), counts(base)
    if with_unit is None or without is None:
        return  # refused before the charge
    assert without == [100]
    assert with_unit == [1, 100]


@pytest.mark.parametrize(("zone", "extreme"), [("America/New_York", "0001-01-01 00:00:00"),
                                               ("Asia/Tokyo", "9999-12-31 23:00:00")])
def test_extreme_timestamp_key_never_raises_after_the_charge(
        classic_spark: Any, monkeypatch: pytest.MonkeyPatch, zone: str, extreme: str) -> None:
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
            q = (s.query().group_by("ts").bound(max_partitions=1, max_rows_per_partition=1)
                 .agg(n=dpa.count()))
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


def test_invalid_utf8_text_key_never_raises_after_the_charge_on_connect(
        connect_spark: Any) -> None:
    """On Spark Connect the driver decodes text keys from Arrow as UTF-8: one unit's key
    ``CAST(X'FE' AS STRING)`` made ``run()`` raise after the charge on D only (its message,
    withheld by the session, quoted the byte)."""
    base = ", ".join(f"({i}, X'61')" for i in range(100))
    outcomes = []
    for values in (base + ", (1000, X'FE')", base):
        budget = Budget(epsilon=10.0, delta=1e-5)
        df = connect_spark.sql(f"SELECT uid, CAST(b AS STRING) AS k FROM VALUES {values} "
                               "AS t(uid, b)")
        s = dpa.Session(df, privacy_unit="uid", budget=budget)
        q = (s.query().group_by("k").bound(max_partitions=1, max_rows_per_partition=1)
             .agg(n=dpa.count()))
        try:
            q.run(epsilon=1.0, delta=1e-6)
            outcome = "released"
        except Exception as exc:
            outcome = type(exc).__name__
        outcomes.append((outcome, budget.spent))
    assert outcomes[0] == outcomes[1], outcomes
