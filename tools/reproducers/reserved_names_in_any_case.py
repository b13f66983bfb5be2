"""Compiler attack: a column whose name spells an internal one in another case (``__DPK_RN``)
took the place of the row limit's ranks, and one person's rows passed ``max_rows_per_partition``.

Internal names of the compiled statement start with ``__dpk_``; a column starting with it was
refused only in that case, but DuckDB resolves identifiers in any case. A measured column
``__DPK_RN`` then stood beside the window's ``__dpk_rn`` in the ranked rows and the limit
``__dpk_rn - __dpk_gr < R`` read the column: a person whose 50 rows hold -5 kept all 50 in one
group at ``.bound(max_partitions=1, max_rows_per_partition=1)``. D: 100 people of one row (value
1) in group ``a``; D' = D plus that person. The count's exact value moves by 50 against its
sensitivity 1 (an unbounded epsilon: the Laplace noise of scale 1/epsilon is outrun 50-fold).
Fix: such names (any case) are refused with ``PlanError`` before the charge. Regression test:
``tests/analytics/test_reserved_column_names_refused_in_any_case.py``. "before" runs with the
name check bypassed (the check as it was: case-sensitive). Exits 1 while the count moves by more
than 1.

    PYTHONPATH=src python tools/reproducers/reserved_names_in_any_case.py
"""

from __future__ import annotations

import sys
import warnings

import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines._compiler import columns
from dpkit.analytics.engines.duckdb import DuckDBEngine

COLUMN = "__DPK_RN"


def shift() -> str:
    """The count's exact shift between D and D' at (P, R) = (1, 1), or the refusal."""
    counts = []
    for extra in (0, 50):
        d = pd.DataFrame(
            {
                "uid": [f"p{i}" for i in range(100)] + ["adv"] * extra,
                "g": ["a"] * (100 + extra),
                COLUMN: [1.0] * 100 + [-5.0] * extra,
            }
        )
        engine = DuckDBEngine(threads=1)
        s = dpa.Session(d, privacy_unit="uid", budget=Budget(epsilon=10.0), engine=engine)
        q = s.query().bound(max_partitions=1, max_rows_per_partition=1).group_by("g", keys=["a"])
        try:
            p = q.agg(n=dpa.count(), m=dpa.mean(COLUMN, bounds=(-10.0, 10.0))).prepare(epsilon=1.0)
            engine.validate(p.plan)  # what Session.run checks before its charge
            counts.append(int(engine.execute(p.plan).values["n:n"][0]))  # type: ignore[call-overload]
        except Exception as exc:
            return f"refused before the charge ({type(exc).__name__})"
    return f"count {counts[0]} -> {counts[1]}: moved by {counts[1] - counts[0]} (sensitivity 1)"


def main() -> int:
    warnings.simplefilter("ignore")
    use = columns.Reads.use

    def case_sensitive(self: columns.Reads, name: object, what: str) -> str:
        """The check as it was: only the lower-case prefix refused."""
        col = columns.resolve(name, self.schema, what)
        if col.startswith(columns.P):
            return use(self, name, what)
        if col not in self.used:
            self.used.append(col)
        return col

    columns.Reads.use = case_sensitive  # type: ignore[method-assign]
    try:
        before = shift()
    finally:
        columns.Reads.use = use  # type: ignore[method-assign]
    after = shift()
    print(f"column {COLUMN!r}: before {before}; after {after}")
    return 0 if after.startswith("refused") else 1


if __name__ == "__main__":
    sys.exit(main())
