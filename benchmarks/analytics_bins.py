"""Compile and run time of per-group bin counts (the quantile measure) against the bin count.

One ``bin_counts`` measure over equal bins of [0, 100] per category on the 1M-row file of
``benchmarks/analytics.py`` (generated there), 2 DuckDB threads, each bin count in its own
process. Prints a table; equal bins take the arithmetic bin index, ``--uneven`` perturbs the
inner edges so that the comparison tree is used instead.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/analytics_bins.py [--uneven]``
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

PATH = "/tmp/dpkit-bench-analytics/rows1000000.parquet"
BINS = (2, 128, 1024, 4096)


def one(bins: int, uneven: bool) -> dict[str, float]:
    from dpkit.analytics._aggregates import _linspace
    from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
    from dpkit.analytics.engines.duckdb import DuckDBEngine

    edges = list(_linspace(0.0, 100.0, bins))
    if uneven:
        edges[1:-1] = [e + 1e-9 * (i % 2) for i, e in enumerate(edges[1:-1])]
    plan = Plan(
        source=Source(kind="parquet", location=PATH),
        filters=(),
        bound=Bound(privacy_unit="user_id", max_partitions=1, max_rows_per_partition=5, salt=7),
        aggregate=Aggregate(
            group_by=("category",),
            measures=(Measure(name="q", kind="bin_counts", column="value", edges=tuple(edges)),),
        ),
    )
    engine = DuckDBEngine(threads=2)
    t0 = time.perf_counter()
    compiled = engine.compile(plan)
    t1 = time.perf_counter()
    engine.execute_compiled(compiled)
    t2 = time.perf_counter()
    return {"compile": t1 - t0, "run": t2 - t1}


def main() -> None:
    if "--one" in sys.argv:
        print(json.dumps(one(int(sys.argv[sys.argv.index("--one") + 1]), "--uneven" in sys.argv)))
        return
    import analytics

    analytics.generate(Path(PATH), 1_000_000)
    print("| bins | compile (s) | run (s) |\n| ---: | ---: | ---: |")
    for b in BINS:
        cmd = [sys.executable, __file__, "--one", str(b)] + (
            ["--uneven"] if "--uneven" in sys.argv else []
        )
        r = json.loads(
            subprocess.run(cmd, capture_output=True, text=True, check=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        print(f"| {b} | {r['compile']:.2f} | {r['run']:.2f} |")


if __name__ == "__main__":
    main()
