"""Pure epsilon-DP accounting by basic (sequential) composition.

Basic composition (Dwork and Roth 2014, Theorem 3.16; Corollary 3.15 for pure DP): running
mechanisms that are ``eps_i``-DP (independent randomness, possibly chosen adaptively) is
``sum_i eps_i``-DP. :class:`PureDpAccountant` keeps that sum *exactly* as a
:class:`fractions.Fraction` (every double is an exact rational) and rounds up only when it
answers.

How each event is read (per release; the ideal mechanism's epsilon, plus ``2 * pmf_slack``, see
:mod:`dpkit.events`):

* ``LaplaceEvent``: ``1 / noise_multiplier`` (Dwork and Roth, Theorem 3.6);
* ``DiscreteLaplaceEvent``: ``sensitivity / scale`` (the ratio of neighbouring pmfs is at most
  ``exp(sensitivity / scale)``);
* ``ExponentialMechanismEvent``, ``ReportNoisyMaxEvent``, ``PureDpEvent``: their ``epsilon``
  (Dwork and Roth, Theorems 3.10 and 3.9/Claim 3.9);
* ``RandomizedResponseEvent``: ``ln(p (k - 1) / (1 - p))`` (its ``.epsilon``, already rounded up);
* ``ApproxDpEvent`` with ``delta == 0``: its epsilon (it *is* a pure-DP guarantee);
* ``PoissonSampledEvent`` whose inner event is (a composition of) add/remove events:
  ``ln(1 + q (exp(eps) - 1))`` (amplification by Poisson subsampling, Li, Qardaji and Su 2012,
  Theorem 1; Balle, Barthe and Gaboardi 2018, Theorem 8 for add/remove neighbours);
* ``NoOpEvent``: 0; ``NonPrivateEvent``: infinity;
* ``ComposedEvent`` / ``SelfComposedEvent``: sums.

Gaussian and discrete Gaussian noise are not pure DP: they are refused, as is every event this
module does not know. The one step that leaves exact arithmetic (the logarithm in the subsampling
bound) is evaluated in floating point and then inflated (:func:`float_up`) so the answer stays on
the safe side.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpkit._numeric.rounding import float_down, up
from dpkit.accounting._base import PrivacyAccountant
from dpkit.events import (
    Cost,
    DpEvent,
    pure_epsilon_of,
    subsampled_epsilon,
)

__all__ = [
    "PureDpAccountant",
    "delta_at",
    "pure_epsilon_of",
    "subsampled_epsilon",
]


def delta_at(*, total_epsilon: Fraction, total_delta: Fraction, epsilon: float) -> float:
    """Smallest delta at ``epsilon`` implied by one (E, D)-DP guarantee, rounded up.

    The (E, D)-DP trade-off function f_{E,D} (Kairouz, Oh and Viswanath 2015, Theorem 2.1;
    Dong, Roth and Su 2022, Proposition 2.5) has privacy profile
    ``delta(eps) = D`` for ``eps >= E`` and
    ``delta(eps) = 1 - (1 - D) (1 + e^eps) / (1 + e^E)`` for ``0 <= eps < E``
    (the hockey-stick divergence of the canonical (E, D) pair); at ``eps = 0`` and ``D = 0`` this
    is the total-variation bound ``tanh(E / 2)``.
    """
    if epsilon >= total_epsilon:
        return min(up(total_delta), 1.0)
    e_big = up(total_epsilon)  # a larger E only shrinks r, so delta stays an upper bound
    # r = (1 + e^eps) / (1 + e^E), written so that nothing overflows; a lower bound on r gives
    # an upper bound on delta.
    r = math.exp(epsilon - e_big) * (1.0 + math.exp(-epsilon)) / (1.0 + math.exp(-e_big))
    r_low = Fraction(max(float_down(r), 0.0))
    val = 1 - (1 - total_delta) * r_low
    return min(max(up(val), up(total_delta)), 1.0)


class PureDpAccountant(PrivacyAccountant):
    """Basic composition of pure epsilon-DP events, exact in rationals.

    ``get_epsilon(delta)`` returns the total ``sum_i eps_i`` (rounded up) whatever ``delta``;
    ``get_delta(epsilon)`` returns 0 when ``epsilon`` reaches the total, and otherwise the exact
    delta of the eps_total-DP trade-off curve at ``epsilon`` (see
    :func:`dpkit.accounting.approx.delta_at`), rounded up.
    """

    is_upper_bound = True

    def __init__(self) -> None:
        super().__init__()
        self._total: Fraction = Fraction(0)
        self._infinite = False

    def _walk(self, event: DpEvent, count: int, apply: bool) -> bool:
        cost = pure_epsilon_of(event)
        if cost is None:
            return False
        if apply and count > 0:
            if isinstance(cost, float):
                self._infinite = True
            else:
                self._total += count * cost
        return True

    @property
    def epsilon_exact(self) -> Cost:
        """The exact composed epsilon (a Fraction), or ``math.inf``."""
        with self._lock:
            return math.inf if self._infinite else self._total

    def clone(self) -> PureDpAccountant:
        """An independent copy with the same state (used by budgets to try a charge)."""
        with self._lock:
            new = type(self)()
            new._total = self._total
            new._infinite = self._infinite
            self._copy_history_to(new)
            return new

    def _epsilon(self, delta: float) -> float:
        if self._infinite:
            return math.inf
        return up(self._total)

    def _delta(self, epsilon: float) -> float:
        if self._infinite:
            return 1.0
        return delta_at(total_epsilon=self._total, total_delta=Fraction(0), epsilon=epsilon)
