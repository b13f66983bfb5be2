"""Finding: a bucket condition raises under Spark's ANSI mode after the charge, for one value.

The Spark engine turns ANSI mode off only around statements with row predicates
(``CompiledQuery.has_filters``), but ``has_filters`` counts ``where`` filters and public-key
filters only, not ``bucket`` conditions, and on Spark a bucket condition gets neither an
error-to-NULL wrapper nor the ``try_add``/``try_multiply`` rewrite that ``where`` gets. Spark 4
runs with ANSI on by default, so a bucket grouped by partition selection (no public keys, no
``where``) evaluates ``s = 1`` on a text column with ANSI casts (``'abc'`` raises
``CAST_INVALID_INPUT``) and ``x + 1 > 0`` on a BIGINT with ANSI overflow checks.

D: units 1 and 2 (``s = '1'``, ``'2'``, ``x = 1``, ``2``) plus unit 3 (``s = 'abc'``,
``x = 2**63 - 1``); D' = D without unit 3. The release is charged, then raises on D only.

    PYTHONPATH=src nice -n 10 .venv/bin/python tools/reproducers/spark_bucket_ansi_exception.py
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from _sparkatk import local_spark

import dpkit.analytics as dpa
from dpkit.accounting import Budget

BASE = {"uid": [1, 2], "s": ["1", "2"], "x": [1, 2]}
EXTRA = {"uid": [3], "s": ["abc"], "x": [2**63 - 1]}
CONDITIONS = ("s = 1", "x + 1 > 0")


def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    d = pd.DataFrame({k: BASE[k] + EXTRA[k] for k in BASE})
    return d, pd.DataFrame(BASE)


def release(spark: Any, table: pd.DataFrame, condition: str) -> tuple[str, float]:
    """Run the bucketed count; return (outcome, epsilon spent)."""
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
        outcome = f"raised {type(exc).__name__}"
    return outcome, float(budget.spent[0])


def main() -> dict[str, tuple[tuple[str, float], tuple[str, float]]]:
    out = {}
    with local_spark() as spark:
        print("spark.sql.ansi.enabled =", spark.conf.get("spark.sql.ansi.enabled"))
        d, d1 = tables()
        for cond in CONDITIONS:
            a, b = release(spark, d, cond), release(spark, d1, cond)
            out[cond] = (a, b)
            print(f"bucket {cond!r:12s} D: {a[0]} (spent {a[1]:g})   D': {b[0]} (spent {b[1]:g})")
    return out


if __name__ == "__main__":
    main()
