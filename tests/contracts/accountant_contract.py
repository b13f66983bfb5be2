"""Abstract contract tests that every dpkit privacy accountant inherits.

How to use it (the pytest configuration puts ``tests/contracts`` on ``pythonpath``, so the
module imports by name under ``--import-mode=importlib``)::

    from accountant_contract import AccountantContract

    class TestMyAccountantContract(AccountantContract):
        def make_accountant(self) -> PrivacyAccountant:
            return MyAccountant()

        def supported_event(self) -> DpEvent:
            return GaussianEvent(noise_multiplier=2.0)

The class name does not start with ``Test``, so pytest does not collect the abstract class
itself; each concrete ``Test...`` subclass runs every ``test_...`` method below. Override
``query_delta`` / ``query_epsilon`` if your accountant needs other query points, and
``monotone_rel_tol`` / ``composition_rel_tol`` if it is numeric (e.g. a discretised PLD).

The contract (STYLE.md item 6): no events gives epsilon 0; a non-private event gives infinity;
an unknown event (and an unknown event nested in a composition) is refused with
UnsupportedEventError and leaves the accountant untouched; epsilon is monotone in the count;
``supports`` is a dry run; ``clone()`` is an independent copy; ``spent()`` reads the
privacy profile.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import ClassVar

import pytest

from dpkit.accounting._base import PrivacyAccountant
from dpkit.errors import PrivacyParameterError, UnsupportedEventError
from dpkit.events import (
    ComposedEvent,
    DpEvent,
    NonPrivateEvent,
    NoOpEvent,
    SelfComposedEvent,
)

__all__ = ["AccountantContract", "UnknownEvent"]


@dataclasses.dataclass(frozen=True)
class UnknownEvent(DpEvent):
    """An event no dpkit accountant knows: every accountant must refuse it."""

    strength: float = 1.0
    type_name: ClassVar[str] = "unknown_test_event"


class AccountantContract(abc.ABC):
    """Base class of the accountant contract tests (see the module docstring)."""

    query_delta: float = 1e-6
    query_epsilon: float = 1.0
    monotone_rel_tol: float = 0.0
    composition_rel_tol: float = 1e-9

    @abc.abstractmethod
    def make_accountant(self) -> PrivacyAccountant:
        """A fresh accountant with nothing composed."""

    @abc.abstractmethod
    def supported_event(self) -> DpEvent:
        """An event of finite, non-zero cost that this accountant supports."""

    # -------------------------------------------------------------- helpers
    def _snapshot(self, acct: PrivacyAccountant) -> tuple[object, float, float]:
        return (
            acct.ledger,
            acct.get_epsilon(self.query_delta),
            acct.get_delta(self.query_epsilon),
        )

    # -------------------------------------------------------------- tests
    def test_no_events_gives_zero(self) -> None:
        acct = self.make_accountant()
        assert acct.get_epsilon(self.query_delta) == 0.0
        assert acct.get_delta(self.query_epsilon) == 0.0
        assert acct.ledger == ()

    def test_noop_costs_nothing(self) -> None:
        acct = self.make_accountant()
        acct.compose(NoOpEvent(), 5)
        assert acct.get_epsilon(self.query_delta) == 0.0

    def test_count_zero_costs_nothing(self) -> None:
        acct = self.make_accountant()
        acct.compose(self.supported_event(), 0)
        assert acct.get_epsilon(self.query_delta) == 0.0

    def test_non_private_gives_infinity(self) -> None:
        acct = self.make_accountant()
        assert acct.supports(NonPrivateEvent())
        acct.compose(self.supported_event())
        acct.compose(NonPrivateEvent())
        assert math.isinf(acct.get_epsilon(self.query_delta))

    def test_supported_event_has_positive_finite_cost(self) -> None:
        acct = self.make_accountant()
        assert acct.supports(self.supported_event())
        acct.compose(self.supported_event())
        eps = acct.get_epsilon(self.query_delta)
        assert 0.0 < eps < math.inf

    def test_unknown_event_refused(self) -> None:
        acct = self.make_accountant()
        assert not acct.supports(UnknownEvent())
        with pytest.raises(UnsupportedEventError):
            acct.compose(UnknownEvent())
        assert acct.ledger == ()
        assert acct.get_epsilon(self.query_delta) == 0.0

    def test_non_event_refused(self) -> None:
        acct = self.make_accountant()
        assert not acct.supports("laplace")  # type: ignore[arg-type]
        with pytest.raises(UnsupportedEventError):
            acct.compose("laplace")  # type: ignore[arg-type]

    def test_state_unchanged_after_refused_compose(self) -> None:
        acct = self.make_accountant()
        acct.compose(self.supported_event(), 2)
        before = self._snapshot(acct)
        # An unknown event nested after a supported one: the dry run must refuse the whole
        # composition before anything is applied.
        bad = ComposedEvent(events=(self.supported_event(), UnknownEvent()))
        assert not acct.supports(bad)
        with pytest.raises(UnsupportedEventError):
            acct.compose(bad, 3)
        with pytest.raises(UnsupportedEventError):
            acct.compose(SelfComposedEvent(event=UnknownEvent(), count=2))
        with pytest.raises(PrivacyParameterError):
            acct.compose(self.supported_event(), -1)
        with pytest.raises(PrivacyParameterError):
            acct.compose(self.supported_event(), True)  # type: ignore[arg-type]
        assert self._snapshot(acct) == before

    def test_supports_is_a_dry_run(self) -> None:
        acct = self.make_accountant()
        before = self._snapshot(acct)
        assert acct.supports(self.supported_event())
        assert self._snapshot(acct) == before

    def test_epsilon_monotone_in_count(self) -> None:
        previous = 0.0
        for count in (1, 2, 3, 5, 8, 13):
            acct = self.make_accountant()
            acct.compose(self.supported_event(), count)
            eps = acct.get_epsilon(self.query_delta)
            assert eps >= previous * (1.0 - self.monotone_rel_tol)
            previous = eps

    def test_delta_monotone_in_count(self) -> None:
        previous = 0.0
        for count in (1, 2, 4, 8):
            acct = self.make_accountant()
            acct.compose(self.supported_event(), count)
            d = acct.get_delta(self.query_epsilon)
            assert 0.0 <= d <= 1.0
            assert d >= previous * (1.0 - self.monotone_rel_tol)
            previous = d

    def test_self_composed_matches_count(self) -> None:
        a = self.make_accountant().compose(self.supported_event(), 4)
        b = self.make_accountant().compose(SelfComposedEvent(event=self.supported_event(), count=4))
        c = self.make_accountant().compose(ComposedEvent(events=(self.supported_event(),) * 4))
        ea = a.get_epsilon(self.query_delta)
        tol = self.composition_rel_tol
        assert b.get_epsilon(self.query_delta) == pytest.approx(ea, rel=tol)
        assert c.get_epsilon(self.query_delta) == pytest.approx(ea, rel=tol)

    def test_query_parameters_validated(self) -> None:
        acct = self.make_accountant()
        for bad in (math.nan, -1e-3, 1.0, math.inf, "0.1", None, True):
            with pytest.raises(PrivacyParameterError):
                acct.get_epsilon(bad)  # type: ignore[arg-type]
        for bad in (math.nan, -0.5, "1", None, False):
            with pytest.raises(PrivacyParameterError):
                acct.get_delta(bad)  # type: ignore[arg-type]

    def test_clone_is_independent(self) -> None:
        acct = self.make_accountant().compose(self.supported_event())
        before = self._snapshot(acct)
        copy = acct.clone()
        assert type(copy) is type(acct)
        assert self._snapshot(copy) == before
        copy.compose(self.supported_event(), 3)
        assert self._snapshot(acct) == before
        assert copy.get_epsilon(self.query_delta) >= before[1] * (1.0 - self.monotone_rel_tol)
        acct.compose(NonPrivateEvent())
        assert not math.isinf(copy.get_epsilon(self.query_delta))

    def test_spent_is_the_privacy_profile(self) -> None:
        acct = self.make_accountant()
        assert acct.spent() == (0.0, 0.0)
        acct.compose(self.supported_event())
        assert acct.spent(delta=self.query_delta) == (
            acct.get_epsilon(self.query_delta),
            self.query_delta,
        )
        assert acct.spent(epsilon=self.query_epsilon) == (
            self.query_epsilon,
            acct.get_delta(self.query_epsilon),
        )
        with pytest.raises(PrivacyParameterError):
            acct.spent(delta=self.query_delta, epsilon=self.query_epsilon)
        for bad in (math.nan, -1.0, True, "0.1"):
            with pytest.raises(PrivacyParameterError):
                acct.spent(delta=bad)  # type: ignore[arg-type]
            with pytest.raises(PrivacyParameterError):
                acct.spent(epsilon=bad)  # type: ignore[arg-type]

    def test_is_upper_bound_declared(self) -> None:
        assert isinstance(self.make_accountant().is_upper_bound, bool)
