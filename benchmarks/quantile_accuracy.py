"""Accuracy of private quantiles at equal epsilon, by group size, beside diffprivlib and OpenDP.
Writes the ``quantile_accuracy`` section of docs/benchmarks.md.

Data: incomes, exponential with mean 50,000 clamped to the bounds [0, 500,000], one row per
person, four groups of 50, 500, 5,000 and 50,000 people (fresh data each run). Median and 90th
percentile of each group at total epsilon 1 per group (pure DP) in every library (dpkit: one
query, both levels of one statistic, chosen together by one exponential mechanism over pairs of
bins at epsilon 1; the peers: one call per quantile and group at epsilon 1/2). Median absolute
error over runs.

* dpkit now: the default grid (``2**20`` equal bins over the bounds), the engine's non-empty
  bins only. dpkit before: the former default of 1,024 bins (the same mechanism otherwise).
* diffprivlib ``tools.quantile`` (exponential mechanism over the intervals between sorted
  values, bounds given).
* OpenDP ``make_private_quantile`` (scored candidates, noise scale found by binary search for
  epsilon 1/2) over 65,537 equally spaced candidates.

* dpkit with 95% intervals: ``interval_share=0.5`` (half of each quantile's budget on its
  interval): point error, coverage of the quantile and the interval's median width.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/quantile_accuracy.py --peers-python
.venv-quantpeers/bin/python`` (``--quick``: fewer runs; ``--runs N``: N runs). Peers run in
their own environment (``make .venv-quantpeers/bin/python``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

SIZES = (50, 500, 5_000, 50_000)
LEVELS = (0.5, 0.9)
BOUNDS = (0.0, 500_000.0)
EPS = 1.0
RUNS = 15 if "--quick" not in sys.argv else 3
if "--runs" in sys.argv:
    RUNS = int(sys.argv[sys.argv.index("--runs") + 1])
#: dpkit with 95% intervals: the share of each quantile's budget spent on its interval
INTERVAL_SHARE = 0.5


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(900 + seed)
    g = np.repeat(np.arange(len(SIZES)), SIZES)
    x = np.minimum(rng.exponential(50_000.0, g.size), BOUNDS[1])
    return g, x


def _truth(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The true quantiles per group and level (numpy's default interpolation)."""
    return np.array([[np.quantile(x[g == k], q) for q in LEVELS] for k in range(len(SIZES))])


def _quantile_sets(g: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group and level ``[x_-, x_+]``: every value with ``#{< x} <= q n <= #{<= x}`` (what
    the intervals claim to hold), from the sorted values."""
    lo = np.empty((len(SIZES), len(LEVELS)))
    hi = np.empty_like(lo)
    for k in range(len(SIZES)):
        v = np.sort(x[g == k])
        for i, q in enumerate(LEVELS):
            t = q * v.size
            lo[k, i] = v[max(int(np.ceil(t)) - 1, 0)]
            hi[k, i] = v[min(int(np.floor(t)), v.size - 1)]
    return lo, hi


def _dpkit_frame(g: np.ndarray, x: np.ndarray, seed: int, stat: Any) -> Any:
    """dpkit's release of ``stat`` per group (one query, epsilon ``EPS``), sorted by group."""
    import pandas as pd

    import dpkit.analytics as dpa
    from dpkit.accounting import Budget
    from dpkit.noise import RandomSource

    df = pd.DataFrame({"uid": np.arange(x.size), "g": g, "x": x})
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=Budget(epsilon=1e9),
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )
    return (
        s.query()
        .group_by("g", keys=list(range(len(SIZES))))
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(q=stat)
        .run(epsilon=EPS)
        .sort_values("g")
    )


def _columns(f: Any, suffix: str = "") -> np.ndarray:
    return np.column_stack([f[c + suffix].to_numpy(float) for c in ("q_p50", "q_p90")])


def _dpkit_interval(
    g: np.ndarray, x: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dpkit's quantiles with 95% intervals (``interval_share``): estimates, lows, highs."""
    import dpkit.analytics as dpa

    stat = dpa.quantile("x", list(LEVELS), bounds=BOUNDS, interval_share=INTERVAL_SHARE)
    f = _dpkit_frame(g, x, seed, stat)
    return _columns(f), _columns(f, "_low"), _columns(f, "_high")


def _dpkit(g: np.ndarray, x: np.ndarray, seed: int, bins: int | None) -> np.ndarray:
    import dpkit.analytics as dpa

    stat = dpa.quantile("x", list(LEVELS), bounds=BOUNDS, bins=bins)
    return _columns(_dpkit_frame(g, x, seed, stat))


def _peers(path: str, seed: int) -> dict[str, list[list[float]]]:
    """Run inside the peers' environment: quantiles per group and level for each peer."""
    d = np.load(path)
    g, x = d["g"], d["x"]
    out: dict[str, list[list[float]]] = {}
    try:
        import diffprivlib.tools as dpl

        rs = np.random.RandomState(seed)
        out["diffprivlib"] = [
            [
                float(dpl.quantile(x[g == k], q, epsilon=EPS / 2, bounds=BOUNDS, random_state=rs))
                for q in LEVELS
            ]
            for k in range(len(SIZES))
        ]
    except ImportError:
        pass
    try:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        cands = list(np.linspace(BOUNDS[0], BOUNDS[1], 65_537))
        dom = dp.vector_domain(dp.atom_domain(T=float, nan=False))
        chains = []
        for q in LEVELS:  # the scale depends on the level and epsilon only, not the data

            def make(scale: float, q: float = q) -> Any:
                return dp.m.make_private_quantile(
                    dom, dp.symmetric_distance(), dp.max_divergence(), cands, q, scale
                )

            chains.append(dp.binary_search_chain(make, d_in=1, d_out=EPS / 2))
        res = [[float(m(list(map(float, x[g == k])))) for m in chains] for k in range(len(SIZES))]
        out["OpenDP"] = res
    except ImportError:
        pass
    return out


def _num(v: float) -> str:
    """Whole units with thousands separators from 100 up, else three significant digits."""
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def main() -> None:
    if "--peer-run" in sys.argv:
        i = sys.argv.index("--peer-run")
        print(json.dumps(_peers(sys.argv[i + 1], int(sys.argv[i + 2]))))
        return
    from _report import machine, write_section

    peers_py = None
    if "--peers-python" in sys.argv:
        peers_py = sys.argv[sys.argv.index("--peers-python") + 1]
    errs: dict[str, list[np.ndarray]] = {}
    covered: list[np.ndarray] = []
    widths: list[np.ndarray] = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(RUNS):
            g, x = _data(run)
            truth = _truth(g, x)
            est, low, high = _dpkit_interval(g, x, 400 + run)
            set_lo, set_hi = _quantile_sets(g, x)
            covered.append((low <= set_lo) & (set_hi <= high))
            widths.append(high - low)
            got = {
                "dpkit now": _dpkit(g, x, 100 + run, None),
                "dpkit before (1,024 bins)": _dpkit(g, x, 200 + run, 1024),
                "dpkit with 95% intervals": est,
            }
            if peers_py:
                path = str(Path(tmp) / "data.npz")
                np.savez(path, g=g, x=x)
                proc = subprocess.run(
                    [peers_py, __file__, "--peer-run", path, str(300 + run)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                for name, vals in json.loads(proc.stdout.strip().splitlines()[-1]).items():
                    got[name] = np.array(vals)
            for name, vals in got.items():
                errs.setdefault(name, []).append(np.abs(vals - truth))
            print(f"run {run + 1}/{RUNS}", flush=True)
    med = {name: np.median(np.stack(v), axis=0) for name, v in errs.items()}
    names = list(med)
    lines = [
        "## Quantiles by group size (`benchmarks/quantile_accuracy.py`)",
        "",
        f"Machine: {machine()}. Incomes (exponential, mean 50,000) clamped to [0, 500,000], one "
        f"row per person, groups of {', '.join(f'{n:,}' for n in SIZES)} people; median and "
        f"90th percentile, epsilon {EPS:g} per group (pure) in every library: dpkit chooses "
        "both levels together (one exponential mechanism over pairs of bins), the peers "
        f"spend {EPS / 2:g} per quantile; median absolute error over {RUNS} runs. dpkit now: "
        f"{2**20:,} equal bins "
        "(the default); before: 1,024 bins. diffprivlib: `tools.quantile` with the bounds; "
        "OpenDP: `make_private_quantile` over 65,537 equally spaced candidates.",
        "",
        "| people | " + " | ".join(f"{n}: p50 / p90" for n in names) + " |",
        "| ---: | " + " | ".join("---:" for _ in names) + " |",
    ]
    for k, n in enumerate(SIZES):
        cells = [f"{_num(med[nm][k, 0])} / {_num(med[nm][k, 1])}" for nm in names]
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    cov = np.mean(np.stack(covered), axis=0)
    wid = np.median(np.stack(widths), axis=0)
    lines += [
        "",
        f"dpkit with 95% intervals: `quantile(..., interval_share={INTERVAL_SHARE:g})`, "
        "the point estimates at half of the budget (chosen together), each interval's two "
        "ends at an eighth each (`BinnedQuantileInterval`: ends aimed at the ranks q n -+ r, "
        "r from the exponential mechanism's utility tail). Coverage of every q-quantile of the "
        f"group (the values with at most q n below and at least q n at or below) over {RUNS} runs, "
        "and median width. No peer gives an interval.",
        "",
        "| people | coverage p50 / p90 | median width p50 / p90 |",
        "| ---: | ---: | ---: |",
    ]
    for k, n in enumerate(SIZES):
        lines.append(
            f"| {n:,} | {cov[k, 0]:.0%} / {cov[k, 1]:.0%} | {_num(wid[k, 0])} / {_num(wid[k, 1])} |"
        )
    md = "\n".join(lines) + "\n"
    print(md)
    write_section("quantile_accuracy", md)


if __name__ == "__main__":
    main()
