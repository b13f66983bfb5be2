"""The pmfs and pdfs stated in the samplers' docstrings are proper distributions and agree with
their derivations.

* each docstring still states the formula tested here (so a changed docstring fails loudly);
* continuous densities integrate to 1 (``scipy.integrate.quad``);
* discrete pmfs sum to 1 (``math.fsum`` over a range holding all but < 1e-15 of the mass);
* the lattice-noise pmfs (``rint(t L)``, ``rint(sigma N)``) equal the integral of the continuous
  density over each rounding cell ``[(k - 1/2), (k + 1/2)]``, computed with mpmath at 50 digits;
* the discrete Laplace pmf ``tanh(1/(2t)) exp(-|k|/t)`` equals the law of the difference of the two
  geometrics the docstring says it samples;
* the fast Bernoulli follows its stated rule ``P(True) = ceil(p 2**53) / 2**53`` exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mpmath
import numpy as np
import pytest
from scipy import integrate

from dpkit import noise


@pytest.mark.parametrize(
    ("sampler", "fragments"),
    [
        (noise.laplace, ["exp(-|x| / b) / (2 b)"]),
        (noise.gaussian, ["exp(-x^2 / (2 sigma^2)) / (sigma sqrt(2 pi))"]),
        (noise.exponential, ["exp(-x / scale) / scale"]),
        (noise.gumbel, ["exp(-exp(-x / scale))"]),
        (noise.geometric, ["(1 - p)^k p"]),
        (noise.discrete_laplace, ["tanh(1/(2t)) exp(-|k| / t)"]),
        (noise.discrete_gaussian, ["exp(-k^2 / (2 sigma^2)) / sum_j exp(-j^2 / (2 sigma^2))"]),
        (noise.laplace_lattice_noise, ["P(0) = 1 - exp(-1/(2t))", "sinh(1/(2t)) exp(-|k|/t)"]),
        (noise.gaussian_lattice_noise, ["Phi((k + 1/2)/sigma) - Phi((k - 1/2)/sigma)"]),
        (noise.bernoulli, ["ceil(p 2**53) / 2**53"]),
    ],
)
def test_docstring_states_the_tested_formula(
    sampler: Callable[..., object], fragments: list[str]
) -> None:
    doc = " ".join((sampler.__doc__ or "").split())
    for fragment in fragments:
        assert fragment in doc, (sampler.__name__, fragment)


# ---------------------------------------------------------------------------------------------
# Continuous densities integrate to 1
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("b", [0.01, 1.0, 2.5, 1e3])
def test_laplace_density_integrates_to_one(b: float) -> None:
    def pdf(x: float) -> float:
        return math.exp(-abs(x) / b) / (2 * b)

    left, _ = integrate.quad(pdf, -np.inf, 0.0, epsabs=1e-13)
    right, _ = integrate.quad(pdf, 0.0, np.inf, epsabs=1e-13)
    assert left + right == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("sigma", [0.01, 0.7, 3.0, 1e3])
def test_gaussian_density_integrates_to_one(sigma: float) -> None:
    def pdf(x: float) -> float:
        return math.exp(-x * x / (2 * sigma * sigma)) / (sigma * math.sqrt(2 * math.pi))

    total, _ = integrate.quad(pdf, -40 * sigma, 40 * sigma, points=[0.0], limit=200)
    assert total == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("scale", [0.01, 1.0, 3.0, 1e3])
def test_exponential_density_integrates_to_one(scale: float) -> None:
    total, _ = integrate.quad(lambda x: math.exp(-x / scale) / scale, 0.0, np.inf)
    assert total == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("scale", [0.5, 1.0, 1.5, 10.0])
def test_gumbel_density_integrates_to_one_and_matches_cdf(scale: float) -> None:
    def cdf(x: float) -> float:
        return math.exp(-math.exp(-x / scale))

    def pdf(x: float) -> float:  # d/dx of the stated CDF
        z = x / scale
        return math.exp(-z - math.exp(-z)) / scale

    total, _ = integrate.quad(pdf, -10 * scale, 60 * scale, points=[0.0], limit=200)
    assert total == pytest.approx(1.0, abs=1e-10)
    part, _ = integrate.quad(pdf, -10 * scale, 2.0 * scale)
    assert part == pytest.approx(cdf(2.0 * scale) - cdf(-10 * scale), abs=1e-12)


# ---------------------------------------------------------------------------------------------
# Discrete pmfs sum to 1
# ---------------------------------------------------------------------------------------------
def _two_sided_sum(pmf: Callable[[int], float], width: int) -> float:
    return math.fsum(pmf(k) for k in range(-width, width + 1))


@pytest.mark.parametrize("t", [0.05, 0.5, 1.0, 3.0, 40.0, 1000.0])
def test_discrete_laplace_pmf_sums_to_one(t: float) -> None:
    def pmf(k: int) -> float:
        return math.tanh(1 / (2 * t)) * math.exp(-abs(k) / t)

    assert _two_sided_sum(pmf, int(40 * t) + 40) == pytest.approx(1.0, abs=1e-13)


@pytest.mark.parametrize("t", [0.05, 0.5, 1.0, 3.0, 4096.0, 16383.0])
def test_laplace_lattice_pmf_sums_to_one(t: float) -> None:
    def pmf(k: int) -> float:
        if k == 0:
            return -math.expm1(-1 / (2 * t))
        return math.sinh(1 / (2 * t)) * math.exp(-abs(k) / t)

    assert _two_sided_sum(pmf, int(40 * t) + 40) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("sigma", [0.1, 0.6, 3.0, 4096.0])
def test_gaussian_lattice_pmf_sums_to_one(sigma: float) -> None:
    ks = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41)
    from scipy.stats import norm

    p = norm.cdf((ks + 0.5) / sigma) - norm.cdf((ks - 0.5) / sigma)
    assert math.fsum(p) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("p", [1e-3, 0.3, 0.9, 1.0])
def test_geometric_pmf_sums_to_one(p: float) -> None:
    if p == 1.0:
        mass = 1.0  # P(0) = p = 1
    else:
        width = int(40 / -math.log1p(-p)) + 10
        mass = math.fsum((1 - p) ** k * p for k in range(width))
    assert mass == pytest.approx(1.0, abs=1e-13)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 3.0, 50.0])
def test_discrete_gaussian_normaliser_matches_jacobi_theta(sigma: float) -> None:
    # sum_j exp(-j^2 / (2 sigma^2)) = theta_3(0, exp(-1/(2 sigma^2))): an independent check of the
    # normalising constant that makes the stated pmf sum to 1.
    with mpmath.workdps(40):
        q = mpmath.exp(-1 / (2 * mpmath.mpf(sigma) ** 2))
        direct = mpmath.fsum(
            mpmath.exp(-(mpmath.mpf(j) ** 2) / (2 * mpmath.mpf(sigma) ** 2))
            for j in range(-int(40 * sigma) - 40, int(40 * sigma) + 41)
        )
        assert mpmath.almosteq(direct, mpmath.jtheta(3, 0, q), 1e-25)


# ---------------------------------------------------------------------------------------------
# Lattice pmfs match their derivation: P(k) = integral of the density over the rounding cell
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [0.3, 1.0, 3.0, 4096.0])
@pytest.mark.parametrize("k", [0, 1, -1, 2, -7, 25])
def test_laplace_lattice_pmf_is_the_rounded_laplace(t: float, k: int) -> None:
    tt = mpmath.mpf(t)

    def density(x: mpmath.mpf) -> mpmath.mpf:  # density of t L, L ~ Laplace(0, 1)
        return mpmath.exp(-abs(x) / tt) / (2 * tt)

    with mpmath.workdps(50):
        lo, hi = mpmath.mpf(k) - mpmath.mpf(1) / 2, mpmath.mpf(k) + mpmath.mpf(1) / 2
        exact = mpmath.quad(density, [lo, 0, hi] if k == 0 else [lo, hi])
    stated = (
        (1 - math.exp(-1 / (2 * t))) if k == 0 else (math.sinh(1 / (2 * t)) * math.exp(-abs(k) / t))
    )
    assert float(exact) == pytest.approx(stated, rel=1e-12)


@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.0, 4096.0])
@pytest.mark.parametrize("k", [0, 1, -1, 3, -5])
def test_gaussian_lattice_pmf_is_the_rounded_gaussian(sigma: float, k: int) -> None:
    s = mpmath.mpf(sigma)

    def density(x: mpmath.mpf) -> mpmath.mpf:
        return mpmath.npdf(x, 0, s)

    with mpmath.workdps(50):
        lo, hi = mpmath.mpf(k) - mpmath.mpf(1) / 2, mpmath.mpf(k) + mpmath.mpf(1) / 2
        exact = mpmath.quad(density, [lo, hi])
    from scipy.stats import norm

    stated = norm.cdf((k + 0.5) / sigma) - norm.cdf((k - 0.5) / sigma)
    assert float(exact) == pytest.approx(stated, rel=1e-9)


@pytest.mark.parametrize("t", [0.5, 1.0, 3.0, 40.0])
def test_discrete_laplace_is_difference_of_geometrics(t: float) -> None:
    # floor(t E) is geometric: P(G = g) = (1 - q) q^g with q = exp(-1/t). The law of G1 - G2,
    # summed explicitly, must equal the docstring's tanh(1/(2t)) exp(-|k|/t).
    q = math.exp(-1 / t)
    width = int(60 * t) + 60
    for k in (0, 1, -1, 4, -13):
        conv = math.fsum((1 - q) * q ** (g + k) * (1 - q) * q**g for g in range(max(0, -k), width))
        stated = math.tanh(1 / (2 * t)) * math.exp(-abs(k) / t)
        assert conv == pytest.approx(stated, rel=1e-12)


class _FixedUniform:
    """A stand-in source whose ``uniform`` returns chosen multiples of 2**-53."""

    def __init__(self, ks: list[int]) -> None:
        self.values = np.array(ks, dtype=np.float64) * 2.0**-53

    def uniform(self, size: int) -> np.ndarray:
        assert size == self.values.size
        return self.values


@pytest.mark.parametrize("p", [0.3, 1 / 3, 2.0**-53, 1 - 2.0**-53, 0.5])
def test_bernoulli_follows_its_stated_rule(p: float) -> None:
    # P(True) = ceil(p 2**53) / 2**53: exactly the k < p 2**53 among k in {0..2**53 - 1}.
    c = math.ceil(p * 2**53)
    ks = [0, c - 1, c, min(c + 1, 2**53 - 1), 2**53 - 1]
    out = noise.bernoulli(_FixedUniform(ks), p=p, size=len(ks))  # type: ignore[arg-type]
    assert out.tolist() == [k < c for k in ks]


def test_bernoulli_end_points() -> None:
    ks = [0, 1, 2**52, 2**53 - 1]
    assert not noise.bernoulli(_FixedUniform(ks), p=0.0, size=4).any()  # type: ignore[arg-type]
    assert noise.bernoulli(_FixedUniform(ks), p=1.0, size=4).all()  # type: ignore[arg-type]
