"""Metadata files (YAML and TOML) and their validation; small parser edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from _sql_corpus import METADATA_TOML, METADATA_YAML, people

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.sqlquery import SqlError, load_metadata
from dpkit.errors import PrivacyParameterError


def test_yaml_and_toml_metadata_are_the_same(tmp_path: Path) -> None:
    y = tmp_path / "meta.yaml"
    t = tmp_path / "meta.toml"
    y.write_text(METADATA_YAML)
    t.write_text(METADATA_TOML)
    my, mt = load_metadata(y), load_metadata(t)
    assert my == mt
    people_info = my.tables["people"]
    assert people_info.privacy_unit == "user_id"
    assert (people_info.max_partitions, people_info.max_rows_per_partition) == (2, 3)
    assert people_info.columns["income"].bounds == (0.0, 200000.0)
    assert people_info.columns["region"].keys == ("north", "south", "east", "west")
    assert my.tables["regions"].public


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"tables": {"people": {"columns": {"x": {"lower": float("nan"), "upper": 1}}}}}, "lower"),
        ({"tables": {"people": {"columns": {"x": {"lower": 0, "upper": float("inf")}}}}}, "upper"),
        ({"tables": {"people": {"columns": {"x": {"lower": 5, "upper": 1}}}}}, "lower"),
        ({"tables": {"people": {"columns": {"x": {"lower": 1, "upper": 1}}}}}, "below upper"),
        ({"tables": {"people": {"columns": {"x": {"lower": 0}}}}}, "both lower and upper"),
        ({"tables": {"people": {"columns": {"x": {"lower": "0", "upper": 1}}}}}, "numbers"),
        ({"tables": {"people": {"columns": {"x": {"lower": True, "upper": 1}}}}}, "numbers"),
        ({"tables": {"people": {"columns": {"x": {"uper": 1}}}}}, "unknown fields"),
        ({"tables": {"people": {"max_partitions": 0}}}, "max_partitions"),
        ({"tables": {"people": {"max_partitions": 1.5}}}, "max_partitions"),
        ({"tables": {"people": {"max_rows_per_partition": -3}}}, "max_rows_per_partition"),
        ({"tables": {"people": {"privacy_unit": 3}}}, "privacy_unit"),
        ({"tables": {"r": {"public": True, "privacy_unit": "u"}}}, "public table"),
        ({"tables": {"r": {"public": "yes"}}}, "true or false"),
        ({"tables": {"people": {"columns": {"x": {"keys": []}}}}}, "non-empty"),
        ({"tables": {"people": {"columns": {"x": {"keys": [float("nan")]}}}}}, "keys"),
        ({"tabels": {}}, "unknown fields"),
    ],
)
def test_bad_metadata_is_refused_with_the_field_named(raw: dict, message: str) -> None:
    with pytest.raises(PrivacyParameterError, match=message):
        load_metadata(raw)


def test_bad_metadata_files_are_refused(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "m.yaml"
    bad_yaml.write_text("tables: [unclosed")
    with pytest.raises(PrivacyParameterError, match="not valid YAML"):
        load_metadata(bad_yaml)
    bad_toml = tmp_path / "m.toml"
    bad_toml.write_text("[tables\n")
    with pytest.raises(PrivacyParameterError, match="not valid TOML"):
        load_metadata(bad_toml)
    other = tmp_path / "m.json"
    other.write_text("{}")
    with pytest.raises(PrivacyParameterError, match=r"\.yaml, \.yml or \.toml"):
        load_metadata(other)
    with pytest.raises(PrivacyParameterError, match="no such metadata file"):
        load_metadata(tmp_path / "missing.yaml")


def test_public_table_path_is_read_relative_to_the_metadata_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    meta = tmp_path / "sub" / "m.yaml"
    meta.write_text("tables:\n  regions:\n    public: true\n    path: regions.parquet\n")
    assert load_metadata(meta).tables["regions"].path == str(tmp_path / "sub" / "regions.parquet")


def test_metadata_privacy_unit_must_match_the_session() -> None:
    s = dpa.Session(people(), privacy_unit="user_id", budget=Budget(epsilon=1.0))
    meta = {"tables": {"people": {"privacy_unit": "region"}}}
    with pytest.raises(SqlError, match="privacy unit"):
        s.sql("SELECT COUNT(*) AS n FROM people", epsilon=1.0, metadata=meta)
    assert s.budget.spent == (0.0, 0.0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "SELECT 1",
        "(" * 3000 + "SELECT" + ")" * 3000,
        "SELECT COUNT(*) FROM people\x00",
        "x" * 100_001,
        "SELECT COUNT(*) FROM people WHERE age > ?",
    ],
)
def test_degenerate_text_is_refused(text: str) -> None:
    s = dpa.Session(people(), privacy_unit="user_id", budget=Budget(epsilon=1.0))
    with pytest.raises(SqlError):
        s.sql(text, epsilon=1.0, metadata={"tables": {}})
    assert s.budget.spent == (0.0, 0.0)


def test_without_a_privacy_unit_each_row_is_a_person() -> None:
    s = dpa.Session(people(), privacy_unit=None, budget=Budget(epsilon=1.0))
    frame = s.sql(
        "SELECT plan, COUNT(*) AS n FROM people GROUP BY plan",
        epsilon=1.0,
        keys={"plan": ["free", "pro", "team"]},
    )
    assert list(frame["plan"]) == ["free", "pro", "team"]
    with pytest.raises(SqlError, match="privacy unit only"):
        s.sql("SELECT COUNT(DISTINCT user_id) FROM people", epsilon=1.0)
