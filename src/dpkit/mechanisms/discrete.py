"""Integer-valued mechanisms: :class:`DiscreteLaplace` and :class:`DiscreteGaussian`.

For integer queries no lattice is needed: integer noise is added in exact integer arithmetic.
Noise comes from the fast vectorised samplers while their scale is below ``2**13`` (pmf within
a stated factor of exact, charged as ``pmf_slack``: 2**-24 for discrete Laplace, 2**-23 for the
discrete Gaussian; :mod:`dpkit.mechanisms._lattice`) and from the exact rational samplers
of Canonne, Kamath and Steinke (2020) above it (no charge; slower, one value at a time).
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
from dpkit.accounting.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Neighbouring,
    as_neighbouring,
)
from dpkit.errors import PrivacyParameterError
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


def _integer_values(values: Any) -> npt.NDArray[np.int64]:
    """Integer inputs as int64, saturated at +-2**62 (the documented clamp); NaN -> 0."""
    x = np.asarray(values)
    if x.dtype.kind == "u":  # saturate before the cast: uint64 >= 2**63 would wrap negative
        capped: npt.NDArray[np.uint64] = np.minimum(x, np.uint64(_INT_LIMIT))
        return capped.astype(np.int64)
    if x.dtype.kind in "ib":
        return np.clip(x.astype(np.int64, copy=False), -_INT_LIMIT, _INT_LIMIT)
    f = np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0)
    return np.clip(np.rint(f), -float(_INT_LIMIT), float(_INT_LIMIT)).astype(np.int64)



@dataclass(frozen=True, kw_only=True)
class DiscreteLaplace:
    """``x + Z`` with ``P(Z = k) = tanh(1/(2t)) exp(-|k| / t)`` on integer queries.

    Privacy: ``epsilon = sensitivity / scale`` (+ ``2 * pmf_slack`` on the fast path), because the
    pmf ratio of shifts by one is exactly ``e^{1/t}`` (Ghosh, Roughgarden, Sundararajan 2012;
    CKS 2020, Section 2). Values are integers (floats are rounded; NaN -> 0).
    """

    scale: float
    sensitivity: int
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        check_positive("scale", self.scale)
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
    def from_epsilon(cls, *, epsilon: float, sensitivity: int,
                     neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE
                     ) -> DiscreteLaplace:
        """Scale ``sensitivity / (epsilon - 2a)`` rounded up (a = slack of the chosen sampler)."""
        eps = check_epsilon(epsilon)
        sens = check_integer(sensitivity, name="sensitivity", minimum=1)
        scale = up(Fraction(sens) / Fraction(eps))
        if scale < _FAST_LIMIT:
            if not eps > 4 * DISCRETE_LAPLACE_SLACK:
                raise PrivacyParameterError(f"epsilon must exceed 2**-22, got {epsilon!r}")
            scale = up(Fraction(sens) / (Fraction(eps) - Fraction(2 * DISCRETE_LAPLACE_SLACK)))
            # If the slack pushes the scale to 2**13 or more, the exact sampler (no slack) is used
            # with a scale slightly larger than needed: still safe.
        return cls(scale=scale, sensitivity=sens, neighbouring=as_neighbouring(neighbouring))

    @property
    def epsilon(self) -> float:
        """``sensitivity / scale + 2 * pmf_slack``, rounded up."""
        return up(Fraction(self.sensitivity) / Fraction(self.scale)
                  + Fraction(2 * self.pmf_slack))

    @property
    def event(self) -> DiscreteLaplaceEvent:
        return DiscreteLaplaceEvent(scale=self.scale, sensitivity=self.sensitivity,
                                    neighbouring=self.neighbouring, pmf_slack=self.pmf_slack)

    def confidence_interval(self, alpha: float) -> int:
        """Smallest h with ``P(|Z| > h) = 2 q^(h+1) / (1 + q) <= alpha``, q = e^(-1/t)."""
        a = check_probability(alpha, name="alpha", open_low=True, open_high=True)
        q = math.exp(-1.0 / self.scale)
        h = math.ceil(math.log(a * (1.0 + q) / 2.0) / math.log(q) - 1.0)
        return max(h, 0)

    def release(self, values: Any, *, source: RandomSource | None = None
                ) -> npt.NDArray[np.int64]:
        """Release integer ``values`` (same shape, int64) with discrete Laplace noise."""
        src = resolve_source(source)
        x = _integer_values(values)
        if self.exact:
            frac = Fraction(self.scale)
            z = np.array([discrete_laplace_exact(src, frac) for _ in range(x.size)],
                         dtype=np.int64).reshape(x.shape)
        else:
            z = discrete_laplace(src, scale=self.scale, size=x.shape)
        return x + z


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
        check_positive("sigma", self.sigma)
        check_integer(self.sensitivity, name="sensitivity", minimum=1)
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))

    @classmethod
    def from_sigma(cls, *, sigma: float, sensitivity: int,
                   neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE
                   ) -> DiscreteGaussian:
        return cls(sigma=check_positive("sigma", sigma),
                   sensitivity=check_integer(sensitivity, name="sensitivity", minimum=1),
                   neighbouring=as_neighbouring(neighbouring))

    @property
    def exact(self) -> bool:
        """Whether releases use the exact rational sampler (sigma >= 2**13)."""
        return not self.sigma < _FAST_LIMIT

    @property
    def pmf_slack(self) -> float:
        return 0.0 if self.exact else DISCRETE_GAUSSIAN_SLACK

    @property
    def event(self) -> DiscreteGaussianEvent:
        return DiscreteGaussianEvent(sigma=self.sigma, sensitivity=self.sensitivity,
                                     neighbouring=self.neighbouring, pmf_slack=self.pmf_slack)

    def confidence_interval(self, alpha: float) -> int:
        """h with ``P(|Z| > h) <= alpha``: ``ceil(sigma sqrt(2 ln(2 / alpha)))``.

        The discrete Gaussian is sigma^2-subgaussian (CKS 2020, Corollary 9), so
        ``P(|Z| >= x) <= 2 exp(-x^2 / (2 sigma^2))``.
        """
        a = check_probability(alpha, name="alpha", open_low=True, open_high=True)
        return math.ceil(self.sigma * math.sqrt(2.0 * math.log(2.0 / a)))

    def release(self, values: Any, *, source: RandomSource | None = None
                ) -> npt.NDArray[np.int64]:
        """Release integer ``values`` (same shape, int64) with discrete Gaussian noise."""
        src = resolve_source(source)
        x = _integer_values(values)
        if self.exact:
            s2 = Fraction(self.sigma) ** 2
            z = np.array([discrete_gaussian_exact(src, s2) for _ in range(x.size)],
                         dtype=np.int64).reshape(x.shape)
        else:
            z = discrete_gaussian(src, sigma=self.sigma, size=x.shape)
        return x + z
