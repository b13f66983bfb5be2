"""The standard deviation a release reports for its discrete Laplace noise is exact to a few
ulps at every scale the pricing allows (up to ``2^52`` steps), against mpmath.

``Noise.std`` is ``sqrt(2 q) / (1 - q)`` with ``q = e^(-1/t)``. Computed as ``1.0 - q`` the
denominator kept only a few significant bits near ``t = 2^50``, the usual scale of a piloted
mean's pilot sum (a hundred times the main sum's, whose step is about ``2^-44`` of its noise):
the std shown by ``summarize()`` and read by the pilot's choice was 15-20% off there (found by
the red team of the pilot; ``1 - q`` is now ``-expm1(-1/t)``).
"""

from __future__ import annotations

import mpmath
import pytest

from dpkit.analytics._pricing import Noise

SCALES = (0.3, 1.0, 7.5, 1e4, 2.0**30, 2.0**44 * 3.3, 2.0**50 * 1.7, 2840988786581586.5, 2.0**52)


@pytest.mark.parametrize("t", SCALES)
def test_the_discrete_laplace_std_matches_its_closed_form(t: float) -> None:
    with mpmath.workdps(60):
        q = mpmath.exp(-1 / mpmath.mpf(t))
        exact = mpmath.sqrt(2 * q) / (1 - q)
    got = Noise("discrete_laplace", t).std
    assert abs(got - float(exact)) <= 1e-13 * float(exact)


def test_the_gaussian_std_is_its_sigma() -> None:
    assert Noise("discrete_gaussian", 2.0**50 * 1.7).std == 2.0**50 * 1.7
