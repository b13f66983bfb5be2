"""A planned query on DuckDB ranks its rows once for its contribution step, its value
histogram and its release (:class:`~dpkit.analytics.engines.duckdb.SharedRanking`): a
temporary table of the release's ranked rows replaces the contribution plan's statement, the
value histogram's ranking and the release's ranking.

The promises. The contribution histograms and the release do not change: on a seeded session
(the same salts and noise) with the value histogram from its own statement the frame is the
one the separate statements give, bit for bit, and the contribution histograms read from the
table are the contribution plan's exact counts (NULL units and keys, filters, several group
columns, no group column). The value histogram reads another sample of the same size: each
unit's first ``R`` rows in the release's order, equal to an independent pure-Python
computation of that order (the md5 profile, :mod:`_engine_reference`); on two neighbouring
tables (one unit added, with rows in every group) its exact counts move by at most ``R``, the
sensitivity it is priced at (the companion reads ``R + 1`` rows and is caught). Exact tests:
no statistics, no wall-clock time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _proof import seeded_session

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines import duckdb as duck
from dpkit.analytics.engines.duckdb import DuckDBEngine


def _table(seed: int, nulls: bool = True) -> pd.DataFrame:
    """Units of 1 to 9 rows spread over up to 4 of 6 groups; some NULL units and groups."""
    rng = np.random.default_rng(seed)  # test data only
    uid, g, h, x = [], [], [], []
    for u in range(1500):
        groups = rng.choice(6, size=int(rng.integers(1, 5)), replace=False)
        for _ in range(int(rng.integers(1, 10))):
            uid.append(f"u{u}")
            g.append(f"g{int(rng.choice(groups))}")
            h.append(int(rng.integers(0, 2)))
            x.append(float(rng.normal(40.0, 25.0)))
    d = pd.DataFrame({"uid": uid, "g": g, "h": h, "x": x})
    if nulls:
        d.loc[::17, "uid"] = None
        d.loc[::13, "g"] = None
        d.loc[::11, "x"] = math.nan
    return d


def _session(
    d: pd.DataFrame, shared: bool, delta: float = 0.0, own_values: bool = False
) -> tuple[Any, list[str]]:
    """A seeded session over ``d`` (a pure budget, or one with ``delta``: Gaussian noise);
    ``shared`` False turns the shared ranking off; ``own_values`` keeps it but runs the value
    histogram as its own statement (as without it). The SQL the shared ranking runs is listed
    in the second item."""
    engine = DuckDBEngine(threads=1)
    ran: list[str] = []
    if shared:
        inner = engine.share_ranking

        def spy(release: Any, contributions: Any) -> Any:
            got = inner(release, contributions)
            if got is not None:
                run = got.statement

                def statement(sql: str) -> list[Any]:
                    ran.append(sql)
                    return run(sql)

                got.statement = statement  # type: ignore[method-assign]
                if own_values:
                    got.values = engine.execute  # type: ignore[method-assign]
            return got

        engine.share_ranking = spy  # type: ignore[method-assign]
    else:
        engine.share_ranking = lambda release, contributions: None  # type: ignore[method-assign]
    return seeded_session(d, engine, Budget(epsilon=100.0, delta=delta)), ran


def _queries(s: Any) -> dict[str, Any]:
    """Planned queries (no ``.bound(...)``); those selecting their groups privately are run
    in sessions with delta only."""
    keys = [f"g{i}" for i in range(6)]
    return {
        "auto bounds, public keys": s.query()
        .group_by("g", keys=keys)
        .agg(n=dpa.count(), t=dpa.sum("x", bounds="auto"), m=dpa.mean("x", bounds="auto")),
        "fixed bounds, partition selection": s.query()
        .group_by("g")
        .agg(n=dpa.count(), t=dpa.sum("x", bounds=(0.0, 100.0))),
        "two group columns, a filter": s.query()
        .where("x > 0")
        .group_by("g", "h", keys=[(g, h) for g in keys for h in (0, 1)])
        .agg(n=dpa.count(), m=dpa.mean("x", bounds=(0.0, 100.0))),
        "no group column": s.query().agg(n=dpa.count(), t=dpa.sum("x", bounds="auto")),
        "a bucket and a derived column": s.query()
        .bucket("band", [("x < 20", "low"), ("x < 60", "mid")], default="high")
        .derive("y", "x * 2 + h", bounds=(-50.0, 250.0))
        .group_by("band", keys=["low", "mid", "high"])
        .agg(n=dpa.count(), t=dpa.sum("y", bounds="auto"), m=dpa.mean("y", bounds="auto")),
    }


_SHAPES = [
    "auto bounds, public keys",
    "fixed bounds, partition selection",
    "two group columns, a filter",
    "no group column",
    "a bucket and a derived column",
]


# private partition selection needs delta: that shape runs only with it
@pytest.mark.parametrize(
    ("name", "nulls", "delta"),
    [
        (name, nulls, delta)
        for name in _SHAPES
        for nulls, delta in [(True, 0.0), (False, 0.0), (True, 1e-6)]
        if delta or "selection" not in name
    ],
)
def test_planned_release_is_the_one_separate_statements_give(
    name: str, nulls: bool, delta: float
) -> None:
    """The same seeded session releases the same frame (values, intervals, plan notes) with
    and without the shared ranking when the value histogram (which reads another sample from
    the table, see below) runs its own statement, and the shared one did read the ranked
    table."""
    d = _table(3, nulls)
    frames = []
    for shared in (True, False):
        s, ran = _session(d, shared, delta, own_values=True)
        frames.append(_queries(s)[name].run(epsilon=20.0, delta=delta / 2 if delta else None))
        if shared:
            assert ran and ran[0].startswith("CREATE TEMPORARY TABLE")
            assert any(q.startswith("WITH __dpk_ranked AS (SELECT * FROM") for q in ran)
    a, b = frames
    assert len(a) > 0
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs["dpkit"].get("plan") == b.attrs["dpkit"].get("plan")


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("group_by", [("g",), ("g", "h"), ()])
def test_contribution_histograms_from_the_ranking_are_the_plans_exact_counts(
    seed: int, group_by: tuple[str, ...]
) -> None:
    """Exact: the per-unit histograms read from the ranked table equal the contribution
    plan's statement's, for any release salt."""
    d = _table(seed)
    engine = DuckDBEngine(threads=1)
    s = seeded_session(d, engine, Budget(epsilon=100.0, delta=1e-6), seed=seed)
    q = s.query().where("h = 0 OR x > 30")
    q = q.group_by(*group_by) if group_by else q
    prepared = q.agg(n=dpa.count(), t=dpa.sum("x", bounds=(0.0, 50.0))).prepare(
        epsilon=1.0, delta=1e-7, two_step=True
    )
    assert prepared.contribution_plan is not None
    exact = engine.execute(prepared.contribution_plan)
    for salt in (0, 12345, 2**63 + 7):
        shared = engine.share_ranking(
            prepared.with_release_salt(salt).plan, prepared.contribution_plan
        )
        assert shared is not None
        try:
            assert shared.contributions() == exact
        finally:
            shared.close()


def test_the_ranked_table_is_dropped_after_the_query() -> None:
    """No temporary table of a shared ranking outlives its query: the table lives on the
    ranking's own cursor (a DuckDB temporary table is seen by its own connection only, so
    another cursor cannot tell), it is there until the query ends, then dropped and the
    cursor closed. Run twice: the second query's budget is refused, after the ranking was
    made."""
    s, ran = _session(_table(4), shared=True)
    engine = s._engine
    inner = engine.share_ranking
    seen: list[tuple[int, object]] = []

    def spy(release: Any, contributions: Any) -> Any:
        got = inner(release, contributions)
        close = got.close

        def checked_close() -> None:
            # the table on the ranking's own cursor, just before the query's end
            before = got._cursor.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '__dpk_ranked_%'"
            ).fetchall()[0][0]
            close()
            seen.append((int(before), got._cursor))

        got.close = checked_close
        return got

    engine.share_ranking = spy  # type: ignore[method-assign]
    query = _queries(s)["auto bounds, public keys"]
    query.run(epsilon=20.0)
    assert ran
    with pytest.raises(Exception, match="budget"):
        query.run(epsilon=90.0)
    assert seen == [(1, None), (0, None)]


def test_a_connection_passed_in_ranks_in_separate_statements() -> None:
    """The shared ranking is only for the engine's own connection (a temporary table on a
    caller's connection would be the caller's to see)."""
    import duckdb

    engine = DuckDBEngine(connection=duckdb.connect())
    s = seeded_session(_table(5), engine, Budget(epsilon=100.0))
    keys = [f"g{i}" for i in range(6)]
    prepared = (
        s.query().group_by("g", keys=keys).agg(n=dpa.count()).prepare(epsilon=1.0, two_step=True)
    )
    assert prepared.contribution_plan is not None
    assert engine.share_ranking(prepared.plan, prepared.contribution_plan) is None
    assert isinstance(duck.SharedRanking, type)


def test_companion_a_table_ranked_at_another_salt_changes_the_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Companion: the equality above has teeth. A table ranked at another salt than the
    release's, read without the check that the release ranks the same rows, keeps other rows,
    and the frame differs from the separate statements' (the check refuses that table: with
    it, the release runs its own statement)."""
    import dataclasses

    def at_other_salt(self: Any, release: Any, contributions: Any) -> Any:
        bound = dataclasses.replace(release.bound, salt=release.bound.salt + 1)
        return real(self, dataclasses.replace(release, bound=bound), contributions)

    def unchecked(self: Any, plan: Any) -> Any:
        compiled = self._engine.compile(plan)
        rest = compiled.sql[compiled.sql.index(duck._S0) :]
        table = f'"{self._table}"'
        return duck.decode(
            compiled, self.statement(f"WITH __dpk_ranked AS (SELECT * FROM {table}){rest}")
        )

    # a tenth of the units hold 40 rows each over every group: the planned bounds cut them,
    # so which of their rows are kept depends on the salt
    rng = np.random.default_rng(6)  # test data only
    heavy = [
        (f"h{u}", f"g{int(rng.integers(6))}", 0, float(rng.normal(60.0, 30.0)))
        for u in range(150)
        for _ in range(40)
    ]
    light = [
        (f"u{u}", f"g{int(rng.integers(6))}", 0, float(rng.normal(30.0, 10.0))) for u in range(1350)
    ]
    d = pd.DataFrame(heavy + light, columns=["uid", "g", "h", "x"])
    s, _ = _session(d, shared=False)
    separate = _queries(s)["auto bounds, public keys"].run(epsilon=20.0)
    real = DuckDBEngine.share_ranking
    monkeypatch.setattr(DuckDBEngine, "share_ranking", at_other_salt)
    checked = _queries(seeded_session(d, DuckDBEngine(threads=1), Budget(epsilon=100.0)))[
        "auto bounds, public keys"
    ].run(epsilon=20.0)
    pd.testing.assert_frame_equal(checked, separate)
    monkeypatch.setattr(duck.SharedRanking, "release", unchecked)
    broken = _queries(seeded_session(d, DuckDBEngine(threads=1), Budget(epsilon=100.0)))[
        "auto bounds, public keys"
    ].run(epsilon=20.0)
    assert not broken.equals(separate)


def _md5_order(salt: int, parts: list[Any]) -> str:
    """The md5 profile's salted hash of ``parts`` (its canonical text, as the engine builds
    it), recomputed in Python."""
    import hashlib

    from dpkit.analytics.engines._compiler import canonical_token

    text = str(salt % 2**64) + "".join("|" + canonical_token(p) for p in parts)
    return hashlib.md5(text.encode()).hexdigest()


def _first_rows(d: pd.DataFrame, release: Any, r: int) -> list[dict[str, Any]]:
    """Each unit's first ``r`` rows in the release's order, in pure Python: its groups by
    ``H(salt, u, k)``, then each group's rows by ``H(salt, u, k, values)`` (the md5 profile;
    NULL units are one unit)."""
    from collections import defaultdict

    salt, keys = release.bound.salt, release.aggregate.group_by
    cols: list[str] = []
    for m in release.aggregate.measures:
        if m.kind not in ("rows", "units") and m.column not in cols:
            cols.append(m.column)

    def norm(v: Any) -> Any:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else v

    by_unit: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in d.to_dict("records"):
        row = {c: norm(v) for c, v in row.items()}
        by_unit[row["uid"]].append(row)
    out: list[dict[str, Any]] = []
    for u, rows in by_unit.items():
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            groups[tuple(row[k] for k in keys)].append(row)
        ordered: list[dict[str, Any]] = []
        for k in sorted(groups, key=lambda k, u=u: _md5_order(salt, [u, *k])):
            ordered += sorted(
                groups[k], key=lambda row, u=u, k=k: _md5_order(salt, [u, *k, *map(row.get, cols)])
            )
        out += ordered[:r]
    return out


def _bins(rows: list[dict[str, Any]], measure: Any) -> list[int]:
    """``measure``'s bin counts (a ``bin_counts`` measure) over ``rows``."""
    from _engine_reference import bin_of

    e = measure.edges
    counts = [0] * (len(e) - 1)
    for row in rows:
        x = row[measure.column]
        if x is not None:
            counts[bin_of(min(max(float(x), e[0]), e[-1]), e)] += 1
    return counts


def _value_histogram(
    d: pd.DataFrame, engine: DuckDBEngine, q: Any, salt: int, r: int
) -> tuple[Any, Any, Any, list[str]]:
    """The value histogram of ``q(session)`` at ``r`` rows per unit read from a ranking of
    ``d`` at the release salt ``salt``: (the engine result, the bounds plan, the release plan
    the table was ranked for, the statements the shared ranking ran)."""
    s = seeded_session(d, engine, Budget(epsilon=100.0, delta=1e-6))
    prepared = q(s).prepare(epsilon=1.0, delta=1e-7, two_step=True)
    assert prepared.contribution_plan is not None
    release = prepared.with_release_salt(salt).plan
    at_r, _ = prepared.prepare_release({"max_partitions": 2, "max_rows_per_partition": r})
    assert at_r.bounds_plan is not None
    shared = engine.share_ranking(release, prepared.contribution_plan)
    assert shared is not None
    ran: list[str] = []
    run = shared.statement

    def statement(sql: str) -> list[Any]:
        ran.append(sql)
        return run(sql)

    shared.statement = statement  # type: ignore[method-assign]
    try:
        shared.contributions()
        got = shared.values(at_r.bounds_plan)
    finally:
        shared.close()
    return got, at_r.bounds_plan, release, ran


def _auto_query(s: Any) -> Any:
    return (
        s.query()
        .where("h = 0 OR x > 30")
        .group_by("g")
        .agg(n=dpa.count(), t=dpa.sum("x", bounds="auto"), m=dpa.mean("x", bounds="auto"))
    )


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("r", [1, 2, 5])
def test_value_histogram_counts_each_units_first_rows_in_the_release_order(
    seed: int, r: int
) -> None:
    """Exact: the value histogram read from the table counts each unit's first ``r`` rows in
    the release's order (group rank, then row rank in the group), recomputed without SQL
    from the md5 profile's hashes; and it did read the table, not a statement of its own."""
    d = _table(seed)
    salt = 987654321 + seed
    got, bounds_plan, release, ran = _value_histogram(
        d, DuckDBEngine(threads=1, hash="md5"), _auto_query, salt, r
    )
    assert any("REPLACE (1 AS" in q for q in ran)
    kept = _first_rows(d[(d["h"] == 0) | (d["x"] > 30)], release, r)  # NaN > 30 is false
    assert len(bounds_plan.aggregate.measures) == 1  # the sum's and the mean's, computed once
    for m in bounds_plan.aggregate.measures:
        assert [int(v) for v in got.values[m.name][0]] == _bins(kept, m)


def _moved(read: int, claim: int) -> tuple[list[int], int]:
    """The value histogram's exact counts on the neighbour (the base table plus one unit with
    50 rows in each of 7 groups, each of its values in a bin of its own) minus those on the
    base table, both read at ``read`` rows per unit from rankings at one release salt, and
    the rows per unit the histogram is priced at (``claim``)."""
    from _proof import neighbours

    d, d_prime = neighbours(values=tuple(2.0**j for j in range(-8, 42)))

    def q(s: Any) -> Any:
        return s.query().group_by("g").agg(t=dpa.sum("x", bounds="auto"))

    counts = []
    for table in (d, d_prime):
        got, bounds_plan, _, ran = _value_histogram(table, DuckDBEngine(threads=1), q, 4242, read)
        assert any("REPLACE (1 AS" in sql for sql in ran)
        (m,) = bounds_plan.aggregate.measures
        counts.append([int(v) for v in got.values[m.name][0]])
    return [b - a for a, b in zip(*counts, strict=True)], claim


@pytest.mark.parametrize("r", [1, 3, 7])
def test_one_unit_added_moves_the_value_histogram_by_at_most_r(r: int) -> None:
    """Sensitivity: the unit added changes at most ``R`` of the histogram's inputs and no
    other unit's (every bin moves up, by at most ``R`` in all); it does move by exactly ``R``
    here (the unit has more than ``R`` rows, in distinct bins), so the bound is tight."""
    diff, claim = _moved(read=r, claim=r)
    assert min(diff) >= 0
    assert sum(diff) <= claim
    assert sum(diff) == r


def test_companion_reading_r_plus_one_rows_is_caught() -> None:
    """Companion: a histogram reading ``R + 1`` rows per unit while priced at ``R`` moves by
    ``R + 1`` on the same neighbours, and the check above catches it."""
    diff, claim = _moved(read=4, claim=3)
    assert sum(diff) > claim
