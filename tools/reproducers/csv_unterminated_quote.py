"""Attack: one privacy unit's CSV line with an unterminated quote deletes every later row of
every other unit (contribution bounding is bypassed before it starts).

``source_sql`` (engines/_compiler.py) reads a CSV with ``quote='"'``, ``ignore_errors=true``,
``strict_mode=false``. A quoted field may span lines, so the line ``101,"`` opens a field that
swallows the rest of the file; the record it makes has the wrong shape and is dropped or
merged, and every row after it is gone. Removing that one unit restores them all, so the
count moves by ~the table size although its sensitivity is 1.

Neighbours (add/remove one privacy unit): D = units 1..100, one row each (``u,v``);
D' = D + the line ``101,"`` right after the header. Query: ``count()`` with bounds (1, 1),
pure budget, epsilon = 1 (discrete Laplace of scale ~1). The exact counts (from the engine)
are printed; the exact law gives epsilon = |c - c'| / t for the output c. Certificate: event
"noisy count > 50", Clopper-Pearson at confidence 1 - 1e-6 on N runs per table.
Run: PYTHONPATH=src python tools/reproducers/csv_unterminated_quote.py
"""

from __future__ import annotations

import math
import os
import tempfile

from scipy.stats import beta

from dpkit.accounting import Budget
from dpkit.analytics import Session, count

N = 500


def cp_bound(k1: int, k0: int, n: int, alpha: float = 1e-6) -> float:
    """ln(P_lower[E | D] / P_upper[E | D']), each one-sided bound at alpha / 2."""
    p_lo = beta.ppf(alpha / 2, k1, n - k1 + 1) if k1 > 0 else 0.0
    q_hi = beta.ppf(1 - alpha / 2, k0 + 1, n - k0) if k0 < n else 1.0
    return math.log(p_lo / q_hi) if p_lo > 0 else 0.0


def main() -> None:
    rows = [f"{i},{i % 7}" for i in range(1, 101)]
    tmp = tempfile.mkdtemp()
    d, d1 = os.path.join(tmp, "d.csv"), os.path.join(tmp, "d1.csv")
    with open(d, "w") as fh:
        fh.write("u,v\n" + "\n".join(rows) + "\n")
    with open(d1, "w") as fh:
        fh.write('u,v\n101,"\n' + "\n".join(rows) + "\n")
    hits = {}
    for path in (d, d1):
        s = Session(path, privacy_unit="u", budget=Budget(epsilon=1e12))
        q = s.query().bound(max_partitions=1, max_rows_per_partition=1).agg(n=count())
        exact = int(q.run(epsilon=1e9)["n"].iloc[0])  # noise scale 1e-9: the exact count
        hits[path] = sum(int(q.run(epsilon=1.0)["n"].iloc[0]) > 50 for _ in range(N))
        print(
            f"{os.path.basename(path)}: exact count {exact}; noisy count > 50 in "
            f"{hits[path]}/{N} runs at epsilon = 1"
        )
    print(
        f"claim epsilon = 1, certified epsilon >= {cp_bound(hits[d], hits[d1], N):.2f} "
        "(confidence 1-1e-6); exact law: |c - c'| / t, about 99"
    )


if __name__ == "__main__":
    main()
