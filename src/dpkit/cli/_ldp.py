"""``dpkit ldp``: simulate a local-DP collection (clients and server) on a generated population."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from dpkit import ldp
from dpkit.noise import RandomSource

__all__ = ["app", "heavy_hitters", "make_protocol", "shuffle", "simulate", "zipf_population"]

app = typer.Typer(
    help="Local differential privacy: simulate clients and server.", no_args_is_help=True
)

BATCH = 1 << 17


def zipf_population(
    source: RandomSource, *, users: int, domain: int, exponent: float
) -> npt.NDArray[np.int64]:
    """``users`` values on ``{0..domain-1}`` with ``P(k) ~ (k + 1)^-exponent`` (inverse CDF)."""
    weights = np.arange(1, domain + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    idx = np.searchsorted(cdf, source.uniform(users), side="right")
    return np.minimum(idx, domain - 1).astype(np.int64)


def make_protocol(name: str, *, epsilon: float, domain: int) -> Any:
    """The protocol called ``name`` in the registry :data:`dpkit.ldp.PROTOCOLS`, or ``best``."""
    return ldp.make_protocol(name, epsilon=epsilon, domain=domain)


@app.command("simulate")
def simulate(
    protocol: str = typer.Option("oue", "--protocol", help=", ".join(ldp.PROTOCOLS) + ", or best"),
    epsilon: float = typer.Option(1.0, "--epsilon", help="epsilon of each user's report"),
    domain: int = typer.Option(1024, "--domain", help="domain size (frequency protocols)"),
    users: int = typer.Option(100_000, "--users", help="number of simulated users"),
    zipf: float = typer.Option(1.1, "--zipf", help="Zipf exponent of the population"),
    seed: int | None = typer.Option(
        None,
        "--seed",
        help="seed the simulation (insecure: reproducible runs only); default: secure randomness",
    ),
    top: int = typer.Option(10, "--top", help="rows of the estimate-vs-truth table"),
    plot: str | None = typer.Option(None, "--plot", help="save an estimate-vs-truth plot (PNG)"),
) -> None:
    """Generate a Zipf population, randomize every user, aggregate, compare with the truth."""
    console = Console()
    proto = make_protocol(protocol, epsilon=epsilon, domain=2 if protocol == "rr" else domain)
    if users < 1:
        raise typer.BadParameter("--users must be at least 1")
    src = RandomSource(seed=seed, insecure=True) if seed is not None else RandomSource()
    d = proto.d if isinstance(proto, ldp.FrequencyOracle) else domain
    values = zipf_population(src, users=users, domain=d, exponent=zipf)
    agg = proto.aggregator()
    start = time.perf_counter()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,} users"),
        TimeElapsedColumn(),
        console=console,
        transient=users <= BATCH,
    ) as progress:
        task = progress.add_task(escape(f"{type(proto).__name__} eps={epsilon:g}"), total=users)
        for lo in range(0, users, BATCH):
            chunk = values[lo : lo + BATCH]
            if isinstance(proto, ldp.MeanMechanism):
                agg.add(proto.randomize_many(2.0 * chunk / max(d - 1, 1) - 1.0, source=src))
            else:
                agg.add(proto.randomize_many(chunk, source=src))
            progress.advance(task, chunk.size)
    elapsed = time.perf_counter() - start
    if isinstance(proto, ldp.MeanMechanism):
        _report_mean(console, proto, agg, values, d, elapsed)
        if plot is not None:
            console.print("[yellow]--plot draws frequency estimates; skipped for a mean[/]")
        return
    _report_frequency(
        console, proto, agg, values, users, top, elapsed, None if plot is None else Path(plot)
    )


@app.command("heavy-hitters")
def heavy_hitters(
    epsilon: float = typer.Option(2.0, "--epsilon", help="epsilon of each user's report"),
    bits: int = typer.Option(32, "--bits", help="items are integers of this many bits"),
    users: int = typer.Option(1_000_000, "--users", help="number of simulated users"),
    distinct: int = typer.Option(1 << 16, "--distinct", help="distinct items in the population"),
    zipf: float = typer.Option(1.1, "--zipf", help="Zipf exponent of the population"),
    top: int = typer.Option(20, "--top", help="how many heavy hitters to find"),
    hashes: int | None = typer.Option(
        None, "--hashes", help="hash functions per sketch (default: the protocol's own)"
    ),
    method: str = typer.Option(
        "pem",
        "--method",
        help="pem (prefix extension), tree (TreeHist: half the users give unbiased counts) or "
        "sfp (Apple's sequence fragment puzzle)",
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        help="seed the simulation (insecure: reproducible runs only); default: secure randomness",
    ),
) -> None:
    """Find the most frequent items of a Zipf population over a 2^bits domain (PEM, TreeHist
    or SFP)."""
    console = Console()
    if users < 1 or distinct < 1 or not 2 <= bits <= 62:
        raise typer.BadParameter("--users and --distinct must be positive, --bits in [2, 62]")
    methods = {"pem": ldp.PEM, "tree": ldp.TreeHistogram, "sfp": ldp.SFP}
    if method not in methods:
        raise typer.BadParameter("--method must be pem, tree or sfp")
    proto = methods[method](epsilon=epsilon, bits=bits, hashes=hashes)
    src = RandomSource(seed=seed, insecure=True) if seed is not None else RandomSource()
    ranks = zipf_population(src, users=users, domain=distinct, exponent=zipf)
    items = src.integers(1 << bits, distinct)  # the population's items, spread over the domain
    values = items[ranks]
    start = time.perf_counter()
    agg = proto.aggregator()
    for lo in range(0, users, BATCH):
        agg.add(proto.randomize_many(values[lo : lo + BATCH], source=src))
    found = agg.heavy_hitters(top=top)
    elapsed = time.perf_counter() - start
    truth = np.bincount(ranks, minlength=distinct)
    true_count = {int(items[r]): int(truth[r]) for r in np.argsort(-truth)[: 4 * top]}
    true_top = {int(items[r]) for r in np.argsort(-truth)[:top]}
    table = Table(title=Text(f"{proto!r}: {users:,} users, top {top}"))
    for col in ("item", "estimate", "95% interval", "true count", "truly top?"):
        table.add_column(col, justify="right")
    for item, c, lo, hi in zip(
        found.items.tolist(), found.counts, found.ci_low, found.ci_high, strict=True
    ):
        table.add_row(
            str(item),
            f"{c:,.0f}",
            f"[{lo:,.0f}, {hi:,.0f}]",
            f"{true_count.get(item, 0):,}",
            "yes" if item in true_top else "no",
        )
    console.print(table)
    recall = len(true_top & set(found.items.tolist())) / top
    console.print(
        f"recall of the true top {top}: {recall:.2f}   groups {found.group_sizes}   "
        f"rejected reports {found.rejected}   clients+server {elapsed:.2f} s"
    )


@app.command("shuffle")
def shuffle(
    epsilon: float = typer.Option(..., "--epsilon", help="local epsilon of each report"),
    users: int = typer.Option(..., "--users", help="number of shuffled reports"),
    delta: float = typer.Option(1e-8, "--delta", help="delta of the central guarantee"),
    randomized_response: bool = typer.Option(
        False, "--randomized-response", help="the reports are binary randomized response"
    ),
) -> None:
    """The central (epsilon, delta) of shuffled local reports (Feldman, McMillan, Talwar)."""
    from dpkit.errors import PrivacyParameterError

    method = "randomized_response" if randomized_response else "clones"
    try:
        bound = ldp.ShuffleBound.compute(epsilon0=epsilon, n=users, delta=delta, method=method)
    except PrivacyParameterError as exc:
        raise typer.BadParameter(str(exc)) from None
    Console().print(
        f"{users:,} shuffled reports at local epsilon {epsilon:g}: central "
        f"epsilon {bound.epsilon:.4g} at delta {delta:g} ({method} bound)"
    )


def _report_frequency(
    console: Console,
    proto: Any,
    agg: Any,
    values: npt.NDArray[np.int64],
    users: int,
    top: int,
    elapsed: float,
    plot: Path | None,
) -> None:
    est = agg.estimate()
    truth = np.bincount(values, minlength=proto.d).astype(np.float64)
    theory = np.array([proto.variance(users, f) for f in truth / users])
    mse = float(np.mean((est.raw_counts - truth) ** 2))
    table = Table(title=Text(f"{proto!r}: {users:,} users, estimate vs truth (top {top})"))
    for col in ("item", "true count", "estimate", "std error", "error / se"):
        table.add_column(col, justify="right")
    for v in np.argsort(-truth)[:top]:
        err = est.raw_counts[v] - truth[v]
        table.add_row(
            Text(str(est.labels[v])),
            f"{truth[v]:,.0f}",
            f"{est.raw_counts[v]:,.1f}",
            f"{est.std_errors[v]:,.1f}",
            f"{err / est.std_errors[v]:+.2f}",
        )
    console.print(table)
    console.print(
        f"MSE per item {mse:,.1f}   theoretical variance {theory.mean():,.1f}   "
        f"ratio {mse / theory.mean():.3f}   rejected reports {agg.rejected}   "
        f"clients+server {elapsed:.2f} s"
    )
    if plot is not None:
        _plot(plot, truth, est.raw_counts, est.std_errors, repr(proto))
        console.print(Text(f"plot written to {plot}"))


def _report_mean(
    console: Console, proto: Any, agg: Any, values: npt.NDArray[np.int64], d: int, elapsed: float
) -> None:
    est = agg.estimate()
    t = 2.0 * values / max(d - 1, 1) - 1.0
    var = proto.variance(values.size, float(np.mean(t * t)))
    table = Table(title=Text(f"{proto!r}: mean of {values.size:,} values in [-1, 1]"))
    for col in ("true mean", "estimate", "std error", "theoretical sd", "error / sd"):
        table.add_column(col, justify="right")
    err = est.mean - float(t.mean())
    table.add_row(
        f"{t.mean():.5f}",
        f"{est.mean:.5f}",
        f"{est.std_error:.5f}",
        f"{math.sqrt(var):.5f}",
        f"{err / math.sqrt(var):+.2f}",
    )
    console.print(table)
    console.print(
        f"squared error {err * err:.3e}   theoretical variance {var:.3e}   "
        f"clients+server {elapsed:.2f} s"
    )


def _plot(
    path: Path,
    truth: npt.NDArray[np.float64],
    est: npt.NDArray[np.float64],
    se: npt.NDArray[np.float64],
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    order = np.argsort(-truth)
    ranks = np.arange(1, truth.size + 1)
    ax.plot(ranks, truth[order], color="black", lw=1.5, label="true count")
    ax.errorbar(
        ranks,
        est[order],
        yerr=1.96 * se[order],
        fmt=".",
        ms=2,
        lw=0.3,
        alpha=0.6,
        label="estimate +- 1.96 se",
    )
    ax.set_xscale("log")
    ax.set_xlabel("item rank")
    ax.set_ylabel("count")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
