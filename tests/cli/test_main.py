"""The ``dpkit`` command as a whole: version, -h/--help everywhere, plain help, clean errors."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from dpkit import __version__
from dpkit.cli import CliError, _Group, app, plain_help
from dpkit.errors import BudgetExceededError, PrivacyParameterError

runner = CliRunner()


def _command_paths() -> list[list[str]]:
    """Every command and group path of the CLI, the root included."""
    paths: list[list[str]] = []

    def walk(cmd: object, path: list[str]) -> None:
        paths.append(path)
        if isinstance(cmd, TyperGroup):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


PATHS = _command_paths()
# reStructuredText and rich markup that must never reach the terminal
RAW_MARKUP = re.compile(r"``|:(?:func|class|meth|mod|attr|data):`|\*\*|\[/?(?:bold|red|green|"
                        r"dim|italic)\]|\\\[")


def test_the_walk_sees_every_subcommand() -> None:
    names = {" ".join(p) for p in PATHS}
    assert {"", "audit", "audit laplace", "audit code", "account", "account laplace", "ldp",
            "ldp simulate", "demo"} <= names
    assert len(PATHS) >= 18


def test_version() -> None:
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"dpkit {__version__}"


def test_version_from_a_real_process() -> None:
    # the same through a real process (python -c calls the console entry point)
    out = subprocess.run([sys.executable, "-c", "from dpkit.cli import main; main()",
                          "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"dpkit {__version__}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "dpkit")
def test_short_and_long_help_everywhere_without_raw_markup(path: list[str]) -> None:
    long = runner.invoke(app, [*path, "--help"], terminal_width=100)
    short = runner.invoke(app, [*path, "-h"], terminal_width=100)
    assert long.exit_code == 0, long.output
    assert short.exit_code == 0, short.output
    assert short.output == long.output
    assert "Usage: dpkit" in long.output
    assert re.search(r"(?<![-\w])-h\b", long.output)  # the short option is advertised
    hit = RAW_MARKUP.search(long.output)
    assert hit is None, (hit.group(0) if hit else "", long.output)


@pytest.mark.parametrize(("text", "plain"), [
    ("Epsilon of ``count`` releases", "Epsilon of count releases"),
    ("see :func:`dpkit.fdp.gdp` and :class:`~dpkit.accounting.Budget`",
     "see dpkit.fdp.gdp and Budget"),
    ("an **upper bound**", "an upper bound"),
    ("values in [0, 1] and [bold]x[/bold]", r"values in [0, 1] and \[bold]x\[/bold]"),
])
def test_plain_help(text: str, plain: str) -> None:
    assert plain_help(text) == plain


def _tiny_app() -> typer.Typer:
    tiny = typer.Typer(cls=_Group)

    @tiny.command("param")
    def param() -> None:
        raise PrivacyParameterError("epsilon must be positive, got -1")

    @tiny.command("budget")
    def budget() -> None:
        raise BudgetExceededError("charging 0.6 would exceed epsilon 1.0")

    @tiny.command("bug")
    def bug() -> None:
        raise ZeroDivisionError("a real bug")

    return tiny


def test_error_handler_turns_dpkit_errors_into_clean_exit_2() -> None:
    tiny = _tiny_app()
    res = runner.invoke(tiny, ["param"])
    assert res.exit_code == 2
    assert "Invalid value: epsilon must be positive, got -1" in res.output
    assert "Traceback" not in res.output
    assert isinstance(res.exception, SystemExit)
    res = runner.invoke(tiny, ["budget"])
    assert res.exit_code == 2
    assert "BudgetExceededError: charging 0.6 would exceed epsilon 1.0" in res.output
    # anything else is a bug and keeps its exception (and traceback)
    res = runner.invoke(tiny, ["bug"])
    assert isinstance(res.exception, ZeroDivisionError)
    assert issubclass(CliError, typer.BadParameter)


@pytest.mark.parametrize("args", [
    ["demo", "--epsilon", "-1"],
    ["account", "laplace", "--epsilon", "nan", "--count", "1", "--delta", "1e-5"],
    ["account", "dpsgd", "--sampling-rate", "2", "--noise-multiplier", "1", "--delta", "1e-5",
     "--steps", "10"],
    ["ldp", "simulate", "--epsilon", "-1"],
    ["audit", "laplace", "--epsilon", "nan", "--samples", "100"],
    ["audit", "ldp", "grr", "--epsilon", "inf", "--samples", "100"],
    ["audit", "code", "json:dumps", "--pair", "1", "2", "--epsilon", "-1"],
], ids=lambda a: " ".join(a[:2]))
def test_every_subcommand_reports_bad_privacy_parameters_cleanly(args: list[str]) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    assert re.search(r"epsilon|sampling_rate", res.output), res.output
