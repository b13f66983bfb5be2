"""Privacy accounting: events (what was released) and accountants (what it cost).

* :mod:`~dpkit.events` (the vocabulary, one layer below): frozen records of
  releases, serialised through an allow-list.
* Interpreters (each with ``supports``/``compose``/``get_epsilon``/``get_delta``):
  :class:`PureDpAccountant`, :class:`ApproxDpAccountant`, :class:`RdpAccountant`,
  :class:`GdpAccountant`, :class:`PldAccountant`.
* Composition theorems: :func:`basic_composition`, :func:`parallel_composition`,
  :func:`advanced_composition`, :func:`optimal_composition`.
* DP-SGD: :func:`dpsgd_epsilon`, :func:`dpsgd_noise_multiplier`.
* Side-by-side tables (every applicable accountant for one schedule, as
  :class:`AccountingRow` data): :func:`dpsgd_rows`, :func:`laplace_rows`.
* zCDP: :class:`ZCdpAccountant`, :func:`zcdp_epsilon`, :func:`zcdp_delta`, :func:`zcdp_rho_for`.
* Budgets: :class:`Budget` (filter or odometer; charge before you release),
  :class:`ZCdpFilter` and :class:`GdpFilter` (fully adaptive filters in rho / mu),
  :class:`SubBudget` (an analyst's cap under a budget's total).
* The budget's storage seam: :class:`Ledger` (compare-and-append records, replayed to rebuild a
  budget), :class:`MemoryLedger` (the default); durable stores are in :mod:`dpkit.ledger`.
"""

from __future__ import annotations

from dpkit.accounting._base import PrivacyAccountant
from dpkit.accounting._relations import restate
from dpkit.accounting.approx import ApproxDpAccountant
from dpkit.accounting.bounded_range import (
    bounded_range_composition,
    bounded_range_composition_delta,
    bounded_range_event,
)
from dpkit.accounting.budget import Budget, ChargeRecord, SubBudget
from dpkit.accounting.composition import (
    advanced_composition,
    basic_composition,
    optimal_composition,
    optimal_composition_delta,
    parallel_composition,
)
from dpkit.accounting.filters import GdpFilter, ZCdpFilter
from dpkit.accounting.ledger import Ledger, LedgerRecord, MemoryLedger
from dpkit.accounting.pure import PureDpAccountant
from dpkit.accounting.zcdp import ZCdpAccountant, zcdp_delta, zcdp_epsilon, zcdp_rho_for
from dpkit.events import Neighbouring

# Not even typing is imported at run time: TYPE_CHECKING is False here and True for type checkers.
TYPE_CHECKING = False

if TYPE_CHECKING:  # for type checkers and IDEs; at run time these load lazily (see __getattr__)
    from dpkit.accounting.dpsgd import dpsgd_epsilon, dpsgd_noise_multiplier
    from dpkit.accounting.gdp import (
        ExactGdpAccountant,
        GdpAccountant,
        dpsgd_gdp_epsilon,
        dpsgd_gdp_mu,
    )
    from dpkit.accounting.pld import PldAccountant
    from dpkit.accounting.rdp import RdpAccountant
    from dpkit.accounting.tables import AccountingRow, dpsgd_rows, laplace_rows

# Name -> the submodule that defines it, imported on first access (PEP 562) and then cached in
# this module. These modules import scipy.special, the privacy-loss grids or the f-DP package
# (about 0.2 s together), which a program that only keeps a budget never needs.
_LAZY_NAMES: dict[str, str] = {
    **dict.fromkeys(("dpsgd_epsilon", "dpsgd_noise_multiplier"), "dpkit.accounting.dpsgd"),
    **dict.fromkeys(
        ("ExactGdpAccountant", "GdpAccountant", "dpsgd_gdp_epsilon", "dpsgd_gdp_mu"),
        "dpkit.accounting.gdp",
    ),
    "PldAccountant": "dpkit.accounting.pld",
    "RdpAccountant": "dpkit.accounting.rdp",
    **dict.fromkeys(("AccountingRow", "dpsgd_rows", "laplace_rows"), "dpkit.accounting.tables"),
}

__all__ = [
    "AccountingRow",
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
    "bounded_range_composition",
    "bounded_range_composition_delta",
    "bounded_range_event",
    "dpsgd_epsilon",
    "dpsgd_gdp_epsilon",
    "dpsgd_gdp_mu",
    "dpsgd_noise_multiplier",
    "dpsgd_rows",
    "laplace_rows",
    "optimal_composition",
    "optimal_composition_delta",
    "parallel_composition",
    "restate",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_rho_for",
]


# Submodules that the package imported eagerly before its names became lazy: still reachable as
# attributes after a plain ``import dpkit.accounting`` (``dpkit.accounting.rdp``), imported on
# first access like the names.
_LAZY_SUBMODULES = frozenset(("batching", "dpsgd", "gdp", "pld", "rdp", "tables"))


def __getattr__(name: str) -> object:
    """Load a lazy name (:data:`_LAZY_NAMES`) or submodule (:data:`_LAZY_SUBMODULES`) on first
    access (PEP 562)."""
    import importlib

    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # also sets the attribute
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, the lazy ones included, and the module's own attributes."""
    return sorted(set(globals()) | set(_LAZY_NAMES) | _LAZY_SUBMODULES)
