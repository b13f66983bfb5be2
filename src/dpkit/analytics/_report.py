"""What a query tells its reader: the refusal of an unaffordable query, what a release
protects, and the long form of results (one row per histogram bin or quantile level).

Everything here is post-processing of public parameters or of released values.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.analytics._pricing import Pricing
from dpkit.errors import BudgetExceededError

__all__ = ["query_refusal", "unit_notes"]


def unit_notes(session: Any) -> dict[str, Any]:
    """The ``attrs["dpkit"]`` entries saying what a session's releases protect."""
    from dpkit.analytics.session import protects

    unit = session.privacy_unit
    return {"privacy_unit": unit, "protects": protects(unit)}


def query_refusal(pricing: Pricing, session: Any, exc: BudgetExceededError
                  ) -> BudgetExceededError:
    """The refusal of a query the budget cannot afford.

    First sentence: what the query needs (what it would charge: :meth:`Pricing.charged`, in
    the budget's unit), what is left and the budget, rounded (:mod:`dpkit._numeric.display`),
    then the fix. The exact figures are attributes: those of the budget's own refusal
    (``exc``: ``event``, ``remaining``, ``spent``, ``budget``, ``details``), with
    ``requested`` the query's charge (a dict) and ``allowed`` its ``(epsilon, delta)``.
    """
    from dpkit.accounting.budget import refusal_message

    budget = session.budget
    charged = pricing.charged()
    remaining = exc.remaining if exc.remaining is not None else session.remaining
    total = exc.budget if exc.budget is not None else getattr(budget, "budget", None)
    analyst = getattr(budget, "analyst", None)
    need: list[tuple[str, float]]
    left_now: list[tuple[str, float]]
    tot: list[tuple[str, float]]
    parts = getattr(exc, "sentence_parts", None)
    note = ""
    if parts is not None:
        # the budget's own reading (its unit, and which of its limits the query would pass)
        need, left_now, tot, analyst, note = parts
    elif pricing.mode == "zcdp" and getattr(budget, "native_budget", None) is not None:
        rem_native = getattr(budget, "remaining_native", None)
        need = [("rho", charged["rho"])]
        left_now = [("rho", rem_native if rem_native is not None else 0.0)]
        tot = [("rho", budget.native_budget)]
    else:
        need = [("epsilon", charged["epsilon"])]
        rem = remaining if isinstance(remaining, tuple) else (math.nan, math.nan)
        left_now = [("epsilon", rem[0])]
        tot_pair = total if isinstance(total, tuple) else (math.nan, math.nan)
        tot = [("epsilon", tot_pair[0] if tot_pair[0] is not None else math.inf)]
        if charged["delta"] > 0.0 or (tot_pair[1] or 0.0) > 0.0:
            need.append(("delta", charged["delta"]))
            left_now.append(("delta", rem[1]))
            tot.append(("delta", tot_pair[1]))
    if exc.details is None and exc.remaining is None:
        # not the budget's own sentence (a budget of another kind): keep its message as detail
        details: str | None = str(exc)
    else:
        details = exc.details
    first = refusal_message("query", need, left_now, tot, "ask for less or use a larger budget",
                            analyst if isinstance(analyst, str) else None, note)
    out = BudgetExceededError(
        f"{first} Nothing was spent.", event=pricing.event, count=1, requested=charged,
        remaining=remaining if remaining is not None else None,
        spent=exc.spent if exc.spent is not None else getattr(budget, "spent", None),
        budget=total, details=details, allowed=(pricing.epsilon, pricing.delta))
    return out
