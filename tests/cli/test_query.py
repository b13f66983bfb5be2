"""``dpkit query`` end to end on a small Parquet file (DuckDB engine)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dpkit.cli import app
from dpkit.cli._query import parse_keys, parse_value_spec

runner = CliRunner()


@pytest.fixture(scope="module")
def people(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(0)
    n = 4000
    df = pd.DataFrame({
        "user_id": rng.integers(0, 1500, n),
        "region": rng.choice(["north", "south"], n),
        "income": rng.uniform(0, 1e5, n),
        "age": rng.integers(18, 90, n).astype(float),
    })
    path = tmp_path_factory.mktemp("q") / "people.parquet"
    df.to_parquet(path)
    return path


def test_query_prints_a_table(people: Path) -> None:
    res = runner.invoke(app, ["query", str(people), "--privacy-unit", "user_id", "--epsilon",
                              "1", "--delta", "1e-6", "--group-by", "region", "--count",
                              "--mean", "income:0:100000"])
    assert res.exit_code == 0, res.output
    assert "north" in res.output and "south" in res.output
    assert "mean_income" in res.output
    assert "privacy spent: epsilon=1, delta=1e-06" in res.output


def test_query_writes_files(people: Path, tmp_path: Path) -> None:
    for suffix in ("csv", "parquet", "json"):
        out = tmp_path / f"r.{suffix}"
        res = runner.invoke(app, ["query", str(people), "--privacy-unit", "user_id",
                                  "--epsilon", "1", "--group-by", "region", "--keys",
                                  "region=north,south,west", "--count", "--quantile",
                                  "age:0.5:0:120", "--output", str(out)])
        assert res.exit_code == 0, res.output
        assert out.exists()
    rows = json.loads((tmp_path / "r.json").read_text())
    assert [r["region"] for r in rows] == ["north", "south", "west"]
    assert {"count", "count_low", "count_high", "q_age_p50"} <= set(rows[0])


def test_query_errors_are_clear(people: Path) -> None:
    res = runner.invoke(app, ["query", str(people), "--privacy-unit", "user_id", "--epsilon",
                              "1", "--group-by", "region", "--count"])
    assert res.exit_code != 0 and "--delta" in res.output
    res = runner.invoke(app, ["query", str(people), "--privacy-unit", "user_id", "--epsilon",
                              "nan", "--count"])
    assert res.exit_code == 2 and "epsilon" in res.output
    res = runner.invoke(app, ["query", str(people), "--epsilon", "1", "--mean", "salary:0:1"])
    assert res.exit_code == 2 and "salary" in res.output


def test_parsers() -> None:
    assert parse_value_spec("a:b:0:10", "--sum") == ("a:b", 0.0, 10.0)
    assert parse_keys(["k=1,x,2.5"], ["k"]) == {"k": [1, "x", 2.5]}


def test_query_prints_csv(people: Path) -> None:
    res = runner.invoke(app, ["query", str(people), "--privacy-unit", "user_id", "--epsilon",
                              "1", "--count-distinct", "--output", "csv"])
    assert res.exit_code == 0, res.output
    header, value = res.output.strip().splitlines()
    assert header == "units,units_low,units_high"
    # about 1,400 distinct users, discrete Laplace noise of scale 1: |noise| > 200 has
    # probability e^-200
    assert 1000 < int(value.split(",")[0]) < 1700
