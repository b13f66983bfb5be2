"""ZCdpFilter / GdpFilter survive a to_json / from_json round trip (ledger replayed)."""

from __future__ import annotations

import json

import pytest

from dpkit.accounting.budget import Budget
from dpkit.accounting.filters import GdpFilter, ZCdpFilter
from dpkit.errors import BudgetExceededError, SerializationError
from dpkit.events import GaussianEvent, event_to_dict


def _gauss(noise_multiplier: float) -> GaussianEvent:
    return GaussianEvent(noise_multiplier=noise_multiplier)


@pytest.mark.parametrize(
    "make", [lambda: ZCdpFilter(rho=0.5, delta=1e-6), lambda: GdpFilter(mu=1.0, delta=1e-6)]
)
def test_round_trip_keeps_type_budget_and_ledger(make: object) -> None:
    f = make()  # type: ignore[operator]
    f.charge(_gauss(2.0), count=2)
    g = type(f).from_json(f.to_json())
    assert type(g) is type(f)
    assert g.ledger == f.ledger
    assert g.spent_native == f.spent_native
    assert g.remaining_native == f.remaining_native
    assert g.to_json() == f.to_json()
    assert g.epsilon(1e-6) == f.epsilon(1e-6)
    # the rebuilt filter still refuses what the original refuses
    with pytest.raises(BudgetExceededError):
        g.charge(_gauss(0.1))


def test_other_kinds_of_budget_are_refused() -> None:
    plain = Budget(epsilon=1.0).to_json()
    with pytest.raises(SerializationError):
        ZCdpFilter.from_json(plain)
    with pytest.raises(SerializationError):
        GdpFilter.from_json(plain)
    with pytest.raises(SerializationError):
        GdpFilter.from_json(ZCdpFilter(rho=0.5).to_json())
    with pytest.raises(SerializationError):
        ZCdpFilter.from_json(GdpFilter(mu=1.0).to_json())


def test_over_full_ledger_is_refused() -> None:
    # rho of Gaussian(noise multiplier 0.5) is 2 > 0.01: a filter never accepted this ledger
    data = json.loads(ZCdpFilter(rho=0.01).to_json())
    data["ledger"] = [{"event": event_to_dict(_gauss(0.5)), "count": 1}]
    with pytest.raises(SerializationError):
        ZCdpFilter.from_json(json.dumps(data))
