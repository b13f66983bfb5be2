"""A std asked beside a variance of the same column and bounds is that variance's square root.

std is a function of the variance, so releasing both from independent noise wastes half the
budget: the pair is released as one variance (its count, centred sum and sum of squares noised
once with the budget of both) and the std is its square root, interval ends included (``sqrt``
is increasing, so the interval keeps its level). These tests are exact: the noise scales and
the charge against a variance-only query, and the released values against each other.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._pricing import price
from dpkit.noise import RandomSource


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {"uid": np.arange(3000), "g": rng.integers(0, 4, 3000), "x": rng.uniform(0, 50, 3000)}
    )


def _price(stats: dict[str, dpa.Statistic], mode: str = "pure") -> object:
    return price(
        stats,
        mode=mode,  # type: ignore[arg-type]
        epsilon=1.0,
        delta=0.0 if mode == "pure" else 1e-6,
        max_partitions=1,
        max_rows_per_partition=2,
        select_partitions=False,
    )


def test_std_shares_the_variance_measures_and_its_whole_budget() -> None:
    for mode in ("pure", "zcdp"):
        both = _price(
            {"v": dpa.variance("x", bounds=(0, 50)), "s": dpa.std("x", bounds=(0, 50))}, mode
        )
        alone = _price({"v": dpa.variance("x", bounds=(0, 50), weight=2.0)}, mode)
        sp = {p.name: p for p in both.stats}  # type: ignore[attr-defined]
        assert sp["s"].shared_with == "v" and sp["v"].shared_with is None
        assert len(both.measures) == 3  # type: ignore[attr-defined]
        got = [m.noise for m in sp["v"].measures]
        want = [m.noise for m in alone.stats[0].measures]  # type: ignore[attr-defined]
        assert got == want  # the variance alone with the weight of both: same noise
        assert both.charged() == alone.charged()  # type: ignore[attr-defined]


def test_std_of_another_column_or_bounds_is_released_on_its_own() -> None:
    p = _price({"v": dpa.variance("x", bounds=(0, 50)), "s": dpa.std("x", bounds=(0, 40))})
    assert all(s.shared_with is None for s in p.stats)  # type: ignore[attr-defined]


def test_released_std_is_the_square_root_of_the_released_variance() -> None:
    s = dpa.Session(
        _table(),
        privacy_unit="uid",
        budget=Budget(epsilon=10.0),
        source_of_randomness=RandomSource(seed=1, insecure=True),
    )
    f = (
        s.query()
        .group_by("g", keys=[0, 1, 2, 3, 9])
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(v=dpa.variance("x", bounds=(0, 50)), s=dpa.std("x", bounds=(0, 50)))
        .run(epsilon=1.0)
    )
    for col in ("", "_low", "_high"):
        assert list(f["s" + col]) == [math.sqrt(v) for v in f["v" + col]]
    assert "square root of v" in f.attrs["dpkit"]["columns"]["s"]["mechanism"]


def test_auto_std_shares_the_auto_variance_histogram_and_its_whole_budget() -> None:
    """Both ``bounds="auto"`` (same ``auto_share``): one bounds histogram and one release, on
    the budget of both, exactly as a variance alone with their two weights."""
    for mode in ("pure", "zcdp"):
        both = _price(
            {"v": dpa.variance("x", bounds="auto"), "s": dpa.std("x", bounds="auto")}, mode
        )
        alone = _price({"v": dpa.variance("x", bounds="auto", weight=2.0)}, mode)
        assert [ab.name for ab in both.auto] == ["v"]  # type: ignore[attr-defined]
        (ab,) = both.auto  # type: ignore[attr-defined]
        (ab_alone,) = alone.auto  # type: ignore[attr-defined]
        assert ab.main_share == ab_alone.main_share
        assert ab.mechanism == ab_alone.mechanism
        assert both.charged() == alone.charged()  # type: ignore[attr-defined]
        (sp,) = both.stats  # type: ignore[attr-defined]
        assert sp.name == "s" and sp.shared_with == "v" and sp.measures == ()
    # another share of the budget for its bounds: released on its own
    p = _price(
        {"v": dpa.variance("x", bounds="auto"), "s": dpa.std("x", bounds="auto", auto_share=0.1)}
    )
    assert [ab.name for ab in p.auto] == ["v", "s"]  # type: ignore[attr-defined]


def test_planned_std_is_the_square_root_of_the_planned_variance() -> None:
    """No bounds given: the std is the square root of the variance, at its estimated bounds,
    within the query's one charge; the summary shows it priced from the variance."""
    s = dpa.Session(
        _table(),
        privacy_unit="uid",
        budget=Budget(epsilon=10.0),
        source_of_randomness=RandomSource(seed=2, insecure=True),
    )
    q = (
        s.query()
        .group_by("g", keys=[0, 1, 2, 3])
        .agg(v=dpa.variance("x", bounds="auto"), s=dpa.std("x", bounds="auto"))
    )
    rows = q.summarize(epsilon=1.0)
    assert "s" in set(rows["aggregate"])
    assert math.isclose(float(rows["share"].sum()), 1.0)
    f = q.run(epsilon=1.0)
    assert len(s.budget.ledger) == 1 and s.budget.spent.epsilon <= 1.0
    for col in ("", "_low", "_high"):
        assert list(f["s" + col]) == [math.sqrt(v) for v in f["v" + col]]
    info = f.attrs["dpkit"]["columns"]
    assert "square root of v" in info["s"]["mechanism"]
    assert info["s"]["bounds"] == info["v"]["bounds"] == f.attrs["dpkit"]["plan"]["bounds"]["v"]
    assert info["s"]["bounds_source"] == "private estimate"
