"""A Parquet glob whose files disagree on a column's type is decided before the charge.

DuckDB reads a glob's schema from its first file and casts the other files' columns while it
scans, so a later file's text column fails on a value that is no number, during the statement.
Exact check on neighbouring tables: D = ``a.parquet`` (100 people, numeric columns) plus
``b.parquet`` (one person, the same columns as text holding numbers); D' adds to ``b.parquet``
one person whose unit is ``'x7'``. The query must behave the same on D and D' (both refused
unspent, or both answered).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import duckdb
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import EngineError


def _glob(folder: Path, extra: bool) -> str:
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT i AS uid, i % 3 AS g, 1.5::DOUBLE AS x FROM range(100) r(i)) "
        f"TO '{folder}/a.parquet' (FORMAT parquet)"
    )
    rows = "SELECT '200' AS uid, '1' AS g, '2.0' AS x"
    if extra:
        rows += " UNION ALL SELECT 'x7', '1', '2.0'"
    con.execute(f"COPY ({rows}) TO '{folder}/b.parquet' (FORMAT parquet)")
    con.close()
    return f"{folder}/*.parquet"


def _outcome(glob: str) -> tuple[str, float]:
    budget = Budget(epsilon=10.0)
    try:
        s = dpa.Session(glob, privacy_unit="uid", budget=budget)
        q = (
            s.query()
            .group_by("g", keys=[0, 1, 2])
            .bound(max_partitions=1, max_rows_per_partition=1)
        )
        q.agg(n=dpa.count()).run(epsilon=1.0)
        return "answered", budget.spent[0]
    except Exception as exc:  # what matters: the same outcome on D and D', or nothing spent
        return type(exc).__name__, budget.spent[0]


def test_glob_with_mixed_file_types_fails_the_same_on_neighbours(tmp_path: Path) -> None:
    warnings.simplefilter("ignore")
    (tmp_path / "d").mkdir()
    (tmp_path / "d1").mkdir()
    on_d = _outcome(_glob(tmp_path / "d", False))
    on_d1 = _outcome(_glob(tmp_path / "d1", True))
    assert on_d[0] == on_d1[0] or on_d1[1] == 0.0


def _write(path: Path, select: str) -> None:
    con = duckdb.connect()
    con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    con.close()


def _answers(glob: str) -> float:
    budget = Budget(epsilon=10.0)
    s = dpa.Session(glob, privacy_unit="uid", budget=budget)
    q = s.query().group_by("g", keys=[0, 1, 2]).bound(max_partitions=1, max_rows_per_partition=1)
    q.agg(n=dpa.count()).run(epsilon=1.0)
    return budget.spent[0]


def test_glob_with_one_type_per_column_answers_in_any_column_order(tmp_path: Path) -> None:
    """Files that agree on every column's type are read, whatever their column order."""
    _write(tmp_path / "a.parquet", "SELECT i AS uid, i % 3 AS g FROM range(50) r(i)")
    _write(tmp_path / "b.parquet", "SELECT i % 3 AS g, 50 + i AS uid FROM range(50) r(i)")
    assert _answers(f"{tmp_path}/*.parquet") == pytest.approx(1.0)


def test_glob_refusal_names_the_column_and_both_files_before_the_charge(tmp_path: Path) -> None:
    """A column missing from a file, or typed otherwise, is refused with nothing spent."""
    _write(tmp_path / "a.parquet", "SELECT i AS uid, i % 3 AS g FROM range(50) r(i)")
    _write(tmp_path / "b.parquet", "SELECT 50 + i AS uid FROM range(50) r(i)")
    budget = Budget(epsilon=10.0)
    with pytest.raises(EngineError, match=r"column 'g'.*a\.parquet.*b\.parquet.*one type"):
        dpa.Session(f"{tmp_path}/*.parquet", privacy_unit="uid", budget=budget).query().group_by(
            "g", keys=[0, 1, 2]
        ).agg(n=dpa.count()).run(epsilon=1.0)
    assert budget.spent[0] == 0.0
