"""The sparse vector technique: answer "is this query above the threshold?" for a stream.

:class:`SparseVector` is the mechanism (immutable, with an ``event`` a budget charges);
:meth:`SparseVector.start` opens a :class:`SparseVectorStream`, the one-way state of a run.

Algorithm (Lyu, Su and Li, "Understanding the sparse vector technique for differential
privacy", VLDB 2017, Algorithm 7; Dwork and Roth, Algorithms 1-2 with the threshold drawn once):

1. draw the threshold noise ``rho ~ Lap(b1)`` once, ``b1 = Delta / eps1``;
2. for each query answer ``q_i`` (sensitivity ``Delta``) draw ``nu_i ~ Lap(b2)``,
   ``b2 = 2 c Delta / eps2`` (``c Delta / eps2`` when the queries are monotone), and answer
   positive when ``q_i + nu_i >= T + rho``;
3. stop after ``c`` positive answers (``c = 1`` is AboveThreshold).

It is ``(eps1 + eps2)``-DP (Lyu et al., Theorem 2; Dwork and Roth, Theorems 3.23 and 3.25 for
``c = 1``) whatever the number of negative answers. The split ``eps1 : eps2 = 1 : (2c)^(2/3)``
(``1 : c^(2/3)`` monotone) minimises the variance of ``nu_i - rho`` (Lyu et al., Section 4.2).

Numeric variant (``numeric_epsilon > 0``): each positive answer also releases ``q_i`` plus
*fresh* Laplace noise of scale ``c Delta / eps3`` (a :class:`~dpkit.mechanisms.Laplace` at
``eps3 / c``); the total is ``eps1 + eps2 + eps3``. Releasing ``q_i + nu_i`` itself, reusing
the comparison noise, is NOT private (Lyu et al., Algorithm 3), nor are: threshold noise only
(Algorithm 5), no cut-off c (Algorithm 6), query noise that does not grow with c
(Algorithm 4, which is ``((1 + 6c) / 4) eps``-DP).

Floating point. The comparison is done exactly on an integer lattice of spacing
``s = granularity_for(b2, Delta, 2**32)`` (a power of two): ``rint(q_i / s) + z_i >=
rint(T / s) + r`` with ``z_i``, ``r`` lattice Laplace draws (:func:`~dpkit.noise.
laplace_lattice_noise`, post-processing of continuous Laplace noise). Rounding moves an answer
by at most ``s / 2``, charged as sensitivity ``Delta + s``. The samplers' pmfs are within
``exp(+-a)``, ``a = LAPLACE_SLACK``, of exact; the proof changes the measure of ``rho`` once and
of one ``nu_i`` per positive answer, so ``2 a (1 + c)`` is added. The stated epsilon is the
exact sum, rounded up, and the calibration keeps it within ``epsilon (1 - 2**-40)``.

State. A stream draws its threshold noise when opened, answers each query once, refuses every
query after the ``c``-th positive answer, and cannot be copied or pickled (a copy would let a
query be re-asked against the same threshold noise for free). Query answers that are NaN are
read as 0 and infinities are clamped (the lattice rules), so no answer raises after a charge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NoReturn

import numpy as np

from dpkit._numeric.rounding import up
from dpkit._numeric.validation import check_epsilon, check_finite, check_integer, check_sensitivity
from dpkit._numeric.values import parse_values
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.events import ComposedEvent, DpEvent, Neighbouring, PureDpEvent, as_neighbouring
from dpkit.mechanisms._calibration import calibration_target
from dpkit.mechanisms._lattice import LAPLACE_SLACK, granularity_for, lattice_index
from dpkit.mechanisms.additive import Laplace
from dpkit.noise import RandomSource, resolve_source
from dpkit.noise.samplers import laplace_lattice_noise

__all__ = ["SparseVector", "SparseVectorStream"]

_MAX_T = 2.0**32
_BLOCK = 16
_LIMIT = 2**62


def _index(value: Any, s: float) -> int:
    """The lattice index of one answer (exact for every accepted type; NaN -> 0)."""
    if type(value) is float or type(value) is int:
        if value != value:
            return 0
        if type(value) is float and math.isinf(value):
            return _LIMIT if value > 0 else -_LIMIT
        return max(-_LIMIT, min(_LIMIT, round(Fraction(value) / Fraction(s))))
    return int(lattice_index(parse_values(np.asarray([value]), accept="real"), s)[0])


@dataclass(frozen=True, kw_only=True)
class SparseVector:
    """Sparse vector (AboveThreshold for ``max_positives=1``), pure DP; see the module docstring.

    ``epsilon`` is the budget of the comparisons (threshold and query noise), split by
    ``threshold_share`` (default: Lyu et al.'s optimal split); ``numeric_epsilon`` the extra
    budget for releasing the values of the positive answers (0: answers only).
    """

    epsilon: float
    sensitivity: float
    threshold: float
    max_positives: int = 1
    monotonic: bool = False
    numeric_epsilon: float = 0.0
    threshold_share: float | None = None
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    _granularity: float = field(init=False, repr=False, compare=False)
    _b1: float = field(init=False, repr=False, compare=False)
    _b2: float = field(init=False, repr=False, compare=False)
    _cost: Fraction = field(init=False, repr=False, compare=False)
    _numeric: Laplace | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        delta_1 = check_sensitivity(self.sensitivity)
        check_finite(self.threshold, "threshold")
        c = check_integer(self.max_positives, name="max_positives", minimum=1, maximum=2**20)
        if not isinstance(self.monotonic, bool):
            raise PrivacyParameterError(f"monotonic must be a bool, got {self.monotonic!r}")
        eps3 = check_epsilon(self.numeric_epsilon, "numeric_epsilon", allow_zero=True)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "sensitivity", delta_1)
        object.__setattr__(self, "threshold", check_finite(self.threshold, "threshold"))
        object.__setattr__(self, "numeric_epsilon", eps3)
        m = c if self.monotonic else 2 * c
        if self.threshold_share is None:
            share = 1.0 / (1.0 + m ** (2.0 / 3.0))
        else:
            share = check_finite(self.threshold_share, "threshold_share")
            if not 0.0 < share < 1.0:
                raise PrivacyParameterError(
                    f"threshold_share must lie strictly between 0 and 1, got {share!r}"
                )
        object.__setattr__(self, "threshold_share", share)
        object.__setattr__(self, "max_positives", c)
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))
        # exact calibration: cost = (D+s)/b1 + m (D+s)/b2 + 2a(1+c) <= eps (1 - 2**-40)
        target = calibration_target(eps) - 2 * Fraction(LAPLACE_SLACK) * (1 + c)
        if target <= 0:
            raise PrivacyParameterError(f"epsilon is too small for sparse vector, got {eps!r}")
        b2_guess = up(m * delta_1 / (target * (1 - Fraction(share))))
        s = granularity_for(b2_guess, delta_1, _MAX_T)
        d = Fraction(delta_1) + Fraction(s)
        b1 = up(d / (target * Fraction(share)))
        b2 = up(m * d / (target * (1 - Fraction(share))))
        while d / Fraction(b1) + m * d / Fraction(b2) > target:  # an ulp at most
            b1, b2 = math.nextafter(b1, math.inf), math.nextafter(b2, math.inf)
        if not (b1 / s < _MAX_T and b2 / s < _MAX_T):
            raise PrivacyParameterError("epsilon is too small for the sampler's range")
        object.__setattr__(self, "_granularity", s)
        object.__setattr__(self, "_b1", b1)
        object.__setattr__(self, "_b2", b2)
        cost = d / Fraction(b1) + m * d / Fraction(b2) + 2 * Fraction(LAPLACE_SLACK) * (1 + c)
        object.__setattr__(self, "_cost", cost)
        if self.numeric_epsilon > 0.0:
            lap = Laplace.from_epsilon(
                epsilon=self.numeric_epsilon / c,
                sensitivity=delta_1,
                neighbouring=self.neighbouring,
            )
            object.__setattr__(self, "_numeric", lap)
        else:
            object.__setattr__(self, "_numeric", None)

    @property
    def threshold_scale(self) -> float:
        """Scale ``b1`` of the threshold noise (Laplace), rounded up."""
        return float(self._b1)

    @property
    def query_scale(self) -> float:
        """Scale ``b2`` of each query's noise (Laplace), rounded up."""
        return float(self._b2)

    @property
    def granularity(self) -> float:
        """The lattice spacing of the comparisons (a power of two)."""
        return float(self._granularity)

    @property
    def event(self) -> DpEvent:
        """``PureDpEvent(eps1 + eps2 + slack)`` (rounded up), composed with ``c`` Laplace
        releases of ``numeric_epsilon / c`` each for the numeric variant."""
        core = PureDpEvent(epsilon=up(self._cost))
        numeric: Laplace | None = self._numeric
        if numeric is None:
            return core
        return ComposedEvent(events=(core,) + (numeric.event,) * self.max_positives)

    def start(self, *, source: RandomSource | None = None) -> SparseVectorStream:
        """Open a stream (draws the threshold noise now). Charge :attr:`event` first."""
        return SparseVectorStream(self, resolve_source(source))

    def release(self, values: Any, *, source: RandomSource | None = None) -> tuple[Any, ...]:
        """Run one stream over the query answers ``values`` in order; the answers given before
        it halts (True/False, or the noisy value / False in the numeric variant)."""
        stream = self.start(source=source)
        out: list[Any] = []
        items = values if isinstance(values, (list, tuple)) else np.asarray(values, dtype=object)
        for v in np.asarray(items, dtype=object).reshape(-1):
            if stream.halted:
                break
            out.append(stream.ask(v))
        return tuple(out)


class SparseVectorStream:
    """One run of a :class:`SparseVector`: answers each query once, in order, until it halts.

    It cannot be rewound, copied or pickled; after ``max_positives`` positive answers every
    further :meth:`ask` raises :class:`~dpkit.errors.BudgetExceededError`.
    """

    __slots__ = (
        "_answered",
        "_block",
        "_mech",
        "_noisy_threshold",
        "_positives",
        "_source",
    )

    def __init__(self, mechanism: SparseVector, source: RandomSource) -> None:
        self._mech = mechanism
        self._source = source
        s = mechanism.granularity
        r = int(laplace_lattice_noise(source, t=mechanism.threshold_scale / s, size=1)[0])
        self._noisy_threshold = _index(mechanism.threshold, s) + r
        self._block: list[int] = []  # query noise drawn ahead, in blocks (independent draws)
        self._positives = 0
        self._answered = 0

    @property
    def halted(self) -> bool:
        """Whether the ``max_positives``-th positive answer has been given."""
        return self._positives >= self._mech.max_positives

    @property
    def positives(self) -> int:
        """Positive answers given so far."""
        return self._positives

    @property
    def answered(self) -> int:
        """Queries answered so far (each answer is final)."""
        return self._answered

    def ask(self, value: Any) -> Any:
        """Answer one query (its true value, of the declared sensitivity).

        Returns False below the noisy threshold; True above it (or, in the numeric variant, the
        value plus fresh Laplace noise).
        """
        if self.halted:
            raise BudgetExceededError(
                "this sparse vector stream has halted after its last positive answer; "
                "start a new stream (and charge its event) to ask more"
            )
        m = self._mech
        s = m.granularity
        if not self._block:
            draws = laplace_lattice_noise(self._source, t=m.query_scale / s, size=_BLOCK)
            self._block = [int(v) for v in draws[::-1]]
        z = self._block.pop()
        self._answered += 1
        if _index(value, s) + z < self._noisy_threshold:
            return False
        self._positives += 1
        numeric: Laplace | None = m._numeric
        if numeric is None:
            return True
        return float(numeric.release(np.asarray([value]), source=self._source)[0])

    def _refuse(self, *_: Any) -> NoReturn:
        raise PrivacyParameterError(
            "a sparse vector stream cannot be copied or pickled: a copy would answer queries "
            "again against the same threshold noise; start a new stream instead"
        )

    __copy__ = _refuse
    __deepcopy__ = _refuse
    __reduce__ = _refuse
    __reduce_ex__ = _refuse
    __getstate__ = _refuse
