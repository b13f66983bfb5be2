"""A planned DuckDB query's shared ranking is bound before the charge, so a table it cannot
read sends the query to its separate statements instead of failing after the charge.

Finding (red team, shared ranking). The ranked rows are written into a temporary table on a
cursor of the ranking's own, after the charge. DuckDB's temporary tables and views belong to the
cursor that made them, so a private source or a public join table made with ``CREATE TEMP
TABLE`` on the engine's ``connection`` (where every check before the charge ran) was invisible
there: ``Catalog Error`` after the charge, epsilon 1 spent and nothing released, on every run,
where the separate statements answered. After the fix the table's statement is bound
(``EXPLAIN``, no row read) on that cursor before the charge and the query falls back: released,
epsilon 1 spent. Reproducer: ``tools/reproducers/shared_ranking_temp_table_after_charge.py``.
A second finding of the same kind: ``USE s2`` on the engine's ``connection`` is that cursor's
alone, so the ranking's cursor read ``main.people`` where every check had read ``s2.people``:
the steps read another table than the session's (n(b) released as 0 and 95 in two runs,
where ``s2.people`` has about 2,000 rows in b). Tables of the connection's catalog (not
registered frames, not files) are now read by the separate statements, on the thread's
cursor, as before the shared ranking. Exact tests, no statistics (the one count compared
with 1,000 is about 2,000, its noise tens of rows: 1,962 to 2,018 in the reproducer).
"""

from __future__ import annotations

import warnings

import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.duckdb import DuckDBEngine

PEOPLE = (
    "SELECT (i % 300) AS uid, ['a', 'b', 'c'][1 + i % 3] AS g, (i % 97)::DOUBLE AS x, "
    "i % 4 AS h FROM range(6000) t(i)"
)
REGIONS = "SELECT * FROM (VALUES (0, 'N'), (1, 'S'), (2, 'N'), (3, 'S')) t(h, region)"


def _query(temporary: str) -> tuple[dpa.Session, dpa.Query, DuckDBEngine]:
    """A planned count and mean over ``people`` of the engine's own connection; the table
    named by ``temporary`` (``people`` or the public ``regions``) is a temporary one."""
    engine = DuckDBEngine(threads=1)
    con = engine.connection
    con.execute(f"CREATE {'TEMP ' if temporary == 'people' else ''}TABLE people AS {PEOPLE}")
    con.execute(f"CREATE {'TEMP ' if temporary == 'regions' else ''}TABLE regions AS {REGIONS}")
    s = dpa.Session(
        con, table="people", privacy_unit="uid", engine=engine, budget=Budget(epsilon=10.0)
    )
    q = s.query().join_public("regions", on="h", columns=["region"])
    q = q.group_by("g", keys=["a", "b", "c"]).agg(n=dpa.count(), m=dpa.mean("x", bounds="auto"))
    return s, q, engine


@pytest.mark.parametrize("temporary", ["people", "regions"])
def test_a_temporary_table_of_the_engines_connection_is_released_not_failed_after_the_charge(
    temporary: str,
) -> None:
    """The run releases every group and spends its epsilon once; the ranking was refused
    before the charge (the separate statements ran)."""
    s, q, engine = _query(temporary)
    shared: list[object] = []
    inner = engine.share_ranking

    def spy(release: object, contributions: object) -> object:
        got = inner(release, contributions)  # type: ignore[arg-type]
        shared.append(got)
        return got

    engine.share_ranking = spy  # type: ignore[method-assign, assignment]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = q.run(epsilon=1.0)
    assert list(frame["g"]) == ["a", "b", "c"]
    assert s.spent[0] == pytest.approx(1.0)
    assert shared == [None]


def test_a_schema_chosen_with_use_on_the_engines_connection_is_the_one_read() -> None:
    """``USE s2`` on the engine's ``connection`` makes ``people`` the table ``s2.people`` on
    that cursor only: the query reads that table (whose groups b and c hold about 2,000
    rows each), not ``main.people`` (group a only), as the separate statements did."""
    engine = DuckDBEngine(threads=1)
    con = engine.connection
    con.execute(
        "CREATE TABLE main.people AS "
        "SELECT 1::BIGINT AS uid, 'a' AS g, 1.0::DOUBLE AS x, 0::BIGINT AS h"
    )
    con.execute(f"CREATE TABLE main.regions AS {REGIONS}")
    con.execute("CREATE SCHEMA s2")
    con.execute(f"CREATE TABLE s2.people AS {PEOPLE}")
    con.execute("USE s2")
    s = dpa.Session(
        con, table="people", privacy_unit="uid", engine=engine, budget=Budget(epsilon=10.0)
    )
    q = s.query().group_by("g", keys=["a", "b", "c"]).agg(n=dpa.count())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = q.run(epsilon=5.0)
    assert (frame.set_index("g")["n"][["b", "c"]] > 1000).all()


def test_registered_frames_still_share_the_ranking() -> None:
    """Companion: a frame source with a public frame joined is ranked once."""
    engine = DuckDBEngine(threads=1)
    people = engine.connection.execute(PEOPLE).df()
    regions = engine.connection.execute(REGIONS).df()
    s = dpa.Session(people, privacy_unit="uid", engine=engine, budget=Budget(epsilon=10.0))
    q = s.query().join_public(regions, on="h", columns=["region"])
    prepared = (
        q.group_by("g", keys=["a", "b", "c"])
        .agg(n=dpa.count(), m=dpa.mean("x", bounds="auto"))
        .prepare(epsilon=1.0, two_step=True)
    )
    assert prepared.contribution_plan is not None
    got = engine.share_ranking(prepared.with_release_salt(5).plan, prepared.contribution_plan)
    assert got is not None
    got.close()
