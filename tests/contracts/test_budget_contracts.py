"""The budget contract applied to every kind of budget (pure, basic, RDP, zCDP, GDP) and to
every budget class exported by :mod:`dpkit.accounting`."""

from __future__ import annotations

import inspect

from budget_contract import BudgetContract

import dpkit.accounting as accounting
from dpkit.accounting import Budget, GdpFilter, ZCdpFilter
from dpkit.accounting.budget import _METHODS
from dpkit.events import (
    ApproxDpEvent,
    DpEvent,
    GaussianEvent,
    LaplaceEvent,
    ZCdpEvent,
)


class TestPureBudgetContract(BudgetContract):
    def make_budget(self) -> Budget:
        return Budget(epsilon=1.0)

    def supported_event(self) -> DpEvent:
        return LaplaceEvent(noise_multiplier=10.0)


class TestBasicBudgetContract(BudgetContract):
    def make_budget(self) -> Budget:
        return Budget(epsilon=1.0, delta=1e-6)

    def supported_event(self) -> DpEvent:
        return ApproxDpEvent(epsilon=0.1, delta=1e-8)


class TestRdpBudgetContract(BudgetContract):
    def make_budget(self) -> Budget:
        return Budget(epsilon=1.0, delta=1e-6, method="rdp")

    def supported_event(self) -> DpEvent:
        return GaussianEvent(noise_multiplier=10.0)


class TestRdpOrderBudgetContract(BudgetContract):
    def make_budget(self) -> Budget:
        return Budget(epsilon=1.0, delta=1e-6, method="rdp", rdp_order=32.0)

    def supported_event(self) -> DpEvent:
        return GaussianEvent(noise_multiplier=40.0)  # one order: a looser conversion


class TestZCdpBudgetContract(BudgetContract):
    def make_budget(self) -> Budget:
        return Budget(epsilon=1.0, delta=1e-6, method="zcdp")

    def supported_event(self) -> DpEvent:
        return ZCdpEvent(rho=0.001)


class TestGdpBudgetContract(BudgetContract):
    def make_budget(self) -> Budget:
        return Budget(epsilon=1.0, delta=1e-6, method="gdp")

    def supported_event(self) -> DpEvent:
        return GaussianEvent(noise_multiplier=10.0, pmf_slack=2.0**-30)


class TestZCdpFilterContract(BudgetContract):
    def make_budget(self) -> Budget:
        return ZCdpFilter(rho=0.05)

    def supported_event(self) -> DpEvent:
        return ZCdpEvent(rho=0.001)


class TestGdpFilterContract(BudgetContract):
    def make_budget(self) -> Budget:
        return GdpFilter(mu=0.5)

    def supported_event(self) -> DpEvent:
        return GaussianEvent(noise_multiplier=10.0, pmf_slack=2.0**-30)


ENROLLED = {
    Budget: TestPureBudgetContract,
    ZCdpFilter: TestZCdpFilterContract,
    GdpFilter: TestGdpFilterContract,
}
KINDS = {
    "pure": TestPureBudgetContract,
    "basic": TestBasicBudgetContract,
    "rdp": TestRdpBudgetContract,
    "zcdp": TestZCdpBudgetContract,
    "gdp": TestGdpBudgetContract,
}


def test_every_budget_class_and_kind_is_enrolled() -> None:
    classes = {
        obj
        for name in accounting.__all__
        if inspect.isclass(obj := getattr(accounting, name)) and issubclass(obj, Budget)
    }
    assert classes == set(ENROLLED)
    for cls, suite in ENROLLED.items():
        assert type(suite().make_budget()) is cls
    assert set(KINDS) == {"pure", *_METHODS}
    for kind, suite in KINDS.items():
        assert suite().make_budget().kind == kind
