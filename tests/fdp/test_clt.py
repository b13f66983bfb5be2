"""CLT functionals, limiting mu, Berry-Esseen bound and the (eps, delta) composition limit."""

from __future__ import annotations

import math
from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from dpkit.errors import PrivacyParameterError
from dpkit.fdp import (
    TradeOffFunction,
    approx_dp,
    approx_dp_composition_limit,
    berry_esseen,
    clt_mu,
    from_distributions,
    functionals,
    gdp,
    laplace,
    self_tensor,
)


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 30 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mp.workdps(30):
        yield


X = np.linspace(0.0, 1.0, 4001)


class _Opaque(TradeOffFunction):
    """A trade-off function known only through its values (no closed-form functionals)."""

    def __init__(self, inner: TradeOffFunction) -> None:
        self.inner = inner
        self.symmetric = inner.symmetric

    def _eval(self, alpha: np.ndarray) -> np.ndarray:
        return self.inner._eval(alpha)


def _laplace_ref(mu: float) -> tuple[float, float, float, float]:
    m = mp.mpf(mu)

    def moment(g: object) -> mp.mpf:
        atoms = g(-m) / 2 + mp.e ** (-m) / 2 * g(m)  # type: ignore[operator]
        if mu == 0:
            return atoms
        return atoms + mp.quad(
            lambda x: g(2 * x - m) * mp.e ** (-x) / 2,  # type: ignore[operator]
            [0, m / 2, m],
        )

    kl = -moment(lambda v: v)
    return (
        float(kl),
        float(moment(lambda v: v**2)),
        float(moment(lambda v: abs(v) ** 3)),
        float(moment(lambda v: abs(v + kl) ** 3)),
    )


@pytest.mark.parametrize("mu", [1e-4, 0.01, 0.3, 1.0, 5.0])
def test_laplace_functionals_against_mpmath(mu: float) -> None:
    fn = functionals(laplace(mu=mu))
    ref = _laplace_ref(mu)
    got = (fn.kl, fn.kappa2, fn.kappa3, fn.kappa3_centred)
    for g, r in zip(got, ref, strict=True):
        assert g == pytest.approx(r, rel=1e-10)


@pytest.mark.parametrize("eps", [1e-3, 0.1, 1.0, 4.0, 300.0])
def test_pure_dp_functionals_closed_forms(eps: float) -> None:
    fn = functionals(approx_dp(epsilon=eps))
    e = mp.mpf(eps)
    w1, w2 = 1 / (1 + mp.e**e), mp.e**e / (1 + mp.e**e)  # alpha-lengths of the two segments
    kl = -(w1 * e + w2 * (-e))
    assert fn.kl == pytest.approx(float(kl), rel=1e-12)
    assert fn.kappa2 == pytest.approx(eps**2, rel=1e-15)
    assert fn.kappa3 == pytest.approx(eps**3, rel=1e-15)
    kb = w1 * abs(e + kl) ** 3 + w2 * abs(-e + kl) ** 3
    assert fn.kappa3_centred == pytest.approx(float(kb), rel=1e-12)


@pytest.mark.parametrize("mu", [0.1, 1.0, 3.0])
def test_gaussian_functionals_and_numeric_path(mu: float) -> None:
    fn = functionals(gdp(mu))
    num = functionals(_Opaque(gdp(mu)))  # forces the generic numeric path
    assert not num.exact
    for a, b in (
        (fn.kl, num.kl),
        (fn.kappa2, num.kappa2),
        (fn.kappa3, num.kappa3),
        (fn.kappa3_centred, num.kappa3_centred),
    ):
        assert b == pytest.approx(a, rel=1e-4)
    ref = mp.quad(lambda z: abs(mu * z - mu * mu / 2) ** 3 * mp.npdf(z), [-mp.inf, mu / 2, mp.inf])
    assert fn.kappa3 == pytest.approx(float(ref), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(mus=st.lists(st.floats(0.01, 3.0), min_size=1, max_size=5))
def test_clt_mu_is_exact_for_gaussians(mus: list[float]) -> None:
    assert clt_mu(*[gdp(m) for m in mus]) == pytest.approx(
        math.sqrt(sum(m * m for m in mus)), rel=1e-12
    )


def test_clt_limit_for_pure_dp_and_laplace() -> None:
    # DRS Theorem 3.4: f_{mu/sqrt(n), 0}^{(x) n} -> G_mu and Laplace(mu/sqrt(n))^{(x) n} -> G_mu
    mu = 1.5
    errs = [
        abs(clt_mu(approx_dp(epsilon=mu / math.sqrt(n)), counts=[n]) - mu)
        for n in (10, 100, 10_000)
    ]
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 1e-3
    lap = [abs(clt_mu(laplace(mu=mu / math.sqrt(n)), counts=[n]) - mu) for n in (10, 100, 10_000)]
    assert lap[0] > lap[1] > lap[2]
    assert lap[2] < 1e-2


@pytest.mark.parametrize(("eps", "n"), [(0.1, 200), (0.3, 50), (0.05, 1000)])
def test_berry_esseen_bound_below_exact_composition(eps: float, n: int) -> None:
    pe = 1.0 / (1.0 + math.exp(eps))
    j = np.arange(n + 1)
    exact = from_distributions(p=binom.pmf(j, n, pe), q=binom.pmf(j, n, 1 - pe))
    res = berry_esseen(approx_dp(epsilon=eps), counts=[n])
    assert res.gamma < 0.5
    b = res.bound(X)
    assert np.all(b <= exact(X) + 1e-12)  # a guaranteed lower bound
    assert res.bound.check_properties().ok
    # the theorem's own statement on [gamma, 1 - gamma]
    inner = (res.gamma <= X) & (1 - res.gamma >= X)
    g = res.gamma
    lo = gdp(res.mu)(np.minimum(X[inner] + g, 1.0)) - g
    hi = gdp(res.mu)(np.maximum(X[inner] - g, 0.0)) + g
    assert np.all(lo <= exact(X[inner]) + 1e-12)
    assert np.all(exact(X[inner]) <= hi + 1e-12)
    # the estimate is close to the exact curve, and can be above it (optimistic)
    assert np.max(np.abs(res.estimate(X) - exact(X))) < 0.02


def test_berry_esseen_mixture_and_trivial_bound() -> None:
    res = berry_esseen(laplace(mu=0.1), approx_dp(epsilon=0.1), counts=[50, 50])
    assert 0 < res.gamma < 0.5
    num = self_tensor(laplace(mu=0.1), 50, loss_step=1e-4).tensor(
        self_tensor(approx_dp(epsilon=0.1), 50, loss_step=1e-4), loss_step=1e-4
    )
    # num is a lower bound of the exact composition; the bound must stay below exact, which is
    # at least num - (discretisation error); compare with a small margin
    assert np.all(res.bound(X) <= num(X) + 2e-3)
    few = berry_esseen(approx_dp(epsilon=2.0), counts=[2])
    assert few.gamma >= 0.5
    assert np.all(few.bound(X) == 0.0)


def test_approx_dp_composition_limit() -> None:
    # f_{eps_i, delta_i} with sum eps^2 = mu^2 and sum delta = delta -> e^{-delta} G_mu
    mu, delta = 1.0, 0.01
    errs = []
    for n in (16, 256):
        lim = approx_dp_composition_limit(epsilons=[mu / math.sqrt(n)] * n, deltas=[delta / n] * n)
        comp = self_tensor(
            approx_dp(epsilon=mu / math.sqrt(n), delta=delta / n),
            n,
            loss_step=mu / math.sqrt(n) / 8,
        )
        errs.append(float(np.max(np.abs(lim(X) - comp(X)))))
    assert errs[1] < errs[0]
    assert errs[1] < 5e-3
    lim = approx_dp_composition_limit(epsilons=[0.1] * 100, deltas=[1e-4] * 100)
    assert np.allclose(lim(X), math.exp(-0.01) * gdp(1.0)(X), atol=1e-12)
    assert lim.check_properties().ok


def test_refusals() -> None:
    f = from_distributions(p=[0.9, 0.1], q=[0.5, 0.5])
    with pytest.raises(PrivacyParameterError):
        functionals(f)  # not symmetric
    with pytest.raises(PrivacyParameterError):
        functionals(approx_dp(epsilon=1.0, delta=0.1))  # f(0) < 1
    with pytest.raises(PrivacyParameterError):
        berry_esseen()
    with pytest.raises(PrivacyParameterError):
        clt_mu(gdp(1.0), counts=[1, 2])
