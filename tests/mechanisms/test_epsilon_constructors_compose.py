"""Every constructor that takes an epsilon composes like ``Laplace.from_epsilon``: ``k``
mechanisms built with ``epsilon = e / k`` fit ``Budget(epsilon=e)`` (and ``(e / k, d / k)`` fit
``Budget(epsilon=e, delta=d)``), and ``k + 1`` of them do not (no overspend).

A mechanism that charged its epsilon parameter as is made ten ``ExponentialMechanism(epsilon=
0.1)`` cost ``10 * fl(0.1) > 1``: the tenth was refused at 1.0000000000000002.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError
from dpkit.mechanisms import (
    BinnedQuantile,
    DiscreteLaplace,
    ExponentialMechanism,
    GaussianPartitionSelection,
    Laplace,
    PartitionSelection,
    RandomizedResponse,
    ReportNoisyMax,
)

PURE: dict[str, Callable[[float], Any]] = {
    "Laplace.from_epsilon": lambda e: Laplace.from_epsilon(epsilon=e, sensitivity=1.0),
    "DiscreteLaplace.from_epsilon": lambda e: DiscreteLaplace.from_epsilon(
        epsilon=e, sensitivity=1
    ),
    "ExponentialMechanism": lambda e: ExponentialMechanism(epsilon=e, sensitivity=1.0),
    "ExponentialMechanism(monotonic)": lambda e: ExponentialMechanism(
        epsilon=e, sensitivity=3.0, monotonic=True
    ),
    "ReportNoisyMax(laplace)": lambda e: ReportNoisyMax(epsilon=e, sensitivity=1.0),
    "ReportNoisyMax(gumbel)": lambda e: ReportNoisyMax(epsilon=e, sensitivity=2.0, noise="gumbel"),
    "ReportNoisyMax(exponential)": lambda e: ReportNoisyMax(
        epsilon=e, sensitivity=1.0, noise="exponential"
    ),
    "BinnedQuantile": lambda e: BinnedQuantile.from_epsilon(
        epsilon=e, quantiles=0.5, edges=[0.0, 1.0, 2.0]
    ),
    "BinnedQuantile(3 levels, 2 groups)": lambda e: BinnedQuantile.from_epsilon(
        epsilon=e, quantiles=[0.1, 0.5, 0.9], edges=[0.0, 1.0, 2.0], max_partitions=2
    ),
    "RandomizedResponse.from_epsilon": lambda e: RandomizedResponse.from_epsilon(epsilon=e),
}
APPROX: dict[str, Callable[[float, float], Any]] = {
    "PartitionSelection": lambda e, d: PartitionSelection.from_epsilon_delta(
        epsilon=e, delta=d, max_partitions=2
    ),
    "GaussianPartitionSelection.from_epsilon_delta": lambda e, d: (
        GaussianPartitionSelection.from_epsilon_delta(epsilon=e, delta=d, max_partitions=2)
    ),
}


def _charges(budget: Budget, mech: Any, times: int) -> int:
    """How many of ``times`` charges of ``mech`` the budget accepts (stops at the first no)."""
    for i in range(times):
        try:
            budget.charge(mech)
        except BudgetExceededError:
            return i
    return times


def _budget(name: str, e: float, d: float = 0.0) -> Budget:
    # randomized response states a replace-one guarantee
    nb = "replace" if name.startswith("RandomizedResponse") else "add_remove"
    return Budget(epsilon=e, delta=d, neighbouring=nb)


@pytest.mark.parametrize("name", sorted(PURE))
@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 50), e=st.floats(0.05, 20.0))
def test_k_mechanisms_of_epsilon_over_k_fit_a_budget_of_epsilon(
    name: str, k: int, e: float
) -> None:
    mech = PURE[name](e / k)
    assert _charges(_budget(name, e), mech, k + 1) == k  # k fit, the (k+1)-th is refused


@pytest.mark.parametrize("name", sorted(APPROX))
@settings(max_examples=15, deadline=None)
@given(k=st.integers(1, 50), e=st.floats(0.5, 10.0), d=st.floats(1e-9, 1e-4))
def test_k_selections_of_a_kth_fit_a_budget_of_epsilon_delta(
    name: str, k: int, e: float, d: float
) -> None:
    mech = APPROX[name](e / k, d / k)
    assert _charges(_budget(name, e, d), mech, k + 1) == k


@pytest.mark.parametrize("name", sorted(PURE))
def test_ten_mechanisms_at_a_tenth_fit_a_budget_of_one(name: str) -> None:
    assert _charges(_budget(name, 1.0), PURE[name](0.1), 11) == 10
