"""Finding: nanosecond group keys (TIMESTAMP_NS, TIMESTAMPTZ in ns, TIME_NS from Parquet) are
two groups in DuckDB but one Python key after decoding, so one person's group replaces
another's in the release.

Python's ``datetime``/``time`` hold microseconds: DuckDB's client truncates the nanoseconds,
so keys 1 ns apart come back as two engine groups with equal keys, and ``assemble`` (which
indexes the engine's groups by key, the last one winning) releases the added person's group
(count 1) under the key of the 100 persons' group (count 100): the count read for that key
moves 100 -> 1 between D and D' (sensitivity 1). The Session's default engine for a Parquet
path is DuckDB; Spark refuses these Parquet files when it reads their schema (held there).

    PYTHONPATH=src /work/main/.venv/bin/python tools/reproducers/spark3_nanosecond_keys.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from _sparkatk import local_spark

import dpkit.analytics as dpa
from dpkit.accounting import Budget

BASE = 1704067200000000000  # 2024-01-01 00:00:00 in nanoseconds
TYPES = {
    "timestamp[ns]": (pa.timestamp("ns"), BASE),
    "timestamp[ns, UTC]": (pa.timestamp("ns", tz="UTC"), BASE),
    "time64[ns]": (pa.time64("ns"), 12 * 3600 * 10**9),
}


def files(tmp: str, name: str) -> tuple[str, str]:
    """D: persons 0..99 with key t, person 1000 with key t + 1 ns; D' = D without 1000."""
    typ, t = TYPES[name]
    uid = [*range(100), 1000]
    keys = pa.array([t] * 100 + [t + 1], pa.int64()).cast(typ)
    d = pa.table({"uid": uid, "k": keys})
    paths = (
        os.path.join(tmp, f"{len(os.listdir(tmp))}.parquet"),
        os.path.join(tmp, f"{len(os.listdir(tmp)) + 1}.parquet"),
    )
    pq.write_table(d, paths[0])
    pq.write_table(d.slice(0, 100), paths[1])
    return paths


def released_count(source: Any) -> str:
    """The exact count the release reads for the key of the 100 persons' group (the engine's
    groups indexed by key as ``assemble`` does: the last group with an equal key wins), and
    the number of engine groups; or the refusal before the charge."""
    s = dpa.Session(source, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    try:
        p = (
            s.query()
            .group_by("k")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .prepare(epsilon=1.0, delta=1e-6)
        )
        s.validate(p)
    except Exception as exc:
        return f"refused before the charge ({type(exc).__name__})"
    r = p.exact(s.engine)
    by_key = {k: int(n) for k, n in zip(r.keys, r.values["n:n"], strict=True)}
    return f"{len(r.keys)} groups, {len(by_key)} keys, counts by key {sorted(by_key.values())}"


def main() -> bool:
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in TYPES:
            d, d_prime = files(tmp, name)
            on_d, on_d_prime = released_count(d), released_count(d_prime)
            ok &= "2 groups, 2 keys" in on_d or "refused" in on_d
            print(f"DuckDB {name:19s} D : {on_d}\n       {'':19s} D': {on_d_prime}")
        with local_spark() as spark:
            for name in TYPES:
                d, _ = files(tmp, name)
                try:
                    frame = spark.read.parquet(d)
                except Exception as exc:  # refused with the schema, before any session
                    print(f"Spark  {name:19s} cannot read the file: {str(exc)[:60]}")
                    continue
                print(f"Spark  {name:19s} D : {released_count(frame)}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
