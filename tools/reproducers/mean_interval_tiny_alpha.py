"""A session's tiny alpha: the mean's interval search never ended, after the charge.

Before the fix: ``Session(..., alpha=1e-12)`` was accepted, and any mean (a centred pair or the
complementary pair released with a sum) charged epsilon 1 and then hung: its certified
interval search (``_intervals._halfwidths``) doubles the width until the tail bound is at
most alpha, but every tail bound carries an absolute float margin of ``1e-12``, so no width
ever satisfies it (the width overflows to infinity and the loop goes on). Independent of the
data, but the caller paid and got nothing. After: alpha below ``1e-10`` is refused with a
``PrivacyParameterError`` when the session is made (nothing charged), and at ``1e-10`` both
means release at once. Each case runs in a child process stopped after 30 s.
Regression test: ``tests/analytics/test_interval_searches_end_at_every_accepted_alpha.py``.
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

LIMIT = 30.0


def _run(alpha: float, with_sum: bool, out: Any) -> None:
    import pandas as pd

    import dpkit.analytics as dpa
    from dpkit.accounting import Budget

    d = pd.DataFrame({"uid": range(30), "g": [0, 1, 2] * 10, "x": [i / 3 for i in range(30)]})
    try:
        s = dpa.Session(d, privacy_unit="uid", budget=Budget(epsilon=10.0), alpha=alpha)
    except Exception as e:  # refused before any query
        out.put(f"refused: {type(e).__name__}: {e}")
        return
    aggs: dict[str, Any] = {"m": dpa.mean("x", bounds=(0.0, 10.0))}
    if with_sum:
        aggs["t"] = dpa.sum("x", bounds=(0.0, 10.0))
    q = s.query().group_by("g", keys=[0, 1, 2]).bound(max_partitions=1, max_rows_per_partition=1)
    import threading
    import time

    def watch() -> None:  # reports the ledger while the query runs (or hangs)
        time.sleep(LIMIT / 2)
        out.put(f"ledger after {LIMIT / 2:.0f} s: {len(s.budget.ledger)} charge(s)")

    threading.Thread(target=watch, daemon=True).start()
    frame = q.agg(**aggs).run(epsilon=1.0)
    out.put(f"released, m_high - m_low = {(frame['m_high'] - frame['m_low']).round(2).tolist()}")


def main() -> None:
    ctx = mp.get_context("spawn")
    for alpha in (1e-12, 1e-10):
        for with_sum in (False, True):
            q: Any = ctx.Queue()
            p = ctx.Process(target=_run, args=(alpha, with_sum, q))
            p.start()
            p.join(LIMIT)
            hung = p.is_alive()
            if hung:
                p.kill()
                p.join()
            said = []
            while not q.empty():
                said.append(q.get())
            what = "mean + sum (complementary pair)" if with_sum else "mean alone"
            tail = f"no result after {LIMIT:.0f} s" if hung else ""
            print(f"alpha={alpha:g} {what}: {'; '.join(said)} {tail}".rstrip())


if __name__ == "__main__":
    main()
