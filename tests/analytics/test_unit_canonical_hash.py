"""The privacy unit is bounded as one person per SQL equality class, with both bounding hashes.

The window that bounds a person partitions rows by SQL equality of the unit, and the hash that
ranks the person's groups must read the same classes: a unit whose value has several spellings
that SQL calls equal (an INTERVAL of ``1 month`` and of ``30 days``, a STRUCT or LIST holding
``0.0`` or ``-0.0``, text under a collation) would otherwise take one slot of a group per
spelling. The unit is held to the group keys' type rule (refused by type before the charge),
floats are normalized before the hash, and on DuckDB text is compared byte by byte, a
collated unit being refused. Exact (pre-noise) checks on D and D' = D plus one adversarial
person with every spelling: each group's count and unit count move by at most the bounds.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._column_types import check_unit_type, is_key_type, is_nested
from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
from dpkit.analytics.engines import DuckDBEngine
from dpkit.analytics.engines._compiler import (
    DUCKDB,
    DUCKDB_MD5,
    SPARK,
    SPARK_MD5,
    PlanError,
    compile_plan,
)
from dpkit.errors import DPKitError

HASHES = ("native", "md5")
MAX_PARTITIONS = 3


def _plan(max_partitions: int = MAX_PARTITIONS) -> Plan:
    return Plan(
        source=Source(kind="table", location="t"),
        filters=(),
        bound=Bound(
            privacy_unit="uid",
            max_partitions=max_partitions,
            max_rows_per_partition=1,
            salt=20261128,
        ),
        aggregate=Aggregate(
            group_by=("k",),
            measures=(Measure(name="n", kind="rows"), Measure(name="u", kind="units")),
        ),
    )


def _connection(
    unit_type: str,
    key_type: str,
    base: list[tuple[Any, Any]],
    adversary: list[tuple[Any, Any]],
    setup: tuple[str, ...] = (),
) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for statement in setup:
        con.execute(statement)
    con.execute(f"CREATE TABLE t (uid {unit_type}, k {key_type})")
    for row in base + adversary:
        con.execute("INSERT INTO t VALUES (?, ?)", list(row))
    return con


def _exact(
    con: duckdb.DuckDBPyConnection, hash_kind: str, max_partitions: int = MAX_PARTITIONS
) -> dict[Any, tuple[int, int]]:
    result = DuckDBEngine(connection=con, hash=hash_kind).execute(_plan(max_partitions))
    return {
        k[0]: (int(n), int(u))
        for k, n, u in zip(result.keys, result.values["n"], result.values["u"], strict=True)
    }


def _moves(d: dict[Any, tuple[int, int]], d1: dict[Any, tuple[int, int]]) -> list[tuple[int, int]]:
    keys = set(d) | set(d1)
    return [
        (d1.get(k, (0, 0))[0] - d.get(k, (0, 0))[0], d1.get(k, (0, 0))[1] - d.get(k, (0, 0))[1])
        for k in keys
    ]


def _assert_one_person(d: dict[Any, tuple[int, int]], d1: dict[Any, tuple[int, int]]) -> None:
    """D' adds one person: each group moves by at most max_rows_per_partition (1) rows and
    one unit, and at most max_partitions groups move."""
    moves = _moves(d, d1)
    assert all(0 <= n <= 1 and 0 <= u <= 1 for n, u in moves), moves
    assert sum(n for n, _ in moves) <= MAX_PARTITIONS


BASE = [(f"u{i}", g) for i in range(12) for g in ("g", "h")]


@pytest.mark.parametrize("hash_kind", HASHES)
def test_interval_spellings_are_one_person(hash_kind: str) -> None:
    # 30 days spelled 1,000 ways (months, days and microseconds mixed), equal in SQL: the md5
    # hash read 1,000 texts and the group's count and unit count moved by 1,000. An INTERVAL
    # unit is refused by type, before anything is charged.
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT to_days((1000 + i)::INT) AS uid, 'g' AS k FROM range(20) r(i)"
    )
    con.execute(
        "INSERT INTO t SELECT to_months((i % 2)::INT) + to_days((30 - 30 * (i % 2) - "
        "i // 2)::INT) + to_microseconds((i // 2) * 86400000000), 'g' "
        "FROM range(1000) r(i)"
    )
    assert con.execute("SELECT count(DISTINCT uid) FROM t").fetchone() == (21,)
    budget = Budget(epsilon=1.0, delta=1e-6)
    s = dpa.Session(con, table="t", privacy_unit="uid", budget=budget, bounding_hash=hash_kind)
    with pytest.raises(DPKitError, match="privacy unit column 'uid' has the type INTERVAL"):
        s.query().group_by("k").bound(max_partitions=1, max_rows_per_partition=1).agg(
            n=dpa.count()
        ).run(epsilon=1.0, delta=1e-7)
    assert budget.spent == (0.0, 0.0)


NESTED_ADVERSARY = {
    # eight spellings of one value: each of three doubles +0.0 or -0.0
    "STRUCT(a DOUBLE, b DOUBLE, c DOUBLE)": "{'a': [0.0::DOUBLE, -0.0::DOUBLE][i % 2 + 1], "
    "'b': [0.0::DOUBLE, -0.0::DOUBLE][i // 2 % 2 + 1], "
    "'c': [0.0::DOUBLE, -0.0::DOUBLE][i // 4 % 2 + 1]}",
    "DOUBLE[]": "[[0.0::DOUBLE, -0.0::DOUBLE][i % 2 + 1], "
    "[0.0::DOUBLE, -0.0::DOUBLE][i // 2 % 2 + 1], "
    "[0.0::DOUBLE, -0.0::DOUBLE][i // 4 % 2 + 1]]",
    "DOUBLE[3]": "[[0.0::DOUBLE, -0.0::DOUBLE][i % 2 + 1], "
    "[0.0::DOUBLE, -0.0::DOUBLE][i // 2 % 2 + 1], "
    "[0.0::DOUBLE, -0.0::DOUBLE][i // 4 % 2 + 1]]::DOUBLE[3]",
    "MAP(VARCHAR, DOUBLE)": "MAP {'a': [0.0::DOUBLE, -0.0::DOUBLE][i % 2 + 1]}",
}


@pytest.mark.parametrize("hash_kind", HASHES)
@pytest.mark.parametrize("unit_type", list(NESTED_ADVERSARY))
def test_nested_units_with_signed_zeros_are_refused_before_the_charge(
    unit_type: str, hash_kind: str
) -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t (uid {unit_type}, k VARCHAR)")
    con.execute(f"INSERT INTO t SELECT {NESTED_ADVERSARY[unit_type]}, 'g' FROM range(8) r(i)")
    budget = Budget(epsilon=1.0, delta=1e-6)
    s = dpa.Session(con, table="t", privacy_unit="uid", budget=budget, bounding_hash=hash_kind)
    with pytest.raises(DPKitError, match="privacy unit column 'uid' has the type"):
        s.query().group_by("k").bound(max_partitions=1, max_rows_per_partition=1).agg(
            n=dpa.count()
        ).run(epsilon=1.0, delta=1e-7)
    assert budget.spent == (0.0, 0.0)


TYPES = [
    "BIGINT",
    "DOUBLE",
    "DECIMAL(10,2)",
    "VARCHAR",
    "BOOLEAN",
    "DATE",
    "TIMESTAMP",
    "TIMESTAMP WITH TIME ZONE",
    "TIME",
    "UUID",
    "BLOB",
    "ENUM('a', 'b')",
    "INTERVAL DAY TO SECOND",
    "INTERVAL",
    "INTERVAL YEAR TO MONTH",
    "TIMESTAMP_NS",
    "TIME WITH TIME ZONE",
    "DOUBLE[]",
    "DOUBLE[3]",
    "LIST",
    "STRUCT(a DOUBLE)",
    "STRUCT",
    "MAP(VARCHAR, DOUBLE)",
    "MAP",
    "UNION(a DOUBLE, b VARCHAR)",
    "JSON",
    "BIT",
    "VARINT",
    "VECTOR",
    "TIMESTAMP(9)",
]


@pytest.mark.parametrize("sql_type", TYPES)
def test_unit_types_follow_the_group_key_rule(sql_type: str) -> None:
    schema = {"uid": sql_type, "k": "VARCHAR"}
    accepted = is_key_type(sql_type) and not is_nested(sql_type)
    for profile in (DUCKDB, DUCKDB_MD5, SPARK, SPARK_MD5):
        if accepted:
            check_unit_type("uid", sql_type)
            compile_plan(_plan(), schema, profile)
        else:
            with pytest.raises(PlanError, match="cannot identify a person"):
                compile_plan(_plan(), schema, profile)


@pytest.mark.parametrize("hash_kind", HASHES)
@pytest.mark.parametrize(
    "setup",
    [
        ("CREATE TABLE t (uid VARCHAR COLLATE NOCASE, k VARCHAR)",),
        ("CREATE TABLE t (uid VARCHAR COLLATE NOACCENT, k VARCHAR)",),
        ("CREATE TABLE t (uid VARCHAR COLLATE NFC, k VARCHAR)",),
        ("SET default_collation = 'nocase'", "CREATE TABLE t (uid VARCHAR, k VARCHAR)"),
    ],
    ids=["nocase", "noaccent", "nfc", "default_collation"],
)
def test_collated_text_unit_is_refused_before_the_charge(
    setup: tuple[str, ...], hash_kind: str
) -> None:
    # 'bob', 'BOB', 'Bob', 'bOb' are one unit to the collation but four texts to the md5
    # hash: the group's count moved by 4. DuckDB's schema shows no collation: a probe over no
    # row of the source reads it from the type.
    con = duckdb.connect()
    for statement in setup:
        con.execute(statement)
    con.execute(
        "INSERT INTO t VALUES ('bob', 'g'), ('BOB', 'g'), ('Bob', 'g'), ('bOb', 'g'),"
        " ('e\u0301', 'g'), ('\u00e9', 'g')"
    )
    budget = Budget(epsilon=1.0, delta=1e-6)
    s = dpa.Session(con, table="t", privacy_unit="uid", budget=budget, bounding_hash=hash_kind)
    with pytest.raises(DPKitError, match="collation"):
        s.query().group_by("k").bound(max_partitions=1, max_rows_per_partition=1).agg(
            n=dpa.count()
        ).run(epsilon=1.0, delta=1e-7)
    assert budget.spent == (0.0, 0.0)
    # the same ids without a collation: accepted, each byte string its own unit
    plain = _connection("VARCHAR", "VARCHAR", [], [("bob", "g"), ("BOB", "g")])
    assert _exact(plain, hash_kind) == {"g": (2, 2)}


@pytest.mark.parametrize("hash_kind", HASHES)
@pytest.mark.parametrize(
    "setup",
    [
        ("CREATE TABLE t (uid VARCHAR, k VARCHAR COLLATE NOCASE)",),
        ("CREATE TABLE t (uid BIGINT, k VARCHAR COLLATE NOACCENT.NOCASE)",),
    ],
    ids=["nocase", "noaccent.nocase"],
)
def test_collated_key_spellings_take_one_slot_each(setup: tuple[str, ...], hash_kind: str) -> None:
    # One person with rows in 'g', 'G', 'Ĝ': one group to the collation, three slots to the
    # md5 hash (count +3 in one group, charged 1). Keys are compared byte by byte: three
    # groups, each moved by one row and one unit.
    def table(adversary: bool) -> duckdb.DuckDBPyConnection:
        con = duckdb.connect()
        for statement in setup:
            con.execute(statement)
        rows = [(i + 1, "g") for i in range(5)] + [(i + 1, "h") for i in range(5)]
        rows += [(99, k) for k in ("g", "G", "\u011c")] if adversary else []
        for row in rows:
            con.execute("INSERT INTO t VALUES (?, ?)", list(row))
        return con

    d, d1 = _exact(table(False), hash_kind), _exact(table(True), hash_kind)
    _assert_one_person(d, d1)
    assert sorted(d1) == ["G", "g", "h", "\u011c"]


FLOAT_BASE = [(float(i + 1), g) for i in range(12) for g in ("g", "h")]
FLOAT_SPELLINGS = {
    "zero": [(0.0, "g"), (-0.0, "g"), (0.0, "h"), (-0.0, "h")] * 3,
    # NaN is read as NULL: all NaN and NULL ids are the one NULL unit
    "nan": [(float("nan"), "g"), (None, "g"), (float("-nan"), "g"), (float("nan"), "h")] * 3,
}


@pytest.mark.parametrize("hash_kind", HASHES)
@pytest.mark.parametrize("unit_type", ["DOUBLE", "FLOAT"])
@pytest.mark.parametrize("spelling", list(FLOAT_SPELLINGS))
def test_float_unit_spellings_are_one_person(spelling: str, unit_type: str, hash_kind: str) -> None:
    d = _exact(_connection(unit_type, "VARCHAR", FLOAT_BASE, []), hash_kind)
    d1 = _exact(_connection(unit_type, "VARCHAR", FLOAT_BASE, FLOAT_SPELLINGS[spelling]), hash_kind)
    _assert_one_person(d, d1)
    assert _moves(d, d1) and all(m == (1, 1) for m in _moves(d, d1))


@pytest.mark.parametrize("hash_kind", HASHES)
def test_instant_unit_spelled_in_several_time_zones_is_one_person(hash_kind: str) -> None:
    base = [(f"2024-01-0{1 + i % 9} 00:00:00+00", g) for i in range(9) for g in ("g", "h")]
    spellings = [
        ("2024-06-01 12:00:00+00", "g"),
        ("2024-06-01 14:00:00+02", "g"),
        ("2024-06-01 02:00:00-10", "g"),
        ("2024-06-01 12:00:00+00", "h"),
    ] * 2
    for tz in ("UTC", "Pacific/Kiritimati"):
        setup = (f"SET TimeZone = '{tz}'",)
        d = _exact(_connection("TIMESTAMPTZ", "VARCHAR", base, [], setup), hash_kind)
        d1 = _exact(_connection("TIMESTAMPTZ", "VARCHAR", base, spellings, setup), hash_kind)
        _assert_one_person(d, d1)
        assert sorted(_moves(d, d1)) == [(1, 1), (1, 1)]


@pytest.mark.parametrize("hash_kind", HASHES)
def test_decimal_unit_spellings_are_one_person(hash_kind: str) -> None:
    base = [(f"{i + 1}.5", g) for i in range(9) for g in ("g", "h")]
    spellings = [("7", "g"), ("7.0", "g"), ("7.000", "g"), ("07.00", "h")] * 2
    d = _exact(_connection("DECIMAL(10, 3)", "VARCHAR", base, []), hash_kind)
    d1 = _exact(_connection("DECIMAL(10, 3)", "VARCHAR", base, spellings), hash_kind)
    _assert_one_person(d, d1)
    assert sorted(_moves(d, d1)) == [(1, 1), (1, 1)]
