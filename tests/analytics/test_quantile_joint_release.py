"""Several levels of one quantile aggregate in a query: under pure DP they are chosen by one
joint selection per group (``BinnedQuantile(joint=True)``) at the aggregate's whole share, under
zCDP by separate selections; the charge stays within the budget either way, and the released
values are in the order of the levels (a lower level above a higher one is lowered to it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._pricing import price
from dpkit.noise import RandomSource


@pytest.mark.parametrize(("mode", "joint"), [("pure", True), ("zcdp", False)])
def test_joint_under_pure_dp_only(mode: str, joint: bool) -> None:
    stat = dpa.quantile("x", [0.5, 0.9], bounds=(0, 200))
    pr = price(
        {"m": stat},
        mode=mode,
        epsilon=1.0,
        delta=0.0 if mode == "pure" else 1e-6,
        max_partitions=2,
        max_rows_per_partition=3,
        select_partitions=False,
    )
    mech = pr.stats[0].quantile_mechanism
    assert mech.joint is joint
    if joint:  # one selection per group at half the share (two groups per unit)
        assert mech.epsilon_each == pytest.approx(0.5)
        assert mech.event.count == 2
    assert pr.charged()["epsilon"] <= 1.0


def test_one_level_is_not_joint() -> None:
    pr = price(
        {"m": dpa.quantile("x", 0.9, bounds=(0, 200))},
        mode="pure",
        epsilon=1.0,
        delta=0.0,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=False,
    )
    assert pr.stats[0].quantile_mechanism.joint is False


def _groups_of_three(groups: int, q: Any) -> pd.DataFrame:
    """Release ``q`` per group (public keys) over ``groups`` groups of 3 people, one row each,
    exponential values clipped to [0, 200], at epsilon 1 with a seeded source."""
    rng = np.random.default_rng(8)
    df = pd.DataFrame({"uid": np.arange(3 * groups), "g": np.repeat(np.arange(groups), 3)})
    df["x"] = rng.exponential(30.0, 3 * groups).clip(0, 200)
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=Budget(epsilon=10),
        source_of_randomness=RandomSource(seed=4, insecure=True),
    )
    return (
        s.query()
        .group_by("g", keys=list(range(groups)))
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(q=q)
        .run(epsilon=1.0)
    )


def test_levels_come_out_in_order_and_tiny_groups_keep_their_upper_level() -> None:
    """Groups of 3 people: the levels given out of order still come back ordered per row."""
    f = _groups_of_three(100, dpa.quantile("x", [0.9, 0.1, 0.5], bounds=(0, 200)))
    lo, mid, hi = f["q_p10"].to_numpy(), f["q_p50"].to_numpy(), f["q_p90"].to_numpy()
    assert np.all(lo <= mid) and np.all(mid <= hi)
    assert np.all((lo >= 0) & (hi <= 200))


def test_levels_stay_in_order_with_intervals() -> None:
    """With ``interval_share`` each estimate is clipped into its own interval; clipping level by
    level put a lower level above a higher one in small groups (4 of these 300 groups of 3
    people: p10 raised to its interval's low end, p90 left below it). The order holds in every
    group, and each estimate stays in its interval whenever an ordered choice exists."""
    f = _groups_of_three(300, dpa.quantile("x", [0.9, 0.1], bounds=(0, 200), interval_share=0.5))
    v10, v90 = f["q_p10"].to_numpy(), f["q_p90"].to_numpy()
    assert np.all(v10 <= v90)
    lo10, hi10 = f["q_p10_low"].to_numpy(), f["q_p10_high"].to_numpy()
    lo90, hi90 = f["q_p90_low"].to_numpy(), f["q_p90_high"].to_numpy()
    ordered = lo10 <= hi90  # some v10 <= v90 with each in its interval
    assert np.all(((lo10 <= v10) & (v10 <= hi10) & (lo90 <= v90) & (v90 <= hi90))[ordered])
