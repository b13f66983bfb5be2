"""Exact (not sampled) checks of every LDP protocol on small domains.

1. Privacy: :func:`dpkit.ldp.check_ldp` computes the exact law of the report for every input and
   checks ``max ratio <= e^eps`` against a certified lower bound of ``e^eps``; it must hold for
   every protocol, be nearly tight (the protocols use their budget), and fail for a unary
   encoding with the wrong probabilities (the bug of a popular LDP library: SUE flipping bits
   with ``p = e^eps/(e^eps+1)`` is 2 eps-LDP, not eps-LDP).
2. Unbiasedness and variance, exactly: summing the server's support indicator of every possible
   report weighted by its exact probability must give ``p`` for the user's own value and ``q`` for
   every other one, which is what the count estimator and its variance formula assume.
   For the mean mechanisms, ``E[t_hat] = t`` and ``Var[t_hat] = a + b t^2`` on grid inputs.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpkit import ldp
from dpkit.ldp import client

EPSILONS = [0.1, 0.5, 1.0, 2.0, 4.0]


def _oracles(eps: float, d: int) -> list[ldp.FrequencyOracle]:
    out: list[ldp.FrequencyOracle] = [
        ldp.GRR(epsilon=eps, domain=d),
        ldp.SUE(epsilon=eps, domain=d),
        ldp.OUE(epsilon=eps, domain=d),
        ldp.BLH(epsilon=eps, domain=d),
        ldp.HadamardResponse(epsilon=eps, domain=d),
    ]
    olh = ldp.OLH(epsilon=eps, domain=d)
    if olh.keys * olh.g <= 1 << 12:
        out.append(olh)
    return out


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("d", [2, 3, 5])
def test_every_frequency_oracle_is_exactly_eps_ldp(eps: float, d: int) -> None:
    for proto in _oracles(eps, d):
        res = ldp.check_ldp(proto)
        assert res.holds, (proto, res)
        assert res.laws_sum_to_one
        assert res.max_ratio is not None
        # tight: the protocol spends (nearly) all of its calibrated epsilon, epsilon (1 - 2**-40)
        # (dyadic rounding costs < 1e-12)
        assert res.epsilon == proto.run_epsilon < eps
        assert float(res.max_ratio) >= math.exp(proto.run_epsilon) * (1 - 1e-12), proto


@pytest.mark.parametrize("eps", EPSILONS)
def test_olh_with_larger_g_and_randomized_response(eps: float) -> None:
    assert ldp.check_ldp(ldp.OLH(epsilon=eps, domain=4, g=5)).holds
    assert ldp.check_ldp(ldp.RandomizedResponse(epsilon=eps)).holds
    rr = ldp.RandomizedResponse(p_truth=0.75)
    res = ldp.check_ldp(rr)
    assert res.holds and res.max_ratio == 3  # exactly p/(1-p)


@pytest.mark.parametrize("eps", EPSILONS)
def test_mean_mechanisms_are_exactly_eps_ldp(eps: float) -> None:
    for proto in (
        ldp.Duchi(epsilon=eps),
        ldp.Piecewise(epsilon=eps, resolution=3),
        ldp.Hybrid(epsilon=eps, resolution=2),
    ):
        res = ldp.check_ldp(proto)
        assert res.holds, (proto, res)
        # off-grid inputs are mixtures of grid inputs: check a few explicitly as well
        extra = ldp.check_ldp(proto, inputs=[Fraction(-1), Fraction(1, 3), 0.123, Fraction(1)])
        assert extra.holds


class _BrokenSUE(client.SUE):
    """SUE with the flipping probabilities of a full-epsilon randomized response per bit."""

    def _probabilities(self) -> tuple[Fraction, Fraction]:
        e = client.exp_bounds(self.epsilon)[0]
        p = Fraction(client.floor_scaled(e / (e + 1)), client.SCALE)
        return p, 1 - p


class _BrokenGRR(client.GRR):
    """GRR whose 'other' probability uses d instead of d - 1 (the law does not sum to 1)."""

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        p = Fraction(self._keep, client.SCALE)
        return p, (1 - p) / self.d


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_check_catches_unary_encoding_with_wrong_probabilities(eps: float) -> None:
    res = ldp.check_ldp(_BrokenSUE(epsilon=eps, domain=4))
    assert not res.holds
    assert res.max_ratio is not None
    assert float(res.max_ratio) == pytest.approx(math.exp(2 * eps), rel=1e-9)
    broken = ldp.check_ldp(_BrokenGRR(epsilon=eps, domain=4))
    assert not broken.holds and not broken.laws_sum_to_one


def test_check_reports_infinite_ratio_for_an_impossible_report() -> None:
    class Leaky(client.GRR):
        def report_distribution(self, value: object) -> dict[object, Fraction]:
            x = self.encode(value)
            return {x: Fraction(1)}  # no randomization at all

    res = ldp.check_ldp(Leaky(epsilon=1.0, domain=3))
    assert not res.holds and res.max_ratio is None


# ------------------------------------------------------------------------------------------
# exact first and second moments
# ------------------------------------------------------------------------------------------
def _expected_support(proto: ldp.FrequencyOracle, x: int) -> list[Fraction]:
    """Sum over reports of P(report | x) times the server's support indicator, exactly."""
    acc = [Fraction(0)] * proto.d
    for report, prob in proto.report_distribution(x).items():
        rep = list(report) if isinstance(report, tuple) else report
        arr, bad = proto.coerce_reports([rep])
        assert bad == 0
        ind = proto.support_counts(arr)
        for v in range(proto.d):
            if ind[v]:
                acc[v] += prob
    return acc


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("d", [2, 3, 5])
def test_support_probabilities_are_exact(eps: float, d: int) -> None:
    for proto in _oracles(eps, d):
        p, q = proto.support_probabilities()
        for x in range(d):
            acc = _expected_support(proto, x)
            assert acc == [p if v == x else q for v in range(d)], proto


def test_variance_formula_matches_the_exact_law() -> None:
    # one user holding item 0: Var[c_0] = p(1-p)/(p-q)^2 and Var[c_1] = q(1-q)/(p-q)^2
    for proto in _oracles(1.0, 4):
        p, q = proto.p, proto.q
        assert proto.variance(1, frequency=1.0) == pytest.approx(p * (1 - p) / (p - q) ** 2)
        assert proto.variance(1, frequency=0.0) == pytest.approx(q * (1 - q) / (p - q) ** 2)
        n, f = 1000, 0.3
        mix = n * (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (p - q) ** 2
        assert proto.variance(n, frequency=f) == pytest.approx(mix)
        # Wang et al.'s second form of the same variance
        wang = n * q * (1 - q) / (p - q) ** 2 + n * f * (1 - p - q) / (p - q)
        assert proto.variance(n, frequency=f) == pytest.approx(wang)


def test_closed_forms_of_wang_et_al() -> None:
    # the protocols run at epsilon (1 - 2**-40) (dpkit.ldp.client, Calibration)
    run = client.calibrated_epsilon(1.0)
    e, n, d = math.exp(run), 1000, 64
    assert ldp.GRR(epsilon=1, domain=d).variance(n) == pytest.approx(
        n * (d - 2 + e) / (e - 1) ** 2, rel=1e-12
    )
    h = math.exp(run / 2)
    assert ldp.SUE(epsilon=1, domain=d).variance(n) == pytest.approx(
        n * h / (h - 1) ** 2, rel=1e-12
    )
    assert ldp.OUE(epsilon=1, domain=d).variance(n) == pytest.approx(
        n * 4 * e / (e - 1) ** 2, rel=1e-12
    )
    assert ldp.HadamardResponse(epsilon=1, domain=d).variance(n) == pytest.approx(
        n * (e + 1) ** 2 / (e - 1) ** 2, rel=1e-12
    )
    g = ldp.OLH(epsilon=1, domain=d).g
    p, q = e / (e + g - 1), 1 / g
    assert ldp.OLH(epsilon=1, domain=d).variance(n) == pytest.approx(
        n * q * (1 - q) / (p - q) ** 2, rel=1e-12
    )
    # binary RR = GRR on two values
    assert ldp.RandomizedResponse(epsilon=1).variance(n, 0.3) == pytest.approx(
        ldp.GRR(epsilon=1, domain=2).variance(n, 0.3), rel=1e-15
    )


def _moments(proto: ldp.MeanMechanism, t: Fraction) -> tuple[float, float]:
    law = proto.report_distribution(t)
    reports = np.array(sorted(law), dtype=np.int64)
    vals = proto.decode(reports)
    probs = np.array([float(law[int(r)]) for r in reports])
    mean = float(np.dot(probs, vals))
    return mean, float(np.dot(probs, vals**2)) - mean**2


@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
def test_mean_mechanisms_unbiased_with_stated_variance(eps: float) -> None:
    for proto in (
        ldp.Duchi(epsilon=eps),
        ldp.Piecewise(epsilon=eps, resolution=4),
        ldp.Hybrid(epsilon=eps, resolution=4),
    ):
        inputs = proto.exact_inputs()
        for t in [*inputs[:: max(1, len(inputs) // 7)], Fraction(1)]:
            mean, var = _moments(proto, t)
            assert mean == pytest.approx(float(t), abs=1e-9), proto
            assert var == pytest.approx(proto.variance(1, mean_square=float(t) ** 2), rel=1e-9)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_piecewise_grid_tends_to_the_continuous_variance(eps: float) -> None:
    run = client.calibrated_epsilon(eps)  # what the probabilities are calibrated to
    h = math.exp(run / 2)
    pm = ldp.Piecewise(epsilon=eps)
    for t in (0.0, 0.5, 1.0):
        cont = t * t / (h - 1) + (h + 3) / (3 * (h - 1) ** 2)
        assert pm.variance(1, mean_square=t * t) == pytest.approx(cont, rel=1e-3)
    b = (math.exp(run) + 1) / (math.exp(run) - 1)
    assert ldp.Duchi(epsilon=eps).variance(1, 0.25) == pytest.approx(b * b - 0.25, rel=1e-12)
