"""Claims as trade-off functions and the "violated only when proven" rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpkit.audit import Claim, as_claim, epsilon_lower_bound, mu_lower_bound
from dpkit.errors import PrivacyParameterError


def test_f_eps_delta_values() -> None:
    # f_{eps,delta}(a) = max(0, 1 - delta - e^eps a, e^-eps (1 - delta - a))
    c = Claim.approx(epsilon=1.0, delta=0.01)
    a = np.array([0.0, 0.05, 0.3, 0.99, 1.0])
    e = math.e
    want = np.maximum.reduce([np.zeros(5), 1 - 0.01 - e * a, (1 - 0.01 - a) / e])
    np.testing.assert_allclose(c.beta(a), want, rtol=1e-12, atol=1e-15)
    assert Claim.pure(epsilon=1.0).beta(np.array([0.0]))[0] == 1.0


def test_g_mu_values() -> None:
    c = Claim.gdp(mu=0.8)
    a = np.array([1e-9, 0.1, 0.5, 0.9])
    np.testing.assert_allclose(c.beta(a), stats.norm.cdf(stats.norm.ppf(1 - a) - 0.8), rtol=1e-10)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_refutation_agrees_with_the_epsilon_bound(eps: float) -> None:
    c = Claim.approx(epsilon=eps, delta=1e-4)
    rng = np.random.default_rng(0)
    for a, b in rng.uniform(0, 1, size=(200, 2)):
        lb = float(epsilon_lower_bound(a, b, delta=1e-4))
        assert c.refuted_by(a, b) == (lb > eps)
        assert (float(c.margin(a, b)) > 0) == (lb > eps) or abs(lb - eps) < 1e-9


def test_gdp_refutation_agrees_with_the_mu_bound() -> None:
    c = Claim.gdp(mu=1.0)
    rng = np.random.default_rng(1)
    for a, b in rng.uniform(0, 1, size=(200, 2)):
        assert c.refuted_by(a, b) == (float(mu_lower_bound(a, b)) > 1.0)


def test_general_tradeoff_claim() -> None:
    def f(alpha: np.ndarray) -> np.ndarray:
        return np.clip(1 - 2 * alpha, 0, 1)

    c = Claim.tradeoff(f, label="1-2a")
    assert c.refuted_by(0.1, 0.5)  # 0.5 < f(0.1) = 0.8
    assert not c.refuted_by(0.1, 0.85)
    assert c.refuted_by(0.5, 0.1)  # mirrored test: alpha_u = 0.5 < f(beta_u) = f(0.1) = 0.8
    assert as_claim(f) is not None and as_claim(f).kind == "tradeoff"  # type: ignore[union-attr]


def test_claims_validate_their_parameters() -> None:
    for bad in (math.nan, -1.0, math.inf, True, None, "1"):
        with pytest.raises(PrivacyParameterError):
            Claim.pure(epsilon=bad)  # type: ignore[arg-type]
        with pytest.raises(PrivacyParameterError):
            Claim.gdp(mu=bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        Claim.approx(epsilon=1.0, delta=1.0)
    with pytest.raises(TypeError):
        Claim.pure(1.0)  # type: ignore[misc]
    with pytest.raises(PrivacyParameterError):
        as_claim(1.0)
    with pytest.raises(PrivacyParameterError):
        Claim.tradeoff(lambda a: np.array([1.0]))  # wrong shape


def test_fdp_objects_are_claims() -> None:
    from dpkit import fdp

    assert as_claim(fdp.gdp(0.7)) == Claim.gdp(mu=0.7)
    assert as_claim(fdp.approx_dp(epsilon=1.0, delta=1e-3)) == Claim.approx(epsilon=1.0, delta=1e-3)
    lap = as_claim(fdp.laplace(mu=1.0))
    assert lap is not None and lap.kind == "tradeoff"
    a = np.linspace(0, 1, 11)
    np.testing.assert_allclose(lap.beta(a), fdp.laplace(mu=1.0)(a))


def test_direct_construction_is_validated() -> None:
    with pytest.raises(PrivacyParameterError):
        Claim(kind="epsilon_delta", label="x", epsilon=-1.0)
    with pytest.raises(PrivacyParameterError):
        Claim(kind="epsilon_delta", label="x", epsilon=1.0, delta=math.nan)
    with pytest.raises(PrivacyParameterError):
        Claim(kind="gdp", label="x")
    with pytest.raises(PrivacyParameterError):
        Claim(kind="bogus", label="x")
