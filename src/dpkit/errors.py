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
    "InsecureRandomnessError",
    "LedgerError",
    "PrivacyParameterError",
    "SerializationError",
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

    def __init__(self, message: str = "", *, event: Any = None, count: int | None = None,
                 requested: Any = None, remaining: Any = None, spent: Any = None,
                 budget: Any = None, details: str | None = None, allowed: Any = None) -> None:
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
