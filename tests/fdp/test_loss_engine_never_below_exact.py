"""Regression tests for attacks on the privacy-loss engine and the divergence closed forms.

Each test compares dpkit with an independent certified value (mpmath, 50 digits) and fails
when dpkit is on the unsafe side (delta or a divergence below the truth, epsilon at delta = 0
finite where the true one is infinite) or raises on legal input. Repro and figures:
tools/reproducers/loss_engine_attacks.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest

from dpkit import fdp
from dpkit.accounting.pld import PldAccountant
from dpkit.divergence import LaplacePair, RandomizedResponsePair
from dpkit.events import (
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
)


@pytest.fixture(autouse=True)
def _fifty_digits() -> Iterator[None]:
    # other test modules set mp.mp.dps globally at import (30 digits): the references here
    # need 50 (S - 1 ~ 1e-20 in the Renyi sums), whatever was collected last
    with mp.workdps(50):
        yield


def _gdp_delta(eps: float, mu: mp.mpf) -> mp.mpf:
    """Exact mu-GDP profile (DRS Corollary 2.13), 50 digits."""
    e = mp.mpf(eps)
    return mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2)


def _sampled(q: float, sigma: float, k: int) -> PldAccountant:
    acc = PldAccountant()
    acc.compose(
        PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=sigma)), k
    )
    return acc


# -- A: grid Gaussian with tiny losses: delta below the exact GDP profile --------------------
@pytest.mark.parametrize(
    ("sigma", "k", "eps"),
    [
        (1e12, 1, 0.0),  # dpkit 3.98892e-13, truth 3.98942e-13
        (3e15, 1, 0.0),  # dpkit 9.99e-17, truth 1.33e-16
        (1e16, 10**8, 0.0),  # dpkit 0, truth 3.99e-13
        (1e16, 10**8, 5e-13),  # dpkit 0, truth 1.98e-13
    ],
)
def test_grid_gaussian_delta_not_below_exact_gdp(sigma: float, k: int, eps: float) -> None:
    # q = 1: the Poisson-sampled event is the plain Gaussian mechanism, composed on the grid;
    # the true profile is exactly mu-GDP with mu = sqrt(k) / sigma.
    d = _sampled(1.0, sigma, k).get_delta(eps)
    assert d >= _gdp_delta(eps, mp.sqrt(k) / sigma)


# -- B: epsilon at delta = 0 of an unbounded loss must be infinite --------------------------
@pytest.mark.parametrize(("q", "sigma", "k"), [(1e-8, 100.0, 1000), (1e-6, 1e4, 1), (1.0, 1e10, 1)])
def test_subsampled_gaussian_is_never_pure_dp(q: float, sigma: float, k: int) -> None:
    acc = _sampled(q, sigma, k)
    eps = acc.get_epsilon(0.0)
    # certified: the true delta at any finite eps is >= q^k delta_GDP(eps - k log q) > 0
    if math.isfinite(eps):
        lb = mp.mpf(q) ** k * _gdp_delta(mp.mpf(eps) - k * mp.log(mp.mpf(q)), mp.sqrt(k) / sigma)
        assert lb > 0
    assert eps == math.inf


def test_discrete_laplace_huge_scale_delta_zero_positive() -> None:
    d = PldAccountant().compose(DiscreteLaplaceEvent(scale=1e300, sensitivity=1)).get_delta(0.0)
    truth = mp.tanh(mp.mpf(1) / (2 * mp.mpf(1e300)))  # TV(DLap(0, t), DLap(1, t))
    assert d >= truth


# -- C: tensor products: the returned curve's profile below the exact one ------------------
def _kov_delta(eps0: float, d0: float, k: int, eps: float) -> mp.mpf:
    """Exact profile of the k-fold worst-case pair of (eps0, d0)-DP (Kairouz, Oh, Viswanath)."""
    e0 = mp.mpf(eps0)
    p = 1 / (1 + mp.exp(-e0))
    fin = (1 - mp.mpf(d0)) ** k
    tot = 1 - fin
    for j in range(k + 1):
        loss = (2 * j - k) * e0
        if loss > eps:
            tot += (
                mp.binomial(k, j)
                * p**j
                * (1 - p) ** (k - j)
                * fin
                * (1 - mp.exp(mp.mpf(eps) - loss))
            )
    return tot


@pytest.mark.parametrize(
    ("eps0", "d0", "k", "eps"),
    [
        (40.0, 0.1, 1, 39.0),  # dpkit 0.6689085029445765, truth 0.66890850294570
        (100.0, 0.0, 1, 99.97),  # gap 4.6e-12
        (40.0, 0.1, 5, 199.95),  # gap 9.6e-12
        (650.0, 0.0, 1, 649.999),  # dpkit 0.000999500155367658, truth 0.000999500166601385
    ],
)
def test_tensor_profile_not_below_exact(eps0: float, d0: float, k: int, eps: float) -> None:
    f = fdp.approx_dp(epsilon=eps0, delta=d0)
    curve = fdp.tensor(f) if k == 1 else fdp.self_tensor(f, k)
    assert curve.delta(eps) >= _kov_delta(eps0, d0, k, eps)


def test_tensor_epsilon_not_below_exact() -> None:
    # f_{650,0}: delta(eps) = (1 - e^{eps - 650}) / (1 + e^-650) below 650, so the exact
    # epsilon at delta is 650 + ln(1 - delta (1 + e^-650)); dpkit 649.9989994996553
    e = fdp.tensor(fdp.approx_dp(epsilon=650.0)).epsilon(1e-3)
    assert e >= 650 + mp.log(1 - mp.mpf("1e-3") * (1 + mp.exp(-650)))


# -- D: Renyi divergences near alpha = 1 ---------------------------------------------------
def _laplace_renyi(mu: float, a: float) -> mp.mpf:
    m, al = mp.mpf(mu), mp.mpf(a)
    return mp.log(
        al / (2 * al - 1) * mp.exp((al - 1) * m) + (al - 1) / (2 * al - 1) * mp.exp(-al * m)
    ) / (al - 1)


@pytest.mark.parametrize(
    ("mu", "a"), [(0.01, 1 + 1e-15), (1.0, 1 - 1e-15), (5.0, 1 - 1e-15), (1.0, 1 + 1e-10)]
)
def test_laplace_renyi_near_one_not_below_truth(mu: float, a: float) -> None:
    assert LaplacePair(mu=mu).renyi(alpha=a) >= _laplace_renyi(mu, a)


def test_randomized_response_renyi_near_one_not_below_truth() -> None:
    a = 1 - 1e-15
    al, p = mp.mpf(a), mp.mpf("0.75")
    truth = mp.log(p**al * (1 - p) ** (1 - al) + (1 - p) ** al * p ** (1 - al)) / (al - 1)
    assert RandomizedResponsePair(p_truth=0.75).renyi(alpha=a) >= truth


# -- E: exceptions on legal input ----------------------------------------------------------
@pytest.mark.parametrize(("mu", "a"), [(1.0, 1000.0), (800.0, 2.0), (3000.0, 0.3)])
def test_laplace_renyi_large_arguments_finite(mu: float, a: float) -> None:
    v = LaplacePair(mu=mu).renyi(alpha=a)
    assert v >= _laplace_renyi(mu, a) * (1 - 1e-12)


def test_randomized_response_pair_huge_categories() -> None:
    # k = 2^60 categories, p = 1/2: H_{e^1} = (p - e r)_+ + (r - e p)_+ = p - e r > 0
    v = RandomizedResponsePair(p_truth=0.5, categories=2**60).hockey_stick(epsilon=1.0)
    r = (1 - mp.mpf("0.5")) / (2**60 - 1)
    assert v >= mp.mpf("0.5") - mp.e * r - mp.mpf(1e-15)


def test_tensor_huge_loss_step_no_overflow() -> None:
    curve = fdp.tensor(fdp.laplace(mu=1.0), fdp.gdp(1.0), loss_step=1e300)
    # any valid answer is at least the Laplace factor's own profile at eps = 1 (0 here) and
    # at most 1; the point is that it must not raise
    assert 0.0 <= curve.delta(1.0) <= 1.0


def test_pld_huge_interval_no_overflow() -> None:
    acc = PldAccountant(value_discretization_interval=1e300)
    acc.compose(LaplaceEvent(noise_multiplier=1.0)).compose(GaussianEvent(noise_multiplier=1.0))
    # the Laplace factor alone needs eps >= 1 + 2 ln(1 - 1e-6) at delta = 1e-6
    assert acc.get_epsilon(1e-6) >= 1.0 + 2.0 * math.log1p(-1e-6)


def test_laplace_tradeoff_at_zero_is_one() -> None:
    # T(Lap(0, 1), Lap(mu, 1))(0) = 1 for every mu (no outcome has P = 0); e^-mu underflows
    # beyond mu ~ 745 and the middle branch then evaluates 0 / 0
    with np.errstate(invalid="ignore"):
        val = fdp.laplace(mu=746.0)(np.array([0.0]))
    assert val[0] == 1.0
