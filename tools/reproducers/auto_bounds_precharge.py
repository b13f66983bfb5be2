"""A query whose aggregates all have bounds="auto" is checked against the schema before the charge.

Groups by a LIST key and by a TIMESTAMP_NS key (neither can be a group key) with public keys,
once with fixed bounds and once with bounds="auto", and prints what each spent. Expected: every
query refused with nothing spent (the auto-bounds path used to charge 1.0, then fail).

    PYTHONPATH=src python tools/reproducers/auto_bounds_precharge.py
"""

from __future__ import annotations

from typing import Any

import duckdb

import dpkit.analytics as dpa
from dpkit.accounting import Budget


def main() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE p AS SELECT i AS uid, i / 10.0 AS x, [i % 2] AS k_list, "
        "CAST(TIMESTAMP '2024-01-01' AS TIMESTAMP_NS) AS k_ns FROM range(100) t(i)"
    )
    for key in ("k_list", "k_ns"):
        bounds_list: list[Any] = [(0.0, 10.0), "auto"]
        for bounds in bounds_list:
            budget = Budget(epsilon=10.0)
            s = dpa.Session(con, table="p", privacy_unit="uid", budget=budget)
            q = (
                s.query()
                .group_by(key, keys=[1, 2])
                .bound(max_partitions=1, max_rows_per_partition=1)
                .agg(m=dpa.sum("x", bounds=bounds))
            )
            try:
                q.run(epsilon=1.0)
                outcome = "released"
            except Exception as exc:  # the refusal is the expected outcome
                outcome = type(exc).__name__
            print(f"{key:7s} bounds={bounds!s:12s} {outcome:12s} spent={budget.spent[0]}")


if __name__ == "__main__":
    main()
