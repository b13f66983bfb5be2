"""Released keys, column names and paths are printed as plain text, never as rich markup, and a
paid-for answer is never lost to a display error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dpkit.cli import app

runner = CliRunner()

MARKUP_KEYS = ["north", "[white]north[/white]", "[/x]", "[bold]"]


@pytest.fixture(scope="module")
def markup_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    n = 2000
    df = pd.DataFrame(
        {
            "user_id": rng.integers(0, 1500, n),
            "region": rng.choice(MARKUP_KEYS, n),
            "income": rng.uniform(0, 1e5, n),
        }
    )
    path = tmp_path_factory.mktemp("markup") / "people.parquet"
    df.to_parquet(path)
    return path


def test_keys_that_look_like_markup_print_as_they_are(markup_table: Path) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(markup_table),
            "--privacy-unit",
            "user_id",
            "--epsilon",
            "1",
            "--group-by",
            "region",
            "--keys",
            "region=" + ",".join(MARKUP_KEYS),
            "--count",
        ],
    )
    assert res.exit_code == 0, res.output
    for key in MARKUP_KEYS:
        assert key in res.output
    assert "privacy spent: epsilon=1" in res.output


def test_sql_column_names_that_look_like_markup_print_as_they_are(
    markup_table: Path, tmp_path: Path
) -> None:
    meta = tmp_path / "meta.yaml"
    meta.write_text(
        "tables:\n  people:\n    privacy_unit: user_id\n    columns:\n"
        "      region: {keys: [north]}\n"
    )
    res = runner.invoke(
        app,
        [
            "query",
            str(markup_table),
            "--epsilon",
            "1",
            "--metadata",
            str(meta),
            "--sql",
            'SELECT region AS "[/r]", COUNT(*) AS "[red]n[/red]" FROM people GROUP BY region',
        ],
    )
    assert res.exit_code == 0, res.output
    assert "[/r]" in res.output and "[red]n[/red]" in res.output


def test_an_error_message_holding_markup_is_printed_whole(markup_table: Path) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(markup_table),
            "--privacy-unit",
            "user_id",
            "--epsilon",
            "1",
            "--mean",
            "[/nope]:0:1",
        ],
    )
    assert res.exit_code == 2
    assert "[/nope]" in res.output


def test_the_answer_survives_a_display_error(
    markup_table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpkit.cli import _query

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("terminal went away")

    monkeypatch.setattr(_query, "render", broken)
    res = runner.invoke(
        app,
        [
            "query",
            str(markup_table),
            "--privacy-unit",
            "user_id",
            "--epsilon",
            "1",
            "--group-by",
            "region",
            "--keys",
            "region=north,[/x]",
            "--count",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "region,count,count_low,count_high"
    assert [line.split(",")[0] for line in lines[1:3]] == ["north", "[/x]"]
    assert "could not draw the result" in res.output


def test_an_unwritable_output_is_refused_before_the_charge(
    markup_table: Path, tmp_path: Path
) -> None:
    res = runner.invoke(
        app,
        [
            "query",
            str(markup_table),
            "--privacy-unit",
            "user_id",
            "--epsilon",
            "1",
            "--count",
            "--output",
            str(tmp_path / "missing" / "r.csv"),
        ],
    )
    assert res.exit_code == 2
    assert "no such directory" in res.output and "privacy spent" not in res.output


def test_paths_holding_markup_print_as_they_are(tmp_path: Path) -> None:
    folder = tmp_path / "[bold]"
    folder.mkdir()
    res = runner.invoke(
        app,
        [
            "account",
            "laplace",
            "--epsilon",
            "0.5",
            "--count",
            "3",
            "--delta",
            "1e-6",
            "--plot",
            str(folder / "p.png"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "[bold]" in res.output


def test_demo_rows_and_paths_print_as_plain_text() -> None:
    from rich.console import Console

    from dpkit.cli._demo import DemoReport, print_report

    rep = DemoReport(path=Path("/cache/[/x]/people.parquet"), rows=10, people=5)
    rep.lines.append(("people, [white]North[/white]", 3.0, 3.0, 2.0, 4.0))
    rep.truth["hidden"] = ["[/y]"]
    console = Console(width=80, record=True)
    print_report(rep, console)
    text = console.export_text()
    assert "/cache/[/x]/people.parquet" in text
    assert "people, [white]North[/white]" in text and "[/y]" in text
