"""Finding: a group key of type INTERVAL YEAR TO MONTH makes ``run()`` raise after the charge
on D only (classic Spark).

The compiler sends such a key as it is (codec ``plain``) and Spark analyses the statement
happily (an ANSI year-month interval is orderable and hashable), so ``validate()`` passes and
the budget is charged. ``collect()`` then converts each row in the driver, and PySpark's
``YearMonthIntervalType.fromInternal`` raises ``NOT_IMPLEMENTED`` for every row: the release
fails when the result has a row and succeeds when it has none. D: ten persons aged 0 and person
1000 aged 99; the query ``where("age > 50").group_by("k")``: on D one group -> exception after
the charge; on D' = D minus person 1000 no group -> released. (On Spark Connect the Arrow
conversion fails whatever the rows: an exception after the charge on D and D' alike, a wasted
charge decided by the type.)

    PYTHONPATH=src /work/main/.venv/bin/python tools/reproducers/spark3_year_month_interval_key.py
"""

from __future__ import annotations

import sys
from typing import Any

from _sparkatk import local_spark

import dpkit.analytics as dpa
from dpkit.accounting import Budget

BASE = ", ".join(f"({i}, 0, INTERVAL '1-0' YEAR TO MONTH)" for i in range(10))
D = f"SELECT * FROM VALUES {BASE}, (1000, 99, INTERVAL '0-1' YEAR TO MONTH) AS t(uid, age, k)"
D_PRIME = f"SELECT * FROM VALUES {BASE} AS t(uid, age, k)"


def outcome(spark: Any, sql: str) -> tuple[str, tuple[float, float]]:
    """``run()``'s outcome (released, or the exception's class) and the budget spent."""
    budget = Budget(epsilon=10.0, delta=1e-5)
    s = dpa.Session(spark.sql(sql), privacy_unit="uid", budget=budget)
    q = (
        s.query()
        .where("age > 50")
        .group_by("k")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    try:
        q.run(epsilon=1.0, delta=1e-6)
        return "released", budget.spent
    except Exception as exc:
        return f"raised {type(exc).__name__}", budget.spent


def main() -> bool:
    with local_spark() as spark:
        on_d, on_d_prime = outcome(spark, D), outcome(spark, D_PRIME)
    print(f"classic  D : {on_d[0]:24s} spent {on_d[1]}")
    print(f"classic  D': {on_d_prime[0]:24s} spent {on_d_prime[1]}")
    return on_d[0] == on_d_prime[0]


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
