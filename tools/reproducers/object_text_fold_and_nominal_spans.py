"""DuckDB attack: Python-equal values that the object-column text rule still spells two ways.

The rule (``dpkit.analytics._object_text``) promises that values Python holds equal get one
text, so one person's unit spelled several equal ways is one unit. Two families escape it:

* an aware ``datetime`` at an ambiguous wall time, with ``fold=0`` and ``fold=1`` in the same
  ``zoneinfo`` zone: equal (same tzinfo: compared as wall times), same hash, a set of both has
  one element; the rule reads the UTC instant, which differs by the DST shift
  (``05:30:00+00:00`` vs ``06:30:00+00:00``);
* ``numpy.timedelta64(1, 'Y')`` and ``numpy.timedelta64(12, 'M')``: equal, same hash; the
  rule writes ``1Y`` and ``12M``;
* ``numpy.longdouble(1 + 2**-60)`` and the ``numpy.clongdouble`` of it (x86-64: 64-bit
  mantissa): equal, same hash; the rule reads the complex through ``complex()``, a double,
  and writes ``1`` for it, the exact digits for the real.

D: 100 people with distinct ids of the same type, one row each. D' = D plus one person whose two
rows hold the two spellings of one id. Figure: exact (pre-noise) ``count_distinct()`` (units)
and ``count()`` (rows) with ``max_partitions=1``, ``max_rows_per_partition=1``: one person may
move each by 1; this person moves both by 2 (the release is 2-DP for a claim of 1).
Exits 1 while some figure moves by more than 1.

    PYTHONPATH=src python tools/reproducers/object_text_fold_and_nominal_spans.py
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget

NY = ZoneInfo("America/New_York")
CASES: dict[str, tuple[list[Any], list[Any]]] = {
    "aware datetime fold=0 / fold=1": (
        [
            dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=i)
            for i in range(100)
        ],
        [
            dt.datetime(2021, 11, 7, 1, 30, tzinfo=NY, fold=0),
            dt.datetime(2021, 11, 7, 1, 30, tzinfo=NY, fold=1),
        ],
    ),
    "timedelta64 1Y / 12M": (
        [np.timedelta64(i, "D") for i in range(100)],
        [np.timedelta64(1, "Y"), np.timedelta64(12, "M")],
    ),
    "clongdouble / longdouble": (
        [np.longdouble(i) for i in range(2, 102)],
        [
            np.longdouble(1) + np.longdouble(2) ** -60,
            np.clongdouble(np.longdouble(1) + np.longdouble(2) ** -60),
        ],
    ),
}


def units(ids: list[Any]) -> tuple[int, int]:
    """(units, rows counted) of a pandas object unit column, exact."""
    frame = pd.DataFrame({"uid": pd.Series(ids, dtype=object), "k": ["a"] * len(ids)})
    s = dpa.Session(frame, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    q = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(u=dpa.count_distinct(), n=dpa.count())
    )
    v = q.prepare(epsilon=1.0, delta=1e-6).exact(s.engine).values
    return int(v["u:n"][0]), int(v["n:n"][0])


def main() -> int:
    worst = 0
    for name, (others, person) in CASES.items():
        a, b = person
        assert a == b and hash(a) == hash(b) and len({a, b}) == 1, name
        (u0, n0), (u1, n1) = units(others), units(others + person)
        print(f"{name:32s} units {u0} -> {u1} (+{u1 - u0}), rows {n0} -> {n1} (+{n1 - n0})")
        worst = max(worst, u1 - u0, n1 - n0)
    print(f"largest move {worst} (bound 1):", "OPEN" if worst > 1 else "held")
    return 1 if worst > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
