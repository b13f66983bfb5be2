"""``dpkit risk`` and ``dpkit report``: what a guarantee lets an attacker do, and the privacy
report of a budget.

Both only read: nothing is charged. The figures come from :mod:`dpkit.risk` (upper bounds on
any attacker, rounded up); this module parses options and formats. Errors reach the command
line's one handler (:mod:`dpkit.cli`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["report", "risk"]


def risk(
    epsilon: float | None = typer.Option(None, "--epsilon", help="epsilon of the guarantee"),
    delta: float = typer.Option(0.0, "--delta", help="delta of the guarantee (with --epsilon)"),
    mu: float | None = typer.Option(None, "--mu", help="mu of a Gaussian-DP guarantee"),
    rho: float | None = typer.Option(None, "--rho", help="rho of a zCDP guarantee"),
    event: Annotated[
        Path | None,
        typer.Option(
            "--event", help="a JSON file holding one event (as dpkit.events.event_to_json writes)"
        ),
    ] = None,
    budget: Annotated[
        Path | None,
        typer.Option("--budget", help="a JSON file holding a budget (as Budget.to_json writes)"),
    ] = None,
    prior: float = typer.Option(0.01, "--prior", help="the attacker's prior belief"),
    baseline: float = typer.Option(
        1e-3, "--baseline", help="chance of guessing a record without the release"
    ),
    group: int = typer.Option(1, "--group", help="size of the group of people protected"),
    as_json: bool = typer.Option(False, "--json", help="print the figures as JSON"),
) -> None:
    """What a guarantee lets an attacker do: the largest membership-attack rates, the highest
    posterior belief, the reconstruction bound (upper bounds, rounded up).

    Give one guarantee: --epsilon (with --delta), --mu, --rho, --event or --budget.
    """
    from dpkit import risk as risk_mod

    obj: Any = None
    if event is not None:
        from dpkit.events import event_from_json

        obj = event_from_json(event.read_text(encoding="utf-8"))
    if budget is not None:
        if obj is not None:
            raise typer.BadParameter("give --event or --budget, not both")
        from dpkit.accounting import Budget

        obj = Budget.from_json(budget.read_text(encoding="utf-8"))
    r = risk_mod.of(obj, epsilon=epsilon, delta=delta, mu=mu, rho=rho).group(group)
    if as_json:
        typer.echo(json.dumps(r.to_dict(prior=prior, baseline=baseline), indent=2))
        return
    typer.echo(f"Guarantee: {r.source}" + (f", for groups of {group}" if group > 1 else ""))
    typer.echo("Largest true-positive rate of any membership attack (upper bounds):")
    for fpr, tpr in r.low_fpr_rates().items():
        typer.echo(f"  at false-positive rate {fpr:.0e}: {risk_mod.percent(tpr)}")
    for line in r.statements(prior=prior, baseline=baseline):
        typer.echo(f"- {line}")


def report(
    source: str = typer.Argument(
        ..., help="a budget JSON file (Budget.to_json) or a ledger URL (sqlite:///path.db)"
    ),
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="the page to write: .html, .md or .json (a JSON twin is "
            "written beside an HTML or Markdown page)",
        ),
    ] = Path("privacy-report.html"),
    name: str = typer.Option("budget", "--name", help="the budget's name in the ledger"),
    title: str | None = typer.Option(None, "--title", help="the page's title"),
    privacy_unit: str | None = typer.Option(
        None, "--privacy-unit", help="what one person is, in words (e.g. a column name)"
    ),
) -> None:
    """Write the privacy report of a budget: what was released, by whom and when, what it
    cost, what an attacker can do, and what is assumed. Nothing is charged."""
    from dpkit.accounting import Budget
    from dpkit.risk import report as make_report

    if "://" in source:
        from dpkit.ledger import open_ledger

        budget = Budget.open(open_ledger(source), name)
    else:
        budget = Budget.from_json(Path(source).read_text(encoding="utf-8"))
    unit = None if privacy_unit is None else f"each person: all rows with the same {privacy_unit!r}"
    page = make_report(budget, title=title, privacy_unit=unit).write(output)
    typer.echo(
        f"wrote {page}" + ("" if page.suffix == ".json" else f" and {page.with_suffix('.json')}")
    )
