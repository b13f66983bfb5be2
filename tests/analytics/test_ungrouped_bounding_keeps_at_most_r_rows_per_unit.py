"""A statement without group keys (one global group) keeps at most ``max_rows_per_partition``
rows of each privacy unit, whatever its rows, and keeps the same rows in any file order.

Without keys each unit's rows are ranked by one ``ROW_NUMBER`` over (row hash, row content),
``gr = g = 1`` being constants (:mod:`dpkit.analytics.engines._compiler.bounding`). Red-team
check of that statement (no finding): a unit made of duplicates, NULL and NaN values, ``-0.0``
beside ``0.0``, infinities and many equal rows moves every exact aggregate of an ungrouped
count, sum, variance and histogram by at most its calibrated sensitivity when it is added, and
by all of it (the bound is tight); shuffling the rows changes no exact aggregate (same salt).
Exact, with the noise off, on both bounding hashes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _proof import sensitivity_usage

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Source
from dpkit.analytics.engines.duckdb import DuckDBEngine

#: the added unit's values, in turn: NaN and NULL are skipped, the others clamp or bin
ODD: tuple[Any, ...] = (1.0, 1.0, math.nan, None, -0.0, 0.0, math.inf, -math.inf, 1e308, 2.5)


def _base(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {"uid": rng.integers(0, n, 3 * n).astype(str), "x": rng.normal(0.0, 3.0, 3 * n)}
    )


def _unit(rows: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"uid": ["added"] * rows, "x": [ODD[i % len(ODD)] for i in range(rows)]}
    ).astype({"x": float})


@pytest.mark.parametrize("hash_kind", ["native", "md5"])
@pytest.mark.parametrize(("rows", "r"), [(1, 1), (40, 1), (40, 3), (400, 7)])
def test_an_added_unit_moves_each_ungrouped_aggregate_by_at_most_its_sensitivity(
    hash_kind: str, rows: int, r: int
) -> None:
    base = _base()
    with_unit = pd.concat([base, _unit(rows)], ignore_index=True)
    engine = DuckDBEngine(threads=1, hash=hash_kind)  # type: ignore[arg-type]
    engine.register("d", base)
    engine.register("d_prime", with_unit)
    s = dpa.Session(base, privacy_unit="uid", budget=Budget(epsilon=100.0))
    prepared = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=r)
        .agg(
            n=dpa.count(),
            t=dpa.sum("x", bounds=(-5.0, 5.0)),
            v=dpa.variance("x", bounds=(-4.0, 4.0)),
            h=dpa.histogram("x", edges=[-2.0, 0.0, 1.0, 4.0]),
        )
        .prepare(epsilon=1.0)
    )
    ra, rb = (
        engine.execute(dataclasses.replace(prepared.plan, source=Source(kind="table", location=n)))
        for n in ("d", "d_prime")
    )
    # r rows kept of the unit's: the count moves by r, all of its sensitivity ...
    assert rb.values["n:n"][0] - ra.values["n:n"][0] == min(rows, r)
    # ... and no measure (centred sums of squares included) moves by more than its own
    assert sensitivity_usage(prepared, ra, rb) <= 1.0


@pytest.mark.parametrize("hash_kind", ["native", "md5"])
def test_ungrouped_results_do_not_depend_on_row_order(hash_kind: str) -> None:
    """Eight row orders of a table whose units hold duplicates, NULL, NaN and -0.0 give the
    same exact aggregates under one salt."""
    d = pd.concat(
        [_base(60), _unit(50), _unit(9).assign(uid="nine"), _unit(3).assign(uid="three")],
        ignore_index=True,
    )
    s = dpa.Session(d, privacy_unit="uid", budget=Budget(epsilon=100.0))
    plan = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=2)
        .agg(
            n=dpa.count(),
            t=dpa.sum("x", bounds=(-5.0, 5.0)),
            h=dpa.histogram("x", edges=[-2.0, 0.0, 1.0, 4.0]),
        )
        .prepare(epsilon=1.0)
        .plan
    )
    seen = set()
    for seed in range(8):
        engine = DuckDBEngine(threads=1, hash=hash_kind)  # type: ignore[arg-type]
        engine.register("d", d.sample(frac=1.0, random_state=seed).reset_index(drop=True))
        got = engine.execute(dataclasses.replace(plan, source=Source(kind="table", location="d")))
        seen.add(repr(sorted(got.values.items())))
    assert len(seen) == 1
