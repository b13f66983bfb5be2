"""Binary randomized response (Warner 1965; Dwork and Roth, Section 3.2)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpkit._numeric.search import search_int
from dpkit._numeric.validation import check_epsilon, check_probability
from dpkit._numeric.values import parse_values
from dpkit.errors import PrivacyParameterError
from dpkit.events import Neighbouring, RandomizedResponseEvent
from dpkit.mechanisms._calibration import calibration_target, charged_epsilon, reported_epsilon
from dpkit.noise import RandomSource, resolve_source

__all__ = ["RandomizedResponse"]

_RES = 2**53


@dataclass(frozen=True, kw_only=True)
class RandomizedResponse:
    """Report the true bit with probability p, the flipped bit otherwise.

    ``epsilon = ln(p / (1 - p))`` for p in [1/2, 1). The implementation is *exact*: p is a
    multiple of 2**-53 (``from_epsilon`` rounds it down, so the epsilon spent never exceeds the
    one asked for) and the coin compares a uniform 53-bit integer with ``p * 2**53``. The largest
    p is ``1 - 2**-53``, so the largest epsilon is ``ln(2**53 - 1)`` (about 36.7).
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
        """The largest ``p = k / 2**53 < 1`` whose cost, as the accountants compute it from
        :attr:`event`, is at most ``T = epsilon (1 - 2**-40)`` (:mod:`._calibration`).

        That is ``p`` just below ``e^T / (1 + e^T)``; the cost increases with k, so k is found
        by bisection on ``[2**52, 2**53 - 1]`` (p = 1/2 costs 0). Epsilons beyond
        ``ln(2**53 - 1)`` (about 36.7) give ``p = 1 - 2**-53``, which spends less than asked.
        """
        eps = check_epsilon(epsilon)
        target = calibration_target(eps)

        def fits(k: int) -> bool:
            ev = RandomizedResponseEvent(
                p_truth=k / _RES, categories=2, neighbouring=Neighbouring.REPLACE
            )
            return charged_epsilon(ev) <= target

        top = _RES - 1
        if fits(top):
            return cls(p=top / _RES)
        # fits(2**52) holds (p = 1/2 costs 0), fits(top) does not: the largest k that fits.
        k = search_int(fits, _RES // 2, top, holds="below", what="RandomizedResponse.from_epsilon")
        return cls(p=k / _RES)

    @property
    def epsilon(self) -> float:
        """What a budget charges for :attr:`event`: ``ln(p / (1 - p))`` computed by
        :func:`dpkit.events.pure_epsilon_of` (exact ratio, then ``log1p`` inflated by a
        relative 2**-40), rounded up."""
        return reported_epsilon(self.event)

    @property
    def event(self) -> RandomizedResponseEvent:
        return RandomizedResponseEvent(
            p_truth=self.p, categories=2, neighbouring=Neighbouring.REPLACE
        )

    def release(self, bits: Any, *, source: RandomSource | None = None) -> Any:
        """Randomize each bit; booleans in the container given (array of the same shape, Series
        with the same index, or a bool for a scalar).

        ``bits`` must have a bool or integer type (a non-zero integer counts as 1), read by
        :func:`dpkit._numeric.values.parse_values`; floats, strings, None and other types are
        refused whatever their values.
        """
        parsed = parse_values(bits, accept="binary")
        src = resolve_source(source)
        b = parsed.array
        keep = (src.words(b.shape) >> np.uint64(11)) < np.uint64(int(self.p * _RES))
        return parsed.wrap(np.asarray(np.where(keep, b, ~b)))

    def estimate_proportion(self, reports: Any) -> float:
        """Unbiased estimate of the true proportion of ones: ``(mean - (1 - p)) / (2p - 1)``."""
        r = np.asarray(reports).astype(np.float64)
        if r.size == 0:
            return float("nan")
        return float((r.mean() - (1.0 - self.p)) / (2.0 * self.p - 1.0))
