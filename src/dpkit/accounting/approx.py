"""Approximate (epsilon, delta)-DP accounting by basic composition.

Basic composition (Dwork and Roth 2014, Theorem 3.16): the (adaptive) composition of
``(eps_i, delta_i)``-DP mechanisms is ``(sum_i eps_i, sum_i delta_i)``-DP. Both sums are kept
exactly as :class:`fractions.Fraction` and rounded up only when answering.

Every event :class:`~dpkit.accounting.pure.PureDpAccountant` accepts is accepted here with
``delta = 0``, plus

* ``ApproxDpEvent(epsilon, delta)``: ``(epsilon, delta)``;
* ``PoissonSampledEvent`` of (a composition of) add/remove events accepted here:
  ``(ln(1 + q (e^eps - 1)), q delta)`` (Balle, Barthe and Gaboardi 2018, Theorem 8; Li, Qardaji
  and Su 2012, Theorem 1).

Gaussian noise has no single (eps, delta) pair (it has a whole curve): use
:class:`~dpkit.accounting.rdp.RdpAccountant` or the PLD accountant for it. It is refused here.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from dpkit._numeric.rounding import up
from dpkit.accounting._additive import AdditiveAccountant, sum_of_parts
from dpkit.accounting.pure import delta_at
from dpkit.events import (
    ApproxDpEvent,
    ComposedEvent,
    DpEvent,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    declares_add_remove,
    pure_epsilon_of,
    subsampled_epsilon,
)

__all__ = ["ApproxDpAccountant", "approx_cost_of", "gaussian_pair"]

#: (epsilon, delta) of one occurrence; epsilon ``math.inf`` for a non-private release.
ApproxCost = tuple[Fraction | float, Fraction]


def approx_cost_of(event: DpEvent) -> ApproxCost | None:
    """``(epsilon, delta)`` of ONE occurrence of ``event`` (exact), or ``None`` if unsupported."""
    if isinstance(event, ApproxDpEvent):
        return Fraction(event.epsilon), Fraction(event.delta)
    if isinstance(event, (ComposedEvent, SelfComposedEvent)):
        return sum_of_parts(event, approx_cost_of, 2)  # type: ignore[no-any-return]
    if isinstance(event, PoissonSampledEvent):
        if not declares_add_remove(event.event):
            return None
        sub = approx_cost_of(event.event)
        if sub is None:
            return None
        q = event.sampling_rate
        if q == 0.0:
            return Fraction(0), Fraction(0)
        if isinstance(sub[0], float):
            return math.inf, Fraction(q) * sub[1]
        return Fraction(subsampled_epsilon(up(sub[0]), q)), Fraction(q) * sub[1]
    pure = pure_epsilon_of(event)
    if pure is None:
        return None
    return pure, Fraction(0)


def gaussian_pair(event: GaussianEvent, delta: float) -> ApproxDpEvent | None:
    """The ``(epsilon, delta)`` pair of a Gaussian event at the given ``delta``, epsilon rounded up.

    A Gaussian with noise multiplier s is exactly ``mu``-GDP with ``mu = 1/s`` (Dong, Roth and
    Su 2022, Theorem 2.7), so it is ``(eps, delta_mu(eps))``-DP for every eps with the exact
    privacy profile ``delta_mu(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (DRS
    Corollary 2.13; Balle and Wang 2018, Theorem 8). With pmf slack a the profile becomes
    ``e^a delta_mu(eps - 2a)`` (see :mod:`dpkit.events`). The pair returned has the
    smallest epsilon (found by bisection on the rounded-up profile, so the safe end) whose
    profile value is at most ``delta``; mu is rounded up. ``None`` when no finite epsilon
    qualifies (``delta`` 0 or too small). Basic composition then adds the pair like any other
    ``(epsilon, delta)`` guarantee; the budget chooses ``delta`` from its state before the
    release, which basic composition allows (Rogers, Roth, Ullman and Vadhan 2016).
    """
    if not delta > 0.0:
        return None
    mu = up(1 / Fraction(event.noise_multiplier))
    eps = _gdp_epsilon(mu, up(Fraction(event.pmf_slack)), float(delta))
    if math.isinf(eps):
        return None
    return ApproxDpEvent(epsilon=eps, delta=delta)


@functools.lru_cache(maxsize=1024)
def _gdp_epsilon(mu: float, slack: float, delta: float) -> float:
    """:func:`~dpkit.accounting.gdp.gdp_epsilon`, remembered: a pure function of three doubles
    (a search of about 60 profile evaluations, ~0.1 s), asked again for every charge of the
    same calibrated Gaussian. Equal doubles give the same answer, so the cache cannot mix two
    different calls (a NaN never equals itself and is refused by the search each time)."""
    from dpkit.accounting.gdp import gdp_epsilon

    return gdp_epsilon(mu, slack, delta)


class ApproxDpAccountant(AdditiveAccountant):
    """Basic composition of (epsilon, delta)-DP events, exact in rationals.

    With totals (E, D): ``get_epsilon(delta)`` is E (rounded up) when ``delta >= D`` and infinity
    otherwise (no finite epsilon is certified below D); ``get_delta(epsilon)`` is D when
    ``epsilon >= E`` and the privacy profile of f_{E,D} below E
    (:func:`~dpkit.accounting.pure.delta_at`), rounded up.
    """

    is_upper_bound = True
    _width = 2
    _cost = staticmethod(approx_cost_of)

    @property
    def totals_exact(self) -> tuple[Fraction | float, Fraction]:
        """The exact composed ``(epsilon, delta)``; epsilon is ``math.inf`` if non-private."""
        with self._lock:
            return (math.inf if self._infinite else self._totals[0]), self._totals[1]

    def _epsilon(self, delta: float) -> float:
        if self._infinite or Fraction(delta) < self._totals[1]:
            return math.inf
        return up(self._totals[0])

    def _delta(self, epsilon: float) -> float:
        if self._infinite:
            return 1.0
        return delta_at(total_epsilon=self._totals[0], total_delta=self._totals[1], epsilon=epsilon)
