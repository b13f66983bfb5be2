"""Binary randomized response (Warner 1965; Dwork and Roth, Section 3.2)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.validation import check_epsilon, check_probability
from dpkit.accounting.events import (
    Neighbouring,
    RandomizedResponseEvent,
    randomized_response_epsilon,
)
from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource, resolve_source

__all__ = ["RandomizedResponse"]

_RES = 2**53


@dataclass(frozen=True, kw_only=True)
class RandomizedResponse:
    """Report the true bit with probability p, the flipped bit otherwise.

    ``epsilon = ln(p / (1 - p))`` for p in [1/2, 1). The implementation is *exact*: p is a
    multiple of 2**-53 (``from_epsilon`` rounds it down, so the epsilon spent never exceeds the
    one asked for) and the coin compares a uniform 53-bit integer with ``p * 2**53``.
    """

    p: float

    def __init__(self, *, p: float) -> None:
        pp = check_probability(p, name="p")
        if not 0.5 <= pp < 1.0:
            raise PrivacyParameterError(f"p must lie in [1/2, 1), got {p!r}")
        if pp * _RES != math.floor(pp * _RES):
            pp = math.floor(pp * _RES) / _RES  # round down: less truth, less epsilon
        object.__setattr__(self, "p", pp)

    @classmethod
    def from_epsilon(cls, *, epsilon: float) -> RandomizedResponse:
        """``p = e^eps / (1 + e^eps)`` rounded down to a multiple of 2**-53."""
        eps = check_epsilon(epsilon)
        p = 1.0 / (1.0 + math.exp(-eps))
        k = math.floor(p * _RES)
        while k > 0 and Fraction(k, _RES - k) > Fraction(math.exp(eps)) * (1 - Fraction(1, 2**50)):
            k -= 1
        return cls(p=min(k / _RES, 1.0 - 2.0**-53))

    @property
    def epsilon(self) -> float:
        """``ln(p / (1 - p)) = log1p((2p - 1) / (1 - p))``, rounded up (relative margin 2**-48).

        For p in [1/2, 1), ``2p - 1`` and ``1 - p`` are exact, so only the division and log1p
        round: a few ulps of relative error, covered by the margin.
        """
        return randomized_response_epsilon(self.p, 2)

    @property
    def event(self) -> RandomizedResponseEvent:
        return RandomizedResponseEvent(p_truth=self.p, categories=2,
                                       neighbouring=Neighbouring.REPLACE)

    def release(self, bits: Any, *, source: RandomSource | None = None
                ) -> npt.NDArray[np.bool_]:
        """Randomize each bit (truthy values count as 1); same shape, booleans."""
        src = resolve_source(source)
        b = np.asarray(bits).astype(np.bool_)
        keep = (src.words(b.shape) >> np.uint64(11)) < np.uint64(int(self.p * _RES))
        return np.where(keep, b, ~b)

    def estimate_proportion(self, reports: Any) -> float:
        """Unbiased estimate of the true proportion of ones: ``(mean - (1 - p)) / (2p - 1)``."""
        r = np.asarray(reports).astype(np.float64)
        if r.size == 0:
            return float("nan")
        return float((r.mean() - (1.0 - self.p)) / (2.0 * self.p - 1.0))
