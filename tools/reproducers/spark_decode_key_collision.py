"""Finding: distinct Spark group keys that become one Python value in the driver collide in
``spark.decode``, and one unit's group replaces another's aggregates.

Two cases: TIMESTAMP keys in the repeated hour of a DST change, and text keys holding invalid
UTF-8 (``CAST(X'FF' AS STRING)`` and ``CAST(X'FE' AS STRING)`` are two groups in Spark, both
``'\ufffd'`` in Python).

Spark returns a ``TIMESTAMP`` (local time zone) value to Python as a naive ``datetime`` in the
driver's own time zone (``TZ``), without ``fold``: 05:30 UTC and 06:30 UTC on 3 November 2024
both become ``2024-11-03 01:30`` in ``America/New_York``. ``spark.decode`` keys its dict by that
value, so the row that comes second replaces the first group's aggregates.

D': 100 units at 05:30 UTC; D = D' plus unit 1000 at 06:30 UTC. ``group_by("ts")`` with
partition selection, one row per unit: the released group ``01:30`` has count 100 on D' and 1 on
D (the added unit's group, whose aggregates replaced the 100 units'), sensitivity 1.

Text: D' = 100 units with key ``X'FF'``, D = D' plus unit 1000 with ``X'FE'``: the released
group ``'\ufffd'`` counts 100 on D' and 1 on D.

    TZ is set by the script itself (the driver's time zone; Spark's session zone is UTC).
    PYTHONPATH=src nice -n 10 .venv/bin/python tools/reproducers/spark_decode_key_collision.py
"""

from __future__ import annotations

import os
import time
from typing import Any

from _sparkatk import local_spark

import dpkit.analytics as dpa
from dpkit.accounting import Budget

BASE = ", ".join(f"({i}, TIMESTAMP'2024-11-03 05:30:00')" for i in range(100))
UNIT = ", (1000, TIMESTAMP'2024-11-03 06:30:00')"


TEXT_BASE = ", ".join(f"({i}, X'FF')" for i in range(100))
TEXT_UNIT = ", (1000, X'FE')"


def groups(spark: Any, values: str, text: bool = False) -> list[tuple[Any, int, int]]:
    cols = "uid, CAST(ts AS STRING) AS ts" if text else "*"
    df = spark.sql(f"SELECT {cols} FROM VALUES {values} AS t(uid, ts)")
    s = dpa.Session(df, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    p = (
        s.query()
        .group_by("ts")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
        .prepare(epsilon=1.0, delta=1e-6)
    )
    s.validate(p)
    r = p.exact(s.engine)
    return [
        (k[0], int(n), int(u))
        for k, n, u in zip(r.keys, r.values["n:n"], r.values["__units"], strict=True)
    ]


def main() -> tuple[list[tuple[Any, int, int]], list[tuple[Any, int, int]]]:
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    with local_spark() as spark:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        d, d1 = groups(spark, BASE + UNIT), groups(spark, BASE)
        t, t1 = groups(spark, TEXT_BASE + TEXT_UNIT, True), groups(spark, TEXT_BASE, True)
    for what, a, b in (("DST fold", d, d1), ("invalid UTF-8", t, t1)):
        print(
            f"{what}: D {[(str(k), n, u) for k, n, u in a]}  D' {[(str(k), n, u) for k, n, u in b]}"
        )
        print(
            f"  count of group {b[0][0]!r} moved by {b[0][1] - a[0][1]} vs sensitivity 1 "
            f"(units {b[0][2]} -> {a[0][2]})"
        )
    return d, d1


if __name__ == "__main__":
    main()
