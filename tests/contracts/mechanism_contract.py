"""Abstract contract tests that every mechanism in :mod:`dpkit.mechanisms` inherits.

Subclass :class:`MechanismContract` in a ``Test...`` class (the pytest configuration puts
``tests/contracts`` on ``pythonpath``, so ``from mechanism_contract import MechanismContract``
works under ``--import-mode=importlib``) and provide:

* ``make_mechanism()``: a mechanism calibrated to a finite, non-zero cost;
* ``array_input()``: a valid input array (``release`` maps it to ``output_shape(x)``);
* ``scalar_input()``: a valid scalar input, or ``None`` when the mechanism has none;
* ``special_inputs()``: inputs of the right dtype carrying special values (NaN, infinities,
  extremes, signed zeros) that ``release`` must release without raising;
* ``builders()``: one callable per privacy parameter, building a mechanism from that value.

The contract (what :class:`dpkit.mechanisms.Mechanism` promises): the mechanism is a
``Mechanism``, immutable, and built with keywords only; its ``event`` is a :class:`DpEvent` that
a dpkit accountant accepts at a finite, non-zero cost; every privacy parameter refuses NaN,
infinities, negatives, bools and strings with :class:`PrivacyParameterError`; ``release`` keeps
the shape (a scalar in gives a 0-d result out); a seeded source reproduces a release, and a seed
is refused unless ``insecure=True``; ``release`` never raises on special values of the right
dtype (no exception that depends on a value).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpkit.accounting import (
    ApproxDpAccountant,
    PldAccountant,
    PureDpAccountant,
    RdpAccountant,
    ZCdpAccountant,
)
from dpkit.errors import InsecureRandomnessError, PrivacyParameterError
from dpkit.events import DpEvent
from dpkit.mechanisms import Mechanism
from dpkit.noise import RandomSource

__all__ = ["BAD_PARAMETERS", "MechanismContract"]

#: Values every privacy parameter must refuse with PrivacyParameterError.
BAD_PARAMETERS: tuple[Any, ...] = (math.nan, math.inf, -math.inf, -1.0, True, False, "1", None)


def _accountants() -> tuple[Any, ...]:
    return (
        PureDpAccountant(),
        ApproxDpAccountant(),
        ZCdpAccountant(),
        RdpAccountant(),
        PldAccountant(),
    )


class MechanismContract(abc.ABC):
    """Base class of the mechanism contract tests (see the module docstring)."""

    @abc.abstractmethod
    def make_mechanism(self) -> Any: ...

    @abc.abstractmethod
    def array_input(self) -> Any: ...

    @abc.abstractmethod
    def scalar_input(self) -> Any | None: ...

    @abc.abstractmethod
    def special_inputs(self) -> list[Any]: ...

    @abc.abstractmethod
    def builders(self) -> dict[str, Callable[[Any], Any]]: ...

    def output_shape(self, x: Any) -> tuple[int, ...]:
        """Shape of ``release(x)`` (default: the shape of the input)."""
        return tuple(np.shape(x))

    # -------------------------------------------------------------- tests
    def test_is_a_mechanism(self) -> None:
        assert isinstance(self.make_mechanism(), Mechanism)

    def test_immutable(self) -> None:
        mech = self.make_mechanism()
        assert dataclasses.is_dataclass(mech)
        fields = dataclasses.fields(mech)
        assert fields
        for f in fields:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(mech, f.name, getattr(mech, f.name))
        with pytest.raises(dataclasses.FrozenInstanceError):
            mech.brand_new_attribute = 1
        assert mech == self.make_mechanism()
        assert hash(mech) == hash(self.make_mechanism())

    def test_fields_are_keyword_only(self) -> None:
        mech = self.make_mechanism()
        assert all(f.kw_only for f in dataclasses.fields(mech))
        values = [getattr(mech, f.name) for f in dataclasses.fields(mech) if f.init]
        with pytest.raises(TypeError):
            type(mech)(*values)

    def test_event_is_accepted_by_an_accountant(self) -> None:
        event = self.make_mechanism().event
        assert isinstance(event, DpEvent)
        for acct in _accountants():
            if acct.supports(event):
                acct.compose(event)
                eps = acct.get_epsilon(1e-6)
                assert 0.0 < eps < math.inf, (type(acct).__name__, eps)
                return
        pytest.fail(f"no accountant accepts {event!r}")

    @pytest.mark.parametrize("bad", BAD_PARAMETERS, ids=repr)
    def test_privacy_parameters_validated(self, bad: Any) -> None:
        builders = self.builders()
        assert builders
        for name, build in builders.items():
            with pytest.raises(PrivacyParameterError):
                build(bad)
                pytest.fail(f"{name}={bad!r} accepted")

    def test_release_keeps_the_shape(self) -> None:
        mech = self.make_mechanism()
        x = self.array_input()
        out = mech.release(x)
        assert np.shape(out) == self.output_shape(x)
        scalar = self.scalar_input()
        if scalar is not None:
            assert np.ndim(mech.release(scalar)) == 0

    def test_seeded_release_reproducible_only_when_insecure(self) -> None:
        mech = self.make_mechanism()
        x = self.array_input()
        a = mech.release(x, source=RandomSource(seed=1234, insecure=True))
        b = mech.release(x, source=RandomSource(seed=1234, insecure=True))
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        with pytest.raises(InsecureRandomnessError):
            mech.release(x, source=RandomSource(seed=1234))

    def test_release_never_raises_on_special_values(self) -> None:
        mech = self.make_mechanism()
        specials = self.special_inputs()
        assert specials
        for x in specials:
            out = mech.release(x)
            assert np.shape(out) == self.output_shape(x), x
