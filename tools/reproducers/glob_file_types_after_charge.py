"""DuckDB attack: a Parquet glob whose files disagree on a column's type fails after the charge,
on one person's value.

DuckDB takes a glob's schema from its first file and casts every other file's columns to it
while it scans, row by row. dpkit reads the schema the same way (``DESCRIBE``), so a later file
whose column is ``VARCHAR`` where the first file has ``BIGINT`` (or ``DOUBLE``) passes every check
made before the charge; the cast then succeeds or fails on the *values*: ``'200'`` casts,
``'x7'`` raises ``Conversion Error`` during the statement, after the charge.

D: ``a.parquet`` (100 people, ``uid`` BIGINT, ``g``, ``x`` DOUBLE) and ``b.parquet`` (one person,
text columns holding numbers: ``uid '200'``, ``x '2.0'``). D' = D plus one person's row in
``b.parquet`` whose text does not cast (``uid 'x7'``, or ``x 'n/a'``, or ``g 'b'``). A count
per public key ``g`` (epsilon 1) answers on D and raises ``EngineError`` on D' with epsilon 1
already charged: the person's presence is released with probability 1 (the error, not the
noisy answer, is the output). Exits 1 while some column fails on D' after the charge.

    PYTHONPATH=src python tools/reproducers/glob_file_types_after_charge.py
"""

from __future__ import annotations

import sys
import tempfile
import warnings

import duckdb

import dpkit.analytics as dpa
from dpkit.accounting import Budget

# the column whose text the extra person holds, and that text (the other columns stay numbers)
EXTRA = {
    "unit uid": ("'x7'", "'2.0'", "'1'"),
    "measure x": ("'201'", "'n/a'", "'1'"),
    "key g": ("'201'", "'2.0'", "'b'"),
}


def make(extra: tuple[str, str, str] | None) -> str:
    folder = tempfile.mkdtemp()
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT i AS uid, i % 3 AS g, 1.5::DOUBLE AS x FROM range(100) r(i)) "
        f"TO '{folder}/a.parquet' (FORMAT parquet)"
    )
    rows = "SELECT '200' AS uid, '1' AS g, '2.0' AS x"
    if extra is not None:
        uid, x, g = extra
        rows += f" UNION ALL SELECT {uid}, {g}, {x}"
    con.execute(f"COPY ({rows}) TO '{folder}/b.parquet' (FORMAT parquet)")
    con.close()
    return folder + "/*.parquet"


def outcome(glob: str) -> str:
    budget = Budget(epsilon=10.0)
    try:  # a refusal when the source is opened (by its files' schemas) spends nothing
        s = dpa.Session(glob, privacy_unit="uid", budget=budget)
        q = (
            s.query()
            .group_by("g", keys=[0, 1, 2])
            .bound(max_partitions=1, max_rows_per_partition=1)
        )
        q.agg(n=dpa.count(), x=dpa.sum("x", bounds=(0.0, 10.0))).run(epsilon=1.0)
        return f"answered (charged {budget.spent[0]:g})"
    except Exception as exc:  # the finding is any failure after the charge
        return f"{type(exc).__name__} (charged {budget.spent[0]:g})"


def main() -> int:
    warnings.simplefilter("ignore")
    on_d = outcome(make(None))
    failures = 0
    for name, extra in EXTRA.items():
        on_d1 = outcome(make(extra))
        print(f"{name:10s} D: {on_d}; D': {on_d1}")
        failures += not on_d1.startswith("answered") and "charged 0)" not in on_d1
    print(f"{failures} of {len(EXTRA)}: one person's row raises after the charge")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
