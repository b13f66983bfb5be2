"""Calibration through the accountants' own arithmetic.

A budget does not read a mechanism's formulas: it reads the mechanism's *event*
(:mod:`dpkit.events`) and computes the cost with
:func:`dpkit.events.pure_epsilon_of` (pure and basic budgets; exact rationals). A
calibration that solves its own formula and rounds its own way can therefore be charged one ulp
more than asked, and a budget of e then refuses the very mechanism calibrated to e. So every
pure-DP calibration constructor here

1. aims at the target ``T = epsilon * (1 - 2**-40)`` (exact rational), and
2. checks ``pure_epsilon_of(event) <= T`` with the accountants' function, adding noise (one ulp
   of the noise parameter at a time, a handful of steps at most) until it holds.

The margin makes compositions fit too: k mechanisms calibrated to the double ``fl(e / k)``, which
is at most ``(e / k)(1 + 2**-53)``, cost at most ``e (1 + 2**-53)(1 - 2**-40) < e`` together,
for every k. Its price is a relative ``2**-40`` of extra noise. The reported ``.epsilon`` of a
pure-DP mechanism is the same ``pure_epsilon_of(event)``, rounded up.

Mechanisms whose constructor takes the epsilon itself (the exponential mechanism, report noisy
max, partition selection; :class:`~dpkit.mechanisms.BinnedQuantile` through its exponential
mechanisms) keep the epsilon asked for in their ``epsilon`` field but run at, and state in
their event, :func:`calibrated_epsilon` (and :func:`calibrated_delta`): the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TypeVar

from dpkit._numeric.rounding import down, up
from dpkit.errors import PrivacyParameterError
from dpkit.events import DpEvent, pure_epsilon_of

__all__ = [
    "CALIBRATION_MARGIN",
    "calibrated_delta",
    "calibrated_epsilon",
    "calibration_target",
    "charged_epsilon",
    "fit_noise",
    "reported_epsilon",
]

CALIBRATION_MARGIN = Fraction(1, 2**40)
_MAX_STEPS = 64

_M = TypeVar("_M")


def calibration_target(epsilon: float) -> Fraction:
    """``epsilon * (1 - 2**-40)``, exactly: what a calibration to ``epsilon`` aims at."""
    return Fraction(epsilon) * (1 - CALIBRATION_MARGIN)


def calibrated_epsilon(epsilon: float) -> float:
    """The largest double at most ``T = epsilon (1 - 2**-40)``: what a mechanism that takes an
    ``epsilon`` parameter and charges it as is (selection, partition selection) runs at and
    states in its event, so that ``k`` of them built with ``fl(e / k)`` fit a budget of ``e``."""
    return down(calibration_target(epsilon))


def calibrated_delta(delta: float) -> float:
    """``delta (1 - 2**-40)`` rounded down: the delta such a mechanism states (basic budgets
    add deltas exactly, so ``k`` of ``fl(d / k)`` must stay within ``d`` too)."""
    return down(Fraction(delta) * (1 - CALIBRATION_MARGIN))


def charged_epsilon(event: DpEvent) -> Fraction:
    """What a pure or basic budget charges for one occurrence of ``event`` (exact rational)."""
    cost = pure_epsilon_of(event)
    if cost is None or isinstance(cost, float):  # pragma: no cover - pure-DP events only here
        raise PrivacyParameterError(f"{event!r} has no finite pure-DP cost")
    return cost


def reported_epsilon(event: DpEvent) -> float:
    """:func:`charged_epsilon` rounded up to a double (the mechanism's ``.epsilon``)."""
    return up(charged_epsilon(event))


def fit_noise(
    build: Callable[[float], _M], noise: float, target: Fraction, cost: Callable[[_M], Fraction]
) -> _M:
    """``build(x)`` for the smallest ``x >= noise`` (stepping by ulps) whose ``cost`` (read from
    its event the way the accountants read it) is at most ``target``; ``noise`` is the
    calibrated value, normally already within the target."""
    x = noise
    for _ in range(_MAX_STEPS):
        mech = build(x)
        if cost(mech) <= target:
            return mech
        x = math.nextafter(x, math.inf)
    raise PrivacyParameterError(  # pragma: no cover - the calibration is off by an ulp at most
        f"could not calibrate the noise to epsilon {float(target)!r}"
    )
