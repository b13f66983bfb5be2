"""A released key beyond Python's date/time range (DuckDB ``DATE '20000-01-01'``, ``TIME
'24:00:00'``) must not lose the answer after the charge.

DuckDB's client returns such values as text beside the column's ``date``/``time`` objects; the
SQL post-processing (``ORDER BY``) and the Polars/Arrow outputs then raised ``TypeError`` /
``ArrowTypeError`` after the budget was charged. Here 300 of 600 people hold the far key, so
it is released; the same table without them answers.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import duckdb
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.noise import RandomSource

NEAR_FAR = {
    "DATE": ("DATE '2024-01-01' + CAST(i % 3 AS INTEGER)", "DATE '20000-01-01'"),
    "TIMESTAMP": (
        "TIMESTAMP '2024-01-01 00:00:00' + INTERVAL (i % 3) HOUR",
        "TIMESTAMP '20000-01-01 00:00:00'",
    ),
    "TIME": ("TIME '00:00:00' + INTERVAL (i % 3) HOUR", "TIME '24:00:00'"),
}


def _table(folder: Path, typ: str) -> str:
    near, far = NEAR_FAR[typ]
    path = str(folder / f"{typ}.parquet")
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT i AS uid, ({near}) AS k FROM range(300) r(i)")
    con.execute(f"INSERT INTO t SELECT 1000 + i, {far} FROM range(300) r(i)")
    con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    con.close()
    return path


@pytest.mark.parametrize("typ", sorted(NEAR_FAR))
@pytest.mark.parametrize(
    ("sql", "output"),
    [
        ("SELECT k, COUNT(*) AS n FROM t GROUP BY k ORDER BY k", "pandas"),
        ("SELECT k, COUNT(*) AS n FROM t GROUP BY k", "arrow"),
    ],
)
def test_far_key_released_after_charge_keeps_the_answer(
    tmp_path: Path, typ: str, sql: str, output: str
) -> None:
    warnings.simplefilter("ignore")
    budget = Budget(epsilon=100.0, delta=1e-5)
    s = dpa.Session(
        _table(tmp_path, typ),
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=1, insecure=True),
    )
    out = s.sql(
        sql, epsilon=5.0, delta=1e-6, max_partitions=1, max_rows_per_partition=1, output=output
    )
    assert len(out) == 4
