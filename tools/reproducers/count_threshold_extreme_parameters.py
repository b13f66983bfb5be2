"""Partition selection by the count's own noise at extreme (epsilon, delta): priced promptly,
with a result or a dpkit error, before any charge.

Before the fix: epsilon 1e10 (a ``count()`` grouped without keys, P = 2, R = 3) did not
finish pricing in 30 s (each tail of the tau search, ``exp(-10^9)``, became a rational through
its decimal text), and delta 1e-310 raised a builtin ``OverflowError``. After: tau 3 at once,
and a subnormal delta is priced. A ``sum`` grouped without keys (no count: the separate
truncated geometric selection) at epsilon 1e4 did not finish either (a Taylor sum of
``e^5000`` in Fractions); after, its growth factor's exponent is capped at 40. Each case
runs in a child process stopped after 30 s.
Regression test:
``tests/mechanisms/test_count_threshold_extreme_parameters_priced_before_the_charge.py``.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

LIMIT = 30.0


def _price(method: str, epsilon: float, delta: float, out: Any, agg: str = "count") -> None:
    import pandas as pd

    import dpkit.analytics as dpa
    from dpkit.accounting import Budget

    data = pd.DataFrame({"uid": [f"u{i}" for i in range(20)], "g": ["a"] * 20, "x": [1.0] * 20})
    extra = {"method": "zcdp"} if method == "zcdp" else {}
    s = dpa.Session(data, privacy_unit="uid", budget=Budget(epsilon=1e100, delta=0.5, **extra))
    q = s.query().group_by("g").bound(max_partitions=2, max_rows_per_partition=3)
    try:
        if agg == "sum":  # no count: the separate (truncated geometric) selection
            q = q.agg(t=dpa.sum("x", bounds=(0.0, 1.0)))
            sel = q.prepare(epsilon=epsilon, delta=delta).pricing.selection
            out.put(f"{type(sel).__name__}, sure from {sel.threshold} units")
            return
        thr = q.agg(n=dpa.count()).prepare(epsilon=epsilon, delta=delta).pricing.selection
        out.put(f"tau {thr.tau}, threshold delta {thr.threshold_delta:.3g}")
    except Exception as exc:  # the type is the finding
        out.put(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")


def main() -> None:
    ctx = mp.get_context("spawn")
    for method, eps, delta, agg in [
        ("basic", 1e10, 1e-6, "count"),
        ("zcdp", 1e10, 1e-6, "count"),
        ("basic", 1e50, 1e-6, "count"),
        ("basic", 1.0, 1e-310, "count"),
        ("basic", 1e4, 1e-6, "sum"),
    ]:
        out = ctx.Queue()
        proc = ctx.Process(target=_price, args=(method, eps, delta, out, agg))
        t0 = time.monotonic()
        proc.start()
        proc.join(LIMIT)
        if proc.is_alive():
            proc.kill()
            proc.join()
            what = f"no answer after {LIMIT:.0f} s"
        else:
            what = out.get()
        head = f"{agg:5s} {method:5s} epsilon={eps:g} delta={delta:g}"
        print(f"{head}: {what} ({time.monotonic() - t0:.1f} s)")


if __name__ == "__main__":
    main()
