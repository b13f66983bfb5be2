"""SQL queries on Spark: a public join, a CASE bucket and DuckDB's ``isinf``/``isfinite`` in
the WHERE clause give the same pre-noise aggregates (md5 bounding hash) on DuckDB, Spark
classic and Spark Connect; ``session.sql`` charges and releases on Spark; and
``dpkit query --sql ... --engine spark --remote sc://...`` answers from the command line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from _engine_reference import as_dict
from _sql_corpus import METADATA_YAML, people, regions

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.spark import SparkEngine

QUERIES = {
    "join": "SELECT r.country, COUNT(*) AS n, SUM(p.visits) AS total FROM people p "
    "JOIN regions r ON p.rid = r.id GROUP BY r.country",
    "bucket": "SELECT CASE WHEN age < 30 THEN 'young' WHEN age < 60 THEN 'mid' ELSE 'older' "
    "END AS band, COUNT(*) AS n, AVG(income) AS avg_income, STDDEV(score) AS sd "
    "FROM people WHERE isfinite(income) GROUP BY band",
    "join_bucket": "SELECT r.country, CASE WHEN p.age < 40 THEN 'a' ELSE 'b' END AS band, "
    "COUNT(*) AS n, AVG(p.visits) AS v FROM people p JOIN regions r "
    "ON p.rid = r.id WHERE NOT isinf(p.income) GROUP BY r.country, band",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("spark-sql")
    frame = people()
    frame.loc[frame.index[::17], "income"] = float("inf")  # isinf/isfinite have work to do
    frame.to_parquet(root / "people.parquet")
    regions().to_parquet(root / "regions.parquet")
    (root / "meta.yaml").write_text(
        METADATA_YAML.replace(
            "  regions:\n    public: true\n",
            "  regions:\n    public: true\n    path: regions.parquet\n",
        )
    )
    return root


def _meta(files: Path) -> Any:
    meta = yaml.safe_load(METADATA_YAML)
    meta["tables"]["regions"]["path"] = str(files / "regions.parquet")
    return meta


def _budget() -> Budget:
    return Budget(epsilon=100.0, delta=1e-3)


def test_sql_join_and_bucket_identical_on_duckdb_classic_and_connect(
    files: Path, classic_spark: Any, connect_spark: Any
) -> None:
    """One prepared plan per query (from DuckDB's session), its exact aggregates on the three
    engines; the WHERE clauses keep some rows and drop others (inf incomes)."""
    people_path = str(files / "people.parquet")
    duck = dpa.Session(people_path, privacy_unit="user_id", budget=_budget(), bounding_hash="md5")
    engines = {
        "classic": SparkEngine(classic_spark, hash="md5"),
        "connect": SparkEngine(connect_spark, hash="md5"),
    }
    for name, sql in QUERIES.items():
        prepared = duck.sql_query(sql, metadata=_meta(files)).prepare(epsilon=1.0, delta=1e-6)
        assert prepared.plan.joins or name == "bucket"
        want = as_dict(prepared.exact(duck.engine))
        assert len(want) >= 2, name
        for label, engine in engines.items():
            assert as_dict(prepared.exact(engine)) == want, (name, label)
        # companion: the isinf/isfinite predicate binds (without it, other aggregates)
        loose = [
            f
            for f in prepared.plan.filters
            if "ISINF" not in f.predicate and "ISFINITE" not in f.predicate
        ]
        if len(loose) < len(prepared.plan.filters):
            unfiltered = dataclasses.replace(
                prepared, plan=dataclasses.replace(prepared.plan, filters=tuple(loose))
            )
            assert as_dict(unfiltered.exact(duck.engine)) != want, name


def test_session_sql_charges_and_releases_on_spark(files: Path, spark: Any) -> None:
    """``isinf``/``isfinite`` pass Spark's validation (before the charge) and the release
    runs: rows for both countries and bands, budget spent."""
    budget = _budget()
    s = dpa.Session(
        spark, table=str(files / "people.parquet"), privacy_unit="user_id", budget=budget
    )
    frame = s.sql(QUERIES["join_bucket"], epsilon=1.0, delta=1e-6, metadata=_meta(files))
    assert {"country", "band", "n", "v"} <= set(frame.columns)
    assert set(frame["country"]) <= {"A", "B"} and set(frame["band"]) <= {"a", "b"}
    assert budget.spent[0] > 0


def test_cli_sql_query_on_spark_connect(files: Path, connect_server: Any) -> None:
    from typer.testing import CliRunner

    from dpkit.cli import app

    res = CliRunner().invoke(
        app,
        [
            "query",
            str(files / "people.parquet"),
            "--epsilon",
            "2",
            "--metadata",
            str(files / "meta.yaml"),
            "--engine",
            "spark",
            "--remote",
            connect_server.url,
            "--output",
            "json",
            "--sql",
            "SELECT r.country, COUNT(*) AS n FROM people p JOIN regions r ON p.rid = r.id "
            "WHERE isfinite(p.income) GROUP BY r.country ORDER BY r.country",
        ],
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    assert [r["country"] for r in rows] == ["A", "B"]
    assert {"n", "n_low", "n_high"} <= set(rows[0])


def test_every_allowed_predicate_function_is_accepted() -> None:
    """sqlglot parses ``isnan``/``isinf`` into nodes named ``IS_NAN``/``IS_INF``: the
    allow-list check must still know them (it refused both before)."""
    from dpkit.analytics._sql import SAFE_FUNCTIONS, parse_predicate

    args = {
        "coalesce": "(x, 1)",
        "starts_with": "(s, 'a')",
        "ends_with": "(s, 'a')",
        "contains": "(s, 'a')",
    }
    for name in sorted(SAFE_FUNCTIONS):
        parse_predicate(f"{name}{args.get(name, '(x)')} IS NOT NULL")
