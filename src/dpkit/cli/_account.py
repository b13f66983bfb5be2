"""``dpkit account``: every applicable accountant's epsilon for a schedule, side by side.

Each row says whether its number is a guaranteed **upper bound** or an **estimate** (the GDP
central limit theorem can be optimistic). ``--plot PATH`` saves the privacy profiles
``delta(eps)`` (matplotlib, imported only then). The rows are computed by
:func:`dpkit.accounting.dpsgd_rows` and :func:`dpkit.accounting.laplace_rows`; this module only
parses options and formats. Errors reach the command line's one handler (:mod:`dpkit.cli`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dpkit._numeric.validation import check_probability

if TYPE_CHECKING:
    from dpkit.accounting.tables import AccountingRow

__all__ = ["app", "steps_from_epochs"]

app = typer.Typer(
    help="Privacy accounting: epsilon of a schedule by every applicable accountant.",
    no_args_is_help=True,
)


def steps_from_epochs(epochs: float, sampling_rate: float) -> int:
    """``ceil(epochs / q)`` (:func:`dpkit.accounting.dpsgd.dpsgd_schedule`): an epoch is
    ``1/q`` steps in expectation; rounding up never under-counts the steps (a relative 1e-9 is
    forgiven so that the representation error of ``q`` does not add a step)."""
    from dpkit.accounting.dpsgd import dpsgd_schedule

    check_probability(sampling_rate, name="sampling_rate", open_low=True)
    return dpsgd_schedule(sampling_rate=sampling_rate, epochs=epochs)[1]


def _print(title: str, rows: list[AccountingRow], delta: float) -> None:
    table = Table(title=Text(title))
    table.add_column("accountant")
    table.add_column(f"epsilon at delta={delta:g}", justify="right")
    table.add_column("kind")
    table.add_column("time (s)", justify="right")
    for r in rows:
        table.add_row(Text(r.name), f"{r.epsilon:.5f}", Text(r.kind), f"{r.seconds:.3f}")
    Console().print(table)


def _plot(rows: list[AccountingRow], path: Path, title: str) -> None:
    import matplotlib
    import numpy as np

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


@app.command("dpsgd")
def dpsgd(
    delta: float = typer.Option(..., "--delta", help="target delta"),
    sampling_rate: float | None = typer.Option(
        None, "--sampling-rate", help="Poisson sampling rate q (or --batch-size/--dataset-size)"
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", help="expected batch size (q = batch size / dataset size)"
    ),
    dataset_size: int | None = typer.Option(None, "--dataset-size", help="number of records"),
    noise_multiplier: float | None = typer.Option(
        None, "--noise-multiplier", help="sigma / clip norm (or --target-epsilon)"
    ),
    target_epsilon: float | None = typer.Option(
        None,
        "--target-epsilon",
        help="find the smallest noise multiplier whose PLD epsilon is at most this",
    ),
    epochs: float | None = typer.Option(None, "--epochs", help="epochs (steps = ceil(E / q))"),
    steps: int | None = typer.Option(None, "--steps", help="number of steps"),
    plot: Annotated[
        Path | None, typer.Option("--plot", help="save the privacy profiles here")
    ] = None,
    scheme: str = typer.Option(
        "poisson",
        "--scheme",
        help=(
            "batching: poisson, truncated_poisson, fixed_size, shuffle, cyclic, user_poisson, "
            "balls_in_bins"
        ),
    ),
    max_batch_size: int | None = typer.Option(
        None, "--max-batch-size", help="truncated_poisson: the largest batch"
    ),
    examples_per_user: int | None = typer.Option(
        None, "--examples-per-user", help="user_poisson: examples taken from one person"
    ),
    monte_carlo: int | None = typer.Option(
        None,
        "--monte-carlo",
        help="balls_in_bins: also a Monte Carlo ESTIMATE from this many simulated runs "
        "(confidence 0.99; not a proof)",
    ),
) -> None:
    """Epsilon of DP-SGD (Poisson-subsampled Gaussian, add/remove neighbours), or with
    --target-epsilon the noise multiplier that reaches it. Other batching schemes with
    --scheme: the proven upper bound and a lower bound, with the neighbouring relation."""
    from dpkit.accounting import dpsgd_rows
    from dpkit.accounting.dpsgd import dpsgd_noise_multiplier, dpsgd_schedule

    if monte_carlo is not None and scheme != "balls_in_bins":
        raise typer.BadParameter("--monte-carlo is for --scheme balls_in_bins only")
    if scheme != "poisson" or max_batch_size is not None or examples_per_user is not None:
        _dpsgd_scheme(
            delta=delta,
            batch_size=batch_size,
            dataset_size=dataset_size,
            noise_multiplier=noise_multiplier,
            target_epsilon=target_epsilon,
            epochs=epochs,
            steps=steps,
            scheme=scheme,
            max_batch_size=max_batch_size,
            examples_per_user=examples_per_user,
            monte_carlo=monte_carlo,
        )
        return

    if (noise_multiplier is None) == (target_epsilon is None):
        raise typer.BadParameter("give exactly one of --noise-multiplier and --target-epsilon")
    q, n = dpsgd_schedule(
        sampling_rate=sampling_rate,
        batch_size=batch_size,
        dataset_size=dataset_size,
        steps=steps,
        epochs=epochs,
    )
    if target_epsilon is not None:
        noise_multiplier = dpsgd_noise_multiplier(
            sampling_rate=q, steps=n, epsilon=target_epsilon, delta=delta
        )
        Console().print(
            Text(
                f"noise multiplier: {noise_multiplier:.6g} (PLD epsilon <= {target_epsilon:g} "
                f"at delta={delta:g}, q={q:g}, steps={n})"
            )
        )
    assert noise_multiplier is not None
    rows = dpsgd_rows(sampling_rate=q, noise_multiplier=noise_multiplier, steps=n, delta=delta)
    title = f"DP-SGD: q={q:g}, sigma={noise_multiplier:g}, steps={n}"
    _print(title, rows, delta)
    if plot is not None:
        _plot(rows, plot, title)
        Console().print(Text(f"privacy profiles saved to {plot}"))


def _dpsgd_scheme(
    *,
    delta: float,
    batch_size: int | None,
    dataset_size: int | None,
    noise_multiplier: float | None,
    target_epsilon: float | None,
    epochs: float | None,
    steps: int | None,
    scheme: str,
    max_batch_size: int | None,
    examples_per_user: int | None,
    monte_carlo: int | None = None,
) -> None:
    """``dpkit account dpsgd --scheme ...``: bounds of :mod:`dpkit.accounting.batching`
    (and, with ``--monte-carlo``, the labelled estimate of :mod:`dpkit.accounting.montecarlo`)."""
    from dpkit.accounting.batching import BatchScheme, dpsgd_bounds
    from dpkit.accounting.dpsgd import dpsgd_noise_multiplier

    if (noise_multiplier is None) == (target_epsilon is None):
        raise typer.BadParameter("give exactly one of --noise-multiplier and --target-epsilon")
    if batch_size is None or dataset_size is None:
        raise typer.BadParameter(f"--scheme {scheme} needs --batch-size and --dataset-size")
    sch = BatchScheme(
        name=scheme,
        dataset_size=dataset_size,
        batch_size=batch_size,
        max_batch_size=max_batch_size,
        examples_per_user=examples_per_user,
    )
    if target_epsilon is not None:
        noise_multiplier = dpsgd_noise_multiplier(
            epsilon=target_epsilon,
            delta=delta,
            batch_size=batch_size,
            dataset_size=dataset_size,
            epochs=epochs,
            steps=steps,
            scheme=scheme,
            max_batch_size=max_batch_size,
            examples_per_user=examples_per_user,
        )
        Console().print(
            Text(
                f"noise multiplier: {noise_multiplier:.6g} (upper bound on "
                f"epsilon <= {target_epsilon:g} at delta={delta:g})"
            )
        )
    assert noise_multiplier is not None
    b = dpsgd_bounds(
        sch, noise_multiplier=noise_multiplier, delta=delta, steps=steps, epochs=epochs
    )
    relation = "add/remove" if b.relation.value == "add_remove" else "replace-one"
    if scheme == "user_poisson":
        relation += " of one person"
    Console().print(
        Text(
            f"DP-SGD, scheme {scheme} ({relation} neighbours): sigma={noise_multiplier:g}, "
            f"steps={b.steps}, delta={delta:g}\n"
            f"  epsilon upper bound (proven): {b.upper:.4g}\n"
            f"  epsilon lower bound:          {b.lower:.4g}"
            + ("  (the pair is attained: the gap is numerical)" if b.upper_is_tight else "")
            + (
                f"\n  truncation mass in delta:     {b.truncation_mass:.3g}"
                if scheme == "truncated_poisson"
                else ""
            )
        )
    )
    if monte_carlo is not None:
        from dpkit.accounting.montecarlo import balls_in_bins_estimate

        est = balls_in_bins_estimate(
            sch,
            noise_multiplier=noise_multiplier,
            delta=delta,
            steps=steps,
            epochs=epochs,
            samples=monte_carlo,
        )
        Console().print(
            Text(
                f"  epsilon ESTIMATE (Monte Carlo, {est.samples} runs, not a proof): "
                f"{est.estimate:.4g}\n"
                f"    at least the true epsilon of Chua et al.'s pair with probability "
                f"{est.confidence:g} over dpkit's random draws"
            )
        )


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
    from dpkit.accounting import laplace_rows

    rows = laplace_rows(epsilon=epsilon, count=count, delta=delta)
    title = f"{count} Laplace releases, epsilon={epsilon:g} each"
    _print(title, rows, delta)
    if plot is not None:
        _plot(rows, plot, title)
        Console().print(Text(f"privacy profiles saved to {plot}"))
