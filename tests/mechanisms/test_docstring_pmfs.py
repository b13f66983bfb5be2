"""The noise distributions stated in the mechanisms' docstrings are proper and are the ones the
statistical tests check against (``tests/statistical/test_mechanisms.py``)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from dpkit.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    ExponentialMechanism,
    Gaussian,
    Laplace,
)


def _doc(obj: object) -> str:
    return " ".join((obj.__doc__ or "").split())


def test_docstrings_state_the_distributions() -> None:
    assert "P(0) = 1 - exp(-s/(2b))" in _doc(Laplace)
    assert "P(ks) = sinh(s/(2b)) exp(-|k| s / b)" in _doc(Laplace)
    assert "N(0, sigma^2)" in _doc(Gaussian)
    assert "P(Z = k) = tanh(1/(2t)) exp(-|k| / t)" in _doc(DiscreteLaplace)
    assert "P(Z = k) ∝ exp(-k^2 / (2 sigma^2))" in _doc(DiscreteGaussian)
    assert "∝ exp(epsilon u(r) / (2 Delta))" in _doc(ExponentialMechanism)


@pytest.mark.parametrize(
    "mech",
    [
        Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0),
        Laplace.from_epsilon(epsilon=0.01, sensitivity=3.0),
        Laplace.from_scale(scale=1e-6, sensitivity=1e-6),
    ],
    ids=["eps1", "eps0.01", "tiny"],
)
def test_laplace_lattice_pmf_sums_to_one_and_is_the_rounded_laplace(mech: Laplace) -> None:
    b, s = mech.scale, mech.granularity
    r = s / b  # P(0) = 1 - exp(-r/2), P(ks) = sinh(r/2) exp(-|k| r)
    # Closed-form sum: P(0) + 2 sinh(r/2) sum_{k>=1} e^{-k r} = P(0) + 2 sinh(r/2) / (e^r - 1).
    with mpmath.workdps(40):
        rr = mpmath.mpf(r)
        total = (1 - mpmath.exp(-rr / 2)) + 2 * mpmath.sinh(rr / 2) / mpmath.expm1(rr)
        assert mpmath.almosteq(total, 1, 1e-30)
        # P(ks) is the Laplace(0, b) mass of the rounding cell [(k - 1/2)s, (k + 1/2)s].
        for k in (1, 5, -3):
            cell = (
                mpmath.exp(-(abs(k) - mpmath.mpf(1) / 2) * rr)
                - mpmath.exp(-(abs(k) + mpmath.mpf(1) / 2) * rr)
            ) / 2
            stated = mpmath.sinh(rr / 2) * mpmath.exp(-abs(k) * rr)
            assert mpmath.almosteq(cell, stated, 1e-30)


@pytest.mark.parametrize("eps", [0.001, 0.5, 3.0])
def test_discrete_laplace_pmf_sums_to_one(eps: float) -> None:
    t = DiscreteLaplace.from_epsilon(epsilon=eps, sensitivity=1).scale
    q = math.exp(-1 / t)
    # tanh(1/(2t)) (1 + 2 q / (1 - q)) = tanh(1/(2t)) (1 + q) / (1 - q) = 1.
    assert math.tanh(1 / (2 * t)) * (1 + q) / (1 - q) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("sigma", [0.2, 2.0, 9000.0])
def test_discrete_gaussian_is_normalisable(sigma: float) -> None:
    DiscreteGaussian.from_sigma(sigma=sigma, sensitivity=1)
    ks = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41, dtype=np.float64)
    w = np.exp(-ks * ks / (2 * sigma * sigma))
    p = w / math.fsum(w)
    assert math.fsum(p) == pytest.approx(1.0, abs=1e-14)
    assert p[-1] < 1e-300  # the truncation lost nothing


def test_exponential_mechanism_probabilities_match_the_docstring() -> None:
    scores = np.array([0.0, 1.0, 2.0, -3.0])
    for monotonic, c in ((False, 2.0), (True, 1.0)):
        m = ExponentialMechanism(epsilon=0.7, sensitivity=2.0, monotonic=monotonic)
        w = np.exp(0.7 * scores / (c * 2.0))
        assert np.allclose(m.probabilities(scores), w / w.sum(), rtol=1e-9)
