"""The accountant contract applied to the pure, approximate and Renyi accountants."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from accountant_contract import AccountantContract

from dpkit.accounting._base import PrivacyAccountant
from dpkit.accounting.approx import ApproxDpAccountant
from dpkit.accounting.events import (
    ApproxDpEvent,
    DpEvent,
    LaplaceEvent,
)
from dpkit.accounting.pure import PureDpAccountant


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
