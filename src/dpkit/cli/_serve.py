"""``dpkit serve``: the curator service, and ``dpkit serve token ...`` to manage its tokens.

Example::

    dpkit serve token add curator --curator --ledger sqlite:///budget.db
    dpkit serve token add alice --epsilon 1 --delta 1e-7 --ledger sqlite:///budget.db
    dpkit serve people.parquet --privacy-unit user_id --budget epsilon=3,delta=1e-6 \\
        --ledger sqlite:///budget.db --port 8000

Tokens are printed once and stored hashed. FastAPI and uvicorn are imported only here (the
``service`` extra).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dpkit.cli import PRIVACY_UNIT_OPTION, ROWS_ARE_PEOPLE_OPTION, PlainGroup
from dpkit.errors import DPKitError, PrivacyParameterError

__all__ = ["app", "parse_budget"]


class _DefaultGroup(PlainGroup):
    """``dpkit serve DATA ...`` runs the service; ``dpkit serve token ...`` manages tokens."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_DefaultGroup,
    no_args_is_help=True,
    help="Run the curator service (dpkit serve DATA ...) or manage its tokens.",
)
token_app = typer.Typer(no_args_is_help=True, help="Issue, list and revoke bearer tokens.")
app.add_typer(token_app, name="token")

_LEDGER = typer.Option("--ledger", help="ledger database: sqlite:///path.db or postgresql://...")
_STATE = typer.Option("--state", help="tokens and query log database (default: the ledger's)")


def parse_budget(text: str) -> dict[str, float]:
    """``epsilon=3,delta=1e-6`` -> ``{"epsilon": 3.0, "delta": 1e-6}`` (validated later)."""
    out: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in ("epsilon", "delta") or key in out:
            raise PrivacyParameterError(f"--budget takes epsilon=E[,delta=D], got {text!r}")
        try:
            out[key] = float(value)
        except ValueError:
            raise PrivacyParameterError(f"--budget: {value!r} is not a number") from None
    if "epsilon" not in out:
        raise PrivacyParameterError(f"--budget needs epsilon=..., got {text!r}")
    return out


@app.command("run", help="Start the service on one table (the default subcommand).")
def run(
    data: Annotated[str, typer.Argument(help="Parquet or CSV file (or glob)")],
    budget: Annotated[str, typer.Option("--budget", help="the data's total: epsilon=E,delta=D")],
    privacy_unit: Annotated[str | None, PRIVACY_UNIT_OPTION] = None,
    rows_are_people: Annotated[bool, ROWS_ARE_PEOPLE_OPTION] = False,
    ledger: Annotated[str, _LEDGER] = "sqlite:///budget.db",
    state: Annotated[str | None, _STATE] = None,
    name: Annotated[str, typer.Option("--name", help="the budget's name in the ledger")] = "budget",
    method: Annotated[
        str,
        typer.Option("--method", help="accounting of an (epsilon, delta) budget: basic or zcdp"),
    ] = "basic",
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port")] = 8000,
    rate: Annotated[float, typer.Option("--rate", help="requests per second per token")] = 20.0,
    burst: Annotated[int, typer.Option("--burst", help="burst size per token")] = 40,
    max_body: Annotated[int, typer.Option("--max-body", help="largest request body, bytes")] = 10
    * 1024
    * 1024,
    cache: Annotated[
        bool, typer.Option("--cache/--no-cache", help="load a Parquet table into memory once")
    ] = True,
) -> None:
    """Start the curator service."""
    if (privacy_unit is None) == (not rows_are_people):
        raise typer.BadParameter(
            "say who the service protects: --privacy-unit COL (the column identifying a "
            "person) or --rows-are-people (each row is a different person), not both"
            if rows_are_people
            else "say who the service protects: --privacy-unit COL (the column identifying a "
            "person) or --rows-are-people (each row is a different person)"
        )
    try:
        import uvicorn

        from dpkit.service.app import ServiceConfig, create_app
    except ImportError as exc:  # pragma: no cover - the service extra is missing
        raise typer.BadParameter(
            f"the service needs FastAPI and uvicorn (dpkit's service extra): pip install "
            f"fastapi uvicorn: {exc}"
        ) from None
    b = parse_budget(budget)
    config = ServiceConfig(
        data=data,
        budget_epsilon=b["epsilon"],
        budget_delta=b.get("delta", 0.0),
        privacy_unit=privacy_unit,
        ledger_url=ledger,
        state_url=state,
        budget_name=name,
        method=method,
        rate=rate,
        burst=burst,
        max_body_bytes=max_body,
        cache=cache,
    )
    application = create_app(config)
    curator = application.state.curator
    if not any(t.role == "curator" and not t.revoked for t in curator.state.tokens()):
        typer.echo(
            "note: no curator token yet; issue one with `dpkit serve token add NAME --curator`",
            err=True,
        )
    typer.echo(
        f"dpkit service on http://{host}:{port} (API docs at /docs, curator page at /curator)",
        err=True,
    )
    typer.echo(
        f"protects each {privacy_unit}, all of its rows together"
        if privacy_unit
        else "protects each row, not each person (--rows-are-people): a person with "
        "several rows is less protected",
        err=True,
    )
    uvicorn.run(application, host=host, port=port, log_level="warning")


def _state(ledger: str, state: str | None) -> Any:
    from dpkit.service import ServiceState

    return ServiceState(state or ledger)


@token_app.command("add", help="Issue a token (printed once; stored hashed).")
def token_add(
    name: Annotated[str, typer.Argument(help="analyst (or curator) name")],
    epsilon: Annotated[
        float | None, typer.Option("--epsilon", help="the analyst's epsilon cap")
    ] = None,
    delta: Annotated[float | None, typer.Option("--delta", help="the analyst's delta cap")] = None,
    curator: Annotated[bool, typer.Option("--curator", help="a curator token (web page)")] = False,
    ledger: Annotated[str, _LEDGER] = "sqlite:///budget.db",
    state: Annotated[str | None, _STATE] = None,
) -> None:
    """Issue a token for an analyst (with a sub-budget) or the curator."""
    from dpkit._numeric.validation import check_delta, check_epsilon

    if not name or len(name) > 64 or not name.replace("_", "").replace("-", "").isalnum():
        raise PrivacyParameterError(f"a token name is 1-64 letters, digits, - or _; got {name!r}")
    if curator:
        if epsilon is not None or delta is not None:
            raise PrivacyParameterError("a curator token has no budget: drop --epsilon/--delta")
        role, eps, dlt = "curator", None, None
    else:
        if epsilon is None:
            raise PrivacyParameterError("an analyst token needs --epsilon (the sub-budget)")
        role = "analyst"
        eps = check_epsilon(epsilon, name="--epsilon")
        dlt = None if delta is None else check_delta(delta, name="--delta")
    st = _state(ledger, state)
    try:
        token = st.add_token(name, role=role, epsilon=eps, delta=dlt)
    except DPKitError as exc:
        raise PrivacyParameterError(str(exc)) from None
    finally:
        st.close()
    typer.echo(token)


@token_app.command("list", help="List tokens (names, roles and caps; never the tokens).")
def token_list(
    ledger: Annotated[str, _LEDGER] = "sqlite:///budget.db",
    state: Annotated[str | None, _STATE] = None,
) -> None:
    """List issued tokens."""
    st = _state(ledger, state)
    try:
        for t in st.tokens():
            typer.echo(
                f"{t.name}\t{t.role}\tepsilon={t.epsilon}\tdelta={t.delta}\t"
                f"{'revoked' if t.revoked else 'active'}"
            )
    finally:
        st.close()


@token_app.command("revoke", help="Revoke a token (its name and spending stay recorded).")
def token_revoke(
    name: Annotated[str, typer.Argument(help="analyst (or curator) name")],
    ledger: Annotated[str, _LEDGER] = "sqlite:///budget.db",
    state: Annotated[str | None, _STATE] = None,
) -> None:
    """Revoke a token."""
    st = _state(ledger, state)
    try:
        if not st.revoke(name):
            raise PrivacyParameterError(f"no token named {name!r}")
    finally:
        st.close()
    typer.echo(f"revoked {name}")
