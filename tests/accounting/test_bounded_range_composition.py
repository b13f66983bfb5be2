"""Optimal composition of bounded-range mechanisms (Dong, Durfee and Rogers 2020).

Checked against independent mpmath evaluations of the binary worst-case pairs (the single
mechanism exactly, the non-adaptive binomial formula, the two-step adaptive recursion), ordered
between the single mechanism and the generic optimum for epsilon-DP (KOV), and used as an event
by an approximate-DP budget.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import optimal_composition, optimal_composition_delta
from dpkit.accounting.bounded_range import (
    bounded_range_bracket,
    bounded_range_composition,
    bounded_range_composition_delta,
    bounded_range_event,
)
from dpkit.accounting.budget import Budget
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.events import ApproxDpEvent, PureDpEvent, SelfComposedEvent
from dpkit.mechanisms import ExponentialMechanism, NoisyTopK


def _mp_weights(eps: mpmath.mpf, t: mpmath.mpf) -> mpmath.mpf:
    return (mpmath.exp(eps) - mpmath.exp(t)) / mpmath.expm1(eps)


def _mp_single(eps: float, x: float, grid: int = 1500) -> mpmath.mpf:
    """sup_t of the binary pair's hockey-stick at e^x, on a fine grid (a lower estimate)."""
    e, xx = mpmath.mpf(eps), mpmath.mpf(x)
    best = mpmath.mpf(0)
    for i in range(grid + 1):
        t = e * i / grid
        p = _mp_weights(e, t)
        v = p * max(0, 1 - mpmath.exp(xx - t)) + (1 - p) * max(0, 1 - mpmath.exp(xx - t + e))
        best = max(best, v)
    return best


def _mp_nonadaptive(eps: float, k: int, x: float, t: mpmath.mpf) -> mpmath.mpf:
    e, xx = mpmath.mpf(eps), mpmath.mpf(x)
    p = _mp_weights(e, t)
    total = mpmath.mpf(0)
    for n in range(k + 1):
        loss = k * t - (k - n) * e
        w = 1 - mpmath.exp(xx - loss)
        if w > 0:
            total += mpmath.binomial(k, n) * p**n * (1 - p) ** (k - n) * w
    return total


def test_single_mechanism_matches_mpmath() -> None:
    with mpmath.workdps(40):
        for eps, x in [(0.5, 0.0), (0.5, 0.2), (1.0, 0.3), (2.0, 1.0)]:
            exact = _mp_single(eps, x)
            for adaptive in (False, True):
                lo, hi = bounded_range_bracket(
                    epsilon=eps, count=1, target_epsilon=x, adaptive=adaptive, resolution=512
                )
                assert lo - 1e-12 <= exact <= hi + 1e-12
                assert hi - lo < 0.03 * max(float(exact), 1e-3)


def test_nonadaptive_matches_mpmath_binomial_sum() -> None:
    eps, k, x = 0.5, 6, 1.0
    with mpmath.workdps(40):
        best = max(_mp_nonadaptive(eps, k, x, mpmath.mpf(eps) * i / 600) for i in range(601))
    lo, hi = bounded_range_bracket(
        epsilon=eps, count=k, target_epsilon=x, adaptive=False, resolution=512
    )
    assert best <= hi + 1e-12  # the mpmath grid maximum is itself attained
    assert abs(lo - float(best)) < 1e-4 * float(best)  # two grids of attained values
    assert hi - lo < 0.02 * float(best)
    certified = bounded_range_composition_delta(
        epsilon=eps, count=k, target_epsilon=x, adaptive=False, resolution=512
    )
    assert certified >= best


def test_two_step_adaptive_recursion_matches_mpmath() -> None:
    """V_2(x) = sup_t [p_t V_1(x - t) + (1 - p_t) V_1(x - t + eps)], brute force in mpmath."""
    eps, x = 0.8, 0.6
    with mpmath.workdps(20):
        e = mpmath.mpf(eps)
        best = mpmath.mpf(0)
        for i in range(61):
            t = e * i / 60
            p = _mp_weights(e, t)
            v = p * _mp_single(eps, float(x - t), 120) + (1 - p) * _mp_single(
                eps, float(x - t + e), 120
            )
            best = max(best, v)
    lo, hi = bounded_range_bracket(
        epsilon=eps, count=2, target_epsilon=x, adaptive=True, resolution=256
    )
    assert best <= hi + 1e-12
    assert abs(lo - float(best)) < 0.03 * float(best)  # two grid strategies, both attained
    assert hi - float(best) < 0.04 * float(best)


def test_adaptivity_costs_more_than_fixed_mechanisms() -> None:
    """DDR20's gap: the adaptive lower bound exceeds the non-adaptive upper bound."""
    for eps, k, x in [(1.0, 3, 1.0), (2.0, 3, 2.0), (0.5, 10, 5 / 3)]:
        lo_ad, _ = bounded_range_bracket(
            epsilon=eps, count=k, target_epsilon=x, adaptive=True, resolution=64
        )
        _, hi_na = bounded_range_bracket(
            epsilon=eps, count=k, target_epsilon=x, adaptive=False, resolution=8192
        )
        assert lo_ad > hi_na * 1.03


@settings(max_examples=12, deadline=None)
@given(
    eps=st.floats(min_value=0.05, max_value=2.0),
    k=st.integers(min_value=1, max_value=8),
    log_delta=st.floats(min_value=-10.0, max_value=-2.0),
)
def test_between_single_mechanism_and_kov(eps: float, k: int, log_delta: float) -> None:
    delta = 10.0**log_delta
    kov = optimal_composition(epsilon=eps, count=k, delta=delta)
    single = bounded_range_composition(epsilon=eps, count=1, delta=delta, resolution=32)
    na = bounded_range_composition(epsilon=eps, count=k, delta=delta, adaptive=False, resolution=32)
    ad = bounded_range_composition(epsilon=eps, count=k, delta=delta, resolution=32)
    grid = eps / 32
    # both on the same grid (adaptive is never cheaper); the grid points are float sums
    assert na <= ad + grid + 1e-12 * ad
    assert ad <= kov + grid  # a bounded-range mechanism is epsilon-DP
    assert ad <= k * eps * (1 + 1e-12)
    assert single <= ad + 1e-12
    # the certified delta at the returned epsilon really is below the target
    assert bounded_range_composition_delta(
        epsilon=eps, count=k, target_epsilon=ad, resolution=32
    ) <= delta or ad >= k * eps * (1 - 1e-12)


def test_delta_never_above_kov_profile() -> None:
    for eps, k, x in [(0.1, 20, 0.5), (0.5, 10, 2.0), (1.0, 4, 1.5)]:
        ours = bounded_range_composition_delta(epsilon=eps, count=k, target_epsilon=x)
        assert ours <= optimal_composition_delta(epsilon=eps, count=k, target_epsilon=x)
        assert ours > 0.0


def test_gumbel_top_k_event_charged_to_an_approx_budget() -> None:
    mech = NoisyTopK(epsilon=1.0, sensitivity=1.0, k=10, method="gumbel")
    ev = bounded_range_event(mech.event, delta=1e-6)
    assert isinstance(ev, ApproxDpEvent)
    assert ev.delta == 1e-6
    assert ev.epsilon < 1.0  # k bounded-range rounds at 0.1 cost less than basic composition
    kov = optimal_composition(epsilon=mech.event.event.epsilon, count=10, delta=1e-6)  # type: ignore[attr-defined]
    assert ev.epsilon <= kov
    budget = Budget(epsilon=1.3, delta=1e-5)
    budget.charge(ev)
    budget.charge(ev)  # two releases fit where two basic charges of 1.0 would not
    assert budget.spent[0] <= 1.3
    with pytest.raises(BudgetExceededError):
        Budget(epsilon=1.3, delta=1e-5).charge(SelfComposedEvent(event=mech.event, count=2))


def test_repeated_em_release_many_nonadaptive() -> None:
    em = ExponentialMechanism(epsilon=0.1, sensitivity=1.0)
    ev = bounded_range_event(
        SelfComposedEvent(event=em.event, count=20), delta=1e-6, adaptive=False
    )
    ad = bounded_range_event(SelfComposedEvent(event=em.event, count=20), delta=1e-6)
    assert ev.epsilon <= ad.epsilon < 2.0


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"epsilon": math.nan}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": math.inf}, "epsilon"),
        ({"epsilon": 800.0}, "700"),
        ({"count": -1}, "count"),
        ({"count": 1.5}, "count"),
        ({"count": 10**6}, "count"),
        ({"delta": 1.5}, "delta"),
        ({"delta": math.nan}, "delta"),
        ({"adaptive": 1}, "adaptive"),
        ({"resolution": 1}, "resolution"),
    ],
)
def test_parameters_validated(kwargs: dict[str, object], word: str) -> None:
    args: dict[str, object] = {"epsilon": 0.5, "count": 3, "delta": 1e-6, **kwargs}
    with pytest.raises(PrivacyParameterError, match=word):
        bounded_range_composition(**args)  # type: ignore[arg-type]


def test_event_refuses_non_bounded_range() -> None:
    with pytest.raises(PrivacyParameterError, match="exponential"):
        bounded_range_event(SelfComposedEvent(event=PureDpEvent(epsilon=1.0), count=3), delta=1e-6)
    rnm = NoisyTopK(epsilon=1.0, sensitivity=1.0, k=3, method="peeling", noise="laplace")
    with pytest.raises(PrivacyParameterError):
        bounded_range_event(rnm.event, delta=1e-6)


def test_certified_delta_bounds_the_exact_gumbel_top_k_profile() -> None:
    """End to end: the exact law of a one-shot Gumbel top-3 of 5 candidates
    (``probability_of``, all 60 ordered outputs) on neighbouring scores has, at every
    threshold, a hockey-stick divergence below the certified adaptive bound of its event."""
    mech = NoisyTopK(epsilon=1.5, sensitivity=1.0, k=3, method="gumbel")
    u = [0.0, 1.0, 1.0, 2.0, 0.0]
    v = [1.0, 0.0, 0.0, 1.0, 1.0]  # every score moves by one
    outs = list(itertools.permutations(range(5), 3))
    p = np.array([mech.probability_of(u, o) for o in outs])
    q = np.array([mech.probability_of(v, o) for o in outs])
    assert p.sum() == pytest.approx(1.0) and q.sum() == pytest.approx(1.0)
    per_round = mech.event.event.epsilon  # type: ignore[attr-defined]
    for x in (0.0, 0.3, 0.6, 0.9):
        for a, b in ((p, q), (q, p)):
            exact = float(np.maximum(0.0, a - math.exp(x) * b).sum())
            bound = bounded_range_composition_delta(
                epsilon=per_round, count=3, target_epsilon=x, resolution=64
            )
            assert exact <= bound + 1e-12
            assert exact <= optimal_composition_delta(epsilon=per_round, count=3, target_epsilon=x)
