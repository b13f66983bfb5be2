"""How much the exact DECIMAL(38, 0) sums cost on Spark: the plain-Spark floor statement of
``benchmarks/spark.py`` with its double sum replaced by the fixed-point value summed as
DECIMAL(38, 0) (what the dpkit engine does) or as BIGINT, timed in rotating order on one
classic ``local[2]`` session over the cached 10M-row file (a diagnostic: prints, writes
nothing).

Run: ``.venv/bin/python benchmarks/spark_sums.py [--rows 10000000] [--rounds 5]``.
"""

from __future__ import annotations

import statistics
import time

import spark as bench  # the benchmark module next to this file


def main() -> None:
    rows = int(bench._arg("--rows", "10000000"))
    rounds = int(bench._arg("--rounds", "5"))
    spark = bench._classic_session()
    try:
        spark.read.parquet(str(bench.generate(rows))).createOrReplaceTempView("sums_src")
        base = bench.FLOOR_SQL.format(
            salt=12345, view="sums_src", lo=bench.LOWER, hi=bench.UPPER, rows=bench.ROWS_PER_USER
        )
        clamped = f"least(greatest(value, {bench.LOWER}), {bench.UPPER})"
        fixed = f"CAST(FLOOR({clamped} * 4294967296.0) AS BIGINT)"
        old = f"sum({clamped}) AS s"
        statements = {
            "double sum (the floor)": base,
            "DECIMAL(38, 0) sum": base.replace(old, f"sum(CAST({fixed} AS DECIMAL(38, 0))) AS s"),
            "BIGINT sum": base.replace(old, f"sum({fixed}) AS s"),
        }
        if len(set(statements.values())) != 3:
            raise SystemExit("the floor statement changed: update this script")
        for sql in statements.values():  # warm-up: code generation, file listing
            spark.sql(sql).collect()
        names = list(statements)
        times: dict[str, list[float]] = {n: [] for n in names}
        for r in range(rounds):
            for name in names[r % 3 :] + names[: r % 3]:
                start = time.perf_counter()
                spark.sql(statements[name]).collect()
                times[name].append(time.perf_counter() - start)
        for name, ts in times.items():
            print(f"{name}: median {statistics.median(ts):.2f} s of {[round(t, 2) for t in ts]}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
