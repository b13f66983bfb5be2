"""zCDP to (epsilon, delta)-DP conversions, rounded to the safe side.

A ``rho``-zCDP mechanism is ``(epsilon, delta)``-DP for every pair on its privacy profile. Two
bounds are evaluated and the better one kept:

* Bun and Steinke 2016, Proposition 1.3: ``epsilon = rho + 2 sqrt(rho ln(1/delta))``, i.e.
  ``delta = exp(-(epsilon - rho)^2 / (4 rho))`` for ``epsilon > rho``;
* Canonne, Kamath and Steinke 2020, Proposition 12 / Corollary 13, at a numerically optimised
  Renyi order ``alpha``: ``delta = exp((alpha - 1)(alpha rho - epsilon)) / alpha
  * (1 - 1/alpha)^(alpha - 1)`` and the matching epsilon.

The order is found by a golden-section search on ``ln(alpha - 1)``; any order gives a valid
bound, so the search only affects tightness, and every evaluation carries a margin for its own
rounding errors before the result is rounded up (epsilon and delta: towards more privacy spent).

A mechanism whose actual pmf is within ``exp(+-A)`` of a ``rho``-zCDP ideal one (a pmf slack,
see :mod:`dpkit.events`) is ``(2A + eps_rho(delta e^-A), delta)``-DP and
``(eps, e^A delta_rho(eps - 2A))``-DP: :func:`slack_epsilon` and :func:`slack_delta`.

These formulas live here, below both the mechanisms (a partition selection reports its profile
with them) and the zCDP accountant (which composes rho and converts with them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

from dpkit._numeric.rounding import down, float_up, up
from dpkit._numeric.validation import check_delta, check_epsilon, check_nonnegative

__all__ = ["slack_delta", "slack_epsilon", "zcdp_delta", "zcdp_epsilon"]

_ULP = 2.0**-52
#: Search range of ln(alpha - 1) for the optimal Renyi order.
_LOG_AM1_LO, _LOG_AM1_HI = -36.0, 36.0
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def _golden_min(f: Callable[[float], float]) -> float:
    """An argument near the minimum of a unimodal ``f`` on [_LOG_AM1_LO, _LOG_AM1_HI]."""
    lo, hi = _LOG_AM1_LO, _LOG_AM1_HI
    x1 = hi - _GOLDEN * (hi - lo)
    x2 = lo + _GOLDEN * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(120):
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - _GOLDEN * (hi - lo)
            f1 = f(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + _GOLDEN * (hi - lo)
            f2 = f(x2)
        if hi - lo < 1e-12:
            break
    return x1 if f1 <= f2 else x2


def _eps_at_order(rho: float, log_delta: float, am1: float) -> float:
    """``alpha rho + ln(1 - 1/alpha) - (ln delta + ln alpha)/(alpha - 1)``, rounded up."""
    alpha = 1.0 + am1
    t1 = alpha * rho
    t2 = math.log(am1) - math.log1p(am1)  # ln(1 - 1/alpha), never -inf
    t3 = (log_delta + math.log1p(am1)) / am1
    val = t1 + t2 - t3
    margin = 64.0 * _ULP * (abs(t1) + abs(t2) + abs(t3) + 1.0)
    return val + margin


def _log_delta_at_order(rho: float, epsilon: float, am1: float) -> float:
    """``(alpha - 1)(alpha rho - eps + ln(1 - 1/alpha)) - ln alpha``, rounded up."""
    alpha = 1.0 + am1
    t2 = math.log(am1) - math.log1p(am1)  # ln(1 - 1/alpha), never -inf
    log_alpha = math.log1p(am1)
    val = am1 * (alpha * rho - epsilon + t2) - log_alpha
    margin = 64.0 * _ULP * (am1 * (alpha * rho + epsilon + abs(t2) + 1.0) + log_alpha + 1.0)
    return val + margin


def _check_rho(rho: float | Fraction) -> float:
    if isinstance(rho, Fraction):
        return up(rho)
    return check_nonnegative(rho, "rho", allow_inf=True)


def zcdp_epsilon(rho: float | Fraction, delta: float) -> float:
    """Smallest epsilon certified at ``delta`` for a ``rho``-zCDP mechanism, rounded up.

    The better of Canonne, Kamath and Steinke 2020 (Proposition 12 / Corollary 13) at a
    numerically optimised order and Bun and Steinke 2016 (Proposition 1.3); see the module
    docstring. ``rho = 0`` gives 0; ``delta = 0`` (with rho > 0) or ``rho = inf`` gives inf.
    """
    r = _check_rho(rho)
    d = check_delta(delta)
    if r == 0.0:
        return 0.0
    if math.isinf(r) or d == 0.0:
        return math.inf
    log_d = math.log(d)
    simple = r + 2.0 * math.sqrt(r * -log_d)
    simple = simple + 8.0 * _ULP * simple
    x = _golden_min(lambda t: _eps_at_order(r, log_d, math.exp(t)))
    tight = _eps_at_order(r, log_d, math.exp(x))
    best = min(simple, tight)
    if math.isnan(best):  # pragma: no cover - defensive
        return math.inf
    return max(float_up(best), 0.0)


def zcdp_delta(rho: float | Fraction, epsilon: float) -> float:
    """Smallest delta certified at ``epsilon`` for a ``rho``-zCDP mechanism, rounded up.

    The better of Canonne, Kamath and Steinke 2020 (Corollary 13) at a numerically optimised
    order and Bun and Steinke 2016 (Proposition 1.3, for ``epsilon > rho``); capped at 1.
    """
    r = _check_rho(rho)
    e = check_epsilon(epsilon, allow_zero=True)
    if r == 0.0:
        return 0.0
    if math.isinf(r):
        return 1.0
    best = 0.0  # ln 1
    if e > r:
        best = min(best, -((e - r) ** 2) / (4.0 * r) * (1.0 - 8.0 * _ULP))
    x = _golden_min(lambda t: _log_delta_at_order(r, e, math.exp(t)))
    best = min(best, _log_delta_at_order(r, e, math.exp(x)))
    return min(float_up(math.exp(best)), 1.0)


def slack_epsilon(rho: Fraction | float, slack: Fraction, delta: float) -> float:
    """``2A + eps_rho(delta e^-A)`` rounded up: epsilon of the actual (slack ``A``) mechanism."""
    if isinstance(rho, float) and math.isinf(rho):
        return math.inf
    if slack == 0:
        return zcdp_epsilon(rho, delta)
    big_a = up(slack)
    shrunk = delta * math.exp(-big_a) * (1.0 - 1e-12)
    return float_up(2.0 * big_a + zcdp_epsilon(rho, shrunk))


def slack_delta(rho: Fraction | float, slack: Fraction, epsilon: float) -> float:
    """``e^A delta_rho(eps - 2A)`` rounded up (1 when ``eps < 2A``)."""
    if isinstance(rho, float) and math.isinf(rho):
        return 1.0
    if slack == 0:
        return zcdp_delta(rho, epsilon)
    big_a = up(slack)
    shifted = down(Fraction(epsilon) - 2 * Fraction(big_a))  # rounded down: delta rounds up
    if shifted < 0.0:
        if rho != 0:
            return 1.0
        return min(float_up(math.exp(big_a) * -math.expm1(shifted)), 1.0)
    return min(float_up(math.exp(big_a) * zcdp_delta(rho, shifted)), 1.0)
