"""The integer-noise intervals have one home: the mechanisms; the analytics pricing uses them.

Widths are checked against the exact tail of the discrete Gaussian computed in mpmath (a direct
sum of the pmf below sigma 1000; Euler-Maclaurin with three Bernoulli terms above, whose
remainder is far below the 1e-6 relative tolerance used) and of the discrete Laplace (closed
form ``2 q^(h+1) / (1 + q)``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import mpmath
import pytest

from dpkit.analytics._pricing import Noise
from dpkit.mechanisms import DiscreteGaussian, DiscreteLaplace


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 40 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mpmath.workdps(40):
        yield


def _gauss_tail(sigma: float, h: int) -> mpmath.mpf:
    """Exact ``P(|Z| > h)`` for the discrete Gaussian of parameter sigma."""
    sg = mpmath.mpf(sigma)
    s2 = 2 * sg**2
    # normaliser by Poisson summation: sigma sqrt(2 pi) theta_3(0, e^(-2 pi^2 sigma^2))
    norm = (
        sg * mpmath.sqrt(2 * mpmath.pi) * mpmath.jtheta(3, 0, mpmath.exp(-2 * mpmath.pi**2 * sg**2))
    )
    a = h + 1
    if sigma < 1000:
        m = int(40 * sigma) + 10
        num = mpmath.fsum(mpmath.exp(-(mpmath.mpf(j) ** 2) / s2) for j in range(a, max(m, a + 1)))
    else:
        c = 1 / (sg * mpmath.sqrt(2))
        x = a * c
        f = mpmath.exp(-x * x)
        num = sg * mpmath.sqrt(mpmath.pi / 2) * mpmath.erfc(x) + f / 2
        for k in range(1, 4):
            n = 2 * k - 1
            num -= (
                mpmath.bernoulli(2 * k)
                / mpmath.factorial(2 * k)
                * (-c) ** n
                * mpmath.hermite(n, x)
                * f
            )
    return 2 * num / norm


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.7, 50.0, 200.0])
@pytest.mark.parametrize("alpha", [0.05, 1e-6])
def test_gaussian_half_width_is_the_exact_smallest(sigma: float, alpha: float) -> None:
    h = DiscreteGaussian(sigma=sigma, sensitivity=1).confidence_half_width(alpha)
    assert _gauss_tail(sigma, h) <= alpha  # never too narrow
    assert h == 0 or _gauss_tail(sigma, h - 1) > alpha * (1 + 1e-9)  # and no wider


@pytest.mark.parametrize("sigma", [1000.0, 12345.0, 1e6, 2.0**40])
@pytest.mark.parametrize("alpha", [0.05, 1e-4])
def test_gaussian_half_width_large_sigma_is_certified_and_within_one_step(
    sigma: float, alpha: float
) -> None:
    h = DiscreteGaussian(sigma=sigma, sensitivity=1).confidence_half_width(alpha)
    assert _gauss_tail(sigma, h) <= alpha
    # at most one step wider than the exact smallest, plus the libm margin (a relative 1e-12
    # on the tail: a few steps at sigma = 2**40, a relative 1e-11 of the width)
    assert _gauss_tail(sigma, h - 2 - int(sigma * 1e-11)) > alpha


def test_the_exact_reference_catches_a_narrow_or_a_loose_width() -> None:
    # Companion: the sub-Gaussian width the mechanism used to give, ceil(sigma sqrt(2 ln(2 /
    # alpha))), is valid but loose (the reference refuses it as "no wider"), and one step less
    # than the exact smallest is refused as too narrow.
    import math

    sigma, alpha = 10.0, 0.05
    h = DiscreteGaussian(sigma=sigma, sensitivity=1).confidence_half_width(alpha)
    loose = math.ceil(sigma * math.sqrt(2 * math.log(2 / alpha)))
    assert (h, loose) == (20, 28)
    assert _gauss_tail(sigma, loose - 1) <= alpha  # the loose width is not the smallest
    assert _gauss_tail(sigma, h - 1) > alpha  # one step narrower misses too often


@pytest.mark.parametrize("scale", [0.3, 2.5, 400.0, 9000.0, 2.0**40])
@pytest.mark.parametrize("alpha", [0.05, 1e-6])
def test_laplace_half_width_is_the_exact_smallest(scale: float, alpha: float) -> None:
    h = DiscreteLaplace(scale=scale, sensitivity=1).confidence_half_width(alpha)
    q = mpmath.exp(-1 / mpmath.mpf(scale))

    def tail(k: int) -> mpmath.mpf:
        return 2 * q ** (k + 1) / (1 + q)

    assert tail(h) <= alpha
    assert h == 0 or tail(h - 1) > alpha * (1 - 1e-12)


@pytest.mark.parametrize("scale", [0.3, 1.0, 3.7, 50.0, 999.0, 1000.0, 12345.0, 1e6, 2.0**45])
@pytest.mark.parametrize("alpha", [0.2, 0.05, 1e-3, 1e-9])
def test_pricing_noise_and_mechanisms_give_the_same_intervals(scale: float, alpha: float) -> None:
    assert Noise("discrete_gaussian", scale).halfwidth(alpha) == DiscreteGaussian(
        sigma=scale, sensitivity=1
    ).confidence_half_width(alpha)
    assert Noise("discrete_laplace", scale).halfwidth(alpha) == DiscreteLaplace(
        scale=scale, sensitivity=1
    ).confidence_half_width(alpha)


def test_gaussian_half_width_extremes() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow/underflow warnings from the tail sums
        assert DiscreteGaussian(sigma=2.0**-500, sensitivity=1).confidence_half_width(1e-9) == 0
        tiny = DiscreteGaussian(sigma=3.0, sensitivity=1).confidence_half_width(1e-300)
    # P(|Z| > h) <= 1e-300 needs h near sigma sqrt(2 ln(2e300)) = 111.6; the bound is exact
    # there up to a step or two
    assert _gauss_tail(3.0, tiny) <= mpmath.mpf("1e-300")
    assert _gauss_tail(3.0, tiny - 3) > mpmath.mpf("1e-300")
