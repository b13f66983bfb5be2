"""A privacy budget that is charged *before* each release: a privacy filter or an odometer.

:class:`Accountant` holds a budget (pure ``epsilon``, or ``(epsilon, delta)``) and an interpreter
accountant that turns events into privacy spent:

* ``delta == 0``: pure budget, :class:`~dpkit.accounting.pure.PureDpAccountant`; the spent
  epsilon is an exact :class:`fractions.Fraction` (the sum of the doubles charged), compared
  exactly with the budget;
* ``delta > 0`` and ``method="basic"`` (default):
  :class:`~dpkit.accounting.approx.ApproxDpAccountant`, exact sums of epsilons and of deltas;
* ``delta > 0`` and ``method="rdp"``: :class:`~dpkit.accounting.rdp.RdpAccountant`; the spent
  epsilon is the RDP conversion at the budget's delta, rounded up (Gaussian and subsampled
  Gaussian releases need this method). With ``rdp_order=alpha`` it uses that single order and
  nothing else (see below).

Modes. ``"filter"`` refuses, with :class:`~dpkit.errors.BudgetExceededError`, any charge after
which the spent privacy would exceed the budget: the caller must charge first and release only
if the charge succeeded. ``"odometer"`` never refuses for budget reasons: it records every
charge and reports what was spent.

Adaptively chosen privacy parameters. A filter lets the analyst pick each release's parameters
after seeing earlier results. Basic composition (pure and ``"basic"`` budgets) stays valid then
(Rogers, Roth, Ullman and Vadhan 2016, "Privacy odometers and filters"). For RDP, the filter
proven valid under adaptive parameters is the single-order Renyi filter of Feldman and Zrnic
(2021, Theorem 3.1): pass ``rdp_order=alpha``. The default ``method="rdp"`` rule (best order
of a grid, combined with the pure-DP sum) is exact for a schedule of parameters fixed in
advance; whether such "best of several bounds" rules remain valid when parameters are chosen
adaptively is not established (natural filters can fail in general: Regehr et al. 2026), so do
not rely on it for adaptively chosen parameters.

Safety rules kept here: every check runs on a *copy* of the state; the state changes in one
assignment after every check has passed, so a refused or failing charge leaves the accountant
exactly as it was; a lock makes check-and-update atomic across threads; state is saved and
restored as JSON through the event allow-list (:func:`~dpkit.accounting.events.event_to_dict`),
never by importing names found in the data.

A note on exactness: ``0.1`` as a double is slightly *more* than 1/10, so ten charges of
``epsilon=0.1`` add up to more than the budget ``1.0`` and the tenth is refused. This is the
exact arithmetic of the numbers given, and it errs on the safe side.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import threading
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from dpkit._numeric.rounding import down, up
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_positive,
)
from dpkit.accounting._base import PrivacyAccountant
from dpkit.accounting.approx import ApproxDpAccountant
from dpkit.accounting.events import (
    ApproxDpEvent,
    DpEvent,
    PureDpEvent,
    event_from_dict,
    event_to_dict,
)
from dpkit.accounting.pure import PureDpAccountant
from dpkit.errors import (
    BudgetExceededError,
    PrivacyParameterError,
    SerializationError,
    UnsupportedEventError,
)

__all__ = ["Accountant"]

_FORMAT = "dpkit.budget"
_VERSION = 1
_MODES = ("filter", "odometer")
_METHODS = ("basic", "rdp")


def _new_interpreter(kind: str, rdp_order: float | None) -> PrivacyAccountant:
    if kind == "pure":
        return PureDpAccountant()
    if kind == "basic":
        return ApproxDpAccountant()
    from dpkit.accounting.rdp import RdpAccountant

    if rdp_order is None:
        return RdpAccountant()
    return RdpAccountant(orders=(rdp_order,), combine_bounds=False)


def _clone(acct: PrivacyAccountant) -> PrivacyAccountant:
    clone = getattr(acct, "clone", None)
    if clone is None:  # pragma: no cover - every interpreter used here has clone()
        raise TypeError(f"{type(acct).__name__} cannot be copied")
    out: PrivacyAccountant = clone()
    return out


@dataclasses.dataclass(frozen=True)
class _State:
    """Everything that changes when a charge is accepted (replaced as a whole, never mutated)."""

    interpreter: PrivacyAccountant
    ledger: tuple[tuple[DpEvent, int], ...]
    spent_epsilon: Fraction | float  # exact for basic/pure, rounded up for rdp; inf if non-private
    spent_delta: Fraction


class Accountant:
    """A privacy budget charged before each release (filter) or a record of spending (odometer).

    Parameters (keyword-only)
    -------------------------
    epsilon:
        The epsilon budget (> 0). Required in ``"filter"`` mode; optional (``None``: no limit,
        report only) in ``"odometer"`` mode.
    delta:
        The delta budget, in [0, 1). ``0`` makes a pure budget.
    mode:
        ``"filter"`` (refuse overspending) or ``"odometer"`` (record and report).
    method:
        ``"basic"`` or ``"rdp"``: how an ``(epsilon, delta)`` budget interprets events; ignored
        for a pure budget.
    rdp_order:
        With ``method="rdp"``: use this single Renyi order (> 1) and only the RDP conversion,
        the filter proven valid for adaptively chosen parameters (Feldman and Zrnic 2021).

    Examples
    --------
    >>> acct = Accountant(epsilon=1.0)
    >>> acct.charge(epsilon=0.25)
    >>> acct.spent
    (0.25, 0.0)
    """

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        delta: float = 0.0,
        mode: str = "filter",
        method: str = "basic",
        rdp_order: float | None = None,
    ) -> None:
        if mode not in _MODES:
            raise PrivacyParameterError(f"mode must be 'filter' or 'odometer', got {mode!r}")
        if method not in _METHODS:
            raise PrivacyParameterError(f"method must be 'basic' or 'rdp', got {method!r}")
        if epsilon is None:
            if mode == "filter":
                raise PrivacyParameterError("a filter needs an epsilon budget")
            self._budget_epsilon: float | None = None
        else:
            self._budget_epsilon = check_epsilon(epsilon)
        self._budget_delta = check_delta(delta)
        self._mode = mode
        self._method = method
        if self._budget_delta == 0.0:
            self._kind = "pure"
        else:
            self._kind = method
        if rdp_order is None:
            self._rdp_order: float | None = None
        else:
            if self._kind != "rdp":
                raise PrivacyParameterError("rdp_order needs method='rdp' and delta > 0")
            self._rdp_order = check_positive("rdp_order", rdp_order)
            if not 1.0 < self._rdp_order <= 1e6:
                raise PrivacyParameterError(f"rdp_order must lie in (1, 1e6], got {rdp_order!r}")
        self._lock = threading.Lock()
        self._state = _State(
            interpreter=_new_interpreter(self._kind, self._rdp_order),
            ledger=(),
            spent_epsilon=Fraction(0),
            spent_delta=Fraction(0),
        )

    # ------------------------------------------------------------------ properties
    @property
    def mode(self) -> str:
        """``"filter"`` or ``"odometer"``."""
        return self._mode

    @property
    def kind(self) -> str:
        """How events are interpreted: ``"pure"``, ``"basic"`` or ``"rdp"``."""
        return self._kind

    @property
    def budget(self) -> tuple[float | None, float]:
        """``(epsilon, delta)`` budget as given (epsilon ``None`` for an unlimited odometer)."""
        return self._budget_epsilon, self._budget_delta

    @property
    def spent(self) -> tuple[float, float]:
        """``(epsilon, delta)`` spent so far, rounded up (``inf`` after a non-private release).

        For the ``"rdp"`` method the epsilon is the RDP conversion at the budget's delta, and the
        delta reported is the budget's delta once anything has been charged.
        """
        state = self._state  # one read of an immutable snapshot: consistent without the lock
        return up(state.spent_epsilon), min(up(state.spent_delta), 1.0)

    @property
    def spent_epsilon_exact(self) -> Fraction | float:
        """The exact spent epsilon (a Fraction for pure/basic budgets), or ``math.inf``."""
        return self._state.spent_epsilon

    @property
    def remaining(self) -> tuple[float, float]:
        """``(epsilon, delta)`` still available, rounded down and never negative.

        ``(inf, ...)`` for an odometer without a budget.
        """
        state = self._state
        if self._budget_epsilon is None:
            return math.inf, max(down(Fraction(self._budget_delta) - state.spent_delta), 0.0)
        if isinstance(state.spent_epsilon, float):
            rem_e = 0.0 if math.isinf(state.spent_epsilon) else down(
                Fraction(self._budget_epsilon) - Fraction(state.spent_epsilon)
            )
        else:
            rem_e = down(Fraction(self._budget_epsilon) - state.spent_epsilon)
        rem_d = down(Fraction(self._budget_delta) - state.spent_delta)
        return max(rem_e, 0.0), max(rem_d, 0.0)

    @property
    def ledger(self) -> tuple[tuple[DpEvent, int], ...]:
        """Every accepted charge, in order, as ``(event, count)``."""
        return self._state.ledger

    @property
    def exceeded(self) -> bool:
        """Whether the spent privacy is over the budget (possible only for an odometer)."""
        return not self._within(self._state)

    # ------------------------------------------------------------------ charging
    @staticmethod
    def _to_event(event: DpEvent | None, epsilon: float | None, delta: float | None) -> DpEvent:
        if event is not None:
            if epsilon is not None or delta is not None:
                raise PrivacyParameterError("charge either an event or epsilon/delta, not both")
            if not isinstance(event, DpEvent):
                raise UnsupportedEventError(f"not a DpEvent: {event!r}")
            return event
        if epsilon is None:
            raise PrivacyParameterError("charge needs an event or an epsilon")
        eps = check_epsilon(epsilon, allow_zero=True)
        d = 0.0 if delta is None else check_delta(delta)
        if d == 0.0:
            return PureDpEvent(epsilon=eps)
        return ApproxDpEvent(epsilon=eps, delta=d)

    def _spent_of(self, interpreter: PrivacyAccountant, nonempty: bool) -> tuple[Any, Fraction]:
        if isinstance(interpreter, PureDpAccountant):
            return interpreter.epsilon_exact, Fraction(0)
        if isinstance(interpreter, ApproxDpAccountant):
            return interpreter.totals_exact
        eps = interpreter.get_epsilon(self._budget_delta)
        if eps == 0.0 or not nonempty:
            return Fraction(0), Fraction(0)
        return (math.inf if math.isinf(eps) else Fraction(eps)), Fraction(self._budget_delta)

    def _within(self, state: _State) -> bool:
        if self._budget_epsilon is None:
            return True
        e = state.spent_epsilon
        if isinstance(e, float):  # only ever math.inf
            return False
        return e <= Fraction(self._budget_epsilon) and state.spent_delta <= Fraction(
            self._budget_delta
        )

    def charge(
        self,
        event: DpEvent | None = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
    ) -> None:
        """Charge ``event`` (or a black-box ``epsilon``/``delta`` release) ``count`` times.

        Call this BEFORE making the release, and release only if it returns. In filter mode it
        raises :class:`~dpkit.errors.BudgetExceededError` when the charge would take the spent
        privacy past the budget; an event the interpreter cannot read exactly raises
        :class:`~dpkit.errors.UnsupportedEventError`. In both cases nothing changes.
        """
        ev = self._to_event(event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        with self._lock:
            old = self._state
            trial = _clone(old.interpreter)
            trial.compose(ev, n)  # may raise UnsupportedEventError; only the copy is touched
            spent_e, spent_d = self._spent_of(trial, nonempty=True)
            new = _State(
                interpreter=trial,
                ledger=(*old.ledger, (ev, n)),
                spent_epsilon=spent_e,
                spent_delta=spent_d,
            )
            if self._mode == "filter" and not self._within(new):
                raise BudgetExceededError(
                    f"charging {ev!r} x{n} would spend {self._describe(new)}, over the budget "
                    f"(epsilon={self._budget_epsilon!r}, delta={self._budget_delta!r}); "
                    f"already spent {self._describe(old)}"
                )
            self._state = new  # the only state change

    def _describe(self, state: _State) -> str:
        return f"(epsilon={up(state.spent_epsilon)!r}, delta={up(state.spent_delta)!r})"

    def can_charge(
        self,
        event: DpEvent | None = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
    ) -> bool:
        """Whether :meth:`charge` would accept this charge now (changes nothing).

        With several threads, another charge may land between this answer and a later
        :meth:`charge`: only the return of :meth:`charge` itself authorises a release.
        """
        ev = self._to_event(event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        with self._lock:
            trial = _clone(self._state.interpreter)
            if not trial.supports(ev):
                return False
            trial.compose(ev, n)
            spent_e, spent_d = self._spent_of(trial, nonempty=True)
            probe = _State(trial, self._state.ledger, spent_e, spent_d)
            return self._mode == "odometer" or self._within(probe)

    @contextlib.contextmanager
    def reserve(
        self,
        event: DpEvent | None = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
    ) -> Iterator[Accountant]:
        """Charge on entry, then run the release in the ``with`` block.

        ``with acct.reserve(event): value = mechanism.release(data)``. The block runs only if
        the charge was accepted. The charge is never refunded, even if the block raises: a
        release that failed half-way may already have revealed something.
        """
        self.charge(event, epsilon=epsilon, delta=delta, count=count)
        yield self

    # ------------------------------------------------------------------ persistence
    def to_json(self) -> str:
        """The budget, the mode and the ledger of charges as JSON (events via the allow-list)."""
        state = self._state
        data = {
            "format": _FORMAT,
            "version": _VERSION,
            "epsilon": self._budget_epsilon,
            "delta": self._budget_delta,
            "mode": self._mode,
            "method": self._method,
            "rdp_order": self._rdp_order,
            "ledger": [{"event": event_to_dict(e), "count": n} for e, n in state.ledger],
        }
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Accountant:
        """Rebuild an accountant saved by :meth:`to_json` by replaying its ledger.

        Raises :class:`~dpkit.errors.SerializationError` for malformed data, unknown event types
        (only the allow-list is consulted), or a ledger that a filter would not have accepted.
        """
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, TypeError) as exc:
            raise SerializationError(f"not JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise SerializationError("not a saved dpkit budget")
        if data.get("version") != _VERSION:
            raise SerializationError(f"unsupported budget version {data.get('version')!r}")
        expected = {
            "format", "version", "epsilon", "delta", "mode", "method", "rdp_order", "ledger"
        }
        if set(data) != expected:
            raise SerializationError(f"budget fields must be {sorted(expected)}")
        ledger = data["ledger"]
        if not isinstance(ledger, list):
            raise SerializationError("'ledger' must be a list")
        try:
            acct = cls(
                epsilon=data["epsilon"],
                delta=data["delta"],
                mode=data["mode"],
                method=data["method"],
                rdp_order=data["rdp_order"],
            )
        except PrivacyParameterError as exc:
            raise SerializationError(f"invalid budget: {exc}") from exc
        for item in ledger:
            if not isinstance(item, dict) or set(item) != {"event", "count"}:
                raise SerializationError(f"ledger entries are {{event, count}}, got {item!r}")
            ev = event_from_dict(item["event"])
            try:
                acct.charge(ev, count=item["count"])
            except (BudgetExceededError, UnsupportedEventError, PrivacyParameterError) as exc:
                raise SerializationError(f"saved ledger cannot be replayed: {exc}") from exc
        return acct

    def __repr__(self) -> str:
        e, d = self.spent
        return (
            f"Accountant(epsilon={self._budget_epsilon!r}, delta={self._budget_delta!r}, "
            f"mode={self._mode!r}, kind={self._kind!r}, spent=({e!r}, {d!r}))"
        )
