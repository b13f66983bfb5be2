"""Hypothesis properties of the mechanisms: calibration on the safe side, monotonicity, lattice
granularity, shapes, immutability, selection invariants."""

from __future__ import annotations

import dataclasses
import math

import mpmath
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dpkit.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    ExponentialMechanism,
    Gaussian,
    Laplace,
    RandomizedResponse,
    ReportNoisyMax,
    bounded_mean_sensitivity,
    bounded_sum_sensitivity,
    count_sensitivity,
)
from dpkit.noise import RandomSource

eps_st = st.floats(1e-3, 20.0)
sens_st = st.floats(1e-6, 1e6)
shape_st = st.one_of(st.just(()), st.lists(st.integers(0, 6), min_size=1, max_size=3).map(tuple))
seed_st = st.integers(0, 2**31)


def _power_of_two(x: float) -> bool:
    return x > 0 and math.frexp(x)[0] == 0.5


def src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


# ---------------------------------------------------------------------------------------------
# Laplace
# ---------------------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(eps=eps_st, sens=sens_st)
def test_laplace_calibration_is_safe_and_lattice_is_public(eps: float, sens: float) -> None:
    m = Laplace.from_epsilon(epsilon=eps, sensitivity=sens)
    assert m.epsilon <= eps  # never spends more than asked
    assert m.scale >= sens / eps
    assert _power_of_two(m.granularity)
    assert m.granularity <= min(sens, m.scale)  # the charge is a small fraction
    again = Laplace.from_epsilon(epsilon=eps, sensitivity=sens)
    assert again == m  # a pure function of the public parameters
    assert m.event.noise_multiplier <= m.scale / sens


@settings(max_examples=100, deadline=None)
@given(e1=eps_st, e2=eps_st, sens=sens_st)
def test_laplace_scale_is_monotone_in_epsilon(e1: float, e2: float, sens: float) -> None:
    assume(e1 < e2)
    a = Laplace.from_epsilon(epsilon=e1, sensitivity=sens)
    b = Laplace.from_epsilon(epsilon=e2, sensitivity=sens)
    assert a.scale >= b.scale
    assert a.epsilon <= b.epsilon


@settings(max_examples=100, deadline=None)
@given(b1=st.floats(1e-3, 1e6), b2=st.floats(1e-3, 1e6), sens=st.floats(1e-3, 1e3))
@example(b1=510996.0, b2=524289.0, sens=0.00390625)  # the granularity doubles between them
def test_laplace_epsilon_is_monotone_in_scale(b1: float, b2: float, sens: float) -> None:
    assume(b1 < b2)
    m1 = Laplace.from_scale(scale=b1, sensitivity=sens)
    m2 = Laplace.from_scale(scale=b2, sensitivity=sens)
    # epsilon = (sens + g) / b + 2a: decreasing in b for a fixed granularity g, but g may be
    # coarser at the larger scale (sampler limit), so e2 <= (sens + g2) / b1 + 2a
    # <= e1 + g2 / b1 (up to the rounding of the reported values).
    assert m2.epsilon <= (m1.epsilon + m2.granularity / b1) * (1 + 2.0**-40)


@settings(max_examples=60, deadline=None)
@given(shape=shape_st, seed=seed_st, eps=eps_st)
def test_additive_release_preserves_shape(shape: tuple[int, ...], seed: int, eps: float) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    for mech in (
        Laplace.from_epsilon(epsilon=eps, sensitivity=1.0),
        Gaussian.from_mu(mu=eps, sensitivity=1.0),
    ):
        out = mech.release(x, source=src(seed))
        assert out.shape == x.shape and out.dtype == np.float64
        q = out / mech.granularity
        assert np.array_equal(q, np.rint(q))
    if all(shape):  # nested lists lose empty trailing dimensions, so only non-empty ones
        lst = Laplace.from_epsilon(epsilon=eps, sensitivity=1.0).release(
            x.tolist(), source=src(seed)
        )
        assert lst.shape == x.shape


@settings(max_examples=40, deadline=None)
@given(
    values=hnp.arrays(np.float64, st.integers(1, 30), elements=st.floats(-1e6, 1e6)), seed=seed_st
)
def test_release_is_reproducible_with_a_seeded_source(values: np.ndarray, seed: int) -> None:
    m = Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
    assert np.array_equal(m.release(values, source=src(seed)), m.release(values, source=src(seed)))


def test_confidence_intervals_hold_and_shrink() -> None:
    lap = Laplace.from_epsilon(epsilon=0.5, sensitivity=1.0)
    gau = Gaussian.from_mu(mu=0.5, sensitivity=1.0)
    for mech in (lap, gau):
        widths = [mech.confidence_half_width(a) for a in (1e-6, 1e-3, 0.05, 0.5)]
        assert widths == sorted(widths, reverse=True)
        # Empirically: at alpha = 0.05, at most ~5% of |noise| exceed the half-width.
        z = mech.release(np.zeros(200_000), source=src(5))
        frac = float(np.mean(np.abs(z) > mech.confidence_half_width(0.05)))
        assert frac <= 0.05 + 0.005  # 0.005 is > 10 binomial standard deviations
    assert lap.confidence_half_width(0.05) >= lap.scale * math.log(20)


# ---------------------------------------------------------------------------------------------
# Gaussian
# ---------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(eps=st.floats(0.01, 10.0), delta=st.floats(1e-12, 0.1), sens=st.floats(1e-3, 1e3))
def test_gaussian_analytic_calibration_is_safe(eps: float, delta: float, sens: float) -> None:
    m = Gaussian.from_epsilon_delta(epsilon=eps, delta=delta, sensitivity=sens)
    assert _power_of_two(m.granularity)
    assert m.delta_for(epsilon=eps) <= delta
    assert m.sigma > 0
    if eps < 1.0:
        c = Gaussian.from_epsilon_delta(
            epsilon=eps, delta=delta, sensitivity=sens, method="classic"
        )
        assert m.sigma <= c.sigma  # analytic is never worse than the classic bound


@settings(max_examples=60, deadline=None)
@given(m1=st.floats(0.01, 10.0), m2=st.floats(0.01, 10.0), sens=st.floats(1e-3, 1e3))
def test_gaussian_from_mu_is_safe_and_monotone(m1: float, m2: float, sens: float) -> None:
    assume(m1 < m2)
    a = Gaussian.from_mu(mu=m1, sensitivity=sens)
    b = Gaussian.from_mu(mu=m2, sensitivity=sens)
    assert a.mu <= m1 and b.mu <= m2
    assert a.sigma >= b.sigma


@settings(max_examples=40, deadline=None)
@given(d1=st.floats(1e-12, 0.1), d2=st.floats(1e-12, 0.1))
def test_gaussian_sigma_monotone_in_delta(d1: float, d2: float) -> None:
    assume(d1 < d2)
    a = Gaussian.from_epsilon_delta(epsilon=1.0, delta=d1, sensitivity=1.0)
    b = Gaussian.from_epsilon_delta(epsilon=1.0, delta=d2, sensitivity=1.0)
    assert a.sigma >= b.sigma


def test_gaussian_epsilon_for_inverts_delta_for() -> None:
    m = Gaussian.from_mu(mu=1.0, sensitivity=1.0)
    for delta in (1e-3, 1e-6, 1e-9):
        e = m.epsilon_for(delta=delta)
        assert m.delta_for(epsilon=e) <= delta


# ---------------------------------------------------------------------------------------------
# Discrete mechanisms
# ---------------------------------------------------------------------------------------------
@settings(max_examples=80, deadline=None)
@given(eps=eps_st, sens=st.integers(1, 1000), shape=shape_st, seed=seed_st)
def test_discrete_laplace_is_safe_and_preserves_shape(
    eps: float, sens: int, shape: tuple[int, ...], seed: int
) -> None:
    m = DiscreteLaplace.from_epsilon(epsilon=eps, sensitivity=sens)
    assert m.epsilon <= eps
    assume(not m.exact or int(np.prod(shape)) <= 4)
    x = np.zeros(shape, dtype=np.int64)
    out = m.release(x, source=src(seed))
    assert out.shape == shape and out.dtype == np.int64


@settings(max_examples=40, deadline=None)
@given(sigma=st.floats(0.1, 100.0), shape=shape_st, seed=seed_st)
def test_discrete_gaussian_preserves_shape(sigma: float, shape: tuple[int, ...], seed: int) -> None:
    m = DiscreteGaussian.from_sigma(sigma=sigma, sensitivity=1)
    out = m.release(np.ones(shape, dtype=np.int32), source=src(seed))
    assert out.shape == shape and out.dtype == np.int64
    assert m.confidence_half_width(0.01) >= m.confidence_half_width(0.1) >= 0


# ---------------------------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------------------------
scores_st = hnp.arrays(np.float64, st.integers(1, 30), elements=st.floats(-1e3, 1e3))


@settings(max_examples=100, deadline=None)
@given(scores=scores_st, eps=eps_st, shift=st.floats(-1e6, 1e6), seed=seed_st)
def test_exponential_mechanism_invariants(
    scores: np.ndarray, eps: float, shift: float, seed: int
) -> None:
    m = ExponentialMechanism(epsilon=eps, sensitivity=1.0)
    p = m.probabilities(scores)
    assert p.shape == scores.shape and np.all(p >= 0) and p.sum() == pytest.approx(1.0)
    # Higher score, no lower probability.
    order = np.argsort(scores, kind="stable")
    assert np.all(np.diff(p[order]) >= -1e-15)
    # Shifting every score changes nothing (up to rounding of the shifted scores).
    assert np.allclose(m.probabilities(scores + shift), p, atol=1e-6) or abs(shift) > 1e5
    r = m.release(scores, source=src(seed))
    assert isinstance(r, int) and 0 <= r < scores.size
    many = m.release_many(scores, count=7, source=src(seed))
    assert many.shape == (7,) and np.all((many >= 0) & (many < scores.size))
    assert m.release_many(scores, count=0, source=src(seed)).shape == (0,)


@settings(max_examples=60, deadline=None)
@given(n1=st.integers(1, 10**6), n2=st.integers(1, 10**6), eps=eps_st)
def test_utility_gap_monotone(n1: int, n2: int, eps: float) -> None:
    assume(n1 < n2)
    m = ExponentialMechanism(epsilon=eps, sensitivity=1.0)
    assert m.utility_gap(n_candidates=n1, t=1.0) <= m.utility_gap(n_candidates=n2, t=1.0)
    assert m.utility_gap_at(n_candidates=n1, alpha=0.01) >= m.utility_gap_at(
        n_candidates=n1, alpha=0.1
    )
    mono = ExponentialMechanism(epsilon=eps, sensitivity=1.0, monotonic=True)
    assert mono.utility_gap(n_candidates=n1, t=1.0) <= m.utility_gap(n_candidates=n1, t=1.0)


def test_utility_guarantee_holds_empirically() -> None:
    # Dwork-Roth Theorem 3.11: P[u(out) <= OPT - gap(t)] <= e^-t.
    rng_scores = np.linspace(0.0, 50.0, 1000)
    m = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    picks = m.release_many(rng_scores, count=20_000, source=src(9))
    gap = m.utility_gap(n_candidates=1000, t=2.0)
    frac = float(np.mean(rng_scores[picks] <= rng_scores.max() - gap))
    assert frac <= math.exp(-2.0)


@pytest.mark.parametrize("kind", ["laplace", "exponential", "gumbel"])
@settings(max_examples=30, deadline=None)
@given(scores=scores_st, seed=seed_st)
def test_report_noisy_max_returns_an_index(kind: str, scores: np.ndarray, seed: int) -> None:
    m = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise=kind)
    r = m.release(scores, source=src(seed))
    assert isinstance(r, int) and 0 <= r < scores.size
    assert m.scale >= 2.0  # 2 * sensitivity / epsilon
    mono = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise=kind, monotonic=True)
    assert mono.scale == pytest.approx(m.scale / 2, rel=1e-9)


def test_selection_with_special_scores_never_fails() -> None:
    for mech in (
        ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
        ReportNoisyMax(epsilon=1.0, sensitivity=1.0),
    ):
        for scores in (
            [np.nan, np.nan],
            [-np.inf, -np.inf],
            [np.nan, 1.0],
            [1e308, -1e308],
            [-np.inf, 0.0],
        ):
            r = mech.release(scores, source=src(1))
            assert 0 <= r < len(scores)
        assert mech.release([np.nan, 1.0], source=src(2)) == 1
        assert mech.release([-np.inf, 0.0], source=src(2)) == 1
        # docs/special-values.md: every score NaN or -inf -> candidate 0.
        for seed in range(20):
            assert mech.release([np.nan, -np.inf, np.nan], source=src(seed)) == 0


# ---------------------------------------------------------------------------------------------
# Randomized response, sensitivities, immutability
# ---------------------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(eps=st.floats(1e-6, 30.0))
def test_randomized_response_calibration(eps: float) -> None:
    m = RandomizedResponse.from_epsilon(epsilon=eps)
    assert 0.5 <= m.p < 1.0
    assert m.p * 2**53 == math.floor(m.p * 2**53)
    assert math.log(m.p / (1 - m.p)) <= eps * (1 + 1e-12)
    # Reference in 60-digit arithmetic: math.log(p / (1 - p)) itself rounds the ratio first.
    mpmath.mp.dps = 60
    assert m.epsilon >= mpmath.log(mpmath.mpf(m.p) / (1 - mpmath.mpf(m.p)))


@settings(max_examples=30, deadline=None)
@given(shape=shape_st, seed=seed_st)
def test_randomized_response_shape_and_estimate(shape: tuple[int, ...], seed: int) -> None:
    m = RandomizedResponse(p=0.75)
    bits = np.ones(shape, dtype=bool)
    out = m.release(bits, source=src(seed))
    assert out.shape == shape and out.dtype == np.bool_


def test_randomized_response_estimate_is_unbiased() -> None:
    m = RandomizedResponse(p=0.8)
    truth = np.zeros(400_000, dtype=bool)
    truth[:100_000] = True
    est = m.estimate_proportion(m.release(truth, source=src(3)))
    # sd = sqrt(p(1-p)/n) / (2p - 1) = 0.00105; 6 sd:
    assert abs(est - 0.25) < 0.0065


def test_sensitivities() -> None:
    assert count_sensitivity(neighbouring="add_remove") == 1.0
    assert count_sensitivity(neighbouring="replace") == 1.0
    assert bounded_sum_sensitivity(lower=-2.0, upper=5.0, neighbouring="add_remove") == 5.0
    assert bounded_sum_sensitivity(lower=-2.0, upper=5.0, neighbouring="replace") == 7.0
    assert bounded_mean_sensitivity(
        lower=0.0, upper=1.0, n=9, neighbouring="add_remove"
    ) == pytest.approx(0.1)
    assert bounded_mean_sensitivity(
        lower=0.0, upper=1.0, n=10, neighbouring="replace"
    ) == pytest.approx(0.1)


def test_mechanisms_are_immutable() -> None:
    mechs = [
        Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0),
        Gaussian.from_mu(mu=1.0, sensitivity=1.0),
        DiscreteLaplace.from_epsilon(epsilon=1.0, sensitivity=1),
        DiscreteGaussian.from_sigma(sigma=1.0, sensitivity=1),
        ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
        ReportNoisyMax(epsilon=1.0, sensitivity=1.0),
        RandomizedResponse(p=0.75),
    ]
    for m in mechs:
        field = dataclasses.fields(m)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(m, field, 2.0)
        assert m.event is not None
        hash(m)


@settings(max_examples=200, deadline=None)
@given(lo=st.floats(-1e300, 1e300), hi=st.floats(-1e300, 1e300), n=st.integers(1, 10**20))
def test_sensitivities_are_rounded_up(lo: float, hi: float, n: int) -> None:
    from fractions import Fraction

    lo, hi = min(lo, hi), max(lo, hi)
    width = Fraction(hi) - Fraction(lo)
    assert Fraction(bounded_sum_sensitivity(lower=lo, upper=hi, neighbouring="replace")) >= width
    for rel, div in (("replace", n), ("add_remove", n + 1)):
        got = bounded_mean_sensitivity(lower=lo, upper=hi, n=n, neighbouring=rel)
        assert Fraction(got) >= width / div
        assert got <= math.nextafter(float(width / div), math.inf) * (1 + 2**-52)


def test_sensitivity_rounding_repro() -> None:
    # 1 - (-1e-17) = 1.00000000000000001 rounds to 1.0 in floating point: too small.
    assert bounded_sum_sensitivity(lower=-1e-17, upper=1.0, neighbouring="replace") > 1.0
    assert bounded_mean_sensitivity(lower=0.0, upper=1.0, n=3, neighbouring="replace") > 1 / 3


def test_confidence_interval_is_an_interval_around_a_release() -> None:
    from dpkit.mechanisms import DiscreteGaussian, DiscreteLaplace

    for mech in (
        Laplace.from_epsilon(epsilon=0.5, sensitivity=1.0),
        Gaussian.from_epsilon_delta(epsilon=1.0, delta=1e-6, sensitivity=1.0),
        DiscreteLaplace(scale=3.0, sensitivity=1),
        DiscreteGaussian(sigma=3.0, sensitivity=1),
    ):
        h = mech.confidence_half_width(0.05)
        assert mech.confidence_interval(100.0, alpha=0.05) == (100.0 - h, 100.0 + h)
        with pytest.raises(TypeError):  # the old one-argument call is not taken as a value
            mech.confidence_interval(0.05)  # type: ignore[call-arg]
