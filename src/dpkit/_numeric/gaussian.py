"""Privacy profile of the Gaussian mechanism and its exact (analytic) calibration.

For a Gaussian mechanism with ``mu = sensitivity / sigma`` the tight privacy profile is
(Balle and Wang 2018, Theorem 8; Dong, Roth and Su 2022, Corollary 2.13)

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).

It is evaluated in log space, ``delta = Phi(a) * (-expm1(eps + log Phi(b) - log Phi(a)))``, so it
keeps relative accuracy where both terms underflow or nearly cancel.
"""

from __future__ import annotations

import math

from scipy.special import log_ndtr

__all__ = ["analytic_gaussian_mu", "gaussian_delta", "gaussian_delta_upper"]


def gaussian_delta(epsilon: float, mu: float) -> float:
    """delta(epsilon) of mu-GDP (Balle and Wang 2018, Theorem 8). Not rounded."""
    if mu == 0.0:
        return 0.0
    if math.isinf(epsilon):
        return 0.0
    a = -epsilon / mu + mu / 2.0
    b = -epsilon / mu - mu / 2.0
    log_a = float(log_ndtr(a))
    log_b = float(log_ndtr(b))
    gap = epsilon + log_b - log_a
    if gap >= 0.0:  # only by rounding; the true value is < 0
        return 0.0
    return math.exp(log_a) * -math.expm1(gap)


def gaussian_delta_upper(epsilon: float, mu: float) -> float:
    """An upper bound on the exact delta(epsilon) of mu-GDP, for calibration and certificates.

    :func:`gaussian_delta` computes ``Phi(a) (-expm1(g))``, ``g = eps + log Phi(b) - log Phi(a)``.
    Each term of g carries a relative error of a few ulps, so g carries an absolute error up to
    ``2**-46 (|eps| + |log Phi(a)| + |log Phi(b)| + 1)``; when g is small (eps small, delta tiny)
    that is a large *relative* error of ``-expm1(g)``. The result is inflated by that relative
    error bound (plus ``2**-46`` for the remaining roundings), so it is never below the exact value.
    """
    if mu == 0.0 or math.isinf(epsilon):
        return 0.0
    a = -epsilon / mu + mu / 2.0
    b = -epsilon / mu - mu / 2.0
    log_a = float(log_ndtr(a))
    log_b = float(log_ndtr(b))
    gap = epsilon + log_b - log_a
    slack = 2.0**-46 * (abs(epsilon) + abs(log_a) + abs(log_b) + 1.0)
    if not gap < -slack:  # too much cancellation to certify anything below Phi(a)
        return min(1.0, math.exp(log_a) * (1.0 + 2.0**-46))
    value = math.exp(log_a) * -math.expm1(gap)
    return min(1.0, value * (1.0 + slack / -gap * 2.0 + 2.0**-46))


def analytic_gaussian_mu(epsilon: float, delta: float) -> float:
    """Largest mu (to within 2**-40 relative) with ``gaussian_delta(epsilon, mu) <= delta``.

    Bisection on log(mu) against :func:`gaussian_delta_upper` (a certified upper bound on the
    exact delta), so the Gaussian calibrated with ``sigma = sensitivity / mu`` never spends more
    than (epsilon, delta). Rounds towards *less* mu (more noise).
    """
    target = delta
    lo, hi = 1e-12, 1.0
    while gaussian_delta_upper(epsilon, hi) <= target:
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            return lo
    if gaussian_delta_upper(epsilon, lo) > target:  # pragma: no cover - only for absurd deltas
        return lo * 0.0 + 1e-300
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if gaussian_delta_upper(epsilon, mid) <= target:
            lo = mid
        else:
            hi = mid
        if hi / lo - 1.0 < 2.0**-40:
            break
    return lo
