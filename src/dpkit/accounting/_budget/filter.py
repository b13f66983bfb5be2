"""What may be charged: the event a charge stands for, the state after it, and the refusal.

An :class:`Account` is one set of terms and its current state: the budget's total, or an
analyst's cap. Every check runs on a *copy* (:meth:`Account.trial` composes into a clone of the
interpreter); the state is replaced in one assignment, by the ledger's book, only after every
check has passed and the record is stored.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from dpkit._numeric.display import fmt
from dpkit._numeric.rounding import down, up
from dpkit._numeric.validation import check_delta, check_epsilon
from dpkit.accounting._budget import kinds
from dpkit.accounting._budget.kinds import State
from dpkit.accounting._budget.records import ChargeCost, refusal_message
from dpkit.accounting._budget.terms import Terms
from dpkit.accounting._relations import restate
from dpkit.errors import BudgetExceededError, PrivacyParameterError, UnsupportedEventError
from dpkit.events import ApproxDpEvent, DpEvent, PureDpEvent

__all__ = ["Account", "check_metadata", "to_event"]

#: Largest metadata (as JSON text) stored with one charge.
_MAX_METADATA = 65_536


def to_event(terms: Terms, event: Any, epsilon: float | None, delta: float | None) -> DpEvent:
    """The event a charge stands for: an event, a mechanism's ``.event`` (a Gaussian
    calibrated to ``(epsilon, delta)`` on a basic budget: its pair, see
    :func:`~dpkit.accounting._budget.kinds.calibrated_pair`) or a black-box pair."""
    if event is not None:
        if isinstance(event, (numbers.Number, str)) or type(event).__module__ == "numpy":
            raise PrivacyParameterError(
                f"charge() got the bare value {event!r}: to charge a black-box release pass "
                f"charge(epsilon={event!r}) (and delta=...), or pass an event or a mechanism"
            )
        if epsilon is not None or delta is not None:
            raise PrivacyParameterError("charge either an event or epsilon/delta, not both")
        if isinstance(event, DpEvent):
            return event
        inner = getattr(event, "event", None)
        if isinstance(inner, DpEvent):  # a mechanism: charge what it declares
            return kinds.calibrated_pair(terms, getattr(event, "calibrated_delta", None), inner)
        raise UnsupportedEventError(f"not a DpEvent or a mechanism with an .event: {event!r}")
    if epsilon is None:
        raise PrivacyParameterError("charge needs an event, a mechanism or an epsilon")
    eps = check_epsilon(epsilon, allow_zero=True)
    d = 0.0 if delta is None else check_delta(delta)
    if d == 0.0:
        return PureDpEvent(epsilon=eps)
    return ApproxDpEvent(epsilon=eps, delta=d)


def check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Metadata stored with a charge: a JSON object (str keys, finite numbers) of at most
    64 KiB, returned as a fresh dict (a later change to the caller's object changes nothing)."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise PrivacyParameterError(f"metadata must be a mapping with str keys, got {metadata!r}")
    try:
        text = json.dumps(dict(metadata), allow_nan=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError) as exc:
        raise PrivacyParameterError(f"metadata must be JSON data: {exc}") from exc
    if len(text) > _MAX_METADATA:
        raise PrivacyParameterError(f"metadata is {len(text)} characters, over {_MAX_METADATA}")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@dataclasses.dataclass
class Account:
    """One budget's terms and its current state (the total, or an analyst's cap)."""

    terms: Terms
    state: State

    @classmethod
    def empty(cls, terms: Terms) -> Account:
        return cls(terms, State.empty(terms))

    def trial(self, ev: DpEvent, n: int) -> tuple[State, DpEvent]:
        """The state after charging ``ev`` x ``n`` and the event the interpreter read
        (nothing changes). The event is restated under the budget's relation (may raise
        UnsupportedEventError); the ledger keeps it as given, so a replay restates it again."""
        old = self.state
        used = kinds.interpretable(self.terms, restate(ev, self.terms.neighbouring), n, old)
        trial = old.interpreter.clone()
        trial.compose(used, n)  # may raise UnsupportedEventError; only the copy is touched
        spent_e, spent_d = kinds.spent_of(self.terms, trial, nonempty=True)
        new = State(
            interpreter=trial,
            ledger=(*old.ledger, (ev, n)),
            spent_epsilon=spent_e,
            spent_delta=spent_d,
        )
        return new, used

    def within(self, state: State) -> bool:
        return kinds.within(self.terms, state)

    def cost_after(self, used: DpEvent, n: int, new: State) -> ChargeCost:
        return kinds.cost(self.terms, used, n, kinds.spent_pair_of(new))

    def cost_of(self, ev: DpEvent, n: int) -> ChargeCost:
        new, used = self.trial(ev, n)
        return self.cost_after(used, n, new)

    def check(self, ev: DpEvent, n: int, analyst: str | None) -> State:
        """The state after ``ev`` x ``n``; BudgetExceededError when it does not fit."""
        new, used = self.trial(ev, n)
        if not self.within(new):
            raise self.refusal(ev, n, self.cost_after(used, n, new), new, analyst)
        return new

    def refusal(
        self, ev: DpEvent, n: int, cost: ChargeCost, new: State, analyst: str | None
    ) -> BudgetExceededError:
        """The refusal of a charge that does not fit: one rounded sentence first (what the
        charge needs, what is left, the total, the fix), the exact figures as attributes.

        Pure and basic budgets speak in ``(epsilon, delta)`` (delta only when the charge or
        the budget has some); zCDP and GDP budgets in their own unit (``rho``, ``mu``), which
        is what they compare."""
        terms, old = self.terms, self.state
        note = ""
        if terms.kind in ("zcdp", "gdp") and terms.native_budget is not None:
            note = f" (epsilon {fmt(terms.epsilon)}, delta {fmt(terms.delta)})"
            need, left_now, total = _native_parts(terms, cost, old, new)
        else:
            with_delta = cost.delta > 0.0 or terms.delta > 0.0
            remaining = kinds.remaining_exact(terms, old)
            need = [("epsilon", cost.epsilon)]
            left_now = [("epsilon", remaining[0])]
            total = [("epsilon", terms.epsilon if terms.epsilon is not None else math.inf)]
            if with_delta:
                need.append(("delta", cost.delta))
                left_now.append(("delta", remaining[1]))
                total.append(("delta", terms.delta))
        first = refusal_message(
            "charge", need, left_now, total, "charge less or use a larger budget", analyst, note
        )
        details = (
            f"charging {ev!r} x{n} would cost {cost} and take the spent privacy to "
            f"{kinds.describe(terms, new)}, over the budget "
            f"{kinds.describe_budget(terms)}; already spent {kinds.describe(terms, old)}"
        )
        out = BudgetExceededError(
            f"{first} Nothing was charged.",
            event=ev,
            count=n,
            requested=cost,
            remaining=kinds.remaining_exact(terms, old),
            spent=kinds.spent_pair_of(old),
            budget=(terms.epsilon, terms.delta),
            details=details,
        )
        # the sentence's parts, for a caller that restates it (a query: "This query needs")
        out.sentence_parts = (need, left_now, total, analyst, note)
        return out


def _native_parts(
    terms: Terms, cost: ChargeCost, old: State, new: State
) -> tuple[list[tuple[str, float]], ...]:
    """What a zcdp or gdp charge needs, what is left and the totals, for each cap it breaks
    (rho or mu, the approximate delta, the pmf slack)."""
    assert terms.native_budget is not None
    unit = terms.native_unit or "rho"
    need: list[tuple[str, float]] = []
    left_now: list[tuple[str, float]] = []
    total: list[tuple[str, float]] = []
    value_new, slack_new = kinds.native_exact(new.interpreter)
    _, slack_old = kinds.native_exact(old.interpreter)
    cap = Fraction(terms.native_budget) ** (2 if terms.kind == "gdp" else 1)
    if isinstance(value_new, float) or value_new > cap:
        rem_native = kinds.remaining_native(terms, old)
        need.append((unit, cost.native if cost.native is not None else math.inf))
        left_now.append((unit, rem_native if rem_native is not None else 0.0))
        total.append((unit, terms.native_budget))
    if terms.kind == "zcdp" and terms.approx_allowance is not None:
        a_new = kinds.approx_delta_exact(new.interpreter)
        a_old = kinds.approx_delta_exact(old.interpreter)
        if a_new > Fraction(terms.approx_allowance):
            need.append(("approximate delta", up(a_new - a_old)))
            left_now.append(
                ("approximate delta", max(down(Fraction(terms.approx_allowance) - a_old), 0.0))
            )
            total.append(("approximate delta", terms.approx_allowance))
    if terms.slack_allowance is not None and slack_new > Fraction(terms.slack_allowance):
        need.append(("pmf slack", up(slack_new - slack_old)))
        left_now.append(("pmf slack", max(down(Fraction(terms.slack_allowance) - slack_old), 0.0)))
        total.append(("pmf slack", terms.slack_allowance))
    if not need:  # pragma: no cover - within() refused for one of the reasons above
        need = [(unit, cost.native if cost.native is not None else math.inf)]
        left_now = [(unit, kinds.remaining_native(terms, old) or 0.0)]
        total = [(unit, terms.native_budget)]
    return need, left_now, total
