"""A planned mean's centred sum ``T = S - c N`` moves by at most its calibrated sensitivity
``p r max(c - lower, upper - c)`` (in fixed-point steps) when one person is added, wherever
the planner puts the centre ``c`` (at either bound, off the fixed-point lattice, near the
largest bound the engine accepts) and whatever that person's values (NaN, NULL, +-inf,
+-1e308, -0.0, subnormals, integers beyond 2^53). Exact, with the noise off: the centre
and the count's share are given as the release step would get them from the planner.

Red-team check of the centred mean (no finding): every case below used at most its
sensitivity, and the far-side cases use exactly all of it (the bound is tight).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _proof import changed_keys, exact_cells, sensitivity_usage

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Source
from dpkit.analytics.engines.duckdb import DuckDBEngine

GROUPS = list(range(10))
#: values that leave the bounds on the low side (NaN and NULL are dropped, so move nothing)
LOW: tuple[Any, ...] = (-math.inf, -1e308, -0.0, -5e-324, 0.0, math.nan, None)
HIGH: tuple[Any, ...] = (math.inf, 1e308, 2.0**60, 2.0**53 + 2.0, math.nan, None)


def _table(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    return pd.DataFrame(
        {
            "uid": np.repeat(np.arange(n), 2).astype(float),
            "g": rng.integers(0, 10, 2 * n),
            "v": rng.lognormal(math.log(20_000.0), 1.0, 2 * n),
        }
    )


def _usage(bounds: tuple[float, ...], values: tuple[Any, ...]) -> tuple[float, float]:
    """The share of its calibrated sensitivity the centred sum ``T`` uses, and the largest
    share any measure of the mean uses, when one person with 30 rows over all groups
    (``values`` in turn) is added; contribution bounds 3 x 2."""
    d = _table()
    rows = [values[i % len(values)] for i in range(30)]
    extra = pd.DataFrame({"uid": [1e6] * 30, "g": GROUPS * 3, "v": rows})
    engine = DuckDBEngine(threads=1)
    engine.register("d", d)
    engine.register("d_prime", pd.concat([d, extra.astype({"v": float})], ignore_index=True))
    s = dpa.Session(d, privacy_unit="uid", budget=Budget(epsilon=100.0))
    prepared = (
        s.query()
        .group_by("g", keys=GROUPS)
        .agg(m=dpa.mean("v", bounds="auto"))
        .bound(max_partitions=3, max_rows_per_partition=2)
        .prepare(epsilon=1.0, two_step=True)
        .with_bounds({"m": bounds})
    )
    ra, rb = (
        engine.execute(dataclasses.replace(prepared.plan, source=Source(kind="table", location=n)))
        for n in ("d", "d_prime")
    )
    m_n, m_s = prepared.pricing.stats[0].measures
    shift = 0
    for key in changed_keys(ra, rb):
        t_a, t_b = (
            exact_cells(res, m_s.measure.name, key, 1)[0]
            - m_s.center * exact_cells(res, m_n.measure.name, key, 1)[0]
            for res in (ra, rb)
        )
        shift += abs(t_b - t_a)
    return shift / m_s.l1, float(sensitivity_usage(prepared, ra, rb))


@pytest.mark.parametrize(
    ("bounds", "far"),
    [
        ((1024.0, 220436.0, 1024.0, 0.5), HIGH),  # centre at the lower bound
        ((1024.0, 220436.0, 220436.0, 0.01), LOW),  # at the upper bound, count share 1/100
        ((1024.0, 220436.0, 47000.3, 0.22), HIGH),  # not on the fixed-point lattice
        ((0.1, 0.3, 0.2000000001, 0.99), LOW),  # bounds not representable either
        ((0.0, 2.0**50, 2.0**49 - 12345.6, 0.5), HIGH),  # the planner's largest bound
    ],
)
def test_a_centred_mean_uses_exactly_its_sensitivity_on_the_far_side_of_its_centre(
    bounds: tuple[float, ...], far: tuple[Any, ...]
) -> None:
    # NaN and NULL left out, so every kept row moves T by the full reach
    assert _usage(bounds, far[:-2]) == (1.0, 1.0)
    near = LOW if far is HIGH else HIGH  # the short side: T moves by less than its bound
    assert _usage(bounds, near[:-2])[0] < 1.0


@pytest.mark.parametrize("centre", [1024.0, 47000.3, 220436.0])
def test_a_centred_mean_never_moves_beyond_its_sensitivity_for_any_extreme_value(
    centre: float,
) -> None:
    for values in (LOW, HIGH, LOW + HIGH, (math.nan, None)):
        t_used, worst = _usage((1024.0, 220436.0, centre, 0.3), values)
        assert t_used <= 1.0 and worst <= 1.0
