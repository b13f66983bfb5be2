"""Clopper-Pearson bounds and the conversions to epsilon and mu lower bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpkit.audit import (
    clopper_pearson,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
    mu_lower_bound,
)
from dpkit.errors import PrivacyParameterError


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (1, 1000), (500, 1000)])
def test_clopper_pearson_matches_scipy_exact_interval(k: int, n: int) -> None:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    lo, hi = clopper_pearson(k, n, confidence=0.95)
    assert float(lo) == pytest.approx(ci.low, abs=1e-12)
    assert float(hi) == pytest.approx(ci.high, abs=1e-12)


def test_one_sided_bounds_closed_forms() -> None:
    # k = 0: upper bound solves (1 - p)^n = 1 - level, so p = 1 - (1 - level)^(1/n).
    n, level = 1000, 0.99
    assert float(clopper_pearson_upper(0, n, level=level)) == pytest.approx(
        1.0 - (1.0 - level) ** (1.0 / n), rel=1e-10
    )
    # k = n: lower bound solves p^n = 1 - level.
    assert float(clopper_pearson_lower(n, n, level=level)) == pytest.approx(
        (1.0 - level) ** (1.0 / n), rel=1e-10
    )
    assert float(clopper_pearson_upper(n, n, level=level)) == 1.0
    assert float(clopper_pearson_lower(0, n, level=level)) == 0.0


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5000), frac=st.floats(0, 1), level=st.floats(0.5, 0.999999))
def test_upper_bound_is_the_binomial_tail_quantile(n: int, frac: float, level: float) -> None:
    # Defining property of the exact upper bound p_u (k < n): P[Bin(n, p_u) <= k] = 1 - level.
    k = min(int(frac * n), n - 1)
    pu = float(clopper_pearson_upper(k, n, level=level))
    assert stats.binom.cdf(k, n, pu) == pytest.approx(1.0 - level, rel=1e-6, abs=1e-12)
    assert float(clopper_pearson_lower(k, n, level=level)) <= k / n <= pu


def test_vectorised_and_validated() -> None:
    up = clopper_pearson_upper(np.array([0, 5, 10]), 10, level=0.9)
    assert up.shape == (3,) and np.all(np.diff(up) > 0)
    for bad in (math.nan, 0.0, 1.0, True, "0.9"):
        with pytest.raises(PrivacyParameterError):
            clopper_pearson_upper(1, 10, level=bad)
    with pytest.raises(ValueError):
        clopper_pearson_upper(11, 10, level=0.9)
    with pytest.raises(ValueError):
        clopper_pearson_upper(1.5, 10, level=0.9)


def test_epsilon_lower_bound_formula() -> None:
    # eps >= max(ln((1 - delta - a) / b), ln((1 - delta - b) / a)) (Kairouz et al. 2015).
    a, b = 0.1, 0.3
    expected = max(math.log(0.9 / 0.3), math.log(0.7 / 0.1))
    assert float(epsilon_lower_bound(a, b)) == pytest.approx(expected)
    assert float(epsilon_lower_bound(a, b, delta=0.05)) == pytest.approx(
        max(math.log(0.85 / 0.3), math.log(0.65 / 0.1))
    )
    # symmetric, zero for a random guess, infinite for a perfect test
    assert float(epsilon_lower_bound(b, a)) == pytest.approx(expected)
    assert float(epsilon_lower_bound(0.4, 0.6)) == 0.0
    assert float(epsilon_lower_bound(0.0, 0.5)) == math.inf
    assert float(epsilon_lower_bound(0.7, 0.7)) == 0.0
    with pytest.raises(PrivacyParameterError):
        epsilon_lower_bound(a, b, delta=math.nan)


def test_epsilon_bound_is_tight_on_the_f_eps_delta_curve() -> None:
    # Points on f_{eps,delta} give back eps exactly (Dong, Roth and Su 2022, Proposition 2.5).
    eps, delta = 1.3, 1e-3
    for a in (0.01, 0.05, 0.1):
        b = 1 - delta - math.exp(eps) * a
        assert float(epsilon_lower_bound(a, b, delta=delta)) == pytest.approx(eps, rel=1e-12)


def test_mu_lower_bound_inverts_g_mu() -> None:
    mu = 1.7
    for a in (1e-6, 0.01, 0.3):
        b = stats.norm.cdf(stats.norm.ppf(1 - a) - mu)
        assert float(mu_lower_bound(a, b)) == pytest.approx(mu, rel=1e-9)
        assert float(mu_lower_bound(b, a)) == pytest.approx(mu, rel=1e-9)
    assert float(mu_lower_bound(0.5, 0.6)) == 0.0
