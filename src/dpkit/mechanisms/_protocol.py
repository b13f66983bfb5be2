"""The mechanism contract: what the auditor, the budget and the analytics layer may rely on.

Every class exported by :mod:`dpkit.mechanisms` satisfies :class:`Mechanism`:

* ``release(values, *, source=None)`` draws one release (``source=None`` means the secure
  default :class:`~dpkit.noise.RandomSource`; a seeded source is refused unless it was built
  with ``insecure=True``);
* ``event`` is the release described as a :class:`~dpkit.events.DpEvent`, the
  mechanism's full privacy profile: any accountant that accepts it answers ``epsilon(delta)``
  and ``delta(epsilon)`` for it, and a budget charges it.

The event is the one privacy statement the contract promises. Mechanisms also expose their
calibration (``epsilon`` for the pure ones, ``epsilon_for``/``delta_for`` for the Gaussian,
``delta_at`` for Gaussian partition selection), rounded towards more privacy spent, but those
differ by family and are not part of the contract. Mechanisms that draw many independent
releases on one input at once (the selection mechanisms) also satisfy :class:`BatchMechanism`.

The protocols are ``runtime_checkable``: ``isinstance(m, Mechanism)`` checks that the members
exist (not their signatures); ``tests/contracts/mechanism_contract.py`` checks the behaviour.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from dpkit.events import DpEvent
from dpkit.noise import RandomSource

__all__ = ["BatchMechanism", "Mechanism"]


@runtime_checkable
class Mechanism(Protocol):
    """An immutable randomized algorithm with a privacy profile (see the module docstring)."""

    @property
    def event(self) -> DpEvent:
        """The release as an accounting event (its privacy profile)."""
        ...

    def release(self, values: Any, /, *, source: RandomSource | None = None) -> Any:
        """One release on ``values``, drawn from ``source`` (secure by default)."""
        ...


@runtime_checkable
class BatchMechanism(Mechanism, Protocol):
    """A :class:`Mechanism` that draws ``count`` independent releases on one input at once."""

    def release_many(
        self, values: Any, /, *, count: int, source: RandomSource | None = None
    ) -> Any:
        """``count`` independent releases on the same input (one array)."""
        ...
