"""Privacy accounting: events (what was released) and accountants (what it cost).

* :mod:`~dpkit.accounting.events`: frozen records of releases, serialised through an allow-list.
* Interpreters (each with ``supports``/``compose``/``get_epsilon``/``get_delta``):
  :class:`PureDpAccountant`, :class:`ApproxDpAccountant`, :class:`RdpAccountant`,
  :class:`GdpAccountant`, :class:`PldAccountant`.
* Composition theorems: :func:`basic_composition`, :func:`parallel_composition`,
  :func:`advanced_composition`, :func:`optimal_composition`.
* DP-SGD: :func:`dpsgd_epsilon`, :func:`dpsgd_noise_multiplier`.
* zCDP: :class:`ZCdpAccountant`, :func:`zcdp_epsilon`, :func:`zcdp_delta`, :func:`zcdp_rho_for`.
* Budgets: :class:`Budget` (filter or odometer; charge before you release; ``Accountant`` is its
  former name), :class:`ZCdpFilter` and :class:`GdpFilter` (fully adaptive filters in rho / mu),
  :class:`SubBudget` (an analyst's cap under a budget's total).
* The budget's storage seam: :class:`Ledger` (compare-and-append records, replayed to rebuild a
  budget), :class:`MemoryLedger` (the default); durable stores are in :mod:`dpkit.ledger`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dpkit.accounting import events
from dpkit.accounting.events import Neighbouring

if TYPE_CHECKING:  # the names below load lazily, so importing events stays light
    from dpkit.accounting._base import PrivacyAccountant
    from dpkit.accounting.approx import ApproxDpAccountant
    from dpkit.accounting.budget import Accountant, Budget, ChargeRecord, SubBudget
    from dpkit.accounting.composition import (
        advanced_composition,
        basic_composition,
        optimal_composition,
        optimal_composition_delta,
        parallel_composition,
    )
    from dpkit.accounting.dpsgd import dpsgd_epsilon, dpsgd_noise_multiplier
    from dpkit.accounting.filters import GdpFilter, ZCdpFilter
    from dpkit.accounting.gdp import (
        ExactGdpAccountant,
        GdpAccountant,
        dpsgd_gdp_epsilon,
        dpsgd_gdp_mu,
    )
    from dpkit.accounting.ledger import Ledger, LedgerRecord, MemoryLedger
    from dpkit.accounting.pld import PldAccountant
    from dpkit.accounting.pure import PureDpAccountant
    from dpkit.accounting.rdp import RdpAccountant
    from dpkit.accounting.zcdp import ZCdpAccountant, zcdp_delta, zcdp_epsilon, zcdp_rho_for

_LAZY = {
    "PrivacyAccountant": "_base",
    "ApproxDpAccountant": "approx",
    "Accountant": "budget",
    "Budget": "budget",
    "ChargeRecord": "budget",
    "SubBudget": "budget",
    "Ledger": "ledger",
    "LedgerRecord": "ledger",
    "MemoryLedger": "ledger",
    "GdpFilter": "filters",
    "ZCdpFilter": "filters",
    "ExactGdpAccountant": "gdp",
    "ZCdpAccountant": "zcdp",
    "zcdp_delta": "zcdp",
    "zcdp_epsilon": "zcdp",
    "zcdp_rho_for": "zcdp",
    "advanced_composition": "composition",
    "basic_composition": "composition",
    "optimal_composition": "composition",
    "optimal_composition_delta": "composition",
    "parallel_composition": "composition",
    "dpsgd_epsilon": "dpsgd",
    "dpsgd_noise_multiplier": "dpsgd",
    "GdpAccountant": "gdp",
    "dpsgd_gdp_epsilon": "gdp",
    "dpsgd_gdp_mu": "gdp",
    "PldAccountant": "pld",
    "PureDpAccountant": "pure",
    "RdpAccountant": "rdp",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpkit.accounting' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"dpkit.accounting.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Accountant",
    "ApproxDpAccountant",
    "Budget",
    "ChargeRecord",
    "ExactGdpAccountant",
    "GdpAccountant",
    "GdpFilter",
    "Ledger",
    "LedgerRecord",
    "MemoryLedger",
    "Neighbouring",
    "PldAccountant",
    "PrivacyAccountant",
    "PureDpAccountant",
    "RdpAccountant",
    "SubBudget",
    "ZCdpAccountant",
    "ZCdpFilter",
    "advanced_composition",
    "basic_composition",
    "dpsgd_epsilon",
    "dpsgd_gdp_epsilon",
    "dpsgd_gdp_mu",
    "dpsgd_noise_multiplier",
    "events",
    "optimal_composition",
    "optimal_composition_delta",
    "parallel_composition",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_rho_for",
]
