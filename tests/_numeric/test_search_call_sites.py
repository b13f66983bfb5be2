"""Every caller of the one search returns the certified end: its predicate holds at the returned
value and fails at the other end of the final bracket (the adjacent double, the adjacent
integer, or the end ``rtol`` away)."""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from fractions import Fraction

import pytest

from dpkit import fdp
from dpkit._numeric.gaussian import gaussian_delta_up, gaussian_mu_for
from dpkit._numeric.rounding import down


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


def above(x: float) -> float:
    return math.nextafter(x, math.inf)


DELTAS = [1e-12, 1e-6, 1e-3, 0.2]


@pytest.mark.parametrize(
    "f",
    [fdp.gdp(mu=0.7), fdp.gdp(mu=3.0), fdp.laplace(mu=1.5), fdp.approx_dp(epsilon=1.0, delta=1e-4)],
)
@pytest.mark.parametrize("d", DELTAS)
def test_tradeoff_epsilon(f: fdp.TradeOffFunction, d: float) -> None:
    e = f.epsilon(d)
    if math.isinf(e):  # approx_dp below its own delta: no epsilon reaches it
        assert f.delta(1e7) > d
        return
    assert f.delta(e) <= d
    assert e == 0.0 or f.delta(below(e)) > d


@pytest.mark.parametrize("eps", [0.1, 1.0, 8.0])
@pytest.mark.parametrize("d", DELTAS)
def test_gaussian_calibration(eps: float, d: float) -> None:
    mu = gaussian_mu_for(eps, d)
    assert gaussian_delta_up(eps, mu) <= d < gaussian_delta_up(eps, above(mu))


def test_gaussian_calibration_stops_at_its_limit_on_a_certified_mu() -> None:
    mu = gaussian_mu_for(1e13, 0.5)  # every mu up to the limit qualifies
    assert mu == 2.0**19 and gaussian_delta_up(1e13, mu) <= 0.5


@pytest.mark.parametrize("sigma", [0.5, 2.0, 40.0])
@pytest.mark.parametrize("d", DELTAS)
def test_additive_gaussian_epsilon(sigma: float, d: float) -> None:
    from dpkit.mechanisms import Gaussian

    g = Gaussian.from_sigma(sigma=sigma, sensitivity=1.0)
    e = g.epsilon_for(delta=d)
    assert g.delta_for(epsilon=e) <= d
    assert e == 0.0 or g.delta_for(epsilon=below(e)) > d


@pytest.mark.parametrize(("mu", "slack"), [(0.5, 0.0), (2.0, 1e-9), (0.05, 1e-6)])
@pytest.mark.parametrize("d", DELTAS)
def test_gdp_epsilon(mu: float, slack: float, d: float) -> None:
    from dpkit.accounting.gdp import gdp_delta, gdp_epsilon

    e = gdp_epsilon(mu, slack, d)
    assert gdp_delta(mu, slack, e) <= d
    assert e == 0.0 or gdp_delta(mu, slack, below(e)) > d


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("d", DELTAS)
def test_zcdp_calibration(eps: float, d: float) -> None:
    from dpkit.accounting.zcdp import zcdp_delta, zcdp_rho_for

    rho = zcdp_rho_for(eps, d)
    assert zcdp_delta(rho, eps) <= d < zcdp_delta(above(rho), eps)


@pytest.mark.parametrize(("mu", "gamma"), [(1.0, 0.01), (0.3, 0.05), (3.0, 0.001)])
def test_clt_tangent_point(mu: float, gamma: float) -> None:
    from dpkit.fdp._clt import BerryEsseenBound

    b = BerryEsseenBound(mu, gamma)
    x1 = b._x1
    assert b.gamma < x1 < b._x_zero  # an interior tangent point in these cases
    assert b._h(x1) <= 0.0 < b._h(below(x1))


@pytest.mark.parametrize("target", [1.0, 40.0])
def test_dpsgd_noise_search(target: float) -> None:
    from dpkit.accounting.dpsgd import dpsgd_epsilon, dpsgd_noise_multiplier

    kw = {"sampling_rate": 0.02, "steps": 30, "delta": 1e-5, "method": "rdp"}
    s = dpsgd_noise_multiplier(epsilon=target, rtol=1e-2, **kw)  # type: ignore[arg-type]
    assert (s < 1.0) == (target > 10.0)  # one case expands the bracket down, one up
    assert dpsgd_epsilon(noise_multiplier=s, **kw) <= target  # type: ignore[arg-type]
    # the failing end of the final bracket is within rtol below s
    assert dpsgd_epsilon(noise_multiplier=s * (1 - 1e-2), **kw) > target  # type: ignore[arg-type]


@pytest.mark.parametrize(("eps", "delta", "k"), [(1.0, 1e-6, 1), (0.3, 1e-9, 5), (4.0, 1e-3, 2)])
def test_partition_selection_sigma_and_threshold(eps: float, delta: float, k: int) -> None:
    from dpkit.mechanisms.partition_selection import (
        GaussianPartitionSelection,
        _gauss_delta,
        _threshold_delta,
    )

    m = GaussianPartitionSelection.from_epsilon_delta(epsilon=eps, delta=delta, max_partitions=k)
    eps, delta = m.epsilon, m.delta  # calibrated to the pair it states (and is charged)
    assert eps is not None and delta is not None
    d_thr = down(Fraction(delta) * Fraction(0.5))
    d_gauss = down(Fraction(delta) - Fraction(d_thr))
    assert _gauss_delta(m.sigma, k, eps) <= d_gauss < _gauss_delta(below(m.sigma), k, eps)
    assert _threshold_delta(m.sigma, k, m.tau) <= d_thr
    assert m.tau == 1 or _threshold_delta(m.sigma, k, m.tau - 1) > d_thr


@pytest.mark.parametrize(("eps", "count"), [(0.1, 400), (1.0, 1000), (0.01, 50000), (2.0, 7)])
def test_composition_tail_index(eps: float, count: int) -> None:
    from dpkit.accounting.composition import _context, _kov_window, _log_binom

    with decimal.localcontext(_context()):
        e = Decimal(eps)
        log_tail = Decimal(-150)
        j0 = _kov_window(e, count, log_tail)[0]
        e_eps = e.exp()
        log1pe = e + (1 + (-e).exp()).ln()

        def skippable(j: int) -> bool:  # the bound of the docstring, written out again
            if j == 0:
                return True
            rho = j * e_eps / (count - j + 1)
            if rho >= 1:
                return False
            log_p = _log_binom(count, j) + (count - j) * e - count * log1pe
            return bool(log_p + (rho / (1 - rho)).ln() <= log_tail)

        assert skippable(j0)
        assert j0 == count // 2 or not skippable(j0 + 1)
