"""Help at 80 columns: no ``<bool>`` placeholders, no completion options on subcommands,
nothing cut, and docstring paragraphs wrapped once (by the terminal, not also by the source)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from dpkit.cli import _SUBCOMMANDS, _load, app, plain_help

runner = CliRunner()


def _paths() -> list[list[str]]:
    """Every command and group under ``dpkit``, as argument lists."""
    out: list[list[str]] = [[]]

    def walk(cmd: Any, prefix: list[str]) -> None:
        out.append(prefix)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*prefix, name])

    for name in _SUBCOMMANDS:
        walk(_load(name), [name])
    return out


@pytest.mark.parametrize("path", _paths(), ids=lambda p: " ".join(p) or "dpkit")
def test_help_at_80_columns_is_whole(path: list[str]) -> None:
    res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.output
    assert "--install-completion" not in res.output and "--show-completion" not in res.output
    assert "…" not in res.output  # no cut option name, placeholder or help text
    assert max(len(line) for line in res.output.splitlines()) <= 80


def test_query_help_shows_each_spec_whole() -> None:
    res = runner.invoke(app, ["query", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    for text in (
        "COL:QS:LO:HI",
        "age:0.25,0.5:0:120",
        "COL:EDGES",
        "income:0,1e4,1e5",
        "--max-rows-per-partition",
        "--rows-are-people",
        "distinct_COL",
    ):
        assert text in res.output


def test_docstring_paragraphs_are_joined() -> None:
    assert plain_help("one two\n    three four\n\n    five\n") == "one two three four\n\nfive"
    assert (
        plain_help("Example::\n\n    dpkit a \\\n        --b") == "Example::\n\ndpkit a \\\n    --b"
    )
    res = runner.invoke(app, ["audit", "code", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert "batches with --vectorized" in " ".join(res.output.split())
    lines = [line.strip() for line in res.output.splitlines()]
    assert "batches with" not in lines  # a source line break kept as a terminal line
