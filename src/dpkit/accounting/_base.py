"""The contract every privacy accountant (event interpreter) follows.

Events are data and accountants interpret them: ``compose`` walks the event once as a dry run
(nothing changes, unsupported parts raise) and then again for real, through the *same* method
``_walk(event, count, apply)``, so checking can never drift from applying. An unsupported event
raises :class:`~dpkit.errors.UnsupportedEventError` and leaves the accountant untouched.

Every accountant composes guarantees under one neighbouring relation: an event whose leaves
state different relations, or a relation other than the one of the events already composed, is
refused (guarantees under add/remove and under replace-one do not add up). Black-box events
(``PureDpEvent``, ``ApproxDpEvent``, zCDP events) state no relation and are composed as given;
:class:`~dpkit.accounting.budget.Budget` restates every event under its own relation first.
"""

from __future__ import annotations

import abc
import copy
import threading
from typing import TypeVar

from dpkit._numeric.validation import check_delta, check_epsilon, check_integer
from dpkit.errors import PrivacyParameterError, UnsupportedEventError
from dpkit.events import (
    ComposedEvent,
    DpEvent,
    Neighbouring,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

__all__ = ["PrivacyAccountant", "stated_relations"]


def stated_relations(event: DpEvent) -> frozenset[Neighbouring]:
    """The neighbouring relations stated by the leaves of ``event`` (composites walked)."""
    if isinstance(event, ComposedEvent):
        return frozenset().union(*(stated_relations(e) for e in event.events))
    if isinstance(event, (SelfComposedEvent, PoissonSampledEvent, SampledWithoutReplacementEvent)):
        return stated_relations(event.event)
    relation = getattr(event, "neighbouring", None)
    return frozenset((relation,)) if isinstance(relation, Neighbouring) else frozenset()


_A = TypeVar("_A", bound="PrivacyAccountant")


class PrivacyAccountant(abc.ABC):
    """Interprets events and answers epsilon(delta) / delta(epsilon) for their composition.

    Subclasses implement :meth:`_walk` (interpret or dry-run one event ``count`` times; return
    ``False`` when unsupported) and :meth:`_epsilon` / :meth:`_delta`. ``is_upper_bound`` says
    whether the answers are guaranteed upper bounds (``True``) or estimates (``False``).
    """

    is_upper_bound: bool = True

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._events: list[tuple[DpEvent, int]] = []

    @abc.abstractmethod
    def _walk(self, event: DpEvent, count: int, apply: bool) -> bool:
        """Interpret ``event`` composed ``count`` times; change state only when ``apply``."""

    def _relation_clash(self, event: DpEvent) -> str | None:
        """Why ``event`` cannot join the events composed so far (``None``: it can)."""
        relations = stated_relations(event)
        if len(relations) > 1:
            return "its parts state different neighbouring relations"
        if not relations:
            return None
        known = self._first_relation()
        if known and known != relations:
            (rel,) = relations
            (was,) = known
            return (
                f"it states {rel.value!r} neighbours and the events composed so far "
                f"state {was.value!r}"
            )
        return None

    def _first_relation(self) -> frozenset[Neighbouring]:
        """The relation stated by the first composed event that states one (empty if none).

        Events are only ever appended, so the scan resumes where the previous call stopped and
        stops for good once a relation is found: a long history is not walked at every charge.
        """
        scanned, found = getattr(self, "_relation_scan", (0, frozenset()))
        if not found:
            for old, _ in self._events[scanned:]:
                found = stated_relations(old)
                if found:
                    break
            self._relation_scan: tuple[int, frozenset[Neighbouring]] = (len(self._events), found)
        return found

    def _copy_history_to(self, new: PrivacyAccountant) -> None:
        """Give a clone this accountant's composed events (and where the relation scan stands)."""
        new._events = list(self._events)
        if hasattr(self, "_relation_scan"):
            new._relation_scan = self._relation_scan

    def supports(self, event: DpEvent) -> bool:
        """Whether :meth:`compose` would accept ``event`` (a dry run; changes nothing)."""
        if not isinstance(event, DpEvent):
            return False
        with self._lock:
            return self._relation_clash(event) is None and self._walk(event, 1, apply=False)

    def compose(self, event: DpEvent, count: int = 1) -> PrivacyAccountant:
        """Add ``event`` repeated ``count`` times; refuse (unchanged) if not exactly supported."""
        count = check_integer(count, name="count", minimum=0)
        if not isinstance(event, DpEvent):
            raise UnsupportedEventError(f"not a DpEvent: {event!r}")
        with self._lock:
            clash = self._relation_clash(event)
            if clash is not None:
                raise UnsupportedEventError(
                    f"{type(self).__name__} cannot compose {event!r}: {clash}; guarantees under "
                    "add/remove and replace-one neighbours do not add up (a Budget with "
                    "neighbouring='add_remove' or 'replace' restates what can be restated)"
                )
            if not self._walk(event, count, apply=False):
                raise UnsupportedEventError(
                    f"{type(self).__name__} cannot interpret {event!r} exactly"
                )
            self._walk(event, count, apply=True)  # the only state change
            self._events.append((event, count))
        return self

    @property
    def ledger(self) -> tuple[tuple[DpEvent, int], ...]:
        """The events composed so far, with their counts."""
        with self._lock:
            return tuple(self._events)

    def clone(self: _A) -> _A:
        """An independent copy with the same state (a budget tries a charge on a clone first).

        The default deep-copies every attribute except the lock (the copy gets a fresh one);
        accountants whose state is cheaper to copy by hand override it.
        """
        with self._lock:
            state = {k: copy.deepcopy(v) for k, v in vars(self).items() if k != "_lock"}
        new = copy.copy(self)
        vars(new).update(state)
        new._lock = threading.RLock()
        return new

    def spent(
        self, *, delta: float | None = None, epsilon: float | None = None
    ) -> tuple[float, float]:
        """The ``(epsilon, delta)`` pair spent so far, on this accountant's privacy profile.

        Give at most one coordinate: ``delta`` (default 0) returns ``(get_epsilon(delta),
        delta)``; ``epsilon`` returns ``(epsilon, get_delta(epsilon))``. Both answers are
        rounded up, as :meth:`get_epsilon` and :meth:`get_delta` are.
        """
        if delta is not None and epsilon is not None:
            raise PrivacyParameterError("give delta= or epsilon=, not both")
        if epsilon is not None:
            eps = check_epsilon(epsilon, allow_zero=True)
            return eps, self.get_delta(eps)
        d = check_delta(0.0 if delta is None else delta)
        return self.get_epsilon(d), d

    def get_epsilon(self, delta: float) -> float:
        """Smallest epsilon this accountant can certify at ``delta`` (rounded up)."""
        delta = check_delta(delta)
        with self._lock:
            return self._epsilon(delta)

    def get_delta(self, epsilon: float) -> float:
        """Smallest delta this accountant can certify at ``epsilon`` (rounded up)."""
        epsilon = check_epsilon(epsilon, allow_zero=True)
        with self._lock:
            return self._delta(epsilon)

    @abc.abstractmethod
    def _epsilon(self, delta: float) -> float: ...

    @abc.abstractmethod
    def _delta(self, epsilon: float) -> float: ...
