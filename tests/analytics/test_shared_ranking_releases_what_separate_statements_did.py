"""A planned query on DuckDB ranks its rows once for its contribution step and its release
(:class:`~dpkit.analytics.engines.duckdb.SharedRanking`): a temporary table of the release's
ranked rows replaces the contribution plan's statement and the release's ranking. The promise:
nothing released changes. On a seeded session (the same salts and noise) the frame is the one
the separate statements give, bit for bit, and the contribution histograms read from the
table are the contribution plan's exact counts (NULL units and keys, filters, several group
columns, no group column). Exact tests: no statistics, no wall-clock time.
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


def _session(d: pd.DataFrame, shared: bool, delta: float = 0.0) -> tuple[Any, list[str]]:
    """A seeded session over ``d`` (a pure budget, or one with ``delta``: Gaussian noise);
    ``shared`` False turns the shared ranking off. The SQL the shared ranking runs is listed
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


@pytest.mark.parametrize(
    "name",
    [
        "auto bounds, public keys",
        "fixed bounds, partition selection",
        "two group columns, a filter",
        "no group column",
        "a bucket and a derived column",
    ],
)
@pytest.mark.parametrize(("nulls", "delta"), [(True, 0.0), (False, 0.0), (True, 1e-6)])
def test_planned_release_is_the_one_separate_statements_give(
    name: str, nulls: bool, delta: float
) -> None:
    """The same seeded session releases the same frame (values, intervals, plan notes) with
    and without the shared ranking, and the shared one did read the ranked table."""
    if "selection" in name and not delta:
        pytest.skip("private partition selection needs delta")
    d = _table(3, nulls)
    frames = []
    for shared in (True, False):
        s, ran = _session(d, shared, delta)
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
    """No temporary table of a shared ranking outlives its query."""
    s, ran = _session(_table(4), shared=True)
    _queries(s)["auto bounds, public keys"].run(epsilon=20.0)
    assert ran
    engine = s._engine
    left = engine.connection.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '__dpk_ranked_%'"
    ).fetchall()
    assert left == [(0,)]


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
