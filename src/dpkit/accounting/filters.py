"""Privacy filters in zCDP and in Gaussian DP, valid under fully adaptive composition.

A *filter* fixes a total budget in advance and refuses any charge that would exceed it; the
analyst may choose every mechanism and its parameters after seeing all earlier outputs.

* :class:`ZCdpFilter` (``rho_max``): charges are rhos (see :mod:`dpkit.accounting.zcdp` for the
  rho of each event); a charge is accepted while ``sum rho_i <= rho_max`` (exactly, in
  rationals). Such a filter is ``rho_max``-zCDP under fully adaptive composition (Whitehouse,
  Ramdas, Rogers and Wu 2023, "Fully-adaptive composition in differential privacy"). It is also
  immediate from the Renyi filter of Feldman and Zrnic (2021, Theorem 3.1): at every order
  alpha > 1 the charges ``alpha rho_i`` stay within ``alpha rho_max``, so the interaction is
  ``(alpha, alpha rho_max)``-RDP for every alpha, which is the definition of
  ``rho_max``-zCDP. With ``approx_delta_allowance`` ``delta_max > 0`` it also accepts
  delta-approximately zCDP charges (``ApproxZCdpEvent``, black-box ``(epsilon, delta)``; Bun
  and Steinke 2016, Definition 8.1) while ``sum delta_i <= delta_max``; the filter is then
  ``delta_max``-approximately ``rho_max``-zCDP, also under fully adaptive composition (the
  coupling argument in :mod:`dpkit.accounting.budget`, with ``delta_max`` fixed in advance).
* :class:`GdpFilter` (``mu_max``): only exactly Gaussian events (``mu_i = 1 / noise
  multiplier``); a charge is accepted while ``sum mu_i^2 <= mu_max^2`` (exactly). Smith and
  Thakurta (2022), "Fully adaptive composition for Gaussian differential privacy", prove that
  such a filter is ``mu_max``-GDP.

Both also cap the total floating-point pmf slack ``A`` of the samplers at a fixed
``pmf_slack_allowance`` ``A_max``; the actual interaction then satisfies
``delta(eps) <= e^{A_max} delta_ideal(eps - 2 A_max)`` (see :mod:`dpkit.events`).
:meth:`epsilon` / :meth:`delta` give the (epsilon, delta) guarantee of the *whole budget*
(``rho_max`` or ``mu_max`` with ``A_max``); ``spent`` reports what was used so far at the
``delta`` given to the constructor (``inf`` epsilon when none was given).

Both are :class:`~dpkit.accounting.budget.Budget` objects: ``charge``, ``can_charge``,
``reserve``, ``cost_of``, ``split``, ``spent_native``, ``remaining_native``, JSON.
An ``(epsilon, delta)`` budget that charges in rho or mu is ``Budget(epsilon=..., delta=...,
method="zcdp")`` (or ``"gdp"``).
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any, TypeVar

from dpkit._numeric.rounding import up
from dpkit._numeric.validation import check_delta, check_epsilon
from dpkit.accounting.budget import Budget
from dpkit.errors import (
    BudgetExceededError,
    PrivacyParameterError,
    SerializationError,
    UnsupportedEventError,
)

__all__ = ["GdpFilter", "ZCdpFilter"]

_F = TypeVar("_F", bound=Budget)


def _filter_from_json(cls: type[_F], text: str, method: str, native: str) -> _F:
    """Rebuild a filter saved by ``to_json``: the saved data is validated and its ledger replayed
    by :meth:`Budget.from_json`, then the filter is rebuilt from its own parameters (``native``
    is ``"rho"`` or ``"mu"``) and the same ledger replayed into it. Data that is not a
    ``method`` filter (an epsilon budget, an RDP order, the other native unit, version 1) is
    refused with a :class:`~dpkit.errors.SerializationError`."""
    plain = Budget.from_json(text)
    data: dict[str, Any] = json.loads(text)
    other = "mu" if native == "rho" else "rho"
    if (
        data.get("method") != method
        or data.get("epsilon") is not None
        or data.get("rdp_order") is not None
        or data.get(other) is not None
        or data.get(native) is None
    ):
        raise SerializationError(f"not a saved {cls.__name__} (method {method!r}, {native} only)")
    try:
        budget = cls(
            **{native: data[native]},
            delta=data["delta"],
            mode=data["mode"],
            pmf_slack_allowance=data["pmf_slack_allowance"],
        )
    except PrivacyParameterError as exc:
        raise SerializationError(f"invalid {cls.__name__}: {exc}") from exc
    for event, count in plain.ledger:
        try:
            budget.charge(event, count=count)
        except (BudgetExceededError, UnsupportedEventError, PrivacyParameterError) as exc:
            raise SerializationError(f"saved ledger cannot be replayed: {exc}") from exc
    return budget


class ZCdpFilter(Budget):
    """A ``rho``-zCDP filter (see the module docstring).

    Parameters (keyword-only): ``rho`` (> 0), ``delta`` (reporting delta for :attr:`spent`,
    default 0), ``mode`` (``"filter"`` or ``"odometer"``), ``pmf_slack_allowance`` (default
    ``2**-12``), ``approx_delta_allowance`` (``delta_max``, default 0: approximate charges
    refused).
    """

    def __init__(
        self,
        *,
        rho: float,
        delta: float = 0.0,
        mode: str = "filter",
        pmf_slack_allowance: float | None = None,
        approx_delta_allowance: float | None = None,
    ) -> None:
        super().__init__(
            rho=rho,
            delta=delta,
            mode=mode,
            method="zcdp",
            pmf_slack_allowance=pmf_slack_allowance,
            approx_delta_allowance=approx_delta_allowance,
        )

    def _whole(self) -> tuple[Fraction, Fraction, Fraction]:
        assert self.native_budget is not None and self.pmf_slack_allowance is not None
        assert self.approx_delta_allowance is not None
        return (
            Fraction(self.native_budget),
            Fraction(self.pmf_slack_allowance),
            Fraction(self.approx_delta_allowance),
        )

    @classmethod
    def from_json(cls, text: str) -> ZCdpFilter:
        """Rebuild a filter saved by :meth:`to_json` (ledger replayed; see ``Budget.from_json``)."""
        return _filter_from_json(cls, text, "zcdp", "rho")

    def epsilon(self, delta: float) -> float:
        """Epsilon (rounded up) at ``delta`` of the whole budget:
        ``2A + eps_rho((delta - delta_max) e^-A)`` (inf when ``delta <= delta_max``)."""
        from dpkit.accounting.zcdp import approx_epsilon

        d = check_delta(delta)
        return approx_epsilon(*self._whole(), d)

    def delta(self, epsilon: float) -> float:
        """Delta (rounded up) at ``epsilon`` of the whole budget:
        ``e^A delta_rho(eps - 2A) + delta_max``."""
        from dpkit.accounting.zcdp import approx_delta

        e = check_epsilon(epsilon, allow_zero=True)
        return approx_delta(*self._whole(), e)


class GdpFilter(Budget):
    """A ``mu``-GDP filter (see the module docstring).

    Parameters (keyword-only): ``mu`` (> 0), ``delta`` (reporting delta for :attr:`spent`,
    default 0), ``mode``, ``pmf_slack_allowance`` (default ``2**-12``).
    """

    def __init__(
        self,
        *,
        mu: float,
        delta: float = 0.0,
        mode: str = "filter",
        pmf_slack_allowance: float | None = None,
    ) -> None:
        super().__init__(
            mu=mu, delta=delta, mode=mode, method="gdp", pmf_slack_allowance=pmf_slack_allowance
        )

    @classmethod
    def from_json(cls, text: str) -> GdpFilter:
        """Rebuild a filter saved by :meth:`to_json` (ledger replayed; see ``Budget.from_json``)."""
        return _filter_from_json(cls, text, "gdp", "mu")

    def epsilon(self, delta: float) -> float:
        """Epsilon (rounded up) at ``delta`` of the whole budget (exact Gaussian profile)."""
        from dpkit.accounting.gdp import gdp_epsilon

        d = check_delta(delta)
        assert self.native_budget is not None and self.pmf_slack_allowance is not None
        return gdp_epsilon(self.native_budget, up(self.pmf_slack_allowance), d)

    def delta(self, epsilon: float) -> float:
        """Delta (rounded up) at ``epsilon`` of the whole budget: ``e^A delta_mu(eps - 2A)``."""
        from dpkit.accounting.gdp import gdp_delta

        e = check_epsilon(epsilon, allow_zero=True)
        assert self.native_budget is not None and self.pmf_slack_allowance is not None
        return gdp_delta(self.native_budget, self.pmf_slack_allowance, e)
