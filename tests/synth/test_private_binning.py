"""Numeric and date columns binned privately inside a synthetic-data fit's one charge.

The charge (one, binning plus measurement, never above the budget asked), the edges (strictly
increasing, inside the private range, whole numbers for whole-number columns), the refusals
before any spend, persistence of the chosen edges, and MST and AIM on the new columns. The
person-level audit of the binning step is in test_binning_audit.py.
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource
from dpkit.synth import AIM, MST, Categorical, Date, Numeric, SyntheticModel
from dpkit.synth._binning import Binner, plan_binning
from dpkit.synth._domain import domain_from_dict


def _people(n: int = 4_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "uid": np.arange(n) // 2,  # two rows per person
            "sex": rng.choice(["F", "M"], n),
            "age": rng.integers(18, 90, n),  # BIGINT
            "income": np.round(rng.lognormal(10.5, 0.7, n), 2),  # DOUBLE, heavy right tail
            "joined": pd.Timestamp("2015-01-01")
            + pd.to_timedelta(rng.integers(0, 3000, n), unit="D"),  # TIMESTAMP_NS
        }
    )


def _session(frame: pd.DataFrame | None = None, seed: int = 5) -> Session:
    return Session(
        _people() if frame is None else frame,
        privacy_unit="uid",
        budget=Budget(epsilon=8.0, delta=1e-6, method="zcdp"),
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )


COLUMNS: dict[str, Any] = {
    "sex": Categorical(["F", "M"]),
    "age": Numeric(bins=6),
    "income": Numeric(lower=0, bins=8),
    "joined": Date(bins=5),
}


@pytest.fixture(scope="module")
def fitted() -> tuple[Session, SyntheticModel]:
    s = _session()
    model = MST(COLUMNS, max_rows=2, iterations=200).fit(s, epsilon=2.0, delta=1e-6)
    return s, model


# ------------------------------------------------------------------ the charge


def test_one_charge_equals_binning_plus_measurement(fitted: Any) -> None:
    s, model = fitted
    ch = model.info["charge"]
    assert len(s.budget.ledger) == 1  # one charge for the whole fit
    assert s.budget.spent_native is not None
    assert abs(ch["rho"] - s.budget.spent_native) <= 1e-15
    parts = ch["parts"]
    assert set(parts) == {"binning", "measurement"}
    # the parts are each rounded up; their exact sum is the charge
    assert math.isclose(parts["binning"] + parts["measurement"], ch["rho"], rel_tol=1e-12)
    assert ch["rho"] <= ch["rho_asked"]
    # the binning took its declared share (0.1, rounded down) and no more
    assert parts["binning"] <= 0.1 * ch["rho_asked"]
    assert parts["binning"] >= 0.1 * ch["rho_asked"] * (1 - 1e-9)
    assert model.info["binning"]["rho"] == parts["binning"]


def test_plan_shows_the_split_before_any_spend() -> None:
    s = _session()
    plan = MST(COLUMNS, max_rows=2).plan(epsilon=2.0, delta=1e-6, session=s)
    assert s.budget.spent_native in (None, 0.0) and len(s.budget.ledger) == 0
    assert plan.binning is not None and len(plan.binning.steps) == 3
    assert plan.binning.rho + plan.measurement_rho <= plan.rho
    assert plan.measurement_rho >= 0.9 * plan.rho * (1 - 1e-9)
    # public edges only: nothing is reserved for binning, the whole rho measures
    pub = {"sex": COLUMNS["sex"], "age": Numeric(0, 100, 5)}
    p2 = MST(pub).plan(rho=0.1)
    assert p2.measurement_rho == p2.rho == 0.1
    assert p2.binning is not None and p2.binning.event is None


# ------------------------------------------------------------------ the edges


def test_edges_increase_inside_the_private_range(fitted: Any) -> None:
    _, model = fitted
    report = model.info["binning"]["columns"]
    assert set(report) == {"age", "income", "joined"}
    for c in ("age", "income", "joined"):
        dom = model.domains[c]
        edges = dom.edges
        assert all(a < b for a, b in itertools.pairwise(edges))
        lo, hi = report[c]["range"]
        assert edges[0] == lo and edges[-1] == hi
        assert report[c]["edges"] == list(edges)
        assert 2 <= dom.bins <= report[c]["bins_asked"]
    assert model.domains["income"].edges[0] == 0.0  # the public lower bound
    # whole-number columns get whole-number inner edges (age: BIGINT, joined: microseconds)
    assert all(float(e).is_integer() for e in model.domains["age"].edges[1:-1])
    assert all(float(e).is_integer() for e in model.domains["joined"].edges)
    # the ranges cover the data (within one grid step: a factor of 2, or a year)
    age_lo, age_hi = report["age"]["range"]
    assert 8 <= age_lo <= 18 and 89 <= age_hi <= 256
    years = [d.year for d in model.domains["joined"].edge_dates()]
    assert years[0] in (2014, 2015) and years[-1] in (2023, 2024, 2025)


def test_summary_reports_the_binning_spend_and_edges(fitted: Any) -> None:
    _, model = fitted
    text = model.summary()
    b = model.info["binning"]
    assert f"of which binning: rho = {b['rho']:.4g}" in text
    assert "Binning, before the marginals" in text
    for c in ("age", "income", "joined"):
        assert f"  {c}: range [" in text
    assert "chosen privately (quantile) edges" in text


@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=7),
    lo=st.floats(-1e3, 0.0),
    width=st.floats(1e-3, 1e4),
    whole=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_edges_from_any_release_are_increasing_and_inside(
    values: list[float], lo: float, width: float, whole: bool
) -> None:
    bplan, _ = plan_binning({"x": Numeric(bins=8)}, 1.0, 0.1, 1)
    step = bplan.steps[0]
    binner = Binner(bplan, {"x": Numeric(bins=8)}, 1, {"x": whole})
    hi = lo + width
    edges = binner.choose_edges(step, lo, hi, values)
    assert edges[0] == lo and edges[-1] == hi
    assert all(a < b for a, b in itertools.pairwise(edges))
    assert len(edges) - 1 <= 8
    if whole:
        assert all(float(e).is_integer() for e in edges[1:-1])


# ------------------------------------------------------------------ refusals before spend


def _nothing_spent(s: Session) -> None:
    assert len(s.budget.ledger) == 0


def test_unbounded_column_without_binning_budget_is_refused_with_numbers() -> None:
    s = _session()
    with pytest.raises(PrivacyParameterError) as e:
        MST(COLUMNS, max_rows=2, binning=0).fit(s, epsilon=1.0, delta=1e-6)
    msg = str(e.value)
    assert "binning=0.1" in msg and "rho 0.00229" in msg and "Numeric(lower, upper" in msg
    assert "'age'" in msg and "'joined'" in msg and "Nothing was spent" in msg
    _nothing_spent(s)
    with pytest.raises(PrivacyParameterError):
        AIM(COLUMNS, max_rows=2, binning=0).fit(s, epsilon=1.0, delta=1e-6)
    _nothing_spent(s)
    # public edges need no binning budget
    ok = {"sex": COLUMNS["sex"], "age": Numeric(0, 100, 4)}
    MST(ok, max_rows=2, binning=0, iterations=20).fit(s, epsilon=1.0, delta=1e-6)
    assert len(s.budget.ledger) == 1


@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan"), "0.1", True])
def test_binning_share_is_validated(bad: Any) -> None:
    with pytest.raises(PrivacyParameterError):
        MST(COLUMNS, binning=bad)


def test_too_many_cells_is_refused_before_spend() -> None:
    s = _session()
    cols = {"age": Numeric(bins=2000), "income": Numeric(bins=2000)}
    with pytest.raises(PrivacyParameterError, match="4,004,001 cells"):
        MST(cols, max_rows=2).fit(s, epsilon=1.0, delta=1e-6)
    _nothing_spent(s)


def test_wrong_column_types_are_refused_before_spend() -> None:
    s = _session()
    with pytest.raises(PrivacyParameterError, match="not one read as dates"):
        MST({"sex": Categorical(["F", "M"]), "age": Date(bins=4)}).fit(s, epsilon=1.0, delta=1e-6)
    with pytest.raises(PrivacyParameterError, match=r"not a number.*Date"):
        MST({"sex": Categorical(["F", "M"]), "joined": Numeric(bins=4)}).fit(
            s, epsilon=1.0, delta=1e-6
        )
    _nothing_spent(s)


def test_domain_arguments_are_checked() -> None:
    with pytest.raises(PrivacyParameterError, match="public range"):
        Date(unit="month")
    with pytest.raises(PrivacyParameterError, match="unit"):
        Date("2020-01-01", "2021-01-01", unit="fortnight")
    with pytest.raises(PrivacyParameterError, match="lower < upper"):
        Date("2021-01-01", "2020-01-01")
    with pytest.raises(PrivacyParameterError, match="edges"):
        Numeric(edges="median")
    with pytest.raises(PrivacyParameterError, match="strictly increasing"):
        Numeric(edges=[0, 1, 1])
    with pytest.raises(PrivacyParameterError, match="not both"):
        Numeric(0, 1, edges=[0, 1])
    with pytest.raises(PrivacyParameterError, match="chosen privately"):
        _ = Numeric(bins=4).edges
    assert Numeric(0, 10, 5).resolved and not Numeric(0, 10, 5, edges="quantile").resolved
    # bounds a few ulps apart: equal edges would repeat (a step of 0), and the private edges'
    # candidate grid would fail after the charge; both refused here, from the public bounds
    with pytest.raises(PrivacyParameterError, match="too close together for 16 equal bins"):
        Numeric(5e-324, 1e-323, 16)
    with pytest.raises(PrivacyParameterError, match="too close together for 2 equal bins"):
        Numeric(0.0, 5e-324, 4, edges="quantile")
    assert len(set(Numeric(0.0, 1e-300, 16).edges)) == 17
    assert Numeric(lower=0).needs_range and not Numeric(0, 1, edges="quantile").needs_range


# ------------------------------------------------------------------ calendar units, public dates


def test_calendar_months_on_a_date_column_spend_nothing_on_binning() -> None:
    rng = np.random.default_rng(3)
    n = 2_000
    days = rng.integers(0, 366, n)
    frame = pd.DataFrame(
        {
            "uid": np.arange(n) // 2,
            "sex": rng.choice(["F", "M"], n),
            "day": [datetime.date(2020, 1, 1) + datetime.timedelta(days=int(d)) for d in days],
        }
    )
    frame.loc[::10, "day"] = None  # a tenth missing: the missing cell, sampled as NaT
    frame["day"] = frame["day"].astype("date32[pyarrow]")
    s = _session(frame)
    assert s.column_type("day") == "DATE"
    cols = {"sex": Categorical(["F", "M"]), "day": Date("2020-01-01", "2020-12-31", unit="month")}
    assert cols["day"].bins == 12
    model = MST(cols, max_rows=2, iterations=50).fit(s, rho=0.5)
    assert model.info["charge"]["parts"] == {} and "binning" not in model.info
    dates = model.domains["day"].edge_dates()
    assert dates[0] == datetime.date(2020, 1, 1) and dates[-1] == datetime.date(2021, 1, 1)
    assert [d.month for d in dates[:12]] == list(range(1, 13))
    out = model.sample(2_000, source=RandomSource(seed=1, insecure=True))
    assert 0.04 < out["day"].isna().mean() < 0.2
    got = pd.to_datetime(out["day"].dropna())
    assert got.min() >= pd.Timestamp("2020-01-01") and got.max() < pd.Timestamp("2021-01-01")
    assert (got == got.dt.normalize()).all()  # a DATE column samples whole days


# ------------------------------------------------------------------ persistence and sampling


def test_save_and_load_keep_the_chosen_edges(fitted: Any, tmp_path: Any) -> None:
    _, model = fitted
    path = tmp_path / "model.json"
    model.save(path)
    back = SyntheticModel.load(path)
    for c in model.columns:
        assert type(back.domains[c]) is type(model.domains[c])
        if c != "sex":
            assert back.domains[c].edges == model.domains[c].edges
            assert back.domains[c].chosen
    assert back.domains["joined"].time_kind == model.domains["joined"].time_kind
    assert back.summary() == model.summary()
    a = model.sample(300, source=RandomSource(seed=9, insecure=True))
    b = back.sample(300, source=RandomSource(seed=9, insecure=True))
    pd.testing.assert_frame_equal(a, b)
    # a saved file whose edges were removed is refused
    data = json.loads(path.read_text())
    data["columns"][1].pop("edges")
    with pytest.raises(PrivacyParameterError, match="edges are missing"):
        SyntheticModel.from_dict(data)


def test_older_saved_numeric_domains_still_load() -> None:
    dom = domain_from_dict({"kind": "numeric", "lower": 0.0, "upper": 10.0, "bins": 5})
    assert isinstance(dom, Numeric) and dom.edges == (0.0, 2.0, 4.0, 6.0, 8.0, 10.0)


def test_samples_stay_inside_their_bins(fitted: Any) -> None:
    _, model = fitted
    out = model.sample(2_000, source=RandomSource(seed=4, insecure=True))
    inc = model.domains["income"].edges
    x = out["income"].dropna().to_numpy()
    assert (x >= inc[0]).all() and (x <= inc[-1]).all()
    j = pd.to_datetime(out["joined"].dropna())
    first, last = model.domains["joined"].edge_dates()[0], model.domains["joined"].edge_dates()[-1]
    assert (j >= pd.Timestamp(first)).all() and (j <= pd.Timestamp(last)).all()


# ------------------------------------------------------------------ AIM


def test_aim_accepts_the_new_columns() -> None:
    s = _session(seed=8)
    aim = AIM(COLUMNS, max_rows=2, rounds=4, iterations=30, round_iterations=10)
    model = aim.fit(s, epsilon=2.0, delta=1e-6)
    assert len(s.budget.ledger) == 1
    ch = model.info["charge"]
    assert math.isclose(
        ch["parts"]["binning"] + ch["parts"]["measurement"], ch["rho"], rel_tol=1e-12
    )
    assert ch["rho"] <= ch["rho_asked"]
    for c in ("age", "income", "joined"):
        assert model.domains[c].resolved and model.domains[c].chosen
    out = model.sample(100, source=RandomSource(seed=1, insecure=True))
    assert list(out.columns) == list(COLUMNS)


def test_public_bounds_with_quantile_edges_spend_only_on_quantiles() -> None:
    s = _session(seed=12)
    cols = {
        "sex": Categorical(["F", "M"]),
        "income": Numeric(0, 500_000, bins=5, edges="quantile"),
        "joined": Date("2015-01-01", "2024-01-01", bins=4, edges="quantile"),
    }
    model = MST(cols, max_rows=2, iterations=50).fit(s, rho=0.5)
    report = model.info["binning"]["columns"]
    for c in ("income", "joined"):
        assert report[c]["range"] is None and report[c]["range_rho"] == 0.0
        assert report[c]["quantiles"] == cols[c].bins - 1
    assert model.domains["income"].edges[0] == 0.0
    assert model.domains["income"].edges[-1] == 500_000.0
    dates = model.domains["joined"].edge_dates()
    assert dates[0] == datetime.datetime(2015, 1, 1) and dates[-1] == datetime.datetime(2024, 1, 1)
    # the quintiles of a log-normal income sit far below the public upper bound
    assert model.domains["income"].edges[-2] < 200_000
    # with both bounds and no edges=, a Date is cut into equal bins (as a Numeric), for free
    eq = Date("2015-01-01", "2024-01-01", bins=3)
    assert eq.mode == "equal" and not eq.needs_quantiles and not eq.needs_range


def test_public_date_edges_are_read_in_the_column_numbers() -> None:
    s = _session(seed=13)
    cols = {
        "sex": Categorical(["F", "M"]),
        "joined": Date(edges=["2015-01-01", "2018-01-01", "2021-06-15T12:00:00", "2024-01-01"]),
    }
    model = MST(cols, max_rows=2, iterations=50).fit(s, rho=0.5)
    assert "binning" not in model.info
    dom = model.domains["joined"]
    assert dom.bins == 3 and dom.time_kind == "local" and not dom.chosen
    assert dom.edge_dates()[2] == datetime.datetime(2021, 6, 15, 12)
    # microseconds since 1970 (a timestamp column)
    assert dom.edges[0] == (datetime.datetime(2015, 1, 1) - datetime.datetime(1970, 1, 1)) / (
        datetime.timedelta(microseconds=1)
    )
