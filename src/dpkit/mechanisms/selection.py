"""Selection mechanisms: the exponential mechanism and Report Noisy Max.

Three noise distributions for "add noise to every score, report the arg-max" give three
*different* mechanisms (all epsilon-DP):

* Gumbel noise of scale ``2 Delta / epsilon`` gives exactly the exponential mechanism
  ``P(r) ∝ exp(epsilon u(r) / (2 Delta))`` (the Gumbel-max trick; Dwork and Roth, Def. 3.4).
* One-sided exponential noise of the same scale gives the *permute-and-flip* mechanism, not the
  exponential mechanism (McKenna and Sheldon 2020; Ding, Kifer et al. 2021). It is sometimes
  stated that the two coincide; they do not. With two candidates whose scores differ by
  d and lambda = 2 Delta / epsilon: the exponential mechanism picks the better one with probability
  ``1 / (1 + exp(-d / lambda))``, exponential-noise noisy max with ``1 - exp(-d / lambda) / 2``
  (at d = lambda: 0.731 vs 0.816). See docs/mechanisms.md and tests/statistical.
* Laplace noise of scale ``2 Delta / epsilon`` (``Delta / epsilon`` for monotone scores, e.g.
  counts) gives Report Noisy Max (Dwork and Roth, Claim 3.9).

For monotone utilities (every score moves in the same direction between neighbours) the factor 2
drops (``monotonic=True``).

Scores: NaN is treated as -inf (never chosen unless every score is NaN or -inf, in which case the
first candidate is returned); +inf is treated as the largest finite double (several +inf
candidates tie and the noise decides among them); scores are shifted by their finite maximum
before scaling, so huge scores never overflow to NaN. The arg-max of floating-point noisy
scores deviates from the exact selection probabilities by a relative ``2**-40`` at most outside
an event of probability below ``2**-1000`` (noise with 52 bits of relative precision in both
tails); it is charged by scaling the scores with ``epsilon - 2 * 2**-40``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.rounding import up
from dpkit._numeric.validation import (
    check_epsilon,
    check_integer,
    check_nonnegative,
    check_probability,
    check_sensitivity,
)
from dpkit.accounting.events import (
    ExponentialMechanismEvent,
    Neighbouring,
    ReportNoisyMaxEvent,
    as_neighbouring,
)
from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource, resolve_source
from dpkit.noise.samplers import _exp_and_sign, _exp_two_tailed

__all__ = ["ExponentialMechanism", "ReportNoisyMax"]

SELECTION_SLACK = 2.0**-40
_ROWS_PER_TASK = 8



def _set_common(obj: object, epsilon: float, sensitivity: float, monotonic: bool,
                neighbouring: str | Neighbouring) -> None:
    """Validate and set the parameters both selection mechanisms share (frozen dataclasses)."""
    eps = check_epsilon(epsilon)
    if not eps > 4 * SELECTION_SLACK:
        raise PrivacyParameterError(f"epsilon must exceed 2**-38, got {epsilon!r}")
    if not isinstance(monotonic, bool):
        raise PrivacyParameterError(f"monotonic must be a bool, got {monotonic!r}")
    object.__setattr__(obj, "epsilon", eps)
    object.__setattr__(obj, "sensitivity", check_sensitivity(sensitivity))
    object.__setattr__(obj, "monotonic", monotonic)
    object.__setattr__(obj, "neighbouring", as_neighbouring(neighbouring))


def _scaled_scores(scores: Any, factor: float) -> npt.NDArray[np.float64]:
    """``factor * (u - max finite u)`` with NaN -> -inf, +inf -> largest double; never raises."""
    u = np.asarray(scores, dtype=np.float64).reshape(-1)
    if u.size == 0:
        raise PrivacyParameterError("scores must contain at least one candidate")
    u = np.where(np.isnan(u), -np.inf, u)
    np.minimum(u, np.finfo(np.float64).max, out=u)  # +inf ties at the top, noise breaks ties
    finite = u[np.isfinite(u)]
    shift = float(finite.max()) if finite.size else 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        z = (u - shift) * factor
    return np.where(np.isnan(z), -np.inf, z)


def _noisy_argmax(z: npt.NDArray[np.float64], count: int,
                  noise: Callable[[int], npt.NDArray[np.float64]],
                  parallel: bool = True) -> npt.NDArray[np.int64]:
    """``count`` arg-maxes of ``z + noise``, rows processed on two threads when ``parallel``.

    Seeded sources pass ``parallel=False`` so the keystream order, hence the result, is fixed.
    """
    n = z.size
    out = np.empty(count, dtype=np.int64)

    def work(start: int) -> None:
        stop = min(start + _ROWS_PER_TASK, count)
        rows = stop - start
        noisy = noise(rows * n).reshape(rows, n)
        noisy += z
        out[start:stop] = np.argmax(noisy, axis=1)

    starts = range(0, count, _ROWS_PER_TASK)
    if parallel and count * n > (1 << 18):
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(work, starts))
    else:
        for s in starts:
            work(s)
    return out


def _select(scores: Any, count: int, source: RandomSource | None, factor: float,
            noise: str) -> npt.NDArray[np.int64]:
    """``count`` arg-maxes of ``factor * scores + noise`` with unit-scale i.i.d. noise."""
    k = check_integer(count, name="count", minimum=0)
    src = resolve_source(source)
    z = _scaled_scores(scores, factor)

    def draw(m: int) -> npt.NDArray[np.float64]:
        if noise == "gumbel":
            return -np.log(_exp_two_tailed(src, m))
        if noise == "exponential":
            return _exp_two_tailed(src, m)
        e, sign = _exp_and_sign(src, m)
        return np.where(sign, -e, e)

    return _noisy_argmax(z, k, draw, parallel=src.secure)


@dataclass(frozen=True)
class ExponentialMechanism:
    """Pick candidate r with probability ``∝ exp(epsilon u(r) / (2 Delta))`` (Dwork-Roth Def. 3.4).

    ``epsilon / Delta`` instead of ``epsilon / (2 Delta)`` when ``monotonic=True``. epsilon-DP
    (Theorem 3.10). Sampled as the arg-max of ``u(r) * factor + Gumbel(0, 1)``.
    """

    epsilon: float
    sensitivity: float
    monotonic: bool = False
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __init__(self, *, epsilon: float, sensitivity: float, monotonic: bool = False,
                 neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE) -> None:
        _set_common(self, epsilon, sensitivity, monotonic, neighbouring)

    @property
    def factor(self) -> float:
        """Score multiplier ``(epsilon - 2 slack) / (c Delta)``, c = 1 or 2, rounded down."""
        c = 1.0 if self.monotonic else 2.0
        return math.nextafter((self.epsilon - 2 * SELECTION_SLACK) / (c * self.sensitivity), 0.0)

    @property
    def event(self) -> ExponentialMechanismEvent:
        return ExponentialMechanismEvent(epsilon=self.epsilon, neighbouring=self.neighbouring,
                                         pmf_slack=0.0)

    def probabilities(self, scores: Sequence[float] | npt.NDArray[np.float64]
                      ) -> npt.NDArray[np.float64]:
        """The exact selection probabilities (softmax with the maximum subtracted)."""
        z = _scaled_scores(scores, self.factor)
        w = np.exp(z)
        return w / w.sum() if w.sum() > 0 else np.full(z.size, 1.0 / z.size)

    def release(self, scores: Any, *, source: RandomSource | None = None) -> int:
        """Index of the selected candidate."""
        return int(self.release_many(scores, count=1, source=source)[0])

    def release_many(self, scores: Any, *, count: int, source: RandomSource | None = None
                     ) -> npt.NDArray[np.int64]:
        """``count`` independent selections (each is a separate epsilon-DP release).

        Gumbel-max: the arg-max of ``factor * u + Gumbel(0, 1)`` has exactly the exponential
        mechanism's law.
        """
        return _select(scores, count, source, self.factor, "gumbel")

    def utility_gap(self, *, n_candidates: int, t: float) -> float:
        """Dwork-Roth Theorem 3.11: ``P[u(out) <= OPT - (c Delta/eps)(ln |R| + t)] <= e^-t``.

        Returns ``(c Delta / epsilon)(ln n_candidates + t)`` with c = 2 (1 when monotonic),
        rounded up (a larger gap is the safe statement).
        """
        n = check_integer(n_candidates, name="n_candidates", minimum=1)
        tt = check_nonnegative("t", t)
        c = 1.0 if self.monotonic else 2.0
        return up(c * self.sensitivity / self.epsilon * (math.log(n) + tt) * (1 + 2.0**-50))

    def utility_gap_at(self, *, n_candidates: int, alpha: float) -> float:
        """The gap exceeded with probability at most ``alpha`` (t = ln(1/alpha))."""
        a = check_probability(alpha, name="alpha", open_low=True)
        return self.utility_gap(n_candidates=n_candidates, t=-math.log(a))


@dataclass(frozen=True)
class ReportNoisyMax:
    """Arg-max of scores plus i.i.d. noise: ``noise`` is "laplace", "exponential" or "gumbel".

    Noise scale ``c Delta / epsilon`` with c = 2 (c = 1 when ``monotonic=True``). All three are
    epsilon-DP (Dwork and Roth, Claim 3.9 for Laplace; McKenna and Sheldon 2020 for exponential
    noise, which equals permute-and-flip; Gumbel noise equals the exponential mechanism). They are
    different distributions: see the module docstring.
    """

    epsilon: float
    sensitivity: float
    noise: str = "laplace"
    monotonic: bool = False
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __init__(self, *, epsilon: float, sensitivity: float, noise: str = "laplace",
                 monotonic: bool = False,
                 neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE) -> None:
        if noise not in ("laplace", "exponential", "gumbel"):
            raise PrivacyParameterError(
                f"noise must be 'laplace', 'exponential' or 'gumbel', got {noise!r}"
            )
        object.__setattr__(self, "noise", noise)
        _set_common(self, epsilon, sensitivity, monotonic, neighbouring)

    @property
    def scale(self) -> float:
        """Noise scale ``c Delta / (epsilon - 2 slack)``, rounded up."""
        c = 1.0 if self.monotonic else 2.0
        return math.nextafter(c * self.sensitivity / (self.epsilon - 2 * SELECTION_SLACK),
                              math.inf)

    @property
    def event(self) -> ReportNoisyMaxEvent:
        return ReportNoisyMaxEvent(epsilon=self.epsilon, noise=self.noise,
                                   neighbouring=self.neighbouring, pmf_slack=0.0)

    def release(self, scores: Any, *, source: RandomSource | None = None) -> int:
        """Index of the candidate with the largest noisy score."""
        return int(self.release_many(scores, count=1, source=source)[0])

    def release_many(self, scores: Any, *, count: int, source: RandomSource | None = None
                     ) -> npt.NDArray[np.int64]:
        """``count`` independent releases."""
        return _select(scores, count, source, 1.0 / self.scale, self.noise)
