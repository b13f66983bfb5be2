"""DuckDB attack: one person spells their privacy unit (or a group key) several equal ways in a
pandas ``object`` column (or a Polars ``Object`` column).

D: 100 people with text ids, one row each. D' = D plus one person whose rows hold the id
``0.0`` and ``-0.0``, or ``1``, ``1.0``, ``True`` and ``Decimal('1.00')`` (Python holds them
equal; docs/special-values.md says ``-0.0`` is the same unit as ``0.0``). Prints the exact
pre-noise number of units and of counted rows (``count_distinct()`` / ``count()``,
``max_partitions=1``, ``max_rows_per_partition=1``) on D and D', and for keys the groups the
person adds when 100 people hold the plain spelling (``max_partitions`` = number of spellings).
One person may move each figure by 1. Exits 1 while some figure moves by more.

    PYTHONPATH=src python tools/reproducers/pandas_object_spellings.py
"""

from __future__ import annotations

import sys
from decimal import Decimal
from typing import Any

import pandas as pd
import polars as pl

import dpkit.analytics as dpa
from dpkit.accounting import Budget

SPELLINGS: dict[str, list[Any]] = {
    "0.0 / -0.0": [0.0, -0.0],
    "1 / 1.0 / True / Decimal('1.00')": [1, 1.0, True, Decimal("1.00")],
}


def exact(frame: Any, group: bool, max_partitions: int) -> Any:
    s = dpa.Session(frame, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    q = s.query().group_by("k") if group else s.query()
    q = q.bound(max_partitions=max_partitions, max_rows_per_partition=1).agg(n=dpa.count())
    return q.prepare(epsilon=1.0, delta=1e-6).exact(s.engine)


def units(ids: list[Any], polars: bool = False) -> tuple[int, int]:
    """(units, rows counted), read as count_distinct and count on one table."""
    if polars:
        frame: Any = pl.DataFrame({"uid": pl.Series(ids, dtype=pl.Object), "k": ["a"] * len(ids)})
    else:
        frame = pd.DataFrame({"uid": pd.Series(ids, dtype=object), "k": ["a"] * len(ids)})
    s = dpa.Session(frame, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    q = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(u=dpa.count_distinct(), n=dpa.count())
    )
    v = q.prepare(epsilon=1.0, delta=1e-6).exact(s.engine).values
    return int(v["u:n"][0]), int(v["n:n"][0])


def groups(spellings: list[Any]) -> tuple[int, int]:
    """Groups on D and D' when 100 people hold the plain spelling as their key."""
    out = []
    for extra in ([], spellings):
        keys = [spellings[0]] * 100 + extra
        frame = pd.DataFrame(
            {"uid": list(range(100)) + [1000] * len(extra), "k": pd.Series(keys, dtype=object)}
        )
        out.append(len(exact(frame, True, len(spellings)).keys))
    return out[0], out[1]


def main() -> int:
    worst = 0
    others = [f"person-{i}" for i in range(100)]
    for polars in (False, True):
        for name, spellings in SPELLINGS.items():
            (u0, n0), (u1, n1) = units(others, polars), units(others + spellings, polars)
            where = "Polars Object" if polars else "pandas object"
            print(
                f"{where}, unit {name:34s} units {u0} -> {u1} (+{u1 - u0}), "
                f"rows {n0} -> {n1} (+{n1 - n0})"
            )
            worst = max(worst, u1 - u0, n1 - n0)
    # Polars: equal text ids held by distinct objects
    ids = ["".join(["p", "1"]) for _ in range(4)]
    (u0, _), (u1, _) = units(others, True), units(others + ids, True)
    print(f"Polars Object, unit 'p1' in 4 objects{'':15s} units {u0} -> {u1} (+{u1 - u0})")
    worst = max(worst, u1 - u0)
    for name, spellings in SPELLINGS.items():
        g0, g1 = groups(spellings)
        print(f"pandas object, key  {name:34s} groups {g0} -> {g1} (+{g1 - g0})")
        worst = max(worst, g1 - g0)
    print(f"largest move {worst} (bound 1):", "OPEN" if worst > 1 else "held")
    return 1 if worst > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
