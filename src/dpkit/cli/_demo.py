"""``dpkit demo``: a private report over a generated table of a million rows, beside the truth.

The demo writes a synthetic "people" table (several yearly records for most people: ``user_id,
region, age, income``) as Parquet in a cache directory, opens a private analytics session with
a visible budget, and runs three queries on DuckDB:

1. people and mean income per region, the regions chosen by private partition selection;
2. a histogram of incomes;
3. the quartiles of age.

It prints each private value beside the true one (computed directly, without privacy) with its
95% interval, shows the budget spent after each query, and draws the private values with their
intervals over the true ones in a PNG (matplotlib, the ``plot`` extra).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dpkit.noise import RandomSource

__all__ = ["DemoReport", "demo", "generate_people", "run_demo"]

REGIONS = ("North", "South", "East", "West", "Central", "Islands", "Highlands", "Outpost")
_REGION_SHARE = np.array([0.25, 0.22, 0.20, 0.15, 0.12, 0.05, 0.01, 0.0])
_REGION_INCOME = np.array([1.10, 0.95, 1.00, 0.90, 1.20, 0.80, 0.85, 1.0])
INCOME_EDGES = (0.0, 20e3, 40e3, 60e3, 80e3, 100e3, 150e3, 200e3, 500e3)
INCOME_BOUNDS = (0.0, 500_000.0)
AGE_BOUNDS = (0.0, 120.0)
MAX_ROWS = 5
_DATA_VERSION = 2  # bump when generate_people changes (cache key)


def _normals(gen: RandomSource, n: int) -> npt.NDArray[np.float64]:
    u = gen.uniform((2, n))
    out: npt.NDArray[np.float64] = np.sqrt(-2.0 * np.log1p(-u[0])) * np.cos(2 * np.pi * u[1])
    return out


def generate_people(rows: int, seed: int = 7) -> Any:
    """A synthetic table of about ``rows`` yearly records (pandas; this is data, not a release).

    Each person has 1 to 5 records (one in 2,000 has 20 more: data-entry duplicates), one region,
    an age and a log-normal income that varies a little from year to year. The last region has
    only three people: private partition selection should hide it.
    """
    import pandas as pd

    gen = RandomSource(seed=seed, insecure=True)  # data generation only, never noise
    people = max(rows // 3, 10)
    per = 1 + gen.integers(5, people)
    heavy = gen.uniform(people) < 0.0005
    per[heavy] += 20
    u_reg = gen.uniform(people)
    region = np.searchsorted(np.cumsum(_REGION_SHARE), u_reg * _REGION_SHARE.sum(), side="right")
    region = np.minimum(region, len(REGIONS) - 2)
    region[:3] = len(REGIONS) - 1  # three people in the Outpost
    age = np.floor(18.0 + 72.0 * gen.uniform(people) ** 1.25)
    base = np.exp(10.7 + 0.55 * _normals(gen, people)) * _REGION_INCOME[region]
    uid = np.repeat(np.arange(people, dtype=np.int64), per)
    n = uid.size
    income = np.round(base[uid] * np.exp(0.12 * _normals(gen, n)), 2)
    return pd.DataFrame(
        {
            "user_id": uid,
            "region": np.array(REGIONS, dtype=object)[region[uid]],
            "age": age[uid],
            "income": income,
        }
    )


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "dpkit" / "demo"


def people_parquet(rows: int, seed: int, cache: Path | None = None) -> Path:
    """Write (once) and return the Parquet file of :func:`generate_people`."""
    folder = cache if cache is not None else _cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"people-v{_DATA_VERSION}-{rows}-{seed}.parquet"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        generate_people(rows, seed).to_parquet(tmp, index=False)
        tmp.replace(path)
    return path


@dataclass
class DemoReport:
    """Everything the demo shows: lines of (statistic, true, private, low, high), the frames."""

    path: Path
    rows: int
    people: int
    lines: list[tuple[str, float, float, float, float]] = field(default_factory=list)
    spent: list[tuple[str, float, float]] = field(default_factory=list)
    frames: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)
    budget: tuple[float, float] = (0.0, 0.0)
    seconds: float = 0.0


def run_demo(
    *,
    rows: int = 1_000_000,
    seed: int = 7,
    epsilon: float = 3.0,
    delta: float = 1e-6,
    cache: Path | None = None,
    source: RandomSource | None = None,
) -> DemoReport:
    """Generate the table and run the private report (see the module docstring)."""
    import pandas as pd

    import dpkit.analytics as dpa
    from dpkit.accounting import Budget

    t0 = time.perf_counter()
    path = people_parquet(rows, seed, cache)
    df = pd.read_parquet(path)
    budget = Budget(epsilon=epsilon, delta=delta)
    session = dpa.Session(
        str(path), privacy_unit="user_id", budget=budget, source_of_randomness=source
    )
    report = DemoReport(
        path=path, rows=len(df), people=int(df["user_id"].nunique()), budget=(epsilon, delta)
    )
    e1, e2, e3 = epsilon / 2, epsilon / 4, epsilon / 4
    d1, d2, d3 = delta / 2, delta / 4, delta / 4

    by_region = (
        session.query()
        .group_by("region")
        .bound(max_partitions=1, max_rows_per_partition=MAX_ROWS)
        .agg(people=dpa.count_distinct(), income=dpa.mean("income", bounds=INCOME_BOUNDS))
    )
    f1 = by_region.run(epsilon=e1, delta=d1).sort_values("region").reset_index(drop=True)
    report.frames["regions"] = f1
    report.spent.append(("people and mean income by region", *budget.spent))
    true_people = df.groupby("region")["user_id"].nunique()
    true_income = df.groupby("region")["income"].mean()
    report.truth["people"] = true_people
    report.truth["income"] = true_income
    for _, r in f1.iterrows():
        g = r["region"]
        report.lines.append(
            (
                f"people, {g}",
                float(true_people.get(g, 0)),
                r["people"],
                r["people_low"],
                r["people_high"],
            )
        )
    for _, r in f1.iterrows():
        g = r["region"]
        report.lines.append(
            (
                f"mean income, {g}",
                float(true_income.get(g, math.nan)),
                r["income"],
                r["income_low"],
                r["income_high"],
            )
        )
    hidden = sorted(set(true_people.index) - set(f1["region"]))
    report.truth["hidden"] = hidden

    hist = (
        session.query()
        .bound(max_partitions=1, max_rows_per_partition=MAX_ROWS)
        .agg(income=dpa.histogram("income", edges=list(INCOME_EDGES)))
    )
    # The intervals cover the counts of the records kept (at most MAX_ROWS per person), which
    # depend on the plan's secret salt: the true counts shown are the exact counts of that same
    # plan (prepare, exact), then the budget is charged and the same counts are released.
    prepared = hist.prepare(epsilon=e2, delta=d2)
    exact = prepared.exact(session.engine)
    bins = next(m.name for m in prepared.plan.aggregate.measures if m.kind == "bin_counts")
    cells: Any = exact.values[bins][0]  # a tuple of exact integers, one per bin
    true_hist = np.array([int(v) for v in cells])
    budget.charge(prepared.pricing.event)
    f2 = prepared.release_from(exact, source=session.source_of_randomness)
    report.frames["histogram"] = f2
    report.spent.append(("income histogram", *budget.spent))
    report.truth["histogram"] = true_hist
    clipped = df["income"].clip(INCOME_EDGES[0], INCOME_EDGES[-1])
    report.truth["histogram_all"], _ = np.histogram(clipped, bins=np.asarray(INCOME_EDGES))
    cols = [c for c in f2.columns if c.startswith("income[") and not c.endswith(("_low", "_high"))]
    for c, t in zip(cols, true_hist, strict=True):
        lo, hi = c[len("income[") : -1].split(",")
        label = f"records {_k(float(lo))}-{_k(float(hi))}"
        report.lines.append(
            (label, float(t), f2[c].iloc[0], f2[f"{c}_low"].iloc[0], f2[f"{c}_high"].iloc[0])
        )

    ages = (
        session.query()
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(age=dpa.quantile("age", [0.25, 0.5, 0.75], bounds=AGE_BOUNDS))
    )
    f3 = ages.run(epsilon=e3, delta=d3)
    report.frames["ages"] = f3
    report.spent.append(("age quartiles", *budget.spent))
    person_age = df.groupby("user_id")["age"].first()
    for q, c in ((0.25, "age_p25"), (0.5, "age_p50"), (0.75, "age_p75")):
        report.lines.append(
            (
                f"age, {int(q * 100)}th percentile",
                float(person_age.quantile(q)),
                float(f3[c].iloc[0]),
                math.nan,
                math.nan,
            )
        )
    report.truth["ages"] = [float(person_age.quantile(q)) for q in (0.25, 0.5, 0.75)]
    report.seconds = time.perf_counter() - t0
    return report


def _k(x: float) -> str:
    return f"{x / 1000:g}k" if x else "0"


def _num(x: float) -> str:
    if isinstance(x, float) and math.isnan(x):
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.1f}"


def print_report(report: DemoReport, console: Console) -> None:
    """The report as an 80-column table and the budget lines."""
    eps, dl = report.budget
    console.print(
        f"[bold]dpkit demo[/bold]: {report.rows:,} records of {report.people:,} "
        "people, privacy unit user_id"
    )
    console.print(Text(str(report.path)))
    console.print(
        f"budget: epsilon={eps:g}, delta={dl:g}; at most {MAX_ROWS} records per person are used"
    )
    table = Table(width=80)
    table.add_column("statistic", no_wrap=True)
    table.add_column("true", justify="right", no_wrap=True)
    table.add_column("private", justify="right", no_wrap=True)
    table.add_column("95% interval", justify="right", no_wrap=True)
    for name, true, priv, lo, hi in report.lines:
        ci = "-" if math.isnan(lo) else f"[{_num(lo)}, {_num(hi)}]"
        table.add_row(Text(name), _num(true), _num(priv), Text(ci))
    console.print(table)
    hidden = report.truth.get("hidden", [])
    if hidden:
        console.print(Text(f"hidden by partition selection (too few people): {', '.join(hidden)}"))
    for what, e, d in report.spent:
        console.print(f"after {what}: spent epsilon={e:.3g}, delta={d:.3g}")
    console.print(
        f"true: no privacy; record counts are of the records used (at most {MAX_ROWS} "
        "per person), people and means of all records"
    )
    console.print(f"done in {report.seconds:.1f} s")


def plot_report(report: DemoReport, path: Path) -> Path:
    """Private values with their intervals beside the true ones (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise typer.BadParameter(
            "the plot needs matplotlib (dpkit's plot extra): pip install matplotlib"
        ) from exc
    f1 = report.frames["regions"]
    f2 = report.frames["histogram"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    x = np.arange(len(f1))
    regions = list(f1["region"])
    for ax, col, truth, title in (
        (axes[0], "people", report.truth["people"], "people per region"),
        (axes[1], "income", report.truth["income"], "mean income per region"),
    ):
        true_vals = [float(truth.get(g, math.nan)) for g in regions]
        ax.bar(x, true_vals, color="#c9d6e8", label="true")
        est = f1[col].to_numpy(dtype=float)
        err = np.vstack(
            [
                est - f1[f"{col}_low"].to_numpy(dtype=float),
                f1[f"{col}_high"].to_numpy(dtype=float) - est,
            ]
        )
        ax.errorbar(
            x, est, yerr=err, fmt="o", color="#b22222", capsize=4, label="private, 95% interval"
        )
        ax.set_xticks(x, regions, rotation=30)
        ax.set_title(title)
        ax.set_ylim(0, 1.3 * np.nanmax([*true_vals, *f1[f"{col}_high"].to_numpy(dtype=float)]))
        ax.legend(loc="upper center", fontsize=8, ncol=2)
    ax = axes[2]
    cols = [c for c in f2.columns if c.startswith("income[") and not c.endswith(("_low", "_high"))]
    xb = np.arange(len(cols))
    ax.bar(xb, report.truth["histogram"], color="#c9d6e8", label="true")
    est = np.array([float(f2[c].iloc[0]) for c in cols])
    lo = np.array([float(f2[f"{c}_low"].iloc[0]) for c in cols])
    hi = np.array([float(f2[f"{c}_high"].iloc[0]) for c in cols])
    ax.errorbar(
        xb,
        est,
        yerr=np.vstack([est - lo, hi - est]),
        fmt="o",
        color="#b22222",
        capsize=4,
        label="private, 95% interval",
    )
    labels = [_k(e) for e in INCOME_EDGES[:-1]]
    ax.set_xticks(xb, labels, rotation=30)
    ax.set_title("records per income bin (lower edge)")
    ax.set_ylim(0, 1.3 * max(float(np.max(report.truth["histogram"])), float(np.max(hi))))
    ax.legend(loc="upper center", fontsize=8, ncol=2)
    f3 = report.frames["ages"]
    q_priv = [float(f3[c].iloc[0]) for c in ("age_p25", "age_p50", "age_p75")]
    fig.suptitle(
        "dpkit: private (red) vs true (blue); age quartiles private "
        f"{', '.join(f'{v:.0f}' for v in q_priv)}, true "
        f"{', '.join(f'{v:.0f}' for v in report.truth['ages'])}"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def demo(
    rows: Annotated[int, typer.Option("--rows", help="records in the generated table")] = 1_000_000,
    epsilon: Annotated[float, typer.Option("--epsilon", help="total epsilon of the report")] = 3.0,
    delta: Annotated[float, typer.Option("--delta", help="total delta of the report")] = 1e-6,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="PNG of private vs true values (default dpkit-demo.png)"),
    ] = Path("dpkit-demo.png"),
    no_plot: Annotated[bool, typer.Option("--no-plot", help="skip the PNG")] = False,
    seed: Annotated[
        int, typer.Option("--data-seed", help="seed of the synthetic data (not of the noise)")
    ] = 7,
) -> None:
    """Generate a people table and release a private report beside the truth."""
    console = Console(width=80)
    err = Console(stderr=True)
    if rows < 1000:
        raise typer.BadParameter("--rows must be at least 1000")
    with err.status("generating the table and running the private report ..."):
        report = run_demo(rows=rows, seed=seed, epsilon=epsilon, delta=delta)
    print_report(report, console)
    if plot is not None and not no_plot:
        out = plot_report(report, plot)
        console.print(Text(f"plot written to {out}"))
