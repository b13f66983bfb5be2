"""Numerics of Gaussian differential privacy, accurate in the tails.

The privacy profile of mu-GDP (Dong, Roth and Su 2022, Corollary 2.13; it is also the hockey-stick
divergence ``H_{e^eps}(N(mu, 1) || N(0, 1))`` for every real eps) is

    delta(eps) = Phi(a) - e^eps Phi(b),   a = -eps/mu + mu/2,  b = a - mu.

Written naively both terms underflow for large eps and cancel for small mu. We use the identity
``e^eps phi(b) = phi(a)`` (because ``b^2 - a^2 = 2 eps``), so with the Mills ratio
``R(t) = Phi(-t) / phi(t)`` and ``s = -a``:

    delta(eps) = phi(a) [R(s) - R(s + mu)] = phi(a) * integral_s^{s+mu} g(t) dt,
    g(t) = -R'(t) = 1 - t R(t) > 0.

* ``mu >= 1/2`` (no harmful cancellation): for ``a < 0``,
  ``delta = Phi(a) (1 - erfcx(-b/sqrt2) / erfcx(-a/sqrt2))`` (the cancellation costs at most a
  factor ``(s + mu) / mu`` < 100 wherever delta is a normal double); otherwise the direct
  difference, whose first term is at least 1/2.
* ``mu < 1/2``: the integral form with 16-point Gauss-Legendre quadrature; ``g`` is evaluated
  from a continued fraction for ``t > 4`` (no cancellation) and directly below.

Cross-checked against mpmath at 50 digits in ``tests/fdp/test_gaussian_numerics.py``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from dpkit._numeric.search import search

__all__ = [
    "gaussian_delta",
    "gaussian_delta_up",
    "gaussian_mu_for",
    "gaussian_tradeoff",
    "log_gaussian_delta_slope",
]

_SQRT2 = math.sqrt(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT_HALF_PI = math.sqrt(math.pi / 2.0)
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)

# Relative error allowed for when rounding delta up. The worst case observed against mpmath is
# 2e-13 relative (eps ~ 24, mu ~ 0.7), which is the conditioning of delta in eps; 1e-11 is a margin.
DELTA_REL_MARGIN = 1e-11


def _mills_ratio(t: float) -> float:
    """``R(t) = Phi(-t) / phi(t)`` for any real t (may overflow to inf for t < -38)."""
    from scipy.special import erfcx  # deferred, as in every function here: ~0.1 s to import

    return _SQRT_HALF_PI * float(erfcx(t / _SQRT2))


def _g(t: float) -> float:
    """``g(t) = 1 - t R(t)`` (positive, decreasing), without cancellation for large t."""
    if t <= 4.0:
        return 1.0 - t * _mills_ratio(t)
    # R(t) = 1/(t + 1/(t + 2/(t + 3/(t + ...)))) ; with c = 1/(t + 2/(t + 3/(...))) one has
    # t R(t) = t / (t + c) so g(t) = c / (t + c). Backward evaluation of the tail is stable.
    tail = t
    for k in range(60, 1, -1):
        tail = t + k / tail
    c = 1.0 / tail
    return c / (t + c)


def _delta_scalar(eps: float, mu: float) -> float:
    from scipy.special import erfcx, log_ndtr, ndtr

    if math.isinf(eps):
        return 0.0 if eps > 0 else 1.0
    a = -eps / mu + mu / 2.0
    b = a - mu
    if mu >= 0.5 or a > 38.0:
        if a < 0.0:
            ratio = float(erfcx(-b / _SQRT2)) / float(erfcx(-a / _SQRT2))
            return float(ndtr(a)) * (1.0 - ratio)
        # Phi(a) >= 1/2: the difference loses at most one bit.
        if eps > 700.0:  # pragma: no cover - a >= 0 with eps > 700 needs mu > 37
            return float(ndtr(a)) - math.exp(eps + float(log_ndtr(b)))
        return float(ndtr(a)) - math.exp(eps) * float(ndtr(b))
    # Small mu: phi(a) * integral over [s, s + mu] of g, by Gauss-Legendre.
    s = -a
    if a < -38.5:
        return 0.0  # phi(a) < 1e-322: delta is below the smallest subnormal
    phi_a = math.exp(-0.5 * a * a) / _SQRT_2PI
    total = 0.0
    for x, w in zip(_GL_NODES, _GL_WEIGHTS, strict=True):
        u = 0.5 * mu * (float(x) + 1.0)
        t = s + u
        if t >= -4.0:
            total += float(w) * phi_a * _g(t)
        else:
            # t very negative: phi(a) g(t) = phi(a) - t Phi(-t) phi(a)/phi(t), both terms
            # positive; phi(a)/phi(t) = exp((t^2 - a^2)/2) = exp(u (2 s + u) / 2).
            total += float(w) * (phi_a - t * float(ndtr(-t)) * math.exp(0.5 * u * (2.0 * s + u)))
    return 0.5 * mu * total


def gaussian_delta(epsilon: float, mu: float) -> float:
    """Exact ``delta(eps)`` of mu-GDP (DRS Corollary 2.13), *not* rounded; any real epsilon."""
    if mu == 0.0:
        return max(0.0, -math.expm1(epsilon)) if epsilon < 0 else 0.0
    if math.isinf(mu):
        return 1.0
    val = _delta_scalar(float(epsilon), float(mu))
    return min(1.0, max(0.0, val))


def gaussian_delta_up(epsilon: float, mu: float) -> float:
    """:func:`gaussian_delta` rounded up by its error margin (a guaranteed upper bound)."""
    val = gaussian_delta(epsilon, mu)
    if val >= 1.0:
        return 1.0
    return min(1.0, math.nextafter(val * (1.0 + DELTA_REL_MARGIN), math.inf))


def gaussian_mu_for(epsilon: float, delta: float) -> float:
    """Largest mu (rounded down) with ``gaussian_delta_up(epsilon, mu) <= delta`` (no validation).

    ``delta_mu(eps)`` increases with mu, so :func:`dpkit._numeric.search.search` (bracket
    doubled from [0, 1] up to 1e6, bisected to adjacent doubles) keeps the end of the bracket
    that satisfies the rounded-up profile: the Gaussian mechanism with
    ``sigma = sensitivity / mu`` is then (epsilon, delta)-DP (Balle and Wang 2018, Theorem 8:
    the analytic calibration). Beyond 1e6 the last certified mu (2**19) is returned.
    """
    return search(
        lambda mu: gaussian_delta_up(epsilon, mu) <= delta,
        0.0,
        1.0,
        holds="below",
        expand="up",
        limit=1e6,
        what="Gaussian calibration",
    )


def gaussian_tradeoff(alpha: NDArray[np.float64], mu: float) -> NDArray[np.float64]:
    """``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)`` evaluated as ``Phi(-Phi^{-1}(alpha) - mu)``.

    Using ``Phi^{-1}(1 - alpha) = -Phi^{-1}(alpha)`` keeps full relative accuracy for tiny alpha
    (where ``1 - alpha`` would round to 1).
    """
    from scipy.special import ndtr, ndtri

    z = -ndtri(alpha)
    out: NDArray[np.float64] = np.asarray(ndtr(z - mu), dtype=np.float64)
    return out


def log_gaussian_delta_slope(alpha: NDArray[np.float64], mu: float) -> NDArray[np.float64]:
    """``log |G_mu'(alpha)| = mu z - mu^2 / 2`` with ``z = Phi^{-1}(1 - alpha)``."""
    from scipy.special import ndtri

    z = -ndtri(alpha)
    out: NDArray[np.float64] = np.asarray(mu * z - 0.5 * mu * mu, dtype=np.float64)
    return out
