"""DuckDB attack: a released key beyond Python's date/time range loses the answer after the charge.

DuckDB's client returns a ``DATE`` or ``TIMESTAMP`` after year 9999 (``DATE '20000-01-01'``)
and the ``TIME`` ``24:00:00`` (valid in DuckDB) as *text*, the other keys of the column as
``date``/``datetime``/``time``: the released key column mixes types. ``session.sql`` then fails
after the budget was charged: ``ORDER BY k`` raises ``TypeError: '<' not supported between
'datetime.date' and 'str'``, and ``output="polars"`` / ``output="arrow"`` raise
``ArrowTypeError``: the answer is lost, the charge stays, and the error is not a dpkit error.
(The builder's ``run()`` returns the mixed column without error.)

D: 300 people with ordinary keys (3 values). D' = D plus people whose key is the far value;
once that key is released (here 300 of them, so it is), every run on D' raises after the charge
and no run on D does. With a single such person the key is released with probability at most
the selection's delta, so this leaks nothing beyond the release (the failure is a function of
the released keys); the figure is the lost answer: epsilon 5 charged, no result.
Exits 1 while some case raises after the charge.

    PYTHONPATH=src python tools/reproducers/out_of_range_time_keys_after_charge.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings

import duckdb

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.noise import RandomSource

CASES = {
    "DATE": ("DATE '2024-01-01' + CAST(i % 3 AS INTEGER)", "DATE '20000-01-01'"),
    "TIMESTAMP": ("TIMESTAMP '2024-01-01' + INTERVAL (i % 3) DAY", "TIMESTAMP '20000-01-01'"),
    "TIME": ("TIME '00:00:00' + INTERVAL (i % 3) HOUR", "TIME '24:00:00'"),
}
RUNS = {
    "ORDER BY k": ("SELECT k, COUNT(*) AS n FROM t GROUP BY k ORDER BY k", "pandas"),
    "output=polars": ("SELECT k, COUNT(*) AS n FROM t GROUP BY k", "polars"),
    "output=arrow": ("SELECT k, COUNT(*) AS n FROM t GROUP BY k", "arrow"),
}


def table(folder: str, typ: str, far: bool) -> str:
    near_sql, far_sql = CASES[typ]
    path = os.path.join(folder, f"{typ}_{far}.parquet")
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT i AS uid, ({near_sql}) AS k FROM range(300) r(i)")
    if far:
        con.execute(f"INSERT INTO t SELECT 1000 + i, {far_sql} FROM range(300) r(i)")
    con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    con.close()
    return path


def lost(path: str, sql: str, output: str) -> str | None:
    """The error raised after the charge, or None when the answer came back."""
    budget = Budget(epsilon=100.0, delta=1e-5)
    s = dpa.Session(
        path,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=1, insecure=True),
    )
    try:
        s.sql(
            sql, epsilon=5.0, delta=1e-6, max_partitions=1, max_rows_per_partition=1, output=output
        )
        return None
    except Exception as exc:  # any failure after the charge is the finding
        if budget.spent[0] == 0:
            return None  # refused before the charge: fine
        return f"{type(exc).__name__} after charging {budget.spent[0]:g}"


def main() -> int:
    warnings.simplefilter("ignore")
    folder = tempfile.mkdtemp()
    failures = 0
    for typ in CASES:
        d, d1 = table(folder, typ, False), table(folder, typ, True)
        for name, (sql, output) in RUNS.items():
            on_d, on_d1 = lost(d, sql, output), lost(d1, sql, output)
            print(f"{typ:9s} {name:14s} D: {on_d or 'answered'}; D': {on_d1 or 'answered'}")
            failures += on_d1 is not None
    print(f"{failures} of {len(CASES) * len(RUNS)} runs on D' lost the answer after the charge")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
