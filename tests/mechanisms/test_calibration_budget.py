"""A mechanism calibrated to e is accepted by a budget of e; k calibrated to e / k, by a budget
of e. Checked with the real :class:`dpkit.accounting.budget.Budget` (exact rational sums).

Before: ``Budget(epsilon=1.0).charge(Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
.event)`` raised (it charged 1.0000000000000002), two at 0.5 did not fit 1.0, three at 1/3
neither, and ``RandomizedResponse.from_epsilon(epsilon=1.0).epsilon`` was 1.0000000000000027.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting.budget import Budget
from dpkit.accounting.pure import pure_epsilon_of
from dpkit.mechanisms import DiscreteLaplace, Gaussian, Laplace, RandomizedResponse

BUILDERS: list[tuple[str, Callable[[float], Any]]] = [
    ("Laplace", lambda e: Laplace.from_epsilon(epsilon=e, sensitivity=1.0)),
    ("Laplace_sens_3.7", lambda e: Laplace.from_epsilon(epsilon=e, sensitivity=3.7)),
    (
        "Laplace_replace",
        lambda e: Laplace.from_epsilon(epsilon=e, sensitivity=0.1, neighbouring="replace"),
    ),
    ("DiscreteLaplace", lambda e: DiscreteLaplace.from_epsilon(epsilon=e, sensitivity=1)),
    ("DiscreteLaplace_sens_7", lambda e: DiscreteLaplace.from_epsilon(epsilon=e, sensitivity=7)),
    ("RandomizedResponse", lambda e: RandomizedResponse.from_epsilon(epsilon=e)),
]
IDS = [b[0] for b in BUILDERS]


def _relation(build: Callable[[float], Any]) -> Any:
    """The relation the mechanism states (a budget charges it only under that relation)."""
    return build(1.0).event.neighbouring


@pytest.mark.parametrize(("name", "build"), BUILDERS, ids=IDS)
@pytest.mark.parametrize("k", [1, 2, 3, 7, 10])
def test_k_mechanisms_at_one_kth_fit_a_budget_of_one(
    name: str, build: Callable[[float], Any], k: int
) -> None:
    acct = Budget(epsilon=1.0, neighbouring=_relation(build))
    for _ in range(k):
        acct.charge(build(1.0 / k).event)  # raises BudgetExceededError if it does not fit
    assert acct.spent[0] <= 1.0


@pytest.mark.parametrize(("name", "build"), BUILDERS, ids=IDS)
def test_the_reported_epsilon_is_what_the_budget_charges(
    name: str, build: Callable[[float], Any]
) -> None:
    for eps in (1.0, 0.5, 1 / 3, 0.1, 2.0, 7.3, 1e-3):
        mech = build(eps)
        charged = pure_epsilon_of(mech.event)
        assert isinstance(charged, Fraction)
        assert mech.epsilon >= charged  # rounded up from the same number ...
        assert mech.epsilon <= eps  # ... and within the target
        acct = Budget(epsilon=eps, neighbouring=mech.event.neighbouring)
        acct.charge(mech.event)
        assert acct.spent[0] == mech.epsilon


def test_the_issue_repros() -> None:
    Budget(epsilon=1.0).charge(Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0).event)
    assert RandomizedResponse.from_epsilon(epsilon=1.0).epsilon <= 1.0


@settings(max_examples=150, deadline=None)
@given(e=st.floats(1e-3, 30.0), k=st.integers(1, 50), which=st.sampled_from(range(len(BUILDERS))))
def test_any_split_of_any_budget_fits(e: float, k: int, which: int) -> None:
    build = BUILDERS[which][1]
    mech = build(e / k)
    acct = Budget(epsilon=e, neighbouring=mech.event.neighbouring)
    acct.charge(mech.event, count=k)  # k identical mechanisms, exact sum of k costs


@settings(max_examples=100, deadline=None)
@given(e=st.floats(1e-3, 30.0), parts=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=6))
def test_uneven_splits_fit_too(e: float, parts: list[float]) -> None:
    total = sum(parts)
    shares = [e * p / total for p in parts]  # floating-point shares that sum to about e
    acct = Budget(epsilon=e)
    for share in shares:
        acct.charge(Laplace.from_epsilon(epsilon=share, sensitivity=1.0).event)


@settings(max_examples=100, deadline=None)
@given(mu=st.floats(1e-3, 50.0), sens=st.floats(1e-6, 1e6))
def test_gaussian_from_mu_is_read_as_at_most_mu(mu: float, sens: float) -> None:
    mech = Gaussian.from_mu(mu=mu, sensitivity=sens)
    assert 1 / Fraction(mech.event.noise_multiplier) <= Fraction(mu)
    assert mech.mu <= mu


@settings(max_examples=30, deadline=None)
@given(eps=st.floats(0.05, 5.0), delta=st.floats(1e-10, 1e-3))
def test_gaussian_from_epsilon_delta_certificate_is_within_the_target(
    eps: float, delta: float
) -> None:
    mech = Gaussian.from_epsilon_delta(epsilon=eps, delta=delta, sensitivity=1.0)
    assert mech.delta_for(epsilon=eps) <= delta


def test_randomized_response_beyond_the_largest_epsilon_spends_less() -> None:
    for eps in (36.0, 37.0, 40.0, 700.0, 1e300):
        mech = RandomizedResponse.from_epsilon(epsilon=eps)
        assert mech.epsilon <= eps
        assert mech.p <= 1.0 - 2.0**-53
    assert RandomizedResponse.from_epsilon(epsilon=40.0).p == 1.0 - 2.0**-53
