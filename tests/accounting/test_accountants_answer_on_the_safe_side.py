"""Regressions for soundness bugs found in review: each asserts the safe answer."""

from __future__ import annotations

import math
import warnings

import mpmath
import pytest

from dpkit.accounting.budget import Budget
from dpkit.accounting.composition import optimal_composition_delta, parallel_composition
from dpkit.accounting.pld import PldAccountant
from dpkit.accounting.rdp import RdpAccountant
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.events import GaussianEvent, PureDpEvent


def test_parallel_composition_under_replace_uses_group_privacy() -> None:
    # A replacement inside one part is a removal plus an addition: 2 eps, (1 + e^eps) delta.
    eps, delta = parallel_composition(epsilons=[1.0, 0.0], neighbouring="replace")
    assert eps >= 2.0
    eps, delta = parallel_composition(
        epsilons=[1.0, 1.0], deltas=[1e-6, 0.0], neighbouring="replace"
    )
    assert eps >= 2.0 and delta >= (1 + math.e) * 1e-6
    assert parallel_composition(epsilons=[1.0, 0.5], neighbouring="add_remove") == (1.0, 0.0)


def test_optimal_composition_delta_compares_exactly() -> None:
    # 10 * 0.1 == 1.0 in doubles, but the exact product of the doubles exceeds 1.
    got = optimal_composition_delta(epsilon=0.1, count=10, target_epsilon=1.0)
    mpmath.mp.dps = 60
    eps, k, t = mpmath.mpf(0.1), 10, mpmath.mpf(1.0)
    exact = (
        sum(
            mpmath.binomial(k, j) * (mpmath.e ** ((k - j) * eps) - mpmath.e ** (t + j * eps))
            for j in range(k + 1)
            if (k - 2 * j) * eps > t
        )
        / (1 + mpmath.e**eps) ** k
    )
    assert exact > 0 and got >= exact


def test_rdp_never_reports_zero_for_overflowing_orders() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        eps = RdpAccountant().compose(PureDpEvent(epsilon=1.8e305)).get_epsilon(1e-5)
    assert eps >= 1.8e305
    with pytest.raises(PrivacyParameterError):
        RdpAccountant(orders=(2.0, 1e308))
    budget = Budget(epsilon=1.0, delta=1e-5, method="rdp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(BudgetExceededError):
            budget.charge(epsilon=1e306)
    assert budget.spent == (0.0, 0.0)


def test_pld_never_answers_nan() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        eps = PldAccountant().compose(GaussianEvent(noise_multiplier=1e200)).get_epsilon(1e-5)
    assert not math.isnan(eps)
