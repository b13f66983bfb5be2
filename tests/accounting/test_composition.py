"""Composition theorems: closed forms, brute force and independent references."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator

import dp_accounting
import mpmath
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting.composition import (
    advanced_composition,
    basic_composition,
    optimal_composition,
    optimal_composition_delta,
    parallel_composition,
)
from dpkit.errors import PrivacyParameterError


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 50 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mpmath.workdps(50):
        yield


# ----------------------------------------------------------------------------- references
@functools.cache
def _output_probabilities(eps: float, k: int) -> tuple[tuple[mpmath.mpf, mpmath.mpf], ...]:
    """``(P(o), Q(o))`` for each of the 2^k outputs ``o`` of k-fold binary randomized response
    (P answers truthfully, Q flips), computed once per ``(eps, k)`` at the module's precision:
    the bisection below asks for the divergence at ~120 thresholds of the same outputs."""
    e = mpmath.mpf(eps)
    p = mpmath.exp(e) / (1 + mpmath.exp(e))
    out = []
    for outputs in itertools.product((0, 1), repeat=k):
        agree = sum(outputs)
        out.append((p**agree * (1 - p) ** (k - agree), (1 - p) ** agree * p ** (k - agree)))
    return tuple(out)


def brute_force_delta(eps: float, k: int, t: mpmath.mpf) -> mpmath.mpf:
    """Hockey-stick divergence of k-fold binary randomized response, over all 2^k outputs."""
    scale = mpmath.exp(t)
    total = mpmath.mpf(0)
    for prob_p, prob_q in _output_probabilities(eps, k):
        total += max(mpmath.mpf(0), prob_p - scale * prob_q)
    return total


def brute_force_epsilon(eps: float, k: int, delta: float) -> mpmath.mpf:
    lo, hi = mpmath.mpf(0), mpmath.mpf(k * eps)
    if brute_force_delta(eps, k, lo) <= delta:
        return lo
    for _ in range(120):
        mid = (lo + hi) / 2
        if brute_force_delta(eps, k, mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def kov_grid_delta(eps: float, k: int, i: int) -> mpmath.mpf:
    """delta_i of Kairouz, Oh and Viswanath (2015), Theorem 3.3, at eps' = (k - 2i) eps."""
    e = mpmath.mpf(eps)
    total = mpmath.mpf(0)
    for ell in range(i):
        total += mpmath.binomial(k, ell) * (
            mpmath.exp((k - ell) * e) - mpmath.exp((k - 2 * i + ell) * e)
        )
    return total / (1 + mpmath.exp(e)) ** k


# ----------------------------------------------------------------------------- basic / parallel
def test_basic_composition_sums_exactly() -> None:
    eps, delta = basic_composition(epsilons=[0.25, 0.5, 0.125], deltas=[1e-6, 2e-6, 0.0])
    assert eps == 0.875
    assert delta >= 3e-6 and delta == pytest.approx(3e-6, rel=1e-15)
    assert basic_composition(epsilons=[]) == (0.0, 0.0)
    # 0.1 + 0.2 as exact rationals of the doubles, rounded up once.
    e, _ = basic_composition(epsilons=[0.1, 0.2])
    assert e >= 0.1 + 0.2 and e == pytest.approx(0.3)


def test_parallel_composition_is_max_for_add_remove_and_group_of_two_for_replace() -> None:
    assert parallel_composition(epsilons=[0.1, 0.7, 0.3]) == (0.7, 0.0)
    assert parallel_composition(epsilons=[0.1, 0.5], deltas=[1e-7, 1e-9]) == (0.5, 1e-7)
    # replace: a replacement inside the worst part is two add/remove steps (group privacy)
    e, d = parallel_composition(
        epsilons=[0.25, 0.5, 0.125], deltas=[1e-7, 1e-9, 0.0], neighbouring="replace"
    )
    assert e == 1.0
    assert d >= (1 + math.exp(0.5)) * 1e-7
    assert d == pytest.approx((1 + math.exp(0.5)) * 1e-7, rel=1e-12)
    assert parallel_composition(epsilons=[]) == (0.0, 0.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilons": [0.1, math.nan]},
        {"epsilons": [0.1, -0.1]},
        {"epsilons": [math.inf]},
        {"epsilons": "0.1"},
        {"epsilons": [True]},
        {"epsilons": [0.1], "deltas": [1.0]},
        {"epsilons": [0.1], "deltas": [0.1, 0.2]},
    ],
)
def test_list_compositions_validate(kwargs: dict[str, object]) -> None:
    with pytest.raises(PrivacyParameterError):
        basic_composition(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        parallel_composition(**kwargs)  # type: ignore[arg-type]


def test_parallel_rejects_unknown_relation() -> None:
    with pytest.raises(PrivacyParameterError):
        parallel_composition(epsilons=[0.1], neighbouring="swap")


# ----------------------------------------------------------------------------- advanced
@pytest.mark.parametrize(
    ("eps", "k", "slack"), [(0.01, 1000, 1e-6), (0.1, 50, 1e-5), (1.0, 3, 0.1)]
)
def test_advanced_matches_drv_formula(eps: float, k: int, slack: float) -> None:
    e = mpmath.mpf(eps)
    exact = mpmath.sqrt(2 * k * mpmath.log(1 / mpmath.mpf(slack))) * e + k * e * mpmath.expm1(e)
    got = advanced_composition(epsilon=eps, count=k, delta_slack=slack)
    assert got >= min(exact, k * e)
    assert got == pytest.approx(float(min(exact, k * e)), rel=1e-10)


def test_advanced_is_min_with_basic_and_keyword_only() -> None:
    # For one release the Azuma term dominates: the answer is basic composition.
    assert advanced_composition(epsilon=0.5, count=1, delta_slack=1e-6) == 0.5
    assert advanced_composition(epsilon=0.5, count=0, delta_slack=1e-6) == 0.0
    with pytest.raises(TypeError):
        advanced_composition(0.5, 10, 1e-6)  # type: ignore[misc]
    for bad in ({"delta_slack": 0.0}, {"delta_slack": math.nan}, {"delta_slack": 1.0}):
        with pytest.raises(PrivacyParameterError):
            advanced_composition(epsilon=0.1, count=10, **bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        advanced_composition(epsilon=0.1, count=-1, delta_slack=1e-6)
    with pytest.raises(PrivacyParameterError):
        advanced_composition(epsilon=-0.1, count=1, delta_slack=1e-6)


# ----------------------------------------------------------------------------- optimal
@pytest.mark.parametrize(("eps", "k", "delta"), [(0.5, 6, 1e-3), (1.0, 5, 0.05), (0.2, 8, 1e-4)])
def test_optimal_matches_brute_force(eps: float, k: int, delta: float) -> None:
    reference = brute_force_epsilon(eps, k, delta)
    got = optimal_composition(epsilon=eps, count=k, delta=delta)
    assert got >= reference
    assert got - reference < 1e-12


@pytest.mark.parametrize(("eps", "k"), [(0.3, 7), (1.0, 10), (0.05, 40)])
def test_optimal_delta_matches_kov_grid(eps: float, k: int) -> None:
    for i in range(0, k // 2 + 1):
        t = (k - 2 * i) * eps
        got = optimal_composition_delta(epsilon=eps, count=k, target_epsilon=t)
        ref = kov_grid_delta(eps, k, i)
        # t is the double nearest (k - 2i) eps, so allow for that last-bit difference here;
        # the safe direction at the exact argument is checked against brute force above.
        assert got >= ref * (1 - 1e-13)
        # at i = 0 the double t is just below the exact k * eps, where delta is tiny but > 0
        assert got == pytest.approx(float(ref), rel=1e-12, abs=1e-20)


def test_optimal_is_tight_for_large_counts() -> None:
    for eps, k, delta in [(0.01, 10_000, 1e-6), (0.1, 2_000, 1e-9), (2.0, 500, 1e-5)]:
        got = optimal_composition(epsilon=eps, count=k, delta=delta)
        assert optimal_composition_delta(epsilon=eps, count=k, target_epsilon=got) <= delta
        below = got * (1 - 1e-9)
        assert optimal_composition_delta(epsilon=eps, count=k, target_epsilon=below) > delta
        assert got <= advanced_composition(epsilon=eps, count=k, delta_slack=delta)


def test_optimal_matches_dp_accounting_pld() -> None:
    # dp_accounting's PLD of the worst (eps, 0) pair is pessimistic: never below the exact
    # optimum, and close to it.
    eps, k, delta = 0.1, 100, 1e-5
    params = dp_accounting.pld.common.DifferentialPrivacyParameters(eps, 0.0)
    ref = pld.from_privacy_parameters(params, value_discretization_interval=1e-4)
    ref_eps = ref.self_compose(k).get_epsilon_for_delta(delta)
    got = optimal_composition(epsilon=eps, count=k, delta=delta)
    assert got <= ref_eps + 1e-12
    assert ref_eps - got < 1e-6


def test_optimal_dominates_laplace_composition() -> None:
    # Any k-fold composition of eps-DP mechanisms (here Laplace, via an independent PLD) must
    # need no more epsilon than the optimal bound.
    eps, k, delta = 0.5, 20, 1e-5
    lap = pld.from_laplace_mechanism(1.0 / eps, value_discretization_interval=1e-4)
    lap_eps = lap.self_compose(k).get_epsilon_for_delta(delta)
    assert lap_eps <= optimal_composition(epsilon=eps, count=k, delta=delta)


def test_optimal_with_release_delta() -> None:
    eps, k = 0.2, 30
    plain = optimal_composition(epsilon=eps, count=k, delta=1e-4)
    with_d0 = optimal_composition(epsilon=eps, count=k, delta=1e-4, release_delta=1e-7)
    assert with_d0 >= plain
    # KOV: 1 - (1 - d0)^k (1 - delta_RR(eps')) <= delta.
    d_rr = optimal_composition_delta(epsilon=eps, count=k, target_epsilon=with_d0)
    assert 1 - (1 - 1e-7) ** k * (1 - d_rr) <= 1e-4 * (1 + 1e-12)
    # Not enough delta for the per-release deltas: nothing finite can be certified.
    assert math.isinf(optimal_composition(epsilon=eps, count=k, delta=1e-6, release_delta=1e-6))


def test_optimal_edge_cases_and_validation() -> None:
    assert optimal_composition(epsilon=0.5, count=0, delta=1e-5) == 0.0
    assert optimal_composition(epsilon=0.0, count=10, delta=1e-5) == 0.0
    assert optimal_composition(epsilon=0.5, count=4, delta=0.0) == 2.0  # pure: basic is optimal
    # A huge delta allows epsilon 0.
    assert optimal_composition(epsilon=0.01, count=4, delta=0.5) == 0.0
    with pytest.raises(TypeError):
        optimal_composition(0.1, 10, 1e-5)  # type: ignore[misc]
    for bad in (math.nan, -0.1, math.inf, "0.1", True):
        with pytest.raises(PrivacyParameterError):
            optimal_composition(epsilon=bad, count=10, delta=1e-5)  # type: ignore[arg-type]
    for bad_count in (-1, 2.5, True):
        with pytest.raises(PrivacyParameterError):
            optimal_composition(epsilon=0.1, count=bad_count, delta=1e-5)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        optimal_composition(epsilon=0.1, count=10, delta=1.0)


@settings(max_examples=40, deadline=None)
@given(
    eps=st.floats(min_value=1e-3, max_value=3.0),
    k=st.integers(min_value=1, max_value=300),
    log_delta=st.floats(min_value=-12.0, max_value=-1.0),
)
def test_composition_theorems_are_ordered(eps: float, k: int, log_delta: float) -> None:
    delta = 10.0**log_delta
    opt = optimal_composition(epsilon=eps, count=k, delta=delta)
    adv = advanced_composition(epsilon=eps, count=k, delta_slack=delta)
    basic, _ = basic_composition(epsilons=[eps] * k)
    assert 0.0 <= opt <= adv <= basic
    # More releases never cost less; more delta never costs more.
    assert optimal_composition(epsilon=eps, count=k + 1, delta=delta) >= opt
    assert optimal_composition(epsilon=eps, count=k, delta=min(2 * delta, 0.5)) <= opt


# ----------------------------------------------------------------------------- large counts
def _scipy_rr_delta(eps: float, k: int, t: float) -> float:
    """delta(t) of k-fold randomized response from scipy's binomial log-pmf (float, independent
    of dpkit's windowed decimal sums)."""
    import numpy as np
    from scipy import stats

    j = np.arange(0, k // 2 + 1)
    loss = (k - 2 * j) * eps
    keep = loss > t
    p_dis = 1.0 / (1.0 + math.exp(eps))
    log_p = stats.binom.logpmf(j[keep], k, p_dis)
    return float(np.sum(np.exp(log_p) * -np.expm1(t - loss[keep])))


@pytest.mark.parametrize(
    ("eps", "k", "delta"), [(0.01, 10**6, 1e-6), (1.0, 10**6, 1e-9), (0.001, 3 * 10**6, 1e-5)]
)
def test_optimal_composition_large_counts_against_scipy(eps: float, k: int, delta: float) -> None:
    # Regression: the sum over i visited every term from 0 (18 s at 10^6); now only the window
    # where the binomial mass is not negligible, with the skipped mass bounded and added.
    got = optimal_composition(epsilon=eps, count=k, delta=delta)
    assert _scipy_rr_delta(eps, k, got) <= delta * (1 + 1e-8)
    assert _scipy_rr_delta(eps, k, got * (1 - 1e-7)) > delta
    d = optimal_composition_delta(epsilon=eps, count=k, target_epsilon=got)
    assert d == pytest.approx(_scipy_rr_delta(eps, k, got), rel=1e-7)


def test_optimal_composition_huge_counts_answer_or_refuse() -> None:
    # Regression: count 2^53 + 1 looped forever. Now: exact (count is never rounded to a
    # double) where few terms matter, a clear error where too many do.
    import signal

    def _hang(*_: object) -> None:
        raise AssertionError("optimal_composition did not return")

    old = signal.signal(signal.SIGALRM, _hang)
    signal.alarm(120)  # a guard against the old infinite loop, not a timing assertion
    try:
        k = 2**53 + 1
        with pytest.raises(PrivacyParameterError, match="count"):
            optimal_composition(epsilon=0.1, count=k, delta=1e-6)
        with pytest.raises(PrivacyParameterError, match="count"):
            optimal_composition_delta(epsilon=0.1, count=k, target_epsilon=1.0)
        # at epsilon 40 the disagreeing coordinates have mass ~ k e^-40 ~ 4e-2 each: few terms
        got = optimal_composition(epsilon=40.0, count=k, delta=1e-6)
        assert got == math.nextafter(float(k * 40), math.inf) or got >= k * 40.0 - 100
        assert got <= basic_composition(epsilons=[40.0])[0] * k * (1 + 1e-15)
        # 10^6 releases of 700-DP: all the mass sits at 7e8
        got = optimal_composition(epsilon=700.0, count=10**6, delta=0.999999)
        assert 7e8 - 20 <= got <= 7e8
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
