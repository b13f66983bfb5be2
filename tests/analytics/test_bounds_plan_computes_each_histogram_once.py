"""The bounds plan of a ``bounds="auto"`` query computes each distinct value histogram once.

A sum and a mean of one column, each with ``bounds="auto"`` and its own estimate, have the same
exact bin counts (same column, grid and rows per unit): the statement computes them once and
each statistic still noises them on its own, at its own price. The estimated bounds are then
exactly those of a plan computing one histogram per statistic, for the same noise draws.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.noise import RandomSource


def _prepared(tmp_path: Path, mode: str) -> Any:
    rng = np.random.default_rng(11)
    n = 4_000
    df = pd.DataFrame(
        {
            "uid": rng.integers(0, 1_500, n),
            "g": rng.choice(["a", "b"], n),
            "x": rng.lognormal(3.0, 1.0, n),
        }
    )
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    approx = mode == "approx"
    budget = Budget(epsilon=10.0, delta=1e-6 if approx else 0.0, method="basic")
    s = dpa.Session(
        str(path),
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=3, insecure=True),
    )
    q = (
        s.query()
        .group_by("g", keys=["a", "b"])
        .bound(max_partitions=1, max_rows_per_partition=2)
        .agg(t=dpa.sum("x", bounds="auto"), m=dpa.mean("x", bounds="auto"))
    )
    return q.prepare(epsilon=1.0, delta=1e-6 if approx else None, two_step=True)


@pytest.mark.parametrize("mode", ["approx", "pure"])
def test_one_histogram_computed_each_statistic_noised_on_its_own(tmp_path: Path, mode: str) -> None:
    prepared = _prepared(tmp_path, mode)
    owners = [a for a in prepared.pricing.auto if a.reads is None]
    assert len(owners) == 2  # each statistic prices its own estimate ...
    assert all(len(a.events) == 2 for a in owners)  # ... histogram and release both charged
    plan = prepared.bounds_plan
    assert len(plan.aggregate.measures) == 1  # ... and the statement computes the counts once
    engine = DuckDBEngine(threads=1)
    one = engine.execute(plan)
    each = dataclasses.replace(
        plan,
        aggregate=dataclasses.replace(plan.aggregate, measures=tuple(a.measure for a in owners)),
    )
    both = engine.execute(each)
    counts = [both.values[a.measure.name] for a in owners]
    assert counts[0] == counts[1] == one.values[plan.aggregate.measures[0].name]
    got = prepared.estimate_bounds(one, source=RandomSource(seed=9, insecure=True))
    want = prepared.estimate_bounds(both, source=RandomSource(seed=9, insecure=True))
    assert got == want
