"""DuckDB attack (round 4): a Parquet TIMESTAMP(MILLIS) or TIMESTAMP(SECONDS) value below
DuckDB's microsecond range, or a Parquet TIME outside [0, 24 h). DuckDB reports the column as
``TIMESTAMP`` or ``TIME`` (both on the key-type allow-list) and raises ("Date out of range in
timestamp conversion", "Invalid TIME value ... must be within a day") only when it reads that
value, i.e. after the charge.

D: 10 persons aged 0 on 2024-01-01 (or at 00:00) and person 1000 (age 99) at
-9223372036854775 ms (resp. -9223372036854 s, 25:00:00, -5 ms); D' = D without person 1000.
``where("age > 50").group_by("k")``: prints ``run()``'s outcome and the budget spent on D and
D'; exits 1 while they differ.

    cd /work/wt-atk4 && PYTHONPATH=$PWD/src /work/main/.venv/bin/python \
        tools/reproducers/spark4_coarse_timestamp_exception.py
"""

from __future__ import annotations

import os
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

import dpkit.analytics as dpa
from dpkit.accounting import Budget

CASES = {
    "TIMESTAMP(MILLIS)": (pa.timestamp("ms"), -9223372036854775, 1704067200000),
    "TIMESTAMP(SECONDS)": (pa.timestamp("s"), -9223372036854, 1704067200),
    "TIMESTAMP(MILLIS, UTC)": (pa.timestamp("ms", tz="UTC"), -9223372036854775, 1704067200000),
    "TIME(MILLIS) 25:00": (pa.time32("ms"), 90_000_000, 0),
    "TIME(MILLIS) -5 ms": (pa.time32("ms"), -5, 0),
}


def outcome(path: str) -> tuple[str, tuple[float, float]]:
    budget = Budget(epsilon=10.0, delta=1e-5)
    s = dpa.Session(path, privacy_unit="uid", budget=budget)
    try:
        (
            s.query()
            .where("age > 50")
            .group_by("k")
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
        for name, (typ, value, base) in CASES.items():
            got = []
            for values in ([base] * 10 + [value], [base] * 10):
                path = os.path.join(folder, f"t{len(got)}.parquet")
                n = len(values)
                pq.write_table(
                    pa.table(
                        {
                            "uid": list(range(n)),
                            "age": [0] * 10 + [99] * (n - 10),
                            "k": pa.array(values, pa.int64()).cast(typ)
                            if pa.types.is_timestamp(typ)
                            else pa.array(values, pa.int32()).view(typ),
                        }
                    ),
                    path,
                )
                got.append(outcome(path))
            differ += got[0] != got[1]
            print(
                f"{name:24s} D: {got[0][0]} (spent {got[0][1]})   "
                f"D': {got[1][0]} (spent {got[1][1]})"
            )
    print("OPEN: the outcome after the charge depends on one person's value" if differ else "FIXED")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
