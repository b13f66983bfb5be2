"""Partition selection by the query's own noisy count (no separate selection share).

What is checked: which count is thresholded and when selection stays separate; the charge of a
count-with-selection query is the count's own event plus the threshold's delta and nothing
else (approx and zCDP sessions); the count takes the selection's weight; on neighbouring
tables (:mod:`_proof`: one adversarial unit with many rows in many groups, two groups only it
holds) with the noise off, the count moves by at most its priced sensitivity and the groups
only the adversary holds have at most the row bound the threshold was calibrated for; the
released count is the one thresholded (never below tau).
"""

from __future__ import annotations

from typing import Any

import pytest
from _proof import ADVERSARY, GROUPS, neighbours, sensitivity_usage

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.events import ApproxDpEvent, ApproxZCdpEvent
from dpkit.mechanisms.partition_selection import (
    CountThreshold,
    GaussianPartitionSelection,
    PartitionSelection,
)
from dpkit.noise import RandomSource

P, R = 2, 3
ONLY_ADVERSARY = GROUPS[-2:]  # base_table never uses the last two keys


def _query(budget: Budget, aggs: dict[str, Any], data: Any = None, **gb: Any) -> Any:
    d = neighbours()[0] if data is None else data
    s = dpa.Session(
        d,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=7, insecure=True),
    )
    return (
        s.query().group_by("g", **gb).bound(max_partitions=P, max_rows_per_partition=R).agg(**aggs)
    )


APPROX = Budget(epsilon=100.0, delta=0.5)
ZCDP = Budget(epsilon=100.0, delta=0.5, method="zcdp")


def test_a_count_is_thresholded_and_nothing_else_is_charged_in_approx_sessions() -> None:
    prepared = _query(APPROX, {"n": dpa.count()}).prepare(epsilon=1.0, delta=1e-6)
    pr = prepared.pricing
    assert pr.selection_count == "n"
    assert isinstance(pr.selection, CountThreshold)
    count = pr.stats[0]
    thr = pr.selection
    assert thr.max_value == R and thr.max_partitions == P
    assert thr.scale == count.measures[0].noise.scale
    # the count's own event(s) and the threshold's delta, nothing else
    assert pr.events == (*count.events, ApproxDpEvent(epsilon=0.0, delta=thr.threshold_delta))
    assert thr.threshold_delta <= 1e-6
    charged = pr.charged()
    assert charged["delta"] == thr.threshold_delta
    # the count gets the whole epsilon (its weight plus the selection's)
    assert count.epsilon == 1.0
    assert pr.selection_epsilon == 0.0


def test_a_count_is_thresholded_as_approximate_zcdp_in_zcdp_sessions() -> None:
    prepared = _query(ZCDP, {"n": dpa.count()}).prepare(epsilon=1.0, delta=1e-6)
    pr = prepared.pricing
    assert pr.selection_count == "n"
    thr = pr.selection
    assert thr.kind == "discrete_gaussian"
    count = pr.stats[0]
    assert pr.events == (*count.events, ApproxZCdpEvent(rho=0.0, delta=thr.threshold_delta))
    charged = pr.charged()
    assert charged["approx_delta"] == thr.threshold_delta
    # the whole rho goes to the count: what the same query with public keys gets
    public = _query(ZCDP, {"n": dpa.count()}, keys=list(GROUPS[:-2])).prepare(
        epsilon=1.0, delta=1e-6
    )
    assert charged["rho"] >= public.pricing.charged()["rho"]
    assert count.measures[0].noise.scale <= public.pricing.stats[0].measures[0].noise.scale


@pytest.mark.parametrize("budget", [APPROX, ZCDP])
def test_without_a_count_selection_stays_a_separate_measurement(budget: Budget) -> None:
    pr = (
        _query(budget, {"m": dpa.mean("x", bounds=(0.0, 10.0))})
        .prepare(epsilon=1.0, delta=1e-6)
        .pricing
    )
    assert pr.selection_count is None
    assert isinstance(pr.selection, (PartitionSelection, GaussianPartitionSelection))


def test_the_count_takes_the_selection_weight() -> None:
    q = _query(
        APPROX,
        {"n": dpa.count(), "t": dpa.sum("x", bounds=(0.0, 10.0))},
        selection_weight=2.0,
    )
    pr = q.prepare(epsilon=1.0, delta=1e-6).pricing
    share = {sp.name: sp.epsilon for sp in pr.stats}
    assert share["n"] == pytest.approx(0.75) and share["t"] == pytest.approx(0.25)
    summary = q.summarize(epsilon=1.0, delta=1e-6)
    assert summary["share"].sum() == pytest.approx(1.0)


def test_a_count_pooled_with_a_mean_is_not_thresholded() -> None:
    # count(x) is released from the mean's N: not a measure of its own
    pr = (
        _query(APPROX, {"c": dpa.count("x"), "m": dpa.mean("x", bounds=(0.0, 10.0))})
        .prepare(epsilon=1.0, delta=1e-6)
        .pricing
    )
    assert {sp.name: sp.shared_with for sp in pr.stats}["c"] == "m"
    assert pr.selection_count is None
    assert isinstance(pr.selection, PartitionSelection)


@pytest.mark.parametrize("budget", [APPROX, ZCDP])
@pytest.mark.parametrize("agg", ["count", "count_distinct"])
def test_neighbours_move_the_thresholded_count_within_its_sensitivity(
    budget: Budget, agg: str
) -> None:
    """Noise off: the engine's exact results on D and D' (one unit added, in every group,
    two groups only it holds)."""
    stat = dpa.count() if agg == "count" else dpa.count_distinct()
    prepared = _query(budget, {"n": stat, "t": dpa.sum("x", bounds=(0.0, 10.0))}).prepare(
        epsilon=1.0, delta=1e-6
    )
    d, d_prime = neighbours()
    engine = DuckDBEngine(threads=1)
    engine.register("d", d)
    engine.register("d_prime", d_prime)
    ra = prepared.exact(engine, Source(kind="table", location="d"))
    rb = prepared.exact(engine, Source(kind="table", location="d_prime"))
    assert sensitivity_usage(prepared, ra, rb) <= 1.0
    thr = prepared.pricing.selection
    assert prepared.pricing.selection_count == "n"
    name = prepared.pricing.stats[0].measures[0].measure.name
    index_b = {k: i for i, k in enumerate(rb.keys)}
    index_a = {k: i for i, k in enumerate(ra.keys)}
    seen = 0
    for g in ONLY_ADVERSARY:
        assert (g,) not in index_a
        if (g,) in index_b:
            seen += 1
            assert 0 <= int(rb.values[name][index_b[(g,)]]) <= thr.max_value
    assert seen <= P
    assert ADVERSARY not in set(d["uid"])


def test_the_released_count_is_the_thresholded_one() -> None:
    """Every released count lies above tau (the same noisy value decided the release)."""
    prepared = _query(APPROX, {"n": dpa.count()}).prepare(epsilon=1.0, delta=0.2)
    d_prime = neighbours()[1]
    engine = DuckDBEngine(threads=1)
    engine.register("d_prime", d_prime)
    rb = prepared.exact(engine, Source(kind="table", location="d_prime"))
    tau = prepared.pricing.selection.tau
    src = RandomSource(seed=3, insecure=True)
    for _ in range(30):
        frame = prepared.release_from(rb, source=src)
        assert (frame["n"] > tau).all()
        info = frame.attrs["dpkit"]["partition_selection"]
        assert info["count"] == "n" and info["tau"] == tau
        assert f"above {tau}" in frame.attrs["dpkit"]["columns"]["n"]["selection"]


def _people_in_groups(people: int = 400) -> Any:
    """Each person in 1-4 of 12 groups with 1-3 rows in each (no public keys)."""
    import pandas as pd

    uid, grp = [], []
    for u in range(people):
        for j in range(1 + u % 4):
            uid += [u] * (1 + (u + j) % 3)
            grp += [(u + 5 * j) % 12] * (1 + (u + j) % 3)
    return pd.DataFrame({"uid": uid, "g": grp, "v": [1.0] * len(uid)})


def test_a_planned_query_thresholds_its_count_at_the_shared_pair() -> None:
    """A planned query (no ``.bound``) without keys keeps the shared contribution rule: the
    step chooses no per-statistic pairs, and the release thresholds its count's own noise at
    the one pair chosen (the threshold's row bound and number of groups are that pair's). zCDP
    sessions refuse planned bounds with partition selection, so this is an approx session."""
    budget = Budget(epsilon=10.0, delta=1e-3)
    s = dpa.Session(
        _people_in_groups(3000),
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=5, insecure=True),
    )
    q = s.query().group_by("g").agg(n=dpa.count(), t=dpa.sum("v", bounds=(0, 1)))
    planned = q.prepare(epsilon=3.0, delta=1e-6, two_step=True)
    assert planned.planned and planned.contribution.targets == ()
    release, chosen = planned.prepare_release({"max_partitions": 3, "max_rows_per_partition": 2})
    assert "statistics" not in chosen
    pr = release.pricing
    assert pr.selection_count == "n" and isinstance(pr.selection, CountThreshold)
    assert (pr.selection.max_partitions, pr.selection.max_value) == (3, 2)
    assert pr.bounds_of("n") == pr.bounds_of("t") == (3, 2)
    count = next(sp for sp in pr.stats if sp.name == "n")
    assert pr.selection.scale == count.measures[0].noise.scale
    frame = q.run(epsilon=3.0, delta=1e-6)
    info = frame.attrs["dpkit"]["partition_selection"]
    plan = frame.attrs["dpkit"]["plan"]
    assert info["count"] == "n" and info["mechanism"] == "CountThreshold"
    assert info["max_partitions"] == plan["max_partitions"]
    assert "statistics" not in plan
    assert len(frame) > 0 and (frame["n"] > info["tau"]).all()
    assert len(budget.ledger) == 1
