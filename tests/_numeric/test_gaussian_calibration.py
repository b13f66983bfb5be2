"""The analytic Gaussian calibration never overspends delta, even where the profile cancels."""

from __future__ import annotations

import mpmath
import pytest

from dpkit._numeric.gaussian import gaussian_delta_up, gaussian_mu_for

CASES = [
    (1e-4, 1e-300),
    (3.8e-6, 1e-20),
    (0.01, 1e-200),
    (1.0, 1e-5),
    (1e-3, 1e-300),
    (10.0, 1e-10),
    (0.1, 1e-6),
    (1e-5, 1e-50),
    (50.0, 1e-12),
    (0.5, 0.3),
]


def _exact_delta(eps: float, mu: float) -> mpmath.mpf:
    mpmath.mp.dps = 80
    e, m = mpmath.mpf(eps), mpmath.mpf(mu)
    return mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)


@pytest.mark.parametrize(("eps", "delta"), CASES)
def test_calibrated_mu_is_safe_and_tight(eps: float, delta: float) -> None:
    mu = gaussian_mu_for(eps, delta)
    exact = _exact_delta(eps, mu)
    assert exact <= delta  # never overspends
    assert exact >= delta * (1 - 1e-9)  # and wastes almost nothing
    assert gaussian_delta_up(eps, mu) >= exact  # the certificate is an upper bound
