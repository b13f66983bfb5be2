"""Tensor products: Gaussian law, exact discrete compositions, pessimism of the numeric path."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from dpkit.errors import PrivacyParameterError
from dpkit.fdp import (
    GaussianTradeOff,
    approx_dp,
    from_distributions,
    gdp,
    laplace,
    self_tensor,
    tensor,
)

X = np.linspace(0.0, 1.0, 4001)


@settings(max_examples=50, deadline=None)
@given(mus=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=6))
def test_gaussian_tensor_law(mus: list[float]) -> None:
    out = tensor(*[gdp(m) for m in mus])
    assert isinstance(out, GaussianTradeOff)
    total = sum(Fraction(m) ** 2 for m in mus)
    assert Fraction(out.mu) ** 2 >= total  # rounded up, checked exactly
    if total > Fraction(1e-300) ** 2:  # (subnormal mu have coarse ulps)
        assert float(Fraction(out.mu) ** 2 / total) <= 1 + 1e-15  # ... by about one ulp


@pytest.mark.parametrize("mu", [5e-324, 1e-200, 1e-160, 1e150])
def test_gaussian_tensor_extreme_mu(mu: float) -> None:
    # regression: the exact rounded-up square root must not underflow (it used to loop)
    out = tensor(gdp(mu), gdp(mu))
    assert isinstance(out, GaussianTradeOff)
    assert out.mu >= mu * math.sqrt(2) * (1 - 1e-15)
    assert out.mu == pytest.approx(mu * math.sqrt(2), rel=1e-15) or mu == 5e-324


@pytest.mark.parametrize("k", [1, 2, 7, 100])
def test_gaussian_self_tensor(k: int) -> None:
    out = self_tensor(gdp(0.7), k)
    assert isinstance(out, GaussianTradeOff)
    assert out.mu == pytest.approx(0.7 * math.sqrt(k), rel=1e-15)


def test_numeric_gaussian_tensor_is_a_close_lower_bound() -> None:
    a = gdp(1.0).lower_piecewise_linear()
    b = gdp(2.0).lower_piecewise_linear()
    num = tensor(a, b, loss_step=1e-3)
    exact = gdp(math.sqrt(5.0))
    assert np.all(num(X) <= exact(X) + 1e-15)
    assert np.max(exact(X) - num(X)) < 2e-3
    assert num.check_properties().ok


@pytest.mark.parametrize("mu", [0.1, 0.5, 2.0])
def test_exact_loss_laws_give_close_lower_bounds(mu: float) -> None:
    # one factor: the binned exact loss law reproduces the curve from below
    lap = self_tensor(laplace(mu=mu), 1, loss_step=1e-4)
    assert np.all(lap(X) <= laplace(mu=mu)(X) + 1e-15)
    assert np.max(laplace(mu=mu)(X) - lap(X)) < 2e-4
    mixed = tensor(gdp(mu), laplace(mu=mu), loss_step=1e-4)
    ref = tensor(
        gdp(mu).lower_piecewise_linear(grid_size=20000),
        laplace(mu=mu).lower_piecewise_linear(grid_size=20000),
        loss_step=1e-4,
    )
    assert np.max(np.abs(mixed(X) - ref(X))) < 2e-3
    assert mixed.check_properties().ok


def _rr_power(eps: float, k: int) -> object:
    pe = 1.0 / (1.0 + math.exp(eps))
    j = np.arange(k + 1)
    return from_distributions(p=binom.pmf(j, k, pe), q=binom.pmf(j, k, 1 - pe))


@pytest.mark.parametrize(("eps", "k"), [(0.5, 10), (1.0, 3), (0.1, 50)])
def test_pure_dp_composition_matches_binomial(eps: float, k: int) -> None:
    # f_{eps,0}^{(x)k} is the trade-off of the binomial counts (sufficient statistic)
    exact = _rr_power(eps, k)
    step = eps / 100
    num = self_tensor(approx_dp(epsilon=eps), k, loss_step=step)
    diff = num(X) - exact(X)  # type: ignore[operator]
    assert diff.max() <= 1e-11
    assert diff.min() >= -1e-9  # losses lie on the grid: exact up to rounding


def test_approx_dp_factorises() -> None:
    # f_{eps,delta} = f_{eps,0} (x) f_{0,delta}
    for eps, d in ((1.0, 0.1), (0.3, 0.01), (2.0, 0.5)):
        num = tensor(approx_dp(epsilon=eps), approx_dp(epsilon=0.0, delta=d), loss_step=eps / 64)
        assert np.max(np.abs(num(X) - approx_dp(epsilon=eps, delta=d)(X))) < 1e-9


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 4), seed=st.integers(0, 10_000))
def test_discrete_tensor_against_product(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)

    def pmf(m: int) -> np.ndarray:
        w = rng.dirichlet(np.ones(m)) + 1e-3  # ratios stay within e^{+-7}: a short loss grid
        return w / w.sum()

    p1, q1 = pmf(n), pmf(n)
    p2, q2 = pmf(3), pmf(3)
    exact = from_distributions(p=np.outer(p1, p2).ravel(), q=np.outer(q1, q2).ravel())
    num = tensor(from_distributions(p=p1, q=q1), from_distributions(p=p2, q=q2), loss_step=1e-4)
    assert np.all(num(X) <= exact(X) + 1e-12)
    assert np.max(exact(X) - num(X)) < 2e-3
    # commutativity and (f (x) g)^-1 = f^-1 (x) g^-1 (DRS Proposition 3.1), up to the grid
    other = tensor(from_distributions(p=p2, q=q2), from_distributions(p=p1, q=q1), loss_step=1e-4)
    assert np.max(np.abs(other(X) - num(X))) < 2e-3
    inv = tensor(from_distributions(p=q1, q=p1), from_distributions(p=q2, q=p2), loss_step=1e-4)
    exact_inv = exact.inverse()
    assert np.all(inv(X) <= exact_inv(X) + 1e-12)
    assert np.max(exact_inv(X) - inv(X)) < 2e-3


def test_self_tensor_equals_repeated_tensor() -> None:
    f = laplace(mu=0.5)
    a = self_tensor(f, 5, loss_step=1e-3)
    b = tensor(f, f, f, f, f, loss_step=1e-3)
    assert np.max(np.abs(a(X) - b(X))) < 1e-9


def test_laplace_composition_against_dp_accounting() -> None:
    k, mu = 20, 0.2
    ours = self_tensor(laplace(mu=mu), k, loss_step=1e-4)
    dist = pld.from_laplace_mechanism(1.0 / mu, value_discretization_interval=1e-4)
    dist = dist.self_compose(k)
    for delta in (1e-3, 1e-5):
        e_ours = ours.epsilon(delta)
        e_theirs = dist.get_epsilon_for_delta(delta)
        # both pessimistic discretisations of the same exact curve
        assert abs(e_ours - e_theirs) < 1e-3


def test_validation() -> None:
    with pytest.raises(PrivacyParameterError):
        tensor()
    with pytest.raises(PrivacyParameterError):
        tensor(gdp(1.0), "x")  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        self_tensor(gdp(1.0), 0)
    with pytest.raises(PrivacyParameterError):
        tensor(laplace(mu=1.0), laplace(mu=1.0), loss_step=0.0)
