"""Finding: a TIMESTAMP group key near the ends of Spark's range makes the release raise in the
driver after the charge.

Spark's TIMESTAMP range is years 1..9999 in UTC; the driver converts each key to a naive
``datetime`` in its own time zone, which leaves Python's range for ``0001-01-01 00:00 UTC`` west
of Greenwich (year 0) and for ``9999-12-31 23:00 UTC`` east of it (year 10000). The statement has
already run and the budget is charged; ``run()`` then raises on D (with the unit holding that
timestamp) and releases on D'.

D' = 10 units at 2024-01-01, D = D' plus unit 1000 at the extreme. ``group_by("ts")`` with
partition selection, ``(1, 1e-6)``.

    PYTHONPATH=src nice -n 10 .venv/bin/python tools/reproducers/spark_timestamp_range_exception.py
"""

from __future__ import annotations

import os
import time
from typing import Any

from _sparkatk import local_spark

import dpkit.analytics as dpa
from dpkit.accounting import Budget

BASE = ", ".join(f"({i}, TIMESTAMP'2024-01-01 00:00:00')" for i in range(10))
CASES = {
    "America/New_York": ", (1000, TIMESTAMP'0001-01-01 00:00:00')",
    "Asia/Tokyo": ", (1000, TIMESTAMP'9999-12-31 23:00:00')",
}


def release(spark: Any, values: str) -> tuple[str, tuple[float, float]]:
    budget = Budget(epsilon=10.0, delta=1e-5)
    df = spark.sql(f"SELECT * FROM VALUES {values} AS t(uid, ts)")
    s = dpa.Session(df, privacy_unit="uid", budget=budget)
    q = (
        s.query()
        .group_by("ts")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    try:
        q.run(epsilon=1.0, delta=1e-6)
        return "released", budget.spent
    except Exception as exc:
        return f"raised {type(exc).__name__}", budget.spent


def main() -> dict[str, tuple[Any, Any]]:
    out = {}
    with local_spark() as spark:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        for zone, extra in CASES.items():
            os.environ["TZ"] = zone
            time.tzset()
            a, b = release(spark, BASE + extra), release(spark, BASE)
            out[zone] = (a, b)
            print(f"driver TZ {zone:17s} D: {a[0]} (spent {a[1]})   D': {b[0]} (spent {b[1]})")
    return out


if __name__ == "__main__":
    main()
