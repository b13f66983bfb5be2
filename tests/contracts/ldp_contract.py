"""Abstract contract tests that every local-DP protocol in :mod:`dpkit.ldp` inherits.

Subclass :class:`LdpContract` (``from ldp_contract import LdpContract``; ``tests/contracts`` is on
the pytest ``pythonpath``) and provide ``build(epsilon)`` (a protocol on a small domain),
``inputs()`` (valid user values) and ``is_frequency_oracle``.

The contract: every report ``randomize`` returns lies in the support of the exact report law
(``report_distribution``) and is JSON-serialisable; the device-side class of the same name in
:mod:`dpkit.ldp.client` (standard library only) is a base of the server class and randomizes on
its own with the same support; ``randomize_many`` reports are all well-formed; ``estimate`` has
one count per domain item (frequency oracles) or one mean; ``variance`` is positive and finite;
epsilon refuses NaN, infinities, negatives, bools and strings with ``PrivacyParameterError``;
``event`` is accepted by the pure-DP accountant at a cost never below the exact epsilon of the
implemented law (computed from ``report_distribution``) and at most ``epsilon``, with no slack:
the law runs at ``run_epsilon``, ``epsilon (1 - 2**-40)`` rounded down, which the device-side
class computes as the server does.
"""

from __future__ import annotations

import abc
import json
import math
from typing import Any

import mpmath
import numpy as np
import pytest

from dpkit.accounting import PureDpAccountant
from dpkit.errors import PrivacyParameterError
from dpkit.events import DpEvent
from dpkit.ldp import client
from dpkit.noise import RandomSource

__all__ = ["LdpContract"]

BAD_EPSILONS: tuple[Any, ...] = (math.nan, math.inf, -math.inf, -1.0, 0.0, True, "1", None)


def _key(report: Any) -> Any:
    return tuple(report) if isinstance(report, list) else report


class LdpContract(abc.ABC):
    """Base class of the local-DP protocol contract tests (see the module docstring)."""

    is_frequency_oracle: bool = True
    #: epsilons at which the event is checked against the exact law (the report law must stay
    #: small enough to enumerate)
    event_epsilons: tuple[float, ...] = (0.75, 12.0, 30.0)

    @abc.abstractmethod
    def build(self, epsilon: Any) -> Any: ...

    @abc.abstractmethod
    def inputs(self) -> list[Any]: ...

    def client_kwargs(self) -> dict[str, Any]:
        """Constructor arguments of the stand-alone client besides epsilon."""
        return {}

    # -------------------------------------------------------------- tests
    def test_randomize_stays_in_the_report_domain(self) -> None:
        proto = self.build(1.0)
        for value in self.inputs():
            support = {_key(r) for r in proto.report_distribution(value)}
            for _ in range(30):
                report = proto.randomize(value)
                assert _key(report) in support, (value, report)
                assert json.loads(json.dumps(report)) == report

    def test_standard_library_client_alone(self) -> None:
        proto = self.build(1.0)
        device_cls = getattr(client, type(proto).__name__)
        assert device_cls in type(proto).__mro__
        device = device_cls(epsilon=1.0, **self.client_kwargs())
        assert type(device).__module__ == "dpkit.ldp.client"
        # the device runs the very law the server's event describes (same run_epsilon)
        assert device.run_epsilon == proto.run_epsilon < proto.epsilon
        for value in self.inputs():
            support = {_key(r) for r in proto.report_distribution(value)}
            assert {_key(r) for r in device.report_distribution(value)} == support
            assert device.report_distribution(value) == proto.report_distribution(value)
            for _ in range(10):
                assert _key(device.randomize(value)) in support

    def test_randomize_many_reports_are_well_formed(self) -> None:
        proto = self.build(1.0)
        values = self.inputs() * 50
        reports = proto.randomize_many(
            np.asarray(values), source=RandomSource(seed=5, insecure=True)
        )
        _, rejected = proto.coerce_reports(reports)
        assert rejected == 0

    def test_estimate_shape(self) -> None:
        proto = self.build(1.0)
        values = self.inputs() * 50
        reports = proto.randomize_many(
            np.asarray(values), source=RandomSource(seed=6, insecure=True)
        )
        est = proto.estimate(reports)
        assert est.n == len(values)
        assert est.rejected == 0
        if self.is_frequency_oracle:
            assert np.shape(est.counts) == (proto.d,)
            assert np.all(np.isfinite(est.counts))
        else:
            assert isinstance(est.mean, float) and math.isfinite(est.mean)

    def test_variance_positive(self) -> None:
        proto = self.build(1.0)
        for n in (1, 1000):
            var = proto.variance(n)
            assert 0.0 < var < math.inf
        # frequency oracles give the variance of a count (linear in n), mean mechanisms the
        # variance of a mean (proportional to 1/n)
        ratio = 1000.0 if self.is_frequency_oracle else 1e-3
        assert proto.variance(1000) == pytest.approx(ratio * proto.variance(1), rel=1e-12)

    @pytest.mark.parametrize("bad", BAD_EPSILONS, ids=repr)
    def test_epsilon_validated(self, bad: Any) -> None:
        with pytest.raises(PrivacyParameterError):
            self.build(bad)

    def test_event_never_understates_the_implemented_law(self) -> None:
        for epsilon in self.event_epsilons:
            self._check_event(epsilon)

    def _check_event(self, epsilon: float) -> None:
        # The exact epsilon of the law that runs: the largest log-ratio of report probabilities
        # between two inputs (exact rationals; logarithm with 40 digits).
        mpmath.mp.dps = 40
        proto = self.build(epsilon)
        laws = [proto.report_distribution(v) for v in self.inputs()]
        worst = max(
            a[r] / b.get(r, 0) if b.get(r, 0) else math.inf for a in laws for b in laws for r in a
        )
        exact = mpmath.log(mpmath.mpf(worst.numerator) / worst.denominator)
        assert isinstance(proto.event, DpEvent)
        charged = PureDpAccountant().compose(proto.event).get_epsilon(0.0)
        assert charged >= exact
        assert exact <= proto.run_epsilon <= proto.epsilon
        assert proto.run_epsilon == client.calibrated_epsilon(proto.epsilon)
        # one protocol always fits a budget of its own epsilon (no rounding pushes it over)
        assert charged <= proto.epsilon
