"""Finding: a group key under Spark's ``UTF8_LCASE`` collation lets one unit put
``max_partitions`` rows into one group (and count as ``max_partitions`` units there).

Contribution bounding ranks a unit's groups by ``DENSE_RANK() OVER (PARTITION BY unit ORDER BY
hash(key), key)``: with a case-insensitive collation, ``'paris'``, ``'Paris'``, ``'PARIS'`` and
``'pAris'`` are one value for ``GROUP BY`` but four for the hash (``xxhash64`` and the md5
profile's text hash the bytes), so they take four partition slots and then land in the same
output group. One unit then adds ``max_partitions * max_rows_per_partition`` rows to one group
(per-group sensitivity charged: ``max_rows_per_partition``, L2: ``sqrt(max_partitions) *
max_rows_per_partition``) and ``max_partitions`` to the group's unit count that partition
selection thresholds (charged: 1).

D: unit 1 (``lyon``), unit 2 (``paris``), unit 1000 with the four spellings; D' = D without
unit 1000. ``group_by("city")`` with partition selection, max_partitions=4,
max_rows_per_partition=1.

    PYTHONPATH=src nice -n 10 .venv/bin/python tools/reproducers/spark_collated_group_keys.py
"""

from __future__ import annotations

import math
from typing import Any

from _sparkatk import local_spark

import dpkit.analytics as dpa
from dpkit.accounting import Budget

MAX_PARTITIONS = 4
ROWS = "(1, 'lyon'), (2, 'paris')"
UNIT = ", (1000, 'paris'), (1000, 'Paris'), (1000, 'PARIS'), (1000, 'pAris')"


def paris(spark: Any, values: str, hash_kind: str) -> tuple[int, int]:
    """(count, unit count) of group ``paris`` before noise."""
    df = spark.sql(
        f"SELECT uid, city COLLATE UTF8_LCASE AS city FROM VALUES {values} AS t(uid, city)"
    )
    s = dpa.Session(
        df, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5), bounding_hash=hash_kind
    )
    p = (
        s.query()
        .group_by("city")
        .bound(max_partitions=MAX_PARTITIONS, max_rows_per_partition=1)
        .agg(n=dpa.count())
        .prepare(epsilon=1.0, delta=1e-6)
    )
    s.validate(p)
    r = p.exact(s.engine)
    i = [str(k[0]).lower() for k in r.keys].index("paris")
    return int(r.values["n:n"][i]), int(r.values["__units"][i])


def main() -> dict[str, tuple[int, int]]:
    out = {}
    with local_spark() as spark:
        for h in ("native", "md5"):
            (n, u), (n1, u1) = paris(spark, ROWS + UNIT, h), paris(spark, ROWS, h)
            out[h] = (n - n1, u - u1)
            print(
                f"{h:6s}: count of 'paris' moved by {n - n1} vs per-group sensitivity 1 "
                f"(L2 {math.sqrt(MAX_PARTITIONS):g}); unit count moved by {u - u1} vs 1"
            )
    return out


if __name__ == "__main__":
    main()
