"""``dpkit query FILE --sql "..." --metadata meta.yaml`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _sql_corpus import METADATA_TOML, METADATA_YAML, people, regions
from typer.testing import CliRunner

from dpkit.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sqlcli")
    people().to_parquet(root / "people.parquet")
    regions().to_parquet(root / "regions.parquet")
    (root / "meta.yaml").write_text(
        METADATA_YAML.replace(
            "  regions:\n    public: true\n",
            "  regions:\n    public: true\n    path: regions.parquet\n",
        )
    )
    (root / "meta.toml").write_text(METADATA_TOML)
    return root


def test_sql_query_prints_released_rows(files: Path) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(files / "people.parquet"),
            "--epsilon",
            "1",
            "--metadata",
            str(files / "meta.yaml"),
            "--sql",
            "SELECT region, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY region",
        ],
    )
    assert res.exit_code == 0, res.output
    for region in ("north", "south", "east", "west"):
        assert region in res.output
    assert "avg_income" in res.output
    assert "privacy spent: epsilon=1" in res.output


def test_sql_query_joins_a_public_table_named_in_the_metadata(files: Path) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(files / "people.parquet"),
            "--epsilon",
            "1",
            "--metadata",
            str(files / "meta.yaml"),
            "--output",
            "json",
            "--sql",
            "SELECT r.country, COUNT(*) AS n FROM people p JOIN regions r ON p.rid = r.id "
            "GROUP BY r.country ORDER BY r.country",
        ],
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["country"] for r in rows] == ["A", "B"]
    assert {"n", "n_low", "n_high"} <= set(rows[0])


def test_sql_refusal_exits_2_and_names_the_clause(files: Path) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(files / "people.parquet"),
            "--epsilon",
            "1",
            "--metadata",
            str(files / "meta.toml"),
            "--sql",
            "SELECT MAX(income) FROM people",
        ],
    )
    assert res.exit_code == 2
    assert "MAX" in res.output and "nothing was spent" in res.output


def test_sql_and_aggregate_options_do_not_mix(files: Path) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(files / "people.parquet"),
            "--epsilon",
            "1",
            "--count",
            "--sql",
            "SELECT COUNT(*) FROM people",
        ],
    )
    assert res.exit_code != 0
    assert "--sql replaces" in res.output


def test_privacy_unit_must_agree_with_the_metadata(files: Path) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(files / "people.parquet"),
            "--epsilon",
            "1",
            "--privacy-unit",
            "region",
            "--metadata",
            str(files / "meta.yaml"),
            "--sql",
            "SELECT COUNT(*) FROM people",
        ],
    )
    assert res.exit_code == 2
    assert "disagrees" in res.output
