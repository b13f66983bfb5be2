"""DuckDB attack (round 4): invalid UTF-8 in a Parquet string column.

Parquet does not check that a string column holds UTF-8. DuckDB (the Session's default engine
for a Parquet path) checks it while it reads the column and raises, after the charge, when one
person's text is invalid: the outcome of ``run()`` then tells whether that person is in the
table. (The CSV reader drops such lines instead.)

D: 10 persons aged 0 with text ``ok`` and person 1000 (age 99) with the bytes ``FF FE``; D' = D
without person 1000. Prints ``run()``'s outcome and the budget spent on D and D' with the column
as a group key and only in a predicate; exits 1 while they differ.

    cd /work/wt-atk4 && PYTHONPATH=$PWD/src /work/main/.venv/bin/python \
        tools/reproducers/spark4_parquet_invalid_utf8.py
"""

from __future__ import annotations

import os
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

import dpkit.analytics as dpa
from dpkit.accounting import Budget

QUERIES = {
    "group_by(k), where(age > 50)": ("k", "age > 50"),
    "group_by(age), where(k <> 'zz')": ("age", "k <> 'zz'"),
}


def outcome(path: str, key: str, where: str) -> tuple[str, tuple[float, float]]:
    budget = Budget(epsilon=10.0, delta=1e-5)
    s = dpa.Session(path, privacy_unit="uid", budget=budget)
    try:
        (
            s.query()
            .where(where)
            .group_by(key)
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .run(epsilon=1.0, delta=1e-6)
        )
        return "released", budget.spent
    except Exception as exc:
        return type(exc).__name__, budget.spent


def main() -> int:
    differ = 0
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for i, raw in enumerate(([b"ok"] * 10 + [b"\xff\xfe"], [b"ok"] * 10)):
            path = os.path.join(folder, f"t{i}.parquet")
            n = len(raw)
            pq.write_table(
                pa.table(
                    {
                        "uid": list(range(n)),
                        "age": [0] * 10 + [99] * (n - 10),
                        "k": pa.array(raw, pa.binary()).view(pa.string()),
                    }
                ),
                path,
            )
            paths.append(path)
        for name, (key, where) in QUERIES.items():
            got = [outcome(p, key, where) for p in paths]
            differ += got[0] != got[1]
            print(
                f"{name:32s} D: {got[0][0]} (spent {got[0][1]})   "
                f"D': {got[1][0]} (spent {got[1][1]})"
            )
    print("OPEN: the outcome after the charge depends on one person's text" if differ else "FIXED")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
