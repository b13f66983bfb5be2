"""Third attack round on the Spark engine: group-key types, public keys, non-file sources.

Findings (these tests fail until fixed; tools/reproducers/spark3_*.py print the figures):

* an INTERVAL YEAR TO MONTH group key passes Spark's analysis, is charged, and then PySpark's
  row conversion raises for every row (classic): ``run()`` raises after the charge on D (one
  row) and releases on D' (no row);
* Spark ML vector keys: ``DenseVector([1, 0])`` and ``SparseVector(2, {0: 1})`` are two Spark
  groups but one Python key, so one person's group replaced another's (count 100 -> 1); ML
  matrix keys are unhashable, so ``run()`` raised after the charge on D only;
* nanosecond keys from Parquet (TIMESTAMP_NS, TIMESTAMPTZ in ns, TIME_NS; DuckDB engine, the
  Session's default for a Parquet path) 1 ns apart are two groups but one Python key: the
  added person's group replaced another's in the release (count 100 -> 1);
* ``bounding_hash="md5"``: DATE and TIMESTAMP_NTZ keys outside the years 1..9999 have other
  texts on Spark (``+10000-01-01``, ``0000-12-31``) than on DuckDB (``10000-01-01``,
  ``0001-12-31 (BC)``), so the engines keep different rows;
* ``bounding_hash="md5"``: a NaN key in a Parquet chunk without NULL stays NaN on DuckDB (it
  folds the ``isnan`` of the normalization from the chunk's statistics) but is NULL on Spark.

Defences that held (passing tests): keys of TIMESTAMP_NTZ/DATE beyond Python's range, DECIMAL(38,
x) extremes, invalid UTF-8 BINARY, BOOLEAN/NULL, -0.0/0.0/NaN/NULL doubles and floats, CHAR/
VARCHAR padding, day-time intervals at their ends and TIME decode one to one and alike on
classic and Connect; MAP/ARRAY/STRUCT/VARIANT/calendar-interval/GEOMETRY keys are refused
before the charge; odd public keys are refused before the charge or run; non-deterministic
privacy units (``rand()``, ``monotonically_increasing_id()``) never let a unit exceed the bounds.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _spark_helpers import key_file, md5_counts

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine
from dpkit.errors import DPKitError


def _outcome(
    spark: Any, sql: str, *, where: str | None = None, keys: Any = None, key: str = "k"
) -> tuple[str, tuple[float, float]]:
    """``run()``'s outcome (``released`` or the exception's class) and the budget spent."""
    budget = Budget(epsilon=10.0, delta=1e-5)
    s = dpa.Session(spark.sql(sql), privacy_unit="uid", budget=budget)
    q = s.query()
    if where is not None:
        q = q.where(where)
    q = (
        q.group_by(key, keys=keys)
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    try:
        q.run(epsilon=1.0, delta=1e-6)
        return "released", budget.spent
    except Exception as exc:
        return type(exc).__name__, budget.spent


def _exact(
    spark: Any, frame: Any, *, key: str = "k", max_partitions: int = 1, max_rows: int = 1
) -> dict[Any, tuple[int, int]] | None:
    """Exact (rows, units) per group key, or None when refused before the charge."""
    s = dpa.Session(frame, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    try:
        p = (
            s.query()
            .group_by(key)
            .bound(max_partitions=max_partitions, max_rows_per_partition=max_rows)
            .agg(n=dpa.count())
            .prepare(epsilon=1.0, delta=1e-6)
        )
        s.validate(p)
    except DPKitError:
        return None
    r = p.exact(s.engine)
    out = {
        k[0]: (int(n), int(u))
        for k, n, u in zip(r.keys, r.values["n:n"], r.values["__units"], strict=True)
    }
    assert len(out) == len(r.keys), "two engine groups decoded to one key"
    return out


# ------------------------------------------------------------ finding: year-month intervals

_YM_BASE = ", ".join(f"({i}, 0, INTERVAL '1-0' YEAR TO MONTH)" for i in range(10))
_YM_D = (
    f"SELECT * FROM VALUES {_YM_BASE}, (1000, 99, INTERVAL '0-1' YEAR TO MONTH) AS t(uid, age, k)"
)
_YM_D_PRIME = f"SELECT * FROM VALUES {_YM_BASE} AS t(uid, age, k)"


def test_year_month_interval_key_never_raises_after_the_charge(classic_spark: Any) -> None:
    """``where("age > 50").group_by(k)`` with ``k`` an INTERVAL YEAR TO MONTH: person 1000's
    row is the only one left on D. Before a fix: D raises after the charge (PySpark cannot
    convert the key), D' releases (no row to convert)."""
    on_d = _outcome(classic_spark, _YM_D, where="age > 50")
    on_d_prime = _outcome(classic_spark, _YM_D_PRIME, where="age > 50")
    assert on_d == on_d_prime, (on_d, on_d_prime)


def test_year_month_interval_key_same_outcome_on_connect(connect_spark: Any) -> None:
    """Held in the privacy sense on Spark Connect: the Arrow conversion fails whatever the rows,
    so D and D' have the same outcome (a fix should refuse the type before the charge)."""
    on_d = _outcome(connect_spark, _YM_D, where="age > 50")
    on_d_prime = _outcome(connect_spark, _YM_D_PRIME, where="age > 50")
    assert on_d == on_d_prime, (on_d, on_d_prime)


# ------------------------------------------------------------ findings: user-defined key types


def test_ml_vector_keys_keep_their_own_aggregates(spark: Any) -> None:
    """``DenseVector([1.0, 0.0])`` and ``SparseVector(2, {0: 1.0})`` are two Spark groups but
    equal Python keys: the added person's group must not replace the 100 persons' group
    (before a fix, classic: counts [100] on D' and [1] on D; sensitivity 1), or the UDT key
    is refused before the charge."""
    from pyspark.ml.linalg import Vectors

    rows = [(i, Vectors.dense([1.0, 0.0])) for i in range(100)]
    with_unit = _exact(
        spark, spark.createDataFrame([*rows, (1000, Vectors.sparse(2, {0: 1.0}))], ["uid", "k"])
    )
    without = _exact(spark, spark.createDataFrame(rows, ["uid", "k"]))
    if with_unit is None or without is None:
        return  # refused before the charge
    assert sorted(without.values()) == [(100, 100)]
    assert sorted(with_unit.values()) == [(1, 1), (100, 100)], with_unit


def test_ml_matrix_keys_never_raise_after_the_charge(spark: Any) -> None:
    """``DenseMatrix`` keys are unhashable in the driver: before a fix (classic) ``run()`` raises
    after the charge on D (person 1000 passes ``age > 50``) and releases on D' (no row)."""
    from pyspark.ml.linalg import Matrices

    rows = [(i, 0, Matrices.dense(1, 1, [1.0])) for i in range(10)]
    outcomes = []
    for data in ([*rows, (1000, 99, Matrices.dense(1, 1, [2.0]))], rows):
        budget = Budget(epsilon=10.0, delta=1e-5)
        s = dpa.Session(
            spark.createDataFrame(data, ["uid", "age", "k"]), privacy_unit="uid", budget=budget
        )
        q = (
            s.query()
            .where("age > 50")
            .group_by("k")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
        )
        try:
            q.run(epsilon=1.0, delta=1e-6)
            outcomes.append(("released", budget.spent))
        except Exception as exc:
            outcomes.append((type(exc).__name__, budget.spent))
    assert outcomes[0] == outcomes[1], outcomes


# ------------------------------------------------------------ finding: nanosecond keys (DuckDB)


@pytest.mark.parametrize(
    ("typ", "t"),
    [
        (pa.timestamp("ns"), 1704067200000000000),
        (pa.timestamp("ns", tz="UTC"), 1704067200000000000),
        (pa.time64("ns"), 12 * 3600 * 10**9),
    ],
    ids=["timestamp-ns", "timestamptz-ns", "time-ns"],
)
def test_nanosecond_keys_keep_their_own_aggregates(
    tmp_path: Path, typ: pa.DataType, t: int
) -> None:
    """Keys 1 ns apart are two DuckDB groups but one Python ``datetime``/``time``: the release
    indexes groups by key (the last wins), so the added person's group (count 1) replaced the
    100 persons' group (before a fix: 2 engine groups, 1 key, count read 100 -> 1). Safe: the
    engine's keys stay pairwise distinct, or the type is refused before the charge. (Spark
    refuses these Parquet types when it reads the schema.)"""
    path = tmp_path / "ns.parquet"
    pq.write_table(
        pa.table(
            {"uid": [*range(100), 1000], "k": pa.array([t] * 100 + [t + 1], pa.int64()).cast(typ)}
        ),
        path,
    )
    s = dpa.Session(str(path), privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
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
        return  # refused before the charge
    r = p.exact(s.engine)
    assert sorted(int(n) for n in r.values["n:n"]) == [1, 100]
    assert len(set(r.keys)) == len(r.keys), r.keys


@pytest.mark.parametrize(
    ("raw", "typ", "values"),
    [
        (pa.int32(), pa.date32(), [19723, 2932897, 2932898]),  # year 10000
        (pa.int32(), pa.date32(), [19723, -719163, -719528]),  # 1 BC (year 0)
        (
            pa.int64(),
            pa.timestamp("us"),
            [1704067200000000, 253402300800000000, 253402300800000001],
        ),  # year 10000
        (
            pa.int64(),
            pa.timestamp("us"),
            [1704067200000000, -62135596800000001, -62198755200000000],
        ),  # 1 BC, 2 BC
    ],
    ids=["date-10000", "date-bc", "ntz-10000", "ntz-bc"],
)
def test_md5_dates_outside_years_1_to_9999_keep_the_same_rows_as_duckdb(
    classic_spark: Any, tmp_path: Path, raw: pa.DataType, typ: pa.DataType, values: list[int]
) -> None:
    """The md5 profile promises the same kept rows on Spark and DuckDB (before a fix: e.g.
    DuckDB [15, 21, 24] vs Spark [15, 22, 23] rows per group for dates in the year 10000)."""
    path = key_file(tmp_path / "k.parquet", pa.array(values, raw).cast(typ))
    try:
        spark_counts = md5_counts(SparkEngine(classic_spark, hash="md5"), path)
    except DPKitError:
        return  # a key type the engines cannot agree on may be refused
    duck = md5_counts(DuckDBEngine(hash="md5", threads=1), path)
    assert sum(duck) == 60  # one row per person: bounding is binding
    assert duck == spark_counts


@pytest.mark.parametrize("typ", [pa.float32(), pa.float64()], ids=["float", "double"])
def test_md5_nan_key_in_parquet_keeps_the_same_rows_as_duckdb(
    classic_spark: Any, tmp_path: Path, typ: pa.DataType
) -> None:
    """NaN keys in a chunk without NULL (before a fix: DuckDB keeps NaN, whose md5 token is not
    NULL's; e.g. the NULL group counts 13 rows on DuckDB and 9 on Spark)."""
    keys = pa.array([0.0, -0.0, math.nan, 1e-45, 3.4e38], typ)
    path = key_file(tmp_path / "nan.parquet", keys)
    duck = md5_counts(DuckDBEngine(hash="md5", threads=1), path)
    spark_counts = md5_counts(SparkEngine(classic_spark, hash="md5"), path)
    assert sum(duck) == 60
    assert duck == spark_counts


# ------------------------------------------------------------ held: one-to-one key decoding

_KEY_CASES: dict[str, tuple[str, int]] = {
    # name: (SQL of (uid, k) rows, one row per person; number of distinct Spark groups).
    # Dates and timestamps outside the years 1..9999 read as NULL (docs/special-values.md):
    # the ends form one NULL group.
    "ntz-ends": (
        "SELECT uid, CAST(timestamp_micros(x) AS TIMESTAMP_NTZ) k FROM VALUES "
        "(1, -62135596800000001L), (2, -62135596800000000L), (3, 253402300800000000L), "
        "(4, 9223372036854775807L), (5, -9223372036854775808L), (6, 0L), "
        "(7, 1L) AS t(uid, x)",
        4,
    ),
    "date-ends": (
        "SELECT uid, date_from_unix_date(x) k FROM VALUES (1, -719163), (2, -719162), "
        "(3, 2932897), (4, 2147483647), (5, -2147483648) AS t(uid, x)",
        2,
    ),
    "decimal38": (
        "SELECT uid, CAST(k AS DECIMAL(38, 0)) k FROM VALUES "
        "(1, 99999999999999999999999999999999999999), "
        "(2, -99999999999999999999999999999999999999), (3, 0) AS t(uid, k)",
        3,
    ),
    "decimal38-37": (
        "SELECT uid, CAST(k AS DECIMAL(38, 37)) k FROM VALUES (1, '0'), "
        "(2, '0.0000000000000000000000000000000000001'), "
        "(3, '-9.9999999999999999999999999999999999999') AS t(uid, k)",
        3,
    ),
    "binary": (
        "SELECT uid, k FROM VALUES (1, X'FF'), (2, X'FE'), (3, X''), (4, NULL), "
        "(5, X'C3') AS t(uid, k)",
        5,
    ),
    "boolean": ("SELECT uid, k FROM VALUES (1, true), (2, false), (3, NULL) AS t(uid, k)", 3),
    # -0.0 is 0.0 and NaN is NULL (docs/special-values.md): three groups on both sessions
    "double": (
        "SELECT uid, k FROM VALUES (1, CAST('-0.0' AS DOUBLE)), (2, 0.0D), "
        "(3, CAST('NaN' AS DOUBLE)), (4, NULL), (5, 1.0D) AS t(uid, k)",
        3,
    ),
    "float": (
        "SELECT uid, CAST(k AS FLOAT) k FROM VALUES (1, CAST('-0.0' AS DOUBLE)), "
        "(2, 0.0D), (3, CAST('NaN' AS DOUBLE)), (4, NULL), (5, 1.0D) AS t(uid, k)",
        3,
    ),
    "char": (
        "SELECT uid, CAST(k AS CHAR(3)) k FROM VALUES (1, 'a'), (2, 'a '), (3, 'a  ') AS t(uid, k)",
        3,
    ),
    "varchar": (
        "SELECT uid, CAST(k AS VARCHAR(3)) k FROM VALUES (1, 'a'), (2, 'a '), "
        "(3, 'a  ') AS t(uid, k)",
        3,
    ),
    "day-time": (
        "SELECT * FROM VALUES (1, INTERVAL '1 02:03:04.000005' DAY TO SECOND), "
        "(2, INTERVAL '106751991 04:00:54.775807' DAY TO SECOND), "
        "(3, INTERVAL '-106751991 04:00:54.775808' DAY TO SECOND) AS t(uid, k)",
        3,
    ),
    "void": ("SELECT uid, NULL k FROM VALUES (1), (2) AS t(uid)", 1),
}


_KEY_ROWS = {
    "ntz-ends": 7,
    "date-ends": 5,
    "decimal38": 3,
    "decimal38-37": 3,
    "binary": 5,
    "boolean": 3,
    "double": 5,
    "float": 5,
    "char": 3,
    "varchar": 3,
    "day-time": 3,
    "void": 2,
}


def test_key_types_decode_one_to_one_and_alike_on_classic_and_connect(
    classic_spark: Any, connect_spark: Any
) -> None:
    """Each distinct Spark group is one driver key with its own count, the same on classic and
    Connect (held; equal as Python values: classic gives ``Decimal('1.00E-37')`` where Connect
    gives ``Decimal('1E-37')``)."""
    for name, (sql, groups) in _KEY_CASES.items():
        classic = _exact(classic_spark, classic_spark.sql(sql), max_partitions=8, max_rows=8)
        connect = _exact(connect_spark, connect_spark.sql(sql), max_partitions=8, max_rows=8)
        assert classic is not None, name
        assert len(classic) == groups, (name, classic)
        assert sum(n for n, _ in classic.values()) == _KEY_ROWS[name], (name, classic)
        assert classic == connect, (name, classic, connect)


def test_time_keys_decode_one_to_one(classic_spark: Any) -> None:
    """TIME keys (behind ``spark.sql.timeType.enabled``): two groups, two keys (held)."""
    before = classic_spark.conf.get("spark.sql.timeType.enabled", None)
    classic_spark.conf.set("spark.sql.timeType.enabled", "true")
    try:
        got = _exact(
            classic_spark,
            classic_spark.sql(
                "SELECT uid, CAST(k AS TIME) k FROM VALUES (1, '12:00:00'), "
                "(2, '23:59:59.999999'), (3, '12:00:00.000001') AS t(uid, k)"
            ),
        )
    finally:
        if before is None:
            classic_spark.conf.unset("spark.sql.timeType.enabled")
        else:
            classic_spark.conf.set("spark.sql.timeType.enabled", before)
    assert got is not None and sorted(got.values()) == [(1, 1)] * 3, got


@pytest.mark.parametrize(
    "expr",
    [
        "map(s, 1)",
        "array(s)",
        "named_struct('a', s)",
        "parse_json(s)",
        "make_interval(0, 1, 0, 1)",
        "st_geomfromwkb(X'0101000000000000000000F03F000000000000F03F')",
    ],
    ids=["map", "array", "struct", "variant", "calendar-interval", "geometry"],
)
def test_unorderable_or_nested_keys_are_refused_before_the_charge(
    classic_spark: Any, expr: str
) -> None:
    """Held: refused by type (PlanError) or by Spark's analysis, with nothing spent."""
    outcome, spent = _outcome(
        classic_spark, f"SELECT uid, {expr} AS k FROM VALUES (1, '1'), (2, '2') AS t(uid, s)"
    )
    assert outcome != "released"
    assert spent == (0.0, 0.0), (outcome, spent)


# ------------------------------------------------------------ held: public keys


@pytest.mark.parametrize(
    ("sql", "keys"),
    [
        (
            "SELECT uid, CAST(k AS DECIMAL(38, 0)) k FROM VALUES "
            "(1, 99999999999999999999999999999999999999), (2, 1) AS t(uid, k)",
            [1.5, 1],
        ),
        (
            "SELECT uid, CAST(k AS DECIMAL(38, 10)) k FROM VALUES "
            "(1, 9999999999999999999999999999), (2, 1) AS t(uid, k)",
            [10**37, 1],
        ),
        ("SELECT uid, k FROM VALUES (1, 5), (2, 1) AS t(uid, k)", [10**40, 1]),
        ("SELECT uid, k FROM VALUES (1, 5), (2, 1) AS t(uid, k)", ["x", 1]),
        ("SELECT uid, k FROM VALUES (1, 'true'), (2, 'a') AS t(uid, k)", [True, "a"]),
        ("SELECT uid, k FROM VALUES (1, INTERVAL '1-0' YEAR TO MONTH) AS t(uid, k)", [12]),
    ],
    ids=["dec38-half", "dec38-1e37", "int-1e40", "int-text", "text-bool", "ym-int"],
)
def test_odd_public_keys_run_or_are_refused_before_the_charge(
    classic_spark: Any, sql: str, keys: list[Any]
) -> None:
    """Held: a public key Spark cannot compare with the column is refused by Spark's analysis
    (nothing spent); one it can compare runs (ANSI off: a failing cast is no match)."""
    outcome, spent = _outcome(classic_spark, sql, keys=keys)
    assert outcome == "released" or spent == (0.0, 0.0), (outcome, spent)


# ------------------------------------------------------------ held: non-deterministic sources


@pytest.mark.parametrize("unit", ["rand", "monotonic"])
def test_non_deterministic_privacy_unit_stays_within_the_bounds(
    classic_spark: Any, unit: str
) -> None:
    """A privacy unit computed by ``rand()`` or ``monotonically_increasing_id()`` (10 units
    over 5000 rows in 3 partitions) is evaluated once per row: the kept rows never exceed
    units x max_partitions x max_rows (held)."""
    uid = "CAST(rand() * 10 AS INT)" if unit == "rand" else "monotonically_increasing_id() % 10"
    frame = classic_spark.sql(
        f"SELECT {uid} AS uid, CAST(rand() * 50 AS INT) AS k FROM "
        "(SELECT /*+ REPARTITION(3) */ id FROM range(5000))"
    )
    got = _exact(classic_spark, frame, max_partitions=2, max_rows=3)
    assert got is not None
    assert sum(n for n, _ in got.values()) <= 10 * 2 * 3, got
    assert sum(u for _, u in got.values()) <= 10 * 2, got
