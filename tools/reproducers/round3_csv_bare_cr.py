"""Attack: in a CRLF CSV, one unit's line ending in a bare ``\\r`` renames the unit of the next
line (another unit's row), so one unit's rows split other units in two and bypass contribution
bounding.

``_csv_lines`` (engines/_compiler.py) reads each physical line as one text value and parses it
with a regex, promising that no line changes how another is read. DuckDB (2.0) however ends a
line at a bare ``\\r``; when unit A's line is ``101,1\\r`` followed by the file's ``\\r\\n``, the
next raw line comes back as ``\\n<next line>``, and ``[^,"][^,]*`` accepts the leading newline
as part of the first field: the next row's unit id ``7`` becomes ``\\n7``, a new unit.

Neighbours (add/remove one privacy unit, CRLF file ``u,v``): D = K victim units, each with two
lines; D' = D plus unit 101 with K lines ``101,1\\r``, one placed before the second line of each
victim. Query: ``count()`` with max_partitions=1, max_rows_per_partition=1, pure budget,
epsilon = 1. Exact counts: K on D, 2K + 1 on D' (sensitivity claimed 1). Certificate: event
"noisy count > 1.5 K", Clopper-Pearson at confidence 1 - 1e-6 on N runs per table.
Run: PYTHONPATH=src python tools/reproducers/round3_csv_bare_cr.py
Fix idea: read the raw lines with an explicit ``new_line='\\n'`` (or split on ``\\n`` only) and
strip one trailing ``\\r`` in SQL; drop any line still holding ``\\r`` or ``\\n``.
"""

from __future__ import annotations

import math
import os
import tempfile

from scipy.stats import beta

from dpkit.accounting import Budget
from dpkit.analytics import Session, count

N = 400
K = 30


def cp_bound(k1: int, k0: int, n: int, alpha: float = 1e-6) -> float:
    """ln(P_lower[E | D'] / P_upper[E | D]), each one-sided bound at alpha / 2."""
    p_lo = beta.ppf(alpha / 2, k1, n - k1 + 1) if k1 > 0 else 0.0
    q_hi = beta.ppf(1 - alpha / 2, k0 + 1, n - k0) if k0 < n else 1.0
    return math.log(p_lo / q_hi) if p_lo > 0 else 0.0


def main() -> None:
    d_lines, d1_lines = [], []
    for i in range(1, K + 1):
        d_lines += [f"{i},0", f"{i},0"]
        d1_lines += [f"{i},0", "101,1\r", f"{i},0"]
    tmp = tempfile.mkdtemp()
    d, d1 = os.path.join(tmp, "d.csv"), os.path.join(tmp, "d1.csv")
    for path, lines in ((d, d_lines), (d1, d1_lines)):
        with open(path, "wb") as fh:
            fh.write(("u,v\r\n" + "\r\n".join(lines) + "\r\n").encode())
    hits = {}
    for path in (d, d1):
        s = Session(path, privacy_unit="u", budget=Budget(epsilon=1e12))
        q = s.query().bound(max_partitions=1, max_rows_per_partition=1).agg(n=count())
        exact = int(q.run(epsilon=1e9)["n"].iloc[0])  # noise scale 1e-9: the exact count
        hits[path] = sum(int(q.run(epsilon=1.0)["n"].iloc[0]) > 1.5 * K for _ in range(N))
        print(
            f"{os.path.basename(path)}: exact count {exact}; noisy count > {1.5 * K} in "
            f"{hits[path]}/{N} runs at epsilon = 1"
        )
    print(
        f"claim epsilon = 1, certified epsilon >= {cp_bound(hits[d1], hits[d], N):.2f} "
        f"(confidence 1-1e-6); exact law: |c - c'| / t = {K + 1}"
    )


if __name__ == "__main__":
    main()
