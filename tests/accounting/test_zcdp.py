"""zCDP accounting: per-event rho, conversions to (epsilon, delta) against mpmath, calibration."""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import mpmath
import pytest

from dpkit.accounting.gdp import gdp_epsilon
from dpkit.accounting.pure import pure_epsilon_of
from dpkit.accounting.zcdp import (
    ZCdpAccountant,
    zcdp_cost_of,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_rho_for,
)
from dpkit.errors import PrivacyParameterError, SerializationError, UnsupportedEventError
from dpkit.events import (
    ApproxDpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    ZCdpEvent,
    event_from_json,
    event_to_json,
)


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 40 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mpmath.workdps(40):
        yield


_RHOS = (1e-6, 1e-3, 0.03, 0.5, 4.0, 60.0)


def _mp_golden(f: object, lo: float = -40.0, hi: float = 40.0) -> mpmath.mpf:
    """Minimum of a unimodal mpmath function of x = ln(alpha - 1), at 40 digits."""
    g = (mpmath.sqrt(5) - 1) / 2
    a, b = mpmath.mpf(lo), mpmath.mpf(hi)
    for _ in range(260):
        c, d = b - g * (b - a), a + g * (b - a)
        if f(c) <= f(d):  # type: ignore[operator]
            b = d
        else:
            a = c
    return min(f(a), f(b))  # type: ignore[operator]


def _mp_delta(rho: float, eps: float) -> mpmath.mpf:
    """Reference: min of CKS 2020 Cor. 13 (optimised over alpha) and Bun-Steinke Prop. 1.3."""
    r, e = mpmath.mpf(rho), mpmath.mpf(eps)

    def log_delta(x: mpmath.mpf) -> mpmath.mpf:
        am1 = mpmath.exp(x)
        a = 1 + am1
        return (a - 1) * (a * r - e) - mpmath.log(a - 1) + a * mpmath.log(1 - 1 / a)

    best = mpmath.exp(_mp_golden(log_delta))
    if e > r:
        best = min(best, mpmath.exp(-((e - r) ** 2) / (4 * r)))
    return min(best, mpmath.mpf(1))


def _mp_epsilon(rho: float, delta: float) -> mpmath.mpf:
    r, d = mpmath.mpf(rho), mpmath.mpf(delta)

    def eps(x: mpmath.mpf) -> mpmath.mpf:
        a = 1 + mpmath.exp(x)
        return a * r + mpmath.log(1 - 1 / a) - (mpmath.log(d) + mpmath.log(a)) / (a - 1)

    return min(_mp_golden(eps), r + 2 * mpmath.sqrt(r * mpmath.log(1 / d)))


@pytest.mark.parametrize("rho", _RHOS)
@pytest.mark.parametrize("delta", (1e-3, 1e-6, 1e-12))
def test_epsilon_conversion_matches_mpmath(rho: float, delta: float) -> None:
    # The bound can be negative (tiny rho: total variation below delta); epsilon is clamped at 0.
    ref = max(_mp_epsilon(rho, delta), mpmath.mpf(0))
    got = zcdp_epsilon(rho, delta)
    assert got >= ref  # safe: never below the exact infimum
    assert got <= ref * (1 + 1e-9) + 1e-15  # and tight


@pytest.mark.parametrize("rho", _RHOS)
@pytest.mark.parametrize("factor", (0.5, 1.0, 2.0, 8.0))
def test_delta_conversion_matches_mpmath(rho: float, factor: float) -> None:
    eps = factor * (rho + 2 * math.sqrt(rho * math.log(1e6)))
    ref = _mp_delta(rho, eps)
    got = zcdp_delta(rho, eps)
    assert got >= ref
    assert got <= ref * (1 + 1e-9) + 1e-300


def test_cks_bound_beats_the_simple_one() -> None:
    # rho = 0.5, delta = 1e-6: CKS about 5.09 < 5.70 for rho + 2 sqrt(rho ln 1/delta).
    simple = 0.5 + 2 * math.sqrt(0.5 * math.log(1e6))
    assert zcdp_epsilon(0.5, 1e-6) < simple - 0.5


def test_conversion_never_beats_the_gaussian_itself() -> None:
    # A Gaussian with mu = sqrt(2 rho) is rho-zCDP, so the worst-case zCDP conversion must be at
    # least the Gaussian's own exact epsilon.
    for rho in (1e-4, 0.036, 0.5, 3.0):
        mu = math.sqrt(2 * rho)
        for delta in (1e-3, 1e-8):
            assert zcdp_epsilon(rho, delta) >= gdp_epsilon(mu, 0.0, delta)


def test_rho_for_is_safe_and_tight() -> None:
    for eps, delta in ((1.0, 1e-5), (0.1, 1e-9), (8.0, 1e-6), (1e-3, 0.5)):
        rho = zcdp_rho_for(eps, delta)
        assert rho > 0.0
        assert zcdp_delta(rho, eps) <= delta
        assert zcdp_delta(rho * (1 + 1e-9), eps) > delta
        assert float(_mp_delta(rho, eps)) <= delta
    # Known figure: (1, 1e-5) allows rho = 0.0305565..., less than the 0.0359 of the Gaussian
    # calibrated exactly to (1, 1e-5): the worst-case zCDP conversion is looser than the
    # Gaussian's own privacy profile.
    assert zcdp_rho_for(1.0, 1e-5) == pytest.approx(0.03055659519763, rel=1e-10)
    for bad in (math.nan, -1.0, 0.0, math.inf):
        with pytest.raises(PrivacyParameterError):
            zcdp_rho_for(bad, 1e-5)
    for bad_d in (0.0, 1.0, math.nan):
        with pytest.raises(PrivacyParameterError):
            zcdp_rho_for(1.0, bad_d)


def test_conversion_edge_cases() -> None:
    assert zcdp_epsilon(0.0, 1e-6) == 0.0
    assert zcdp_epsilon(0.1, 0.0) == math.inf
    assert zcdp_epsilon(math.inf, 0.5) == math.inf
    assert zcdp_delta(0.0, 0.0) == 0.0
    assert zcdp_delta(math.inf, 3.0) == 1.0
    assert 0.0 < zcdp_delta(1e300, 1.0) <= 1.0
    assert zcdp_epsilon(1e300, 1e-6) == pytest.approx(1e300, rel=1e-6)
    # rho-zCDP bounds the total variation by sqrt(rho / 2), far below delta here: (0, delta)-DP.
    assert zcdp_epsilon(5e-324, 1e-6) == 0.0
    # (the order search stops at alpha - 1 = e^36, so delta(0) bottoms out near 1e-14: safe)
    assert 0.0 < zcdp_delta(5e-324, 0.0) < 1e-13
    for bad in (math.nan, -0.1, "0.1", None, True):
        with pytest.raises(PrivacyParameterError):
            zcdp_epsilon(bad, 1e-6)  # type: ignore[arg-type]
        with pytest.raises(PrivacyParameterError):
            zcdp_delta(bad, 1.0)  # type: ignore[arg-type]


def _mp_renyi_gaussian(alpha: float, s: float) -> mpmath.mpf:
    """D_alpha(N(1, s^2) || N(0, s^2)) by numerical integration (independent of the formula)."""
    a, sig = mpmath.mpf(alpha), mpmath.mpf(s)

    def integrand(y: mpmath.mpf) -> mpmath.mpf:
        p = mpmath.npdf(y, 1, sig)
        q = mpmath.npdf(y, 0, sig)
        return p**a * q ** (1 - a)

    val = mpmath.quad(integrand, [-mpmath.inf, 0, 1, mpmath.inf])
    return mpmath.log(val) / (a - 1)


@pytest.mark.slow
@pytest.mark.parametrize("s", (0.7, 3.7306383288183813))
def test_gaussian_rho_matches_renyi_divergence(s: float) -> None:
    cost = zcdp_cost_of(GaussianEvent(noise_multiplier=s))
    assert cost == (1 / (2 * Fraction(s) ** 2), Fraction(0))
    rho = cost[0]
    assert isinstance(rho, Fraction)
    for alpha in (1.5, 2.0, 7.0):
        ref = _mp_renyi_gaussian(alpha, s)
        # zCDP is exactly D_alpha = rho * alpha for the Gaussian.
        assert float(rho) * alpha == pytest.approx(float(ref), rel=1e-12)


def test_event_table() -> None:
    g = GaussianEvent(noise_multiplier=2.0, pmf_slack=2.0**-20)
    assert zcdp_cost_of(g) == (Fraction(1, 8), Fraction(2.0**-20))
    dg = DiscreteGaussianEvent(sigma=3.0, sensitivity=2, pmf_slack=2.0**-23)
    assert zcdp_cost_of(dg) == (Fraction(4, 18), Fraction(2.0**-23))
    lap = LaplaceEvent(noise_multiplier=4.0, pmf_slack=2.0**-25)
    eps = pure_epsilon_of(lap)
    assert isinstance(eps, Fraction) and eps > Fraction(1, 4)  # the slack is inside epsilon
    assert zcdp_cost_of(lap) == (eps * eps / 2, Fraction(0))
    assert zcdp_cost_of(PureDpEvent(epsilon=0.5)) == (Fraction(1, 8), Fraction(0))
    assert zcdp_cost_of(ApproxDpEvent(epsilon=0.5, delta=0.0)) == (Fraction(1, 8), Fraction(0))
    # the exponential mechanism is epsilon-bounded-range: epsilon^2 / 8 (Cesar and Rogers 2021)
    assert zcdp_cost_of(ExponentialMechanismEvent(epsilon=1.0)) == (Fraction(1, 8), Fraction(0))
    rr = zcdp_cost_of(RandomizedResponseEvent(p_truth=0.75))
    assert rr is not None and rr[0] >= Fraction(math.log(3.0)) ** 2 / 2
    assert zcdp_cost_of(ZCdpEvent(rho=0.25)) == (Fraction(1, 4), Fraction(0))
    both = ComposedEvent(events=(g, ZCdpEvent(rho=0.25)))
    assert zcdp_cost_of(both) == (Fraction(3, 8), Fraction(2.0**-20))
    eight = SelfComposedEvent(event=g, count=8)
    assert zcdp_cost_of(eight) == (Fraction(1), 8 * Fraction(2.0**-20))
    assert zcdp_cost_of(NonPrivateEvent()) == (math.inf, Fraction(0))
    sub_lap = PoissonSampledEvent(sampling_rate=0.1, event=LaplaceEvent(noise_multiplier=1.0))
    cost = zcdp_cost_of(sub_lap)
    assert cost is not None and cost[0] < Fraction(1, 2)  # amplified pure epsilon, squared / 2
    for refused in (
        ApproxDpEvent(epsilon=0.5, delta=1e-9),
        PoissonSampledEvent(sampling_rate=0.1, event=GaussianEvent(noise_multiplier=1.0)),
        ComposedEvent(events=(g, ApproxDpEvent(epsilon=0.5, delta=1e-9))),
    ):
        assert zcdp_cost_of(refused) is None  # not pure zCDP
    # (epsilon, delta) pairs are approximate zCDP, which the accountant reads
    ZCdpAccountant().compose(ApproxDpEvent(epsilon=0.5, delta=1e-9))
    with pytest.raises(UnsupportedEventError):
        ZCdpAccountant().compose(
            PoissonSampledEvent(sampling_rate=0.1, event=GaussianEvent(noise_multiplier=1.0))
        )


def test_accountant_adds_rho_exactly_and_applies_slack_at_conversion() -> None:
    acct = ZCdpAccountant()
    acct.compose(GaussianEvent(noise_multiplier=10.0), 100)
    assert acct.rho_exact == Fraction(100, 200)
    assert acct.get_epsilon(1e-6) == zcdp_epsilon(0.5, 1e-6)
    slack = ZCdpAccountant().compose(GaussianEvent(noise_multiplier=10.0, pmf_slack=1e-4), 100)
    assert slack.slack_exact == 100 * Fraction(1e-4)
    # delta(eps) <= e^A delta_rho(eps - 2A): a little more epsilon than the ideal mechanism.
    e_ideal, e_actual = acct.get_epsilon(1e-6), slack.get_epsilon(1e-6)
    assert e_ideal + 0.02 <= e_actual <= e_ideal + 0.025
    shrunk = 1e-6 * math.exp(-0.01) * (1 - 1e-12)
    assert e_actual == pytest.approx(0.02 + zcdp_epsilon(0.5, shrunk), rel=1e-12)
    assert slack.get_delta(e_actual) <= 1e-6 * (1 + 1e-9)
    assert slack.get_delta(0.01) == 1.0  # below 2A nothing is certified


def test_zcdp_event_validation_and_json() -> None:
    ev = ZCdpEvent(rho=0.125)
    assert event_from_json(event_to_json(ev)) == ev
    for bad in (math.nan, -1.0, math.inf, "0.1", None, True):
        with pytest.raises(PrivacyParameterError):
            ZCdpEvent(rho=bad)  # type: ignore[arg-type]
    with pytest.raises(SerializationError):
        event_from_json('{"type": "zcdp", "rho": -1}')
