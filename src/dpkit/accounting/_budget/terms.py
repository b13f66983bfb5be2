"""What a budget is: its definition, validated once and fixed at construction.

:class:`Terms` holds every threshold of a budget (epsilon, delta, rho_max or mu_max, the pmf
slack allowance ``A_max``, the approximate-delta allowance ``delta_max``, the neighbouring
relation); none of them ever depends on what was charged. The conversions of an ``(epsilon,
delta)`` budget (or of a share of one) to rho and mu are here too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from dpkit._numeric.rounding import down
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_mu,
    check_nonnegative,
    check_positive,
)
from dpkit.errors import LedgerError, PrivacyParameterError
from dpkit.events import Neighbouring, as_neighbouring

__all__ = ["FORMAT", "METHODS", "MODES", "VERSION", "Terms", "zcdp_share_default"]

FORMAT = "dpkit.budget"
VERSION = 4
MODES = ("filter", "odometer")
METHODS = ("basic", "rdp", "zcdp", "gdp")
_DEFAULT_SLACK = 2.0**-12
#: The fields of a sub-budget definition (its caps).
SUB_FIELDS = frozenset({"epsilon", "delta", "rho", "mu"})


def zcdp_share_default(
    epsilon: float, delta: float, *, slack: float = 0.0
) -> tuple[float, float, float]:
    """:meth:`Budget.zcdp_share` with the default proportions of a zcdp budget:
    ``A = max(slack, 2**-12 min(1, epsilon))`` and ``approx_delta = delta / 2`` (rounded
    down); the same as ``Budget(epsilon=epsilon, delta=delta, method="zcdp")`` keeps."""
    eps = check_epsilon(epsilon)
    dl = check_delta(delta, allow_zero=False)
    a = max(_DEFAULT_SLACK * min(1.0, eps), check_nonnegative(slack, "slack"))
    return _share(eps, dl, down(Fraction(dl) / 2), a)


def _share(eps: float, dl: float, approx: float, a: float) -> tuple[float, float, float]:
    """rho converted at ``delta - approx``; the approximate delta granted is ``approx (1 -
    2**-40)``, so that ``k`` shares of ``fl(delta / k)`` (each up to ``2**-53`` above the exact
    ``delta / k``) add up to at most the budget's ``delta_max``."""
    if not Fraction(eps) - 2 * Fraction(a) > 0:
        raise PrivacyParameterError(
            f"epsilon={eps!r} is too small for a floating-point slack of {a!r}"
        )
    return (
        native_for("zcdp", eps, dl, approx, a),
        down(Fraction(approx) * (1 - Fraction(1, 2**40))),
        a,
    )


def native_for(kind: str, eps: float, delta: float, approx_delta: float, a: float) -> float:
    """The largest rho (``kind="zcdp"``) or mu (``"gdp"``), rounded down, of an ``(eps, delta)``
    budget that keeps ``approx_delta`` for approximate events and ``a`` of floating-point
    slack: converted at ``(eps - 2 a, (delta - approx_delta) e^-a)``, each rounded down (the
    relative 2**-50 covers the rounding of exp and of the product)."""
    eff_eps = down(Fraction(eps) - 2 * Fraction(a))
    conv_delta = delta
    if approx_delta:
        conv_delta = down(Fraction(delta) - Fraction(approx_delta))
    eff_delta = conv_delta * math.exp(-a) * (1.0 - 2.0**-50)
    if kind == "zcdp":
        from dpkit.accounting.zcdp import zcdp_rho_for

        rho: float = zcdp_rho_for(eff_eps, eff_delta)
        return rho
    from dpkit.accounting.gdp import gdp_mu_for

    mu: float = gdp_mu_for(eff_eps, eff_delta)
    return mu


@dataclasses.dataclass(frozen=True, kw_only=True)
class Terms:
    """A budget's definition (see :class:`~dpkit.accounting.Budget` for the parameters).

    ``kind`` is how events are read (``"pure"``, ``"basic"``, ``"zcdp"``, ``"gdp"``,
    ``"rdp"``); ``native_budget`` is ``rho_max`` or ``mu_max`` (zcdp, gdp; ``None`` for an
    odometer without an epsilon cap); ``slack_allowance`` is ``A_max`` and
    ``approx_allowance`` is ``delta_max``.
    """

    mode: str
    method: str
    kind: str
    neighbouring: Neighbouring
    epsilon: float | None
    delta: float
    rdp_order: float | None
    given_rho: float | None
    given_mu: float | None
    slack_allowance: float | None
    native_budget: float | None
    approx_allowance: float | None

    @classmethod
    def build(
        cls,
        *,
        epsilon: float | None,
        delta: float,
        mode: str,
        method: str,
        rdp_order: float | None,
        rho: float | None,
        mu: float | None,
        pmf_slack_allowance: float | None,
        approx_delta_allowance: float | None,
        neighbouring: str | Neighbouring,
    ) -> Terms:
        """Validate the constructor's arguments (every error a PrivacyParameterError)."""
        relation = as_neighbouring(neighbouring)
        if mode not in MODES:
            raise PrivacyParameterError(f"mode must be 'filter' or 'odometer', got {mode!r}")
        if method not in METHODS:
            raise PrivacyParameterError(
                f"method must be 'basic', 'zcdp', 'gdp' or 'rdp', got {method!r}"
            )
        if sum(x is not None for x in (epsilon, rho, mu)) > 1:
            raise PrivacyParameterError("give only one of epsilon, rho and mu")
        budget_delta = check_delta(delta)
        given_rho = given_mu = budget_epsilon = None
        if rho is not None:
            given_rho = check_positive(rho, "rho")
        elif mu is not None:
            given_mu = check_mu(mu)
        elif epsilon is not None:
            budget_epsilon = check_epsilon(epsilon)
        kind = _kind_of(method, budget_delta, mode, epsilon, rho, mu)
        order = _check_order(rdp_order, kind)
        approx: float | None = None
        if kind == "zcdp":
            approx = _approx_allowance(
                approx_delta_allowance,
                budget_delta,
                given_rho is None and budget_epsilon is not None,
            )
        elif approx_delta_allowance is not None:
            raise PrivacyParameterError("approx_delta_allowance applies to method 'zcdp' only")
        slack: float | None = None
        native: float | None = None
        if kind in ("zcdp", "gdp"):
            slack, native = _native(
                kind,
                pmf_slack_allowance,
                budget_epsilon,
                budget_delta,
                given_rho if given_rho is not None else given_mu,
                approx,
            )
        elif pmf_slack_allowance is not None:
            raise PrivacyParameterError("pmf_slack_allowance applies to method 'zcdp'/'gdp' only")
        return cls(
            mode=mode,
            method=method,
            kind=kind,
            neighbouring=relation,
            epsilon=budget_epsilon,
            delta=budget_delta,
            rdp_order=order,
            given_rho=given_rho,
            given_mu=given_mu,
            slack_allowance=slack,
            native_budget=native,
            approx_allowance=approx,
        )

    def definition(self) -> dict[str, Any]:
        """What the budget is (everything ``to_json`` saves except the charges)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "mode": self.mode,
            "method": self.method,
            "rdp_order": self.rdp_order,
            "rho": self.given_rho,
            "mu": self.given_mu,
            "pmf_slack_allowance": self.slack_allowance,
            "approx_delta_allowance": self.approx_allowance,
            "neighbouring": self.neighbouring.value,
        }

    def caps(self) -> dict[str, Any]:
        """The definition of a sub-budget with these terms (its caps as given)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.given_rho,
            "mu": self.given_mu,
        }

    def sub_terms(self, caps: Mapping[str, Any]) -> Terms:
        """The terms of a sub-budget with ``caps`` under these terms: read with this
        budget's method (zcdp for a rho cap, gdp for a mu cap) and neighbouring relation."""
        if not isinstance(caps, Mapping) or set(caps) != SUB_FIELDS:
            raise LedgerError(f"a sub-budget definition has the fields {sorted(SUB_FIELDS)}")
        method = self.kind if self.kind in METHODS else "basic"
        if caps["rho"] is not None:
            method = "zcdp"
        elif caps["mu"] is not None:
            method = "gdp"
        order = self.rdp_order if method == "rdp" and caps["delta"] else None
        try:
            return Terms.build(
                **caps,
                mode="filter",
                method=method,
                rdp_order=order,
                pmf_slack_allowance=None,
                approx_delta_allowance=None,
                neighbouring=self.neighbouring,
            )
        except PrivacyParameterError as exc:
            raise PrivacyParameterError(f"sub-budget caps {dict(caps)}: {exc}") from exc

    @property
    def native_unit(self) -> str | None:
        """``"epsilon"`` (pure), ``"rho"`` (zcdp), ``"mu"`` (gdp), else ``None``."""
        return {"pure": "epsilon", "zcdp": "rho", "gdp": "mu"}.get(self.kind)

    def zcdp_share(
        self, epsilon: float, delta: float, *, slack: float = 0.0
    ) -> tuple[float, float, float]:
        """See :meth:`dpkit.accounting.Budget.zcdp_share`."""
        if self.kind != "zcdp":
            raise PrivacyParameterError(f"zcdp_share needs a zcdp budget, not {self.kind!r}")
        b_eps = self.epsilon
        if b_eps is None or not self.delta > 0.0:
            return zcdp_share_default(epsilon, delta, slack=slack)
        eps = check_epsilon(epsilon)
        dl = check_delta(delta, allow_zero=False)
        a = down(Fraction(self.slack_allowance or 0.0) * Fraction(eps) / Fraction(b_eps))
        approx = down(Fraction(dl) * Fraction(self.approx_allowance or 0.0) / Fraction(self.delta))
        return _share(eps, dl, approx, max(a, check_nonnegative(slack, "slack")))


def _kind_of(
    method: str, delta: float, mode: str, epsilon: float | None, rho: float | None, mu: float | None
) -> str:
    if rho is not None:
        if method not in ("basic", "zcdp"):
            raise PrivacyParameterError("a rho budget uses method='zcdp'")
        return "zcdp"
    if mu is not None:
        if method not in ("basic", "gdp"):
            raise PrivacyParameterError("a mu budget uses method='gdp'")
        return "gdp"
    if epsilon is None and mode == "filter":
        raise PrivacyParameterError("a filter needs an epsilon (or rho, or mu) budget")
    if delta == 0.0:
        if method in ("zcdp", "gdp"):
            raise PrivacyParameterError(f"method={method!r} needs delta > 0 (or a rho/mu budget)")
        return "pure"
    return method


def _check_order(rdp_order: float | None, kind: str) -> float | None:
    if rdp_order is None:
        return None
    if kind != "rdp":
        raise PrivacyParameterError("rdp_order needs method='rdp' and delta > 0")
    order = check_positive(rdp_order, "rdp_order")
    if not 1.0 < order <= 1e6:
        raise PrivacyParameterError(f"rdp_order must lie in (1, 1e6], got {rdp_order!r}")
    return order


def _approx_allowance(allowance: float | None, delta: float, has_eps_budget: bool) -> float:
    """``delta_max``: validated, default ``down(delta / 2)`` (0 for a rho budget)."""
    if allowance is None:
        return down(Fraction(delta) / 2) if has_eps_budget else 0.0
    value = check_delta(allowance, name="approx_delta_allowance")
    if has_eps_budget and not value < delta:
        raise PrivacyParameterError(
            f"approx_delta_allowance={value!r} must be below the budget's delta "
            f"{delta!r} (the rest converts rho)"
        )
    return value


def _native(
    kind: str,
    allowance: float | None,
    eps: float | None,
    delta: float,
    given: float | None,
    approx: float | None,
) -> tuple[float, float | None]:
    """``(A_max, rho_max or mu_max)`` of a zcdp or gdp budget."""
    if allowance is None:
        a_max = _DEFAULT_SLACK * (1.0 if eps is None else min(1.0, eps))
    else:
        a_max = check_nonnegative(allowance, "pmf_slack_allowance")
    if given is not None:
        return a_max, given
    if eps is None:  # an odometer without an epsilon cap: no native budget
        return a_max, None
    if not Fraction(eps) - 2 * Fraction(a_max) > 0:
        raise PrivacyParameterError(
            f"pmf_slack_allowance={a_max!r} leaves no epsilon (needs 2 * allowance < epsilon)"
        )
    native = native_for(kind, eps, delta, approx or 0.0, a_max)
    if not native > 0.0:
        raise PrivacyParameterError(
            f"the budget (epsilon={eps!r}, delta={delta!r}) is too small for method={kind!r}"
        )
    return a_max, native
