"""The privacy-loss engine shared by ``fdp.tensor`` and the PLD accountant.

References: an mpmath Fourier inversion of the closed-form Laplace loss (no grid,
``benchmarks/shared/laplace_exact.py``), the exact Gaussian composition ``G_{mu sqrt(n)}``
(DRS Corollary 3.3) and dp_accounting's PLD (pessimistic and optimistic discretisations).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from laplace_exact import laplace_composition_delta

from dpkit._loss.pairs import (
    gaussian_pair,
    laplace_pair,
    pair_profile,
    randomized_response_pair,
)
from dpkit.accounting.pld import PldAccountant
from dpkit.divergence import GaussianPair, LaplacePair, RandomizedResponsePair
from dpkit.events import GaussianEvent, LaplaceEvent, PoissonSampledEvent
from dpkit.fdp import gdp, laplace, self_tensor, tensor

X = np.linspace(0.0, 1.0, 4001)
N_BIG = 1000
MU_BIG = 1.0 / math.sqrt(N_BIG)


def _pld_delta(event: object, n: int, eps: float) -> float:
    acc = PldAccountant()
    acc.compose(event, count=n)  # type: ignore[arg-type]
    return acc.get_delta(eps)


def _numeric_gaussian(mu: float, n: int) -> object:
    # the identity factor laplace(mu=0) makes tensor take the engine instead of the G_mu law
    return tensor(*[gdp(mu)] * n, laplace(mu=0.0))


def test_reference_is_bracketed_by_dp_accounting() -> None:
    # the mpmath reference lies between dp_accounting's optimistic and pessimistic PLDs
    mu, n = 0.1, 200
    for eps in (0.5, 1.0, 2.0):
        ref, tail = laplace_composition_delta(mu, n, eps)
        assert tail < 1e-8
        hi = pld.from_laplace_mechanism(
            1.0 / mu, value_discretization_interval=1e-4, pessimistic_estimate=True
        ).self_compose(n)
        lo = pld.from_laplace_mechanism(
            1.0 / mu, value_discretization_interval=1e-4, pessimistic_estimate=False
        ).self_compose(n)
        assert lo.get_delta_for_epsilon(eps) - tail <= ref <= hi.get_delta_for_epsilon(eps) + tail


def test_default_grid_is_tight_for_1000_laplace_factors() -> None:
    # before the shared engine, the default step 1e-3 gave 0.235 here (exact 0.1251)
    exact, tail = laplace_composition_delta(MU_BIG, N_BIG, 1.0)
    assert tail < 1e-11
    assert exact == pytest.approx(0.1251014, abs=1e-7)
    for f in (self_tensor(laplace(mu=MU_BIG), N_BIG), tensor(*[laplace(mu=MU_BIG)] * N_BIG)):
        d = f.delta(1.0)
        assert d >= exact - tail  # a certified upper bound ...
        assert d <= exact * 1.01  # ... within 1 % (in fact about 1.4e-7 relative)
    assert exact - tail <= _pld_delta(LaplaceEvent(noise_multiplier=1 / MU_BIG), N_BIG, 1.0)


@pytest.mark.parametrize(("mu", "n"), [(0.1, 100), (MU_BIG, N_BIG), (0.5, 30)])
def test_tensor_agrees_with_accountant_for_laplace(mu: float, n: int) -> None:
    f = self_tensor(laplace(mu=mu), n)
    for eps in (0.0, 0.5, 1.0, 2.0, 4.0):
        d_acc = _pld_delta(LaplaceEvent(noise_multiplier=1.0 / mu), n, eps)
        assert f.delta(eps) == pytest.approx(d_acc, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize(("mu", "n"), [(0.05, 400), (MU_BIG, N_BIG), (0.8, 5)])
def test_gaussian_composition_through_the_engine(mu: float, n: int) -> None:
    num = _numeric_gaussian(mu, n)
    exact = gdp(mu * math.sqrt(n))
    # a lower bound of the exact G_{mu sqrt(n)} curve, and close to it
    assert np.all(num(X) <= exact(X) + 1e-15)  # type: ignore[operator]
    assert np.max(exact(X) - num(X)) < 1e-5  # type: ignore[operator]
    event = PoissonSampledEvent(
        event=GaussianEvent(noise_multiplier=1.0 / mu), sampling_rate=math.nextafter(1.0, 0.0)
    )
    # (a rate just below 1 keeps the accountant on its grid: rate 1 uses the closed form)
    for eps in (0.0, 1.0, 3.0):
        d = num.delta(eps)  # type: ignore[attr-defined]
        assert d >= exact.delta(eps) * (1 - 1e-12)
        assert d == pytest.approx(exact.delta(eps), rel=1e-4, abs=1e-10)
        assert d == pytest.approx(_pld_delta(event, n, eps), rel=1e-5, abs=1e-10)


def test_gaussian_against_dp_accounting() -> None:
    mu, n = 0.2, 50
    num = _numeric_gaussian(mu, n)
    theirs = pld.from_gaussian_mechanism(1.0 / mu, value_discretization_interval=1e-4)
    theirs = theirs.self_compose(n)
    for eps in (0.5, 1.0, 2.0):
        d = num.delta(eps)  # type: ignore[attr-defined]
        assert d == pytest.approx(theirs.get_delta_for_epsilon(eps), rel=1e-3)


@settings(max_examples=5, deadline=None)
@given(n=st.integers(300, 1500), total=st.floats(1.0, 2.0), eps=st.floats(0.0, 3.0))
def test_never_below_exact_laplace(n: int, total: float, eps: float) -> None:
    mu = total / math.sqrt(n)  # composed loss of spread about `total`
    exact, tail = laplace_composition_delta(mu, n, eps)
    assume(tail < 1e-8)
    d = self_tensor(laplace(mu=mu), n).delta(eps)
    assert d >= exact - tail
    assert d <= exact * 1.01 + 1e-9


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 300),
    extra=st.integers(1, 300),
    mu=st.floats(0.01, 0.5),
    eps=st.floats(0.0, 3.0),
)
def test_monotone_in_the_number_of_factors(n: int, extra: int, mu: float, eps: float) -> None:
    d_n = self_tensor(laplace(mu=mu), n).delta(eps)
    d_m = self_tensor(laplace(mu=mu), n + extra).delta(eps)
    assume(d_n > 1e-6)  # above the round-off allowances, where the order is meaningful
    assert d_n <= d_m


@settings(max_examples=40, deadline=None)
@given(mu=st.floats(0.01, 8.0), eps=st.floats(-10.0, 10.0))
def test_divergence_pairs_are_the_engine_pairs(mu: float, eps: float) -> None:
    # the closed forms of dpkit.divergence describe the very pairs the engine composes
    g = pair_profile(gaussian_pair(mu), eps)
    assert g == pytest.approx(GaussianPair(mu=mu).hockey_stick(epsilon=eps), rel=1e-9, abs=1e-15)
    lap = pair_profile(laplace_pair(mu), eps)
    assert lap == pytest.approx(LaplacePair(mu=mu).hockey_stick(epsilon=eps), rel=1e-9, abs=1e-15)
    assert lap == pytest.approx(laplace(mu=mu).delta(eps), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(("p", "k"), [(0.75, 2), (0.6, 3), (0.9, 10)])
def test_randomized_response_pair_matches_divergence(p: float, k: int) -> None:
    pair = randomized_response_pair(p, k)
    assert pair is not None
    ref = RandomizedResponsePair(p_truth=p, categories=k)
    for eps in (-1.0, 0.0, 0.3, 1.0, 5.0):
        assert pair_profile(pair, eps) == pytest.approx(
            ref.hockey_stick(epsilon=eps), rel=1e-12, abs=1e-15
        )
