"""What a session tells its user: who is protected, what a refused query needed, what a
release charged, numbers without floating-point noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError, PrivacyParameterError


def _people() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame(
        {
            "uid": rng.integers(0, 50, 400),
            "region": rng.choice(["north", "south"], 400),
            "income": rng.uniform(0, 100, 400),
        }
    )


def test_session_without_privacy_unit_is_refused_and_names_both_choices() -> None:
    with pytest.raises(PrivacyParameterError) as info:
        dpa.Session(_people(), budget=Budget(epsilon=1.0))
    text = str(info.value)
    assert "privacy_unit='<column>'" in text and "privacy_unit=None" in text
    dpa.Session(_people(), privacy_unit=None, budget=Budget(epsilon=1.0))  # written out: fine


def test_release_and_repr_say_what_is_protected() -> None:
    s = dpa.Session(_people(), privacy_unit="uid", budget=Budget(epsilon=1.0))
    rows = dpa.Session(_people(), privacy_unit=None, budget=Budget(epsilon=1.0))
    assert "each person" in repr(s) and "each row" in repr(rows)
    out = rows.query().agg(n=dpa.count()).run(epsilon=0.5)
    assert out.attrs["dpkit"]["privacy_unit"] is None
    assert out.attrs["dpkit"]["protects"].startswith("each row")
    out = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count_distinct())
        .run(epsilon=0.5)
    )
    assert out.attrs["dpkit"]["privacy_unit"] == "uid"
    assert "'uid'" in out.attrs["dpkit"]["protects"]


def test_refusal_leads_with_one_rounded_sentence_and_keeps_exact_figures() -> None:
    budget = Budget(epsilon=1.0)
    s = dpa.Session(_people(), privacy_unit="uid", budget=budget)
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1).agg(n=dpa.count())
    for _ in range(3):
        q.run(epsilon=1 / 3)
    assert budget.remaining[0] > 0.0  # a residue of rounding towards the safe side
    with pytest.raises(BudgetExceededError) as info:
        q.run(epsilon=0.5)
    exc = info.value
    assert str(exc) == (
        "This query needs epsilon 0.5 but only epsilon 0 is left of the "
        "budget, epsilon 1; ask for less or use a larger budget. Nothing was "
        "spent."
    )
    assert exc.remaining == tuple(budget.remaining) and exc.remaining[0] > 0.0
    assert exc.allowed == (0.5, 0.0) and exc.budget == (1.0, 0.0)
    assert exc.requested["epsilon"] <= 0.5 and "Event" in (exc.details or "")
    assert exc.event is not None


def test_unused_delta_is_not_reported_as_charged() -> None:
    budget = Budget(epsilon=2.0, delta=1e-6)
    s = dpa.Session(_people(), privacy_unit="uid", budget=budget)
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1)
    out = (
        q.group_by("region", keys=["north", "south"])
        .agg(n=dpa.count())
        .run(epsilon=1.0, delta=1e-7)
    )
    info = out.attrs["dpkit"]
    assert info["columns"]["n"]["mechanism"] == "discrete Laplace"
    assert (info["epsilon"], info["delta"]) == budget.spent
    assert info["delta"] == 0.0 and info["requested"] == {"epsilon": 1.0, "delta": 1e-7}
    # partition selection does use delta: then it is charged and reported (the threshold on
    # the count's noise: its own delta, at most the query's, never more)
    out = q.group_by("region").agg(n=dpa.count()).run(epsilon=0.5, delta=1e-7)
    assert out.attrs["dpkit"]["delta"] == budget.spent[1]
    assert 0.0 < budget.spent[1] <= 1e-7
    # a separate selection (no count) runs at delta (1 - 2^-40): k selections fit k times
    # their share
    before = budget.spent[1]
    q.group_by("region").agg(s=dpa.sum("income", bounds=(0, 100))).run(epsilon=0.5, delta=1e-7)
    assert 1e-7 * (1 - 1e-9) <= budget.spent[1] - before <= 1e-7 * (1 + 1e-9)


def test_spent_and_remaining_print_rounded_and_stay_exact() -> None:
    budget = Budget(epsilon=1.0, delta=1e-6)
    for _ in range(3):
        budget.charge(epsilon=1 / 3, delta=1e-7 / 3)
    # exact values stay (the sum of three thirds, rounded up, is not 1.0)
    assert budget.spent == (budget.spent[0], budget.spent[1]) and budget.spent != (1.0, 1e-7)
    assert repr(budget.spent) == "(epsilon=1, delta=1e-07)"
    assert repr(budget.remaining) == "(epsilon=0, delta=9e-07)"
    assert "spent=(1, 1e-07)" in repr(budget)


def test_summarize_shares_add_up_to_one_and_selection_has_its_figures() -> None:
    s = dpa.Session(_people(), privacy_unit="uid", budget=Budget(epsilon=2.0, delta=1e-6))
    q = (
        s.query()
        .group_by("region")
        .bound(max_partitions=1, max_rows_per_partition=5)
        .agg(
            n=dpa.count_distinct(),
            income=dpa.mean("income", bounds=(0, 100)),
            h=dpa.histogram("income", edges=[0, 50, 100]),
        )
    )
    out = q.summarize(epsilon=1.0, delta=1e-7)
    assert abs(out["share"].sum() - 1.0) < 1e-12
    sel = out[out["aggregate"] == "(partition selection)"].iloc[0]
    # selection thresholds the count of units' own noise: share 0, the count takes its weight
    assert sel["share"] == 0.0 and "kept above" in sel["measure"]
    assert out[out["aggregate"] == "n"]["share"].sum() == pytest.approx(0.5)
    assert "column" not in out.columns  # the bin names are in attrs, not in a wide column
    assert out.attrs["dpkit"]["output_columns"]["h"] == ["h[0,50)", "h[50,100]"]


def test_long_form_has_one_row_per_bin_and_level() -> None:
    s = dpa.Session(_people(), privacy_unit="uid", budget=Budget(epsilon=2.0))
    q = (
        s.query()
        .group_by("region", keys=["north", "south"])
        .bound(max_partitions=1, max_rows_per_partition=5)
        .agg(
            h=dpa.histogram("income", edges=[0, 25, 50, 100]),
            q=dpa.quantile("income", [0.25, 0.5], bounds=(0, 100)),
            n=dpa.count(),
        )
    )
    wide = q.run(epsilon=1.0)
    long = dpa.long_form(wide)
    assert list(long.columns) == ["region", "statistic", "bin", "estimate", "low", "high"]
    assert len(long) == 2 * (3 + 2 + 1)
    north = long[long["region"] == "north"]
    assert list(north["bin"]) == ["[0, 25)", "[25, 50)", "[50, 100]", "q=0.25", "q=0.5", ""]
    assert list(north["estimate"])[:3] == [
        wide[c].iloc[0] for c in ("h[0,25)", "h[25,50)", "h[50,100]")
    ]
