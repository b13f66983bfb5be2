"""``dpkit.Session`` on Spark: every source kind, every aggregate, every bounding option and
partition selection, with pre-noise aggregates identical to DuckDB's (md5 bounding hash)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from _engine_reference import as_dict

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.spark import SparkEngine
from dpkit.errors import DPKitError, PrivacyParameterError
from dpkit.noise import RandomSource


def _budget() -> Budget:
    return Budget(epsilon=100.0, delta=1e-3)


def _query(session: Any, *, keys: Any = None) -> Any:
    q = session.query().where("age >= 10")
    q = q.group_by("region", keys=keys)
    return q.bound(max_partitions=2, max_rows_per_partition=2).agg(
        n=dpa.count(),
        people=dpa.count_distinct(),
        total=dpa.sum("x", bounds=(-10, 100)),
        avg=dpa.mean("x", bounds=(-10, 100)),
        var=dpa.variance("x", bounds=(-10, 100)),
        sd=dpa.std("x", bounds=(0, 50)),
        q=dpa.quantile("x", [0.25, 0.5], bounds=(0, 100), bins=64),
        h=dpa.histogram("x", edges=[-10, 0, 0.5, 50, 100]),
        ages=dpa.histogram("age", categories=[0, 5, 17, 99]),
    )


def test_spark_sources_pick_the_spark_engine(spark: Any, odd_parquet: Path) -> None:
    df = spark.read.parquet(str(odd_parquet))
    connect = ".connect." in type(df).__module__ + "."
    s1 = dpa.Session(df, privacy_unit="uid", budget=_budget())
    assert isinstance(s1.engine, SparkEngine)
    assert s1.engine.is_connect == connect
    df.createOrReplaceTempView("odd_people")
    s2 = dpa.Session(spark, table="odd_people", privacy_unit="uid", budget=_budget())
    s3 = dpa.Session(spark, table=str(odd_parquet), privacy_unit="uid", budget=_budget())
    want = pq.read_schema(odd_parquet).names
    for s in (s1, s2, s3):
        assert list(s.columns) == want
    with pytest.raises(PrivacyParameterError):
        dpa.Session(spark, privacy_unit="uid", budget=_budget())  # no table=
    with pytest.raises(PrivacyParameterError):
        dpa.Session(df, privacy_unit="uid", budget=_budget(), memory_limit="1GB")
    with pytest.raises(PrivacyParameterError):
        dpa.Session(df, privacy_unit="uid", budget=_budget(), bounding_hash="sha1")


@pytest.mark.parametrize(
    "keys", [None, ["o'hara", None, 'quo"te', "", "nowhere"]], ids=["selection", "public-keys"]
)
def test_every_aggregate_identical_to_duckdb_before_noise(
    spark: Any, odd_parquet: Path, keys: Any
) -> None:
    duck = dpa.Session(str(odd_parquet), privacy_unit="uid", budget=_budget(), bounding_hash="md5")
    on_spark = dpa.Session(
        spark, table=str(odd_parquet), privacy_unit="uid", budget=_budget(), bounding_hash="md5"
    )
    prepared = _query(duck, keys=keys).prepare(epsilon=1.0, delta=1e-6)
    exact_duck, exact_spark = prepared.exact(duck.engine), prepared.exact(on_spark.engine)
    want = as_dict(exact_duck)
    got = as_dict(exact_spark)
    assert got == want
    assert len(want) >= 4
    # the release is post-processing of these integers: the same frame under the same noise
    a = prepared.release_from(exact_duck, source=RandomSource(seed=1, insecure=True))
    b = prepared.release_from(exact_spark, source=RandomSource(seed=1, insecure=True))
    assert a.equals(b)


def test_run_charges_and_releases_on_spark(spark: Any, odd_parquet: Path) -> None:
    budget = _budget()
    s = dpa.Session(spark.read.parquet(str(odd_parquet)), privacy_unit="uid", budget=budget)
    frame = _query(s).run(epsilon=1.0, delta=1e-6)
    info = frame.attrs["dpkit"]
    assert info["partition_selection"] is not None
    assert {"n", "avg", "avg_low", "q_p25", "h[-10,0)", "ages=99"} <= set(frame.columns)
    assert budget.spent[0] > 0
    # bounds="auto": a private bounds estimate (one plan), then the release (another)
    auto = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=2)
        .agg(avg=dpa.mean("x", bounds="auto"))
        .run(epsilon=1.0, delta=1e-6)
    )
    lo, hi = auto.attrs["dpkit"]["columns"]["avg"]["bounds"]
    assert lo < hi
    assert len(auto) == 1


def test_planned_contribution_bounds_on_spark_and_duckdb_agree(
    spark: Any, odd_parquet: Path
) -> None:
    """A query without ``.bound()``: the engine bins each unit's groups and rows per group over
    the planner's grid; Spark's SQL gives the same bins, so the same seed plans the same bounds
    (each statistic's own) and, with the md5 bounding hash both engines compute alike, keeps
    the same rows and releases the same frame."""
    frames, plans = [], []
    for source in (spark.read.parquet(str(odd_parquet)), str(odd_parquet)):
        rng = RandomSource(seed=3, insecure=True)
        s = dpa.Session(
            source,
            privacy_unit="uid",
            budget=_budget(),
            source_of_randomness=rng,
            bounding_hash="md5",
        )
        q = s.query().group_by("region", keys=["north", "south", "o'hara", "ünï"])
        frame = q.agg(n=dpa.count(), t=dpa.sum("x", bounds=(-10, 100))).run(epsilon=5.0, delta=1e-6)
        frames.append(frame)
        plans.append(frame.attrs["dpkit"]["plan"])
    assert plans[0] == plans[1]
    assert "statistics" in plans[0]  # per-statistic bounds, through FILTER on Spark
    assert len(frames[0]) == 4
    assert frames[0].equals(frames[1])


def test_csv_on_spark_and_duckdb_agree(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    lines = ["uid,region,x"] + [f"u{i % 40},{'ab'[i % 2]},{i * 0.5}" for i in range(300)]
    lines += ['u1,"quoted, region",7.5', "u2,a,not a number", "u3,b,"]
    path.write_text("\n".join(lines) + "\n")

    duck = dpa.Session(
        str(path), privacy_unit="uid", budget=Budget(epsilon=1.0), bounding_hash="md5"
    )
    plan_duck = (
        duck.query()
        .group_by("region", keys=["a", "b", "quoted, region"])
        .bound(max_partitions=2, max_rows_per_partition=3)
        .agg(n=dpa.count(), s=dpa.sum("x", bounds=(0, 200)))
        .prepare(epsilon=1.0)
    )
    on_spark = dpa.Session(
        spark, table=str(path), privacy_unit="uid", budget=Budget(epsilon=1.0), bounding_hash="md5"
    )
    assert on_spark.columns == duck.columns
    got = as_dict(plan_duck.exact(on_spark.engine))
    assert got == as_dict(plan_duck.exact(duck.engine))
    assert set(got) == {("a",), ("b",), ("quoted, region",)}


def test_cli_query_on_spark_connect(
    connect_server: Any, odd_parquet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from dpkit.cli import app

    engines: list[SparkEngine] = []
    real_init = SparkEngine.__init__

    def recording_init(self: SparkEngine, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        engines.append(self)

    monkeypatch.setattr(SparkEngine, "__init__", recording_init)
    res = CliRunner().invoke(
        app,
        [
            "query",
            str(odd_parquet),
            "--engine",
            "spark",
            "--remote",
            connect_server.url,
            "--privacy-unit",
            "uid",
            "--epsilon",
            "2",
            "--group-by",
            "kind",
            "--keys",
            "kind=1,2,3",
            "--max-partitions",
            "3",
            "--count",
            "--mean",
            "x:0:100",
            "--output",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    assert [r["kind"] for r in rows] == [1, 2, 3]
    assert all(0 <= r["mean_x"] <= 100 for r in rows)
    # The Spark Connect client the command opened is closed when it ends (an open client
    # retries its clean-up calls at interpreter exit, for minutes once the server is gone).
    assert len(engines) == 1 and engines[0].is_connect
    with pytest.raises(Exception):  # noqa: B017 - any error: the client is closed
        engines[0].spark.sql("SELECT 1").collect()


def test_importing_dpkit_does_not_import_pyspark() -> None:
    code = (
        "import sys, pandas as pd, dpkit, dpkit.analytics as dpa\n"
        "from dpkit.accounting import Budget\n"
        "s = dpa.Session(pd.DataFrame({'x': [1.0]}), privacy_unit=None,\n"
        "                budget=Budget(epsilon=1.0))\n"
        "assert not any(m.startswith('pyspark') for m in sys.modules), 'pyspark'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_string_join_keys_compare_bytes_on_spark(classic_spark: Any) -> None:
    """A private key under Spark's case-insensitive ``UTF8_LCASE`` collation must not match the
    public keys ``paris``/``Paris``/``PARIS`` (one row copied three times): the join is either
    refused (the collated type is not the public ``string``) or compares bytes (count 1)."""
    import pandas as pd

    from dpkit.errors import DPKitError

    df = classic_spark.sql("SELECT 1 AS uid, 'paris' COLLATE UTF8_LCASE AS city")
    plain = classic_spark.sql("SELECT 1 AS uid, 'paris' AS city")
    cities = pd.DataFrame({"city": ["paris", "Paris", "PARIS"], "pop": [1, 2, 3]})
    for frame, want in ((df, 1), (plain, 1)):
        s = dpa.Session(frame, privacy_unit=None, budget=_budget())
        try:
            p = (
                s.query()
                .join_public(cities, on="city", columns=["pop"])
                .agg(n=dpa.count())
                .prepare(epsilon=1.0, delta=1e-6)
            )
            s.validate(p)  # what run() does before the charge
        except DPKitError:
            assert frame is df  # only the collated key may be refused
            continue
        got = int(p.exact(s.engine).values["n:n"][0])
        assert got == want if frame is plain else got <= want


def test_release_statement_analysed_once_and_checked_before_the_charge(
    spark: Any, odd_parquet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statement ``validate`` analysed is the frame the release collects (one analysis
    per release on classic, one statement round trip on Connect), and a statement Spark cannot
    analyse is refused before anything is charged."""
    budget = _budget()
    s = dpa.Session(spark.read.parquet(str(odd_parquet)), privacy_unit="uid", budget=budget)
    statements: list[str] = []
    real_sql = spark.sql

    def counting_sql(text: str, *args: Any, **kwargs: Any) -> Any:
        statements.append(text)
        return real_sql(text, *args, **kwargs)

    monkeypatch.setattr(spark, "sql", counting_sql)
    q = (
        s.query()
        .group_by("region", keys=["a", "b"])
        .bound(max_partitions=1, max_rows_per_partition=2)
        .agg(n=dpa.count())
    )
    q.run(epsilon=1.0, delta=1e-6)
    assert len([t for t in statements if "__dpk_" in t]) == 1
    spent = budget.spent

    # The table vanishes between the session and the query: refused, nothing charged.
    view = "dpkit_test_vanishing_view"
    spark.read.parquet(str(odd_parquet)).createOrReplaceTempView(view)
    gone = dpa.Session(spark, table=view, privacy_unit="uid", budget=budget)
    spark.catalog.dropTempView(view)
    with pytest.raises(DPKitError):
        (
            gone.query()
            .group_by("region", keys=["a"])
            .bound(max_partitions=1, max_rows_per_partition=2)
            .agg(n=dpa.count())
            .run(epsilon=1.0, delta=1e-6)
        )
    assert budget.spent == spent
