"""Sessions on the DuckDB engine: every kind of source gives the same pre-noise aggregates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import EngineResult
from dpkit.errors import DPKitError, PrivacyParameterError
from dpkit.noise import RandomSource


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(9)
    n = 500
    return pd.DataFrame(
        {
            "uid": rng.integers(0, 200, n),
            "region": rng.choice(["a", "b"], n),
            "x": rng.uniform(0, 10, n),
        }
    )


def _exact(session: Any) -> EngineResult:
    # Bounds large enough to keep every row: CSV columns are read as text (types never depend
    # on the data), so their hashes, hence a binding bound's choices, differ from typed sources.
    q = (
        session.query()
        .group_by("region", keys=["a", "b", "c"])
        .bound(max_partitions=2, max_rows_per_partition=50)
        .agg(n=dpa.count(), m=dpa.mean("x", bounds=(0, 10)))
    )
    prepared = q.prepare(epsilon=1.0)
    # the same salt for every source, so the bounding picks the same rows
    plan = prepared.plan
    fixed = type(plan)(
        source=plan.source,
        filters=plan.filters,
        bound=type(plan.bound)(
            privacy_unit="uid", max_partitions=2, max_rows_per_partition=50, salt=12345
        ),
        aggregate=plan.aggregate,
    )
    res: EngineResult = session.engine.execute(fixed)
    return res


def _canon(res: EngineResult) -> dict[Any, Any]:
    return {k: tuple(res.values[n][i] for n in sorted(res.values)) for i, k in enumerate(res.keys)}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("src")
    df = _frame()
    df.iloc[:250].to_parquet(d / "part1.parquet")
    df.iloc[250:].to_parquet(d / "part2.parquet")
    df.to_parquet(d / "all.parquet")
    df.to_csv(d / "all.csv", index=False)
    return {"dir": d, "parquet": d / "all.parquet", "csv": d / "all.csv"}


def test_every_source_kind_gives_the_same_aggregates(files: dict[str, Path]) -> None:
    df = _frame()
    con = duckdb.connect()
    con.register("people_view", df)
    con.execute("CREATE TABLE people AS SELECT * FROM people_view")
    sources: list[tuple[Any, dict[str, Any]]] = [
        (df, {}),
        (pl.from_pandas(df), {}),
        (pl.from_pandas(df).lazy(), {}),
        (pa.Table.from_pandas(df), {}),
        (str(files["parquet"]), {}),
        (str(files["dir"] / "part*.parquet"), {}),
        (str(files["csv"]), {}),
        (con, {"table": "people"}),
    ]
    results = []
    for src, kw in sources:
        s = dpa.Session(src, privacy_unit="uid", budget=Budget(epsilon=1.0), **kw)
        assert set(s.columns) == {"uid", "region", "x"}
        results.append(_canon(_exact(s)))
    for r in results[1:]:
        assert r.keys() == results[0].keys()
        for k in r:  # counts equal; fixed-point sums equal (CSV may round the last digit)
            assert r[k][0] == results[0][k][0]
            assert abs(r[k][1] - results[0][k][1]) <= 10 * 2**40


def test_connection_needs_table_and_paths_refuse_table(files: dict[str, Path]) -> None:
    con = duckdb.connect()
    with pytest.raises(PrivacyParameterError, match="table"):
        dpa.Session(con, privacy_unit=None, budget=Budget(epsilon=1.0))
    with pytest.raises(PrivacyParameterError, match="table"):
        dpa.Session(str(files["parquet"]), table="t", privacy_unit=None, budget=Budget(epsilon=1.0))
    with pytest.raises(FileNotFoundError):
        dpa.Session(
            str(files["dir"] / "nothing*.parquet"), privacy_unit=None, budget=Budget(epsilon=1.0)
        )


def test_end_to_end_pre_noise_matches_pandas(files: dict[str, Path]) -> None:
    # With max_rows_per_partition at least the largest number of rows per unit and group,
    # bounding keeps everything: the engine's exact integers equal a plain pandas computation.
    df = _frame()
    s = dpa.Session(str(files["parquet"]), privacy_unit="uid", budget=Budget(epsilon=1.0))
    q = (
        s.query()
        .group_by("region", keys=["a", "b"])
        .bound(max_partitions=2, max_rows_per_partition=50)
        .agg(n=dpa.count(), u=dpa.count_distinct())
    )
    res = s.engine.execute(q.prepare(epsilon=1.0).plan)
    got = {k[0]: (res.values["n:n"][i], res.values["u:n"][i]) for i, k in enumerate(res.keys)}
    for g, sub in df.groupby("region"):
        assert got[g] == (len(sub), sub["uid"].nunique())


def test_run_on_duckdb_charges_and_releases(files: dict[str, Path]) -> None:
    budget = Budget(epsilon=2.0, delta=1e-6)
    s = dpa.Session(str(files["parquet"]), privacy_unit="uid", budget=budget)
    out = (
        s.query()
        .where("x >= 1")
        .group_by("region")
        .bound(max_partitions=50, max_rows_per_partition=3)
        .agg(n=dpa.count(), sd=dpa.std("x", bounds=(0, 10)))
        .run(epsilon=2.0, delta=1e-6)
    )
    assert set(out["region"]) <= {"a", "b"}
    eps_spent, delta_spent = budget.spent
    # delta: the Gaussian statistics' half and the threshold's (at most the other half)
    assert 2.0 - 1e-9 <= eps_spent <= 2.0 and 5e-7 * (1 - 1e-9) <= delta_spent <= 1e-6
    # 50 partitions per unit: the Gaussian's L2 = sqrt(50) L1 / 50 wins
    assert out.attrs["dpkit"]["columns"]["n"]["mechanism"] == "discrete Gaussian"


def test_audit_hook_reuses_one_engine_result_per_table() -> None:
    # The auditor's loop: one plan (one salt), the exact aggregates of two neighbouring tables
    # computed once each, then many cheap re-noised releases of each.
    df = _frame()
    extra = pd.DataFrame(
        {"uid": [10_000] * 30, "region": ["a", "b", "c"] * 10, "x": [1e308, -np.inf, np.nan] * 10}
    )
    s = dpa.Session(df, privacy_unit="uid", budget=Budget(epsilon=1.0))
    q = (
        s.query()
        .group_by("region", keys=["a", "b", "c"])
        .bound(max_partitions=2, max_rows_per_partition=3)
        .agg(n=dpa.count(), m=dpa.mean("x", bounds=(0, 10)))
    )
    prepared = q.prepare(epsilon=1.0)
    s2 = dpa.Session(pd.concat([df, extra]), privacy_unit="uid", budget=Budget(epsilon=1.0))
    r1 = prepared.exact(s.engine)
    r2 = prepared.exact(s2.engine, source=s2.table.source)
    n1 = dict(zip([k[0] for k in r1.keys], r1.values["n:n"], strict=True))
    n2 = dict(zip([k[0] for k in r2.keys], r2.values["n:n"], strict=True))
    # the added unit moves at most max_partitions = 2 groups by at most 3 rows each
    diffs = [n2.get(g, 0) - n1.get(g, 0) for g in ("a", "b", "c")]
    assert all(0 <= d <= 3 for d in diffs) and sum(d > 0 for d in diffs) <= 2
    src = RandomSource(seed=1, insecure=True)
    outs = [prepared.release_from(r, source=src) for r in (r1, r2) for _ in range(50)]
    assert all(list(o["region"]) == ["a", "b", "c"] for o in outs)
    assert s.budget.spent == (0.0, 0.0)


def test_engine_failures_are_caught_before_charging(files: dict[str, Path]) -> None:
    budget = Budget(epsilon=1.0)
    s = dpa.Session(str(files["parquet"]), privacy_unit="uid", budget=budget)
    q = (
        s.query()
        .where("no_such_column > 1")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    with pytest.raises(DPKitError):
        q.run(epsilon=0.5)
    assert budget.spent == (0.0, 0.0)


def test_run_compiles_the_plan_once(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run`` checks the statement (EXPLAIN) and then executes that same compiled statement."""
    from dpkit.analytics.engines import _compiler
    from dpkit.analytics.engines import duckdb as engine_mod

    calls: list[int] = []
    real = _compiler.compile_plan

    def counting(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(engine_mod, "compile_plan", counting)
    s = dpa.Session(str(files["parquet"]), privacy_unit="uid", budget=Budget(epsilon=3.0))
    q = (
        s.query()
        .group_by("region", keys=["a", "b"])
        .bound(max_partitions=1, max_rows_per_partition=2)
        .agg(n=dpa.count(), m=dpa.mean("x", bounds=(0, 10)))
    )
    out = q.run(epsilon=1.0)
    assert len(out) == 2
    # the first plan of a shape is compiled once, with its own salt
    assert len(calls) == 1
    # the second (a fresh salt, the same shape) compiles the shape under the engine's two
    # stand-in salts, once; a third compiles nothing
    q.run(epsilon=1.0)
    assert len(calls) == 3
    q.run(epsilon=1.0)
    assert len(calls) == 3


def test_sum_and_mean_of_one_column_share_measures_end_to_end(files: dict[str, Path]) -> None:
    budget = Budget(epsilon=2e5)
    s = dpa.Session(str(files["parquet"]), privacy_unit=None, budget=budget)
    q = (
        s.query()
        .group_by("region", keys=["a", "b"])
        .agg(n=dpa.count(), s=dpa.sum("x", bounds=(0, 10)), m=dpa.mean("x", bounds=(0, 10)))
    )
    assert len(q.prepare(epsilon=1e5).plan.aggregate.measures) == 3  # rows, values, T
    out = q.run(epsilon=1e5).set_index("region")
    df = _frame()
    for g, sub in df.groupby("region"):
        assert abs(out.loc[g, "s"] - sub["x"].sum()) < 0.5
        assert abs(out.loc[g, "m"] - sub["x"].mean()) < 0.01
    assert "post-processing of m" in out.attrs["dpkit"]["columns"]["s"]["mechanism"]


@pytest.mark.parametrize("key_sql", ["[uid % 2]", "CAST(TIMESTAMP '2024-01-01' AS TIMESTAMP_NS)"])
def test_auto_bounds_query_is_refused_unspent_like_fixed_bounds(key_sql: str) -> None:
    """A query whose statistics all have bounds="auto" is validated against the schema before
    the charge, like one with fixed bounds (a LIST or TIMESTAMP_NS key used to cost 1.0)."""
    con = duckdb.connect()
    con.execute(
        f"CREATE TABLE p AS SELECT i AS uid, i / 10.0 AS x, {key_sql} AS k FROM range(100) t(i)"
    )
    for bounds in ((0.0, 10.0), "auto"):
        budget = Budget(epsilon=10.0)
        s = dpa.Session(con, table="p", privacy_unit="uid", budget=budget)
        q = (
            s.query()
            .group_by("k", keys=[1, 2])
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(m=dpa.sum("x", bounds=bounds), v=dpa.mean("x", bounds=bounds))
        )
        with pytest.raises(DPKitError, match=r"group key|nested type"):
            q.run(epsilon=1.0)
        assert budget.spent[0] == 0.0


def _messy(tmp_path: Path) -> dict[str, str]:
    n = 200
    df = pd.DataFrame(
        {
            "uid": np.arange(n),
            "name": [str(i) for i in range(n)],
            "x": np.linspace(0.0, 10.0, n),
            "empty": [None] * n,
            "region": ["a", "b"] * (n // 2),
        }
    )
    df.to_parquet(tmp_path / "p.parquet")
    df.to_csv(tmp_path / "p.csv", index=False)
    return {"parquet": str(tmp_path / "p.parquet"), "csv": str(tmp_path / "p.csv")}


def test_text_column_compared_with_a_number_says_it_is_text_and_how_to_cast(tmp_path: Path) -> None:
    for kind, path in _messy(tmp_path).items():
        budget = Budget(epsilon=5.0)
        s = dpa.Session(path, privacy_unit="uid", budget=budget)
        q = (
            s.query()
            .where("region = 'a' AND name > 5")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
        )
        with pytest.raises(PrivacyParameterError, match=r"column 'name' is text") as info:
            q.run(epsilon=1.0)
        assert budget.spent[0] == 0.0
        assert "TRY_CAST(name AS DOUBLE)" in str(info.value)
        assert "SELECT" not in str(info.value)
        assert ("CSV" in str(info.value)) == (kind == "csv")
        # the cast it suggests runs
        out = (
            s.query()
            .where("TRY_CAST(name AS DOUBLE) > 5")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .run(epsilon=1.0)
        )
        assert len(out) == 1


def test_all_null_column_gets_the_same_answer_from_parquet_and_csv(tmp_path: Path) -> None:
    answers = {}
    for kind, path in _messy(tmp_path).items():
        s = dpa.Session(path, privacy_unit="uid", budget=Budget(epsilon=10.0))
        q = s.query().bound(max_partitions=1, max_rows_per_partition=1)
        prepared = (
            q.group_by("empty", keys=[None])
            .agg(n=dpa.count(), m=dpa.sum("empty", bounds=(0, 1)))
            .prepare(epsilon=1.0)
        )
        res = prepared.exact(s.engine)
        answers[kind] = (res.keys, sorted(res.values.items()))
        out = (
            q.group_by("empty", keys=[None])
            .agg(m=dpa.mean("empty", bounds=(0, 1)))
            .run(epsilon=1.0)
        )
        assert len(out) == 1
    assert answers["parquet"] == answers["csv"]
    assert answers["csv"][0] == ((None,),)


def test_engine_and_plan_errors_come_from_dpkit_errors() -> None:
    from dpkit import errors
    from dpkit.analytics._sql import PredicateError
    from dpkit.analytics.engines import DuckDBEngine  # type: ignore[attr-defined]
    from dpkit.analytics.engines._compiler import PlanError
    from dpkit.analytics.engines.duckdb import EngineError

    assert PlanError is errors.PlanError and EngineError is errors.EngineError
    assert PredicateError is errors.PredicateError
    assert DuckDBEngine is not None
    s = dpa.Session(
        pd.DataFrame({"uid": [1], "t": pd.to_datetime(["2024-01-01"])}),
        privacy_unit="uid",
        budget=Budget(epsilon=1.0),
    )
    with pytest.raises(errors.PlanError):
        (
            s.query()
            .group_by("t", keys=[pd.Timestamp("2024-01-01")])
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .run(epsilon=1.0)
        )


def test_max_and_min_explain_why_they_are_not_offered() -> None:
    import dpkit
    from dpkit.errors import UnsupportedAggregateError

    for module, name in ((dpkit, "max"), (dpa, "max"), (dpkit, "min"), (dpa, "median")):
        with pytest.raises(UnsupportedAggregateError, match="quantile"):
            getattr(module, name)
        assert not hasattr(module, name)
    with pytest.raises(AttributeError, match="no attribute 'maxx'"):
        dpkit.maxx  # noqa: B018


def test_grouping_by_the_privacy_unit_says_what_to_do_instead() -> None:
    s = dpa.Session(_frame(), privacy_unit="uid", budget=Budget(epsilon=1.0))
    with pytest.raises(PrivacyParameterError, match="count_distinct"):
        s.query().group_by("uid")


def test_misspelt_column_suggests_the_closest_name() -> None:
    s = dpa.Session(_frame(), privacy_unit="uid", budget=Budget(epsilon=1.0))
    with pytest.raises(PrivacyParameterError, match=r"did you mean 'region'\?"):
        s.query().group_by("regoin")
    with pytest.raises(PrivacyParameterError, match=r"did you mean 'region'\?"):
        s.query().group_by("REGOIN")
    with pytest.raises(DPKitError, match=r"did you mean 'region'\?"):
        s.sql("SELECT regin, COUNT(*) FROM t GROUP BY regin", epsilon=1.0)
    with pytest.raises(PrivacyParameterError) as info:
        s.query().group_by("zzzz")
    assert "did you mean" not in str(info.value)


def test_zero_groups_released_says_so(tmp_path: Path) -> None:
    """One signup date per person over two years: no date passes partition selection. The
    charge stands, and the result says "0 groups released" (warning, attrs) instead of
    nothing."""
    rng = np.random.default_rng(0)
    n = 1000
    df = pd.DataFrame(
        {
            "uid": np.arange(n),
            "signup_date": (
                pd.Timestamp("2023-01-01") + pd.to_timedelta(rng.integers(0, 730, n), unit="D")
            ).date,
        }
    )
    budget = Budget(epsilon=1.0, delta=1e-6)
    s = dpa.Session(pa.Table.from_pandas(df), privacy_unit="uid", budget=budget)
    q = (
        s.query()
        .group_by("signup_date")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    with pytest.warns(dpa.EmptyReleaseWarning, match="0 groups released"):
        out = q.run(epsilon=0.1, delta=1e-7)
    assert len(out) == 0
    assert out.attrs["dpkit"]["note"].startswith("0 groups released (by signup_date)")
    assert "coarser" in out.attrs["dpkit"]["note"]
    # a release with groups carries no note
    big = pd.DataFrame({"uid": np.arange(n), "k": ["a"] * n})
    s2 = dpa.Session(big, privacy_unit="uid", budget=Budget(epsilon=1.0, delta=1e-6))
    out2 = (
        s2.query()
        .group_by("k")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
        .run(epsilon=1.0, delta=1e-7)
    )
    assert len(out2) == 1 and "note" not in out2.attrs["dpkit"]


def test_polars_object_column_is_one_unit_not_read_as_addresses() -> None:
    """A polars Object column reached DuckDB as the addresses of its Python objects: one
    person's 12 rows of equal dates were 12 privacy units (and 12 groups of one). Read as text
    by the object-column rule, the 12 equal dates are one unit, as the same column typed Date."""
    import datetime

    # twelve distinct objects, all equal to one date
    dates = np.array(
        [datetime.date(2024, 1, 1) + datetime.timedelta(days=0) for _ in range(12)], dtype=object
    )
    frame = pl.DataFrame({"u": pl.Series(dates), "x": np.ones(12)})
    assert frame.schema["u"] == pl.Object
    typed = frame.with_columns(pl.Series("u", dates.tolist()))
    assert typed.schema["u"] == pl.Date
    for f in (frame, typed):
        s = dpa.Session(f, privacy_unit="u", budget=Budget(epsilon=1.0))
        p = (
            s.query()
            .bound(max_partitions=1, max_rows_per_partition=12)
            .agg(n=dpa.count_distinct())
            .prepare(epsilon=1.0)
        )
        assert p.exact(s.engine).values["n:n"] == (1,)


def test_null_group_is_a_missing_value_shown_as_na_not_the_word_none() -> None:
    n = 300
    df = pd.DataFrame({"uid": np.arange(n), "region": ["a", None, "b"] * 100})
    s = dpa.Session(df, privacy_unit="uid", budget=Budget(epsilon=100.0, delta=1e-3))
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1)
    for out in (
        q.group_by("region").agg(n=dpa.count()).run(epsilon=5.0, delta=1e-6),
        q.group_by("region", keys=["a", None]).agg(n=dpa.count()).run(epsilon=5.0, delta=1e-6),
    ):
        assert out["region"].isna().sum() == 1
        assert out["region"].dtype == "string"
        assert "None" not in out.to_string() and "<NA>" in out.to_string()
    # SQL: HAVING and ORDER BY read the NULL key as SQL does, after the charge without error
    out = s.sql(
        "SELECT region, COUNT(*) AS n FROM t GROUP BY region HAVING region <> 'a' ORDER BY region",
        epsilon=5.0,
        delta=1e-6,
    )
    assert out["region"].tolist()[0] == "b" and out["region"].isna().tolist() == [False, True]
    assert "None" not in out.to_string()
