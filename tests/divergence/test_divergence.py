"""Divergences: brute force over events, closed forms against quadrature, Dwork-Roth lemmas."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy.optimize import linprog
from scipy.stats import laplace as lap_dist
from scipy.stats import norm

from dpkit.divergence import (
    GaussianPair,
    LaplacePair,
    RandomizedResponsePair,
    approx_max_divergence,
    hockey_stick_divergence,
    kl_divergence,
    max_divergence,
    renyi_divergence,
    statistical_distance,
)
from dpkit.errors import PrivacyParameterError
from dpkit.fdp import gdp, laplace


@st.composite
def pmf_pair(
    draw: st.DrawFn, min_size: int = 2, max_size: int = 6, zeros: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(min_size, max_size))
    p = np.asarray(draw(st.lists(st.floats(0.01, 1.0), min_size=n, max_size=n)))
    q = np.asarray(draw(st.lists(st.floats(0.01, 1.0), min_size=n, max_size=n)))
    if zeros and draw(st.booleans()):
        q[0] = 0.0
    if zeros and draw(st.booleans()):
        p[-1] = 0.0
    return p / p.sum(), q / q.sum()


def _subsets(n: int) -> list[np.ndarray]:
    return [np.asarray(m, dtype=bool) for m in itertools.product([False, True], repeat=n)]


@settings(max_examples=80, deadline=None)
@given(pair=pmf_pair(), delta=st.floats(0.0, 0.9), eps=st.floats(-3.0, 3.0))
def test_discrete_against_brute_force(
    pair: tuple[np.ndarray, np.ndarray], delta: float, eps: float
) -> None:
    p, q = pair
    subsets = _subsets(p.size)
    supp = p > 0
    # max divergence: max over S in Supp(P)
    best = -math.inf
    for s in subsets:
        s = s & supp
        if not s.any():
            continue
        ps, qs = p[s].sum(), q[s].sum()
        best = max(best, math.inf if qs == 0 else math.log(ps / qs))
    assert max_divergence(p=p, q=q) == pytest.approx(best, rel=1e-12)
    # delta-approximate max divergence
    best = -math.inf
    for s in subsets:
        s = s & supp
        ps, qs = p[s].sum(), q[s].sum()
        if not s.any() or ps < delta:
            continue
        if qs == 0:
            val = math.inf if ps - delta > 1e-15 else -math.inf
        elif ps - delta <= 0:
            val = -math.inf
        else:
            val = math.log((ps - delta) / qs)
        best = max(best, val)
    got = approx_max_divergence(p=p, q=q, delta=delta)
    if math.isinf(best) or math.isinf(got):
        assert got == best or (best == -math.inf and got < 0)
    else:
        assert got == pytest.approx(best, rel=1e-9, abs=1e-9)
    # statistical distance and hockey stick: sup over all events
    assert statistical_distance(p=p, q=q) == pytest.approx(
        max(abs(p[s].sum() - q[s].sum()) for s in subsets), abs=1e-15
    )
    assert hockey_stick_divergence(p=p, q=q, epsilon=eps) == pytest.approx(
        max(p[s].sum() - math.exp(eps) * q[s].sum() for s in subsets), abs=1e-14
    )


@settings(max_examples=60, deadline=None)
@given(pair=pmf_pair(zeros=False))
def test_renyi_limits_and_monotonicity(pair: tuple[np.ndarray, np.ndarray]) -> None:
    p, q = pair
    kl = kl_divergence(p=p, q=q)
    assert renyi_divergence(p=p, q=q, alpha=1.0) == kl
    assert renyi_divergence(p=p, q=q, alpha=1.0 + 1e-7) == pytest.approx(kl, rel=1e-4, abs=1e-8)
    assert renyi_divergence(p=p, q=q, alpha=math.inf) == max_divergence(p=p, q=q)
    alphas = [0.25, 0.5, 0.9, 1.0, 1.5, 2.0, 8.0, 64.0]
    vals = [renyi_divergence(p=p, q=q, alpha=a) for a in alphas]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(vals))
    assert vals[-1] <= max_divergence(p=p, q=q) + 1e-12


# ----------------------------------------------------------------- Dwork-Roth Lemma 3.17 / 3.18
@settings(max_examples=80, deadline=None)
@given(pair=pmf_pair(zeros=False), delta=st.floats(0.0, 0.5))
def test_lemma_3_17_part1_only_if(pair: tuple[np.ndarray, np.ndarray], delta: float) -> None:
    # D^delta(Y||Z) <= eps  =>  exists Y' with Delta(Y, Y') <= delta and D_inf(Y'||Z) <= eps:
    # cap Y at e^eps Z and put the removed mass where there is room.
    y, z = pair
    eps = max(0.0, approx_max_divergence(p=y, q=z, delta=delta))
    cap = math.exp(eps) * z
    removed = np.maximum(y - cap, 0.0)
    yp = np.minimum(y, cap)
    room = cap - yp
    if room.sum() > 0:  # (room is 0 only when Y = e^eps Z, i.e. nothing was removed)
        yp = yp + room * (removed.sum() / room.sum())
    assert statistical_distance(p=y, q=yp / yp.sum()) <= delta + 1e-12
    assert max_divergence(p=yp / yp.sum(), q=z) <= eps + 1e-9


@settings(max_examples=80, deadline=None)
@given(
    a=pmf_pair(zeros=False, min_size=3, max_size=3), b=pmf_pair(zeros=False, min_size=3, max_size=3)
)
def test_lemma_3_17_part1_if(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> None:
    # exists Y' with Delta(Y, Y') <= delta and D_inf(Y'||Z) <= eps  =>  D^delta(Y||Z) <= eps
    yprime, z = a
    y = b[0]
    eps = max_divergence(p=yprime, q=z)
    delta = statistical_distance(p=y, q=yprime)
    if delta >= 1.0:
        return
    assert approx_max_divergence(p=y, q=z, delta=delta) <= eps + 1e-9


def _exists_pair(y: np.ndarray, z: np.ndarray, eps: float, tv: float) -> bool:
    """LP: are there Y', Z' with Delta(Y,Y'), Delta(Z,Z') <= tv and D_inf both ways <= eps?"""
    n = y.size
    e = math.exp(eps)
    rows, rhs = [], []

    def row() -> np.ndarray:
        return np.zeros(4 * n)

    for i in range(n):
        for u, v in ((i, n + i), (n + i, i)):  # y'_i <= e z'_i and z'_i <= e y'_i
            r = row()
            r[u], r[v] = 1.0, -e
            rows.append(r)
            rhs.append(0.0)
        for base, aux, target in ((0, 2 * n, y), (n, 3 * n, z)):  # |w' - w| <= slack
            r = row()
            r[base + i], r[aux + i] = 1.0, -1.0
            rows.append(r)
            rhs.append(target[i])
            r = row()
            r[base + i], r[aux + i] = -1.0, -1.0
            rows.append(r)
            rhs.append(-target[i])
    for aux in (2 * n, 3 * n):
        r = row()
        r[aux : aux + n] = 0.5
        rows.append(r)
        rhs.append(tv)
    eq = np.zeros((2, 4 * n))
    eq[0, :n] = 1.0
    eq[1, n : 2 * n] = 1.0
    res = linprog(
        np.zeros(4 * n),
        A_ub=np.asarray(rows),
        b_ub=rhs,
        A_eq=eq,
        b_eq=[1.0, 1.0],
        bounds=[(0, None)] * (4 * n),
        method="highs",
    )
    return bool(res.status == 0)


@settings(max_examples=60, deadline=None)
@given(pair=pmf_pair(zeros=False, max_size=5), delta=st.floats(0.01, 0.3))
def test_lemma_3_17_part2(pair: tuple[np.ndarray, np.ndarray], delta: float) -> None:
    # D^delta(Y||Z) <= eps and D^delta(Z||Y) <= eps  iff  Y', Z' exist with statistical
    # distances <= delta/(e^eps + 1) and D_inf(Y'||Z') <= eps AND D_inf(Z'||Y') <= eps. (The seed
    # text states only one direction of D_inf; the 'if' direction needs both.)
    y, z = pair
    eps = max(
        approx_max_divergence(p=y, q=z, delta=delta), approx_max_divergence(p=z, q=y, delta=delta)
    )
    if eps < 0:
        return
    tv = delta / (math.exp(eps) + 1.0)
    assert _exists_pair(y, z, eps * (1 + 1e-9) + 1e-12, tv * (1 + 1e-9))  # only if


@settings(max_examples=80, deadline=None)
@given(
    a=pmf_pair(zeros=False, min_size=4, max_size=4),
    b=pmf_pair(zeros=False, min_size=4, max_size=4),
    t=st.floats(0.0, 0.5),
)
def test_lemma_3_17_part2_if(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], t: float
) -> None:
    yp, zp = a
    y = (1 - t) * yp + t * b[0]
    z = (1 - t) * zp + t * b[1]
    eps = max(max_divergence(p=yp, q=zp), max_divergence(p=zp, q=yp))
    tv = max(statistical_distance(p=y, q=yp), statistical_distance(p=z, q=zp))
    delta = tv * (math.exp(eps) + 1.0)
    if delta >= 1.0:
        return
    assert approx_max_divergence(p=y, q=z, delta=delta) <= eps + 1e-9
    assert approx_max_divergence(p=z, q=y, delta=delta) <= eps + 1e-9


@settings(max_examples=150, deadline=None)
@given(pair=pmf_pair(zeros=False, max_size=8))
def test_lemma_3_18_kl_bound(pair: tuple[np.ndarray, np.ndarray]) -> None:
    y, z = pair
    eps = max(max_divergence(p=y, q=z), max_divergence(p=z, q=y))
    kl = kl_divergence(p=y, q=z)
    assert kl <= eps * math.expm1(eps) + 1e-12
    # the extreme pair is randomized response, KL = eps tanh(eps/2) (<= eps (e^eps - 1))
    assert kl <= eps * math.tanh(eps / 2) + 1e-12


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_lemma_3_18_randomized_response(eps: float) -> None:
    p = math.exp(eps) / (1 + math.exp(eps))
    rr = RandomizedResponsePair(p_truth=p)
    assert rr.max_divergence() == pytest.approx(eps, rel=1e-12)
    assert rr.kl() == pytest.approx(eps * math.tanh(eps / 2), rel=1e-12)
    assert rr.kl() <= eps * math.expm1(eps)


# ----------------------------------------------------------------- closed forms vs quadrature
def _quad(fn: object, mu: float) -> float:
    pts = [0.0, mu / 2, mu] if mu > 0 else [0.0]
    val, _ = integrate.quad(
        fn,
        -60.0,
        60.0 + mu,
        points=pts,
        limit=400,  # type: ignore[arg-type]
        epsabs=1e-14,
        epsrel=1e-12,
    )
    return float(val)


@pytest.mark.parametrize("mu", [0.0, 0.3, 1.0, 2.5])
def test_gaussian_pair_against_quadrature(mu: float) -> None:
    g = GaussianPair(mu=mu)
    p = norm(0, 1).pdf
    q = norm(mu, 1).pdf
    assert g.kl() == pytest.approx(
        _quad(lambda x: p(x) * (norm.logpdf(x) - norm.logpdf(x, mu)), mu), abs=1e-10
    )
    assert g.statistical_distance() == pytest.approx(
        _quad(lambda x: 0.5 * abs(p(x) - q(x)), mu), abs=1e-10
    )
    for eps in (-0.5, 0.0, 0.7):
        ref = _quad(lambda x, e=eps: max(0.0, p(x) - math.exp(e) * q(x)), mu)
        assert g.hockey_stick(epsilon=eps) == pytest.approx(ref, abs=1e-10)
    for a in (0.5, 2.0, 5.0):
        integrand = lambda x, a=a: math.exp(a * norm.logpdf(x) + (1 - a) * norm.logpdf(x, mu))  # noqa: E731
        ref = math.log(_quad(integrand, mu)) / (a - 1)
        assert g.renyi(alpha=a) == pytest.approx(ref, abs=1e-9)
    if mu > 0:
        for d in (1e-6, 0.01, 0.3):
            e = g.approx_max_divergence(delta=d)
            assert g.hockey_stick(epsilon=e) == pytest.approx(d, rel=1e-9)
            assert e <= gdp(mu).epsilon(d) + 1e-12


@pytest.mark.parametrize("mu", [0.0, 0.3, 1.0, 2.5])
def test_laplace_pair_against_quadrature(mu: float) -> None:
    lp = LaplacePair(mu=mu)
    p = lap_dist(0, 1).pdf
    q = lap_dist(mu, 1).pdf
    assert lp.kl() == pytest.approx(_quad(lambda x: p(x) * (abs(x - mu) - abs(x)), mu), abs=1e-10)
    assert lp.statistical_distance() == pytest.approx(
        _quad(lambda x: 0.5 * abs(p(x) - q(x)), mu), abs=1e-10
    )
    assert lp.max_divergence() == mu
    for eps in (-3.0, -0.2, 0.0, 0.2, 3.0):
        ref = _quad(lambda x, e=eps: max(0.0, p(x) - math.exp(e) * q(x)), mu)
        assert lp.hockey_stick(epsilon=eps) == pytest.approx(ref, abs=1e-10)
        assert lp.hockey_stick(epsilon=eps) == pytest.approx(laplace(mu=mu).delta(eps), abs=1e-15)
    for a in (0.25, 0.5, 0.75, 2.0, 5.0):
        integrand = lambda x, a=a: math.exp(  # noqa: E731
            a * lap_dist.logpdf(x) + (1 - a) * lap_dist.logpdf(x, mu)
        )
        ref = math.log(_quad(integrand, mu)) / (a - 1)
        assert lp.renyi(alpha=a) == pytest.approx(ref, abs=1e-9)
    for d in (0.0, 0.01, 0.3, 0.9):
        e = lp.approx_max_divergence(delta=d)
        assert lp.hockey_stick(epsilon=e) == pytest.approx(d, abs=1e-12)


@pytest.mark.parametrize(("p", "k"), [(0.75, 2), (0.6, 4), (0.9, 10)])
def test_randomized_response_closed_forms(p: float, k: int) -> None:
    rr = RandomizedResponsePair(p_truth=p, categories=k)
    r = (1 - p) / (k - 1)
    assert rr.kl() == pytest.approx((p - r) * math.log(p / r), rel=1e-12)
    assert rr.max_divergence() == pytest.approx(math.log(p / r), rel=1e-12)
    assert rr.statistical_distance() == pytest.approx(p - r, rel=1e-12)
    eps = math.log(p / r)
    assert rr.hockey_stick(epsilon=eps) == pytest.approx(0.0, abs=1e-15)
    assert rr.approx_max_divergence(delta=0.0) == pytest.approx(eps, rel=1e-12)


def test_validation() -> None:
    with pytest.raises(PrivacyParameterError):
        kl_divergence(p=[0.5, 0.5], q=[0.5, 0.4])
    with pytest.raises(PrivacyParameterError):
        kl_divergence(p=[0.5, 0.5], q=[1.0])
    with pytest.raises(PrivacyParameterError):
        approx_max_divergence(p=[0.5, 0.5], q=[0.5, 0.5], delta=1.0)
    with pytest.raises(PrivacyParameterError):
        renyi_divergence(p=[0.5, 0.5], q=[0.5, 0.5], alpha=0.0)
    with pytest.raises(PrivacyParameterError):
        hockey_stick_divergence(p=[0.5, 0.5], q=[0.5, 0.5], epsilon=float("nan"))
    with pytest.raises(PrivacyParameterError):
        GaussianPair(mu=-1.0)
    with pytest.raises(PrivacyParameterError):
        RandomizedResponsePair(p_truth=0.2, categories=2)
    with pytest.raises(TypeError):
        kl_divergence([0.5, 0.5], [0.5, 0.5])  # type: ignore[misc]
