"""The one exception hierarchy of dpkit.

Every error dpkit raises on purpose derives from :class:`DPKitError`, so callers can catch
everything dpkit refuses with one ``except`` clause while keeping the ordinary Python meaning
(a bad parameter is also a :class:`ValueError`, a wrong type also a :class:`TypeError`).
"""

from __future__ import annotations

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
    """A charge would take an accountant past its budget; nothing was charged or released."""


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
