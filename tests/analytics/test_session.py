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
    return pd.DataFrame({
        "uid": rng.integers(0, 200, n),
        "region": rng.choice(["a", "b"], n),
        "x": rng.uniform(0, 10, n),
    })


def _exact(session: Any) -> EngineResult:
    # Bounds large enough to keep every row: CSV columns are read as text (types never depend
    # on the data), so their hashes, hence a binding bound's choices, differ from typed sources.
    q = (session.query().group_by("region", keys=["a", "b", "c"])
         .bound(max_partitions=2, max_rows_per_partition=50)
         .agg(n=dpa.count(), m=dpa.mean("x", bounds=(0, 10))))
    prepared = q.prepare(epsilon=1.0)
    # the same salt for every source, so the bounding picks the same rows
    plan = prepared.plan
    fixed = type(plan)(source=plan.source, filters=plan.filters,
                       bound=type(plan.bound)(privacy_unit="uid", max_partitions=2,
                                              max_rows_per_partition=50, salt=12345),
                       aggregate=plan.aggregate)
    res: EngineResult = session.engine.execute(fixed)
    return res


def _canon(res: EngineResult) -> dict[Any, Any]:
    return {k: tuple(res.values[n][i] for n in sorted(res.values))
            for i, k in enumerate(res.keys)}


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
        dpa.Session(str(files["parquet"]), table="t", privacy_unit=None,
                    budget=Budget(epsilon=1.0))
    with pytest.raises(FileNotFoundError):
        dpa.Session(str(files["dir"] / "nothing*.parquet"), privacy_unit=None,
                    budget=Budget(epsilon=1.0))


def test_end_to_end_pre_noise_matches_pandas(files: dict[str, Path]) -> None:
    # With max_rows_per_partition at least the largest number of rows per unit and group,
    # bounding keeps everything: the engine's exact integers equal a plain pandas computation.
    df = _frame()
    s = dpa.Session(str(files["parquet"]), privacy_unit="uid", budget=Budget(epsilon=1.0))
    q = (s.query().group_by("region", keys=["a", "b"])
         .bound(max_partitions=2, max_rows_per_partition=50)
         .agg(n=dpa.count(), u=dpa.count_distinct()))
    res = s.engine.execute(q.prepare(epsilon=1.0).plan)
    got = {k[0]: (res.values["n:n"][i], res.values["u:n"][i]) for i, k in enumerate(res.keys)}
    for g, sub in df.groupby("region"):
        assert got[g] == (len(sub), sub["uid"].nunique())


def test_run_on_duckdb_charges_and_releases(files: dict[str, Path]) -> None:
    budget = Budget(epsilon=2.0, delta=1e-6)
    s = dpa.Session(str(files["parquet"]), privacy_unit="uid", budget=budget)
    out = (s.query().where("x >= 1").group_by("region")
           .bound(max_partitions=50, max_rows_per_partition=3)
           .agg(n=dpa.count(), sd=dpa.std("x", bounds=(0, 10)))
           .run(epsilon=2.0, delta=1e-6))
    assert set(out["region"]) <= {"a", "b"}
    eps_spent, delta_spent = budget.spent
    assert 2.0 - 1e-9 <= eps_spent <= 2.0 and delta_spent == 1e-6
    # 50 partitions per unit: the Gaussian's L2 = sqrt(50) L1 / 50 wins
    assert out.attrs["dpkit"]["columns"]["n"]["mechanism"] == "discrete Gaussian"


def test_audit_hook_reuses_one_engine_result_per_table() -> None:
    # The auditor's loop: one plan (one salt), the exact aggregates of two neighbouring tables
    # computed once each, then many cheap re-noised releases of each.
    df = _frame()
    extra = pd.DataFrame({"uid": [10_000] * 30, "region": ["a", "b", "c"] * 10,
                          "x": [1e308, -np.inf, np.nan] * 10})
    s = dpa.Session(df, privacy_unit="uid", budget=Budget(epsilon=1.0))
    q = (s.query().group_by("region", keys=["a", "b", "c"])
         .bound(max_partitions=2, max_rows_per_partition=3)
         .agg(n=dpa.count(), m=dpa.mean("x", bounds=(0, 10))))
    prepared = q.prepare(epsilon=1.0)
    s2 = dpa.Session(pd.concat([df, extra]), privacy_unit="uid", budget=Budget(epsilon=1.0))
    r1 = prepared.exact(s.engine)
    r2 = prepared.exact(s2.engine, source=s2._source)
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
    q = (s.query().where("no_such_column > 1").bound(max_partitions=1,
                                                      max_rows_per_partition=1)
         .agg(n=dpa.count()))
    with pytest.raises(DPKitError):
        q.run(epsilon=0.5)
    assert budget.spent == (0.0, 0.0)


def test_run_compiles_the_plan_once(files: dict[str, Path],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``run`` checks the statement (EXPLAIN) and then executes that same compiled statement."""
    from dpkit.analytics.engines import _compiler
    from dpkit.analytics.engines import duckdb as engine_mod

    calls: list[int] = []
    real = _compiler.compile_plan

    def counting(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(engine_mod, "compile_plan", counting)
    s = dpa.Session(str(files["parquet"]), privacy_unit="uid", budget=Budget(epsilon=2.0))
    q = (s.query().group_by("region", keys=["a", "b"])
         .bound(max_partitions=1, max_rows_per_partition=2)
         .agg(n=dpa.count(), m=dpa.mean("x", bounds=(0, 10))))
    out = q.run(epsilon=1.0)
    assert len(out) == 2
    assert len(calls) == 1
    # a second run of the same query compiles its own (fresh-salt) plan once more
    q.run(epsilon=1.0)
    assert len(calls) == 2


def test_sum_and_mean_of_one_column_share_measures_end_to_end(files: dict[str, Path]) -> None:
    budget = Budget(epsilon=2e5)
    s = dpa.Session(str(files["parquet"]), privacy_unit=None, budget=budget)
    q = (s.query().group_by("region", keys=["a", "b"])
         .agg(n=dpa.count(), s=dpa.sum("x", bounds=(0, 10)), m=dpa.mean("x", bounds=(0, 10))))
    assert len(q.prepare(epsilon=1e5).plan.aggregate.measures) == 3  # rows, values, T
    out = q.run(epsilon=1e5).set_index("region")
    df = _frame()
    for g, sub in df.groupby("region"):
        assert abs(out.loc[g, "s"] - sub["x"].sum()) < 0.5
        assert abs(out.loc[g, "m"] - sub["x"].mean()) < 0.01
    assert "post-processing of m" in out.attrs["dpkit"]["columns"]["s"]["mechanism"]
