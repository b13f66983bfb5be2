"""Attack: grouping by a LIST (or STRUCT / MAP) column raises TypeError after the budget is
charged, exactly when some row has a non-NULL key.

The compiler accepts any column type as a group-by key (engines/_compiler.py: keys are only
hashed and grouped in SQL), DuckDB returns a LIST key as a Python ``list`` (STRUCT / MAP as a
``dict``), and ``assemble`` (analytics/_release.py) uses the engine's keys as dict keys:
``engine_index[tuple(normalize_key(v) for v in key)] = i``. ``normalize_key`` leaves lists and
dicts as they are, so the release raises ``TypeError: unhashable type: 'list'`` iff some group
key is not NULL. With public keys the filter is skipped for keys without a SQL literal
(``_key_filters``), so every row reaches the same line.

Neighbours (add/remove one privacy unit), pyarrow table, ``g`` of type list<int64>:
D = {u0: NULL, u1: NULL}, D' = D + {u2: [1]}. Budget (1e6, 1e-3) basic; query
(epsilon=1, delta=1e-6) with partition selection, and with public keys ``[((1,),)]`` (a
tuple has no SQL literal, so no key filter is added).
Outcome deterministic (true epsilon infinite); certificate: Clopper-Pearson at confidence
1 - 1e-6 on N runs per table, against the claim (1, 1e-6).
Run: PYTHONPATH=src python tools/reproducers/unhashable_group_key.py
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
from scipy.stats import beta

from dpkit.accounting import Budget
from dpkit.analytics import Session, count

N = 200


def cp_bound(k1: int, k0: int, n: int, delta: float, alpha: float = 1e-6) -> float:
    """ln((P_lower[raise | D'] - delta) / P_upper[raise | D]), bounds at alpha / 2 each."""
    p_lo = beta.ppf(alpha / 2, k1, n - k1 + 1) if k1 > 0 else 0.0
    q_hi = beta.ppf(1 - alpha / 2, k0 + 1, n - k0) if k0 < n else 1.0
    return math.log((p_lo - delta) / q_hi) if p_lo > delta else 0.0


def raises(g: list[Any], keys: Any) -> int:
    table = pa.table({"u": list(range(len(g))), "g": pa.array(g, type=pa.list_(pa.int64()))})
    s = Session(table, privacy_unit="u", budget=Budget(epsilon=1e9, delta=1e-3))
    q = s.query().group_by("g", keys=keys).bound(max_partitions=1, max_rows_per_partition=1)
    q = q.agg(n=count())
    k = 0
    for _ in range(N):
        try:
            q.run(epsilon=1.0, delta=1e-6)
        except TypeError:  # unhashable type: 'list' (after the charge)
            k += 1
    return k


def main() -> None:
    d: list[Any] = [None, None]
    d1: list[Any] = [None, None, [1]]
    for name, keys in (("partition selection", None), ("public keys [((1,),)]", [((1,),)])):
        k0, k1 = raises(d, keys), raises(d1, keys)
        print(
            f"group_by(list column), {name}: raised {k0}/{N} on D, {k1}/{N} on D'; claim "
            f"(1, 1e-6), certified epsilon >= {cp_bound(k1, k0, N, 1e-6):.2f} at delta 1e-6 "
            "(confidence 1-1e-6; true: infinite)"
        )


if __name__ == "__main__":
    main()
