"""G_mu and its (eps, delta) duality against mpmath at 50 digits and dp-accounting."""

from __future__ import annotations

import math
from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit._numeric.gaussian import gaussian_delta
from dpkit.errors import PrivacyParameterError
from dpkit.fdp import gdp, mu_from_epsilon_delta


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 50 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mp.workdps(50):
        yield


def _ref_delta(eps: float, mu: float) -> mp.mpf:
    e, m = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-e / m + m / 2) - mp.e**e * mp.ncdf(-e / m - m / 2)


CASES = [
    (0.0, 1.0),
    (1.0, 1.0),
    (3.0, 0.5),
    (10.0, 2.0),
    (50.0, 3.0),
    (24.4, 0.73),
    (5.0, 10.0),
    (0.01, 1e-3),
    (1e-6, 1e-7),
    (2.0, 0.05),
    (0.3, 0.2),
    (-1.0, 1.0),
    (-5.0, 0.5),
    (200.0, 20.0),
    (1e-8, 1e-6),
    (40.0, 1.5),
    (0.5, 45.0),
    (7.0, 0.49),
    (7.0, 0.51),
]


@pytest.mark.parametrize(("eps", "mu"), CASES)
def test_delta_matches_mpmath(eps: float, mu: float) -> None:
    ref = _ref_delta(eps, mu)
    val = gaussian_delta(eps, mu)
    if ref < mp.mpf("1e-300"):
        assert val <= 1e-290
        return
    assert abs(mp.mpf(val) / ref - 1) < 1e-12
    up = gdp(mu).delta(eps)
    assert mp.mpf(up) >= ref  # rounded up: a true upper bound
    assert up <= val * (1 + 2e-11)


@settings(max_examples=300, deadline=None)
@given(
    log_mu=st.floats(min_value=-6.0, max_value=1.6),
    eps=st.floats(min_value=-3.0, max_value=60.0),
)
def test_delta_matches_mpmath_random(log_mu: float, eps: float) -> None:
    mu = 10.0**log_mu
    ref = _ref_delta(eps, mu)
    if ref < mp.mpf("1e-300"):
        return
    assert abs(mp.mpf(gaussian_delta(eps, mu)) / ref - 1) < 1e-12
    assert mp.mpf(gdp(mu).delta(eps)) >= ref


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 3.0])
def test_delta_matches_dp_accounting_pld(mu: float) -> None:
    dist = pld.from_gaussian_mechanism(1.0 / mu, value_discretization_interval=1e-4)
    for eps in (0.0, 0.5, 1.0, 2.0):
        ours = gdp(mu).delta(eps)
        theirs = dist.get_delta_for_epsilon(eps)
        # connect-the-dots is exact at grid epsilons up to its tail truncation
        assert abs(theirs - ours) <= 1e-9 * ours + 1e-15


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 2.0, 6.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 1e-3, 0.1])
def test_epsilon_inverts_delta_and_is_safe(mu: float, delta: float) -> None:
    g = gdp(mu)
    eps = g.epsilon(delta)
    assert eps >= 0.0
    assert g.delta(eps) <= delta
    if eps > 0:
        # one step smaller already violates delta (tight to ~1e-12 relative)
        smaller = eps * (1 - 1e-9)
        assert _ref_delta(smaller, mu) > mp.mpf(delta) * (1 - 1e-6)


def test_epsilon_zero_when_delta_large() -> None:
    g = gdp(0.5)
    assert g.epsilon(g.delta(0.0)) == 0.0


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0, 8.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-5, 0.01])
def test_mu_from_epsilon_delta_is_largest_safe(eps: float, delta: float) -> None:
    mu = mu_from_epsilon_delta(epsilon=eps, delta=delta)
    assert gdp(mu).delta(eps) <= delta  # safe
    assert _ref_delta(eps, mu * (1 + 1e-8)) > mp.mpf(delta) * (1 - 1e-6)  # and tight


def test_tradeoff_values_match_mpmath() -> None:
    for mu in (0.1, 1.0, 4.0):
        for a in (0.0, 1e-200, 1e-20, 1e-5, 0.3, 0.5, 0.9, 1 - 1e-12, 1.0):
            got = float(gdp(mu)(a))
            if a == 0.0:
                ref = mp.mpf(1)
            elif a == 1.0:
                ref = mp.mpf(0)
            else:
                ref = mp.ncdf(-mp.sqrt(2) * mp.erfinv(2 * mp.mpf(a) - 1) - mu)
            assert abs(mp.mpf(got) - ref) <= 1e-13 * abs(ref) + 1e-300


def test_validation() -> None:
    with pytest.raises(PrivacyParameterError):
        gdp(float("nan"))
    with pytest.raises(PrivacyParameterError):
        gdp(-1.0)
    with pytest.raises(PrivacyParameterError):
        gdp(True)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        gdp(1.0).delta(float("nan"))
    with pytest.raises(PrivacyParameterError):
        gdp(1.0).epsilon(1.5)
    with pytest.raises(PrivacyParameterError):
        mu_from_epsilon_delta(epsilon=-1.0, delta=1e-5)
    with pytest.raises(PrivacyParameterError):
        mu_from_epsilon_delta(epsilon=1.0, delta=0.0)
    with pytest.raises(TypeError):
        mu_from_epsilon_delta(1.0, 1e-5)  # type: ignore[misc]
    with pytest.raises(PrivacyParameterError):
        gdp(1.0)(np.asarray([0.5, 1.5]))
    with pytest.raises(PrivacyParameterError):
        gdp(1.0)(np.asarray([np.nan]))


def test_accepts_mu_positionally_and_by_keyword() -> None:
    assert gdp(1.0).mu == gdp(mu=1.0).mu == 1.0
    assert math.isclose(gdp(2.0).delta(1.0), gdp(mu=2.0).delta(epsilon=1.0))
