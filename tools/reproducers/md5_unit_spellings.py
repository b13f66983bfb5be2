"""Finding: with ``bounding_hash="md5"`` one person whose privacy-unit value has several
spellings that SQL calls equal took one slot of a group per spelling.

The bounding window partitions rows by SQL equality of the unit, while the md5 hash that ranks
a unit's groups read the unit's text. An ``INTERVAL`` unit of 30 days spelled 1,000 ways
(months, days and microseconds mixed), a STRUCT or LIST unit whose doubles are ``0.0`` or
``-0.0`` (8 spellings), and on DuckDB a text unit or key under a collation (``NOCASE`` column
or ``default_collation``, invisible in DuckDB's schema) each moved one group's count and unit
count by the number of spellings, where the query charges 1.

D: 20 persons with one row each in group ``g``; D' = D plus the adversary (every spelling, one
row each, all in group ``g``). ``group_by("k")``, max_partitions = 1000,
max_rows_per_partition = 1: the count and the unit count of ``g`` may move by 1. A refused
query prints the refusal (it happens before anything is charged). Fixed: a unit must have a
group-key type (INTERVAL, STRUCT, LIST, MAP are refused by type), floats are normalized before
the hash (the double case moves by 1), and a DuckDB text unit under a collation is refused.

    PYTHONPATH=src .venv/bin/python tools/reproducers/md5_unit_spellings.py [--spark]
"""

from __future__ import annotations

import sys
from typing import Any

import duckdb

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError

BASE = "SELECT {base} AS uid, 'g' AS k FROM range(20) r(i)"
CASES: dict[str, tuple[str, str, list[str]]] = {
    # name: (base unit expression, adversary expression over i, setup statements)
    "interval (1,000 spellings of 30 days)": (
        "to_days((1000 + i)::INT)",
        "to_months((i % 2)::INT) + to_days((30 - 30 * (i % 2) - i // 2)::INT)"
        " + to_microseconds((i // 2) * 86400000000) FROM range(1000) r(i)",
        [],
    ),
    "struct of three doubles (+-0.0: 8 spellings)": (
        "{'a': i + 1.0::DOUBLE, 'b': 0.0::DOUBLE, 'c': 0.0::DOUBLE}",
        "{'a': ['0.0'::DOUBLE, '-0.0'::DOUBLE][i % 2 + 1], "
        "'b': ['0.0'::DOUBLE, '-0.0'::DOUBLE][(i // 2) % 2 + 1], "
        "'c': ['0.0'::DOUBLE, '-0.0'::DOUBLE][(i // 4) % 2 + 1]} FROM range(8) r(i)",
        [],
    ),
    "list of three doubles (+-0.0: 8 spellings)": (
        "[i + 1.0::DOUBLE, 0.0::DOUBLE, 0.0::DOUBLE]",
        "[['0.0'::DOUBLE, '-0.0'::DOUBLE][i % 2 + 1], "
        "['0.0'::DOUBLE, '-0.0'::DOUBLE][(i // 2) % 2 + 1], "
        "['0.0'::DOUBLE, '-0.0'::DOUBLE][(i // 4) % 2 + 1]] FROM range(8) r(i)",
        [],
    ),
    "double, accepted (0.0 and -0.0: 2 spellings)": (
        "i + 1.0::DOUBLE",
        "['0.0'::DOUBLE, '-0.0'::DOUBLE][i % 2 + 1] FROM range(2) r(i)",
        [],
    ),
    "text under default_collation nocase (4 spellings)": (
        "'u' || i",
        "['bob', 'BOB', 'Bob', 'bOb'][i + 1] FROM range(4) r(i)",
        ["SET default_collation = 'nocase'"],
    ),
}


def duck_counts(
    base: str, adversary: str | None, setup: list[str], hash_kind: str
) -> tuple[int, int] | str:
    con = duckdb.connect()
    for s in setup:
        con.execute(s)
    con.execute("CREATE TABLE t AS " + BASE.format(base=base))
    if adversary is not None:
        con.execute(
            f"INSERT INTO t SELECT {adversary.split(' FROM ')[0]} AS uid, 'g' AS k "
            f"FROM {adversary.split(' FROM ', 1)[1]}"
        )
    s = dpa.Session(
        con,
        table="t",
        privacy_unit="uid",
        bounding_hash=hash_kind,
        budget=Budget(epsilon=10.0, delta=1e-5),
    )
    try:
        p = (
            s.query()
            .group_by("k")
            .bound(max_partitions=1000, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .prepare(epsilon=1.0, delta=1e-6)
        )
        s.validate(p)
    except DPKitError as exc:
        return f"refused before the charge: {str(exc)[:90]}..."
    r = p.exact(s.engine)
    return int(r.values["n:n"][0]), int(r.values["__units"][0])


def spark_counts(
    spark: Any, folder: str, kind: str, adversary: bool, hash_kind: str
) -> tuple[int, int] | str:
    """The same on Spark, from a Parquet file written by pyarrow (a STRUCT or LIST unit)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    units: list[Any] = [[1.0 + i, 0.0, 0.0] for i in range(20)]
    if adversary:
        units += [
            [(0.0, -0.0)[i % 2], (0.0, -0.0)[i // 2 % 2], (0.0, -0.0)[i // 4 % 2]] for i in range(8)
        ]
    col = (
        pa.array([dict(zip("abc", u, strict=True)) for u in units])
        if kind == "struct"
        else pa.array(units, pa.list_(pa.float64()))
    )
    path = f"{folder}/{kind}_{int(adversary)}.parquet"
    pq.write_table(pa.table({"uid": col, "k": ["g"] * len(units)}), path)
    s = dpa.Session(
        spark.read.parquet(path),
        privacy_unit="uid",
        bounding_hash=hash_kind,
        budget=Budget(epsilon=10.0, delta=1e-5),
    )
    try:
        p = (
            s.query()
            .group_by("k")
            .bound(max_partitions=1000, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .prepare(epsilon=1.0, delta=1e-6)
        )
        s.validate(p)
    except DPKitError as exc:
        return f"refused before the charge: {str(exc)[:90]}..."
    r = p.exact(s.engine)
    return int(r.values["n:n"][0]), int(r.values["__units"][0])


def moved(with_adv: tuple[int, int] | str, without: tuple[int, int] | str) -> str:
    if isinstance(with_adv, str) or isinstance(without, str):
        return str(with_adv if isinstance(with_adv, str) else without)
    return (
        f"count moved by {with_adv[0] - without[0]}, unit count by "
        f"{with_adv[1] - without[1]} (bound: 1)"
    )


def main() -> None:
    for name, (base, adv, setup) in CASES.items():
        for h in ("native", "md5"):
            print(
                f"duckdb {h:6s} {name}: "
                f"{moved(duck_counts(base, adv, setup, h), duck_counts(base, None, setup, h))}"
            )
    if "--spark" in sys.argv:
        import tempfile

        from _sparkatk import local_spark

        with local_spark() as spark, tempfile.TemporaryDirectory() as folder:
            for kind in ("struct", "list"):
                for h in ("native", "md5"):
                    print(
                        f"spark  {h:6s} {kind} of three doubles (+-0.0: 8 spellings): "
                        + moved(
                            spark_counts(spark, folder, kind, True, h),
                            spark_counts(spark, folder, kind, False, h),
                        )
                    )


if __name__ == "__main__":
    main()
