"""A bounds plan computes one value histogram for two ``"auto"`` statistics only when their
exact counts are the same (same column, grid and rows per unit): statistics of other columns
(a derived one included) or with other row bounds keep their own, and every statistic that
prices an estimate draws its noise once, on its own exact counts, with its event charged once.

Red-team check of the shared histograms of a bounds plan (no finding): with a sum and a
variance of ``x`` at 2 rows per unit, a mean of ``x`` at 4, a mean of ``y`` and a sum of the
derived ``z = x * 2``, each statistic's noisy histogram is the one the plan with one histogram
per statistic would release, for the same draws.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Source
from dpkit.analytics._planner import NoisyHistogram
from dpkit.analytics.builder import _histogram_measures
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.noise import RandomSource


def _prepared() -> tuple[Any, pd.DataFrame]:
    rng = np.random.default_rng(5)
    n = 3_000
    df = pd.DataFrame(
        {
            "uid": rng.integers(0, 400, n),  # about 7 rows per unit: row bounds matter
            "x": rng.lognormal(2.0, 2.0, n),
            "y": rng.normal(-300.0, 50.0, n),
        }
    )
    s = dpa.Session(df, privacy_unit="uid", budget=Budget(epsilon=100.0))
    q = (
        s.query()
        .where("y < 0")
        .derive("z", "x * 2")
        .agg(
            t=dpa.sum("x", bounds="auto"),
            v=dpa.variance("x", bounds="auto"),
            m=dpa.mean("x", bounds="auto"),
            my=dpa.mean("y", bounds="auto"),
            tz=dpa.sum("z", bounds="auto"),
        )
        .bound_each({"t": (1, 2), "v": (1, 2), "m": (1, 4), "my": (1, 4), "tz": (1, 2)})
    )
    return q.prepare(epsilon=2.0, two_step=True), df


def test_only_equal_histograms_are_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    prepared, df = _prepared()
    owners = [a for a in prepared.pricing.auto if a.reads is None]
    assert {a.name for a in owners} == {"t", "v", "m", "my", "tz"}  # each prices its estimate
    measures, computed = _histogram_measures(prepared.pricing)
    by_name = {a.name: computed[a.measure.name] for a in owners}
    assert by_name["t"] == by_name["v"]  # same column, same rows per unit: one histogram
    assert len({by_name[n] for n in ("t", "m", "my", "tz")}) == 4  # all others their own
    assert len(measures) == 4 and prepared.bounds_plan.aggregate.measures == measures

    engine = DuckDBEngine(threads=1)
    engine.register("d", df)
    plan = dataclasses.replace(prepared.bounds_plan, source=Source(kind="table", location="d"))
    shared = engine.execute(plan)
    each = engine.execute(
        dataclasses.replace(
            plan,
            aggregate=dataclasses.replace(
                plan.aggregate, measures=tuple(a.measure for a in owners)
            ),
        )
    )
    own = {a.name: tuple(each.values[a.measure.name][0]) for a in owners}
    # the row bounds make a difference here, so reading another's counts would show
    assert own["t"] != own["m"]

    draws: list[tuple[int, tuple[int, ...]]] = []
    release = NoisyHistogram.release

    def recorded(self: NoisyHistogram, counts: Any, source: Any) -> list[int]:
        draws.append((id(self), tuple(int(c) for c in counts)))
        return release(self, counts, source)

    monkeypatch.setattr(NoisyHistogram, "release", recorded)
    got = prepared.estimate_bounds(shared, source=RandomSource(seed=4, insecure=True))
    # one draw per statistic, on its own mechanism and its own exact counts
    assert sorted(draws) == sorted((id(a.mechanism), own[a.name]) for a in owners)
    draws.clear()
    want = prepared.estimate_bounds(each, source=RandomSource(seed=4, insecure=True))
    assert got == want
    # each estimate's event charged once, in the query's events
    events = prepared.pricing.events
    for a in owners:
        assert sum(e is a.mechanism.event for e in events) == 1
