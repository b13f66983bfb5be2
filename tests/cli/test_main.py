"""The ``dpkit`` command as a whole: version, -h/--help everywhere, plain help, clean errors."""

from __future__ import annotations

import re
import subprocess
import sys

import click
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
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):  # the root imports its subcommands here
                walk(cmd.get_command(ctx, name), [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


PATHS = _command_paths()
# reStructuredText and rich markup that must never reach the terminal
RAW_MARKUP = re.compile(
    r"``|:(?:func|class|meth|mod|attr|data):`|\*\*|\[/?(?:bold|red|green|"
    r"dim|italic)\]|\\\["
)


def test_the_walk_sees_every_subcommand() -> None:
    names = {" ".join(p) for p in PATHS}
    assert {
        "",
        "audit",
        "audit laplace",
        "audit code",
        "account",
        "account laplace",
        "ldp",
        "ldp simulate",
        "demo",
    } <= names
    assert len(PATHS) >= 18


def test_version() -> None:
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"dpkit {__version__}"


def test_version_from_a_real_process() -> None:
    # the same through a real process (python -c calls the console entry point)
    out = subprocess.run(
        [sys.executable, "-c", "from dpkit.cli import main; main()", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
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


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("Epsilon of ``count`` releases", "Epsilon of count releases"),
        (
            "see :func:`dpkit.fdp.gdp` and :class:`~dpkit.accounting.Budget`",
            "see dpkit.fdp.gdp and Budget",
        ),
        ("an **upper bound**", "an upper bound"),
        ("values in [0, 1] and [bold]x[/bold]", r"values in [0, 1] and \[bold]x\[/bold]"),
    ],
)
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


@pytest.mark.parametrize(
    "args",
    [
        ["demo", "--epsilon", "-1"],
        ["account", "laplace", "--epsilon", "nan", "--count", "1", "--delta", "1e-5"],
        [
            "account",
            "dpsgd",
            "--sampling-rate",
            "2",
            "--noise-multiplier",
            "1",
            "--delta",
            "1e-5",
            "--steps",
            "10",
        ],
        ["ldp", "simulate", "--epsilon", "-1"],
        ["audit", "laplace", "--epsilon", "nan", "--samples", "100"],
        ["audit", "ldp", "grr", "--epsilon", "inf", "--samples", "100"],
        ["audit", "code", "json:dumps", "--pair", "1", "2", "--epsilon", "-1"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_every_subcommand_reports_bad_privacy_parameters_cleanly(args: list[str]) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    assert re.search(r"epsilon|sampling_rate", res.output), res.output


_IMPORTS_AFTER = (
    "import sys\n"
    "from dpkit.cli import main\n"
    "sys.argv = ['dpkit', *sys.argv[1:]]\n"
    "try:\n"
    "    main()\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(sorted(m for m in sys.modules if m.startswith(('dpkit', 'numpy', 'scipy'))))\n"
)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--help"], ["dpkit", "dpkit.cli", "dpkit.errors"]),
        (["--version"], ["dpkit", "dpkit.cli", "dpkit.errors"]),
    ],
)
def test_root_help_and_version_import_no_subcommand(args: list[str], expected: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTS_AFTER, *args], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == repr(expected)


def test_a_subcommand_imports_only_what_it_needs() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTS_AFTER, "ldp", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    loaded = out.stdout.strip().splitlines()[-1]
    assert "'dpkit.cli._ldp'" in loaded
    for other in (
        "dpkit.cli._account",
        "dpkit.cli._audit",
        "dpkit.cli._demo",
        "dpkit.cli._query",
        "dpkit.accounting",
        "dpkit.audit",
        "dpkit.analytics",
    ):
        assert f"'{other}'" not in loaded, other


def test_the_root_listing_shows_each_subcommands_own_help() -> None:
    from dpkit.cli import _SUBCOMMANDS, _RootGroup

    root = typer.main.get_command(app)
    assert isinstance(root, _RootGroup)
    ctx = click.Context(root)
    for name, (_, _, listed) in _SUBCOMMANDS.items():
        loaded = root.get_command(ctx, name)
        assert loaded is not None
        assert loaded.get_short_help_str(limit=200) == plain_help(listed), name
    # and the root help lists every subcommand with that text
    res = runner.invoke(app, ["--help"])
    flat = " ".join(res.output.replace("\u2502", " ").split())  # unwrap the rich panel
    for name, (_, _, listed) in _SUBCOMMANDS.items():
        assert f"{name} {listed}" in flat, (name, flat)
