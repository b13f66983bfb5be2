"""k Gaussian mechanisms calibrated to (epsilon/k, delta/k) fit a basic Budget(epsilon, delta).

A basic budget reads a bare Gaussian event at all the delta it has left, so the first of k such
mechanisms used to take the whole remaining delta and the second cost infinite epsilon (42 of 43
cases refused). A mechanism from ``Gaussian.from_epsilon_delta`` is charged as its certified
pair at the delta it was calibrated to (a hair under it), recorded as such in the ledger.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit import Gaussian
from dpkit.accounting import Budget
from dpkit.ledger import SqliteLedger


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(0.01, 20.0), delta_exp=st.floats(-12.0, -3.0), k=st.integers(1, 50))
def test_k_gaussians_of_a_kth_fit_and_one_more_does_not(
    eps: float, delta_exp: float, k: int
) -> None:
    delta = 10.0**delta_exp
    budget = Budget(epsilon=eps, delta=delta)
    g = Gaussian.from_epsilon_delta(epsilon=eps / k, delta=delta / k, sensitivity=1.0)
    for _ in range(k):
        budget.charge(g)
    assert not budget.can_charge(g)  # no overspend: the (k+1)-th is refused
    spent_eps, spent_delta = budget.spent
    assert spent_eps <= eps and spent_delta <= delta


def test_the_charged_pair_is_certified_by_the_mechanism_itself() -> None:
    """Cross-check with the mechanism's own certificate (``delta_for``, the exact profile of
    Balle and Wang 2018 with the floating-point slack): the pair charged holds for it."""
    for eps, delta in ((0.1, 1e-9), (1.0, 1e-6), (5.0, 1e-3)):
        g = Gaussian.from_epsilon_delta(epsilon=eps, delta=delta, sensitivity=2.0)
        budget = Budget(epsilon=10.0, delta=0.01)
        budget.charge(g)
        e1, d1 = budget.spent
        assert e1 <= eps and d1 < delta
        assert g.delta_for(epsilon=e1) <= d1


def test_a_bare_event_or_an_uncalibrated_gaussian_is_read_at_the_delta_left() -> None:
    g = Gaussian.from_epsilon_delta(epsilon=0.25, delta=2.5e-7, sensitivity=1.0)
    budget = Budget(epsilon=1.0, delta=1e-6)
    budget.charge(g.event)  # the event alone carries no calibration: all delta left is used
    assert budget.spent[1] == 1e-6
    assert not budget.can_charge(g)
    assert math.isinf(budget.cost_of(g).epsilon) or not budget.can_charge(g)


def test_a_replayed_ledger_charges_the_same_pairs(tmp_path: object) -> None:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "ledger.db"
    g = Gaussian.from_epsilon_delta(epsilon=0.1, delta=1e-7, sensitivity=1.0)
    budget = Budget(epsilon=1.0, delta=1e-6, ledger=SqliteLedger(str(path)), name="t")
    for _ in range(10):
        budget.charge(g)
    again = Budget.open(SqliteLedger(str(path)), name="t")
    assert again.spent == budget.spent
    assert not again.can_charge(g)
