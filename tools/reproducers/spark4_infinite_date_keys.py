"""DuckDB attack (round 4): ``infinity``/``-infinity`` DATE and TIMESTAMP keys.

A Parquet file written by DuckDB may hold ``infinity`` dates and timestamps (the integer
extremes). DuckDB groups them apart from ``9999-12-31`` (``0001-01-01``), but its Python client
returns them as ``date.max``/``datetime.max`` (``date.min``): two engine groups decode to one
key. The release indexes the engine's groups by key (the last one wins), so the added person's
group of 1 replaced the 100 persons' group.

D: 100 persons on the extreme day, person 1000 on ``infinity``; D' = D without person 1000.
Prints the exact engine groups (Session default engine for a Parquet path: DuckDB) and the
count the release reads for the key; exits 1 while two engine groups share a key.

    cd /work/wt-atk4 && PYTHONPATH=$PWD/src /work/main/.venv/bin/python \
        tools/reproducers/spark4_infinite_date_keys.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

import duckdb

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError

CASES = {
    "DATE infinity": ("DATE '9999-12-31'", "'infinity'::DATE"),
    "DATE -infinity": ("DATE '0001-01-01'", "'-infinity'::DATE"),
    "TIMESTAMP infinity": ("TIMESTAMP '9999-12-31 23:59:59.999999'", "'infinity'::TIMESTAMP"),
}


def exact(path: str) -> list[tuple[Any, int]] | str:
    s = dpa.Session(path, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    try:
        p = (
            s.query()
            .group_by("k")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .prepare(epsilon=1.0, delta=1e-6)
        )
        s.validate(p)
    except DPKitError as exc:
        return f"refused ({type(exc).__name__})"
    r = p.exact(s.engine)
    return [(k[0], int(n)) for k, n in zip(r.keys, r.values["n:n"], strict=True)]


def released_count(groups: list[tuple[Any, int]]) -> dict[Any, int]:
    """What the release reads per key: the engine's groups indexed by key, the last wins
    (as ``_release.assemble`` builds its index)."""
    return dict(groups)


def main() -> int:
    merged = 0
    with tempfile.TemporaryDirectory() as folder:
        for name, (base, extra) in CASES.items():
            figures = []
            for tag, tail in (("D", f" UNION ALL SELECT 1000, {extra}"), ("D'", "")):
                path = os.path.join(folder, f"{name.replace(' ', '_')}{len(tag)}.parquet")
                sql = f"SELECT i AS uid, {base} AS k FROM range(100) t(i){tail}"
                duckdb.connect().execute(f"COPY ({sql}) TO '{path}' (FORMAT parquet)")
                got = exact(path)
                figures.append((tag, got))
                if isinstance(got, list) and len({k for k, _ in got}) < len(got):
                    merged += 1
            for tag, got in figures:
                read = released_count(got) if isinstance(got, list) else got
                print(f"{name:20s} {tag:3s} engine groups={got}  release reads {read}")
    print("OPEN: two engine groups share one key" if merged else "FIXED")
    return 1 if merged else 0


if __name__ == "__main__":
    sys.exit(main())
