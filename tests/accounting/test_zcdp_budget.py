"""zCDP and Gaussian-DP budgets and filters: exact native charging, adaptivity, threads, JSON."""

from __future__ import annotations

import json
import math
import threading
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import Budget, GdpFilter, ZCdpFilter
from dpkit.accounting.gdp import gdp_delta, gdp_mu_for
from dpkit.accounting.rdp import RdpAccountant
from dpkit.accounting.zcdp import zcdp_delta, zcdp_epsilon, zcdp_rho_for
from dpkit.errors import (
    BudgetExceededError,
    PrivacyParameterError,
    SerializationError,
    UnsupportedEventError,
)
from dpkit.events import (
    DpEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PureDpEvent,
    ZCdpEvent,
)
from dpkit.mechanisms import Gaussian
from dpkit.mechanisms._lattice import GAUSSIAN_SLACK


def _snapshot(b: Budget) -> tuple[object, ...]:
    return (b.spent, b.remaining, b.spent_native, b.remaining_native, b.ledger, b.to_json())


def test_native_budget_is_the_rounded_down_conversion() -> None:
    b = Budget(epsilon=1.0, delta=1e-6, method="zcdp")
    a_max = b.pmf_slack_allowance
    assert a_max == 2.0**-12
    rho_max = b.native_budget
    # half of delta is kept for approximate-zCDP charges (partition selection)
    assert b.approx_delta_allowance == 5e-7
    assert rho_max == zcdp_rho_for(1.0 - 2 * a_max, 5e-7 * math.exp(-a_max) * (1 - 2.0**-50))
    assert rho_max is not None
    # the whole budget, slack and approximate delta included, stays within (1, 1e-6)
    assert math.exp(a_max) * zcdp_delta(rho_max, 1.0 - 2 * a_max) + 5e-7 <= 1e-6
    full = Budget(epsilon=1.0, delta=1e-6, method="zcdp", approx_delta_allowance=0.0)
    assert full.native_budget == zcdp_rho_for(
        1.0 - 2 * a_max, 1e-6 * math.exp(-a_max) * (1 - 2.0**-50)
    )
    g = Budget(epsilon=1.0, delta=1e-6, method="gdp")
    mu_max = g.native_budget
    assert mu_max == gdp_mu_for(1.0 - 2 * a_max, 1e-6 * math.exp(-a_max) * (1 - 2.0**-50))
    assert mu_max is not None
    assert gdp_delta(mu_max, a_max, 1.0) <= 1e-6
    assert g.native_unit == "mu" and b.native_unit == "rho"


def test_zcdp_budget_charges_rho_exactly() -> None:
    b = Budget(
        epsilon=1.0, delta=1e-6, method="zcdp", pmf_slack_allowance=0.0, approx_delta_allowance=0.0
    )
    rho_max = b.native_budget
    assert rho_max is not None
    b.charge(ZCdpEvent(rho=rho_max / 4))
    b.charge(PureDpEvent(epsilon=0.125))  # eps^2 / 2
    assert b.spent_native == math.nextafter(
        float(Fraction(rho_max) / 4 + Fraction(1, 128)), math.inf
    ) or b.spent_native == float(Fraction(rho_max) / 4 + Fraction(1, 128))
    rest = Fraction(rho_max) - Fraction(rho_max) / 4 - Fraction(1, 128)
    assert Fraction(b.remaining_native or 0.0) <= rest
    before = _snapshot(b)
    with pytest.raises(BudgetExceededError, match="needs rho "):
        b.charge(ZCdpEvent(rho=float(rest) * 2))
    assert _snapshot(b) == before
    with pytest.raises(
        BudgetExceededError,
        match=r"needs approximate delta 1e-09 but only "
        r"approximate delta 0 is left",
    ):
        b.charge(epsilon=0.1, delta=1e-9)  # no approximate delta allowed in this budget
    with pytest.raises(
        BudgetExceededError,
        match=r"needs pmf slack 9\.5\d*e-07 but only pmf "
        r"slack 0 is left",
    ):
        b.charge(GaussianEvent(noise_multiplier=50.0, pmf_slack=2.0**-20))  # no slack allowed
    assert _snapshot(b) == before


def test_slack_allowance_caps_the_number_of_float_releases() -> None:
    b = Budget(epsilon=10.0, delta=1e-6, method="gdp", pmf_slack_allowance=3 * 2.0**-20)
    ev = GaussianEvent(noise_multiplier=100.0, pmf_slack=2.0**-20)
    b.charge(ev, count=3)
    with pytest.raises(BudgetExceededError, match="pmf slack"):
        b.charge(ev)
    assert b.spent_pmf_slack == 3 * 2.0**-20


def test_gaussian_calibrated_to_the_budget_fits_basic_zcdp_and_gdp() -> None:
    g = Gaussian.from_epsilon_delta(epsilon=1, delta=1e-5, sensitivity=1)
    # basic: read through the exact privacy profile at the budget's delta.
    basic = Budget(epsilon=1, delta=1e-5)
    basic.charge(g)
    assert basic.spent[0] <= 1.0 and basic.spent[1] <= 1e-5
    # gdp: accepted whole when the budget reserves exactly the slack this Gaussian declares.
    one = Budget(epsilon=1, delta=1e-5, method="gdp", pmf_slack_allowance=GAUSSIAN_SLACK)
    one.charge(g)
    assert one.spent[0] <= 1.0
    # zcdp and gdp with the default allowance: calibrate through the budget itself.
    for method in ("zcdp", "gdp"):
        b = Budget(epsilon=1, delta=1e-5, method=method)
        share = b.split(1)
        assert share.mu is not None
        mech = Gaussian.from_mu(mu=share.mu, sensitivity=1)
        b.charge(mech)
        assert b.spent[0] <= 1.0 and b.spent[1] <= 1e-5
        assert b.remaining_native == pytest.approx(0.0, abs=1e-6)
    # The Gaussian calibrated to exactly (1, 1e-5) is NOT 0.0306-zCDP (its rho is 0.0359):
    # the worst-case zCDP conversion is looser than the Gaussian's own profile, so a zcdp
    # budget of (1, 1e-5) refuses it, and says what it would cost.
    z = Budget(epsilon=1, delta=1e-5, method="zcdp")
    cost = z.cost_of(g)
    assert cost.unit == "rho" and cost.native == pytest.approx(0.0359256, rel=1e-5)
    with pytest.raises(BudgetExceededError, match=r"^This charge needs rho 0\.0359"):
        z.charge(g)
    assert z.spent == (0.0, 0.0)


@pytest.mark.parametrize("method", ["zcdp", "gdp"])
@pytest.mark.parametrize("k", [1, 2, 3, 7, 100])
def test_k_gaussians_from_split_all_fit(method: str, k: int) -> None:
    b = Budget(epsilon=1.0, delta=1e-6, method=method)
    share = b.split(k)
    assert share.mu is not None and share.rho is not None
    mech = Gaussian.from_mu(mu=share.mu, sensitivity=2.5)
    for _ in range(k):
        b.charge(mech)
    assert b.spent[0] <= 1.0
    assert b.remaining_native is not None and b.remaining_native < 1e-4


def test_hundred_gaussians_gdp_beats_zcdp_and_basic() -> None:
    ev = GaussianEvent(noise_multiplier=10.0, pmf_slack=GAUSSIAN_SLACK)
    spent = {}
    for method in ("zcdp", "gdp", "rdp"):
        b = Budget(epsilon=100.0, delta=1e-6, method=method, mode="odometer")
        b.charge(ev, count=100)
        spent[method] = b.spent[0]
    # mu = 1 (exactly Gaussian, exact profile) < rho = 0.5 (worst-case zCDP conversion)
    assert spent["gdp"] < spent["zcdp"] < 0.5 + 2 * math.sqrt(0.5 * math.log(1e6))
    assert spent["gdp"] == pytest.approx(4.887, abs=1e-3)
    assert spent["zcdp"] == pytest.approx(5.222, abs=1e-3)
    # the RDP accountant over its order grid lands within a hair of the zCDP conversion
    assert abs(spent["rdp"] - spent["zcdp"]) < 0.01
    ideal = RdpAccountant().compose(GaussianEvent(noise_multiplier=10.0), 100)
    assert ideal.get_epsilon(1e-6) <= spent["rdp"]


def test_filters_report_their_own_guarantee() -> None:
    z = ZCdpFilter(rho=0.5, delta=1e-6)
    assert z.kind == "zcdp" and z.native_budget == 0.5
    a = 2.0**-12
    assert z.epsilon(1e-6) == pytest.approx(
        2 * a + zcdp_epsilon(0.5, 1e-6 * math.exp(-a)), rel=1e-9
    )
    assert z.delta(z.epsilon(1e-6)) <= 1e-6 * (1 + 1e-9)
    z.charge(GaussianEvent(noise_multiplier=1.0, pmf_slack=2.0**-20))  # rho = 1/2: all of it
    assert z.remaining_native == 0.0
    assert z.can_charge(NoOpEvent())  # a NoOp still fits
    assert not z.can_charge(ZCdpEvent(rho=2.0**-60))
    g = GdpFilter(mu=1.0, pmf_slack_allowance=0.0)
    assert g.epsilon(1e-6) == pytest.approx(4.8867, abs=1e-3)
    for _ in range(4):
        g.charge(GaussianEvent(noise_multiplier=2.0))  # mu_i = 1/2: four fit exactly
    assert g.spent_native == 1.0 and g.remaining_native == 0.0
    with pytest.raises(BudgetExceededError):
        g.charge(GaussianEvent(noise_multiplier=1e6))
    with pytest.raises(UnsupportedEventError):
        GdpFilter(mu=1.0).charge(LaplaceEvent(noise_multiplier=1.0))  # not exactly Gaussian
    assert math.isinf(g.spent[0])  # no reporting delta given: no finite epsilon at delta 0


def test_constructor_validation() -> None:
    for kwargs in (
        {"epsilon": 1.0, "method": "zcdp"},  # needs delta > 0
        {"epsilon": 1.0, "delta": 1e-6, "method": "zCDP"},
        {"epsilon": 1.0, "rho": 0.1},
        {"rho": 0.1, "mu": 1.0},
        {"rho": 0.1, "method": "gdp"},
        {"mu": 1.0, "method": "zcdp"},
        {"rho": -0.1},
        {"rho": math.nan},
        {"mu": math.inf},
        {"mu": True},
        {"epsilon": 1.0, "delta": 1e-6, "method": "zcdp", "pmf_slack_allowance": -1.0},
        {"epsilon": 1.0, "delta": 1e-6, "method": "zcdp", "pmf_slack_allowance": 0.5},
        {"epsilon": 1.0, "delta": 1e-6, "pmf_slack_allowance": 0.001},  # basic: not applicable
    ):
        with pytest.raises(PrivacyParameterError):
            Budget(**kwargs)  # type: ignore[arg-type]


def test_concurrent_zcdp_charges_never_overspend() -> None:
    b = Budget(epsilon=1.0, delta=1e-6, method="zcdp")
    ev = GaussianEvent(noise_multiplier=20.0, pmf_slack=GAUSSIAN_SLACK)
    results: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        for _ in range(12):
            try:
                b.charge(ev)
                ok = True
            except BudgetExceededError:
                ok = False
            with lock:
                results.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    accepted = sum(results)
    rho_max = b.native_budget
    assert rho_max is not None
    # exactly floor(rho_max / rho_i) charges fit; rho_i = 1/800
    assert accepted == math.floor(Fraction(rho_max) / Fraction(1, 800))
    assert len(b.ledger) == accepted
    assert Fraction(accepted, 800) <= Fraction(rho_max)


_POOL: list[DpEvent] = [
    GaussianEvent(noise_multiplier=3.0, pmf_slack=GAUSSIAN_SLACK),
    GaussianEvent(noise_multiplier=0.75, pmf_slack=GAUSSIAN_SLACK),
    GaussianEvent(noise_multiplier=7.5),
    ZCdpEvent(rho=0.01),
    LaplaceEvent(noise_multiplier=5.0),
    NoOpEvent(),
]


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    method=st.sampled_from(["zcdp", "gdp"]),
    picks=st.lists(st.tuples(st.integers(0, len(_POOL) - 1), st.integers(0, 4)), max_size=25),
)
def test_filter_never_exceeds_its_total(method: str, picks: list[tuple[int, int]]) -> None:
    b = Budget(epsilon=1.5, delta=1e-6, method=method)
    total = b.native_budget
    a_max = b.pmf_slack_allowance
    assert total is not None and a_max is not None
    for i, n in picks:
        ev = _POOL[i]
        before = _snapshot(b)
        try:
            b.charge(ev, count=n)
        except (BudgetExceededError, UnsupportedEventError):
            assert _snapshot(b) == before  # a refused charge changes nothing
        interp = b._state.interpreter
        if method == "zcdp":
            used = interp.rho_exact  # type: ignore[attr-defined]
            assert used <= Fraction(total)
        else:
            used = interp.mu_squared_exact  # type: ignore[attr-defined]
            assert used <= Fraction(total) ** 2
        assert interp.slack_exact <= Fraction(a_max)  # type: ignore[attr-defined]
        assert b.spent[0] <= 1.5 and b.spent[1] <= 1e-6
    restored = Budget.from_json(b.to_json())
    assert restored.ledger == b.ledger
    assert restored.spent == b.spent and restored.spent_native == b.spent_native


def test_json_round_trip_and_refusal() -> None:
    z = ZCdpFilter(rho=0.25, delta=1e-7)
    z.charge(GaussianEvent(noise_multiplier=4.0, pmf_slack=GAUSSIAN_SLACK), count=3)
    back = Budget.from_json(z.to_json())
    assert back.kind == "zcdp" and back.native_budget == 0.25
    assert back.spent == z.spent and back.ledger == z.ledger
    data = json.loads(z.to_json())
    data["rho"] = 0.01  # a smaller budget than the ledger spent
    with pytest.raises(SerializationError):
        Budget.from_json(json.dumps(data))
    data["rho"] = "0.25"
    with pytest.raises(SerializationError):
        Budget.from_json(json.dumps(data))


def _mp_gaussian_delta(eps: float, mu: float) -> object:
    import mpmath

    mpmath.mp.dps = 40
    e, m = mpmath.mpf(eps), mpmath.mpf(mu)
    return mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)


@pytest.mark.parametrize("mu", [0.05, 0.268, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_gdp_conversions_against_mpmath(mu: float, delta: float) -> None:
    from dpkit.accounting.gdp import gdp_epsilon

    eps = gdp_epsilon(mu, 0.0, delta)
    assert _mp_gaussian_delta(eps, mu) <= delta  # type: ignore[operator]
    if eps > 0.0:
        assert _mp_gaussian_delta(eps * (1 - 1e-9), mu) > delta  # type: ignore[operator]
    # with slack a: e^a delta_mu(eps - 2a) <= delta at the returned epsilon
    a = 2.0**-20
    eps_a = gdp_epsilon(mu, a, delta)
    assert eps_a >= eps
    assert math.exp(a) * _mp_gaussian_delta(eps_a - 2 * a, mu) <= delta  # type: ignore[operator]


def test_gdp_filter_json_round_trip() -> None:
    g = GdpFilter(mu=0.8, delta=1e-6)
    g.charge(Gaussian.from_mu(mu=0.3, sensitivity=1.0), count=2)
    back = Budget.from_json(g.to_json())
    assert back.kind == "gdp" and back.native_budget == 0.8
    assert back.spent == g.spent and back.spent_native == g.spent_native
    assert back.pmf_slack_allowance == g.pmf_slack_allowance == 2.0**-12


@pytest.mark.parametrize(("eps", "dl"), [(1.0, 1e-6), (0.1, 1e-9), (3.0, 1e-5), (12.0, 0.01)])
@pytest.mark.parametrize("custom", [False, True])
def test_a_share_at_the_budgets_own_parameters_is_exactly_its_rho(
    eps: float, dl: float, custom: bool
) -> None:
    kw: dict[str, float] = (
        {"approx_delta_allowance": dl / 3, "pmf_slack_allowance": eps / 100} if custom else {}
    )
    b = Budget(epsilon=eps, delta=dl, method="zcdp", **kw)
    rho, approx, a = b.zcdp_share(eps, dl)
    assert rho == b.native_budget and a == b.pmf_slack_allowance
    assert b.approx_delta_allowance * (1 - 2**-39) <= approx <= b.approx_delta_allowance
    for k in (2, 3, 10, 49):
        rho, approx, a = b.zcdp_share(eps / k, dl / k)
        assert k * Fraction(rho) <= Fraction(b.native_budget)
        assert k * Fraction(approx) <= Fraction(b.approx_delta_allowance)
    rho, _, a = b.zcdp_share(eps, dl, slack=2 * b.pmf_slack_allowance)  # more slack, less rho
    assert a == 2 * b.pmf_slack_allowance and rho < b.native_budget
