"""DuckDB attack: the shared ranking of a planned query read the engine's connection through a
cursor of its own, where a temporary table, or a schema chosen with ``USE``, is not the same.

A planned DuckDB query (no ``.bound(...)``) ranks its rows once into a temporary table written
on a cursor of its own (:class:`~dpkit.analytics.engines.duckdb.SharedRanking`), after the
charge. Temporary tables and views, and the schema chosen by ``USE``, belong to the cursor
(DuckDB connection) that made them, while every check before the charge ran on the thread's
cursor (the engine's ``connection``):

* a private source or a public join table made with ``CREATE TEMP TABLE`` on ``connection`` is
  not seen there: ``Catalog Error`` after the charge, epsilon 1 spent, nothing released, on
  every run (the separate statements answered);
* after ``USE s2`` the name ``people`` is ``s2.people`` on ``connection`` but ``main.people`` on
  the ranking's cursor: the steps read another table than the session's (n(b) released
  as 0 and 95 in two runs, where ``s2.people`` has about 2,000 rows in b).

D: ``people``, 300 people in groups a, b, c (6,000 rows); with ``USE``, ``main.people`` holds one
row in group a. Fix: a source or join that is a table of the connection's catalog (not a
registered frame, not a file) runs the separate statements, and the ranking's table statement
is bound on its cursor before the charge (``EXPLAIN``, no row read). Regression test:
``tests/analytics/test_shared_ranking_binds_before_the_charge.py``. "before" runs the ranking
as it was shared before the fix. Exits 1 while a case differs from the separate statements.

    PYTHONPATH=src python tools/reproducers/shared_ranking_temp_table_after_charge.py
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines import duckdb as duck
from dpkit.analytics.engines.duckdb import DuckDBEngine

PEOPLE = (
    "SELECT (i % 300) AS uid, ['a', 'b', 'c'][1 + i % 3] AS g, (i % 97)::DOUBLE AS x, "
    "i % 4 AS h FROM range(6000) t(i)"
)
REGIONS = "SELECT * FROM (VALUES (0, 'N'), (1, 'S'), (2, 'N'), (3, 'S')) t(h, region)"


def share_as_before(engine: DuckDBEngine) -> Any:
    """``share_ranking`` as it was: the plans' test only, no catalog test, no binding."""

    def share(release: Any, contributions: Any) -> Any:
        unit = release.bound.privacy_unit
        grid = contributions.aggregate.unit_grid
        same = all(getattr(release, f) == getattr(contributions, f) for f in duck._ROWS)
        if unit is None or not grid or not same:
            return None
        compiled = duck.compile_plan(
            release,
            engine.columns(release.source),
            engine.profile,
            registered=frozenset(engine._registered),
            join_schemas=engine._join_columns(release),
        )
        prefix = duck._ranked_prefix(compiled.sql)
        return None if prefix is None else duck.SharedRanking(engine, prefix, tuple(grid), release)

    return share


def run(case: str, before: bool) -> str:
    """What a planned count and mean at epsilon 5 gives: the counts of b and c, or the error
    (with the epsilon spent)."""
    engine = DuckDBEngine(threads=1)
    if before:
        engine.share_ranking = share_as_before(engine)  # type: ignore[method-assign]
    con = engine.connection
    temp = "TEMP " if case == "temporary source" else ""
    if case == "schema chosen with USE":
        con.execute(
            "CREATE TABLE main.people AS "
            "SELECT 1::BIGINT AS uid, 'a' AS g, 1.0::DOUBLE AS x, 0::BIGINT AS h"
        )
        con.execute(f"CREATE TABLE main.regions AS {REGIONS}")
        con.execute("CREATE SCHEMA s2")
        con.execute(f"CREATE TABLE s2.people AS {PEOPLE}")
        con.execute("USE s2")
    else:
        con.execute(f"CREATE {temp}TABLE people AS {PEOPLE}")
    con.execute(
        f"CREATE {'TEMP ' if case == 'temporary public join' else ''}TABLE regions AS {REGIONS}"
    )
    s = dpa.Session(
        con, table="people", privacy_unit="uid", engine=engine, budget=Budget(epsilon=10.0)
    )
    q = (
        s.query()
        .join_public("regions", on="h", columns=["region"])
        .group_by("g", keys=["a", "b", "c"])
    )
    try:
        f = q.agg(n=dpa.count(), m=dpa.mean("x", bounds="auto")).run(epsilon=5.0)
        n = f.set_index("g")["n"]
        return f"released, n(b) = {n['b']:.0f}, n(c) = {n['c']:.0f}"
    except Exception as exc:
        return f"{type(exc).__name__} after epsilon {s.spent[0]:g} was charged"


def main() -> int:
    warnings.simplefilter("ignore")
    failed = False
    for case in ("temporary source", "temporary public join", "schema chosen with USE"):
        before, after = run(case, True), run(case, False)
        print(f"{case}: before {before}; after {after}")
        failed |= not after.startswith("released") or "n(b) = 0" in after
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
