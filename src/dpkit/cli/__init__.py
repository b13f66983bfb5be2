"""The ``dpkit`` command line. Subcommands live in their own modules.

Three things are decided here once for every subcommand:

* ``-h`` and ``--help`` both print help, and ``dpkit --version`` prints the version;
* help text is plain: reStructuredText roles and literals written for the API documentation
  (````x````, ``:func:`x```, ``**x**``) are reduced to their text, square brackets are
  escaped so the terminal renderer never takes them for markup, and the line breaks of a
  docstring's paragraphs are joined (the terminal wraps them once, to its own width);
* flags show no value placeholder (no ``<bool>``), and shell completion is not offered on every
  subcommand (``dpkit`` has none);
* an error dpkit raises on purpose (:class:`dpkit.errors.DPKitError`: a bad privacy parameter,
  an exceeded budget, ...) is printed as one clean message and exits with code 2, without a
  traceback. Other exceptions are bugs and keep their traceback. This is the one handler:
  subcommands let dpkit's errors propagate to it;
* subcommands are imported on first use: ``dpkit --help`` and ``dpkit --version`` load typer,
  rich and dpkit's exception classes, and ``dpkit account ...`` loads the accounting code only.

Exit codes: 0 success, 1 a finding (an audit proved a violation), 2 a usage or parameter error.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo, DefaultPlaceholder, ParameterInfo

from dpkit import __version__
from dpkit.errors import DPKitError, PrivacyParameterError

__all__ = [
    "PRIVACY_UNIT_OPTION",
    "ROWS_ARE_PEOPLE_OPTION",
    "CliError",
    "PlainCommand",
    "PlainGroup",
    "app",
    "main",
    "plain_help",
]

# The privacy-unit choice, the same on every command that reads a table: one of the two is
# required, so whether people or rows are protected is always written out.
PRIVACY_UNIT_OPTION = typer.Option(
    "--privacy-unit",
    metavar="COL",
    help="column identifying a person: all of a person's rows are protected together",
)
ROWS_ARE_PEOPLE_OPTION = typer.Option(
    "--rows-are-people",
    help="each row is a different person (no such column); give this or --privacy-unit",
)


class CliError(typer.BadParameter):
    """A clean command-line error: the message alone, exit code 2 (a usage error)."""

    def format_message(self) -> str:
        return self.message


def _no_flag_placeholder(params: list[Any]) -> list[Any]:
    """Flags (``--count``, ``--help``) take no value: show no placeholder for one."""
    for p in params:
        if getattr(p, "is_flag", False) and not getattr(p, "count", False):
            p.metavar = ""
    return params


class PlainCommand(TyperCommand):
    """A dpkit command: flags without a value placeholder in the help."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _no_flag_placeholder(super().get_params(ctx))


class PlainGroup(TyperGroup):
    """A dpkit command group: flags without a value placeholder in the help."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _no_flag_placeholder(super().get_params(ctx))


class _Group(PlainGroup):
    """The root group: converts dpkit's deliberate errors into :class:`CliError`.

    Every subcommand runs inside the root group's ``invoke``, so this one handler covers all.
    """

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except PrivacyParameterError as exc:
            raise CliError(f"Invalid value: {exc}") from None
        except DPKitError as exc:
            raise CliError(f"{type(exc).__name__}: {exc}") from None


class _RootGroup(_Group):
    """The ``dpkit`` group: subcommands in :data:`_SUBCOMMANDS` are imported on first use.

    While the root help is being written the listing needs only names and one-line help, so
    :meth:`get_command` answers with a placeholder carrying the declared help; any other use
    (running, nested help, completion) imports the subcommand's module and builds the command.
    """

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in _SUBCOMMANDS if n not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in _SUBCOMMANDS and cmd_name not in self.commands:
            if self._listing:
                return TyperCommand(cmd_name, help=_SUBCOMMANDS[cmd_name][2])
            self.commands[cmd_name] = _load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


_RST_ROLE = re.compile(r":[a-z:]+:`~?([^`<]*?)(?:\s*<[^`]*>)?`")
_RST_LITERAL = re.compile(r"``([^`]+)``")
_RST_STRONG = re.compile(r"\*\*([^*]+)\*\*")


def _unwrap(text: str) -> str:
    """Join the lines of each paragraph (paragraphs are separated by blank lines); a paragraph
    with an indented line (an example, a list) keeps its line breaks."""
    paragraphs = re.split(r"\n\s*\n", text.strip("\n"))
    out = []
    for para in paragraphs:
        lines = para.split("\n")
        if any(line[:1].isspace() for line in lines[1:]):
            out.append(para)
        else:
            out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def plain_help(text: str | None) -> str | None:
    """Help text for the terminal: reStructuredText reduced to its words, brackets escaped,
    paragraphs on one line each (see :func:`_unwrap`)."""
    if text is None:
        return None
    text = _RST_ROLE.sub(
        lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~") else m.group(1), text
    )
    text = _RST_LITERAL.sub(r"\1", text)
    text = _RST_STRONG.sub(r"\1", text)
    return escape(_unwrap(inspect.cleandoc(text)))


def _clean(value: Any) -> Any:
    """:func:`plain_help` of a help value, which typer may wrap in a ``DefaultPlaceholder``."""
    if isinstance(value, str):
        return plain_help(value)
    if isinstance(value, DefaultPlaceholder) and isinstance(value.value, str):
        return DefaultPlaceholder(plain_help(value.value))
    return value


def _clean_parameters(callback: Any) -> None:
    try:
        params = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - every command is a plain function
        return
    for p in params:
        info = p.default
        if isinstance(info, ParameterInfo) and not getattr(info, "_dpkit_clean", False):
            info.help = _clean(info.help)
            info._dpkit_clean = True  # type: ignore[attr-defined]  # shared options: once


def _clean_command(info: CommandInfo) -> None:
    if info.cls is None or info.cls is TyperCommand:  # typer's default
        info.cls = PlainCommand
    if info.help is None and info.callback is not None:
        info.help = inspect.getdoc(info.callback)
    info.help = _clean(info.help)
    if info.callback is not None:
        _clean_parameters(info.callback)


def _clean_tree(group: typer.Typer) -> None:
    """Make every help text under ``group`` plain (commands, options, nested groups), and every
    command and group a :class:`PlainCommand` / :class:`PlainGroup`."""
    group.info.help = _clean(group.info.help)
    cls = group.info.cls
    if isinstance(cls, DefaultPlaceholder) or cls is None or cls is TyperGroup:
        group.info.cls = PlainGroup
    for command in group.registered_commands:
        _clean_command(command)
    for sub in group.registered_groups:
        sub.help = _clean(sub.help)
        if sub.typer_instance is not None:
            _clean_tree(sub.typer_instance)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dpkit {__version__}")
        raise typer.Exit()


# Subcommands: name -> (module under dpkit.cli, attribute, one-line help). The attribute is a
# Typer group (``app``) or a command function; the help is what ``dpkit --help`` lists (a test
# checks that it is the help the loaded subcommand shows).
_SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": ("_demo", "demo", "Release private statistics of a generated dataset."),
    "query": ("_query", "query", "Release one private aggregation of a Parquet/CSV table."),
    "ldp": ("_ldp", "app", "Local differential privacy: simulate clients and server."),
    "audit": (
        "_audit",
        "app",
        "Audit a mechanism: an epsilon lower bound with its confidence, and a verdict.",
    ),
    "account": (
        "_account",
        "app",
        "Privacy accounting: epsilon of a schedule by every applicable accountant.",
    ),
    "serve": (
        "_serve",
        "app",
        "Run the curator service (dpkit serve DATA ...) or manage its tokens.",
    ),
    "risk": (
        "_risk",
        "risk",
        "What a guarantee lets an attacker do: attack rates, posterior, reconstruction.",
    ),
    "report": (
        "_risk",
        "report",
        "Write the privacy report of a budget (HTML or Markdown, with a JSON twin).",
    ),
}


def _load(name: str) -> Any:
    """Import subcommand ``name`` and build its click command (help made plain)."""
    module, attr, help_text = _SUBCOMMANDS[name]
    target: typer.Typer | Callable[..., Any] = getattr(
        importlib.import_module(f"dpkit.cli.{module}"), attr
    )
    if isinstance(target, typer.Typer):
        _clean_tree(target)
        group = typer.main.get_group(target)
        group.name = name
        return group
    single = typer.Typer(add_completion=False)
    single.command(name, help=help_text)(target)
    _clean_tree(single)
    return typer.main.get_command(single)


app = typer.Typer(
    name="dpkit",
    help="Differential privacy: private statistics, accounting, local DP and auditing.",
    no_args_is_help=True,
    add_completion=False,
    cls=_RootGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print the dpkit version and exit.",
    ),
) -> None:
    """Differential privacy: private statistics, accounting, local DP and auditing."""


_clean_tree(app)


def main() -> None:
    """Console entry point."""
    app()
