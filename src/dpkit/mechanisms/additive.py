"""Additive noise mechanisms on real-valued queries: :class:`Laplace` and :class:`Gaussian`.

Both release on a power-of-two lattice (see :mod:`dpkit.mechanisms._lattice`): values are rounded
to multiples of ``granularity``, integer noise is added exactly, and the rounding is charged as an
extra ``granularity`` of sensitivity. Both are *elementwise*: ``release(values)`` treats every
element as its own query whose value changes by at most ``sensitivity`` between neighbours, so a
release of a vector in which m elements can change composes m times (a histogram under add/remove
has m = 1).

Every guarantee also charges the floating-point samplers' deviation: their pmfs are within a
factor ``exp(+-a)`` of the exact rounded distributions (``a = 2**-25`` for Laplace, ``2**-20``
for Gaussian; :mod:`dpkit.mechanisms._lattice`), which turns
epsilon into ``epsilon + 2a`` and delta(eps) into ``e^a delta(eps - 2a)`` (see
:mod:`dpkit.accounting.events`). Calibration constructors absorb that charge, so the mechanism
they return spends no more than the epsilon (and delta) asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from dpkit._numeric.gaussian import gaussian_delta_up, gaussian_mu_for
from dpkit._numeric.rounding import down, up
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_mu,
    check_positive,
    check_probability,
    check_sensitivity,
)
from dpkit.accounting.events import GaussianEvent, LaplaceEvent, Neighbouring, as_neighbouring
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._lattice import (
    GAUSSIAN_SLACK,
    LAPLACE_SLACK,
    granularity_for,
    lattice_release,
)
from dpkit.noise import RandomSource, resolve_source
from dpkit.noise.samplers import gaussian_lattice_float, laplace_lattice_float

__all__ = ["Gaussian", "Laplace"]

_MIN_EPSILON = 2.0**-20
_LAPLACE_MAX_T = 2.0**32
_GAUSSIAN_MAX_T = 2.0**20



def _fit_granularity(factor: Fraction, sensitivity: float, max_t: float) -> tuple[float, float]:
    """Granularity s and scale ``up(factor (sensitivity + s))`` with ``scale / s < 2 max_t``.

    :func:`granularity_for` bounds ``(factor * sensitivity) / s``; the final scale also carries
    ``factor * s``, so s is coarsened (doubling) until the final ratio fits the sampler.
    Refuses (fails closed) when that would make the lattice charge ``s`` exceed ``2**-6`` of the
    sensitivity, i.e. for noise above about ``max_t / 32`` times the sensitivity (Gaussian: mu
    below about 3e-5; Laplace: never above its epsilon floor of 2**-20).
    """
    s = granularity_for(float(factor * Fraction(sensitivity)), sensitivity, max_t)
    scale = up(factor * (Fraction(sensitivity) + Fraction(s)))
    while not scale / s < 2 * max_t:
        s *= 2.0
        if s > sensitivity * 2.0**-6:
            raise PrivacyParameterError(
                f"the privacy budget is too small for a floating-point-safe release: the noise "
                f"would be {float(factor):.3g} times the sensitivity; use a larger budget, or "
                f"integer data with DiscreteLaplace / DiscreteGaussian"
            )
        scale = up(factor * (Fraction(sensitivity) + Fraction(s)))
    return s, scale


def _effective_epsilon(epsilon: float, slack: float) -> Fraction:
    """epsilon minus the floating-point charge 2a; refuses epsilons too small to carry it."""
    if not epsilon > max(_MIN_EPSILON, 4 * slack):
        raise PrivacyParameterError(
            f"epsilon must exceed {max(_MIN_EPSILON, 4 * slack)!r} (the floating-point charge "
            f"is {2 * slack!r}), got {epsilon!r}"
        )
    return Fraction(epsilon) - Fraction(2 * slack)


@dataclass(frozen=True, kw_only=True)
class Laplace:
    """The Laplace mechanism: releases ``x + Lap(scale)`` on a lattice (Dwork and Roth, Def. 3.3).

    Privacy (Dwork and Roth, Theorem 3.6, plus the lattice and floating-point charges):
    ``epsilon = (sensitivity + granularity) / scale + 2 * LAPLACE_SLACK``, rounded up.
    Noise: ``rint(L / granularity) * granularity`` with L ~ Laplace(0, scale), whose pmf on the
    lattice is ``P(0) = 1 - exp(-s/(2b))`` and ``P(ks) = sinh(s/(2b)) exp(-|k| s / b)``.

    Build it with :meth:`from_epsilon` or :meth:`from_scale`.
    """

    scale: float
    sensitivity: float
    granularity: float
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        check_positive("scale", self.scale)
        check_sensitivity(self.sensitivity)
        g = check_positive("granularity", self.granularity)
        if math.frexp(g)[0] != 0.5:
            raise PrivacyParameterError(f"granularity must be a power of two, got {g!r}")
        if not self.scale / g < 2 * _LAPLACE_MAX_T:
            raise PrivacyParameterError("granularity too fine for the floating-point guarantee")
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))

    @classmethod
    def from_epsilon(cls, *, epsilon: float, sensitivity: float,
                     neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE) -> Laplace:
        """The least-noise Laplace mechanism that is ``epsilon``-DP for this L1 ``sensitivity``.

        ``scale = (sensitivity + granularity) / (epsilon - 2 * LAPLACE_SLACK)``, rounded up.
        """
        eps = check_epsilon(epsilon)
        delta_1 = check_sensitivity(sensitivity)
        eff = _effective_epsilon(eps, LAPLACE_SLACK)
        s, scale = _fit_granularity(1 / eff, delta_1, _LAPLACE_MAX_T)
        return cls(scale=scale, sensitivity=delta_1, granularity=s,
                   neighbouring=as_neighbouring(neighbouring))

    @classmethod
    def from_scale(cls, *, scale: float, sensitivity: float,
                   neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE) -> Laplace:
        """A Laplace mechanism with noise scale ``scale`` (its epsilon follows)."""
        b = check_positive("scale", scale)
        delta_1 = check_sensitivity(sensitivity)
        return cls(scale=b, sensitivity=delta_1,
                   granularity=granularity_for(b, delta_1, _LAPLACE_MAX_T),
                   neighbouring=as_neighbouring(neighbouring))

    @property
    def epsilon(self) -> float:
        """``(sensitivity + granularity) / scale + 2 * LAPLACE_SLACK``, rounded up."""
        exact = (Fraction(self.sensitivity) + Fraction(self.granularity)) / Fraction(self.scale)
        return up(exact + Fraction(2 * LAPLACE_SLACK))

    @property
    def event(self) -> LaplaceEvent:
        """Accounting event: noise multiplier ``scale / (sensitivity + s)``, rounded down."""
        nm = down(Fraction(self.scale) / (Fraction(self.sensitivity) + Fraction(self.granularity)))
        return LaplaceEvent(noise_multiplier=nm, neighbouring=self.neighbouring,
                            pmf_slack=LAPLACE_SLACK)

    def confidence_interval(self, alpha: float) -> float:
        """Half-width h with ``P(|noise| > h) <= alpha``: ``scale ln(1/alpha) + granularity / 2``.

        From the Laplace tail ``P(|L| > x) = exp(-x / scale)``; rounding moves L by at most s/2.
        Rounded up.
        """
        a = check_probability(alpha, name="alpha", open_low=True, open_high=True)
        return math.nextafter(self.scale * -math.log(a) + self.granularity / 2.0, math.inf)

    def release(self, values: Any, *, source: RandomSource | None = None
                ) -> npt.NDArray[np.float64]:
        """Release every element of ``values`` with independent lattice Laplace noise.

        Returns a float64 array of the same shape; every entry is a multiple of
        :attr:`granularity`. NaN inputs are released as if they were 0 (docs/special-values.md).
        """
        src = resolve_source(source)
        t = self.scale / self.granularity
        return lattice_release(values, self.granularity,
                               lambda k, out: laplace_lattice_float(src, t, k, out),
                               parallel=src.secure)


@dataclass(frozen=True, kw_only=True)
class Gaussian:
    """The Gaussian mechanism: ``x + N(0, sigma^2)`` on a lattice.

    Privacy: with ``mu = (sensitivity + granularity) / sigma`` the ideal mechanism is exactly
    mu-GDP (Dong, Roth and Su 2022, Theorem 2.7) and has the privacy profile of Balle and Wang
    (2018, Theorem 8); the lattice release is post-processing of it; the floating-point charge is
    ``delta_actual(eps) <= e^a delta(eps - 2a)`` with ``a = GAUSSIAN_SLACK = 2**-20``.

    Build it with :meth:`from_mu`, :meth:`from_epsilon_delta` or :meth:`from_sigma`.
    """

    sigma: float
    sensitivity: float
    granularity: float
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        check_positive("sigma", self.sigma)
        check_sensitivity(self.sensitivity)
        g = check_positive("granularity", self.granularity)
        if math.frexp(g)[0] != 0.5:
            raise PrivacyParameterError(f"granularity must be a power of two, got {g!r}")
        if not self.sigma / g < 2 * _GAUSSIAN_MAX_T:
            raise PrivacyParameterError("granularity too fine for the floating-point guarantee")
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))

    @classmethod
    def from_sigma(cls, *, sigma: float, sensitivity: float,
                   neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE) -> Gaussian:
        """A Gaussian mechanism with noise standard deviation ``sigma``."""
        sd = check_positive("sigma", sigma)
        delta_2 = check_sensitivity(sensitivity)
        return cls(sigma=sd, sensitivity=delta_2,
                   granularity=granularity_for(sd, delta_2, _GAUSSIAN_MAX_T),
                   neighbouring=as_neighbouring(neighbouring))

    @classmethod
    def from_mu(cls, *, mu: float, sensitivity: float,
                neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE) -> Gaussian:
        """The Gaussian with ``sigma = (sensitivity + granularity) / mu`` (rounded up): mu-GDP."""
        m = check_mu(mu)
        delta_2 = check_sensitivity(sensitivity)
        s, sigma = _fit_granularity(1 / Fraction(m), delta_2, _GAUSSIAN_MAX_T)
        return cls(sigma=sigma, sensitivity=delta_2, granularity=s,
                   neighbouring=as_neighbouring(neighbouring))

    @classmethod
    def from_epsilon_delta(cls, *, epsilon: float, delta: float, sensitivity: float,
                           method: str = "analytic",
                           neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE
                           ) -> Gaussian:
        """The Gaussian that is (epsilon, delta)-DP for this L2 ``sensitivity``.

        ``method="analytic"`` (default): the smallest sigma whose exact privacy profile
        (Balle and Wang 2018, Algorithm 1 / Theorem 8) gives delta at epsilon.
        ``method="classic"``: ``sigma = sqrt(2 ln(1.25 / delta)) * sensitivity / epsilon``
        (Dwork and Roth, Theorem A.1), valid only for epsilon < 1 and refused otherwise.
        Both calibrate the ideal mechanism at ``(epsilon - 2a, e^-a delta)`` with sensitivity
        ``sensitivity + granularity`` and round sigma up.
        """
        eps = check_epsilon(epsilon)
        dlt = check_delta(delta, allow_zero=False)
        delta_2 = check_sensitivity(sensitivity)
        eff_eps = float(_effective_epsilon(eps, GAUSSIAN_SLACK))
        # 2**-40 of headroom so that the certificate delta_for(epsilon) (which rounds up once
        # more) also stays within the delta asked for, not only the exact delta.
        eff_delta = dlt * math.exp(-GAUSSIAN_SLACK) * (1.0 - 2.0**-40)
        if method == "classic":
            if not eps < 1.0:
                raise PrivacyParameterError(
                    f"the classic Gaussian calibration requires epsilon < 1, got {epsilon!r}; "
                    "use method='analytic'"
                )
            factor = math.sqrt(2.0 * math.log(1.25 / eff_delta)) / eff_eps
        elif method == "analytic":
            factor = 1.0 / gaussian_mu_for(eff_eps, eff_delta)
        else:
            raise PrivacyParameterError(
                f"method must be 'analytic' or 'classic', got {method!r}"
            )
        s, sigma = _fit_granularity(Fraction(math.nextafter(factor, math.inf)), delta_2,
                                    _GAUSSIAN_MAX_T)
        return cls(sigma=sigma, sensitivity=delta_2, granularity=s,
                   neighbouring=as_neighbouring(neighbouring))

    @property
    def mu(self) -> float:
        """GDP parameter of the ideal mechanism: ``(sensitivity + s) / sigma``, rounded up."""
        return up((Fraction(self.sensitivity) + Fraction(self.granularity)) / Fraction(self.sigma))

    def delta_for(self, *, epsilon: float) -> float:
        """Smallest delta certified at ``epsilon``: ``e^a * delta_mu(epsilon - 2a)`` (a = slack)."""
        eps = check_epsilon(epsilon, allow_zero=True)
        d = gaussian_delta_up(max(eps - 2.0 * GAUSSIAN_SLACK, 0.0), self.mu)
        d *= math.exp(GAUSSIAN_SLACK)
        return min(1.0, math.nextafter(d * (1.0 + 2.0**-50), math.inf))

    def epsilon_for(self, *, delta: float) -> float:
        """Smallest epsilon certified at ``delta`` (bisection, returns the safe end)."""
        dlt = check_delta(delta, allow_zero=False)
        lo, hi = 0.0, 1.0
        while self.delta_for(epsilon=hi) > dlt:
            lo, hi = hi, hi * 2.0
            if hi > 1e6:
                return math.inf
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if self.delta_for(epsilon=mid) > dlt:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-15 * hi:
                break
        return hi

    @property
    def event(self) -> GaussianEvent:
        """Accounting event: noise multiplier ``sigma / (sensitivity + s)``, rounded down."""
        nm = down(Fraction(self.sigma) / (Fraction(self.sensitivity) + Fraction(self.granularity)))
        return GaussianEvent(noise_multiplier=nm, neighbouring=self.neighbouring,
                             pmf_slack=GAUSSIAN_SLACK)

    def confidence_interval(self, alpha: float) -> float:
        """Half-width h, ``P(|noise| > h) <= alpha``: ``sigma Phi^-1(1 - alpha/2) + s/2`` (up)."""
        a = check_probability(alpha, name="alpha", open_low=True, open_high=True)
        z = float(-ndtri(a / 2.0))
        return math.nextafter((self.sigma * z + self.granularity / 2.0) * (1 + 2.0**-40),
                              math.inf)

    def release(self, values: Any, *, source: RandomSource | None = None
                ) -> npt.NDArray[np.float64]:
        """Release every element of ``values`` with independent lattice Gaussian noise.

        Returns a float64 array of the same shape; every entry is a multiple of
        :attr:`granularity`. NaN inputs are released as if they were 0 (docs/special-values.md).
        """
        src = resolve_source(source)
        t = self.sigma / self.granularity
        return lattice_release(values, self.granularity,
                               lambda k, out: gaussian_lattice_float(src, t, k, out),
                               parallel=src.secure)
