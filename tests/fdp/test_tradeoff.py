"""Trade-off function objects: defining properties, closed forms, operations."""

from __future__ import annotations

import math
from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.errors import PrivacyParameterError
from dpkit.fdp import (
    GroupTradeOff,
    TradeOffFunction,
    approx_dp,
    from_distributions,
    from_privacy_profile,
    gdp,
    identity,
    laplace,
    piecewise_linear,
)


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 30 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mp.workdps(30):
        yield


GRID = np.concatenate([np.linspace(0.0, 1.0, 2001), np.logspace(-12, -1, 50)])


def _is_tradeoff(f: TradeOffFunction) -> None:
    rep = f.check_properties()
    assert rep.ok, rep


def _pmf(draw: st.DrawFn, n: int) -> np.ndarray:
    w = np.asarray(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)))
    w = w + 1e-3
    return w / w.sum()


@st.composite
def pmf_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(2, 8))
    p = _pmf(draw, n)
    q = _pmf(draw, n)
    if draw(st.booleans()):  # an outcome impossible under P, another impossible under Q
        p[0] = 0.0
        q[-1] = 0.0
        p, q = p / p.sum(), q / q.sum()
    return p, q


mus = st.floats(min_value=0.0, max_value=8.0)
epsilons = st.floats(min_value=0.0, max_value=6.0)
deltas = st.floats(min_value=0.0, max_value=0.9)


@settings(max_examples=40, deadline=None)
@given(mu=mus)
def test_gaussian_is_tradeoff_and_symmetric(mu: float) -> None:
    g = gdp(mu)
    _is_tradeoff(g)
    assert g.inverse() is g
    pl = g.lower_piecewise_linear()
    assert np.all(pl(GRID) <= g(GRID) + 1e-15)
    inv = pl.inverse()(GRID)
    assert np.all(inv <= g(GRID) + 1e-15)  # inverse of a lower bound of g = g^-1
    if mu <= 4.0:  # the inverse is ill-conditioned where G_mu is flat (below ~1e-14)
        assert np.max(g(GRID) - inv) < 5e-2


@settings(max_examples=40, deadline=None)
@given(eps=epsilons, delta=deltas)
def test_approx_dp_closed_form_and_properties(eps: float, delta: float) -> None:
    f = approx_dp(epsilon=eps, delta=delta)
    _is_tradeoff(f)
    ref = np.maximum.reduce(
        [np.zeros_like(GRID), 1 - delta - math.exp(eps) * GRID, math.exp(-eps) * (1 - delta - GRID)]
    )
    assert np.allclose(f(GRID), ref, atol=1e-15)
    assert f.delta(eps) == delta
    assert f.delta(eps + 1.0) == delta
    if delta > 0.0:
        assert f.epsilon(delta) <= eps + 1e-9


@settings(max_examples=40, deadline=None)
@given(mu=st.floats(min_value=0.0, max_value=10.0))
def test_laplace_closed_form_against_definition(mu: float) -> None:
    f = laplace(mu=mu)
    _is_tradeoff(f)

    def cdf(x: mp.mpf) -> mp.mpf:
        return mp.e**x / 2 if x < 0 else 1 - mp.e ** (-x) / 2

    def icdf(u: mp.mpf) -> mp.mpf:
        return mp.log(2 * u) if u < mp.mpf(1) / 2 else -mp.log(2 * (1 - u))

    for a in (1e-9, 0.01, 0.2, 0.5, 0.7, 0.999):
        ref = cdf(icdf(1 - mp.mpf(a)) - mu)
        assert abs(float(f(a)) - float(ref)) <= 1e-13


@pytest.mark.parametrize("mu", [0.1, 1.0, 3.0])
def test_laplace_profile_matches_dp_accounting(mu: float) -> None:
    dist = pld.from_laplace_mechanism(1.0 / mu, value_discretization_interval=1e-5)
    f = laplace(mu=mu)
    for eps in (0.0, mu / 3, mu / 2, 0.9 * mu, mu, 2 * mu):
        assert abs(f.delta(eps) - dist.get_delta_for_epsilon(eps)) <= 1e-4
    # our profile is the exact one of the curve: sup_a 1 - e^eps a - f(a)
    pl = f.lower_piecewise_linear(grid_size=20000)
    for eps in (0.0, mu / 2):
        assert f.delta(eps) <= pl.delta(eps) <= f.delta(eps) + 1e-5


@settings(max_examples=60, deadline=None)
@given(pair=pmf_pairs())
def test_from_distributions_is_the_neyman_pearson_curve(
    pair: tuple[np.ndarray, np.ndarray],
) -> None:
    p, q = pair
    f = from_distributions(p=p, q=q)
    _is_tradeoff(f)
    # brute force: every deterministic test (subset S rejected) is above the curve, and the
    # curve is attained at its knots by some (randomised) test: check the first.
    n = p.size
    for mask in range(1 << n):
        s = np.asarray([(mask >> i) & 1 for i in range(n)], dtype=bool)
        alpha = float(p[s].sum())
        beta = 1.0 - float(q[s].sum())
        assert float(f(min(alpha, 1.0))) <= beta + 1e-12
    # the inverse is T(Q, P)
    g = from_distributions(p=q, q=p)
    assert np.allclose(f.inverse()(GRID), g(GRID), atol=1e-12)
    # symmetrization: convex, symmetric, between f and max(f, f^-1)
    s_f = f.symmetrize()
    _is_tradeoff(s_f)
    mx = np.maximum(f(GRID), g(GRID))
    assert np.all(s_f(GRID) >= f(GRID) - 1e-12)
    assert np.all(s_f(GRID) <= mx + 1e-12)
    assert np.allclose(s_f.inverse()(GRID), s_f(GRID), atol=1e-9)


def test_symmetric_minorant_handles_nonconvex_min() -> None:
    # An asymmetric pair: min{f, f^-1} has a concave kink where f and f^-1 cross, so it is not
    # a trade-off function; the convex envelope is, and it is symmetric and below both.
    f = from_distributions(p=[0.9, 0.1], q=[0.5, 0.5])
    g = f.inverse()
    x = np.linspace(0, 1, 4001)
    mn = np.minimum(f(x), g(x))
    assert (mn[:-2] - 2 * mn[1:-1] + mn[2:]).min() < -1e-6  # min is not convex
    m = f.symmetric_minorant()
    _is_tradeoff(m)
    y = m(x)
    assert (y[:-2] - 2 * y[1:-1] + y[2:]).min() >= -1e-12
    assert np.all(y <= mn + 1e-12)
    assert np.allclose(m.inverse()(x), y, atol=1e-9)
    # max{f, f^-1} is convex already (both are convex): symmetrize() equals it
    mx = np.maximum(f(x), g(x))
    assert np.allclose(f.symmetrize()(x), mx, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(mu=st.floats(0.05, 3.0), k=st.integers(1, 5))
def test_group_privacy_gaussian_law(mu: float, k: int) -> None:
    exact = gdp(mu).group(k)
    assert exact.mu == pytest.approx(k * mu, rel=1e-15)
    generic = GroupTradeOff(gdp(mu), k)
    assert np.allclose(generic(GRID), exact(GRID), atol=1e-12)
    _is_tradeoff(generic)


@settings(max_examples=25, deadline=None)
@given(mu=st.floats(0.05, 3.0), k=st.integers(2, 4))
def test_group_privacy_laplace_is_laplace_k_mu(mu: float, k: int) -> None:
    generic = GroupTradeOff(laplace(mu=mu), k)
    assert np.allclose(generic(GRID), laplace(mu=k * mu)(GRID), atol=1e-12)


def test_group_privacy_pure_dp_approaches_laplace() -> None:
    # DRS: 1 - (1 - f_{eps,0})^{o k} -> T(Lap(0,1), Lap(mu,1)) with eps = mu / k
    mu = 1.0
    errs = [
        np.max(np.abs(approx_dp(epsilon=mu / k).group(k)(GRID) - laplace(mu=mu)(GRID)))
        for k in (1, 4, 64)
    ]
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 5e-3


@settings(max_examples=30, deadline=None)
@given(mu=st.floats(0.1, 4.0))
def test_profile_roundtrip_gaussian(mu: float) -> None:
    g = gdp(mu)
    eps = np.linspace(0.0, mu * mu / 2 + 8 * mu, 400)
    dl = g.privacy_profile(eps)
    back = from_privacy_profile(epsilons=eps, deltas=dl)
    _is_tradeoff(back)
    assert np.all(back(GRID) <= g(GRID) + 1e-15)  # a lower bound ...
    assert np.max(g(GRID) - back(GRID)) < 0.02  # ... and a close one
    # delta(eps) of the envelope equals the profile at the given epsilons
    for e, d in zip(eps[::40], dl[::40], strict=True):
        assert back.delta(float(e)) == pytest.approx(d, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(mu=st.floats(0.0, 6.0), eps=epsilons, delta=deltas)
def test_symmetric_classes_equal_their_reflection(mu: float, eps: float, delta: float) -> None:
    # f^-1(a) = inf{t : f(t) <= a}: evaluate the reflection numerically by bisection
    for f in (gdp(mu), laplace(mu=mu), approx_dp(epsilon=eps, delta=delta)):
        assert f.symmetric
        for a in (0.05, 0.3, 0.6, 0.9):
            lo, hi = 0.0, 1.0
            for _ in range(80):
                mid = 0.5 * (lo + hi)
                if float(f(mid)) <= a:
                    hi = mid
                else:
                    lo = mid
            assert hi == pytest.approx(float(f(a)), abs=1e-9)


def test_profile_roundtrip_asymmetric() -> None:
    # one-sided profile delta(eps) = H_{e^eps}(Q || P) over real eps recovers T(P, Q)
    f = from_distributions(p=[0.7, 0.2, 0.1], q=[0.1, 0.3, 0.6])
    eps = np.linspace(-6.0, 6.0, 2001)
    back = from_privacy_profile(epsilons=eps, deltas=f.privacy_profile(eps), symmetric=False)
    assert np.all(back(GRID) <= f(GRID) + 1e-15)
    assert np.max(f(GRID) - back(GRID)) < 2e-3  # tangents at grid slopes only
    assert not back.symmetric


def test_profile_with_many_points_is_fast_and_close() -> None:
    # PLD accountants pass long profiles: the envelope is O(m log m), not O(m^2)
    g = gdp(1.0)
    eps = np.linspace(0.0, 10.0, 100_000)
    f = from_privacy_profile(epsilons=eps, deltas=g.privacy_profile(eps))
    assert np.all(f(GRID) <= g(GRID) + 1e-15)
    assert np.max(g(GRID) - f(GRID)) < 1e-8


def test_profile_single_point_is_approx_dp() -> None:
    f = from_privacy_profile(epsilons=[1.0], deltas=[0.05])
    assert np.allclose(f(GRID), approx_dp(epsilon=1.0, delta=0.05)(GRID), atol=1e-13)


def test_piecewise_linear_takes_convex_minorant() -> None:
    f = piecewise_linear(alphas=[0.0, 0.5, 1.0], betas=[1.0, 0.9, 0.0])
    _is_tradeoff(f)
    assert float(f(0.5)) == pytest.approx(0.5)  # clipped to 1 - alpha


def test_identity_and_validation() -> None:
    assert np.allclose(identity()(GRID), 1 - GRID)
    with pytest.raises(PrivacyParameterError):
        approx_dp(epsilon=-1.0, delta=0.0)
    with pytest.raises(PrivacyParameterError):
        approx_dp(epsilon=1.0, delta=1.0)
    with pytest.raises(TypeError):
        approx_dp(1.0, 0.0)  # type: ignore[misc]
    with pytest.raises(TypeError):
        laplace(1.0)  # type: ignore[misc]
    with pytest.raises(PrivacyParameterError):
        from_distributions(p=[0.5, 0.5], q=[0.5, 0.6])
    with pytest.raises(PrivacyParameterError):
        from_distributions(p=[0.5, 0.5], q=[1.0])
    with pytest.raises(PrivacyParameterError):
        from_privacy_profile(epsilons=[1.0, float("nan")], deltas=[0.1, 0.1])
    with pytest.raises(PrivacyParameterError):
        from_privacy_profile(epsilons=[1.0], deltas=[1.5])
    with pytest.raises(PrivacyParameterError):
        gdp(1.0).group(0)


def test_callable_on_arrays_keeps_shape() -> None:
    a = np.linspace(0, 1, 12).reshape(3, 4)
    for f in (gdp(1.0), approx_dp(epsilon=1.0, delta=0.1), laplace(mu=1.0)):
        assert f(a).shape == (3, 4)
        assert f(0.5).shape == ()
