"""Pure and approximate DP accountants (basic composition, exact rationals)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting.approx import ApproxDpAccountant
from dpkit.accounting.pure import PureDpAccountant, delta_at, subsampled_epsilon
from dpkit.errors import UnsupportedEventError
from dpkit.events import (
    ApproxDpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    PoissonSampledEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
)


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 40 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mpmath.workdps(40):
        yield


def test_laplace_costs_inverse_noise_multiplier_exactly() -> None:
    acct = PureDpAccountant().compose(LaplaceEvent(noise_multiplier=10.0), 3)
    assert acct.epsilon_exact == Fraction(3, 10)
    assert acct.get_epsilon(1e-6) == 0.30000000000000004  # smallest double >= 3/10
    assert acct.get_delta(0.3000000000000001) == 0.0


def test_event_table() -> None:
    cases = [
        (DiscreteLaplaceEvent(scale=4.0, sensitivity=2), Fraction(1, 2)),
        (ExponentialMechanismEvent(epsilon=0.25), Fraction(1, 4)),
        (ReportNoisyMaxEvent(epsilon=0.5, noise="gumbel"), Fraction(1, 2)),
        (PureDpEvent(epsilon=0.75), Fraction(3, 4)),
        (ApproxDpEvent(epsilon=0.125, delta=0.0), Fraction(1, 8)),
    ]
    for event, expected in cases:
        assert PureDpAccountant().compose(event).epsilon_exact == expected


def test_randomized_response_epsilon() -> None:
    rr = RandomizedResponseEvent(p_truth=0.75, categories=2)
    got = PureDpAccountant().compose(rr).get_epsilon(0.0)
    assert got >= math.log(3.0)
    assert got == pytest.approx(math.log(3.0), rel=1e-15)
    rr4 = RandomizedResponseEvent(p_truth=0.7, categories=4)
    exact = mpmath.log(mpmath.mpf(0.7) * 3 / (1 - mpmath.mpf(0.7)))
    assert PureDpAccountant().compose(rr4).get_epsilon(0.0) >= exact
    # Nearly useless randomized response: a tiny epsilon, still an upper bound.
    p = 0.5 + 1e-12
    tiny = PureDpAccountant().compose(RandomizedResponseEvent(p_truth=p)).get_epsilon(0.0)
    assert tiny >= mpmath.log(mpmath.mpf(p) / (1 - mpmath.mpf(p)))
    assert tiny == pytest.approx(float(mpmath.log(mpmath.mpf(p) / (1 - mpmath.mpf(p)))), rel=1e-9)


def test_pmf_slack_adds_twice_per_release() -> None:
    acct = PureDpAccountant().compose(LaplaceEvent(noise_multiplier=2.0, pmf_slack=2.0**-20), 4)
    assert acct.epsilon_exact == 4 * (Fraction(1, 2) + 2 * Fraction(2**-20))


def test_gaussian_and_unknown_refused() -> None:
    for acct in (PureDpAccountant(), ApproxDpAccountant()):
        for event in (
            GaussianEvent(noise_multiplier=1.0),
            DiscreteGaussianEvent(sigma=2.0, sensitivity=1),
            ComposedEvent(
                events=(LaplaceEvent(noise_multiplier=1.0), GaussianEvent(noise_multiplier=1.0))
            ),
        ):
            assert not acct.supports(event)
            with pytest.raises(UnsupportedEventError):
                acct.compose(event)
        assert acct.get_epsilon(1e-5) == 0.0
    with pytest.raises(UnsupportedEventError):
        PureDpAccountant().compose(ApproxDpEvent(epsilon=0.1, delta=1e-9))


def test_subsampling_amplification() -> None:
    q, nm = 0.01, 0.5
    event = PoissonSampledEvent(sampling_rate=q, event=LaplaceEvent(noise_multiplier=nm))
    got = PureDpAccountant().compose(event).get_epsilon(0.0)
    exact = mpmath.log1p(q * mpmath.expm1(1 / mpmath.mpf(nm)))
    assert got >= exact
    assert got == pytest.approx(float(exact), rel=1e-10)
    assert subsampled_epsilon(1000.0, 1e-3) >= 1000.0 + math.log(1e-3)
    assert subsampled_epsilon(1.0, 0.0) == 0.0
    assert subsampled_epsilon(1.0, 1.0) == 1.0
    # Replace-one neighbours: amplification as stated does not apply; refused.
    replace = PoissonSampledEvent(
        sampling_rate=q,
        event=LaplaceEvent(noise_multiplier=nm, neighbouring=Neighbouring.REPLACE),
    )
    assert not PureDpAccountant().supports(replace)
    # A black-box PureDpEvent does not state its neighbouring relation: refused too.
    assert not PureDpAccountant().supports(
        PoissonSampledEvent(sampling_rate=q, event=PureDpEvent(epsilon=1.0))
    )


def test_approx_sums_and_queries() -> None:
    acct = ApproxDpAccountant()
    acct.compose(ApproxDpEvent(epsilon=0.5, delta=1e-6), 2)
    acct.compose(LaplaceEvent(noise_multiplier=4.0))
    assert acct.totals_exact == (Fraction(5, 4), 2 * Fraction(1e-6))
    assert acct.get_epsilon(2e-6) == 1.25
    assert math.isinf(acct.get_epsilon(1e-6))  # below the summed delta: nothing certified
    assert acct.get_delta(1.25) == pytest.approx(2e-6)
    assert acct.get_delta(2.0) >= 2e-6
    # Subsampled (eps, delta) event: (ln(1 + q(e^eps - 1)), q delta).
    sub = ApproxDpAccountant().compose(
        PoissonSampledEvent(
            sampling_rate=0.5,
            event=SelfComposedEvent(event=LaplaceEvent(noise_multiplier=1.0), count=2),
        )
    )
    assert sub.get_epsilon(0.0) == pytest.approx(math.log1p(0.5 * math.expm1(2.0)))


def test_delta_below_total_epsilon_is_the_fed_profile() -> None:
    # delta(eps) = 1 - (1 - D)(1 + e^eps)/(1 + e^E) for eps < E; tanh(E/2) at 0 when D = 0.
    for big_e, big_d, eps in [(1.0, 0.0, 0.0), (2.0, 1e-6, 0.5), (50.0, 0.0, 10.0)]:
        got = delta_at(total_epsilon=Fraction(big_e), total_delta=Fraction(big_d), epsilon=eps)
        e, d = mpmath.mpf(big_e), mpmath.mpf(big_d)
        exact = 1 - (1 - d) * (1 + mpmath.exp(eps)) / (1 + mpmath.exp(e))
        assert got >= exact
        assert got == pytest.approx(float(exact), rel=1e-10)
    acct = PureDpAccountant().compose(PureDpEvent(epsilon=1.0))
    assert acct.get_delta(0.0) >= math.tanh(0.5)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(min_value=0.0, max_value=5.0), st.integers(0, 20)),
        min_size=1,
        max_size=8,
    )
)
def test_exact_sum_and_monotone(items: list[tuple[float, int]]) -> None:
    acct = PureDpAccountant()
    expected = Fraction(0)
    previous = 0.0
    for eps, count in items:
        acct.compose(PureDpEvent(epsilon=eps), count)
        expected += count * Fraction(eps)
        assert acct.epsilon_exact == expected
        now = acct.get_epsilon(1e-9)
        assert now >= previous
        assert Fraction(now) >= expected
        previous = now
