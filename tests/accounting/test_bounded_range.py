"""Bounded-range accounting of the exponential mechanism (Cesar and Rogers 2021).

The exponential mechanism at epsilon is epsilon-bounded-range, hence epsilon^2/8-zCDP; the
zCDP and Renyi accountants (and the budgets built on them) charge it that, a quarter of a
generic epsilon-DP event. Checked here on exact output laws (mpmath), against a generic pure
mechanism for which the rule would be false, and on budgets.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from dpkit.accounting import RdpAccountant, ZCdpAccountant
from dpkit.accounting.budget import Budget
from dpkit.accounting.zcdp import zcdp_cost_of
from dpkit.events import (
    ExponentialMechanismEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
)
from dpkit.mechanisms import ExponentialMechanism, NoisyTopK

ORDERS = (1.01, 1.5, 2.0, 4.0, 16.0, 64.0)


def _renyi(p: list[mpmath.mpf], q: list[mpmath.mpf], a: float) -> mpmath.mpf:
    al = mpmath.mpf(a)
    return mpmath.log(mpmath.fsum(x**al * y ** (1 - al) for x, y in zip(p, q, strict=True))) / (
        al - 1
    )


def _em_law(scores: np.ndarray, eps: float, monotonic: bool) -> list[mpmath.mpf]:
    c = 1 if monotonic else 2
    w = [mpmath.exp(mpmath.mpf(eps) * mpmath.mpf(float(u)) / c) for u in scores]
    total = mpmath.fsum(w)
    return [x / total for x in w]


@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_mechanism_is_bounded_range_and_eighth_zcdp(monotonic: bool) -> None:
    # Random neighbouring score vectors (sensitivity 1; monotone pairs move every score the same
    # way): the privacy loss spans at most epsilon and every Renyi divergence is at most
    # alpha epsilon^2 / 8, in 40-digit arithmetic.
    rng = np.random.default_rng(11)
    eps = 1.3
    with mpmath.workdps(40):
        for _ in range(40):
            u = rng.normal(0, 3, size=6)
            d = rng.uniform(0, 1, size=6) if monotonic else rng.uniform(-1, 1, size=6)
            p, q = _em_law(u, eps, monotonic), _em_law(u + d, eps, monotonic)
            loss = [mpmath.log(x / y) for x, y in zip(p, q, strict=True)]
            assert max(loss) - min(loss) <= eps + 1e-30
            for a in ORDERS:
                assert _renyi(p, q, a) <= a * eps * eps / 8
                assert _renyi(q, p, a) <= a * eps * eps / 8


def test_the_rule_does_not_hold_for_a_generic_pure_mechanism() -> None:
    # Companion: binary randomized response at epsilon is epsilon-DP but 2 epsilon-bounded-range,
    # and its Renyi divergence exceeds alpha epsilon^2 / 8, so the quarter is specific to the
    # exponential mechanism; the accountants keep epsilon^2 / 2 for it.
    eps = 1.3
    with mpmath.workdps(40):
        e = mpmath.mpf(eps)
        p = [mpmath.exp(e) / (1 + mpmath.exp(e)), 1 / (1 + mpmath.exp(e))]
        assert _renyi(p, p[::-1], 2.0) > 2.0 * eps * eps / 8
    rr = zcdp_cost_of(RandomizedResponseEvent(p_truth=math.exp(eps) / (1 + math.exp(eps))))
    assert rr is not None and rr[0] > Fraction(eps) ** 2 / 8


def test_accountants_charge_an_eighth() -> None:
    em = ExponentialMechanismEvent(epsilon=0.5)
    assert zcdp_cost_of(em) == (Fraction(1, 32), Fraction(0))
    assert zcdp_cost_of(ReportNoisyMaxEvent(epsilon=0.5, noise="gumbel")) == zcdp_cost_of(em)
    # Laplace and exponential noise are not the exponential mechanism: epsilon^2 / 2
    for noise in ("laplace", "exponential"):
        assert zcdp_cost_of(ReportNoisyMaxEvent(epsilon=0.5, noise=noise)) == (
            Fraction(1, 8),
            Fraction(0),
        )
    rdp = RdpAccountant()
    rdp.compose(em)
    pure = RdpAccountant()
    pure.compose(PureDpEvent(epsilon=0.5))
    assert np.all(rdp.rdp <= pure.rdp)
    assert np.all(rdp.rdp <= rdp.orders * 0.5**2 / 8 * (1 + 1e-12))


def test_k_selections_compose_tighter_than_k_epsilon() -> None:
    # 10 Gumbel top-k rounds at epsilon 0.1 each: basic composition says 1.0; zCDP with the
    # bounded-range rule 10 * 0.01 / 8 = 0.0125, hence epsilon(1e-6) about 0.84, while the
    # generic pure-to-zCDP rule gives rho 0.05 (epsilon about 1.47).
    topk = NoisyTopK(epsilon=1.0, sensitivity=1.0, k=10).event
    z = ZCdpAccountant()
    z.compose(topk)
    assert z.rho <= 0.0125
    eps_br = z.get_epsilon(1e-6)
    assert eps_br < 0.85
    generic = ZCdpAccountant()
    generic.compose(PureDpEvent(epsilon=0.1), 10)
    assert generic.get_epsilon(1e-6) > 1.4
    r = RdpAccountant()
    r.compose(topk)
    assert r.get_epsilon(1e-6) < 0.9


def test_budgets_use_the_rule() -> None:
    # A one-shot top-10 at total epsilon 1.2 fits an (1, 1e-6) budget in zCDP or RDP (rho 0.018
    # against 0.0229), which its pure-DP reading (1.2 > 1, or rho 0.072) could not.
    mech = NoisyTopK(epsilon=1.2, sensitivity=1.0, k=10)
    for method in ("zcdp", "rdp"):
        budget = Budget(epsilon=1.0, delta=1e-6, method=method)
        budget.charge(mech.event)
        assert budget.spent[0] <= 1.0
    assert not Budget(epsilon=1.0, delta=1e-6).can_charge(mech.event)
    # the exponential mechanism's exact law is what the rule was checked on
    em = ExponentialMechanism(epsilon=0.12, sensitivity=1.0)
    assert zcdp_cost_of(em.event) is not None
