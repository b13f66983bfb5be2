"""Closed-form divergences between the output distributions of standard mechanisms.

Each pair is (output on D, output on a neighbour D'), normalised so the shift is ``mu``:

* :class:`GaussianPair`: ``N(0, 1)`` vs ``N(mu, 1)`` (Gaussian mechanism, mu = sensitivity/sigma);
* :class:`LaplacePair`: ``Lap(0, 1)`` vs ``Lap(mu, 1)`` (Laplace mechanism, mu = sensitivity/b);
* :class:`RandomizedResponsePair`: k-ary randomized response on two different true values.

Both continuous pairs are symmetric (swapping P and Q gives the same values), so every method
describes both directions.

These are the same pairs that the privacy-loss engine composes (:mod:`dpkit._loss.pairs`:
``gaussian_pair``, ``laplace_pair``, ``randomized_response_pair``, whose loss tails give the
same hockey-stick values); the classes here add the closed-form divergences of one release.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from dpkit._loss.pairs import laplace_profile
from dpkit._numeric.gaussian import gaussian_delta
from dpkit._numeric.search import search
from dpkit._numeric.validation import (
    check_delta,
    check_finite,
    check_integer,
    check_mu,
    check_positive,
    check_probability,
)
from dpkit.divergence import _discrete as dd
from dpkit.errors import PrivacyParameterError

__all__ = ["GaussianPair", "LaplacePair", "RandomizedResponsePair"]


class GaussianPair:
    """``P = N(0, 1)``, ``Q = N(mu, 1)``."""

    def __init__(self, *, mu: float) -> None:
        self.mu = check_mu(mu, allow_zero=True)

    def kl(self) -> float:
        """``D(P || Q) = mu^2 / 2``."""
        return 0.5 * self.mu * self.mu

    def max_divergence(self) -> float:
        """``D_inf = +inf`` for mu > 0 (the likelihood ratio ``e^{mu x - mu^2/2}`` is unbounded)."""
        return math.inf if self.mu > 0 else 0.0

    def statistical_distance(self) -> float:
        """``Delta = 2 Phi(mu / 2) - 1 = P(|Z| <= mu/2)``."""
        return float(ndtr(self.mu / 2.0) - ndtr(-self.mu / 2.0))

    def hockey_stick(self, *, epsilon: float) -> float:
        """``H_{e^eps} = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (DRS Corollary 2.13),
        evaluated stably (see :mod:`dpkit._numeric.gaussian`)."""
        eps = check_finite(epsilon, "epsilon")
        return gaussian_delta(eps, self.mu)

    def approx_max_divergence(self, *, delta: float) -> float:
        """``D_inf^delta``: the smallest real eps with ``H_{e^eps} <= delta`` (see
        :func:`dpkit.divergence.approx_max_divergence`); +inf when delta = 0 and mu > 0."""
        d = check_delta(delta)
        if self.mu == 0.0:
            return math.log1p(-d)
        if d == 0.0:
            return math.inf
        # Below lo the hockey stick is at least 1 - e^eps > d (take S = everything).
        lo = min(-1.0, math.log1p(-d) - 1.0)
        return search(
            lambda e: gaussian_delta(e, self.mu) <= d,
            lo,
            1.0,
            holds="above",
            expand="up",
            factor=65536.0,
            what="approx_max_divergence",
        )

    def renyi(self, *, alpha: float) -> float:
        """``D_alpha = alpha mu^2 / 2`` (Mironov 2017, Proposition 7); inf at alpha = inf."""
        a = check_positive(alpha, "alpha", allow_inf=True)
        if math.isinf(a):
            return self.max_divergence()
        return 0.5 * a * self.mu * self.mu


class LaplacePair:
    """``P = Lap(0, 1)``, ``Q = Lap(mu, 1)``; the privacy loss ``|x - mu| - |x|`` lies in
    [-mu, mu]."""

    def __init__(self, *, mu: float) -> None:
        self.mu = check_mu(mu, allow_zero=True)

    def kl(self) -> float:
        """``D(P || Q) = mu + e^{-mu} - 1`` (computed as ``mu + expm1(-mu)``)."""
        return self.mu + math.expm1(-self.mu)

    def max_divergence(self) -> float:
        """``D_inf = mu`` (Dwork-Roth Theorem 3.6)."""
        return self.mu

    def statistical_distance(self) -> float:
        """``Delta = 1 - e^{-mu/2}`` (P and Q cross at mu/2)."""
        return -math.expm1(-self.mu / 2.0)

    def hockey_stick(self, *, epsilon: float) -> float:
        """``H_{e^eps} = 0`` for eps >= mu, ``1 - e^{(eps - mu)/2}`` for ``|eps| < mu`` and
        ``1 - e^eps`` for eps <= -mu."""
        return laplace_profile(check_finite(epsilon, "epsilon"), self.mu)

    def approx_max_divergence(self, *, delta: float) -> float:
        """Inverse of :meth:`hockey_stick`: ``mu + 2 ln(1 - delta)`` when that exceeds -mu, else
        ``ln(1 - delta)``; ``mu`` at delta = 0."""
        d = check_delta(delta)
        if d == 0.0:
            return self.mu
        mid = self.mu + 2.0 * math.log1p(-d)
        return mid if mid > -self.mu else math.log1p(-d)

    def renyi(self, *, alpha: float) -> float:
        """``D_alpha = (1/(alpha-1)) ln(alpha/(2 alpha - 1) e^{(alpha-1) mu}
        + (alpha-1)/(2 alpha - 1) e^{-alpha mu})`` (Mironov 2017, Table II, for alpha > 1; the
        same integral over the three pieces x < 0, 0 < x < mu, x > mu gives it for every
        alpha != 1/2); ``mu - 2 ln(1 + mu/2)`` at alpha = 1/2, KL at 1, mu at inf."""
        a = check_positive(alpha, "alpha", allow_inf=True)
        mu = self.mu
        if math.isinf(a):
            return mu
        if a == 1.0:
            return self.kl()
        if mu == 0.0:
            return 0.0
        if abs(2.0 * a - 1.0) < 1e-9:
            # integral of sqrt(p q) = e^{-mu/2} (1 + mu/2); D_{1/2} = -2 ln of it
            return -2.0 * (math.log1p(mu / 2.0) - mu / 2.0)
        return _laplace_renyi(mu, a)


def _laplace_renyi(mu: float, a: float) -> float:
    """``D_a(Lap(0, 1) || Lap(mu, 1)) = ln(S) / t``, ``t = a - 1``,
    ``S = c1 e^{t mu} + c2 e^{-a mu}``, ``c1 = a / (2a - 1)``, ``c2 = t / (2a - 1)``, rounded up.

    Near ``a = 1`` (``|t| <= 1/2`` and ``|t| mu <= 1``): ``c1 = 1 - c2`` gives
    ``S - 1 = c1 expm1(t mu) + c2 expm1(-a mu)``, so ``D = log1p(S - 1) / t`` keeps its relative
    precision as ``t -> 0``. Otherwise in logs, factoring out the dominant term so that nothing
    overflows (``a > 1``: both terms positive; ``1/2 < a < 1``: ``S = c1 e^{t mu} (1 -
    ((1 - a)/a) e^{-(2a - 1) mu})``; ``a < 1/2``: ``S = c2 e^{-a mu} (1 - (a/(1 - a))
    e^{(2a - 1) mu})``). The result is raised by a bound on the rounding of each step.
    """
    u = 2.0**-53
    t = a - 1.0  # exact for a in [1/2, 2] (Sterbenz), else within u |a|
    if abs(t) <= 0.5 and abs(t) * mu <= 1.0:
        c2 = t / (2.0 * a - 1.0)
        c1 = 1.0 - c2
        t1 = c1 * math.expm1(t * mu)
        t2 = c2 * math.expm1(-a * mu)
        x = t1 + t2
        err = 8.0 * u * (abs(t1) + abs(t2))
        val = math.log1p(x) / t
        slack = err / (abs(t) * (1.0 + x - err)) + 4.0 * u * abs(val)
        return max(0.0, math.nextafter(val + slack, math.inf))
    if a > 1.0:
        log_s = float(
            np.logaddexp(
                math.log(a / (2.0 * a - 1.0)) + t * mu, math.log(t / (2.0 * a - 1.0)) - a * mu
            )
        )
        size = abs(t) * mu + a * mu + 1.0
    elif a > 0.5:
        log_s = (
            math.log(a / (2.0 * a - 1.0))
            + t * mu
            + math.log1p(-((1.0 - a) / a) * math.exp(-(2.0 * a - 1.0) * mu))
        )
        size = (
            abs(t) * mu
            + abs(math.log(a / (2.0 * a - 1.0)))
            + 1.0 / (1.0 - math.exp(-(2.0 * a - 1.0) * mu) * (1.0 - a) / a)
        )
    else:
        log_s = (
            math.log(t / (2.0 * a - 1.0))
            - a * mu
            + math.log1p(-(a / (1.0 - a)) * math.exp((2.0 * a - 1.0) * mu))
        )
        size = (
            a * mu
            + abs(math.log(t / (2.0 * a - 1.0)))
            + 1.0 / (1.0 - math.exp((2.0 * a - 1.0) * mu) * a / (1.0 - a))
        )
    val = log_s / t
    slack = 16.0 * u * size / abs(t) + 4.0 * u * abs(val)
    return max(0.0, math.nextafter(val + slack, math.inf))


class RandomizedResponsePair:
    """k-ary randomized response on true values x != x' (keep with probability ``p_truth``,
    otherwise report one of the other ``k - 1`` values uniformly).

    ``P = (p, r, r, ..., r)``, ``Q = (r, p, r, ..., r)`` with ``r = (1 - p)/(k - 1)``; all
    divergences are the exact discrete ones of :mod:`dpkit.divergence._discrete`.
    """

    def __init__(self, *, p_truth: float, categories: int = 2) -> None:
        self.k = check_integer(categories, name="categories", minimum=2)
        self.p = check_probability(p_truth, name="p_truth")
        if not self.p >= 1.0 / self.k:
            raise PrivacyParameterError(f"p_truth must be at least 1/categories, got {self.p!r}")
        r = (1.0 - self.p) / (self.k - 1)
        # the k - 2 outcomes with P = Q = r merged into one of mass (k - 2) r: every divergence
        # here depends on the outcomes only through the likelihood ratio (merging outcomes of
        # equal ratio changes none of them), and k may be far too large for an array
        if self.k == 2:
            self.pmf_p = np.array([self.p, r])
            self.pmf_q = np.array([r, self.p])
        else:
            rest = (self.k - 2) * r
            self.pmf_p = np.array([self.p, r, rest])
            self.pmf_q = np.array([r, self.p, rest])

    def kl(self) -> float:
        """``(p - r) ln(p / r)``."""
        return dd.kl_divergence(p=self.pmf_p, q=self.pmf_q)

    def max_divergence(self) -> float:
        """``ln(p / r) = ln(p (k - 1) / (1 - p))``: the epsilon of randomized response."""
        return dd.max_divergence(p=self.pmf_p, q=self.pmf_q)

    def statistical_distance(self) -> float:
        """``p - r``."""
        return dd.statistical_distance(p=self.pmf_p, q=self.pmf_q)

    def hockey_stick(self, *, epsilon: float) -> float:
        """``(p - e^eps r)_+ + (r - e^eps p)_+``."""
        return dd.hockey_stick_divergence(p=self.pmf_p, q=self.pmf_q, epsilon=epsilon)

    def approx_max_divergence(self, *, delta: float) -> float:
        """Exact ``D_inf^delta`` of the two pmfs."""
        return dd.approx_max_divergence(p=self.pmf_p, q=self.pmf_q, delta=delta)

    def renyi(self, *, alpha: float) -> float:
        """Exact discrete Renyi divergence."""
        return dd.renyi_divergence(p=self.pmf_p, q=self.pmf_q, alpha=alpha)
