"""How each accounting kind reads its interpreter: spent, remaining, costs, equal parts.

A budget's ``kind`` (:class:`~dpkit.accounting._budget.terms.Terms`) picks the interpreter
accountant that turns events into privacy spent: ``pure`` (exact epsilon sum), ``basic`` (exact
sums of epsilons and deltas; Gaussian events read through their privacy profile), ``zcdp`` and
``gdp`` (rho or mu^2 summed exactly, with the pmf slack and, for zcdp, the approximate delta),
``rdp`` (the Renyi curve, converted at the budget's delta). Every function here reads a
:class:`State` and the terms it is given, and changes nothing.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

from dpkit._numeric.rounding import down, sqrt_down, sqrt_up, up
from dpkit._numeric.validation import check_integer
from dpkit.accounting._base import PrivacyAccountant
from dpkit.accounting._budget.records import ChargeCost, Share
from dpkit.accounting._budget.terms import Terms
from dpkit.accounting.approx import ApproxDpAccountant, gaussian_pair
from dpkit.accounting.pure import PureDpAccountant
from dpkit.errors import PrivacyParameterError
from dpkit.events import ApproxDpEvent, DpEvent, GaussianEvent, Neighbouring, NonPrivateEvent

__all__ = ["State"]

#: Relative headroom left by ``split`` in rho and mu for the mechanisms' own rounding.
_SPLIT_HEADROOM = Fraction(1) - Fraction(2) ** -40


@dataclasses.dataclass(frozen=True)
class State:
    """Everything that changes when a charge is accepted (replaced as a whole, never mutated)."""

    interpreter: PrivacyAccountant
    ledger: tuple[tuple[DpEvent, int], ...]
    spent_epsilon: Fraction | float  # exact for basic/pure, else rounded up; inf: non-private
    spent_delta: Fraction

    @classmethod
    def empty(cls, terms: Terms) -> State:
        return cls(
            interpreter=new_interpreter(terms.kind, terms.rdp_order),
            ledger=(),
            spent_epsilon=Fraction(0),
            spent_delta=Fraction(0),
        )


def new_interpreter(kind: str, rdp_order: float | None) -> PrivacyAccountant:
    if kind == "pure":
        return PureDpAccountant()
    if kind == "basic":
        return ApproxDpAccountant()
    if kind == "zcdp":
        from dpkit.accounting.zcdp import ZCdpAccountant

        return ZCdpAccountant()
    if kind == "gdp":
        from dpkit.accounting.gdp import ExactGdpAccountant

        return ExactGdpAccountant()
    from dpkit.accounting.rdp import RdpAccountant

    if rdp_order is None:
        return RdpAccountant()
    return RdpAccountant(orders=(rdp_order,), combine_bounds=False)


def approx_delta_exact(acct: PrivacyAccountant) -> Fraction:
    """Total delta of the approximate-zCDP charges of a zCDP interpreter (0 otherwise)."""
    from dpkit.accounting.zcdp import ZCdpAccountant

    if isinstance(acct, ZCdpAccountant):
        return acct.delta_exact
    return Fraction(0)


def native_exact(acct: PrivacyAccountant) -> tuple[Fraction | float, Fraction]:
    """(rho or mu^2, pmf slack) of a zCDP / exact-GDP interpreter, exact."""
    from dpkit.accounting.gdp import ExactGdpAccountant
    from dpkit.accounting.zcdp import ZCdpAccountant

    if isinstance(acct, ZCdpAccountant):
        return acct.rho_exact, acct.slack_exact
    if isinstance(acct, ExactGdpAccountant):
        return acct.mu_squared_exact, acct.slack_exact
    raise TypeError(f"{type(acct).__name__} has no native unit")  # pragma: no cover


def spent_pair_of(state: State) -> tuple[float, float]:
    """``(epsilon, delta)`` spent in ``state``, rounded up (what a record stores)."""
    return up(state.spent_epsilon), min(up(state.spent_delta), 1.0)


def interpretable(terms: Terms, ev: DpEvent, n: int, state: State) -> DpEvent:
    """The event the interpreter composes for ``ev`` (``n`` times) in this state: a Gaussian
    event on a basic budget is read as its pair at the delta left, split over ``n``."""
    if terms.kind == "basic" and isinstance(ev, GaussianEvent):
        if n == 0:
            return ApproxDpEvent(epsilon=0.0, delta=0.0)
        rem = Fraction(terms.delta) - state.spent_delta
        share = max(down(rem / n), 0.0)
        pair = gaussian_pair(ev, share)
        return NonPrivateEvent() if pair is None else pair
    return ev


def calibrated_pair(terms: Terms, target: Any, inner: DpEvent) -> DpEvent:
    """A Gaussian mechanism calibrated to ``(epsilon, delta)``, charged to a basic budget,
    is charged as its ``(epsilon', delta')`` pair at ``delta' = delta (1 - 2**-45)``
    (:func:`~dpkit.accounting.approx.gaussian_pair`: the smallest certified epsilon', at
    most the epsilon it was calibrated to, whose headroom is 2**-40 of delta). ``target`` is
    the mechanism's ``calibrated_delta``. A bare Gaussian event (or one from
    ``from_mu``/``from_sigma``) is read at the delta the budget has left instead
    (:func:`interpretable`), so the first Gaussian would take all of it.

    The pair is what the ledger records, so a replay charges the same. The 2**-45 keeps k
    pairs of ``delta / k`` (each rounded to a double) within ``delta`` for k up to 2**7
    and more, as the epsilon constructors' 2**-40 does for epsilon."""
    if (
        terms.kind != "basic"
        or not isinstance(inner, GaussianEvent)
        or not isinstance(target, float)
        or inner.neighbouring != terms.neighbouring
    ):
        return inner
    pair = gaussian_pair(inner, target * (1.0 - 2.0**-45))
    return inner if pair is None else pair


def spent_of(terms: Terms, interpreter: PrivacyAccountant, nonempty: bool) -> tuple[Any, Fraction]:
    """``(epsilon, delta)`` spent by ``interpreter`` as ``terms`` read it (exact for pure and
    basic; otherwise the epsilon certified at the budget's delta, rounded up, and the delta
    certified at that epsilon)."""
    if isinstance(interpreter, PureDpAccountant):
        return interpreter.epsilon_exact, Fraction(0)
    if isinstance(interpreter, ApproxDpAccountant):
        return interpreter.totals_exact
    if not nonempty:
        return Fraction(0), Fraction(0)
    if terms.kind in ("zcdp", "gdp"):
        value, slack = native_exact(interpreter)
        if isinstance(value, float):
            return math.inf, Fraction(terms.delta)
        if value == 0 and slack == 0 and approx_delta_exact(interpreter) == 0:
            return Fraction(0), Fraction(0)
    if terms.delta == 0.0:  # a rho/mu budget without a reporting delta
        eps = interpreter.get_epsilon(0.0)
    else:
        eps = interpreter.get_epsilon(terms.delta)
    if math.isinf(eps):
        return math.inf, Fraction(terms.delta)
    if (
        terms.kind in ("zcdp", "gdp")
        and terms.epsilon is not None
        and (native_within(terms, interpreter))
    ):
        # rho <= rho_max (mu <= mu_max) and A <= A_max: (epsilon, delta) is certified by
        # the budget's own calibration, which may be a hair tighter than a fresh conversion.
        eps = min(eps, terms.epsilon)
    d = interpreter.get_delta(eps)
    return Fraction(eps), min(Fraction(d), Fraction(terms.delta))


def native_within(terms: Terms, interpreter: PrivacyAccountant) -> bool:
    """Whether rho (mu^2), the pmf slack and the approximate delta are within their caps."""
    if terms.native_budget is None:
        return True
    value, slack = native_exact(interpreter)
    if isinstance(value, float):
        return False
    total = Fraction(terms.native_budget)
    if terms.kind == "gdp":
        total = total * total
    assert terms.slack_allowance is not None
    if terms.kind == "zcdp":
        assert terms.approx_allowance is not None
        if not approx_delta_exact(interpreter) <= Fraction(terms.approx_allowance):
            return False
    return value <= total and slack <= Fraction(terms.slack_allowance)


def within(terms: Terms, state: State) -> bool:
    """Whether ``state`` is within the budget (exact comparisons)."""
    if terms.kind in ("zcdp", "gdp"):
        return native_within(terms, state.interpreter)
    if terms.epsilon is None:
        return True
    e = state.spent_epsilon
    if isinstance(e, float):  # only ever math.inf
        return False
    return e <= Fraction(terms.epsilon) and state.spent_delta <= Fraction(terms.delta)


def cost(terms: Terms, used: DpEvent, n: int, spent_after: tuple[float, float]) -> ChargeCost:
    """What charging ``used`` x ``n`` costs on its own, read by ``terms``."""
    alone = new_interpreter(terms.kind, terms.rdp_order)
    alone.compose(used, n)
    native: float | None = None
    slack = 0.0
    e_exact, d_exact = spent_of(terms, alone, nonempty=True)
    eps, dlt = up(e_exact), min(up(d_exact), 1.0)
    if terms.kind == "pure":
        native = eps
    elif terms.kind in ("zcdp", "gdp"):
        value, a = native_exact(alone)
        slack = up(a)
        if isinstance(value, float):
            native = math.inf
        elif terms.kind == "zcdp":
            native = up(value)
        else:
            native = sqrt_up(value)
    return ChargeCost(eps, dlt, native, terms.native_unit, slack, spent_after)


def spent_native(terms: Terms, state: State) -> float | None:
    """Spent in the native unit, rounded up (``mu = sqrt(sum mu_i^2)``); else ``None``."""
    if terms.kind == "pure":
        return up(state.spent_epsilon)
    if terms.kind not in ("zcdp", "gdp"):
        return None
    value, _ = native_exact(state.interpreter)
    if isinstance(value, float):
        return math.inf
    if terms.kind == "zcdp":
        return up(value)
    return sqrt_up(value)


def remaining_native(terms: Terms, state: State) -> float | None:
    """Still available in the native unit, rounded down and never negative (``mu``:
    ``sqrt(mu_max^2 - sum mu_i^2)``); ``None`` without a native budget."""
    if terms.kind == "pure":
        return remaining_exact(terms, state)[0]
    if terms.kind not in ("zcdp", "gdp") or terms.native_budget is None:
        return None
    value, _ = native_exact(state.interpreter)
    if isinstance(value, float):
        return 0.0
    total = Fraction(terms.native_budget)
    if terms.kind == "zcdp":
        return max(down(total - value), 0.0)
    return sqrt_down(max(total * total - value, Fraction(0)))


def remaining_exact(terms: Terms, state: State) -> tuple[float, float]:
    """``(epsilon, delta)`` still available, rounded down and never negative."""
    if terms.kind in ("zcdp", "gdp"):
        return _remaining_converted(terms, state)
    if terms.epsilon is None:
        return math.inf, max(down(Fraction(terms.delta) - state.spent_delta), 0.0)
    if isinstance(state.spent_epsilon, float):
        rem_e = (
            0.0
            if math.isinf(state.spent_epsilon)
            else down(Fraction(terms.epsilon) - Fraction(state.spent_epsilon))
        )
    else:
        rem_e = down(Fraction(terms.epsilon) - state.spent_epsilon)
    rem_d = down(Fraction(terms.delta) - state.spent_delta)
    return max(rem_e, 0.0), max(rem_d, 0.0)


def _remaining_converted(terms: Terms, state: State) -> tuple[float, float]:
    rem = remaining_native(terms, state)
    if rem is None:
        return math.inf, terms.delta
    if rem == 0.0 or terms.delta == 0.0:
        return 0.0, 0.0
    if terms.kind == "zcdp":
        from dpkit.accounting.zcdp import zcdp_epsilon

        # the remaining rho converts within the part of delta left to the conversion
        conv = terms.delta
        if terms.approx_allowance and terms.approx_allowance < conv:
            conv = down(Fraction(conv) - Fraction(terms.approx_allowance))
        eps = zcdp_epsilon(rem, conv)
    else:
        from dpkit.accounting.gdp import gdp_epsilon

        eps = gdp_epsilon(rem, 0.0, terms.delta)
    return eps, terms.delta


def split(terms: Terms, state: State, k: int) -> Share:
    """One of ``k`` equal parts of what remains (see :meth:`dpkit.accounting.Budget.split`)."""
    parts = check_integer(k, name="k", minimum=1)
    if terms.kind == "rdp":
        raise PrivacyParameterError("split() is not available for method='rdp'")
    if terms.kind in ("pure", "basic"):
        if terms.epsilon is None:
            raise PrivacyParameterError("split() needs an epsilon budget")
        spent_e = state.spent_epsilon
        if isinstance(spent_e, float):
            rem_e = Fraction(0)
        else:
            rem_e = max(Fraction(terms.epsilon) - spent_e, Fraction(0))
        rem_d = max(Fraction(terms.delta) - state.spent_delta, Fraction(0))
        return Share(
            epsilon=down(rem_e / parts),
            delta=down(rem_d / parts),
            rho=None,
            mu=None,
            pmf_slack=None,
        )
    if terms.native_budget is None:
        raise PrivacyParameterError("split() needs a budget")
    value, slack = native_exact(state.interpreter)
    assert terms.slack_allowance is not None
    rem_slack = max(Fraction(terms.slack_allowance) - slack, Fraction(0))
    if isinstance(value, float):
        return Share(None, None, 0.0, 0.0, 0.0)
    total = Fraction(terms.native_budget)
    delta_part: float | None = None
    if terms.kind == "zcdp":
        rho_part = max(total - value, Fraction(0)) / parts * _SPLIT_HEADROOM
        assert terms.approx_allowance is not None
        rem_d = Fraction(terms.approx_allowance) - approx_delta_exact(state.interpreter)
        delta_part = down(max(rem_d, Fraction(0)) / parts)
    else:
        rho_part = max(total * total - value, Fraction(0)) / parts * _SPLIT_HEADROOM / 2
    return Share(
        epsilon=None,
        delta=delta_part,
        rho=down(rho_part),
        mu=sqrt_down(2 * rho_part),
        pmf_slack=down(rem_slack / parts),
    )


def describe(terms: Terms, state: State) -> str:
    """The spent privacy of ``state`` in full (the details of a refusal)."""
    text = f"(epsilon={up(state.spent_epsilon)!r}, delta={up(state.spent_delta)!r})"
    if terms.kind in ("zcdp", "gdp"):
        value, slack = native_exact(state.interpreter)
        if terms.kind == "zcdp":
            text += (
                f", rho={up(value)!r}, "
                f"approximate delta={up(approx_delta_exact(state.interpreter))!r}"
            )
        else:
            text += f", mu^2={up(value)!r}"
        text += f", pmf slack={up(slack)!r}"
    return text


def describe_budget(terms: Terms) -> str:
    """The budget's thresholds in full (the details of a refusal)."""
    text = f"(epsilon={terms.epsilon!r}, delta={terms.delta!r})"
    if terms.kind in ("zcdp", "gdp"):
        unit = "rho" if terms.kind == "zcdp" else "mu"
        text += (
            f", {unit}_max={terms.native_budget!r}, pmf slack allowance={terms.slack_allowance!r}"
        )
        if terms.kind == "zcdp":
            text += f", approximate delta allowance={terms.approx_allowance!r}"
    if terms.neighbouring is Neighbouring.REPLACE:
        text += " under replace-one neighbours"
    return text
