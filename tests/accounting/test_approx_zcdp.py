"""Approximate zCDP: ApproxZCdpEvent, the zCDP accountant's (rho, delta), budget allowances."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import Budget, ZCdpFilter
from dpkit.accounting.approx import ApproxDpAccountant
from dpkit.accounting.gdp import ExactGdpAccountant
from dpkit.accounting.pure import PureDpAccountant
from dpkit.accounting.rdp import RdpAccountant
from dpkit.accounting.zcdp import (
    ZCdpAccountant,
    approx_delta,
    approx_epsilon,
    approx_zcdp_cost_of,
    zcdp_delta,
    zcdp_epsilon,
)
from dpkit.errors import (
    BudgetExceededError,
    PrivacyParameterError,
    SerializationError,
    UnsupportedEventError,
)
from dpkit.events import (
    ApproxDpEvent,
    ApproxZCdpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DpEvent,
    SelfComposedEvent,
    ZCdpEvent,
    event_from_dict,
    event_from_json,
    event_to_json,
)


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 50 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mpmath.workdps(50):
        yield


def _mp_delta(rho: float, eps: float) -> mpmath.mpf:
    """Canonne, Kamath and Steinke 2020, Corollary 13, minimised over alpha in high precision:
    ``inf_alpha exp((alpha-1)(alpha rho - eps)) / (alpha - 1) * (1 - 1/alpha)^alpha``."""
    r, e = mpmath.mpf(rho), mpmath.mpf(eps)

    def f(t: mpmath.mpf) -> mpmath.mpf:
        a = 1 + mpmath.exp(t)
        return mpmath.exp((a - 1) * (a * r - e)) / (a - 1) * (1 - 1 / a) ** a

    grid = [mpmath.mpf(x) / 10 for x in range(-60, 80)]
    best = min(grid, key=f)
    t = mpmath.findroot(lambda x: mpmath.diff(f, x), best)
    return min(f(t), f(best), mpmath.mpf(1))


def _snapshot(b: Budget) -> tuple[object, ...]:
    return (b.spent, b.remaining, b.spent_native, b.spent_approx_delta, b.ledger, b.to_json())


# --------------------------------------------------------------------------- event
def test_event_validates_and_round_trips() -> None:
    ev = ApproxZCdpEvent(rho=0.125, delta=1e-7, pmf_slack=2.0**-23)
    assert event_from_json(event_to_json(ev)) == ev
    assert json.loads(event_to_json(ev)) == {
        "type": "approx_zcdp",
        "rho": 0.125,
        "delta": 1e-7,
        "pmf_slack": 2.0**-23,
    }
    for bad in (
        {"rho": math.nan, "delta": 1e-7},
        {"rho": -1.0, "delta": 1e-7},
        {"rho": math.inf, "delta": 1e-7},
        {"rho": 0.1, "delta": 1.0},
        {"rho": 0.1, "delta": -1e-9},
        {"rho": 0.1, "delta": math.nan},
        {"rho": 0.1, "delta": 1e-7, "pmf_slack": -1.0},
        {"rho": "0.1", "delta": 1e-7},
    ):
        with pytest.raises(PrivacyParameterError):
            ApproxZCdpEvent(**bad)  # type: ignore[arg-type]
        with pytest.raises(SerializationError):
            event_from_dict({"type": "approx_zcdp", **bad})


def test_other_accountants_refuse_approximate_zcdp() -> None:
    ev = ApproxZCdpEvent(rho=0.1, delta=1e-9)
    for acct in (PureDpAccountant(), ApproxDpAccountant(), RdpAccountant(), ExactGdpAccountant()):
        with pytest.raises(UnsupportedEventError):
            acct.compose(ev)
    for method in ("basic", "rdp", "gdp"):
        b = Budget(epsilon=5.0, delta=1e-5, method=method)
        with pytest.raises(UnsupportedEventError):
            b.charge(ev)
        assert b.spent == (0.0, 0.0)


# --------------------------------------------------------------------------- accountant
def test_costs_are_exact() -> None:
    assert approx_zcdp_cost_of(ApproxZCdpEvent(rho=0.25, delta=1e-7, pmf_slack=2.0**-23)) == (
        Fraction(1, 4),
        Fraction(2.0**-23),
        Fraction(1e-7),
    )
    # (eps, delta)-DP is delta-approximately eps^2/2-zCDP
    assert approx_zcdp_cost_of(ApproxDpEvent(epsilon=0.5, delta=1e-9)) == (
        Fraction(1, 8),
        Fraction(0),
        Fraction(1e-9),
    )
    assert approx_zcdp_cost_of(ZCdpEvent(rho=0.5)) == (Fraction(1, 2), Fraction(0), Fraction(0))
    both = ComposedEvent(
        events=(
            ApproxZCdpEvent(rho=0.1, delta=1e-8),
            SelfComposedEvent(event=ApproxDpEvent(epsilon=0.1, delta=3e-9), count=7),
        )
    )
    assert approx_zcdp_cost_of(both) == (
        Fraction(0.1) + 7 * Fraction(0.1) ** 2 / 2,
        Fraction(0),
        Fraction(1e-8) + 7 * Fraction(3e-9),
    )


def test_accountant_adds_rho_and_delta_exactly() -> None:
    acct = ZCdpAccountant()
    acct.compose(ApproxZCdpEvent(rho=0.1, delta=1e-8), 10)
    acct.compose(DiscreteGaussianEvent(sigma=10.0, sensitivity=1), 3)
    assert acct.rho_exact == 10 * Fraction(0.1) + Fraction(3, 200)
    assert acct.delta_exact == 10 * Fraction(1e-8)
    # with no approximate charge the accountant is unchanged pure zCDP
    pure = ZCdpAccountant().compose(ZCdpEvent(rho=0.3))
    assert pure.delta_exact == 0
    assert pure.get_epsilon(1e-6) == zcdp_epsilon(0.3, 1e-6)


@pytest.mark.parametrize(
    ("rho", "d_spent", "eps"),
    [
        (0.05, 1e-8, 1.0),
        (0.5, 1e-7, 3.0),
        (2.0, 3e-9, 8.0),
        (0.01, 2e-6, 0.5),
    ],
)
def test_delta_matches_mpmath_plus_the_approximate_delta(
    rho: float, d_spent: float, eps: float
) -> None:
    acct = ZCdpAccountant().compose(ApproxZCdpEvent(rho=rho, delta=d_spent))
    got = acct.get_delta(eps)
    ref = _mp_delta(rho, eps) + mpmath.mpf(d_spent)
    assert got >= ref  # rounded up: never below the exact bound
    assert got <= ref * (1 + 1e-6)  # and tight


@pytest.mark.parametrize(
    ("rho", "d_spent", "delta"),
    [
        (0.05, 1e-8, 1e-6),
        (0.5, 4e-7, 1e-6),
        (2.0, 3e-9, 1e-5),
    ],
)
def test_epsilon_is_the_conversion_at_the_remaining_delta(
    rho: float, d_spent: float, delta: float
) -> None:
    acct = ZCdpAccountant().compose(ApproxZCdpEvent(rho=rho, delta=d_spent))
    eps = acct.get_epsilon(delta)
    # the epsilon certifies delta: exact delta_rho(eps) + d_spent <= delta (mpmath)
    assert _mp_delta(rho, eps) + mpmath.mpf(d_spent) <= mpmath.mpf(delta)
    # and it is the conversion at delta - d_spent (tight to 1e-9 relative)
    assert eps == pytest.approx(zcdp_epsilon(rho, delta - d_spent), rel=1e-9)
    assert acct.get_delta(eps) <= delta * (1 + 1e-9)


def test_no_epsilon_when_the_approximate_delta_uses_up_delta() -> None:
    acct = ZCdpAccountant().compose(ApproxZCdpEvent(rho=0.1, delta=1e-6))
    assert acct.get_epsilon(1e-6) == math.inf
    assert acct.get_epsilon(5e-7) == math.inf
    assert acct.get_delta(0.0) >= 1e-6 + zcdp_delta(0.1, 0.0) * (1 - 1e-12)
    assert approx_epsilon(Fraction(0), Fraction(0), Fraction(1e-7), 1e-7) == math.inf
    assert approx_delta(Fraction(0), Fraction(0), Fraction(1e-7), 1.0) == 1e-7


# --------------------------------------------------------------------------- budget
def test_default_allowance_is_half_of_delta_and_the_whole_budget_is_certified() -> None:
    b = Budget(epsilon=3.0, delta=1e-6, method="zcdp")
    assert b.approx_delta_allowance == 5e-7
    a_max = b.pmf_slack_allowance
    assert b.native_budget is not None and a_max is not None
    # e^A delta_rho_max(eps - 2A) + delta_max <= delta, in high precision
    total = mpmath.exp(a_max) * _mp_delta(b.native_budget, 3.0 - 2 * a_max) + mpmath.mpf(
        b.approx_delta_allowance
    )
    assert total <= mpmath.mpf(1e-6)
    assert Budget(rho=0.5).approx_delta_allowance == 0.0
    assert Budget(epsilon=3.0, delta=1e-6).approx_delta_allowance is None
    for bad in (1e-6, 2e-6, -1e-9, math.nan, math.inf, "1e-7"):
        with pytest.raises(PrivacyParameterError):
            Budget(epsilon=3.0, delta=1e-6, method="zcdp", approx_delta_allowance=bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="zcdp"):
        Budget(epsilon=3.0, delta=1e-6, method="basic", approx_delta_allowance=1e-7)


def test_allowance_is_filled_exactly_and_a_refusal_changes_nothing() -> None:
    d = 2.0**-30
    b = Budget(epsilon=3.0, delta=1e-6, method="zcdp", approx_delta_allowance=4 * d)
    for _ in range(4):
        b.charge(ApproxZCdpEvent(rho=0.001, delta=d))
    assert b.spent_delta_exact == 4 * Fraction(d)
    before = _snapshot(b)
    with pytest.raises(BudgetExceededError, match=r"(?i)nothing was charged"):
        b.charge(ApproxZCdpEvent(rho=0.0, delta=2.0**-1074))
    assert _snapshot(b) == before
    assert not b.can_charge(epsilon=0.01, delta=2.0**-1074)
    b.charge(ZCdpEvent(rho=0.001))  # pure zCDP still fits
    assert b.split(2).delta == 0.0


def test_spent_is_the_conversion_at_the_remaining_delta() -> None:
    b = Budget(epsilon=3.0, delta=1e-6, method="zcdp")
    for _ in range(5):
        b.charge(ApproxZCdpEvent(rho=0.01, delta=5e-8))
        b.charge(ZCdpEvent(rho=0.02))
    assert b.spent_native == pytest.approx(0.15, rel=1e-12)
    assert b.spent_delta_exact == 5 * Fraction(5e-8)
    eps, dlt = b.spent
    assert eps == approx_epsilon(
        5 * Fraction(0.01) + 5 * Fraction(0.02), Fraction(0), 5 * Fraction(5e-8), 1e-6
    )
    assert eps == pytest.approx(zcdp_epsilon(0.15, 1e-6 - 2.5e-7), rel=1e-9)
    assert dlt <= 1e-6
    share = b.split(5)
    assert share.delta is not None and share.rho is not None
    exact = (Fraction(5e-7) - 5 * Fraction(5e-8)) / 5  # the remaining allowance, in 5 parts
    assert exact * (1 - Fraction(1, 2**50)) <= Fraction(share.delta) <= exact


def test_black_box_pairs_are_charged_as_approximate_zcdp() -> None:
    b = Budget(epsilon=3.0, delta=1e-6, method="zcdp")
    b.charge(epsilon=0.5, delta=1e-8)
    assert b.spent_native == 0.125
    assert b.spent_delta_exact == Fraction(1e-8)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["z", "az", "pair", "dg"]), st.floats(1e-4, 0.3), st.floats(0.0, 3e-7)
        ),
        min_size=1,
        max_size=25,
    )
)
def test_filter_never_overspends(charges: list[tuple[str, float, float]]) -> None:
    b = Budget(epsilon=2.0, delta=1e-6, method="zcdp")
    assert b.native_budget is not None and b.approx_delta_allowance is not None
    a_max = b.pmf_slack_allowance
    assert a_max is not None
    for kind, x, d in charges:
        ev: DpEvent
        if kind == "z":
            ev = ZCdpEvent(rho=x)
        elif kind == "az":
            ev = ApproxZCdpEvent(rho=x, delta=d, pmf_slack=2.0**-23)
        elif kind == "pair":
            ev = ApproxDpEvent(epsilon=x, delta=d)
        else:
            ev = DiscreteGaussianEvent(sigma=1.0 / x, sensitivity=1, pmf_slack=2.0**-23)
        before = _snapshot(b)
        try:
            b.charge(ev)
        except BudgetExceededError:
            assert _snapshot(b) == before
            continue
        acct = ZCdpAccountant()
        for e, n in b.ledger:
            acct.compose(e, n)
        assert acct.rho_exact <= Fraction(b.native_budget)
        assert acct.delta_exact <= Fraction(b.approx_delta_allowance)
        assert acct.slack_exact <= Fraction(a_max)
        # the guarantee of everything charged so far is within the budget
        assert acct.get_delta(2.0) <= 1e-6 * (1 + 1e-9)
        assert b.spent[0] <= 2.0 and b.spent[1] <= 1e-6


def test_json_round_trip_and_version_2_data() -> None:
    b = Budget(epsilon=3.0, delta=1e-6, method="zcdp", approx_delta_allowance=3e-7)
    b.charge(ApproxZCdpEvent(rho=0.01, delta=1e-8, pmf_slack=2.0**-23))
    b.charge(epsilon=0.1, delta=1e-9)
    back = Budget.from_json(b.to_json())
    assert back.approx_delta_allowance == 3e-7
    assert back.spent == b.spent and back.ledger == b.ledger
    assert back.spent_delta_exact == b.spent_delta_exact
    assert back.native_budget == b.native_budget
    # data saved before approximate zCDP: the same rho_max (no allowance), no approximate delta
    old = json.loads(Budget(epsilon=3.0, delta=1e-6, method="zcdp").to_json())
    old["version"] = 2
    del old["approx_delta_allowance"]
    del old["neighbouring"]  # (version 4 field)
    v2 = Budget.from_json(json.dumps(old))
    assert v2.approx_delta_allowance == 0.0
    assert (
        v2.native_budget
        == Budget(epsilon=3.0, delta=1e-6, method="zcdp", approx_delta_allowance=0.0).native_budget
    )
    # a ledger over the allowance is refused on load
    data = json.loads(b.to_json())
    data["approx_delta_allowance"] = 1e-8
    with pytest.raises(SerializationError, match="replayed"):
        Budget.from_json(json.dumps(data))


def test_zcdp_filter_with_an_approximate_delta_allowance() -> None:
    f = ZCdpFilter(rho=0.5, delta=1e-6, approx_delta_allowance=1e-7, pmf_slack_allowance=0.0)
    assert f.delta(3.0) == approx_delta(Fraction(0.5), Fraction(0), Fraction(1e-7), 3.0)
    assert f.delta(3.0) >= zcdp_delta(0.5, 3.0) + 1e-7
    assert f.epsilon(1e-6) == pytest.approx(zcdp_epsilon(0.5, 9e-7), rel=1e-9)
    assert f.epsilon(1e-7) == math.inf
    f.charge(ApproxZCdpEvent(rho=0.25, delta=1e-7))
    with pytest.raises(BudgetExceededError):
        f.charge(ApproxDpEvent(epsilon=0.01, delta=1e-12))
    plain = ZCdpFilter(rho=0.5)
    with pytest.raises(BudgetExceededError):
        plain.charge(ApproxZCdpEvent(rho=0.0, delta=1e-12))
    assert plain.spent == (0.0, 0.0)
