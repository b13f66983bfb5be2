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

import abc
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NoReturn

import numpy as np

from dpkit._numeric.rounding import down, up
from dpkit._numeric.validation import (
    check_epsilon,
    check_finite,
    check_integer,
    check_positive,
    check_sensitivity,
)
from dpkit._numeric.values import parse_values
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.events import (
    ComposedEvent,
    DpEvent,
    GaussianSparseVectorEvent,
    Neighbouring,
    PureDpEvent,
    SelfComposedEvent,
    as_neighbouring,
)
from dpkit.mechanisms._calibration import calibration_target
from dpkit.mechanisms._lattice import LAPLACE_SLACK, granularity_for, lattice_index
from dpkit.mechanisms.additive import Laplace
from dpkit.noise import RandomSource, resolve_source
from dpkit.noise.samplers import discrete_gaussian_exact, laplace_lattice_noise

__all__ = [
    "GaussianSparseVector",
    "GaussianSparseVectorStream",
    "NumericSparseVector",
    "SparseVector",
    "SparseVectorStream",
]

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
                epsilon=down(Fraction(self.numeric_epsilon) / c),  # c of them within eps3
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
        releases of ``numeric_epsilon / c`` (rounded down) each for the numeric variant."""
        core = PureDpEvent(epsilon=up(self._cost))
        numeric: Laplace | None = self._numeric
        if numeric is None:
            return core
        values = SelfComposedEvent(event=numeric.event, count=self.max_positives)
        return ComposedEvent(events=(core, values))

    def start(self, *, source: RandomSource | None = None) -> SparseVectorStream:
        """Open a stream (draws the threshold noise now). Charge :attr:`event` first."""
        return SparseVectorStream(self, resolve_source(source))

    def release(self, values: Any, *, source: RandomSource | None = None) -> tuple[Any, ...]:
        """Run one stream over the query answers ``values`` in order; the answers given before
        it halts (True/False, or the noisy value / False in the numeric variant)."""
        return _run(self.start(source=source), values)


@dataclass(frozen=True, kw_only=True)
class NumericSparseVector:
    """Numeric sparse vector: each positive answer also releases the query's value, pure DP.

    Dwork and Roth (2014), Section 3.6 (NumericSparse), with the scales of Lyu, Su and Li
    (2017), Algorithm 7 with ``eps3 > 0``. ``epsilon`` is the whole cost, split into
    ``eps3 = numeric_share * epsilon`` for the values and ``epsilon - eps3`` for the comparisons
    (the latter split again ``eps1 : eps2`` as in :class:`SparseVector`), both rounded down so
    that ``eps1 + eps2 + eps3 <= epsilon`` exactly:

    1. ``rho ~ Lap(Delta / eps1)`` once; for each answer ``q_i``, ``nu_i ~ Lap(2 c Delta /
       eps2)`` (``c Delta / eps2`` monotone) and a positive answer when ``q_i + nu_i >= T +
       rho``; stop after ``c`` positives (:class:`SparseVector`, ``(eps1 + eps2)``-DP);
    2. each positive answer releases ``q_i + eta_i`` with FRESH noise ``eta_i ~ Lap(c Delta /
       eps3)``: at most c Laplace releases of ``eps3 / c`` each, ``eps3`` by composition.

    Total ``epsilon`` (Lyu et al., Theorem 2 plus sequential composition). The value must not
    reuse ``nu_i``: ``q_i + nu_i`` is not DP for any epsilon (Lyu et al., Algorithm 3; the
    known-bad corpus entry ``sparse-vector-reused-noise``), and Dwork and Roth's ``Lap(2 c
    Delta / eps3)`` for the values is twice the noise needed. Their split gives the values
    1/9 of the budget; the default here is 1/2 (a value is then about as noisy as the
    comparisons' query noise for c = 1, monotone queries).

    The stream is a :class:`SparseVectorStream` (one-way, no copy or pickle): ``ask`` returns
    False below the noisy threshold and the noisy value (a float) above it. Values are
    released by :class:`~dpkit.mechanisms.Laplace` (lattice rules: NaN read as 0, infinities
    clamped; nothing raises after a charge).
    """

    epsilon: float
    sensitivity: float
    threshold: float
    max_positives: int = 1
    monotonic: bool = False
    numeric_share: float = 0.5
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    _inner: SparseVector = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        share = self.numeric_share
        if isinstance(share, bool) or not isinstance(share, (int, float)):
            raise PrivacyParameterError(f"numeric_share must be a number, got {share!r}")
        share = check_finite(float(share), "numeric_share")
        if not 0.0 < share < 1.0:
            raise PrivacyParameterError(
                f"numeric_share must lie strictly between 0 and 1, got {share!r}"
            )
        eps3 = down(Fraction(eps) * Fraction(share))
        eps_cmp = down(Fraction(eps) - Fraction(eps3))
        if not (eps3 > 0.0 and eps_cmp > 0.0):
            raise PrivacyParameterError(f"epsilon is too small to split, got {eps!r}")
        inner = SparseVector(
            epsilon=eps_cmp,
            sensitivity=self.sensitivity,
            threshold=self.threshold,
            max_positives=self.max_positives,
            monotonic=self.monotonic,
            numeric_epsilon=eps3,
            neighbouring=self.neighbouring,
        )
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "numeric_share", share)
        object.__setattr__(self, "sensitivity", inner.sensitivity)
        object.__setattr__(self, "threshold", inner.threshold)
        object.__setattr__(self, "max_positives", inner.max_positives)
        object.__setattr__(self, "neighbouring", inner.neighbouring)
        object.__setattr__(self, "_inner", inner)

    @property
    def comparisons(self) -> SparseVector:
        """The sparse vector of the comparisons (its ``numeric_epsilon`` is ``eps3``)."""
        return self._inner

    @property
    def numeric_epsilon(self) -> float:
        """``eps3``, the budget of the released values (rounded down)."""
        return self._inner.numeric_epsilon

    @property
    def threshold_scale(self) -> float:
        """Scale of the threshold noise (Laplace), rounded up."""
        return self._inner.threshold_scale

    @property
    def query_scale(self) -> float:
        """Scale of each comparison's query noise (Laplace), rounded up."""
        return self._inner.query_scale

    @property
    def numeric_scale(self) -> float:
        """Scale of the fresh noise of each released value (Laplace, ``c Delta / eps3`` on
        the lattice rules), rounded up."""
        numeric: Laplace | None = self._inner._numeric
        assert numeric is not None
        return float(numeric.scale)

    @property
    def event(self) -> DpEvent:
        """The comparisons' ``PureDpEvent`` composed with ``c`` Laplace releases; a budget of
        ``epsilon`` accepts it."""
        return self._inner.event

    def start(self, *, source: RandomSource | None = None) -> SparseVectorStream:
        """Open a stream (draws the threshold noise now). Charge :attr:`event` first."""
        return self._inner.start(source=source)

    def release(self, values: Any, *, source: RandomSource | None = None) -> tuple[Any, ...]:
        """Run one stream over ``values`` in order: False, or the noisy value, per answer."""
        return self._inner.release(values, source=source)


def _run(stream: _OneWayStream, values: Any) -> tuple[Any, ...]:
    """Ask ``stream`` every answer of ``values`` in order until it halts; the answers given."""
    out: list[Any] = []
    items = values if isinstance(values, (list, tuple)) else np.asarray(values, dtype=object)
    for v in np.asarray(items, dtype=object).reshape(-1):
        if stream.halted:
            break
        out.append(stream.ask(v))
    return tuple(out)


class _OneWayStream(abc.ABC):
    """What every sparse vector stream shares: the counts, and no copy or pickle (a copy would
    answer queries again against the same threshold noise). Each stream defines ``halted`` and
    ``ask``."""

    __slots__ = ("_answered", "_positives")

    def __init__(self) -> None:
        self._positives = 0
        self._answered = 0

    @property
    @abc.abstractmethod
    def halted(self) -> bool:
        """Whether the stream refuses further queries."""

    @abc.abstractmethod
    def ask(self, value: Any) -> Any:
        """Answer one query (it cannot be asked again)."""

    @property
    def positives(self) -> int:
        """Positive answers given so far."""
        return self._positives

    @property
    def answered(self) -> int:
        """Queries answered so far (each answer is final)."""
        return self._answered

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


class SparseVectorStream(_OneWayStream):
    """One run of a :class:`SparseVector`: answers each query once, in order, until it halts.

    It cannot be rewound, copied or pickled; after ``max_positives`` positive answers every
    further :meth:`ask` raises :class:`~dpkit.errors.BudgetExceededError`.
    """

    __slots__ = ("_block", "_mech", "_noisy_threshold", "_source")

    def __init__(self, mechanism: SparseVector, source: RandomSource) -> None:
        self._mech = mechanism
        self._source = source
        s = mechanism.granularity
        r = int(laplace_lattice_noise(source, t=mechanism.threshold_scale / s, size=1)[0])
        self._noisy_threshold = _index(mechanism.threshold, s) + r
        self._block: list[int] = []  # query noise drawn ahead, in blocks (independent draws)
        super().__init__()

    @property
    def halted(self) -> bool:
        """Whether the ``max_positives``-th positive answer has been given."""
        return self._positives >= self._mech.max_positives

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


_GAUSSIAN_MAX_T = 2.0**40
_MAX_QUERIES = 2**40
#: sigma_query / sigma_threshold of the calibration constructors: minimises the variance of
#: ``nu_i - rho`` (``sigma_1^2 + sigma_2^2``) at a fixed slope ``1/sigma_1^2 + 2/sigma_2^2``
_QUERY_RATIO = 2.0**0.25


def _exact_square(sigma: float, s: float) -> Fraction:
    """``(sigma / s)^2`` exactly: the variance of the lattice noise in lattice units."""
    t = Fraction(sigma) / Fraction(s)
    return t * t


@dataclass(frozen=True, kw_only=True)
class GaussianSparseVector:
    """Sparse vector with Gaussian noise, accounted in Renyi DP / zCDP (Zhu and Wang 2020).

    Algorithm (one AboveThreshold run, Zhu and Wang, "Improving sparse vector technique with
    Renyi differential privacy", NeurIPS 2020, Gaussian SVT): draw ``rho ~ N(0, sigma_1^2)``;
    for each query answer ``q_i`` (sensitivity ``Delta``) draw ``nu_i ~ N(0, sigma_2^2)`` and
    answer positive when ``q_i + nu_i >= T + rho``, then stop. ``max_positives = c > 1`` runs
    ``c`` such runs one after the other, each with fresh threshold noise (a new run starts after
    each positive answer); the stream answers at most ``max_queries = k`` queries in all.

    Privacy (Zhu and Wang, Theorem 8): one run over at most k queries is
    ``(alpha, alpha Delta^2 / sigma_1^2 + 2 alpha Delta^2 / sigma_2^2 + ln(k) / (alpha - 1))``-
    RDP for every ``alpha > 1``; the ``c`` runs compose by adding (Mironov 2017, Proposition 1).
    This is the curve of :attr:`event` (:class:`~dpkit.events.GaussianSparseVectorEvent`),
    which the Renyi accountant reads as is and the zCDP accountant as
    ``rho = c (a + 2 sqrt(a ln k))``, ``a = Delta^2 / sigma_1^2 + 2 Delta^2 / sigma_2^2``
    (the event's docstring has the proof). The bound grows with ``ln k`` only: long streams
    are cheap, but ``max_queries`` is enforced (the stream refuses the (k+1)-th query).

    Floating point (the lattice rules of :mod:`dpkit.mechanisms._lattice`, as for the
    Gaussian mechanism). The comparison is exact on an integer lattice of spacing ``s =
    granularity_for(min(sigma_1, sigma_2), Delta, 2**40)``: ``rint(q_i / s) + z_i >= rint(T /
    s) + r`` with ``r, z_i`` drawn from the discrete Gaussians of variance ``(sigma / s)^2`` by
    the exact rational sampler (:func:`~dpkit.noise.samplers.discrete_gaussian_exact`, Canonne,
    Kamath and Steinke 2020, Algorithm 3): no floating-point slack at all. Rounding moves an
    answer by at most ``s / 2``, so neighbouring answers differ by at most ``Delta + s`` (an
    integer number of lattice steps at most ``(Delta + s) / s``); an integer shift of the
    discrete Gaussian has Renyi divergence at most that of the Gaussian (Canonne, Kamath and
    Steinke 2020, Proposition 5). Theorem 8's proof uses the noise only through those shift
    divergences and the monotonicity of the answers in ``rho``, so it holds with ``Delta + s``
    in place of Delta: the event's multipliers are ``sigma / (Delta + s)``, rounded down.

    Build it from the two noise scales, or with :meth:`from_rho` (calibrated so that a zCDP
    budget of rho accepts it). Query answers that are NaN are read as 0 and infinities are
    clamped, so no answer raises after a charge. Each draw costs about 0.2 ms (the exact
    sampler): meant for streams of queries asked one at a time, not for bulk noise.
    """

    sigma_threshold: float
    sigma_query: float
    sensitivity: float
    threshold: float
    max_queries: int
    max_positives: int = 1
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    _granularity: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        s1 = check_positive(self.sigma_threshold, "sigma_threshold")
        s2 = check_positive(self.sigma_query, "sigma_query")
        delta_2 = check_sensitivity(self.sensitivity)
        t = check_finite(self.threshold, "threshold")
        k = check_integer(self.max_queries, name="max_queries", minimum=1, maximum=_MAX_QUERIES)
        c = check_integer(self.max_positives, name="max_positives", minimum=1, maximum=2**20)
        object.__setattr__(self, "sigma_threshold", s1)
        object.__setattr__(self, "sigma_query", s2)
        object.__setattr__(self, "sensitivity", delta_2)
        object.__setattr__(self, "threshold", t)
        object.__setattr__(self, "max_queries", k)
        object.__setattr__(self, "max_positives", c)
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))
        s = granularity_for(min(s1, s2), delta_2, _GAUSSIAN_MAX_T)
        if not max(s1, s2) / s < _GAUSSIAN_MAX_T:
            raise PrivacyParameterError(
                "the two noise scales are too far apart for one lattice: keep their ratio "
                "below 2**20"
            )
        object.__setattr__(self, "_granularity", s)
        self.event  # noqa: B018 - refuses multipliers that underflow to 0

    @classmethod
    def from_rho(
        cls,
        *,
        rho: float,
        sensitivity: float,
        threshold: float,
        max_queries: int,
        max_positives: int = 1,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> GaussianSparseVector:
        """The least-noise Gaussian sparse vector whose zCDP reading is at most ``rho``.

        With ``sigma_2 = 2**(1/4) sigma_1`` (the split that minimises the variance of
        ``nu_i - rho`` for a fixed slope ``a``): solve ``c (a + 2 sqrt(a L)) = T``,
        ``T = rho (1 - 2**-40)``, ``L = ln k``, for ``sqrt(a) = sqrt(L + T / c) - sqrt(L)``;
        then ``sigma_1 = (Delta + s) sqrt((1 + 2 / sqrt(2)) / a)``, rounded up, and both scales
        are raised by relative steps of ``2**-40`` until the event's own
        :attr:`~dpkit.events.GaussianSparseVectorEvent.zcdp_rho` is at most T (what the zCDP
        accountant and budgets charge).
        """
        r = check_positive(rho, "rho")
        delta_2 = check_sensitivity(sensitivity)
        k = check_integer(max_queries, name="max_queries", minimum=1, maximum=_MAX_QUERIES)
        c = check_integer(max_positives, name="max_positives", minimum=1, maximum=2**20)
        target = calibration_target(r)
        big_l = 0.0 if k == 1 else math.log(k)
        per_run = float(target) / c
        root_a = math.sqrt(big_l + per_run) - math.sqrt(big_l)
        if not root_a > 0.0:
            raise PrivacyParameterError(f"rho is too small for sparse vector, got {rho!r}")
        factor = math.sqrt(1.0 + 2.0 / _QUERY_RATIO**2) / root_a  # sigma_1 / (Delta + s)
        s = granularity_for(factor * delta_2, delta_2, _GAUSSIAN_MAX_T)
        sigma_1 = up(Fraction(factor) * (Fraction(delta_2) + Fraction(s)))
        if math.isinf(sigma_1) or math.isinf(sigma_1 * _QUERY_RATIO):
            raise PrivacyParameterError(
                f"rho {rho!r} is too small: the noise would exceed the largest double"
            )
        for _ in range(64):
            mech = cls(
                sigma_threshold=sigma_1,
                sigma_query=math.nextafter(sigma_1 * _QUERY_RATIO, math.inf),
                sensitivity=delta_2,
                threshold=threshold,
                max_queries=k,
                max_positives=c,
                neighbouring=as_neighbouring(neighbouring),
            )
            if mech.event.zcdp_rho <= target:
                return mech
            sigma_1 = math.nextafter(sigma_1 * (1.0 + 2.0**-40), math.inf)
        raise PrivacyParameterError(  # pragma: no cover - off by a rounding at most
            f"could not calibrate the Gaussian sparse vector to rho {rho!r}"
        )

    @property
    def granularity(self) -> float:
        """The lattice spacing of the comparisons (a power of two)."""
        return float(self._granularity)

    @property
    def event(self) -> GaussianSparseVectorEvent:
        """Multipliers ``sigma / (sensitivity + granularity)``, rounded down."""
        d = Fraction(self.sensitivity) + Fraction(self._granularity)
        m1 = down(Fraction(self.sigma_threshold) / d)
        m2 = down(Fraction(self.sigma_query) / d)
        if not (m1 > 0.0 and m2 > 0.0):
            raise PrivacyParameterError(
                "the noise is too small for the sensitivity: the privacy loss would be beyond "
                "the largest double"
            )
        return GaussianSparseVectorEvent(
            threshold_multiplier=m1,
            query_multiplier=m2,
            max_queries=self.max_queries,
            max_positives=self.max_positives,
            neighbouring=self.neighbouring,
        )

    def start(self, *, source: RandomSource | None = None) -> GaussianSparseVectorStream:
        """Open a stream (draws the first threshold noise now). Charge :attr:`event` first."""
        return GaussianSparseVectorStream(self, resolve_source(source))

    def release(self, values: Any, *, source: RandomSource | None = None) -> tuple[bool, ...]:
        """Run one stream over the query answers ``values`` in order; the answers given before
        it halts (after ``max_positives`` positives or ``max_queries`` answers)."""
        return _run(self.start(source=source), values)


class GaussianSparseVectorStream(_OneWayStream):
    """One run of a :class:`GaussianSparseVector`: answers each query once, in order.

    It cannot be rewound, copied or pickled; after ``max_positives`` positive answers, or
    ``max_queries`` answers, every further :meth:`ask` raises
    :class:`~dpkit.errors.BudgetExceededError`.
    """

    __slots__ = ("_mech", "_noisy_threshold", "_source", "_var2")

    def __init__(self, mechanism: GaussianSparseVector, source: RandomSource) -> None:
        self._mech = mechanism
        self._source = source
        super().__init__()
        self._var2 = _exact_square(mechanism.sigma_query, mechanism.granularity)
        self._noisy_threshold = 0
        self._new_threshold()

    def _new_threshold(self) -> None:
        m = self._mech
        s = m.granularity
        r = discrete_gaussian_exact(self._source, _exact_square(m.sigma_threshold, s))
        self._noisy_threshold = _index(m.threshold, s) + r

    @property
    def halted(self) -> bool:
        """Whether the stream has given its last answer."""
        m = self._mech
        return self._positives >= m.max_positives or self._answered >= m.max_queries

    def ask(self, value: Any) -> bool:
        """Answer one query (its true value, of the declared sensitivity): True when the noisy
        value reaches the noisy threshold."""
        if self.halted:
            raise BudgetExceededError(
                "this sparse vector stream has given its last answer (max_positives positive "
                "answers or max_queries answers); start a new stream (and charge its event)"
            )
        m = self._mech
        z = discrete_gaussian_exact(self._source, self._var2)
        self._answered += 1
        if _index(value, m.granularity) + z < self._noisy_threshold:
            return False
        self._positives += 1
        if not self.halted:
            self._new_threshold()  # the next AboveThreshold run
        return True
