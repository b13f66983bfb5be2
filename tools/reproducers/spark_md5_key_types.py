"""Finding: with ``bounding_hash="md5"`` Spark keeps other rows than DuckDB for some key types.

The md5 profile hashes the canonical text of each hashed column; for non-float columns that
text is the engine's own ``CAST(col AS VARCHAR/STRING)``, which differs between the engines for

* ``TIMESTAMP WITH TIME ZONE`` (Parquet ``timestamp[us, tz=UTC]``): DuckDB writes
  ``2024-01-01 00:00:00+00``, Spark ``2024-01-01 00:00:00`` (in its session time zone, which
  also makes the Spark text depend on ``spark.sql.session.timeZone``);
* ``BLOB``/``BINARY``: DuckDB writes escapes (``\\xFF\\x00``), Spark the raw bytes.

So with contribution bounding binding (one group per unit here) the two engines keep different
rows and the pre-noise aggregates differ, against docs/spark.md ("the same rows are kept on
both engines"). Held (equal on both engines): DECIMAL(10,2), DECIMAL(38,10) keys and DECIMAL
values, naive TIMESTAMP with fractional seconds and negative epochs, DATE (years 0107..2133),
FLOAT (float32) keys with -0.0, 3.4e38 and subnormals, TINYINT, BOOLEAN; and sums of random
doubles (see the second table).

    PYTHONPATH=src nice -n 10 .venv/bin/python tools/reproducers/spark_md5_key_types.py
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import random
import struct
import sys
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from _sparkatk import local_spark

from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine

KEYS = ("tstz", "bin", "dec2", "dec38", "ts", "d", "f32", "i8", "b")


def key_table(n_units: int = 60, rows: int = 5, seed: int = 1) -> pa.Table:
    rng = random.Random(seed)
    col: dict[str, list[Any]] = {k: [] for k in ("uid", *KEYS, "x")}
    for u in range(n_units):
        for _ in range(rows):
            col["uid"].append(f"u{u}")
            col["tstz"].append(
                dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
                + dt.timedelta(hours=rng.choice([0, 1, 5]))
            )
            col["bin"].append(rng.choice([b"a", b"\xff\x00", b""]))
            col["dec2"].append(decimal.Decimal(rng.choice(["1.50", "0.00", "-0.10", "123.45"])))
            col["dec38"].append(
                decimal.Decimal(rng.choice(["0", "0.0000000001", "-12345678901234567890.5", "100"]))
            )
            col["ts"].append(
                dt.datetime(2024, 1, 1)
                + dt.timedelta(seconds=rng.choice([0, 0.5, 1.25, 86400.000001, -1e9]))
            )
            col["d"].append(
                dt.date(2024, 1, 1) + dt.timedelta(days=rng.choice([0, 40000, -700000]))
            )
            col["f32"].append(rng.choice([0.1, 1.5, -0.0, 3.4e38, 1e-45]))
            col["i8"].append(rng.choice([-128, 0, 127]))
            col["b"].append(rng.choice([True, False]))
            col["x"].append(rng.uniform(-10, 100))
    types = {
        "uid": pa.string(),
        "tstz": pa.timestamp("us", tz="UTC"),
        "bin": pa.binary(),
        "dec2": pa.decimal128(10, 2),
        "dec38": pa.decimal128(38, 10),
        "ts": pa.timestamp("us"),
        "d": pa.date32(),
        "f32": pa.float32(),
        "i8": pa.int8(),
        "b": pa.bool_(),
        "x": pa.float64(),
    }
    return pa.table({k: pa.array(v, types[k]) for k, v in col.items()})


def random_double(rng: random.Random) -> float:
    """Any finite or special double: random bit patterns, subnormals, +-0, huge values."""
    kind = rng.random()
    if kind < 0.5:
        return struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
    if kind < 0.7:
        return rng.choice(
            [
                0.0,
                -0.0,
                5e-324,
                -5e-324,
                1e308,
                -1e308,
                math.inf,
                -math.inf,
                math.nan,
                2.0**-1074 * 3,
                1e23,
            ]
        )
    return rng.uniform(-200, 200)


def value_table(n: int = 10_000, seed: int = 2) -> pa.Table:
    rng = random.Random(seed)
    return pa.table(
        {
            "uid": pa.array([f"u{i % 2500}" for i in range(n)]),
            "k": pa.array([i % 3 for i in range(n)], pa.int64()),
            "x": pa.array([random_double(rng) for _ in range(n)], pa.float64()),
        }
    )


def plan(src: Source, key: str, *, measures: tuple[Measure, ...], max_rows: int = 1) -> Plan:
    return Plan(
        source=src,
        filters=(),
        bound=Bound(
            privacy_unit="uid", max_partitions=1, max_rows_per_partition=max_rows, salt=12345
        ),
        aggregate=Aggregate(group_by=(key,), measures=measures),
    )


def as_dict(result: Any) -> dict[Any, dict[str, Any]]:
    return {k: {m: v[i] for m, v in result.values.items()} for i, k in enumerate(result.keys)}


def main() -> dict[str, bool]:
    equal: dict[str, bool] = {}
    with local_spark() as spark, tempfile.TemporaryDirectory() as tmp:
        spark_md5 = SparkEngine(spark, hash="md5")
        duck_md5 = DuckDBEngine(hash="md5", threads=1)
        path = os.path.join(tmp, "keys.parquet")
        pq.write_table(key_table(), path)
        src = Source(kind="parquet", location=path)
        count = (Measure(name="n", kind="rows"),)
        print("key type             DuckDB md5 rows per group     Spark md5 rows per group")
        for key in KEYS:
            a = as_dict(duck_md5.execute(plan(src, key, measures=count)))
            b = as_dict(spark_md5.execute(plan(src, key, measures=count)))
            equal[key] = a == b
            fa = sorted(v["n"] for v in a.values())
            fb = sorted(v["n"] for v in b.values())
            print(f"{key:8s} {'equal' if a == b else 'DIFFERENT':10s} {fa!s:28s} {fb!s}")
        vpath = os.path.join(tmp, "values.parquet")
        pq.write_table(value_table(), vpath)
        vsrc = Source(kind="parquet", location=vpath)
        print("\nsums of 10^4 random doubles (bit patterns, subnormals, +-0, +-inf, NaN):")
        for lo, hi, k in (
            (-10.0, 100.0, 20),
            (-4e18, 4e18, 0),
            (-0.2, 0.2, 64),
            (0.0, 2.0**40, 22),
        ):
            ms = (
                Measure(name="s", kind="sum", column="x", lower=lo, upper=hi, frac_bits=k),
                Measure(name="v", kind="values", column="x"),
            )
            a = as_dict(duck_md5.execute(plan(vsrc, "k", measures=ms, max_rows=2)))
            b = as_dict(spark_md5.execute(plan(vsrc, "k", measures=ms, max_rows=2)))
            bound = (
                3
                * 2500
                * 2
                * max(abs(math.floor(math.ldexp(lo, k))), abs(math.floor(math.ldexp(hi, k))))
            )
            ok = all(abs(int(v["s"])) <= bound for v in b.values())
            equal[f"sum[{lo},{hi}]x2^{k}"] = a == b and ok
            print(
                f"  [{lo:g}, {hi:g}] x 2^{k}: {'equal' if a == b else 'DIFFERENT'}, "
                f"within bounds: {ok}"
            )
    return equal


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
