"""Private partition selection: groups released against count error, dpkit beside its peers.

Run with ``PYTHONPATH=src .venv/bin/python benchmarks/partition_selection.py [--peers-python
PATH] [--quick]``. Writes the ``partition-selection`` section of ``docs/benchmarks.md``.

Data (numpy, fixed seed; not committed): 565,000 people, each with 1 to 5 rows (1 + a
geometric count capped at 5, mean about 1.77; about 1M rows) in one of 1,000 groups whose
popularity falls as ``j^-1.5``. Every person is already within the contribution bounds used by
every system (one group, at most 5 rows in it), so all systems see the same data and the count
error is the noise and the selection alone. Task: the number of rows per group, with group keys
private, at epsilon = 1 and delta = 1e-6 in total.

Systems:

* dpkit, as its sessions price such a query today: the optimal rule of Desfontaines et al.
  (``PartitionSelection``) on the units per group at ``epsilon w / (1 + w)`` and the discrete
  Laplace count at the rest, for selection weights ``w``;
* dpkit ``NoisyCountSelection``: the released noisy count thresholded (all of epsilon on the
  count), and the same with a noisy units count taking ``units_share`` of epsilon into the
  threshold statistic ``5 U' + weight C'``;
* OpenDP 0.16 (Polars API: ``dp.len()`` per group, its threshold on the noisy count) and
  PipelineDP 0.3.1 (local backend, COUNT with its default partition selection, naive budget
  split), in their own virtual environment (``make .venv-peers/bin/python``).

Per run: groups released, mean absolute count error over the released groups, and releases of
groups with fewer than 5 people (false releases; no system releases a key that is absent from
the data). The table gives medians over runs. "50% size": the number of people at which a group
is released half the time (dpkit: from the exact release probabilities; peers: where the release
rate of groups of that size, pooled over runs, crosses one half, interpolated).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

QUICK = "--quick" in sys.argv
PEOPLE = 565_000
GROUPS = 1000
MAX_ROWS = 5
EPSILON, DELTA = 1.0, 1e-6
SMALL = 5  # a release of a group with fewer people counts as a false release
RUNS_DPKIT = 20 if QUICK else 200
RUNS_OPENDP = 3 if QUICK else 20
RUNS_PIPELINEDP = 1 if QUICK else 5
ROOT = Path(__file__).resolve().parent.parent


def _arg(name: str, default: str) -> str:
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


PEERS_PYTHON = _arg("--peers-python", str(ROOT / ".venv-peers" / "bin" / "python"))


def generate(path: Path) -> Path:
    rng = np.random.default_rng(20261128)  # benchmark data, not privacy noise
    r = rng.uniform(0.0317, 1.0, PEOPLE)  # j = floor(r^-2): P(j) ~ j^-1.5 (benchmarks/analytics.py)
    group = np.minimum(GROUPS, np.floor(r**-2.0)).astype(np.int64) - 1
    rows = np.minimum(MAX_ROWS, 1 + rng.geometric(0.57, PEOPLE) - 1).astype(np.int64)
    np.savez(path, group=group, rows=rows)
    return path


def histogram(path: Path) -> tuple[np.ndarray, np.ndarray]:
    d = np.load(path)
    units = np.bincount(d["group"], minlength=GROUPS)
    counts = np.bincount(d["group"], weights=d["rows"], minlength=GROUPS).astype(np.int64)
    return units, counts


# ------------------------------------------------------------------ peers (their own venv)


def _rows_frame(path: str) -> tuple[np.ndarray, np.ndarray]:
    d = np.load(path)
    person = np.repeat(np.arange(d["group"].size), d["rows"])
    group = np.repeat(d["group"], d["rows"])
    return person, group


def run_opendp(path: str, runs: int) -> list[dict[str, float]]:
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    person, group = _rows_frame(path)
    lf = pl.LazyFrame({"person": person, "group": group.astype(str)})
    out = []
    for _ in range(runs):
        context = dp.Context.compositor(
            data=lf.select("group"),
            privacy_unit=dp.unit_of(
                contributions=[
                    dp.polars.Bound(per_group=MAX_ROWS),
                    dp.polars.Bound(by=["group"], num_groups=1),
                ]
            ),
            privacy_loss=dp.loss_of(epsilon=EPSILON, delta=DELTA),
            split_evenly_over=1,
            margins=[dp.polars.Margin(by=["group"], max_length=person.size, max_groups=GROUPS)],
        )
        df = context.query().group_by("group").agg(dp.len(signed=False)).release().collect()
        out.append({str(g): float(n) for g, n in df.iter_rows()})
    return out


def run_pipelinedp(path: str, runs: int) -> list[dict[str, float]]:
    import pipeline_dp

    person, group = _rows_frame(path)
    data = list(zip(person.tolist(), group.astype(str).tolist(), strict=True))
    out = []
    for _ in range(runs):
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=DELTA)
        engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
        params = pipeline_dp.AggregateParams(
            noise_kind=pipeline_dp.NoiseKind.LAPLACE,
            metrics=[pipeline_dp.Metrics.COUNT],
            max_partitions_contributed=1,
            max_contributions_per_partition=MAX_ROWS,
        )
        extractors = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0],
            partition_extractor=lambda r: r[1],
            value_extractor=lambda r: 0,
        )
        result = engine.aggregate(data, params, extractors)
        accountant.compute_budgets()
        out.append({str(k): float(v.count) for k, v in result})
    return out


def peer(name: str, path: Path, runs: int) -> list[dict[str, float]] | str:
    if not Path(PEERS_PYTHON).exists():
        return f"no interpreter at {PEERS_PYTHON}"
    cmd = [PEERS_PYTHON, __file__, "--worker", name, "--path", str(path), "--runs", str(runs)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1]
    result: list[dict[str, float]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# ------------------------------------------------------------------ dpkit


def dpkit_today(w: float, units: np.ndarray, counts: np.ndarray, runs: int) -> Any:
    from dpkit.mechanisms import DiscreteLaplace, PartitionSelection

    eps_sel = EPSILON * w / (1.0 + w)
    sel = PartitionSelection.from_epsilon_delta(epsilon=eps_sel, delta=DELTA)
    noise = DiscreteLaplace.from_epsilon(epsilon=EPSILON - eps_sel, sensitivity=MAX_ROWS)
    out = []
    for _ in range(runs):
        keep = sel.release(units)
        noisy = np.asarray(noise.release(counts))
        out.append({str(g): float(noisy[g]) for g in np.flatnonzero(keep)})
    return out, sel.probability(units)


def dpkit_noisy_count(
    share: float, weight: int, units: np.ndarray, counts: np.ndarray, runs: int
) -> Any:
    from dpkit.mechanisms import NoisyCountSelection

    m = NoisyCountSelection.from_epsilon_delta(
        epsilon=EPSILON, delta=DELTA, max_rows=MAX_ROWS, units_share=share, weight=weight
    )
    out = []
    for _ in range(runs):
        keep, noisy = m.release_with_counts(counts, units)
        out.append({str(g): float(noisy[g]) for g in np.flatnonzero(keep)})
    return out, m.probability(counts, units)


# ------------------------------------------------------------------ summary


def summarise(
    runs: list[dict[str, float]], units: np.ndarray, counts: np.ndarray, prob: Any = None
) -> dict[str, float]:
    groups, errors, false = [], [], []
    freq = np.zeros(GROUPS)
    for r in runs:
        idx = np.array([int(g) for g in r], dtype=np.int64)
        vals = np.array(list(r.values()), dtype=np.float64)
        groups.append(idx.size)
        errors.append(float(np.mean(np.abs(vals - counts[idx]))) if idx.size else 0.0)
        false.append(int(np.sum(units[idx] < SMALL)))
        freq[idx] += 1
    freq /= len(runs)
    rate = np.asarray(prob, dtype=np.float64) if prob is not None else freq
    return {
        "groups": float(np.median(groups)),
        "error": float(np.median(errors)),
        "false": float(np.mean(false)),
        "half": _half_size(units, rate),
        "runs": float(len(runs)),
    }


def _half_size(units: np.ndarray, rate: np.ndarray) -> float:
    """People at which the release rate crosses 1/2: a least-squares logistic fit of the rate
    against log(people) over the groups whose rate is strictly between 0.02 and 0.98 (pooled
    over runs), or the midpoint between the largest always-dropped and smallest always-kept
    groups when too few are in between."""
    mid = (rate > 0.02) & (rate < 0.98) & (units > 0)
    if mid.sum() >= 5:
        x = np.log(units[mid])
        y = np.log(rate[mid] / (1 - rate[mid]))
        a, b = np.polyfit(x, y, 1)
        return float(np.exp(-b / a))
    lo = units[rate <= 0.5].max(initial=0)
    hi = units[rate > 0.5].min(initial=0)
    return float((lo + hi) / 2)


def main() -> None:
    from _report import machine, write_section

    with tempfile.TemporaryDirectory(prefix="psel-") as tmp:
        path = generate(Path(tmp) / "data.npz")
        units, counts = histogram(path)
        rows: list[tuple[str, dict[str, float] | str]] = []
        for w in (0.25, 0.5, 1.0, 2.0):
            runs, prob = dpkit_today(w, units, counts, RUNS_DPKIT)
            rows.append(
                (f"dpkit today, selection weight {w:g}", summarise(runs, units, counts, prob))
            )
        for share, weight in ((0.0, 1), (0.2, 4), (0.3, 2), (0.4, 2), (0.5, 1)):
            runs, prob = dpkit_noisy_count(share, weight, units, counts, RUNS_DPKIT)
            label = (
                "dpkit noisy count thresholded"
                if share == 0
                else f"dpkit noisy count + units (share {share:g}, weight {weight})"
            )
            rows.append((label, summarise(runs, units, counts, prob)))
        for name, n in (("opendp", RUNS_OPENDP), ("pipelinedp", RUNS_PIPELINEDP)):
            got = peer(name, path, n)
            label = {"opendp": "OpenDP 0.16 (Polars)", "pipelinedp": "PipelineDP 0.3.1"}[name]
            rows.append((label, got if isinstance(got, str) else summarise(got, units, counts)))
    lines = [
        "## Partition selection (`benchmarks/partition_selection.py`)",
        "",
        f"Machine: {machine()}. {PEOPLE:,} people, {int(counts.sum()):,} rows, {GROUPS:,} groups "
        f"({int((units >= 1).sum())} non-empty, {int(((units >= 1) & (units < SMALL)).sum())} "
        f"with fewer than {SMALL} people); rows per group privately, at most one group and "
        f"{MAX_ROWS} rows per person, epsilon = {EPSILON:g} and delta = {DELTA:g} in total.",
        "",
        "| system | runs | groups released (median) | mean abs count error (median) | "
        f"false releases per run (< {SMALL} people) | 50% size (people) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, r in rows:
        if isinstance(r, str):
            lines.append(f"| {label} | | not run: {r} | | | |")
        else:
            lines.append(
                f"| {label} | {int(r['runs'])} | {r['groups']:.0f} | {r['error']:.2f} | "
                f"{r['false']:.2f} | {r['half']:.1f} |"
            )
    lines += [
        "",
        "dpkit today splits epsilon between the selection (weight w) and the count (weight 1).",
        "The noisy-count rule spends all of epsilon on the released count and thresholds it;",
        "with a units share, a noisy number of people joins the threshold (never published).",
    ]
    text = "\n".join(lines)
    print(text)
    if not QUICK:
        write_section("partition-selection", text)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        fn = {"opendp": run_opendp, "pipelinedp": run_pipelinedp}[_arg("--worker", "")]
        print(json.dumps(fn(_arg("--path", ""), int(_arg("--runs", "1")))))
    else:
        main()
