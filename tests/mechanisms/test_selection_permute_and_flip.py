"""Exact output law of ``ReportNoisyMax(noise="exponential")`` (permute-and-flip).

Three references, in mpmath (40 to 60 digits):
* brute force over all n! visiting orders of permute-and-flip (McKenna and Sheldon 2020,
  Algorithm 1): in order pi, candidate pi_k is output with probability
  ``p_{pi_k} prod_{l < k} (1 - p_{pi_l})``, ``p_j = exp(z_j)``;
* the noise form: ``P(j) = int f(x - z_j) prod_{k != j} F(x - z_k) dx`` for unit exponential
  noise (density f, CDF F), by mpmath quadrature split at the scores;
* for many candidates, the arrival-time integral ``p_j int_0^1 prod_{k != j} (1 - p_k t) dt``
  with the product expanded into monomials (exact integration, 60 digits absorb the
  cancellation of the alternating coefficients).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.mechanisms import ExponentialMechanism, ReportNoisyMax
from dpkit.mechanisms._calibration import calibrated_epsilon
from dpkit.mechanisms.selection import SELECTION_SLACK


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 40 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mp.workdps(40):
        yield


def _pf() -> ReportNoisyMax:
    return ReportNoisyMax(epsilon=2.0, sensitivity=1.0, noise="exponential")


# z = GAIN * (u - max u) for _pf(): the mechanism runs at its calibrated epsilon
GAIN = math.nextafter(calibrated_epsilon(2.0) - 2 * SELECTION_SLACK, 0.0) / 2.0


def _z(scores: list[float]) -> list[mp.mpf]:
    top = max(scores)
    return [mp.mpf(GAIN) * (mp.mpf(u) - mp.mpf(top)) for u in scores]


def _brute_force(scores: list[float]) -> list[mp.mpf]:
    p = [mp.e**z for z in _z(scores)]
    n = len(p)
    out = [mp.mpf(0)] * n
    for order in itertools.permutations(range(n)):
        rest = mp.mpf(1)
        for j in order:
            out[j] += rest * p[j]
            rest *= 1 - p[j]
    return [o / mp.factorial(n) for o in out]


def _noise_integral(scores: list[float]) -> list[mp.mpf]:
    z = _z(scores)
    cuts = sorted(set(z))

    def density(j: int, x: mp.mpf) -> mp.mpf:
        if x < z[j]:
            return mp.mpf(0)
        val = mp.e ** (-(x - z[j]))
        for k, zk in enumerate(z):
            if k != j:
                val *= (1 - mp.e ** (-(x - zk))) if x > zk else 0
        return val

    return [mp.quad(lambda x, j=j: density(j, x), [*cuts, mp.inf]) for j in range(len(z))]


@pytest.mark.parametrize(
    "scores",
    [
        [0.0],
        [0.0, 1.0],
        [3.0, 3.0],
        [0.0, 0.5, 2.0],
        [1.0, -1.0, 0.25, 4.0],
        [0.0, 0.0, 0.0, 0.0, 0.0],
        [10.0, 0.0, 9.5, 9.9, -3.0, 10.0],
    ],
)
def test_matches_brute_force_over_all_orders(scores: list[float]) -> None:
    got = _pf().probabilities(scores)
    want = np.array([float(x) for x in _brute_force(scores)])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)


def test_matches_the_noise_integral() -> None:
    rng = np.random.default_rng(5)
    scores = rng.normal(0.0, 3.0, size=8).tolist()
    got = _pf().probabilities(scores)
    want = np.array([float(x) for x in _noise_integral(scores)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def _expanded_polynomial(scores: list[float]) -> list[mp.mpf]:
    """``p_j int_0^1 prod_{k != j} (1 - p_k t) dt`` by expanding the product (60 digits)."""
    with mp.workdps(60):
        p = [mp.e**z for z in _z(scores)]
        out = []
        for j in range(len(p)):
            coef = [mp.mpf(1)]  # coefficients of prod (1 - p_k t), lowest degree first
            for k, pk in enumerate(p):
                if k != j:
                    coef = [a - pk * b for a, b in zip([*coef, 0], [0, *coef], strict=True)]
            out.append(p[j] * mp.fsum(c / (i + 1) for i, c in enumerate(coef)))
        return out


def test_many_candidates_match_the_expanded_polynomial() -> None:
    rng = np.random.default_rng(6)
    scores = rng.normal(0.0, 3.0, size=40).tolist()
    got = _pf().probabilities(scores)
    want = np.array([float(x) for x in _expanded_polynomial(scores)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_two_candidates_closed_form() -> None:
    for d in (0.0, 0.1, 1.0, 7.0, 300.0, 800.0):
        p = _pf().probabilities([0.0, -d])
        # z = -GAIN d carries a relative rounding of a few 2**-53, so exp(z) one of d 2**-51
        tol = 1e-15 * (1.0 + d)
        assert p[1] == pytest.approx(math.exp(-GAIN * d) / 2, rel=tol, abs=1e-320)
        assert p[0] == pytest.approx(1 - math.exp(-GAIN * d) / 2, rel=1e-15)


def test_differs_from_the_exponential_mechanism() -> None:
    # the broken claim "exponential noise = exponential mechanism" is visibly wrong here
    scores = [0.0, 1.0, 2.0, 2.5]
    pf = _pf().probabilities(scores)
    em = ExponentialMechanism(epsilon=2.0, sensitivity=1.0).probabilities(scores)
    assert np.max(np.abs(pf - em)) > 0.05


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(min_value=-50.0, max_value=50.0), min_size=1, max_size=40),
    st.randoms(use_true_random=False),
)
def test_invariants(scores: list[float], rnd: object) -> None:
    m = _pf()
    p = m.probabilities(scores)
    assert np.all(p >= 0) and p.sum() == pytest.approx(1.0, abs=1e-13)
    # a higher score is never less likely (ties: equal up to rounding)
    order = np.argsort(scores, kind="stable")
    assert np.all(np.diff(p[order]) >= -1e-13)
    # relabelling candidates relabels the law
    perm = list(range(len(scores)))
    rnd.shuffle(perm)  # type: ignore[attr-defined]
    q = m.probabilities([scores[i] for i in perm])
    np.testing.assert_allclose(q, p[perm], rtol=1e-12, atol=1e-300)
    # permute-and-flip picks the best candidate at least as often as the exponential
    # mechanism of the same scale (McKenna and Sheldon 2020, Theorem 2: it dominates it)
    em = ExponentialMechanism(epsilon=2.0, sensitivity=1.0).probabilities(scores)
    best = np.asarray(scores) == max(scores)
    assert p[best].sum() >= em[best].sum() - 1e-13
