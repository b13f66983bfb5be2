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
    df = pd.DataFrame(
        {
            "user_id": rng.integers(0, 1500, n),
            "region": rng.choice(["north", "south"], n),
            "income": rng.uniform(0, 1e5, n),
            "age": rng.integers(18, 90, n).astype(float),
        }
    )
    path = tmp_path_factory.mktemp("q") / "people.parquet"
    df.to_parquet(path)
    return path


def test_query_prints_a_table(people: Path) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(people),
            "--privacy-unit",
            "user_id",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--group-by",
            "region",
            "--count",
            "--mean",
            "income:0:100000",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "north" in res.output and "south" in res.output
    assert "mean_income" in res.output
    # the groups are chosen by thresholding the noisy count: delta is the threshold's own
    # (at most the 1e-6 asked, the threshold being an integer)
    assert "privacy spent: epsilon=1, delta=" in res.output
    assert "noisy count above" in res.output


def test_query_writes_files(people: Path, tmp_path: Path) -> None:
    for suffix in ("csv", "parquet", "json"):
        out = tmp_path / f"r.{suffix}"
        res = runner.invoke(
            app,
            [
                "query",
                str(people),
                "--privacy-unit",
                "user_id",
                "--epsilon",
                "1",
                "--group-by",
                "region",
                "--keys",
                "region=north,south,west",
                "--count",
                "--quantile",
                "age:0.5:0:120",
                "--output",
                str(out),
            ],
        )
        assert res.exit_code == 0, res.output
        assert out.exists()
    rows = json.loads((tmp_path / "r.json").read_text())
    assert [r["region"] for r in rows] == ["north", "south", "west"]
    assert {"count", "count_low", "count_high", "q_age_p50"} <= set(rows[0])


def test_query_errors_are_clear(people: Path) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(people),
            "--privacy-unit",
            "user_id",
            "--epsilon",
            "1",
            "--group-by",
            "region",
            "--count",
        ],
    )
    assert res.exit_code != 0 and "--delta" in res.output
    res = runner.invoke(
        app, ["query", str(people), "--privacy-unit", "user_id", "--epsilon", "nan", "--count"]
    )
    assert res.exit_code == 2 and "epsilon" in res.output
    res = runner.invoke(
        app, ["query", str(people), "--rows-are-people", "--epsilon", "1", "--mean", "salary:0:1"]
    )
    assert res.exit_code == 2 and "salary" in res.output


def test_parsers() -> None:
    assert parse_value_spec("a:b:0:10", "--sum") == ("a:b", 0.0, 10.0)
    assert parse_keys(["k=1,x,2.5"], ["k"]) == {"k": [1, "x", 2.5]}


def test_query_prints_csv(people: Path) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(people),
            "--privacy-unit",
            "user_id",
            "--epsilon",
            "1",
            "--count-distinct",
            "--output",
            "csv",
        ],
    )
    assert res.exit_code == 0, res.output
    header, value = res.stdout.strip().splitlines()
    assert header == "distinct_user_id,distinct_user_id_low,distinct_user_id_high"
    # about 1,400 distinct users, discrete Laplace noise of scale 1: |noise| > 200 has
    # probability e^-200
    assert 1000 < int(value.split(",")[0]) < 1700


def test_query_without_a_privacy_unit_choice_is_refused(people: Path) -> None:
    res = runner.invoke(app, ["query", str(people), "--epsilon", "1", "--count"])
    assert res.exit_code == 2
    assert "--privacy-unit" in res.output and "--rows-are-people" in res.output
    assert "privacy spent" not in res.output
    both = runner.invoke(
        app,
        [
            "query",
            str(people),
            "--epsilon",
            "1",
            "--count",
            "--privacy-unit",
            "user_id",
            "--rows-are-people",
        ],
    )
    assert both.exit_code == 2 and "not both" in both.output


def test_query_says_what_it_protects(people: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dpkit.analytics as dpa

    seen: list[object] = []
    real = dpa.Session.__init__

    def recording(self: object, *args: object, **kwargs: object) -> None:
        seen.append(kwargs.get("privacy_unit", "missing"))
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(dpa.Session, "__init__", recording)
    rows = runner.invoke(
        app, ["query", str(people), "--rows-are-people", "--epsilon", "1", "--count"]
    )
    assert rows.exit_code == 0, rows.output
    assert "protects each row, not each person" in rows.output
    assert seen == [None]  # written out, not left to the default
    unit = runner.invoke(
        app,
        [
            "query",
            str(people),
            "--privacy-unit",
            "user_id",
            "--max-rows-per-partition",
            "3",
            "--epsilon",
            "1",
            "--count",
            "--output",
            "csv",
        ],
    )
    assert unit.exit_code == 0, unit.output
    assert (
        "protects each user_id, all of its rows together (at most 1 group, 3 rows per "
        "group)" in unit.stderr
    )
    assert unit.stdout.startswith("count,count_low,count_high\n")


def test_sql_query_takes_the_privacy_unit_from_the_metadata(people: Path, tmp_path: Path) -> None:
    declared = tmp_path / "unit.yaml"
    declared.write_text("tables:\n  people:\n    privacy_unit: user_id\n")
    res = runner.invoke(
        app,
        [
            "query",
            str(people),
            "--epsilon",
            "1",
            "--metadata",
            str(declared),
            "--sql",
            "SELECT COUNT(*) AS n FROM people",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "protects each user_id" in res.output
    clash = runner.invoke(
        app,
        [
            "query",
            str(people),
            "--epsilon",
            "1",
            "--metadata",
            str(declared),
            "--rows-are-people",
            "--sql",
            "SELECT COUNT(*) AS n FROM people",
        ],
    )
    assert clash.exit_code == 2 and "contradicts" in clash.output
    silent = tmp_path / "none.yaml"
    silent.write_text("tables:\n  people:\n    max_rows_per_partition: 1\n")
    res = runner.invoke(
        app,
        [
            "query",
            str(people),
            "--epsilon",
            "1",
            "--metadata",
            str(silent),
            "--sql",
            "SELECT COUNT(*) AS n FROM people",
        ],
    )
    assert res.exit_code == 2 and "--rows-are-people" in res.output


def test_serve_without_a_privacy_unit_choice_is_refused(
    people: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("uvicorn")
    import uvicorn

    started: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: started.append(a))
    res = runner.invoke(
        app,
        [
            "serve",
            str(people),
            "--budget",
            "epsilon=1",
            "--ledger",
            "sqlite:///" + str(people.parent / "serve-unit.db"),
        ],
    )
    assert res.exit_code == 2, res.output
    assert "--rows-are-people" in res.output and not started
