"""``dpkit account``: every applicable accountant's epsilon for a schedule, side by side.

Each row says whether its number is a guaranteed **upper bound** or an **estimate** (the GDP
central limit theorem can be optimistic). ``--plot PATH`` saves the privacy profiles
``delta(eps)`` (matplotlib, imported only then).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_positive,
    check_probability,
)
from dpkit.errors import DPKitError
from dpkit.events import GaussianEvent, LaplaceEvent, PoissonSampledEvent

__all__ = ["Row", "app", "dpsgd_rows", "laplace_rows", "steps_from_epochs"]

app = typer.Typer(
    help="Privacy accounting: epsilon of a schedule by every applicable accountant.",
    no_args_is_help=True,
)

UPPER = "upper bound"
ESTIMATE = "estimate"
LOWER = "lower bound"


@dataclass(frozen=True)
class Row:
    """One line of the table: accountant, epsilon, kind, seconds, and its profile (or None)."""

    name: str
    epsilon: float
    kind: str
    seconds: float
    profile: Callable[[float], float] | None = None


def _timed(fn: Callable[[], float]) -> tuple[float, float]:
    t0 = time.perf_counter()
    val = fn()
    return val, time.perf_counter() - t0


def steps_from_epochs(epochs: float, sampling_rate: float) -> int:
    """``ceil(epochs / q)`` (:func:`dpkit.accounting.dpsgd.dpsgd_schedule`): an epoch is
    ``1/q`` steps in expectation; rounding up never under-counts the steps (a relative 1e-9 is
    forgiven so that the representation error of ``q`` does not add a step)."""
    from dpkit.accounting.dpsgd import dpsgd_schedule

    check_probability(sampling_rate, name="sampling_rate", open_low=True)
    return dpsgd_schedule(sampling_rate=sampling_rate, epochs=epochs)[1]


def dpsgd_rows(*, sampling_rate: float, noise_multiplier: float, steps: int,
               delta: float) -> list[Row]:
    """PLD (upper bound, lower bound), RDP (upper bound) and GDP-CLT (estimate) for DP-SGD."""
    from dpkit import fdp
    from dpkit.accounting.gdp import dpsgd_gdp_mu
    from dpkit.accounting.pld import PldAccountant
    from dpkit.accounting.rdp import RdpAccountant

    q = check_probability(sampling_rate, name="sampling_rate")
    s = check_positive("noise_multiplier", noise_multiplier)
    n = check_integer(steps, name="steps", minimum=0)
    d = check_delta(delta)
    ev = PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=s))
    rows: list[Row] = []

    pld = PldAccountant()
    pld.compose(ev, n)
    (lo, _, up), sec = _timed_bounds(lambda: pld.get_epsilon_bounds(d))
    rows.append(Row("PLD (dpkit)", up, UPPER, sec, pld.get_delta))
    rows.append(Row("PLD (dpkit)", lo, LOWER, sec))

    rdp = RdpAccountant()
    eps, sec = _timed(lambda: rdp.compose(ev, n).get_epsilon(d))
    rows.append(Row("RDP (dpkit)", eps, UPPER, sec, rdp.get_delta))

    mu, sec = _timed(lambda: dpsgd_gdp_mu(sampling_rate=q, noise_multiplier=s, steps=n))
    g = fdp.gdp(mu)
    eps, sec2 = _timed(lambda: g.epsilon(d))
    rows.append(Row(f"GDP CLT (mu = {mu:.4g})", eps, ESTIMATE, sec + sec2, g.delta))
    return rows


def _timed_bounds(
    fn: Callable[[], tuple[float, float, float]]
) -> tuple[tuple[float, float, float], float]:
    t0 = time.perf_counter()
    val = fn()
    return val, time.perf_counter() - t0


def laplace_rows(*, epsilon: float, count: int, delta: float) -> list[Row]:
    """``count`` Laplace releases, each epsilon-DP: PLD, RDP, GDP-CLT and the composition
    theorems (basic, advanced with ``delta_slack = delta``, optimal of Kairouz-Oh-Viswanath)."""
    from dpkit.accounting.composition import (
        advanced_composition,
        basic_composition,
        optimal_composition,
        optimal_composition_delta,
    )
    from dpkit.accounting.gdp import GdpAccountant
    from dpkit.accounting.pld import PldAccountant
    from dpkit.accounting.rdp import RdpAccountant

    e = check_epsilon(epsilon)
    k = check_integer(count, name="count", minimum=0)
    d = check_delta(delta)
    ev = LaplaceEvent(noise_multiplier=1.0 / e)
    rows: list[Row] = []

    pld = PldAccountant()
    pld.compose(ev, k)
    (lo, _, up), sec = _timed_bounds(lambda: pld.get_epsilon_bounds(d))
    rows.append(Row("PLD (dpkit)", up, UPPER, sec, pld.get_delta))
    rows.append(Row("PLD (dpkit)", lo, LOWER, sec))

    rdp = RdpAccountant()
    eps, sec = _timed(lambda: rdp.compose(ev, k).get_epsilon(d))
    rows.append(Row("RDP (dpkit)", eps, UPPER, sec, rdp.get_delta))

    gdp = GdpAccountant()
    eps, sec = _timed(lambda: gdp.compose(ev, k).get_epsilon(d))
    kind = UPPER if gdp.is_upper_bound else ESTIMATE
    rows.append(Row("GDP CLT (dpkit)", eps, kind, sec, gdp.get_delta))

    eps, sec = _timed(lambda: basic_composition(epsilons=[e] * k)[0])
    basic = eps
    rows.append(Row("basic composition", eps, UPPER, sec,
                    lambda x: 0.0 if x >= basic else 1.0))
    if d > 0.0:
        eps, sec = _timed(lambda: advanced_composition(epsilon=e, count=k, delta_slack=d))
        rows.append(Row("advanced composition", eps, UPPER, sec))
    eps, sec = _timed(lambda: optimal_composition(epsilon=e, count=k, delta=d))
    rows.append(Row("optimal composition (KOV)", eps, UPPER, sec,
                    lambda x: optimal_composition_delta(epsilon=e, count=k, target_epsilon=x)))
    return rows


def _print(title: str, rows: list[Row], delta: float) -> None:
    table = Table(title=title)
    table.add_column("accountant")
    table.add_column(f"epsilon at delta={delta:g}", justify="right")
    table.add_column("kind")
    table.add_column("time (s)", justify="right")
    for r in rows:
        table.add_row(r.name, f"{r.epsilon:.5f}", r.kind, f"{r.seconds:.3f}")
    Console().print(table)


def _plot(rows: list[Row], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    finite = [r.epsilon for r in rows if math.isfinite(r.epsilon) and r.epsilon > 0.0]
    top = 2.5 * min(finite) if finite else 10.0  # around the tightest answer
    grid = np.linspace(0.0, top, 120)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        if r.profile is None:
            continue
        ys = np.array([r.profile(float(x)) for x in grid])
        ax.plot(grid, np.maximum(ys, 1e-300), label=f"{r.name} ({r.kind})")
    ax.set_yscale("log")
    ax.set_ylim(1e-12, 1.1)
    ax.set_xlabel("epsilon")
    ax.set_ylabel("delta(epsilon)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _fail(exc: DPKitError) -> None:
    Console(stderr=True).print(f"[red]error:[/red] {exc}")
    raise typer.Exit(code=2)


@app.command("dpsgd")
def dpsgd(
    delta: float = typer.Option(..., "--delta", help="target delta"),
    sampling_rate: float | None = typer.Option(
        None, "--sampling-rate", help="Poisson sampling rate q (or --batch-size/--dataset-size)"),
    batch_size: int | None = typer.Option(
        None, "--batch-size", help="expected batch size (q = batch size / dataset size)"),
    dataset_size: int | None = typer.Option(None, "--dataset-size", help="number of records"),
    noise_multiplier: float | None = typer.Option(
        None, "--noise-multiplier", help="sigma / clip norm (or --target-epsilon)"),
    target_epsilon: float | None = typer.Option(
        None, "--target-epsilon",
        help="find the smallest noise multiplier whose PLD epsilon is at most this"),
    epochs: float | None = typer.Option(None, "--epochs", help="epochs (steps = ceil(E / q))"),
    steps: int | None = typer.Option(None, "--steps", help="number of steps"),
    plot: Annotated[
        Path | None, typer.Option("--plot", help="save the privacy profiles here")
    ] = None,
) -> None:
    """Epsilon of DP-SGD (Poisson-subsampled Gaussian, add/remove neighbours), or with
    --target-epsilon the noise multiplier that reaches it."""
    from dpkit.accounting.dpsgd import dpsgd_noise_multiplier, dpsgd_schedule

    try:
        if (noise_multiplier is None) == (target_epsilon is None):
            raise typer.BadParameter("give exactly one of --noise-multiplier and --target-epsilon")
        q, n = dpsgd_schedule(sampling_rate=sampling_rate, batch_size=batch_size,
                              dataset_size=dataset_size, steps=steps, epochs=epochs)
        if target_epsilon is not None:
            noise_multiplier = dpsgd_noise_multiplier(
                sampling_rate=q, steps=n, epsilon=target_epsilon, delta=delta)
            Console().print(
                f"noise multiplier: {noise_multiplier:.6g} (PLD epsilon <= {target_epsilon:g} "
                f"at delta={delta:g}, q={q:g}, steps={n})"
            )
        assert noise_multiplier is not None
        rows = dpsgd_rows(sampling_rate=q, noise_multiplier=noise_multiplier,
                          steps=n, delta=delta)
    except DPKitError as exc:
        _fail(exc)
        return
    title = f"DP-SGD: q={q:g}, sigma={noise_multiplier:g}, steps={n}"
    _print(title, rows, delta)
    if plot is not None:
        _plot(rows, plot, title)
        Console().print(f"privacy profiles saved to {plot}")


@app.command("laplace")
def laplace(
    epsilon: float = typer.Option(..., "--epsilon", help="epsilon of each Laplace release"),
    count: int = typer.Option(..., "--count", help="number of releases"),
    delta: float = typer.Option(..., "--delta", help="target delta"),
    plot: Annotated[
        Path | None, typer.Option("--plot", help="save the privacy profiles here")
    ] = None,
) -> None:
    """Epsilon of ``count`` Laplace releases of ``epsilon`` each."""
    try:
        rows = laplace_rows(epsilon=epsilon, count=count, delta=delta)
    except DPKitError as exc:
        _fail(exc)
        return
    title = f"{count} Laplace releases, epsilon={epsilon:g} each"
    _print(title, rows, delta)
    if plot is not None:
        _plot(rows, plot, title)
        Console().print(f"privacy profiles saved to {plot}")
