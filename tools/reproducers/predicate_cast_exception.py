"""Attack: a row predicate (or the public-keys filter) whose comparison makes DuckDB cast a
column or a literal raises for some rows only, after the budget is charged.

``parse_predicate`` (src/dpkit/analytics/_sql.py) sets ``needs_try`` only for arithmetic and
function calls, so ``s = 1``, ``s IN (1, 2)`` (``s`` a VARCHAR column: every CSV column is
text) and the public-keys filter ``s IN (1, 2)`` built by ``Query._key_filters`` from integer
keys run without ``TRY``. DuckDB binds them as ``CAST(s AS INTEGER)`` and raises a Conversion
Error on the first row whose text is no integer. Likewise ``i = 'abc'`` on an INTEGER column
casts the literal, and raises only if some row reaches the filter (empty table: no error).

Neighbours (add/remove one privacy unit): D = {u1:"1", u2:"2"}, D' = D + {u3:"abc"}; and for
the literal casts D = {} (no rows), D' = {u1: 7}; the same holds for an integer histogram
category beyond HUGEINT (2**200), cast per row by the compiler.
Observable: the query raises or releases.
The outcome is deterministic, so the true epsilon is infinite; certificate: Clopper-Pearson
at confidence 1 - 1e-6 (1e-6 split over the two binomial bounds) on N runs per table, claim
epsilon = 1 (pure budget, discrete Laplace).
Run: PYTHONPATH=src python tools/reproducers/predicate_cast_exception.py
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from scipy.stats import beta

from dpkit.accounting import Budget
from dpkit.analytics import Session, count, histogram

N = 200  # runs per table


def cp_bound(k1: int, k0: int, n: int, alpha: float = 1e-6) -> float:
    """ln(P_lower[raise | D'] / P_upper[raise | D]), each one-sided bound at alpha / 2."""
    p_lo = beta.ppf(alpha / 2, k1, n - k1 + 1) if k1 > 0 else 0.0
    q_hi = beta.ppf(1 - alpha / 2, k0 + 1, n - k0) if k0 < n else 1.0
    return math.log(p_lo / q_hi) if p_lo > 0 else 0.0


def raises(frame: pd.DataFrame, pred: str | None, keys: Any, n: int, stat: Any = None) -> int:
    s = Session(frame, privacy_unit="u", budget=Budget(epsilon=1e9))
    q = s.query()
    if pred is not None:
        q = q.where(pred)
    if keys is not None:
        q = q.group_by("s", keys=keys)
    q = q.bound(max_partitions=1, max_rows_per_partition=1).agg(n=count() if stat is None else stat)
    k = 0
    for _ in range(n):
        try:
            q.run(epsilon=1.0)
        except Exception:  # EngineError: "Conversion Error: Could not convert string ..."
            k += 1
    return k


def main() -> None:
    d = pd.DataFrame({"u": [1, 2], "s": ["1", "2"]})
    d1 = pd.DataFrame({"u": [1, 2, 3], "s": ["1", "2", "abc"]})
    e = pd.DataFrame({"u": pd.Series([], dtype="int64"), "s": pd.Series([], dtype="int64")})
    e1 = pd.DataFrame({"u": [1], "s": [7]})
    cases = [
        ("where('s = 1'), VARCHAR s", d, d1, "s = 1", None),
        ("where('s IN (1, 2)'), VARCHAR s", d, d1, "s IN (1, 2)", None),
        ("group_by('s', keys=[1, 2]), VARCHAR s", d, d1, None, [1, 2]),
        ("where(\"s = 'abc'\"), INTEGER s, empty vs one row", e, e1, "s = 'abc'", None),
    ]
    for name, a, b, pred, keys in cases:
        k0 = raises(a, pred, keys, N)
        k1 = raises(b, pred, keys, N)
        report(name, k0, k1)
    # Not a predicate: _category_literal (engines/_compiler.py) writes an integer category as
    # CAST('<digits>' AS HUGEINT) without a range check; 2**200 raises once a row reaches it.
    name = "histogram('s', categories=[2**200]), INTEGER s, empty vs one row"
    st = histogram("s", categories=[2**200])
    report(name, raises(e, None, None, N, st), raises(e1, None, None, N, st))


def report(name: str, k0: int, k1: int) -> None:
    print(
        f"{name}: raised {k0}/{N} on D, {k1}/{N} on D'; claim epsilon = 1, certified "
        f"epsilon >= {cp_bound(k1, k0, N):.2f} (confidence 1-1e-6; true: infinite)"
    )


if __name__ == "__main__":
    main()
