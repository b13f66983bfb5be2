"""zCDP sessions with private partition selection: Gaussian thresholding as approximate zCDP."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.accounting.zcdp import ZCdpAccountant, approx_delta, approx_epsilon
from dpkit.analytics._pricing import price
from dpkit.errors import BudgetExceededError
from dpkit.events import ApproxZCdpEvent, ComposedEvent
from dpkit.mechanisms.partition_selection import CountThreshold, GaussianPartitionSelection
from dpkit.noise import RandomSource


def _table() -> pd.DataFrame:
    """2000 units in "big", 400 in "mid", one unit (3 rows) in "tiny"."""
    units = list(range(2000)) + list(range(2000, 2400)) + [9999] * 3
    regions = ["big"] * 2000 + ["mid"] * 400 + ["tiny"] * 3
    rng = np.random.default_rng(5)
    return pd.DataFrame({"uid": units, "region": regions, "x": rng.uniform(0, 10, len(units))})


def _session(budget: Budget, seed: int = 7) -> Any:
    return dpa.Session(
        _table(),
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )


def _query(s: Any, count: bool = True) -> Any:
    """Count and mean per region (selection thresholds the count's own noise), or the mean
    alone (``count=False``: selection is a separate Gaussian thresholding)."""
    aggs: dict[str, Any] = {"n": dpa.count()} if count else {}
    return (
        s.query()
        .group_by("region")
        .bound(max_partitions=1, max_rows_per_partition=2)
        .agg(**aggs, x=dpa.mean("x", bounds=(0.0, 10.0)))
    )


def _replay(budget: Budget) -> ZCdpAccountant:
    acct = ZCdpAccountant()
    for ev, n in budget.ledger:
        acct.compose(ev, n)
    return acct


def test_end_to_end_selection_in_a_zcdp_session() -> None:
    budget = Budget(epsilon=3.0, delta=1e-6, method="zcdp")
    out = _query(_session(budget), count=False).run(epsilon=0.5, delta=1e-7)
    # "big" and "mid" are hundreds of noise deviations above the threshold (tau about 90,
    # sigma about 17); "tiny" (one unit) is released with probability below 1e-7.
    assert sorted(out["region"]) == ["big", "mid"]
    info = out.attrs["dpkit"]["partition_selection"]
    assert info["mechanism"] == "GaussianPartitionSelection" and info["epsilon"] is None
    assert info["tau"] < 400 and info["delta"] <= 5e-8
    # the charge: the selection as approximate zCDP, then the Gaussian statistics in rho
    ((charged, count),) = budget.ledger
    assert count == 1 and isinstance(charged, ComposedEvent)
    sel_ev = charged.events[0]
    assert isinstance(sel_ev, ApproxZCdpEvent)
    assert (sel_ev.rho, sel_ev.delta, sel_ev.pmf_slack) == (
        info["rho"],
        info["delta"],
        info["pmf_slack"],
    )
    assert budget.spent_delta_exact == Fraction(info["delta"])
    acct = _replay(budget)
    spent_rho = Fraction(budget.spent_native or 0.0)
    assert acct.rho_exact <= spent_rho <= acct.rho_exact * (1 + Fraction(1, 2**50))
    # the query alone is within its (0.5, 1e-7)
    assert acct.get_delta(0.5) <= 1e-7


def test_end_to_end_selection_by_the_count_in_a_zcdp_session() -> None:
    budget = Budget(epsilon=3.0, delta=1e-6, method="zcdp")
    out = _query(_session(budget)).run(epsilon=0.5, delta=1e-7)
    assert sorted(out["region"]) == ["big", "mid"]
    info = out.attrs["dpkit"]["partition_selection"]
    assert info["mechanism"] == "CountThreshold" and info["count"] == "n"
    assert info["rho"] == 0.0 and info["delta"] <= 5e-8
    # the charge: the statistics' own events and the threshold's delta as approximate zCDP
    ((charged, count),) = budget.ledger
    assert count == 1 and isinstance(charged, ComposedEvent)
    thr = [e for e in charged.events if isinstance(e, ApproxZCdpEvent)]
    assert thr == [ApproxZCdpEvent(rho=0.0, delta=info["delta"])]
    assert budget.spent_delta_exact == Fraction(info["delta"])
    acct = _replay(budget)
    assert acct.get_delta(0.5) <= 1e-7
    # the released counts are noisy versions of the bounded counts (2 rows per unit at most)
    big = out.set_index("region").loc["big"]
    assert abs(big["n"] - 2000) < 6 * out.attrs["dpkit"]["columns"]["n"]["noise_std"]
    assert (out["n"] > info["tau"]).all()


def test_spent_after_several_queries_is_the_approximate_zcdp_conversion() -> None:
    budget = Budget(epsilon=3.0, delta=1e-6, method="zcdp")
    s = _session(budget)
    for _ in range(4):
        _query(s).run(epsilon=0.5, delta=1e-7)
    acct = _replay(budget)
    one = price(
        {"n": dpa.count(), "x": dpa.mean("x", bounds=(0.0, 10.0))},
        mode="zcdp",
        epsilon=0.5,
        delta=1e-7,
        max_partitions=1,
        max_rows_per_partition=2,
        select_partitions=True,
        zcdp_share=budget.zcdp_share,
    )
    sel = one.selection
    assert budget.spent_delta_exact == 4 * Fraction(sel.threshold_delta)
    assert acct.rho_exact == 4 * ZCdpAccountant().compose(one.event).rho_exact
    eps, dlt = budget.spent
    assert eps == approx_epsilon(acct.rho_exact, acct.slack_exact, acct.delta_exact, 1e-6)
    assert dlt <= 1e-6
    # four queries at (0.5, 1e-7) each: basic composition would say (2.0, 4e-7); zCDP says less
    assert eps < 2.0
    assert approx_delta(acct.rho_exact, acct.slack_exact, acct.delta_exact, 2.0) < 4e-7


def test_refused_query_spends_nothing() -> None:
    budget = Budget(epsilon=1.0, delta=1e-6, method="zcdp")
    s = _session(budget)
    ran = 0
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        for _ in range(50):
            before = (
                budget.spent,
                budget.ledger,
                budget.spent_native,
                budget.spent_approx_delta,
                budget.to_json(),
            )
            _query(s).run(epsilon=0.5, delta=1e-7)
            ran += 1
    assert 1 <= ran < 50
    assert (
        budget.spent,
        budget.ledger,
        budget.spent_native,
        budget.spent_approx_delta,
        budget.to_json(),
    ) == before
    assert budget.spent[0] <= 1.0 and budget.spent[1] <= 1e-6


def test_no_approximate_delta_allowance_refuses_selection_but_not_public_keys() -> None:
    budget = Budget(epsilon=3.0, delta=1e-6, method="zcdp", approx_delta_allowance=0.0)
    s = _session(budget)
    with pytest.raises(
        BudgetExceededError,
        match=r"^This query needs approximate delta "
        r"[0-9.e-]+ but only approximate delta 0 is",
    ):
        _query(s).run(epsilon=0.5, delta=1e-7)
    assert budget.spent == (0.0, 0.0) and budget.ledger == ()
    keyed = (
        s.query()
        .group_by("region", keys=["big", "mid"])
        .bound(max_partitions=1, max_rows_per_partition=2)
        .agg(n=dpa.count())
    )
    out = keyed.run(epsilon=0.5, delta=1e-7)
    assert list(out["region"]) == ["big", "mid"] and budget.spent_approx_delta == 0.0


def test_summarize_shows_the_selection_share() -> None:
    budget = Budget(epsilon=3.0, delta=1e-6, method="zcdp")
    summary = _query(_session(budget), count=False).summarize(epsilon=0.5, delta=1e-7)
    row = summary[summary["aggregate"] == "(partition selection)"].iloc[0]
    assert row["mechanism"] == "GaussianPartitionSelection"
    one = price(
        {"x": dpa.mean("x", bounds=(0.0, 10.0))},
        mode="zcdp",
        epsilon=0.5,
        delta=1e-7,
        max_partitions=1,
        max_rows_per_partition=2,
        select_partitions=True,
        zcdp_share=budget.zcdp_share,
    )
    # a fraction of the query's budget: selection and mean have weight 1 each
    assert row["share"] == pytest.approx(1 / 2) and summary["share"].sum() == pytest.approx(1)
    # with a count, selection thresholds its noise: share 0, the count takes its weight
    with_count = _query(_session(budget)).summarize(epsilon=0.5, delta=1e-7)
    sel = with_count[with_count["aggregate"] == "(partition selection)"].iloc[0]
    assert sel["mechanism"] == "CountThreshold" and sel["share"] == 0.0
    n_row = with_count[with_count["aggregate"] == "n"].iloc[0]
    assert n_row["share"] == pytest.approx(2 / 3)
    assert row["noise_std"] == one.selection.sigma
    assert one.selection.rho <= one.selection_epsilon  # charged rho within its share
    assert budget.spent == (0.0, 0.0)


@pytest.mark.parametrize("p", [1, 3, 40])
@pytest.mark.parametrize("agg", ["count", "sum"])
def test_each_query_alone_is_within_its_epsilon_delta(p: int, agg: str) -> None:
    stat = dpa.count() if agg == "count" else dpa.sum("x", bounds=(0.0, 1.0))
    for eps, dl in ((0.5, 1e-7), (2.0, 1e-9), (0.1, 1e-6)):
        pr = price(
            {"n": stat},
            mode="zcdp",
            epsilon=eps,
            delta=dl,
            max_partitions=p,
            max_rows_per_partition=1,
            select_partitions=True,
        )
        acct = ZCdpAccountant().compose(pr.event)
        assert acct.delta_exact <= Fraction(dl) / 2
        assert acct.get_delta(eps) <= dl
        kind = CountThreshold if agg == "count" else GaussianPartitionSelection
        assert isinstance(pr.selection, kind)
        assert pr.selection.max_partitions == p


def test_twenty_grouped_counts_cost_less_under_zcdp_than_basic() -> None:
    """The figure in the docs: 20 grouped counts with selection at (0.5, 2e-8) each."""
    spent = {}
    sigma = {}
    kind = {}
    for mode, method in (("approx", "basic"), ("zcdp", "zcdp")):
        pr = price(
            {"n": dpa.count()},
            mode=mode,
            epsilon=0.5,
            delta=2e-8,
            max_partitions=1,
            max_rows_per_partition=5,
            select_partitions=True,
        )
        b = Budget(delta=1e-6, mode="odometer", method=method)
        b.charge(pr.event, count=20)
        spent[method] = b
        sigma[method] = pr.stats[0].measures[0].noise.std
        kind[method] = pr.stats[0].measures[0].noise.kind
    # each query is charged at most its (0.5, 2e-8) (shares are rounded down), and nearly all
    assert 20 * Fraction(0.5) * (1 - Fraction(1, 10**9)) <= spent["basic"].spent_epsilon_exact
    assert spent["basic"].spent_epsilon_exact <= 20 * Fraction(0.5)
    # the delta is the thresholds' (at most 2e-8 each: tau is an integer)
    assert 3e-7 <= spent["basic"].spent[1] <= 4e-7
    zc = _replay(spent["zcdp"])
    assert zc.get_epsilon(4e-7) < 2.5  # at the same total delta as basic: about 2.3
    # per query, basic picks discrete Laplace (one group per person: Laplace has the smaller
    # variance) and zCDP the discrete Gaussian; zCDP wins by composing, not per query
    assert kind["basic"] == "discrete_laplace" and kind["zcdp"] == "discrete_gaussian"
    assert sigma["basic"] < sigma["zcdp"]


def _keyed_query(s: Any, private_keys: bool) -> Any:
    q = s.query().group_by("region", keys=None if private_keys else ["big", "mid", "tiny"])
    return q.bound(max_partitions=1, max_rows_per_partition=2).agg(
        n=dpa.count(), x=dpa.mean("x", bounds=(0.0, 10.0))
    )


@pytest.mark.parametrize("private_keys", [True, False])
@pytest.mark.parametrize(("eps", "dl"), [(1.0, 1e-6), (0.3, 1e-9), (4.0, 1e-5), (0.05, 1e-8)])
def test_one_query_spends_the_whole_session_budget(
    private_keys: bool, eps: float, dl: float
) -> None:
    budget = Budget(epsilon=eps, delta=dl, method="zcdp")
    _keyed_query(_session(budget), private_keys).run(epsilon=eps, delta=dl)
    # certified: the composed rho, delta and slack are within the budget's own, exactly
    acct = _replay(budget)
    assert acct.rho_exact <= Fraction(budget.native_budget)
    assert acct.delta_exact <= Fraction(budget.approx_delta_allowance)
    assert acct.slack_exact <= Fraction(budget.pmf_slack_allowance)
    assert budget.spent[0] <= eps and budget.spent[1] <= dl
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):  # no more room
        _keyed_query(_session(budget), private_keys).run(epsilon=eps / 10, delta=dl / 10)


@pytest.mark.parametrize("private_keys", [True, False])
@pytest.mark.parametrize("k", [2, 3, 7, 10])
def test_k_queries_of_one_kth_fit_the_session_budget(private_keys: bool, k: int) -> None:
    eps, dl = 0.7, 3e-7
    budget = Budget(epsilon=eps, delta=dl, method="zcdp")
    s = _session(budget)
    for _ in range(k):
        _keyed_query(s, private_keys).run(epsilon=eps / k, delta=dl / k)
    acct = _replay(budget)
    assert acct.rho_exact <= Fraction(budget.native_budget)
    assert acct.delta_exact <= Fraction(budget.approx_delta_allowance)
    assert budget.spent[0] <= eps and budget.spent[1] <= dl


def test_a_query_larger_than_the_session_budget_is_refused() -> None:
    budget = Budget(epsilon=1.0, delta=1e-6, method="zcdp")
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        _keyed_query(_session(budget), True).run(epsilon=1.0 + 1e-9, delta=1e-6)
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        _keyed_query(_session(budget), False).run(epsilon=1.0 + 1e-9, delta=1e-6)
    assert budget.ledger == ()
