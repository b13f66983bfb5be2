"""Utility at equal budget: how much each library's answer is off, task by task, by group size.

Data (``benchmarks/shared/people_table.py``, not committed): 1,000,000 yearly records of about
565,000 people (``--quick``: 100,000 rows), one city per person out of 1,000 (Zipf-like, so
groups run from a handful of people to about 200,000), 1 to 3 rows per person, incomes in
[0, 500,000]. Every library gets the same contribution bounds (one group per person, 3 rows
per group), the same value bounds [0, 500,000] and the same budget per task: epsilon = 1 (pure
DP, Laplace-type noise) with public keys, epsilon = 1 and delta = 1e-6 when groups are chosen
by private partition selection. The bounds drop nothing from this table, so the exact answer
is the same for every library, and every error below is the library's own noise and
post-processing.

Tasks (each one query, i.e. one charge of the whole task budget, per repetition):

* ``count_keys``: rows per city, the 1,000 cities given as public keys;
* ``count_select``: rows per city without keys (the library's private partition selection):
  groups released, the people count at which a group is released half the time, and the error
  of the released counts;
* ``sum_mean``: sum and mean of income per city (public keys), asked together;
* ``sum_mean_all``: sum and mean of income over the whole table, asked together;
* ``var_std``: variance and standard deviation of income per city, asked together;
* ``quantiles``: median and 90th percentile of income per city;
* ``histogram``: 20 bins of width 25,000 over [0, 500,000] per city (values clamped into the
  outer bins).

Each library runs in its own process and, where its pins clash with dpkit's, in its own virtual
environment: OpenDP 0.16 (Polars API) and PipelineDP 0.3.1 (local backend) in ``.venv-peers``
(``--peers-python``), Tumult Analytics 0.21 (local Spark) in ``.venv-tumult``
(``--tumult-python``), diffprivlib 0.6.6 and SmartNoise SQL 1.0.10 in ``.venv-dplib``
(``--dplib-python``); the Makefile builds them. How each peer splits a task's budget is written
next to its worker below and in the section. A peer that has no way to run a task is left out
of that task ("not offered").

Errors: the absolute error of every released value against the exact one, pooled over the
groups of a size bucket (people per city) and the repetitions; the median of that pool is what
the tables show, relative to the exact value for the plot. Interval coverage at 95%: the share
of released intervals holding the exact value, for every library that gives intervals.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/utility.py
[--quick] [--peers-python P] [--tumult-python P] [--dplib-python P] [--only LIB,...]
[--tasks TASK,...] [--reuse] [--jobs N] [--data DIR] [--time-limit S]``. ``--reuse`` keeps
the figures of the last run (``results.json`` in the data directory) for the pairs of library
and task not rerun. ``--quick`` writes to ``$DPKIT_BENCH_DOC`` when set (``make
bench-quick``), never over the measured section. ``--src DIR`` runs the dpkit worker on
another source tree (e.g. a branch's ``src``), so the comparison can be rerun as dpkit changes.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

QUICK = "--quick" in sys.argv


def _arg(name: str, default: str) -> str:
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


ROWS = 100_000 if QUICK else 1_000_000
EPSILON, DELTA = 1.0, 1e-6
LOWER, UPPER = 0.0, 500_000.0
#: The values a statistic of one group can take at the task's bounds (an interval holding all
#: of them says nothing about the group): the coverage table counts such intervals.
POSSIBLE = {
    "mean": (LOWER, UPPER),
    "var": (0.0, ((UPPER - LOWER) / 2) ** 2),
    "std": (0.0, (UPPER - LOWER) / 2),
}
MAX_PARTITIONS, MAX_ROWS = 1, 3
BINS = 20
EDGES = [LOWER + i * (UPPER - LOWER) / BINS for i in range(BINS + 1)]
BUCKETS = ((1, 99), (100, 999), (1000, 9999), (10_000, 10**9))
BUCKET_NAMES = ("<100", "100-999", "1k-9.9k", ">=10k")
TASKS = (
    "count_keys",
    "count_select",
    "sum_mean",
    "sum_mean_all",
    "var_std",
    "quantiles",
    "histogram",
)
STATS = {
    "count_keys": ("count",),
    "count_select": ("count",),
    "sum_mean": ("sum", "mean"),
    "sum_mean_all": ("sum", "mean"),
    "var_std": ("var", "std"),
    "quantiles": ("p50", "p90"),
    "histogram": tuple(f"h{i:02d}" for i in range(BINS)),
}
ALL = "_all"  # the key of the one group of an overall task
# Repetitions per task: at most REPS, fewer when a library's runs are slow (a per-task time
# limit, TIME_LIMIT seconds, stops repeating after at least MIN_REPS); the tables say how many
# ran. Overall tasks give one value per run, so they get more.
# (``--max-reps N`` and ``--max-reps-all N`` raise them, e.g. for a fast library's rerun)
REPS = int(_arg("--max-reps", "3" if QUICK else "10"))
REPS_ALL = int(_arg("--max-reps-all", "5" if QUICK else "40"))
MIN_REPS = 1 if QUICK else 2
WORKER_TIMEOUT = 900.0
CANDIDATES = 2001  # quantile candidates for the peers that need a finite set (step 250)
LIBS = ("dpkit", "opendp", "pipelinedp", "tumult", "diffprivlib", "smartnoise")
# dpkit's planner, given no bounds: measured beside the others, compared with dpkit given the
# bounds (not a peer, so not in LIBS)
PLANNED = "dpkit_planned"
ROWS_OF = ("dpkit", PLANNED, *LIBS[1:])  # the order of the detail tables
LABELS = {
    "dpkit": "dpkit",
    PLANNED: "dpkit, planned",
    "opendp": "OpenDP 0.16",
    "pipelinedp": "PipelineDP 0.3.1",
    "tumult": "Tumult 0.21",
    "diffprivlib": "diffprivlib 0.6.6",
    "smartnoise": "SmartNoise SQL 1.0.10",
}
SPLITS = {
    PLANNED: "no bounds given: the planner takes a tenth of the epsilon for the contribution "
    'bounds, and each `bounds="auto"` aggregate a share of its own part for its value '
    "bounds (the result's plan lists them); a sum and a mean of one column then share one "
    "pair of noisy measures at one upper bound guarded up to all rows in one group (the "
    "complementary pair as dpkit's where it wins at those bounds); the rest as dpkit",
    "dpkit": "its own split (a sum and a mean of one column: one discrete Laplace vector at "
    "their whole budget on the sums of each value's distance above the lower bound and below "
    "the upper bound, the complementary pair, from which the count, sum and mean follow; a "
    "mean alone: a hundredth of its budget to a pilot that chooses each group's centre, the "
    "rest between its count and sum centred there; a "
    "std beside a variance is the variance's square root; the quantiles of one aggregate are "
    "chosen together, one exponential mechanism over tuples of bins at the whole budget "
    "(utility: the largest normalised rank error), a lower level clipped to a higher one; "
    "partition selection thresholds the count's own noisy value, spending no "
    "epsilon of its own, and the threshold takes delta)",
    "opendp": "epsilon split evenly over the expressions of one query (count and sum for "
    "sum/mean, mean = sum / count; count, sum and sum of squares for var/std; one quantile "
    f"each for median and p90, over {CANDIDATES:,} candidates); partition selection thresholds "
    "the noisy count with all of delta",
    "pipelinedp": "its NaiveBudgetAccountant's equal split over the metrics of one aggregate "
    "(COUNT; SUM + MEAN; VARIANCE, std its square root; PERCENTILE(50) + PERCENTILE(90)); "
    "partition selection inside the same budget",
    "tumult": "one query per statistic, epsilon split evenly (sum e/2, average e/2; variance "
    "e/2, stdev e/2; quantile 0.5 e/2, 0.9 e/2); partition selection by `get_groups` "
    "(epsilon / 2, all of delta) then the count (epsilon / 2)",
    "diffprivlib": "row-level DP only: every call gets its share divided by 3 (a person has "
    "up to 3 rows, group privacy), shares even over the statistics (sum e/2, mean e/2; var, "
    "std e/2 each; percentiles e/2 each); one call per city (each person is in one city)",
    "smartnoise": "charged per aggregate: each of the k aggregates of a query gets e/k "
    "(`max_ids` 3); count_keys has no public keys in SmartNoise, so it runs with SmartNoise's "
    "own thresholding, which is the count_select task",
}


# --time-limit S: repeat for up to S seconds per task (default 60) when a library is slow; a
# rerun with a larger S gives a slow peer's medians more runs (each worker still stops at 900 s)
TIME_LIMIT = float(_arg("--time-limit", "30" if QUICK else "60"))
# Workers run JOBS at a time (each its own process; accuracy does not depend on the timing).
JOBS = int(_arg("--jobs", "2"))
ROOT = Path(__file__).resolve().parent.parent
DATA = Path(_arg("--data", "/tmp/dpkit-bench-utility"))
SRC = _arg("--src", str(ROOT / "src"))
PYTHONS = {
    "dpkit": sys.executable,
    PLANNED: sys.executable,
    "opendp": _arg("--peers-python", str(ROOT / ".venv-peers/bin/python")),
    "pipelinedp": _arg("--peers-python", str(ROOT / ".venv-peers/bin/python")),
    "tumult": _arg("--tumult-python", str(ROOT / ".venv-tumult/bin/python")),
    "diffprivlib": _arg("--dplib-python", str(ROOT / ".venv-dplib/bin/python")),
    "smartnoise": _arg("--dplib-python", str(ROOT / ".venv-dplib/bin/python")),
}


def keys() -> list[str]:
    return [f"c{j:04d}" for j in range(1, 1001)]


def _bin_of(x: float) -> int:
    return min(BINS - 1, max(0, int((x - LOWER) // ((UPPER - LOWER) / BINS))))


# A release of one run: {group: {stat: estimate or [estimate, low, high]}}.
Release = dict[str, dict[str, Any]]


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


# ------------------------------------------------------------------ dpkit


def run_dpkit_planned(path: str, task: str) -> Release:
    """dpkit with nothing to hand-tune: no ``.bound(...)`` and ``bounds="auto"`` (the session's
    planner chooses the contribution and value bounds privately, inside the same budget)."""
    return run_dpkit(path, task, planned=True)


def run_dpkit(path: str, task: str, planned: bool = False) -> Release:
    import dpkit.analytics as dpa
    from dpkit.accounting import Budget

    b: Any = "auto" if planned else (LOWER, UPPER)
    selecting = task == "count_select"
    budget = Budget(epsilon=1e9, delta=0.5) if selecting else Budget(epsilon=1e9)
    s = dpa.Session(path, privacy_unit="pid", budget=budget)
    q = s.query()
    if task != "sum_mean_all":
        q = q.group_by("city") if selecting else q.group_by("city", keys=keys())
    if not planned:
        q = q.bound(max_partitions=MAX_PARTITIONS, max_rows_per_partition=MAX_ROWS)
    aggs: dict[str, Any] = {
        "count_keys": {"count": dpa.count()},
        "count_select": {"count": dpa.count()},
        "sum_mean": {"sum": dpa.sum("income", bounds=b), "mean": dpa.mean("income", bounds=b)},
        "sum_mean_all": {
            "sum": dpa.sum("income", bounds=b),
            "mean": dpa.mean("income", bounds=b),
        },
        "var_std": {"var": dpa.variance("income", bounds=b), "std": dpa.std("income", bounds=b)},
        "quantiles": {"q": dpa.quantile("income", [0.5, 0.9], bounds=b)},
        "histogram": {"h": dpa.histogram("income", edges=EDGES)},
    }[task]
    df = q.agg(**aggs).run(epsilon=EPSILON, delta=DELTA if selecting else None)
    cols = set(df.columns)
    out: Release = {}
    for row in df.to_dict("records"):
        key = ALL if task == "sum_mean_all" else str(row["city"])
        vals: dict[str, Any] = {}
        if task == "quantiles":
            for st, col in (("p50", "q_p50"), ("p90", "q_p90")):
                vals[st] = [
                    _num(row[col]),
                    _num(row.get(col + "_low")),
                    _num(row.get(col + "_high")),
                ]
        elif task == "histogram":
            hcols = [
                c for c in df.columns if c.startswith("h[") and not c.endswith(("_low", "_high"))
            ]
            for i, col in enumerate(hcols):
                vals[f"h{i:02d}"] = [
                    _num(row[col]),
                    _num(row[col + "_low"]),
                    _num(row[col + "_high"]),
                ]
        else:
            for st in STATS[task]:
                lo, hi = st + "_low", st + "_high"
                vals[st] = [
                    _num(row[st]),
                    _num(row[lo]) if lo in cols else math.nan,
                    _num(row[hi]) if hi in cols else math.nan,
                ]
        out[key] = vals
    return out


# ------------------------------------------------------------------ OpenDP (Polars API)


def run_opendp(path: str, task: str) -> Release:
    """OpenDP's Polars API; its ``summarize(alpha=0.05)`` accuracy gives count and sum intervals.

    The table is declared with the bounds it satisfies (at most 3 rows per person and one city:
    ``Bound(per_group=3)``, ``Bound(by=["city"], num_groups=1)``); the table size is public (a
    margin), as OpenDP needs for sums.
    """
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    lf = pl.scan_parquet(path).select("city", "income")
    selecting = task == "count_select"
    by = ["city", "bin"] if task == "histogram" else ["city"]
    if task == "histogram":
        width = (UPPER - LOWER) / BINS
        lf = lf.with_columns(
            bin=((pl.col("income") - LOWER) / width).floor().clip(0, BINS - 1).cast(pl.Int64)
        )
    contributions = [dp.polars.Bound(per_group=MAX_ROWS)]
    if task != "sum_mean_all":
        contributions.append(
            dp.polars.Bound(by=by, num_groups=MAX_ROWS if task == "histogram" else 1)
        )
    margins = [dp.polars.Margin(by=[], max_length=ROWS)]
    if task != "sum_mean_all":
        margins.append(
            dp.polars.Margin(
                by=by, max_length=ROWS, max_groups=1000 * (BINS if task == "histogram" else 1)
            )
        )
    ctx = dp.Context.compositor(
        data=lf,
        privacy_unit=dp.unit_of(contributions=contributions),
        privacy_loss=dp.loss_of(epsilon=EPSILON, delta=DELTA if selecting else 0.0),
        split_evenly_over=1,
        margins=margins,
    )
    x = pl.col("income").fill_nan(0.0).fill_null(0.0)
    b = (LOWER, UPPER)
    if task in ("count_keys", "count_select", "histogram"):
        exprs = [dp.len()]
    elif task in ("sum_mean", "sum_mean_all"):
        exprs = [dp.len(), x.dp.sum(b)]
    elif task == "var_std":
        exprs = [dp.len(), x.dp.sum(b), (x * x).alias("sq").dp.sum((LOWER**2, UPPER**2))]
    else:
        step = (UPPER - LOWER) / (CANDIDATES - 1)
        cands = [LOWER + i * step for i in range(CANDIDATES)]
        exprs = [
            x.dp.quantile(0.5, cands).alias("p50"),
            x.dp.quantile(0.9, cands).alias("p90"),
        ]
    q = ctx.query()
    if task == "sum_mean_all":
        query = q.select(*exprs)
    else:
        grouped = q.group_by(*by).agg(*exprs)
        if task == "histogram":
            kf = pl.LazyFrame(
                {"city": [k for k in keys() for _ in range(BINS)], "bin": list(range(BINS)) * 1000}
            )
            query = grouped.with_keys(kf)
        elif not selecting:
            query = grouped.with_keys(pl.LazyFrame({"city": keys()}))
        else:
            query = grouped
    acc: dict[str, float] = {}
    if task in ("count_keys", "count_select", "sum_mean", "sum_mean_all", "histogram"):
        summ = query.summarize(alpha=0.05)
        for col, a in zip(summ["column"], summ["accuracy"], strict=True):
            if a is not None:
                acc[str(col)] = float(a)
    df = query.release().collect()
    out: Release = {}

    def iv(v: float, col: str) -> list[float]:
        a = acc.get(col)
        return [v, v - a, v + a] if a is not None else [v, math.nan, math.nan]

    for row in df.to_dicts():
        key = ALL if task == "sum_mean_all" else str(row["city"])
        if task == "histogram":
            out.setdefault(key, {})[f"h{int(row['bin']):02d}"] = iv(float(row["len"]), "len")
        elif task in ("count_keys", "count_select"):
            out[key] = {"count": iv(float(row["len"]), "len")}
        elif task in ("sum_mean", "sum_mean_all"):
            n, s = float(row["len"]), float(row["income"])
            out[key] = {"sum": iv(s, "income"), "mean": [s / max(n, 1.0), math.nan, math.nan]}
        elif task == "var_std":
            n, s, s2 = max(float(row["len"]), 1.0), float(row["income"]), float(row["sq"])
            v = min(max(s2 / n - (s / n) ** 2, 0.0), ((UPPER - LOWER) / 2) ** 2)
            out[key] = {"var": v, "std": math.sqrt(v)}
        else:
            out[key] = {"p50": _num(row["p50"]), "p90": _num(row["p90"])}
    return out


# ------------------------------------------------------------------ PipelineDP


_PDP_ROWS: list[Any] = []


def run_pipelinedp(path: str, task: str) -> Release:
    """PipelineDP's local backend with Laplace noise and its own bounding."""
    import pipeline_dp
    import pyarrow.parquet as pq

    if not _PDP_ROWS:
        t = pq.read_table(path)
        _PDP_ROWS.extend(
            zip(
                t.column("pid").to_pylist(),
                t.column("city").to_pylist(),
                t.column("income").to_pylist(),
                strict=True,
            )
        )
    selecting = task == "count_select"
    M = pipeline_dp.Metrics
    metrics = {
        "count_keys": [M.COUNT],
        "count_select": [M.COUNT],
        "sum_mean": [M.SUM, M.MEAN],
        "sum_mean_all": [M.SUM, M.MEAN],
        "var_std": [M.VARIANCE],
        "quantiles": [M.PERCENTILE(50), M.PERCENTILE(90)],
        "histogram": [M.COUNT],
    }[task]
    accountant = pipeline_dp.NaiveBudgetAccountant(
        total_epsilon=EPSILON, total_delta=DELTA if selecting else 0.0
    )
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    hist = task == "histogram"
    extra: dict[str, Any] = {}
    if hist:  # a person's 3 rows may fall in 3 cells: at most 3 contributions in all
        extra = {"max_contributions": MAX_ROWS}
    else:
        extra = {
            "max_partitions_contributed": MAX_PARTITIONS,
            "max_contributions_per_partition": MAX_ROWS,
        }
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        metrics=metrics,
        min_value=LOWER,
        max_value=UPPER,
        **extra,
    )
    if task == "sum_mean_all":
        part: Any = lambda r: ALL  # noqa: E731
        public: Any = [ALL]
    elif hist:
        part = lambda r: (r[1], _bin_of(r[2]))  # noqa: E731
        public = [(k, i) for k in keys() for i in range(BINS)]
    else:
        part = lambda r: r[1]  # noqa: E731
        public = None if selecting else keys()
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0],
        partition_extractor=part,
        value_extractor=lambda r: r[2],
    )
    result = engine.aggregate(_PDP_ROWS, params, extractors, public_partitions=public)
    accountant.compute_budgets()
    out: Release = {}
    for k, v in result:
        if hist:
            out.setdefault(str(k[0]), {})[f"h{int(k[1]):02d}"] = float(v.count)
        elif task in ("count_keys", "count_select"):
            out[str(k)] = {"count": float(v.count)}
        elif task in ("sum_mean", "sum_mean_all"):
            out[str(k)] = {"sum": float(v.sum), "mean": float(v.mean)}
        elif task == "var_std":
            var = max(float(v.variance), 0.0)
            out[str(k)] = {"var": var, "std": math.sqrt(var)}
        else:
            out[str(k)] = {"p50": float(v.percentile_50), "p90": float(v.percentile_90)}
    return out


# ------------------------------------------------------------------ Tumult Analytics

_SPARK: list[Any] = []


def run_tumult(path: str, task: str) -> Release:
    """Tumult Analytics on local Spark; it enforces the bounds itself (MaxGroupsPerID,
    MaxRowsPerGroupPerID); one session per run, queries share its budget as SPLITS says."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as sf
    from tmlt.analytics import (
        AddRowsWithID,
        ApproxDPBudget,
        KeySet,
        MaxGroupsPerID,
        MaxRowsPerGroupPerID,
        MaxRowsPerID,
        PureDPBudget,
        QueryBuilder,
        Session,
    )

    if not _SPARK:
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.driver.memory", "4g")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        df = spark.read.parquet(path)
        width = (UPPER - LOWER) / BINS
        df = df.withColumn(
            "bin",
            sf.least(
                sf.greatest(sf.floor((sf.col("income") - LOWER) / width), sf.lit(0)),
                sf.lit(BINS - 1),
            ).cast("long"),
        ).cache()
        df.count()
        _SPARK.extend([spark, df])
    spark, df = _SPARK
    selecting = task == "count_select"
    session = Session.from_dataframe(
        privacy_budget=ApproxDPBudget(EPSILON, DELTA) if selecting else PureDPBudget(EPSILON),
        source_id="rows",
        dataframe=df,
        protected_change=AddRowsWithID(id_column="pid"),
    )

    def bounded(by: str = "city") -> Any:
        qb = QueryBuilder("rows")
        if task == "sum_mean_all":
            return qb.enforce(MaxRowsPerID(MAX_ROWS))
        return qb.enforce(MaxGroupsPerID(by, MAX_PARTITIONS)).enforce(
            MaxRowsPerGroupPerID(by, MAX_ROWS)
        )

    half = PureDPBudget(EPSILON / 2)
    out: Release = {}
    kc = KeySet.from_dict({"city": keys()})
    if task == "count_select":
        groups = session.evaluate(
            bounded().get_groups(["city"]), ApproxDPBudget(EPSILON / 2, DELTA)
        )
        ks = KeySet.from_dataframe(groups)
        r = session.evaluate(
            bounded().groupby(ks).count(name="n"), ApproxDPBudget(EPSILON / 2, 0)
        ).toPandas()
        return {str(c): {"count": float(n)} for c, n in zip(r["city"], r["n"], strict=True)}
    if task == "count_keys":
        r = session.evaluate(
            bounded().groupby(kc).count(name="n"), PureDPBudget(EPSILON)
        ).toPandas()
        return {str(c): {"count": float(n)} for c, n in zip(r["city"], r["n"], strict=True)}
    if task == "histogram":
        # person-level: at most 3 rows in all, so at most 3 (city, bin) groups
        qb = QueryBuilder("rows").enforce(MaxRowsPerID(MAX_ROWS))
        kh = KeySet.from_dict({"city": keys(), "bin": list(range(BINS))})
        r = session.evaluate(qb.groupby(kh).count(name="n"), PureDPBudget(EPSILON)).toPandas()
        for c, i, n in zip(r["city"], r["bin"], r["n"], strict=True):
            out.setdefault(str(c), {})[f"h{int(i):02d}"] = float(n)
        return out
    pairs = {
        "sum_mean": (("sum", "sum"), ("mean", "average")),
        "sum_mean_all": (("sum", "sum"), ("mean", "average")),
        "var_std": (("var", "variance"), ("std", "stdev")),
        "quantiles": (("p50", 0.5), ("p90", 0.9)),
    }[task]
    for st, how in pairs:
        qb = bounded() if task == "sum_mean_all" else bounded().groupby(kc)
        if isinstance(how, float):
            agg = qb.quantile("income", how, LOWER, UPPER, name="v")
        else:
            agg = getattr(qb, how)("income", LOWER, UPPER, name="v")
        r = session.evaluate(agg, half).toPandas()
        if task == "sum_mean_all":
            out.setdefault(ALL, {})[st] = float(r["v"].iloc[0])
        else:
            for c, v in zip(r["city"], r["v"], strict=True):
                out.setdefault(str(c), {})[st] = _num(v)
    return out


# ------------------------------------------------------------------ diffprivlib

_FRAME: list[Any] = []


def _groups(path: str) -> Any:
    if not _FRAME:
        import pandas as pd

        f = pd.read_parquet(path)
        _FRAME.append({str(k): g["income"].to_numpy() for k, g in f.groupby("city")})
        _FRAME.append(f)
    return _FRAME[0]


def run_diffprivlib(path: str, task: str) -> Release:
    """diffprivlib's tools, one call per city (public keys); row-level DP with each call's
    epsilon divided by the 3 rows a person may have (group privacy). A city absent from the
    table is an empty array (diffprivlib adds noise to its zero)."""
    import numpy as np
    from diffprivlib import tools

    if task == "count_select":
        raise NotImplementedError("no partition selection")
    groups = _groups(path)
    b = (LOWER, UPPER)
    data = {ALL: _FRAME[1]["income"].to_numpy()} if task == "sum_mean_all" else groups
    names = [ALL] if task == "sum_mean_all" else keys()
    empty = np.zeros(0)
    out: Release = {}
    e = EPSILON / MAX_ROWS
    if task == "count_keys":
        # One histogram over the city indices of every row: `count_nonzero` on a city's own
        # rows would truncate its noise at the array's length, the true count itself (bounded
        # DP's public size), which no add/remove-DP library may know.
        index = {k: i for i, k in enumerate(names)}
        codes = _FRAME[1]["city"].astype(str).map(index).to_numpy(dtype=float)
        h, _ = tools.histogram(codes, epsilon=e, bins=len(names), range=(0, len(names)))
        return {k: {"count": float(h[i])} for k, i in index.items()}
    for k in names:
        x = data.get(k, empty)
        if task in ("sum_mean", "sum_mean_all"):
            out[k] = {
                "sum": float(tools.sum(x, epsilon=e / 2, bounds=b)),
                "mean": float(tools.mean(x, epsilon=e / 2, bounds=b)) if x.size else math.nan,
            }
        elif task == "var_std":
            out[k] = (
                {
                    "var": float(tools.var(x, epsilon=e / 2, bounds=b)),
                    "std": float(tools.std(x, epsilon=e / 2, bounds=b)),
                }
                if x.size
                else {"var": math.nan, "std": math.nan}
            )
        elif task == "quantiles":
            out[k] = (
                {
                    "p50": float(tools.quantile(x, 0.5, epsilon=e / 2, bounds=b)),
                    "p90": float(tools.quantile(x, 0.9, epsilon=e / 2, bounds=b)),
                }
                if x.size
                else {"p50": math.nan, "p90": math.nan}
            )
        else:
            h, _ = tools.histogram(np.clip(x, LOWER, UPPER), epsilon=e, bins=BINS, range=b)
            out[k] = {f"h{i:02d}": float(v) for i, v in enumerate(h)}
    return out


# ------------------------------------------------------------------ SmartNoise SQL


def run_smartnoise(path: str, task: str) -> Release:
    """SmartNoise SQL over a pandas reader; each aggregate of a query gets epsilon / k."""
    import snsql
    from snsql import Privacy

    if task in ("count_keys", "histogram", "quantiles"):
        raise NotImplementedError("not offered (no public keys / no quantile)")
    _groups(path)
    frame = _FRAME[1]
    meta = {
        "": {
            "P": {
                "T": {
                    "row_privacy": False,
                    "max_ids": MAX_ROWS,
                    "pid": {"name": "pid", "type": "int", "private_id": True},
                    "city": {"name": "city", "type": "string"},
                    "income": {
                        "name": "income",
                        "type": "float",
                        "lower": LOWER,
                        "upper": UPPER,
                    },
                }
            }
        }
    }
    k = {
        "count_select": 1,
        "sum_mean": 2,
        "sum_mean_all": 2,
        "var_std": 2,
    }[task]
    privacy = Privacy(epsilon=EPSILON / k, delta=DELTA)
    conn = snsql.from_df(frame, privacy=privacy, metadata=meta)
    sel = {
        "count_select": "COUNT(*) AS v0",
        "sum_mean": "SUM(income) AS v0, AVG(income) AS v1",
        "sum_mean_all": "SUM(income) AS v0, AVG(income) AS v1",
        "var_std": "VAR(income) AS v0, STDDEV(income) AS v1",
    }[task]
    stats = STATS[task]
    if task == "sum_mean_all":
        rows = conn.execute(f"SELECT {sel} FROM P.T")
        return {ALL: {stats[i]: _num(rows[1][i]) for i in range(len(stats))}}
    rows = conn.execute(f"SELECT city, {sel} FROM P.T GROUP BY city")
    return {str(r[0]): {stats[i]: _num(r[1 + i]) for i in range(len(stats))} for r in rows[1:]}


WORKERS = {
    "dpkit": run_dpkit,
    PLANNED: run_dpkit_planned,
    "opendp": run_opendp,
    "pipelinedp": run_pipelinedp,
    "tumult": run_tumult,
    "diffprivlib": run_diffprivlib,
    "smartnoise": run_smartnoise,
}


def worker(lib: str, path: str, task: str, reps: int, out: str) -> None:
    """Repeat one task; write every run's release and the seconds per run as JSON."""
    fn = WORKERS[lib]
    runs: list[Release] = []
    secs: list[float] = []
    result: dict[str, Any] = {"runs": runs, "seconds": secs}
    start = time.perf_counter()
    try:
        for i in range(reps):
            t = time.perf_counter()
            runs.append(fn(path, task))
            secs.append(time.perf_counter() - t)
            if i + 1 >= MIN_REPS and time.perf_counter() - start > TIME_LIMIT:
                break
    except NotImplementedError as exc:
        result["not_offered"] = str(exc)
    finally:
        Path(out).write_text(json.dumps(result))


# ------------------------------------------------------------------ the parent


def truth(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """Exact answers per city (and overall) and the people per city."""
    import numpy as np
    import pandas as pd

    f = pd.read_parquet(path)
    x = f["income"].clip(LOWER, UPPER)
    true: dict[str, dict[str, Any]] = {}
    g = f.assign(x=x, b=[_bin_of(v) for v in x.to_numpy()]).groupby("city")
    agg = g["x"].agg(["count", "sum", "mean"])
    var = g["x"].var(ddof=0)
    people = g["pid"].nunique().to_dict()
    hist = f.assign(b=[_bin_of(v) for v in x.to_numpy()]).groupby(["city", "b"]).size()
    for c in keys():
        if c not in agg.index:
            true[c] = {"count": 0.0, "sum": 0.0}
            true[c].update({f"h{i:02d}": 0.0 for i in range(BINS)})
            continue
        xs = np.sort(x[f["city"] == c].to_numpy())
        true[c] = {
            "count": float(agg.loc[c, "count"]),
            "sum": float(agg.loc[c, "sum"]),
            "mean": float(agg.loc[c, "mean"]),
            "var": float(var[c]),
            "std": math.sqrt(float(var[c])),
            "p50": float(np.quantile(xs, 0.5)),
            "p90": float(np.quantile(xs, 0.9)),
        }
        true[c].update({f"h{i:02d}": float(hist.get((c, i), 0)) for i in range(BINS)})
    true[ALL] = {"sum": float(x.sum()), "mean": float(x.mean())}
    return true, {str(k): int(v) for k, v in people.items()}


def measure(lib: str, task: str, path: Path) -> dict[str, Any]:
    python = PYTHONS[lib]
    if not Path(python).exists():
        return {"error": f"no interpreter at {python}"}
    reps = REPS_ALL if task == "sum_mean_all" else REPS
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = tmp.name
    cmd = [python, __file__, "--worker", lib, "--task", task, "--path", str(path)]
    cmd += ["--reps", str(reps), "--out", out, "--time-limit", str(TIME_LIMIT)]
    cmd += ["--quick"] if QUICK else []
    env = dict(os.environ)
    mine = lib in ("dpkit", PLANNED)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "") if mine else ""
    env["PYSPARK_PYTHON"] = python
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=WORKER_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc = None
    try:
        result: dict[str, Any] = json.loads(Path(out).read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        result = {}
    Path(out).unlink(missing_ok=True)
    if proc is None:
        result.setdefault("error", f"timed out after {WORKER_TIMEOUT:.0f} s")
    elif proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]
        result.setdefault("error", tail[0][:160])
    return result


def bucket_of(n: int) -> int:
    for i, (lo, hi) in enumerate(BUCKETS):
        if lo <= n <= hi:
            return i
    return 0


def _median(xs: list[float]) -> float:
    xs = sorted(v for v in xs if not math.isnan(v))
    if not xs:
        return math.nan
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def errors(
    result: dict[str, Any], task: str, true: dict[str, dict[str, Any]], people: dict[str, int]
) -> dict[str, Any]:
    """Median absolute and relative error per stat and bucket; coverage; selection figures."""
    runs: list[Release] = result.get("runs", [])
    stats = STATS[task]
    cells = "histogram" if task == "histogram" else None
    groups = [ALL] if task == "sum_mean_all" else keys()
    nb = 1 if task == "sum_mean_all" else len(BUCKETS)
    absd: dict[str, list[list[float]]] = {}
    reld: dict[str, list[list[float]]] = {}
    cover: dict[str, list[int]] = {}
    # per bucket: [intervals, holding the exact value, the whole possible range]
    cover_b: dict[str, list[list[int]]] = {}
    for st in ("h" if cells else None,) if cells else stats:
        absd[st] = [[] for _ in range(nb)]  # type: ignore[index]
        reld[st] = [[] for _ in range(nb)]  # type: ignore[index]
    for run in runs:
        for gk in groups:
            if gk not in run:
                continue
            tv = true.get(gk, {})
            b = 0 if gk == ALL else bucket_of(people.get(gk, 0))
            for st in stats:
                v = run[gk].get(st)
                if v is None or st not in tv:
                    continue
                est, lo, hi = (
                    ([*v, math.nan, math.nan])[:3]
                    if isinstance(v, list)
                    else (v, math.nan, math.nan)
                )
                if est is None or math.isnan(est):
                    continue
                key = "h" if cells else st
                err = abs(est - tv[st])
                absd[key][b].append(err)
                reld[key][b].append(err / max(abs(tv[st]), 1.0))
                if not (math.isnan(lo) or math.isnan(hi)):
                    held = int(lo <= tv[st] <= hi)
                    cover.setdefault(key, []).append(held)
                    cb = cover_b.setdefault(key, [[0, 0, 0] for _ in range(nb)])[b]
                    span = POSSIBLE.get(st)
                    whole = span is not None and lo <= span[0] and hi >= span[1] * (1 - 1e-9)
                    cb[0], cb[1], cb[2] = cb[0] + 1, cb[1] + held, cb[2] + int(whole)
    out: dict[str, Any] = {
        "reps": len(runs),
        "seconds": _median(result.get("seconds", [])),
        "abs": {k: [_median(x) for x in v] for k, v in absd.items()},
        "rel": {k: [_median(x) for x in v] for k, v in reld.items()},
        "cover": {k: (sum(v) / len(v), len(v)) for k, v in cover.items() if v},
        "cover_bucket": cover_b,
    }
    if task == "count_select" and runs:
        rate = {gk: sum(gk in r for r in runs) / len(runs) for gk in people}
        out["released"] = sum(len(r) for r in runs) / len(runs)
        out["half"] = half_size(rate, people)
        out["false"] = sum(1 for r in runs for gk in r if gk not in people) / len(runs)
    return out


def half_size(rate: dict[str, float], people: dict[str, int]) -> float:
    """People count at which a group is released half the time: the release rate of groups
    pooled in bins of people count (log-spaced, 8 per decade), interpolated where it crosses 1/2
    (on the log of the count)."""
    pts: dict[int, list[float]] = {}
    for gk, r in rate.items():
        n = people[gk]
        pts.setdefault(math.floor(8 * math.log10(max(n, 1))), []).append(r)
    xs = sorted(pts)
    curve = [(10 ** ((i + 0.5) / 8), sum(pts[i]) / len(pts[i])) for i in xs]
    for (n0, r0), (n1, r1) in itertools.pairwise(curve):
        if r0 < 0.5 <= r1:
            w = (0.5 - r0) / (r1 - r0)
            return float(10 ** (math.log10(n0) + w * (math.log10(n1) - math.log10(n0))))
    return math.nan if not curve or curve[0][1] < 0.5 else curve[0][0]


TARGET_08 = {
    ("sum_mean_all", "sum"),
    ("sum_mean_all", "mean"),
    ("var_std", "var"),
    ("var_std", "std"),
    ("quantiles", "p50"),
    ("quantiles", "p90"),
}


def fmt(x: float, rel: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if rel:
        return f"{100 * x:.2g}%" if x < 0.1 else f"{100 * x:.0f}%"
    a = abs(x)
    if a >= 1e6:
        return f"{x / 1e6:.2f}M"
    if a >= 1e4:
        return f"{x / 1e3:.0f}k"
    if a >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _best_peer(
    res: dict[str, dict[str, dict[str, Any]]], task: str, st: str, b: int
) -> tuple[float, str]:
    """The smallest median error of any peer in bucket ``b``, and that peer ("" if none)."""
    best, who = math.inf, ""
    for lib in LIBS[1:]:
        a = res.get(lib, {}).get(task, {}).get("abs", {}).get(st)
        if a and not math.isnan(a[b]) and a[b] < best:
            best, who = a[b], lib
    return best, who


def planner_table(res: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """dpkit given no bounds (the planner) against dpkit given the task's bounds and against
    the best peer given them, cell by cell; empty when the planned runs are missing."""
    if not any(r.get("abs") for r in res.get(PLANNED, {}).values()):
        return []
    lines = [
        "### The planner: dpkit given no bounds",
        "",
        'dpkit with no `.bound(...)` and `bounds="auto"` (the planner chooses the '
        "contribution and value bounds privately, inside the task's budget): its median error "
        "over dpkit's with the task's bounds (target: at most 1.5x; those bounds are the "
        "table's true ones, not the best of a grid), then over the best peer's given those "
        "bounds (below 1 when the planner is ahead of every peer).",
        "",
        "| task | statistic | " + " | ".join(BUCKET_NAMES) + " | overall |",
        "| --- | --- | " + " | ".join("---:" for _ in BUCKET_NAMES) + " | ---: |",
    ]
    within = ahead = total = 0
    for task in TASKS:
        keys_ = ("h",) if task == "histogram" else STATS[task]
        nb = 1 if task == "sum_mean_all" else len(BUCKETS)
        for st in keys_:
            p = res.get(PLANNED, {}).get(task, {}).get("abs", {}).get(st)
            d = res.get("dpkit", {}).get(task, {}).get("abs", {}).get(st)
            cells = []
            for b in range(nb):
                if not p or not d or math.isnan(p[b]) or math.isnan(d[b]):
                    cells.append("-")
                    continue
                mine = p[b] / d[b] if d[b] > 0 else math.inf
                peer = p[b] / _best_peer(res, task, st, b)[0]
                total += 1
                within += mine <= 1.5
                ahead += peer < 1
                cells.append(f"{mine:.2f}x / {peer:.2f}x")
            cells = ["" for _ in BUCKETS] + cells if task == "sum_mean_all" else [*cells, ""]
            name = "histogram cell" if st == "h" else st
            lines.append(f"| {task} | {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Within 1.5x of dpkit with the bounds: {within} of {total} cells; ahead of every peer "
        f"given the bounds: {ahead} of {total} cells.",
        "",
    ]
    return lines


def report(
    res: dict[str, dict[str, dict[str, Any]]],
    people: dict[str, int],
    seconds: float,
    load: tuple[float, float],
) -> str:
    from _report import machine

    nb_groups = [
        sum(1 for g in keys() if bucket_of(people.get(g, 0)) == b and g in people)
        for b in range(len(BUCKETS))
    ]
    lines = [
        "## Utility at equal budget (`benchmarks/utility.py`)",
        "",
        f"{ROWS:,} rows of {len(set(people)):,} cities with {sum(people.values()):,} people "
        "(generated by `people_table.py` beside the benchmarks: 1 to 3 yearly rows per person, "
        "one city each, "
        "Zipf-like city sizes, log-normal incomes). Every library: one group per person and 3 "
        f"rows per group, incomes in [{LOWER:,.0f}, {UPPER:,.0f}], epsilon = {EPSILON:g} per "
        f"task (pure; delta = {DELTA:g} for partition selection). Group-size buckets by people "
        "per city: "
        + ", ".join(f"{n} ({c} cities)" for n, c in zip(BUCKET_NAMES, nb_groups, strict=True))
        + ". Each figure is the median absolute error over the cities of a bucket and the "
        "repetitions (counts in rows, sums and means in income units, histogram cells in rows). "
        f"Machine: {machine()}, shared (1-minute load {load[0]:.1f} at the start, "
        f"{load[1]:.1f} at the end); the whole run took {seconds / 60:.0f} minutes.",
        "",
    ]
    # the summary table
    lines += [
        "### dpkit against the best peer",
        "",
        "dpkit's median error over the best peer's (the peer with the smallest median error in "
        "that bucket; in brackets). Target: at most 0.8x where dpkit wastes budget today "
        "(overall sum and mean, variance and std, quantiles; marked *), at most 1.0x elsewhere; "
        "a check mark when met.",
        "",
        "| task | statistic | " + " | ".join(BUCKET_NAMES) + " | overall |",
        "| --- | --- | " + " | ".join("---:" for _ in BUCKET_NAMES) + " | ---: |",
    ]
    for task in TASKS:
        keys_ = ("h",) if task == "histogram" else STATS[task]
        for st in keys_:
            target = 0.8 if (task, st) in TARGET_08 else 1.0
            cells = []
            nb = 1 if task == "sum_mean_all" else len(BUCKETS)
            for b in range(nb):
                d = res.get("dpkit", {}).get(task, {}).get("abs", {}).get(st)
                dv = d[b] if d else math.nan
                best, who = _best_peer(res, task, st, b)
                if d is None:
                    cells.append("not offered")
                elif math.isnan(dv) or not who:
                    cells.append("-")
                else:
                    r = dv / best if best > 0 else math.inf
                    mark = " ✓" if r <= target else ""
                    cells.append(f"{r:.2f}x{mark} ({LABELS[who].split()[0]})")
            cells = ["" for _ in BUCKETS] + cells if task == "sum_mean_all" else [*cells, ""]
            star = " *" if target < 1 else ""
            name = "histogram cell" if st == "h" else st
            lines.append(f"| {task}{star} | {name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += planner_table(res)
    # the detail tables
    for task in TASKS:
        keys_ = ("h",) if task == "histogram" else STATS[task]
        nb = 1 if task == "sum_mean_all" else len(BUCKETS)
        heads = ["overall"] if nb == 1 else list(BUCKET_NAMES)
        lines += [
            f"### {task}",
            "",
            "| library | statistic | " + " | ".join(heads) + " | runs | s per run |",
            "| --- | --- | " + " | ".join("---:" for _ in heads) + " | ---: | ---: |",
        ]
        for lib in ROWS_OF:
            r = res.get(lib, {}).get(task, {})
            if lib == PLANNED and not r:
                continue
            if "error" in r or "not_offered" in r or not r.get("reps"):
                why = (r.get("not_offered") and "not offered") or r.get("error", "not run")
                lines.append(f"| {LABELS[lib]} | | {why} |" + " |" * (len(heads)) + " |")
                continue
            for st in keys_:
                a = r["abs"].get(st, [math.nan] * nb)
                name = "cell" if st == "h" else st
                lines.append(
                    f"| {LABELS[lib]} | {name} | "
                    + " | ".join(fmt(v) for v in a)
                    + f" | {r['reps']} | {r['seconds']:.1f} |"
                )
        if task == "count_select":
            lines += [
                "",
                "| library | groups released (mean) | released half the time at (people) | "
                "groups released not in the data |",
                "| --- | ---: | ---: | ---: |",
            ]
            for lib in ROWS_OF:
                r = res.get(lib, {}).get(task, {})
                if r.get("reps"):
                    lines.append(
                        f"| {LABELS[lib]} | {r['released']:.1f} | {fmt(r['half'])} | "
                        f"{r['false']:.1f} |"
                    )
        lines.append("")
    lines += [
        "### Interval coverage at 95%",
        "",
        "Share of the 95% intervals holding the exact value (number of intervals in brackets), "
        "overall and by bucket; OpenDP's intervals are its `summarize(alpha=0.05)` accuracy "
        "around the estimate (counts and sums only). The other peers give no interval. In "
        "brackets after a bucket's coverage: the share of its intervals that hold every value "
        "the statistic can take at the bounds (a mean's bounds, a variance's [0, ((U - L)/2)^2], "
        "a std's [0, (U - L)/2]). Such an interval holds the exact value whatever it is; when "
        "the noise drowns a group's data, a certified interval must be that wide most of the "
        "time (if the release's law hardly depends on the value, an interval that holds each "
        "possible value with probability 0.95 has an average length of at least 0.95 of the "
        "range), so coverage there is near 100% and the overall figure is above 95%. "
        "The planned intervals are for the statistic at the bounds the planner chose: where "
        "those bounds clip values (the variance of the largest cities), coverage of the "
        "unclipped value falls below 95%.",
        "",
        "| library | task | statistic | coverage | <100 | 100-999 | 1k-9.9k | >=10k |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for lib in ROWS_OF:
        for task in TASKS:
            r = res.get(lib, {}).get(task, {})
            for st, (c, n) in r.get("cover", {}).items():
                cells = []
                for cb in r.get("cover_bucket", {}).get(st, []) if task != "sum_mean_all" else []:
                    tot, held, whole = cb
                    cells.append(
                        f"{100 * held / tot:.1f}%"
                        + (f" ({100 * whole / tot:.0f}%)" if whole else "")
                        if tot
                        else ""
                    )
                cells += [""] * (len(BUCKETS) - len(cells))
                lines.append(
                    f"| {LABELS[lib]} | {task} | {st} | {100 * c:.1f}% ({n:,}) | "
                    + " | ".join(cells)
                    + " |"
                )
    lines += ["", "### How each library splits a task's budget", ""]
    lines += [f"* {LABELS[lib]}: {SPLITS[lib]}." for lib in ROWS_OF]
    lines += [
        "",
        "![median relative error by group size](utility.png)",
        "",
        "Reproduce: `make bench` (or `PYTHONPATH=src .venv/bin/python "
        "benchmarks/utility.py`, with the peer environments of the Makefile); `--src DIR` "
        "measures another dpkit source tree against the same peers.",
    ]
    return "\n".join(lines)


def plot(res: dict[str, dict[str, dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        (t, s)
        for t in TASKS
        if t not in ("sum_mean_all",)
        for s in (("h",) if t == "histogram" else STATS[t])
    ]
    fig, axes = plt.subplots(2, 5, figsize=(16, 6.5), sharex=False)
    # one colour per library in every panel, whichever libraries a panel has
    color = {lib: f"C{i}" for i, lib in enumerate(LIBS)}
    for ax, (task, st) in zip(axes.flat, [*panels, ("sum_mean_all", None)], strict=False):
        if st is None:  # overall sum and mean: bars
            vals = [
                (LABELS[lib].split()[0], res.get(lib, {}).get(task, {}).get("rel", {}))
                for lib in LIBS
            ]
            names = [n for n, r in vals if r.get("mean")]
            libs = [
                lib for lib in LIBS if res.get(lib, {}).get(task, {}).get("rel", {}).get("mean")
            ]
            ax.bar(
                names,
                [r["mean"][0] for n, r in vals if r.get("mean")],
                color=[color[lib] for lib in libs],
            )
            ax.set_title("overall mean", fontsize=9)
            ax.tick_params(axis="x", labelrotation=45, labelsize=7)
            ax.set_yscale("log")
            continue
        for lib in LIBS:
            rel = res.get(lib, {}).get(task, {}).get("rel", {}).get(st)
            if rel:
                ax.plot(range(len(BUCKETS)), rel, marker="o", color=color[lib])
        ax.set_xticks(range(len(BUCKETS)), BUCKET_NAMES, fontsize=7)
        ax.set_yscale("log")
        ax.set_title(f"{task}: {'cell' if st == 'h' else st}", fontsize=9)
    for ax in list(axes.flat)[len(panels) + 1 :]:
        ax.axis("off")
    axes.flat[0].set_ylabel("median relative error")
    handles = [
        plt.Line2D([], [], color=color[lib], marker="o", label=LABELS[lib].split()[0])
        for lib in LIBS
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(LIBS), fontsize=8)
    fig.suptitle("Median relative error by people per city, equal budget", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    from _report import DOC, write_section
    from shared.people_table import people_parquet

    start = time.perf_counter()
    load0 = os.getloadavg()[0]
    path = people_parquet(DATA / f"people-{ROWS}.parquet", ROWS)
    true, people = truth(path)
    only = _arg("--only", ",".join(ROWS_OF)).split(",")
    tasks = _arg("--tasks", ",".join(TASKS)).split(",")
    saved = DATA / ("results-quick.json" if QUICK else "results.json")
    res: dict[str, dict[str, dict[str, Any]]] = {}
    if "--reuse" in sys.argv and saved.exists():  # keep the earlier figures of pairs not rerun
        res = json.loads(saved.read_text())
    # the slow peers first, so the pool is not left waiting on one of them at the end
    order = ("tumult", "pipelinedp", "smartnoise", "dpkit", PLANNED, "opendp", "diffprivlib")
    pairs = [(lib, task) for lib in order if lib in only for task in TASKS if task in tasks]

    def one(pair: tuple[str, str]) -> None:
        lib, task = pair
        t = time.perf_counter()
        raw = measure(lib, task, path)
        if "error" in raw and not raw.get("runs"):
            r: dict[str, Any] = {"error": raw["error"]}
        elif "not_offered" in raw:
            r = {"not_offered": raw["not_offered"]}
        else:
            r = errors(raw, task, true, people)
        res.setdefault(lib, {})[task] = r
        took = time.perf_counter() - t
        print(f"{lib} {task}: {took:.0f} s {json.dumps(r)[:300]}", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        list(pool.map(one, pairs))
    text = report(res, people, time.perf_counter() - start, (load0, os.getloadavg()[0]))
    if "--reuse" in sys.argv:
        libs = dict.fromkeys(lib for lib, _ in pairs)
        rerun = "; ".join(
            f"{LABELS[lib]} ("
            + (
                "every task"
                if all((lib, t) in pairs for t in TASKS)
                else ", ".join(t for lb, t in pairs if lb == lib)
            )
            + ")"
            for lib in libs
        )
        text = text.replace(
            "the whole run took", f"a rerun of {rerun} (other figures kept) took", 1
        )
    png = DOC.parent / ("bench-utility-quick.png" if QUICK else "utility.png")
    plot(res, png)
    if QUICK:
        text = text.replace("(utility.png)", f"({png.name})")
    print(text)
    if not QUICK or os.environ.get("DPKIT_BENCH_DOC"):
        write_section("utility", text)
    saved.write_text(json.dumps(res))


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker(
            _arg("--worker", ""),
            _arg("--path", ""),
            _arg("--task", ""),
            int(_arg("--reps", "1")),
            _arg("--out", ""),
        )
    else:
        main()
