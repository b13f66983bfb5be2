"""Private binning against hand bins: the synthetic income's accuracy at equal budget.

A people table (two rows per person, ``max_rows=2``) with a log-normal income that depends on
employment. MST is fitted at the same (epsilon, delta) share with income declared two ways:

* ``public``: ``Numeric(0, 500_000, bins=10)``, equal-width bins over generous public bounds
  (what one writes without looking at the data); nothing spent on binning;
* ``private``: ``Numeric(lower=0, bins=10)``, range and deciles chosen privately with 10% of
  the fit's rho.

Reported per epsilon, as the mean over seeds: the Kolmogorov-Smirnov distance between the
synthetic and the true income, and the total variation distance of the (true income decile x
employed) marginal. Run: ``PYTHONPATH=src python benchmarks/synth_binning.py [--quick]``;
writes the ``synth-binning`` section of ``docs/benchmarks.md`` (``--quick``: one seed, one
epsilon, to ``$DPKIT_BENCH_DOC`` when set).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pandas as pd

from _report import machine, write_section
from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.noise import RandomSource
from dpkit.synth import MST, Categorical, Numeric

QUICK = "--quick" in sys.argv
PEOPLE = 2_000 if QUICK else 20_000
SEEDS = (1,) if QUICK else (1, 2, 3)
EPSILONS = (1.0,) if QUICK else (0.5, 1.0, 4.0)


def _table(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    employed = rng.choice(["yes", "no"], PEOPLE, p=[0.7, 0.3])
    income = np.round(rng.lognormal(10.3, 0.6, PEOPLE) * np.where(employed == "yes", 1.5, 0.6))
    return pd.DataFrame(
        {
            "uid": np.repeat(np.arange(PEOPLE), 2),
            "employed": np.repeat(employed, 2),
            "income": np.repeat(income, 2),
            "region": rng.choice(["N", "S", "E", "W"], 2 * PEOPLE),
        }
    )


def _scores(true: pd.DataFrame, synth: pd.DataFrame) -> tuple[float, float]:
    x = np.sort(true["income"].to_numpy())
    y = np.sort(synth["income"].dropna().to_numpy())
    grid = np.concatenate([x, y])
    ks = float(np.max(np.abs(np.searchsorted(x, grid, "right") / x.size
                             - np.searchsorted(y, grid, "right") / y.size)))  # fmt: skip
    deciles = np.quantile(x, np.arange(1, 10) / 10)
    p = pd.crosstab(np.searchsorted(deciles, true["income"]), true["employed"], normalize=True)
    q = pd.crosstab(np.searchsorted(deciles, synth["income"]), synth["employed"], normalize=True)
    tv = 0.5 * float(p.sub(q, fill_value=0).abs().to_numpy().sum())
    return ks, tv


def main() -> None:
    start, load0 = time.perf_counter(), os.getloadavg()[0]
    rows: list[tuple[float, str, float, float]] = []
    for eps in EPSILONS:
        for name, income in (
            ("public", Numeric(0, 500_000, bins=10)),
            ("private", Numeric(lower=0, bins=10)),
        ):
            ks, tv = [], []
            for seed in SEEDS:
                frame = _table(seed)
                s = Session(
                    frame,
                    privacy_unit="uid",
                    budget=Budget(epsilon=10.0, delta=1e-6, method="zcdp"),
                    source_of_randomness=RandomSource(seed=seed, insecure=True),
                )
                cols = {
                    "employed": Categorical(["yes", "no"]),
                    "income": income,
                    "region": Categorical(["N", "S", "E", "W"]),
                }
                model = MST(cols, max_rows=2).fit(s, epsilon=eps, delta=1e-6)
                synth = model.sample(len(frame), source=RandomSource(seed=seed, insecure=True))
                a, b = _scores(frame, synth)
                ks.append(a)
                tv.append(b)
            rows.append((eps, name, float(np.mean(ks)), float(np.mean(tv))))
            print(f"epsilon {eps}: {name:7s} KS {rows[-1][2]:.3f}  TV(decile x employed) "
                  f"{rows[-1][3]:.3f}")  # fmt: skip
    by = {(e, n): (k, t) for e, n, k, t in rows}
    lines = [
        "## Synthetic data: private binning against hand bins (`benchmarks/synth_binning.py`)",
        "",
        f"Machine: {machine()}; load average {load0:.1f} before, {os.getloadavg()[0]:.1f} "
        f"after; {time.perf_counter() - start:.0f} s. {PEOPLE:,} people with 2 rows each, MST "
        f"(`max_rows=2`, delta 1e-6), mean over {len(SEEDS)} seed(s). Hand bins: "
        "`Numeric(0, 500_000, bins=10)`, nothing spent on binning; private bins: "
        "`Numeric(lower=0, bins=10)`, range and deciles chosen privately with 10% of the "
        "fit's rho. KS: Kolmogorov-Smirnov distance of the synthetic income from the true one; "
        "TV: total variation distance of the (true income decile x employed) marginal.",
        "",
        "| epsilon | hand bins KS | hand bins TV | private bins KS | private bins TV |",
        "|---:|---:|---:|---:|---:|",
    ]
    for eps in EPSILONS:
        (pk, pt), (qk, qt) = by[(eps, "public")], by[(eps, "private")]
        lines.append(f"| {eps:g} | {pk:.3f} | {pt:.3f} | {qk:.3f} | {qt:.3f} |")
    lines += ["", "Reproduce: `PYTHONPATH=src .venv/bin/python benchmarks/synth_binning.py`."]
    if not QUICK or os.environ.get("DPKIT_BENCH_DOC"):
        write_section("synth-binning", "\n".join(lines))


if __name__ == "__main__":
    main()
