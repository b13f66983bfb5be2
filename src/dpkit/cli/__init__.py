"""The ``dpkit`` command line. Subcommands live in their own modules.

Three things are decided here once for every subcommand:

* ``-h`` and ``--help`` both print help, and ``dpkit --version`` prints the version;
* help text is plain: reStructuredText roles and literals written for the API documentation
  (````x````, ``:func:`x```, ``**x**``) are reduced to their text, and square brackets are
  escaped so the terminal renderer never takes them for markup;
* an error dpkit raises on purpose (:class:`dpkit.errors.DPKitError`: a bad privacy parameter,
  an exceeded budget, ...) is printed as one clean message and exits with code 2, without a
  traceback. Other exceptions are bugs and keep their traceback.

Exit codes: 0 success, 1 a finding (an audit proved a violation), 2 a usage or parameter error.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperGroup
from typer.models import CommandInfo, DefaultPlaceholder, ParameterInfo

from dpkit import __version__
from dpkit.errors import DPKitError, PrivacyParameterError

__all__ = ["CliError", "app", "main", "plain_help"]


class CliError(typer.BadParameter):
    """A clean command-line error: the message alone, exit code 2 (a usage error)."""

    def format_message(self) -> str:
        return self.message


class _Group(TyperGroup):
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


_RST_ROLE = re.compile(r":[a-z:]+:`~?([^`<]*?)(?:\s*<[^`]*>)?`")
_RST_LITERAL = re.compile(r"``([^`]+)``")
_RST_STRONG = re.compile(r"\*\*([^*]+)\*\*")


def plain_help(text: str | None) -> str | None:
    """Help text for the terminal: reStructuredText reduced to its words, brackets escaped."""
    if text is None:
        return None
    text = _RST_ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~")
                         else m.group(1), text)
    text = _RST_LITERAL.sub(r"\1", text)
    text = _RST_STRONG.sub(r"\1", text)
    return escape(text)


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
    if info.help is None and info.callback is not None:
        info.help = inspect.getdoc(info.callback)
    info.help = _clean(info.help)
    if info.callback is not None:
        _clean_parameters(info.callback)


def _clean_tree(group: typer.Typer) -> None:
    """Make every help text under ``group`` plain (commands, options, nested groups)."""
    group.info.help = _clean(group.info.help)
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


app = typer.Typer(
    name="dpkit",
    help="Differential privacy: private statistics, accounting, local DP and auditing.",
    no_args_is_help=True,
    add_completion=False,
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the dpkit version and exit."),
) -> None:
    """Differential privacy: private statistics, accounting, local DP and auditing."""


# Subcommand groups: (module under dpkit.cli, command name). Each module defines `app`.
_GROUPS: tuple[tuple[str, str], ...] = (
    ("_ldp", "ldp"), ("_audit", "audit"), ("_account", "account"), ("_serve", "serve"),
)


def _register() -> None:
    from dpkit.cli import _demo

    app.command("demo", help="Release private statistics of a generated dataset.")(_demo.demo)
    from dpkit.cli import _query

    app.command("query", help="Release one private aggregation of a Parquet/CSV table.")(
        _query.query)
    for module, name in _GROUPS:
        sub = importlib.import_module(f"dpkit.cli.{module}")
        app.add_typer(sub.app, name=name)
    _clean_tree(app)


_register()


def main() -> None:
    """Console entry point."""
    app()
