"""Integer-valued mechanisms: :class:`DiscreteLaplace` and :class:`DiscreteGaussian`.

For integer queries no lattice is needed: integer noise is added in exact integer arithmetic.
Noise comes from the fast vectorised samplers while their scale is below ``2**13`` (pmf within
a stated factor of exact, charged as ``pmf_slack``: 2**-24 for discrete Laplace, 2**-23 for the
discrete Gaussian; :mod:`dpkit.mechanisms._lattice`) and from the exact rational samplers
of Canonne, Kamath and Steinke (2020) above it (no charge; slower, one value at a time).

Inputs are read by :func:`dpkit._numeric.values.parse_values` with ``accept="integer"``: bool
and integer dtypes, Python ints (any size) and lists of them. Float dtypes are refused *by
dtype*, whatever their values (rounding 0.5 and 1.5 to the even neighbours 0 and 2 would move
neighbouring inputs two apart, an uncharged doubling of the sensitivity). Integers beyond
``+-2**62`` saturate there (a 1-Lipschitz clamp), and outputs beyond the int64 range saturate
at its ends (post-processing of the exact integer sum).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.rounding import up
from dpkit._numeric.validation import (
    check_epsilon,
    check_integer,
    check_positive,
    check_probability,
)
from dpkit._numeric.values import ParsedValues, parse_values
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Neighbouring,
    as_neighbouring,
)
from dpkit.mechanisms._calibration import (
    calibration_target,
    charged_epsilon,
    fit_noise,
    reported_epsilon,
)
from dpkit.mechanisms._lattice import DISCRETE_GAUSSIAN_SLACK, DISCRETE_LAPLACE_SLACK
from dpkit.noise import RandomSource, resolve_source
from dpkit.noise.samplers import (
    discrete_gaussian,
    discrete_gaussian_exact,
    discrete_laplace,
    discrete_laplace_exact,
)

__all__ = ["DiscreteGaussian", "DiscreteLaplace"]

_FAST_LIMIT = 2.0**13
_INT_LIMIT = 2**62
_MIN_SIGMA = 2.0**-500
_OUT_MIN, _OUT_MAX = -(2**63), 2**63 - 1


def _integer_values(parsed: ParsedValues) -> npt.NDArray[np.int64]:
    """Parsed integer inputs as int64, saturated at +-2**62 (the documented clamp)."""
    x = parsed.array
    if parsed.kind == "uint":  # saturate before the cast: uint64 >= 2**63 would wrap negative
        capped: npt.NDArray[np.uint64] = np.minimum(x, np.uint64(_INT_LIMIT))
        return capped.astype(np.int64)
    if parsed.kind == "int":
        return np.clip(x.astype(np.int64, copy=False), -_INT_LIMIT, _INT_LIMIT)
    # "exact": Python ints beyond the int64 range (parse_values accepts only integers here)
    out = np.array(
        [max(-_INT_LIMIT, min(_INT_LIMIT, int(v))) for v in x.reshape(-1)], dtype=np.int64
    )
    return out.reshape(x.shape)


def _add_exact(x: npt.NDArray[np.int64], noise: list[int]) -> npt.NDArray[np.int64]:
    """``x + noise`` in Python integers, saturated to the int64 range (post-processing)."""
    total = [
        max(_OUT_MIN, min(_OUT_MAX, int(a) + z))
        for a, z in zip(x.reshape(-1).tolist(), noise, strict=True)
    ]
    return np.array(total, dtype=np.int64).reshape(x.shape)


#: Below this sigma the discrete Gaussian's tail is summed term by term (at most 40,002 terms).
_SUM_LIMIT = 1000.0
#: Relative margin on the floating-point tail sums (their error is below 1e-11, see below).
_SUM_MARGIN = 1e-9
#: Relative margin on ``math.erfc`` and ``math.log`` (accurate to a few ulps).
_LIBM_MARGIN = 1e-12


def _gaussian_tail_bound(sigma: float, h: int) -> float:
    """An upper bound on ``log P(|Z| > h)`` for the discrete Gaussian of parameter sigma, valid
    for every sigma: ``P(|Z| > h) <= 2 Q(h / sigma) = erfc(h / (sigma sqrt 2))``.

    Proof: with ``w(x) = exp(-x^2 / (2 sigma^2))``, decreasing on ``[h, inf)``, the tail
    ``sum_{j > h} w(j) <= integral_h^inf w = sigma sqrt(2 pi) Q(h / sigma)``, and by Poisson
    summation the normaliser ``sum_j w(j) = sigma sqrt(2 pi) sum_k exp(-2 pi^2 sigma^2 k^2) >=
    sigma sqrt(2 pi)`` (every term is positive). Where ``erfc`` underflows, the Mills-ratio
    bound ``2 Q(z) <= sqrt(2 / pi) e^(-z^2 / 2) / z`` is used. Both are inflated by a relative
    1e-12 for the library functions' rounding (rounded up)."""
    if h <= 0:
        return 0.0
    z = float(Fraction(h) / Fraction(sigma))  # exact ratio, one rounding (h may exceed floats)
    tail = math.erfc(z / math.sqrt(2.0))
    if tail > 1e-290:
        return math.log(tail) + _LIBM_MARGIN * (1.0 + abs(math.log(tail)))
    log_mills = 0.5 * math.log(2.0 / math.pi) - 0.5 * z * z - math.log(z)
    return log_mills + _LIBM_MARGIN * (1.0 + abs(log_mills))


def _gaussian_half_width(sigma: float, alpha: float) -> int:
    """Smallest integer h with a certified ``P(|Z| > h) <= alpha`` (never too narrow).

    sigma < 1000 (and alpha >= 1e-280): the tail is summed directly. With ``w_k = exp(-k^2 /
    (2 sigma^2))`` for ``0 <= k <= m = ceil(40 sigma) + 2``, ``P(|Z| > h) = 2 sum_{k > h} w_k /
    (w_0 + 2 sum_{k >= 1} w_k)``. The partial normaliser is below the true one; the terms
    dropped beyond m (each below e^-800) and those that underflow add less than 1e-300 to the
    tail. Each ``w_k`` is within 2e-13 relative of its value and the cumulative sums of at most
    40,003 positive terms within 5e-12, so the tail inflated by a relative 1e-9 (plus 1e-300) is
    an upper bound: h is the exact smallest unless the exact tail lies within 1e-9 of alpha.

    Otherwise the closed bound of :func:`_gaussian_tail_bound` (at most about one step wider
    than the exact smallest h, a relative 1/sigma) is searched by bisection below the
    sub-Gaussian width ``ceil(sigma sqrt(2 ln(2 / alpha)))`` (CKS 2020, Corollary 9), at which
    it always holds.
    """
    if sigma < _SUM_LIMIT and alpha >= 1e-280:
        m = math.ceil(40.0 * sigma) + 2
        k = np.arange(0, m + 1, dtype=np.float64)
        with np.errstate(over="ignore", under="ignore"):  # tiny sigma: w_k = 0 for k >= 1
            w = np.exp(-(k * k) / (2.0 * sigma * sigma))
        norm = float(w[0] + 2.0 * w[1:].sum()) * (1.0 - _SUM_MARGIN)
        rev = np.cumsum(w[::-1])[::-1]  # rev[j] = sum_{k >= j} w_k
        tail = (2.0 * np.append(rev[1:], 0.0) * (1.0 + _SUM_MARGIN) + 1e-300) / norm
        ok = tail <= alpha
        if bool(ok.any()):
            return int(np.argmax(ok))
    root = math.sqrt(2.0 * (math.log(2.0) - math.log(alpha))) * (1.0 + 2.0**-50)
    hi = math.ceil(Fraction(sigma) * Fraction(math.nextafter(root, math.inf)))
    log_alpha = math.log(alpha)
    lo = 0
    while lo < hi:  # invariant: the bound holds at hi
        mid = (lo + hi) // 2
        if _gaussian_tail_bound(sigma, mid) <= log_alpha:
            hi = mid
        else:
            lo = mid + 1
    return hi


@dataclass(frozen=True, kw_only=True)
class DiscreteLaplace:
    """``x + Z`` with ``P(Z = k) = tanh(1/(2t)) exp(-|k| / t)`` on integer queries.

    Privacy: ``epsilon = sensitivity / scale`` (+ ``2 * pmf_slack`` on the fast path), because the
    pmf ratio of shifts by one is exactly ``e^{1/t}`` (Ghosh, Roughgarden, Sundararajan 2012;
    CKS 2020, Section 2). Values are integers (float dtypes are refused, see the module).
    """

    scale: float
    sensitivity: int
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        check_positive(self.scale, "scale")
        check_integer(self.sensitivity, name="sensitivity", minimum=1)
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))

    @property
    def exact(self) -> bool:
        """Whether releases use the exact rational sampler (scale >= 2**13)."""
        return not self.scale < _FAST_LIMIT

    @property
    def pmf_slack(self) -> float:
        return 0.0 if self.exact else DISCRETE_LAPLACE_SLACK

    @classmethod
    def from_epsilon(
        cls,
        *,
        epsilon: float,
        sensitivity: int,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> DiscreteLaplace:
        """Scale ``sensitivity / (T - 2a)`` rounded up, ``T = epsilon (1 - 2**-40)`` (a = slack
        of the chosen sampler); the accountants' cost of :attr:`event` is checked to be <= T
        (:mod:`dpkit.mechanisms._calibration`)."""
        eps = check_epsilon(epsilon)
        sens = check_integer(sensitivity, name="sensitivity", minimum=1)
        nb = as_neighbouring(neighbouring)
        target = calibration_target(eps)
        scale = up(Fraction(sens) / target)
        if scale < _FAST_LIMIT:
            if not eps > 4 * DISCRETE_LAPLACE_SLACK:
                raise PrivacyParameterError(f"epsilon must exceed 2**-22, got {epsilon!r}")
            scale = up(Fraction(sens) / (target - Fraction(2 * DISCRETE_LAPLACE_SLACK)))
            # If the slack pushes the scale to 2**13 or more, the exact sampler (no slack) is used
            # with a scale slightly larger than needed: still safe.
        if math.isinf(scale):
            raise PrivacyParameterError(
                f"the noise scale sensitivity / epsilon = {sens!r} / {eps!r} is beyond the "
                "largest double: use a larger epsilon or a smaller sensitivity"
            )
        return fit_noise(
            lambda t: cls(scale=t, sensitivity=sens, neighbouring=nb),
            scale,
            target,
            lambda m: charged_epsilon(m.event),
        )

    @property
    def epsilon(self) -> float:
        """What a budget charges for :attr:`event`: ``sensitivity / scale + 2 * pmf_slack``,
        rounded up (:func:`dpkit.events.pure_epsilon_of`)."""
        return reported_epsilon(self.event)

    @property
    def event(self) -> DiscreteLaplaceEvent:
        return DiscreteLaplaceEvent(
            scale=self.scale,
            sensitivity=self.sensitivity,
            neighbouring=self.neighbouring,
            pmf_slack=self.pmf_slack,
        )

    def confidence_half_width(self, alpha: float) -> int:
        """Smallest h with ``P(|Z| > h) = 2 q^(h+1) / (1 + q) <= alpha``, q = e^(-1/t).

        Since ``ln q = -1/t`` exactly: ``h = ceil(t ln(2 / (alpha (1 + q))) - 1)``, with the
        logarithm inflated by a relative 2**-50 and the product taken exactly (rounded up:
        never too narrow; no overflow for any t).
        """
        a = check_probability(alpha, name="alpha", open_low=True, open_high=True)
        q = math.exp(-1.0 / self.scale)
        log_ratio = math.log(2.0) - math.log(a) - math.log1p(q)
        log_up = math.nextafter(log_ratio * (1.0 + 2.0**-50), math.inf)
        return max(math.ceil(Fraction(self.scale) * Fraction(log_up) - 1), 0)

    def confidence_interval(self, value: float, *, alpha: float) -> tuple[float, float]:
        """The interval ``(value - h, value + h)`` around a released ``value``, with ``h =``
        :meth:`confidence_half_width` ``(alpha)``: it holds the true value with probability
        at least ``1 - alpha`` (over the noise). ``alpha`` is keyword-only."""
        h = self.confidence_half_width(alpha)
        return value - h, value + h

    def release(self, values: Any, *, source: RandomSource | None = None) -> Any:
        """Release integer ``values`` with discrete Laplace noise.

        int64 entries in the container given (array of the same shape, Series with the same
        index, or an int for a scalar). Float dtypes and non-numeric types are refused by type.
        """
        parsed = parse_values(values, accept="integer")
        src = resolve_source(source)
        x = _integer_values(parsed)
        if self.exact:
            frac = Fraction(self.scale)
            return parsed.wrap(
                _add_exact(x, [discrete_laplace_exact(src, frac) for _ in range(x.size)])
            )
        z = discrete_laplace(src, scale=self.scale, size=x.shape)
        return parsed.wrap(x + z)


@dataclass(frozen=True, kw_only=True)
class DiscreteGaussian:
    """``x + Z`` with ``P(Z = k) ∝ exp(-k^2 / (2 sigma^2))`` on integer queries.

    Privacy (Canonne, Kamath and Steinke 2020, Theorem 7): for an integer shift Delta,
    ``delta(eps) = P[Z > eps sigma^2/Delta - Delta/2] - e^eps P[Z > eps sigma^2/Delta + Delta/2]``,
    and it satisfies ``Delta^2 / (2 sigma^2)``-zCDP (Theorem 4). Interpreted by the accountants
    from :attr:`event`.
    """

    sigma: float
    sensitivity: int
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        check_positive(self.sigma, "sigma")
        if not self.sigma >= _MIN_SIGMA:
            raise PrivacyParameterError(
                f"sigma must be at least 2**-500 (below, sigma**2 is not a normal double and the "
                f"noise is 0 with probability 1 - 1e-300 or more: no privacy), got {self.sigma!r}"
            )
        check_integer(self.sensitivity, name="sensitivity", minimum=1)
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))

    @classmethod
    def from_sigma(
        cls,
        *,
        sigma: float,
        sensitivity: int,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> DiscreteGaussian:
        return cls(
            sigma=check_positive(sigma, "sigma"),
            sensitivity=check_integer(sensitivity, name="sensitivity", minimum=1),
            neighbouring=as_neighbouring(neighbouring),
        )

    @property
    def exact(self) -> bool:
        """Whether releases use the exact rational sampler (sigma >= 2**13)."""
        return not self.sigma < _FAST_LIMIT

    @property
    def pmf_slack(self) -> float:
        return 0.0 if self.exact else DISCRETE_GAUSSIAN_SLACK

    @property
    def event(self) -> DiscreteGaussianEvent:
        return DiscreteGaussianEvent(
            sigma=self.sigma,
            sensitivity=self.sensitivity,
            neighbouring=self.neighbouring,
            pmf_slack=self.pmf_slack,
        )

    def confidence_half_width(self, alpha: float) -> int:
        """Smallest h whose certified upper bound on ``P(|Z| > h)`` is at most ``alpha``
        (:func:`_gaussian_half_width`): the exact smallest h for sigma below 1000 (unless the
        tail is within 1e-9 of alpha), and at most about one step more above."""
        a = check_probability(alpha, name="alpha", open_low=True, open_high=True)
        return _gaussian_half_width(self.sigma, a)

    def confidence_interval(self, value: float, *, alpha: float) -> tuple[float, float]:
        """The interval ``(value - h, value + h)`` around a released ``value``, with ``h =``
        :meth:`confidence_half_width` ``(alpha)``: it holds the true value with probability
        at least ``1 - alpha`` (over the noise). ``alpha`` is keyword-only."""
        h = self.confidence_half_width(alpha)
        return value - h, value + h

    def release(self, values: Any, *, source: RandomSource | None = None) -> Any:
        """Release integer ``values`` with discrete Gaussian noise.

        int64 entries in the container given (array of the same shape, Series with the same
        index, or an int for a scalar). Float dtypes and non-numeric types are refused by type.
        """
        parsed = parse_values(values, accept="integer")
        src = resolve_source(source)
        x = _integer_values(parsed)
        if self.exact:
            s2 = Fraction(self.sigma) ** 2
            return parsed.wrap(
                _add_exact(x, [discrete_gaussian_exact(src, s2) for _ in range(x.size)])
            )
        z = discrete_gaussian(src, sigma=self.sigma, size=x.shape)
        return parsed.wrap(x + z)
