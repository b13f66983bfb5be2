"""The one exception hierarchy of dpkit.

Every error dpkit raises on purpose derives from :class:`DPKitError`, so callers can catch
everything dpkit refuses with one ``except`` clause while keeping the ordinary Python meaning
(a bad parameter is also a :class:`ValueError`, a wrong type also a :class:`TypeError`).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BudgetExceededError",
    "BudgetUnavailableError",
    "DPKitError",
    "EngineError",
    "InsecureRandomnessError",
    "LedgerError",
    "PlanError",
    "PredicateError",
    "PrivacyParameterError",
    "SerializationError",
    "UnsupportedAggregateError",
    "UnsupportedEventError",
]


class DPKitError(Exception):
    """Base class of every error dpkit raises deliberately."""


class PrivacyParameterError(DPKitError, ValueError):
    """A privacy or mechanism parameter is invalid (NaN, infinite, negative, wrong type, ...).

    The message names the parameter and shows the rejected value.
    """


class BudgetExceededError(DPKitError):
    """A charge would take an accountant past its budget; nothing was charged or released.

    The message's first sentence says what was needed and what is left, in rounded numbers.
    The exact figures are attributes (``None`` when the refusal did not come from a budget
    check): ``event`` and ``count`` (what was to be charged), ``requested`` (the charge on its
    own: a :class:`~dpkit.accounting.budget.ChargeCost` or an ``(epsilon, delta)`` pair),
    ``remaining`` and ``spent`` (the budget's exact ``(epsilon, delta)`` before the charge),
    ``budget`` (its total), ``details`` (the full accounting, including the native unit
    of zCDP/GDP budgets and their allowances) and, for a query, ``allowed`` (the ``(epsilon,
    delta)`` it was given).
    """

    def __init__(
        self,
        message: str = "",
        *,
        event: Any = None,
        count: int | None = None,
        requested: Any = None,
        remaining: Any = None,
        spent: Any = None,
        budget: Any = None,
        details: str | None = None,
        allowed: Any = None,
    ) -> None:
        super().__init__(message)
        self.event = event
        self.count = count
        self.requested = requested
        self.remaining = remaining
        self.spent = spent
        self.budget = budget
        self.details = details
        self.allowed = allowed
        #: ``(need, left, total, analyst, note)`` of the first sentence, for restating it
        self.sentence_parts: Any = None


class BudgetUnavailableError(BudgetExceededError):
    """The budget cannot be charged in this process (an in-memory budget copied by ``fork``)."""


class LedgerError(BudgetUnavailableError):
    """The budget's ledger store failed (disk full, connection lost, ...) or disagrees with the
    budget (another definition under the same name); nothing was charged, so nothing may be
    released. A :class:`BudgetExceededError`, so ``except BudgetExceededError`` still stops the
    release."""


class UnsupportedEventError(DPKitError, TypeError):
    """An accountant was given an event it cannot interpret exactly; it refuses, never guesses."""


class SerializationError(DPKitError, ValueError):
    """Serialised data is malformed or names a type outside dpkit's allow-list."""


class InsecureRandomnessError(DPKitError):
    """A release asked for randomness that is not cryptographically secure without opting in."""


class PlanError(DPKitError, ValueError):
    """A query cannot run on this table's schema (a column of the wrong type, bounds the
    engine cannot represent): decided from the schema, before anything is charged."""


class EngineError(DPKitError, RuntimeError):
    """The engine could not run a statement (a missing file, a type the binder refuses).

    Raised only for reasons the plan and the schema decide (never for a value in the data):
    the compiler removes every data-dependent failure before the statement runs.
    """


class PredicateError(DPKitError, ValueError):
    """A row predicate uses a construct outside the allow-list, or does not parse."""


_EXTREME = (
    "the {w} value is one person's own value and has no private answer. Ask for a "
    "quantile instead, e.g. quantile(col, {q}, bounds=(lower, upper)); quantile(col, "
    "{e}, bounds=...) estimates the {x} within the public bounds"
)


#: Aggregates dpkit does not offer on purpose, with what to use instead.
_NOT_OFFERED: dict[str, str] = {
    "max": _EXTREME.format(w="largest", q=0.99, e=1.0, x="maximum"),
    "min": _EXTREME.format(w="smallest", q=0.01, e=0.0, x="minimum"),
    "median": "use quantile(col, 0.5, bounds=(lower, upper))",
    "avg": "use mean(col, bounds=(lower, upper))",
    "percentile": "use quantile(col, [levels], bounds=(lower, upper))",
}


class UnsupportedAggregateError(DPKitError, AttributeError):
    """An aggregate dpkit deliberately does not offer (``dpkit.max``): the message says why
    and what to ask for instead. Also an :class:`AttributeError`, so ``hasattr`` still works."""

    @classmethod
    def missing(cls, module: str, name: str) -> AttributeError:
        """The error for a missing ``module.name``: this class, saying why and what to use,
        for an aggregate dpkit does not offer on purpose (max, min, median, avg,
        percentile); the ordinary :class:`AttributeError` for any other name."""
        why = _NOT_OFFERED.get(name)
        if why is None:
            return AttributeError(f"module {module!r} has no attribute {name!r}")
        return cls(f"{module}.{name} is not offered: {why}")
