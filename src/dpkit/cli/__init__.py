"""The ``dpkit`` command line. Subcommands live in their own modules and are imported lazily."""

from __future__ import annotations

import importlib

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    name="dpkit",
    help="Differential privacy: private statistics, accounting, local DP and auditing.",
    no_args_is_help=True,
    add_completion=False,
)



@app.callback()
def _root() -> None:
    """Differential privacy: private statistics, accounting, local DP and auditing."""


# Subcommand groups: (module under dpkit.cli, command name). Each module defines `app`.
_GROUPS: tuple[tuple[str, str], ...] = (
    ("_ldp", "ldp"), ("_audit", "audit"), ("_account", "account"),
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


_register()


def main() -> None:
    """Console entry point."""
    app()
