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
:mod:`dpkit.events`). Calibration constructors absorb that charge, so the mechanism
they return spends no more than the epsilon (and delta) asked for, *as the accountants compute
it from the mechanism's event* (:mod:`dpkit.mechanisms._calibration`): a budget of e accepts a
mechanism calibrated to e, and k mechanisms calibrated to e / k.

``release`` reads its data through :func:`dpkit._numeric.values.parse_values` (decided by type;
integers, longdoubles, Fractions and Decimals are placed on the lattice exactly) and returns the
container it was given: a Series for a pandas Series, a float for a scalar, an array otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpkit._numeric.gaussian import gaussian_delta_up, gaussian_mu_for
from dpkit._numeric.rounding import down, up
from dpkit._numeric.search import SearchError, search
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_mu,
    check_positive,
    check_probability,
    check_sensitivity,
)
from dpkit.errors import PrivacyParameterError
from dpkit.events import GaussianEvent, LaplaceEvent, Neighbouring, as_neighbouring
from dpkit.mechanisms._calibration import (
    calibration_target,
    charged_epsilon,
    fit_noise,
    reported_epsilon,
)
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
_MIN_DELTA = 2.0**-1022


def _too_large(factor: Fraction, sensitivity: float) -> PrivacyParameterError:
    return PrivacyParameterError(
        f"the noise scale would be {up(factor):.3g} times the sensitivity {sensitivity!r}, "
        f"beyond the largest double: express the data in larger units (a smaller sensitivity)"
    )


def _fit_granularity(factor: Fraction, sensitivity: float, max_t: float) -> tuple[float, float]:
    """Granularity s and scale ``up(factor (sensitivity + s))`` with ``scale / s < 2 max_t``.

    :func:`granularity_for` bounds ``(factor * sensitivity) / s``; the final scale also carries
    ``factor * s``, so s is coarsened (doubling) until the final ratio fits the sampler.
    Refuses (fails closed) when that would make the lattice charge ``s`` exceed ``2**-6`` of the
    sensitivity, i.e. for noise above about ``max_t / 32`` times the sensitivity (Gaussian: mu
    below about 3e-5; Laplace: never above its epsilon floor of 2**-20), and when the scale is
    beyond the largest double.
    """
    ideal = up(factor * Fraction(sensitivity))
    if math.isinf(ideal):
        raise _too_large(factor, sensitivity)
    s = granularity_for(ideal, sensitivity, max_t)
    scale = up(factor * (Fraction(sensitivity) + Fraction(s)))
    if math.isinf(scale):
        raise _too_large(factor, sensitivity)
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
    """The calibration target (:func:`calibration_target`) minus the floating-point charge 2a;
    refuses epsilons too small to carry it."""
    if not epsilon > max(_MIN_EPSILON, 4 * slack):
        raise PrivacyParameterError(
            f"epsilon must exceed {max(_MIN_EPSILON, 4 * slack)!r} (the floating-point charge "
            f"is {2 * slack!r}), got {epsilon!r}"
        )
    return calibration_target(epsilon) - Fraction(2 * slack)


def _noise_multiplier(scale: float, sensitivity: float, granularity: float) -> float:
    """``scale / (sensitivity + granularity)`` rounded down (the events' noise multiplier).

    Refuses a ratio that underflows to 0 (a privacy loss beyond the double range).
    """
    nm = down(Fraction(scale) / (Fraction(sensitivity) + Fraction(granularity)))
    if not nm > 0.0:
        raise PrivacyParameterError(
            f"the noise ({scale!r}) is too small for the sensitivity {sensitivity!r}: the "
            "privacy loss would be beyond the largest double"
        )
    return nm


def _gdp_mu(mech: Gaussian) -> Fraction:
    """The mu the GDP accountant reads from a Gaussian's event: ``1 / noise_multiplier``."""
    return 1 / Fraction(mech.event.noise_multiplier)


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
        check_positive(self.scale, "scale")
        check_sensitivity(self.sensitivity)
        g = check_positive(self.granularity, "granularity")
        if math.frexp(g)[0] != 0.5:
            raise PrivacyParameterError(f"granularity must be a power of two, got {g!r}")
        if not self.scale / g < 2 * _LAPLACE_MAX_T:
            raise PrivacyParameterError("granularity too fine for the floating-point guarantee")
        _noise_multiplier(self.scale, self.sensitivity, g)
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))

    @classmethod
    def from_epsilon(
        cls,
        *,
        epsilon: float,
        sensitivity: float,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> Laplace:
        """The least-noise Laplace mechanism that is ``epsilon``-DP for this L1 ``sensitivity``.

        With the target ``T = epsilon (1 - 2**-40)``: ``nm`` is the smallest double with
        ``1 / nm <= T - 2 * LAPLACE_SLACK`` and ``scale = nm (sensitivity + granularity)``,
        rounded up; so the accountants' ``1 / event.noise_multiplier + 2 * LAPLACE_SLACK`` is at
        most T (checked with their own function).
        """
        eps = check_epsilon(epsilon)
        delta_1 = check_sensitivity(sensitivity)
        nb = as_neighbouring(neighbouring)
        target = calibration_target(eps)
        nm = up(1 / _effective_epsilon(eps, LAPLACE_SLACK))
        s, scale = _fit_granularity(Fraction(nm), delta_1, _LAPLACE_MAX_T)
        return fit_noise(
            lambda b: cls(scale=b, sensitivity=delta_1, granularity=s, neighbouring=nb),
            scale,
            target,
            lambda m: charged_epsilon(m.event),
        )

    @classmethod
    def from_scale(
        cls,
        *,
        scale: float,
        sensitivity: float,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> Laplace:
        """A Laplace mechanism with noise scale ``scale`` (its epsilon follows)."""
        b = check_positive(scale, "scale")
        delta_1 = check_sensitivity(sensitivity)
        return cls(
            scale=b,
            sensitivity=delta_1,
            granularity=granularity_for(b, delta_1, _LAPLACE_MAX_T),
            neighbouring=as_neighbouring(neighbouring),
        )

    @property
    def epsilon(self) -> float:
        """What a budget charges: ``1 / nm + 2 * LAPLACE_SLACK`` from :attr:`event`, rounded up.

        ``nm = scale / (sensitivity + s)`` rounded down, so this is at least the exact
        ``(sensitivity + granularity) / scale + 2 * LAPLACE_SLACK``.
        """
        return reported_epsilon(self.event)

    @property
    def event(self) -> LaplaceEvent:
        """Accounting event: noise multiplier ``scale / (sensitivity + s)``, rounded down."""
        nm = _noise_multiplier(self.scale, self.sensitivity, self.granularity)
        return LaplaceEvent(
            noise_multiplier=nm, neighbouring=self.neighbouring, pmf_slack=LAPLACE_SLACK
        )

    def confidence_half_width(self, alpha: float) -> float:
        """Half-width h with ``P(|noise| > h) <= alpha``: ``scale ln(1/alpha) + granularity / 2``.

        From the Laplace tail ``P(|L| > x) = exp(-x / scale)``; rounding moves L by at most s/2.
        Rounded up.
        """
        a = check_probability(alpha, name="alpha", open_low=True, open_high=True)
        return math.nextafter(self.scale * -math.log(a) + self.granularity / 2.0, math.inf)

    def confidence_interval(self, value: float, *, alpha: float) -> tuple[float, float]:
        """The interval ``(value - h, value + h)`` around a released ``value``, with ``h =``
        :meth:`confidence_half_width` ``(alpha)``: it holds the true value with probability
        at least ``1 - alpha`` (over the noise). ``alpha`` is keyword-only."""
        h = self.confidence_half_width(alpha)
        return value - h, value + h

    def release(self, values: Any, *, source: RandomSource | None = None) -> Any:
        """Release every element of ``values`` with independent lattice Laplace noise.

        Returns float64 entries in the container given (array of the same shape, Series with
        the same index, or a float for a scalar); every entry is a multiple of
        :attr:`granularity`. NaN inputs are released as if they were 0; values beyond
        ``2**62 * granularity`` as that bound (docs/special-values.md). Types other than real
        numbers are refused, whatever their values.
        """
        src = resolve_source(source)
        t = self.scale / self.granularity
        return lattice_release(
            values,
            self.granularity,
            lambda k, out: laplace_lattice_float(src, t, k, out),
            parallel=src.secure,
        )


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
    #: the delta :meth:`from_epsilon_delta` calibrated to (None otherwise): a basic
    #: (epsilon, delta) budget charges the mechanism at this delta, so k mechanisms of
    #: (epsilon/k, delta/k) fit a budget of (epsilon, delta)
    calibrated_delta: float | None = None

    def __post_init__(self) -> None:
        check_positive(self.sigma, "sigma")
        if self.calibrated_delta is not None:
            check_delta(self.calibrated_delta, allow_zero=False)
        check_sensitivity(self.sensitivity)
        g = check_positive(self.granularity, "granularity")
        if math.frexp(g)[0] != 0.5:
            raise PrivacyParameterError(f"granularity must be a power of two, got {g!r}")
        if not self.sigma / g < 2 * _GAUSSIAN_MAX_T:
            raise PrivacyParameterError("granularity too fine for the floating-point guarantee")
        _noise_multiplier(self.sigma, self.sensitivity, g)
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))

    @classmethod
    def from_sigma(
        cls,
        *,
        sigma: float,
        sensitivity: float,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> Gaussian:
        """A Gaussian mechanism with noise standard deviation ``sigma``."""
        sd = check_positive(sigma, "sigma")
        delta_2 = check_sensitivity(sensitivity)
        return cls(
            sigma=sd,
            sensitivity=delta_2,
            granularity=granularity_for(sd, delta_2, _GAUSSIAN_MAX_T),
            neighbouring=as_neighbouring(neighbouring),
        )

    @classmethod
    def from_mu(
        cls,
        *,
        mu: float,
        sensitivity: float,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> Gaussian:
        """The Gaussian with ``sigma = nm (sensitivity + granularity)`` (rounded up): mu-GDP.

        ``nm`` is the smallest double with ``1 / nm <= mu (1 - 2**-40)``, so the mu the GDP
        accountant reads from :attr:`event` (``1 / event.noise_multiplier``) is at most mu,
        also for k mechanisms calibrated to a rounded ``mu / sqrt(k)``.
        """
        m = check_mu(mu)
        delta_2 = check_sensitivity(sensitivity)
        nb = as_neighbouring(neighbouring)
        target = calibration_target(m)
        nm = up(1 / target)
        if math.isinf(nm):
            raise _too_large(Fraction(1) / target, delta_2)
        s, sigma = _fit_granularity(Fraction(nm), delta_2, _GAUSSIAN_MAX_T)
        return fit_noise(
            lambda sd: cls(sigma=sd, sensitivity=delta_2, granularity=s, neighbouring=nb),
            sigma,
            target,
            _gdp_mu,
        )

    @classmethod
    def from_epsilon_delta(
        cls,
        *,
        epsilon: float,
        delta: float,
        sensitivity: float,
        method: str = "analytic",
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
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
        if not dlt >= _MIN_DELTA:
            raise PrivacyParameterError(
                f"delta must be at least 2**-1022 (the smallest normal double): below, its "
                f"certificate cannot carry a relative error bound; got {delta!r}"
            )
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
            raise PrivacyParameterError(f"method must be 'analytic' or 'classic', got {method!r}")
        s, sigma = _fit_granularity(
            Fraction(math.nextafter(factor, math.inf)), delta_2, _GAUSSIAN_MAX_T
        )
        return cls(
            sigma=sigma,
            sensitivity=delta_2,
            granularity=s,
            neighbouring=as_neighbouring(neighbouring),
            calibrated_delta=dlt,
        )

    @property
    def mu(self) -> float:
        """GDP parameter as the accountants read it: ``1 / event.noise_multiplier``, rounded up.

        At least the exact ``(sensitivity + s) / sigma`` of the ideal mechanism.
        """
        return up(_gdp_mu(self))

    def delta_for(self, *, epsilon: float) -> float:
        """Smallest delta certified at ``epsilon``: ``e^a * delta_mu(epsilon - 2a)`` (a = slack)."""
        eps = check_epsilon(epsilon, allow_zero=True)
        d = gaussian_delta_up(max(eps - 2.0 * GAUSSIAN_SLACK, 0.0), self.mu)
        d *= math.exp(GAUSSIAN_SLACK)
        return min(1.0, math.nextafter(d * (1.0 + 2.0**-50), math.inf))

    def epsilon_for(self, *, delta: float) -> float:
        """Smallest epsilon certified at ``delta``: ``delta_for(epsilon) <= delta`` holds at the
        returned double and fails at the double below it (bracket doubled from [0, 1], inf beyond
        1e6, bisected by :func:`dpkit._numeric.search.search`; the safe end)."""
        dlt = check_delta(delta, allow_zero=False)
        if self.delta_for(epsilon=0.0) <= dlt:
            return 0.0
        try:
            return search(
                lambda e: self.delta_for(epsilon=e) <= dlt,
                0.0,
                1.0,
                holds="above",
                expand="up",
                limit=1e6,
                what="Gaussian mechanism epsilon",
            )
        except SearchError:
            return math.inf

    @property
    def event(self) -> GaussianEvent:
        """Accounting event: noise multiplier ``sigma / (sensitivity + s)``, rounded down."""
        nm = _noise_multiplier(self.sigma, self.sensitivity, self.granularity)
        return GaussianEvent(
            noise_multiplier=nm, neighbouring=self.neighbouring, pmf_slack=GAUSSIAN_SLACK
        )

    def confidence_half_width(self, alpha: float) -> float:
        """Half-width h, ``P(|noise| > h) <= alpha``: ``sigma Phi^-1(1 - alpha/2) + s/2`` (up)."""
        from scipy.special import ndtri  # deferred: scipy.special takes ~0.1 s to import

        a = check_probability(alpha, name="alpha", open_low=True, open_high=True)
        z = float(-ndtri(a / 2.0))
        return math.nextafter((self.sigma * z + self.granularity / 2.0) * (1 + 2.0**-40), math.inf)

    def confidence_interval(self, value: float, *, alpha: float) -> tuple[float, float]:
        """The interval ``(value - h, value + h)`` around a released ``value``, with ``h =``
        :meth:`confidence_half_width` ``(alpha)``: it holds the true value with probability
        at least ``1 - alpha`` (over the noise). ``alpha`` is keyword-only."""
        h = self.confidence_half_width(alpha)
        return value - h, value + h

    def release(self, values: Any, *, source: RandomSource | None = None) -> Any:
        """Release every element of ``values`` with independent lattice Gaussian noise.

        Returns float64 entries in the container given (array of the same shape, Series with
        the same index, or a float for a scalar); every entry is a multiple of
        :attr:`granularity`. NaN inputs are released as if they were 0; values beyond
        ``2**62 * granularity`` as that bound (docs/special-values.md). Types other than real
        numbers are refused, whatever their values.
        """
        src = resolve_source(source)
        t = self.sigma / self.granularity
        return lattice_release(
            values,
            self.granularity,
            lambda k, out: gaussian_lattice_float(src, t, k, out),
            parallel=src.secure,
        )
