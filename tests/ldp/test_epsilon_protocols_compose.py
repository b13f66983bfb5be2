"""Every local-DP protocol composes like ``Laplace.from_epsilon``: ``k`` protocols built with
``epsilon = e / k`` fit ``Budget(epsilon=e)`` and ``k + 1`` of them do not, and one protocol
fits a budget of its own epsilon.

Protocols that stated their epsilon parameter as is (OUE, SUE, OLH, BLH, HadamardResponse, Duchi,
Piecewise, Hybrid) were refused for ``k fl(e / k) > e`` (21 of 43 (e, k) cases); GRR and
RandomizedResponse, whose event rounded the truth probability up to a double, were refused even
once at their own epsilon. The law each runs is checked against its event by the contract
(``tests/contracts/ldp_contract.py``); here only the composition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit import ldp
from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError
from dpkit.ldp import client
from dpkit.mechanisms._calibration import calibrated_epsilon

PROTOCOLS: dict[str, Callable[[float], Any]] = {
    "RandomizedResponse": lambda e: ldp.RandomizedResponse(epsilon=e),
    "GRR(d=2)": lambda e: ldp.GRR(epsilon=e, domain=2),
    "GRR(d=7)": lambda e: ldp.GRR(epsilon=e, domain=7),
    "GRR(d=5000)": lambda e: ldp.GRR(epsilon=e, domain=5000),
    "SUE": lambda e: ldp.SUE(epsilon=e, domain=6),
    "OUE": lambda e: ldp.OUE(epsilon=e, domain=6),
    "OLH": lambda e: ldp.OLH(epsilon=e, domain=6),
    "BLH": lambda e: ldp.BLH(epsilon=e, domain=6),
    "HadamardResponse": lambda e: ldp.HadamardResponse(epsilon=e, domain=6),
    "RAPPOR": lambda e: ldp.RAPPOR(epsilon=e, domain=6),
    "LOLOHA": lambda e: ldp.LOLOHA(epsilon=e, domain=6),
    "CMS": lambda e: ldp.CMS(epsilon=e, domain=1 << 32, width=64, hashes=4),
    "HCMS": lambda e: ldp.HCMS(epsilon=e, domain=1 << 32, width=64, hashes=4),
    "OLHSketch": lambda e: ldp.OLHSketch(epsilon=e, domain=1 << 32, hashes=4),
    "Duchi": lambda e: ldp.Duchi(epsilon=e),
    "Piecewise": lambda e: ldp.Piecewise(epsilon=e, resolution=64),
    "Hybrid": lambda e: ldp.Hybrid(epsilon=e, resolution=64),
}


def test_every_registered_protocol_is_covered() -> None:
    assert {type(build(1.0)) for build in PROTOCOLS.values()} >= set(ldp.PROTOCOLS.values())


def _charges(budget: Budget, proto: Any, times: int) -> int:
    """How many of ``times`` charges of ``proto`` the budget accepts (stops at the first no)."""
    for i in range(times):
        try:
            budget.charge(proto)
        except BudgetExceededError:
            return i
    return times


def _budget(e: float, proto: Any) -> Budget:
    # the neighbouring relation the event states (randomized response: replace-one; a black-box
    # pure-DP event: add/remove), so the budget converts nothing
    nb = getattr(proto.event, "neighbouring", "add_remove")
    return Budget(epsilon=e, neighbouring=nb)


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 50), e=st.floats(0.05, 20.0))
def test_k_protocols_of_epsilon_over_k_fit_a_budget_of_epsilon(name: str, k: int, e: float) -> None:
    proto = PROTOCOLS[name](e / k)
    assert _charges(_budget(e, proto), proto, k + 1) == k  # k fit, the (k+1)-th is refused


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
@pytest.mark.parametrize("e", [0.01, 0.5, 1.0, 8.0, 20.0, 30.0])
def test_one_protocol_fits_a_budget_of_its_own_epsilon(name: str, e: float) -> None:
    proto = PROTOCOLS[name](e)
    assert _charges(_budget(e, proto), proto, 2) == 1


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_ten_protocols_at_a_tenth_fit_a_budget_of_one(name: str) -> None:
    proto = PROTOCOLS[name](0.1)
    assert _charges(_budget(1.0, proto), proto, 11) == 10


@settings(max_examples=500, deadline=None)
@given(e=st.floats(1e-300, 30.0))
def test_device_and_server_calibrate_the_same_epsilon(e: float) -> None:
    # the stand-alone client (standard library only) repeats dpkit's calibration rule
    assert client.calibrated_epsilon(e) == calibrated_epsilon(e)
