"""The accountant contract applied to the pure, approximate, Renyi, zCDP and exact-GDP
accountants."""

from __future__ import annotations

import pytest
from accountant_contract import AccountantContract

from dpkit.accounting._base import PrivacyAccountant
from dpkit.accounting.approx import ApproxDpAccountant
from dpkit.accounting.gdp import ExactGdpAccountant
from dpkit.accounting.pure import PureDpAccountant
from dpkit.accounting.rdp import RdpAccountant
from dpkit.accounting.zcdp import ZCdpAccountant
from dpkit.events import (
    ApproxDpEvent,
    DpEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    ZCdpEvent,
)


class TestPureDpContract(AccountantContract):
    def make_accountant(self) -> PrivacyAccountant:
        return PureDpAccountant()

    def supported_event(self) -> DpEvent:
        return LaplaceEvent(noise_multiplier=2.0)


class TestApproxDpContract(AccountantContract):
    def make_accountant(self) -> PrivacyAccountant:
        return ApproxDpAccountant()

    def supported_event(self) -> DpEvent:
        return ApproxDpEvent(epsilon=0.3, delta=1e-8)


class TestApproxDpLaplaceContract(AccountantContract):
    def make_accountant(self) -> PrivacyAccountant:
        return ApproxDpAccountant()

    def supported_event(self) -> DpEvent:
        return LaplaceEvent(noise_multiplier=3.0)


class TestRdpGaussianContract(AccountantContract):
    def make_accountant(self) -> PrivacyAccountant:
        return RdpAccountant()

    def supported_event(self) -> DpEvent:
        return GaussianEvent(noise_multiplier=2.0)


class TestRdpSubsampledContract(AccountantContract):
    query_epsilon = 0.5

    def make_accountant(self) -> PrivacyAccountant:
        return RdpAccountant(orders=(1.5, 2.0, 2.5, 4.0, 8.0, 32.0, 64.0))

    def supported_event(self) -> DpEvent:
        return PoissonSampledEvent(sampling_rate=0.05, event=GaussianEvent(noise_multiplier=1.0))


class TestRdpLaplaceContract(AccountantContract):
    def make_accountant(self) -> PrivacyAccountant:
        return RdpAccountant()

    def supported_event(self) -> DpEvent:
        return LaplaceEvent(noise_multiplier=1.5, pmf_slack=1e-9)


class TestZCdpGaussianContract(AccountantContract):
    def make_accountant(self) -> PrivacyAccountant:
        return ZCdpAccountant()

    def supported_event(self) -> DpEvent:
        return GaussianEvent(noise_multiplier=2.0, pmf_slack=2.0**-20)


class TestZCdpPureContract(AccountantContract):
    def make_accountant(self) -> PrivacyAccountant:
        return ZCdpAccountant()

    def supported_event(self) -> DpEvent:
        return LaplaceEvent(noise_multiplier=4.0)


class TestZCdpBlackBoxContract(AccountantContract):
    def make_accountant(self) -> PrivacyAccountant:
        return ZCdpAccountant()

    def supported_event(self) -> DpEvent:
        return ZCdpEvent(rho=0.01)


class TestExactGdpContract(AccountantContract):
    def make_accountant(self) -> PrivacyAccountant:
        return ExactGdpAccountant()

    def supported_event(self) -> DpEvent:
        return GaussianEvent(noise_multiplier=3.0, pmf_slack=2.0**-20)


def test_events_and_trade_off_records_are_keyword_only() -> None:
    import dataclasses
    import inspect

    from dpkit import events
    from dpkit.audit import TradeoffPoint
    from dpkit.fdp import PropertyReport

    classes = [
        cls
        for _, cls in inspect.getmembers(events, inspect.isclass)
        if issubclass(cls, DpEvent) and cls.__module__ == events.__name__
    ]
    assert len(classes) >= 15
    for cls in [*classes, TradeoffPoint, PropertyReport]:
        assert all(f.kw_only for f in dataclasses.fields(cls)), cls
    with pytest.raises(TypeError):
        LaplaceEvent(2.0)  # type: ignore[misc]
