"""DuckDB attack: a planned query over a temporary table of the engine's own connection was
charged and then failed, nothing released.

A planned DuckDB query (no ``.bound(...)``) ranks its rows once into a temporary table written
on a cursor of its own (:class:`~dpkit.analytics.engines.duckdb.SharedRanking`), after the
charge. DuckDB's temporary tables and views belong to the connection (cursor) that made them:
a private source or a public join table created as ``CREATE TEMP TABLE`` on the engine's
``connection`` (the thread's cursor, where every check before the charge ran and bound) is
invisible on that new cursor. The table's statement then raised ``Catalog Error`` after the
charge: epsilon 1 spent, ``EngineError``, nothing released; the separate statements (the
behaviour before the shared ranking) answered. Not data-dependent (the catalog is public), but
the whole charge lost on every run. Fix: :meth:`DuckDBEngine.share_ranking` binds the table's
statement on the ranking's own cursor (``EXPLAIN``, no row read) before the charge and falls
back to the separate statements where it does not bind. Regression test:
``tests/analytics/test_shared_ranking_binds_before_the_charge.py``. Exits 1 while a case fails
after the charge.

    PYTHONPATH=src python tools/reproducers/shared_ranking_temp_table_after_charge.py
"""

from __future__ import annotations

import sys
import warnings

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.duckdb import DuckDBEngine, SharedRanking

PEOPLE = (
    "SELECT (i % 500) AS uid, ['a', 'b', 'c'][1 + i % 3] AS g, (i % 97)::DOUBLE AS x, "
    "i % 4 AS h FROM range(20000) t(i)"
)


def run(case: str) -> tuple[str, float]:
    """What a planned count and mean at epsilon 1 gives (``released`` or the error), and the
    epsilon spent."""
    engine = DuckDBEngine(threads=1)
    con = engine.connection
    if case == "temporary source":
        con.execute(f"CREATE TEMP TABLE people AS {PEOPLE}")
        s = dpa.Session(
            con, table="people", privacy_unit="uid", engine=engine, budget=Budget(epsilon=10.0)
        )
        q = s.query()
    else:
        con.execute(f"CREATE TABLE people AS {PEOPLE}")
        con.execute(
            "CREATE TEMP TABLE regions AS SELECT * FROM (VALUES (0, 'N'), (1, 'S'), "
            "(2, 'N'), (3, 'S')) t(h, region)"
        )
        s = dpa.Session(
            con, table="people", privacy_unit="uid", engine=engine, budget=Budget(epsilon=10.0)
        )
        q = s.query().join_public("regions", on="h", columns=["region"])
    q = q.group_by("g", keys=["a", "b", "c"]).agg(n=dpa.count(), m=dpa.mean("x", bounds="auto"))
    try:
        q.run(epsilon=1.0)
        got = "released"
    except Exception as exc:
        got = f"{type(exc).__name__} after the charge"
    return got, float(s.spent[0])


def main() -> int:
    warnings.simplefilter("ignore")
    failed = False
    for case in ("temporary source", "temporary public join"):
        bind = SharedRanking.bind
        SharedRanking.bind = lambda self: None  # type: ignore[method-assign]  # before the fix
        try:
            before = run(case)
        finally:
            SharedRanking.bind = bind  # type: ignore[method-assign]
        after = run(case)
        print(
            f"{case}: before {before[0]} (epsilon {before[1]:g} spent); "
            f"after {after[0]} (epsilon {after[1]:g} spent)"
        )
        failed |= after[0] != "released"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
