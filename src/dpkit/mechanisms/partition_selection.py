"""Private partition selection: which group-by keys may appear in a release.

A ``GROUP BY`` over keys that are not public reveals the keys themselves: a key that only one
person has must not appear with certainty. Both mechanisms here decide, independently per key,
whether to release it from ``n``, the number of distinct privacy units that contribute to it after
contribution bounding (each unit contributes to at most ``max_partitions`` keys, so a unit moves at
most ``max_partitions`` counts, each by one).

:class:`PartitionSelection` (small ``max_partitions``, pure (epsilon, delta) budgets)
    The optimal rule of Desfontaines, Voss, Gipson and Mandayam, "Differentially private partition
    selection" (PoPETs 2022, arXiv:2006.03684). For one partition per unit the release probability
    ``pi(n)`` is the pointwise largest sequence with ``pi(0) = 0`` such that the coin
    ``Bernoulli(pi(n))`` is (epsilon, delta)-DP between ``n - 1`` and ``n``::

        pi(n) = min( e^eps pi(n-1) + delta,  1 - e^-eps (1 - pi(n-1) - delta),  1 )

    (the first term guards "released", the second "dropped"). While the first term is the
    smaller, ``pi(n) = delta (e^{n eps} - 1) / (e^eps - 1)``; then ``1 - pi(n)`` decays
    geometrically until ``pi`` reaches 1 at :attr:`PartitionSelection.threshold`. The paper
    relates this rule to thresholding a count with truncated geometric noise. For
    ``L = max_partitions > 1`` the budget is split across the ``L`` keys a unit can touch: each
    key uses ``(eps / L, delta / L)`` and basic composition gives (eps, delta). This is what
    Google's open-source implementation of the rule does; it is valid, not known to be optimal.
    Under the ``replace`` relation a substitution moves up to ``2 L`` counts, so ``2 L`` is used.

:class:`GaussianPartitionSelection` (large ``max_partitions``, zCDP sessions)
    Release key ``k`` with its noisy count when ``n_k + Z_k > tau`` (strictly), ``Z_k`` discrete
    Gaussian with parameter sigma (Gaussian thresholding; Wilson, Zhang, Lam, Desfontaines,
    Simmons-Marengo, Gipson, "Differentially private SQL with bounded user contribution",
    PoPETs 2020). Privacy, for neighbours ``D`` and ``D' = D + u`` with ``u`` in ``L`` keys:

    * keys present in both tables: their noisy-count vector ``V`` moves by a vector of L2 norm
      ``<= sqrt(L)``, so it is ``rho = L / (2 sigma^2)``-zCDP (Canonne, Kamath and Steinke 2020,
      multivariate discrete Gaussian) and ``(eps, delta_G(eps))``-DP;
    * keys only ``D'`` has hold ``n = 1`` and are each released with probability ``P[Z >= tau]``;
      let ``W`` be the set of those released, ``P[W != {}] <= delta_thr = L P[Z >= tau]``.

    Proof of ``(eps, delta_G + delta_thr)``: for an output set ``O`` let ``A`` be the values of
    ``V`` whose output (with ``W`` empty) lies in ``O``. Then ``P[M(D') in O] <= P[V(D') in A] +
    delta_thr <= e^eps P[M(D) in O] + delta_G + delta_thr``; and with ``x = P[V(D') in A]``,
    ``P[M(D) in O] <= min(1, e^eps x + delta_G) <= e^eps x (1 - delta_thr) + delta_G + delta_thr
    <= e^eps P[M(D') in O] + delta_G + delta_thr`` (``W`` is independent of ``V`` and
    ``P[M(D') in O] >= x P[W = {}]``; the middle step checks the cases ``e^eps x <= 1`` and
    ``> 1``). The same event ``W != {}`` makes the mechanism delta_thr-approximately rho-zCDP
    (approximate zCDP of Bun and Steinke 2016), which is how a zCDP session composes it. Under
    ``replace`` both sides can have private keys and the shared vector moves by ``sqrt(2 L)``:
    ``2 L`` is used in both places.

Exactness (how the floating-point gap is closed)
------------------------------------------------
:class:`PartitionSelection` never compares a float with a float. ``e^{eps / L}`` is replaced by
an exact rational *lower* bound ``a`` (a Taylor partial sum of ``e^{min(eps / L, 40)}``, rounded
down to a multiple of ``2**-64``; the cap can only lower the probabilities, both constraints
growing with ``a``, and a table at the cap still ends within a few steps) and the recursion
is run in exact integer arithmetic on the grid ``2**-63``, rounding *down* at each step::

    P(0) = 0,  P(n) = min( floor(a P(n-1) + delta' T),  T - ceil((T - P(n-1) - delta' T) / a),  T )

with ``T = 2**63`` and ``p(n) = P(n) / T``. By construction ``p(n) <= a p(n-1) + delta'`` and
``1 - p(n-1) - delta' <= a (1 - p(n))``; since ``a <= e^{eps'}`` both DP inequalities hold exactly
for the probabilities actually used, and ``p(n) <= pi(n)`` (the loss against the ideal rule is a
few units of ``2**-63``). A key is released when a uniform 63-bit integer ``U`` satisfies
``U < P(n)``, which happens with probability exactly ``p(n)``: nothing is charged.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.rounding import down, sqrt_up, up
from dpkit._numeric.search import SearchError, search, search_int
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_positive,
    check_probability,
)
from dpkit._numeric.values import is_missing_type, read_column
from dpkit._numeric.zcdp import slack_delta
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    ApproxDpEvent,
    DiscreteGaussianEvent,
    DpEvent,
    Neighbouring,
    SelfComposedEvent,
    as_neighbouring,
)
from dpkit.mechanisms._calibration import calibrated_delta, calibrated_epsilon
from dpkit.mechanisms._lattice import DISCRETE_GAUSSIAN_SLACK, DISCRETE_LAPLACE_SLACK
from dpkit.mechanisms.discrete import DiscreteGaussian
from dpkit.noise import RandomSource, resolve_source

__all__ = [
    "CountThreshold",
    "GaussianPartitionSelection",
    "NoisyCountSelection",
    "PartitionSelection",
]

_GRID_BITS = 63
_T = 1 << _GRID_BITS
_A_BITS = 64
_MAX_TABLE = 1 << 22
"""Largest threshold tabulated by :class:`PartitionSelection` (about 4 million entries)."""
_EXACT_SIGMA = 2.0**13  # DiscreteGaussian switches to the exact sampler (no pmf slack) here
_LOG_MARGIN = 1e-9


def _unit_moves(max_partitions: Any, neighbouring: Any) -> tuple[int, Neighbouring]:
    """Validated ``(k, relation)``: the number of counts one neighbouring step can move by one."""
    L = check_integer(max_partitions, name="max_partitions", minimum=1)
    rel = as_neighbouring(neighbouring)
    return (2 * L if rel is Neighbouring.REPLACE else L), rel


def _exp_lower(x: Fraction) -> Fraction:
    """A rational lower bound of ``e^x`` for ``x >= 0``: a Taylor partial sum rounded down.

    All Taylor terms are non-negative, so every partial sum is below ``e^x``; the sum is taken
    until the next term is below ``2**-80`` of it (relative loss < 2**-79, then floor to 2**-64).
    """
    total = Fraction(1)
    term = Fraction(1)
    k = 0
    while True:
        k += 1
        term = term * x / k
        total += term
        if term * (1 << 80) < total:
            break
    scaled = total * (1 << _A_BITS)
    return Fraction(scaled.numerator // scaled.denominator, 1 << _A_BITS)


def _integer_counts(values: Any) -> npt.NDArray[np.int64]:
    """Counts as int64 clipped to ``[0, 2**62]``; only integer inputs are accepted (by type).

    A typed column (pandas ``Int64``, polars, pyarrow, ...) is read by its declared dtype
    (:func:`dpkit._numeric.values.read_column`) and ``None`` / ``pandas.NA`` elements of a
    sequence are missing: a missing count is 0 units (never released), never an error.
    """
    col = read_column(values)
    if col is not None:
        if col.kind != "int" or col.data is None:
            raise PrivacyParameterError(
                f"unit counts must be integers, got a column of declared dtype {col.declared}"
            )
        values = col.data  # nulls are 0
    x = np.asarray(values) if not isinstance(values, (list, tuple)) else _object_array(values)
    if x.dtype.kind == "u":
        capped: npt.NDArray[np.int64] = np.minimum(x, np.uint64(1 << 62)).astype(np.int64)
        return capped
    if x.dtype.kind == "i":
        return np.clip(x.astype(np.int64, copy=False), 0, 1 << 62)
    if x.dtype.kind == "O":
        flat = np.array([0 if is_missing_type(type(v)) else v for v in x.reshape(-1)], dtype=object)
        for v in flat:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise PrivacyParameterError(f"unit counts must be integers, got {type(v).__name__}")
        out = np.fromiter(
            (min(max(int(v), 0), 1 << 62) for v in flat), dtype=np.int64, count=flat.size
        )
        shaped: npt.NDArray[np.int64] = out.reshape(x.shape)
        return shaped
    raise PrivacyParameterError(
        f"unit counts must be an integer array, got dtype {x.dtype} (counts of distinct units "
        "are integers; round or cast explicitly)"
    )


def _object_array(values: list[Any] | tuple[Any, ...]) -> npt.NDArray[Any]:
    """A list read element by element (numpy's dtype guessing would make ``[1, None]`` a
    float array and ``[1, 2]`` an int array: a decision by value)."""
    try:
        return np.array(values, dtype=object)
    except (ValueError, TypeError) as exc:
        raise PrivacyParameterError("unit counts must be a flat sequence of integers") from exc


@dataclass(frozen=True, kw_only=True)
class PartitionSelection:
    """The optimal (truncated geometric) partition selection of Desfontaines et al. (2022).

    Build with :meth:`from_epsilon_delta`. A key with ``n`` distinct units is released with
    probability :meth:`probability` ``(n)``, exactly (module docstring: the recursion is run on
    the ``2**-63`` grid with an exact lower bound of ``e^{eps/k}``, rounded down, so the DP
    inequalities hold exactly for the probabilities used; nothing is charged). ``n <= 0`` is never
    released, ``n >= threshold`` always.
    """

    epsilon: float
    delta: float
    max_partitions: int
    neighbouring: Neighbouring
    _table: npt.NDArray[np.uint64] = field(repr=False, compare=False)

    def __init__(
        self,
        *,
        epsilon: float,
        delta: float,
        max_partitions: int = 1,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> None:
        eps = check_epsilon(epsilon)
        dl = check_delta(delta, allow_zero=False)
        k, rel = _unit_moves(max_partitions, neighbouring)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", dl)
        object.__setattr__(self, "max_partitions", int(max_partitions))
        object.__setattr__(self, "neighbouring", rel)
        # run at, and charged, the calibrated pair (mechanisms._calibration: k selections
        # built with fl(e / k), fl(d / k) fit a budget of (e, d))
        object.__setattr__(
            self,
            "_table",
            _truncated_geometric_table(calibrated_epsilon(eps), calibrated_delta(dl), k),
        )

    @classmethod
    def from_epsilon_delta(
        cls,
        *,
        epsilon: float,
        delta: float,
        max_partitions: int = 1,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> PartitionSelection:
        """(epsilon, delta)-DP selection when each unit contributes to ``max_partitions`` keys.

        Each key's coin uses ``(epsilon / k, delta / k)`` with ``k = max_partitions`` (``2 *
        max_partitions`` under ``replace``); delta must be positive (with delta = 0 no key can
        ever be released). Refused when the threshold would exceed 2**22 units (epsilon / k
        tiny): use :class:`GaussianPartitionSelection` there.
        """
        return cls(
            epsilon=epsilon, delta=delta, max_partitions=max_partitions, neighbouring=neighbouring
        )

    @property
    def threshold(self) -> int:
        """The smallest ``n`` with release probability 1."""
        return int(self._table.size - 1)

    @property
    def event(self) -> ApproxDpEvent:
        """``(epsilon', delta')``: the calibrated pair the coins were built for
        (:func:`~dpkit.mechanisms._calibration.calibrated_epsilon`, ``calibrated_delta``)."""
        return ApproxDpEvent(
            epsilon=calibrated_epsilon(self.epsilon), delta=calibrated_delta(self.delta)
        )

    def probability_fraction(self, n: int) -> Fraction:
        """The exact release probability of a key with ``n`` units, as a rational."""
        m = check_integer(n, name="n")
        m = min(max(m, 0), self.threshold)
        return Fraction(int(self._table[m]), _T)

    def probability(self, n: Any) -> npt.NDArray[np.float64]:
        """Release probabilities ``P(n) / 2**63`` (vectorised; exact up to the final rounding to
        a double, which is within one ulp)."""
        idx = np.minimum(_integer_counts(n), self.threshold)
        return self._table[idx].astype(np.float64) * 2.0**-_GRID_BITS

    def release(
        self, unit_counts: Any, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.bool_]:
        """One independent coin per key: ``True`` where the key may be released.

        ``unit_counts`` are the per-key numbers of distinct privacy units (integers; negative
        values act as 0). Each key draws ``U`` uniform on ``{0, ..., 2**63 - 1}`` and is released
        iff ``U < P(n)``: probability exactly ``P(n) / 2**63``.
        """
        src = resolve_source(source)
        idx = np.minimum(_integer_counts(unit_counts), self.threshold)
        u = src.words(idx.shape) >> np.uint64(1)
        out: npt.NDArray[np.bool_] = u < self._table[idx]
        return out


#: Largest exponent of the truncated geometric table's growth factor (see its use).
_EXP_CAP = 40


def _truncated_geometric_table(eps: float, delta: float, k: int) -> npt.NDArray[np.uint64]:
    """``P(0..threshold)`` on the 2**-63 grid (module docstring), with ``P(threshold) = 2**63``."""
    # Both phases last about ln(1/delta') / eps' steps: refuse hopeless sizes before the loop.
    if 2.0 * (math.log(k / delta) + 2.0) * k / eps > _MAX_TABLE:
        raise PrivacyParameterError(
            f"partition selection with epsilon/{k} = {eps / k!r}, delta/{k} = {delta / k!r} "
            f"needs a threshold above {_MAX_TABLE} units; use GaussianPartitionSelection"
        )
    # a lower bound of e^(eps / k), capped at e^_EXP_CAP: a smaller growth factor only lowers
    # every P(n), both constraints being increasing in it, a table at the cap still ends within
    # a few steps, and the Taylor sum of e^5000 in Fractions took minutes
    a = _exp_lower(min(Fraction(eps) / k, Fraction(_EXP_CAP)))
    an, ad = a.numerator, a.denominator
    dp = Fraction(delta) / k
    dn, dd = dp.numerator, dp.denominator
    if dn * _T < dd:  # P(1) = floor(delta' T) = 0, and then every P(n) is 0: refuse at once
        raise PrivacyParameterError(
            f"partition selection with delta/{k} = {delta / k!r} below 2**-63 never releases a "
            "key on the 2**-63 grid; use GaussianPartitionSelection"
        )
    # floor(a P + d T) = floor((an dd P + dn T ad) / (ad dd))
    # T - ceil((T - P - d T) / a) = T - ceil(((T - P) dd - dn T) ad / (an dd))
    num1_dt = dn * _T * ad
    den1 = ad * dd
    den2 = an * dd
    values = [0]
    p = 0
    while p < _T:
        if len(values) > _MAX_TABLE:
            raise PrivacyParameterError(
                f"partition selection with epsilon/{k} = {eps / k!r}, delta/{k} = {delta / k!r} "
                f"needs a threshold above {_MAX_TABLE} units; use GaussianPartitionSelection"
            )
        p1 = (an * dd * p + num1_dt) // den1
        num2 = ((_T - p) * dd - dn * _T) * ad
        p2 = _T - (-((-num2) // den2))
        p = min(p1, p2, _T)
        values.append(p)
    return np.array(values, dtype=np.uint64)


# ---------------------------------------------------------------------------------------------
# Gaussian thresholding
# ---------------------------------------------------------------------------------------------
_SUM_SIGMA = 2.0**12
"""Up to this sigma the tail sums are taken term by term (arrays of ``40 sigma`` doubles, at
most 1.3 MB); above it a closed-form bound is used, so memory and time do not grow with sigma."""
_MAX_SIGMA = 2.0**52
"""Largest sigma accepted: beyond it ``tau`` (about 6 sigma) no longer fits the int64 outputs of
the sampler and the counts (clipped at 2**62) are negligible against the noise."""


def _discrete_gaussian_log_tail_up(sigma: float, t: int) -> float:
    """Upper bound on ``log P[Z >= t]``, Z discrete Gaussian(sigma), for an integer ``t >= 1``.

    ``P[Z >= t] = S_t / N`` with ``S_t = sum_{j>=0} exp(-(t+j)^2 / (2 sigma^2))`` and the
    normaliser ``N = sum_k exp(-k^2/(2 sigma^2)) >= max(1, sqrt(2 pi) sigma)`` (Poisson summation:
    ``N = sqrt(2 pi) sigma (1 + 2 sum_m exp(-2 pi^2 sigma^2 m^2))``).

    * ``sigma <= 2**12``: ``S_t`` is summed in the form ``exp(-t^2/2s^2) sum_j
      exp(-(2tj + j^2)/2s^2)`` over ``j < J = ceil(40 sigma) + 2``; the rest is below
      ``exp(-800)`` of the first term.
    * larger sigma (no array of ``40 sigma`` terms is built): the summand is decreasing on
      ``[t, inf)``, so ``S_t <= f(t) + int_t^inf f = exp(-t^2/2s^2) (1 + sqrt(2 pi) sigma
      Phi(-t/sigma) exp(t^2/2s^2))`` (integral test), ``log Phi`` from ``scipy.special.log_ndtr``.

    Floating-point errors (a few ulps per term, ``J`` terms; a few ulps of ``log_ndtr``) are
    covered by a relative ``2**-30`` margin and ``_LOG_MARGIN`` on the logarithm (rounded up).
    """
    s2 = 2.0 * sigma * sigma
    if sigma <= _SUM_SIGMA:
        J = math.ceil(40.0 * sigma) + 2
        j = np.arange(J, dtype=np.float64)
        terms = np.exp(-(2.0 * t * j + j * j) / s2)
        inner = float(np.sum(terms)) * (1.0 + 2.0**-30) + math.exp(-800.0)
    else:
        from scipy.special import log_ndtr

        x = t / sigma
        log_rest = (
            math.log(sigma) + 0.5 * math.log(2.0 * math.pi) + float(log_ndtr(-x)) + 0.5 * x * x
        )
        inner = (1.0 + math.exp(log_rest)) * (1.0 + 2.0**-30)
    log_norm = max(0.0, math.log(math.sqrt(2.0 * math.pi) * sigma))
    val = -((float(t) / sigma) ** 2) / 2.0 + math.log(inner) - log_norm
    return val + _LOG_MARGIN * (1.0 + abs(val))


def _discrete_gaussian_sf(sigma: float, s: int) -> float:
    """``P[Z >= s]`` for the discrete Gaussian (floating point, for reporting and tests).

    Summed term by term for ``sigma <= 2**12``; above, the normal tail with continuity
    correction ``Phi(-(s - 1/2) / sigma)`` (Euler-Maclaurin: the error is ``O(sigma^-2)``
    relative, far below what reporting needs; privacy never uses this function).
    """
    if sigma > _SUM_SIGMA:
        from scipy.special import ndtr

        return float(ndtr(-(s - 0.5) / sigma))
    J = math.ceil(40.0 * sigma) + 2
    k = np.arange(-J, J + 1, dtype=np.float64)
    w = np.exp(-(k * k) / (2.0 * sigma * sigma))
    total = float(np.sum(w))
    if s <= -J:
        return 1.0
    if s > J:
        return 0.0
    if s >= 1:
        return float(np.sum(w[k >= s])) / total
    return 1.0 - float(np.sum(w[k <= s - 1])) / total


@dataclass(frozen=True, kw_only=True)
class GaussianPartitionSelection:
    """Release key k iff ``n_k + Z_k > tau`` (strictly), ``Z_k`` discrete Gaussian(sigma).

    See the module docstring for the privacy argument (Wilson et al. 2020; CKS 2020). Per
    neighbouring step at most ``k = max_partitions`` counts move by one (``2 max_partitions``
    under ``replace``):

    * :attr:`rho` ``= k / (2 sigma^2)`` (rounded up): zCDP of the noisy counts of shared keys;
    * :attr:`threshold_delta` ``= k P[Z >= tau] e^{a}`` (rounded up): probability that a key
      only the changed unit has is released, with ``a`` the sampler's pmf slack;
    * :attr:`pmf_slack` ``k a``: the fast discrete Gaussian sampler's pmf is within
      ``exp(+-a)`` of exact per key (a = 2**-23 for sigma < 2**13, else 0).

    The noisy counts of released keys are part of the same release (no extra cost):
    :meth:`release_with_counts`.
    """

    sigma: float
    tau: int
    max_partitions: int = 1
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    epsilon: float | None = None
    delta: float | None = None

    def __post_init__(self) -> None:
        check_positive(self.sigma, "sigma")
        if not float(self.sigma) <= _MAX_SIGMA:
            raise PrivacyParameterError(
                f"sigma={self.sigma!r} exceeds 2**52 (rho or epsilon too small for counts: the "
                "threshold would not fit in int64); use a larger budget"
            )
        check_integer(self.tau, name="tau", minimum=1)
        _unit_moves(self.max_partitions, self.neighbouring)
        object.__setattr__(self, "sigma", float(self.sigma))
        object.__setattr__(self, "tau", int(self.tau))
        object.__setattr__(self, "max_partitions", int(self.max_partitions))
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))
        if (self.epsilon is None) != (self.delta is None):
            raise PrivacyParameterError("give both epsilon and delta, or neither")
        if self.epsilon is not None and self.delta is not None:
            eps = check_epsilon(self.epsilon)
            dl = check_delta(self.delta, allow_zero=False)
            if not self.delta_at(eps) <= dl:
                raise PrivacyParameterError(
                    f"sigma={self.sigma!r}, tau={self.tau!r} do not give ({eps!r}, {dl!r})-DP"
                )
            object.__setattr__(self, "epsilon", eps)
            object.__setattr__(self, "delta", dl)

    # -- calibration ------------------------------------------------------------------------
    @property
    def _moves(self) -> int:
        return _unit_moves(self.max_partitions, self.neighbouring)[0]

    @classmethod
    def from_rho(
        cls,
        *,
        rho: float,
        threshold_delta: float,
        max_partitions: int = 1,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> GaussianPartitionSelection:
        """For a zCDP session: noise with ``k / (2 sigma^2) <= rho`` and the smallest integer
        ``tau`` with ``threshold_delta`` (as defined on the class) ``<=`` the given value.

        sigma is ``sqrt(k / (2 rho))`` rounded up. The pmf slack of the fast sampler is reported
        in :attr:`pmf_slack` for the session's accountant (it is not folded into rho).
        """
        r = check_positive(rho, "rho")
        dt = check_delta(threshold_delta, name="threshold_delta", allow_zero=False)
        k, rel = _unit_moves(max_partitions, neighbouring)
        if not k / (2.0 * r) <= _MAX_SIGMA**2:
            raise PrivacyParameterError(
                f"rho={r!r} is too small: sigma = sqrt({k} / (2 rho)) would exceed 2**52"
            )
        sigma = sqrt_up(Fraction(k) / (2 * Fraction(r)))  # smallest with k / (2 sigma^2) <= rho
        tau = _calibrate_tau(sigma, k, dt)
        return cls(sigma=sigma, tau=tau, max_partitions=int(max_partitions), neighbouring=rel)

    @classmethod
    def from_epsilon_delta(
        cls,
        *,
        epsilon: float,
        delta: float,
        max_partitions: int = 1,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
        threshold_share: float = 0.5,
    ) -> GaussianPartitionSelection:
        """(epsilon, delta)-DP: ``threshold_share`` of delta for the threshold, the rest for the
        noise (through the zCDP conversion of :mod:`dpkit.accounting.zcdp`, with the pmf slack).
        Calibrated to, and stating, ``epsilon (1 - 2**-40)`` and ``delta (1 - 2**-40)`` rounded
        down, so that ``k`` selections at ``fl(e / k), fl(d / k)`` fit a budget of ``(e, d)``.

        The shares are rounded down (the calibrated parts never exceed delta). sigma is the
        smallest double found by bisection with ``delta_G(eps) <=`` its share; tau the smallest
        integer with ``threshold_delta <=`` its share.
        """
        # the calibrated pair (mechanisms._calibration), as for every epsilon constructor
        eps = calibrated_epsilon(check_epsilon(epsilon))
        dl = calibrated_delta(check_delta(delta, allow_zero=False))
        share = check_probability(
            threshold_share, name="threshold_share", open_low=True, open_high=True
        )
        k, rel = _unit_moves(max_partitions, neighbouring)
        d_thr = down(Fraction(dl) * Fraction(share))
        d_gauss = down(Fraction(dl) - Fraction(d_thr))
        if not (d_thr > 0.0 and d_gauss > 0.0):
            raise PrivacyParameterError(f"delta={dl!r} is too small to split")
        try:  # bracket doubled from [1e-3, 1] up to 2**40, bisected to adjacent doubles
            sigma = search(
                lambda s: _gauss_delta(s, k, eps) <= d_gauss,
                1e-3,
                1.0,
                holds="above",
                expand="up",
                limit=2.0**40,
                what="Gaussian partition selection sigma",
            )
        except SearchError:
            raise PrivacyParameterError(f"no sigma reaches ({eps!r}, {d_gauss!r})") from None
        tau = _calibrate_tau(sigma, k, d_thr)
        return cls(
            sigma=sigma,
            tau=tau,
            max_partitions=int(max_partitions),
            neighbouring=rel,
            epsilon=eps,
            delta=dl,
        )

    # -- privacy ----------------------------------------------------------------------------
    @property
    def pmf_slack(self) -> float:
        """Total pmf slack ``k a`` of one release: the fast sampler's pmf is within ``exp(+-a)``
        of exact per coordinate (a = 2**-23 for sigma < 2**13, else 0) and at most ``k``
        coordinates differ in law between neighbours."""
        return _total_slack(self.sigma, self._moves)

    @property
    def rho(self) -> float:
        """zCDP of the noisy counts of shared keys: ``k / (2 sigma^2)``, rounded up."""
        return up(Fraction(self._moves) / (2 * Fraction(self.sigma) ** 2))

    @property
    def noise_event(self) -> DpEvent:
        """The noisy counts as an exact event: ``k`` composed discrete Gaussians of sensitivity 1
        (the ``k`` counts one neighbouring step moves, each by at most one; ``replace`` is already
        in ``k``). Any accountant can read it; add :attr:`threshold_delta` to its delta."""
        ev = DiscreteGaussianEvent(
            sigma=self.sigma,
            sensitivity=1,
            neighbouring=Neighbouring.ADD_REMOVE,
            pmf_slack=0.0 if not self.sigma < _EXACT_SIGMA else DISCRETE_GAUSSIAN_SLACK,
        )
        k = self._moves
        return ev if k == 1 else SelfComposedEvent(event=ev, count=k)

    @property
    def threshold_delta(self) -> float:
        """``k P[Z >= tau]`` times ``e^{pmf_slack}``, rounded up."""
        return _threshold_delta(self.sigma, self._moves, self.tau)

    def delta_at(self, epsilon: float) -> float:
        """Total delta at ``epsilon``: ``delta_G(epsilon) + threshold_delta``, rounded up."""
        eps = check_epsilon(epsilon)
        return min(
            1.0,
            up(
                Fraction(_gauss_delta(self.sigma, self._moves, eps))
                + Fraction(self.threshold_delta)
            ),
        )

    @property
    def event(self) -> ApproxDpEvent:
        """``ApproxDpEvent(epsilon, delta)``; only for objects built from (epsilon, delta).

        A zCDP (or PLD) session uses :attr:`noise_event` (equivalently :attr:`rho` and
        :attr:`pmf_slack`) plus the additive :attr:`threshold_delta` instead.
        """
        if self.epsilon is None or self.delta is None:
            raise PrivacyParameterError(
                "this selection was not calibrated to (epsilon, delta): use rho, "
                "threshold_delta and pmf_slack, or delta_at(epsilon)"
            )
        return ApproxDpEvent(epsilon=self.epsilon, delta=self.delta)

    # -- release ----------------------------------------------------------------------------
    def probability(self, n: Any) -> npt.NDArray[np.float64]:
        """``P[n + Z > tau] = P[Z >= tau - n + 1]`` (floating point; for reporting and tests)."""
        counts = _integer_counts(n)
        flat = counts.reshape(-1)
        uniq, inv = np.unique(flat, return_inverse=True)
        vals = np.array(
            [_discrete_gaussian_sf(self.sigma, self.tau - int(c) + 1) for c in uniq],
            dtype=np.float64,
        )
        return vals[inv].reshape(counts.shape)

    def release_with_counts(
        self, unit_counts: Any, *, source: RandomSource | None = None
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
        """``(mask, noisy)``: ``noisy = n + Z`` and ``mask = noisy > tau``.

        Only ``noisy[mask]`` may be published; the rest must be discarded.
        """
        counts = _integer_counts(unit_counts)
        mech = DiscreteGaussian.from_sigma(sigma=self.sigma, sensitivity=1)
        noisy = mech.release(counts, source=source)
        return noisy > self.tau, noisy

    def release(
        self, unit_counts: Any, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.bool_]:
        """``True`` where ``n + Z > tau``."""
        return self.release_with_counts(unit_counts, source=source)[0]


def _total_slack(sigma: float, k: int) -> float:
    return 0.0 if not sigma < _EXACT_SIGMA else up(Fraction(k) * Fraction(DISCRETE_GAUSSIAN_SLACK))


def _threshold_delta(sigma: float, k: int, tau: int) -> float:
    slack = 0.0 if not sigma < _EXACT_SIGMA else DISCRETE_GAUSSIAN_SLACK
    log_val = math.log(k) + _discrete_gaussian_log_tail_up(sigma, tau) + slack
    log_val += _LOG_MARGIN * (1.0 + abs(log_val))
    if log_val >= 0.0:
        return 1.0
    return max(up(math.exp(log_val)), math.nextafter(0.0, 1.0))


def _gauss_delta(sigma: float, k: int, eps: float) -> float:
    """delta_G(eps) of the noisy counts: ``k`` composed discrete Gaussians of sensitivity 1,
    ``rho = k / (2 sigma^2)`` with total pmf slack ``A = k a``, converted by
    :func:`dpkit._numeric.zcdp.slack_delta` (``e^A delta_rho(eps - 2A)``, rounded up)."""
    slack = Fraction(0) if not sigma < _EXACT_SIGMA else k * Fraction(DISCRETE_GAUSSIAN_SLACK)
    rho = Fraction(k) / (2 * Fraction(sigma) ** 2)
    return slack_delta(rho, slack, eps)


def _calibrate_tau(sigma: float, k: int, target: float) -> int:
    """Smallest integer tau >= 1 with ``_threshold_delta(sigma, k, tau) <= target``.

    :func:`dpkit._numeric.search.search_int` from ``[0, h]`` (0 stands for "fails"; h from the
    Gaussian tail bound, doubled until it holds): the returned tau was evaluated to hold and
    ``tau - 1`` fails (or is 0).
    """
    # log(2k) - log(target): 2 k / target overflows for a subnormal target
    hi = max(2, math.ceil(sigma * math.sqrt(2.0 * (math.log(2.0 * k) - math.log(target)))) + 2)
    return search_int(
        lambda t: t >= 1 and _threshold_delta(sigma, k, t) <= target,
        0,
        hi,
        holds="above",
        expand="up",
        what="partition selection threshold",
    )


# ---------------------------------------------------------------------------------------------
# Thresholding the released noisy count


_DL_FAST_LIMIT = 2.0**13  # DiscreteLaplace switches to the exact sampler (no pmf slack) here
_TAIL_DPS = 40


def _dl_scale(e: Fraction, sens: int, k: int) -> float:
    """Smallest safe discrete Laplace scale for ``k`` coordinates each moved by ``sens`` at
    ``e``: ``k sens / e`` rounded up, or ``k sens / (e - 2 k a)`` if that is on the fast sampler
    (pmf within ``exp(+-a)`` per draw, a = 2**-24, so ``2 a`` per coordinate)."""
    t = up(Fraction(k * sens) / e)
    if t < _DL_FAST_LIMIT:
        room = e - 2 * k * Fraction(DISCRETE_LAPLACE_SLACK)
        if not room > 0:
            raise PrivacyParameterError(f"epsilon share {float(e)!r} is too small for the noise")
        t = up(Fraction(k * sens) / room)
    if math.isinf(t) or t > _MAX_SIGMA:
        raise PrivacyParameterError(
            f"epsilon share {float(e)!r} is too small: the noise scale would exceed 2**52"
        )
    return t


def _dl_slack(t: float) -> float:
    return 0.0 if not t < _DL_FAST_LIMIT else DISCRETE_LAPLACE_SLACK


def _dl_tail_mp(q: Any, j: int) -> Any:
    """``P[Z >= j]`` for the discrete Laplace with ``q = e^(-1/t)`` (an mpmath number):
    ``q^j / (1 + q)`` for ``j >= 1``, ``1 - q^(1 - j) / (1 + q)`` otherwise."""
    if j >= 1:
        return q**j / (1 + q)
    return 1 - q ** (1 - j) / (1 + q)


def _joint_tail_up(units_scale: float | None, count_scale: float, R: int, w: int, m: int) -> float:
    """Upper bound on ``P[R Z1 + w Z2 >= m]`` (``Z1`` absent when ``units_scale`` is None), Z1,
    Z2 independent discrete Laplace of the given scales, rounded up to a double.

    Summed at 40 digits: ``sum_z1 P[Z1 = z1] P[Z2 >= ceil((m - R z1) / w)]`` over ``|z1| <= M``
    with ``P[|Z1| > M] = 2 q1^(M+1) / (1 + q1)`` below ``1e-30`` times the sum (the tail terms
    are bounded by 1 each); the result is inflated by a relative ``1e-25`` before rounding up.
    """
    import mpmath

    with mpmath.workdps(_TAIL_DPS):
        q2 = mpmath.exp(-1 / mpmath.mpf(count_scale))
        if units_scale is None:
            total = _dl_tail_mp(q2, -((-m) // w))
        else:
            q1 = mpmath.exp(-1 / mpmath.mpf(units_scale))
            norm = (1 - q1) / (1 + q1)
            # the sum is at least P[Z1 = 0] P[Z2 >= ceil(m / w)]: a floor for the tail target
            floor_sum = norm * _dl_tail_mp(q2, -((-m) // w))
            target = floor_sum * mpmath.mpf(10) ** -30
            M = int(mpmath.ceil(units_scale * (mpmath.log(2 / target) + 1))) + 1
            M = min(M, 1 << 20)
            total = mpmath.mpf(0)
            for z1 in range(-M, M + 1):
                j = -((R * z1 - m) // w)  # ceil((m - R z1) / w)
                total += norm * q1 ** abs(z1) * _dl_tail_mp(q2, j)
            total += 2 * q1 ** (M + 1) / (1 + q1)
        val = total * (1 + mpmath.mpf(10) ** -25)
        return min(1.0, up(Fraction(mpmath.nstr(val, 35, min_fixed=-1, max_fixed=-1))))


@dataclass(frozen=True, kw_only=True)
class NoisyCountSelection:
    """Partition selection by thresholding the released noisy count itself (one noise for both).

    A key with ``C`` rows (each privacy unit contributes at most ``max_rows`` of them, to at
    most ``max_partitions`` keys) and ``U`` distinct units gets ``C' = C + Z2``, ``Z2`` discrete
    Laplace of scale :attr:`count_scale`; with ``units_share > 0`` also ``U' = U + Z1`` (scale
    :attr:`units_scale`). The key is released, with ``C'`` as its count, iff the integer
    statistic ``S = R U' + w C'`` (``R = max_rows``, ``w = weight``; ``S = C'`` without units)
    exceeds :attr:`tau`. ``U'`` is never published.

    Privacy, with ``k = max_partitions`` (``2 max_partitions`` under ``replace``). Let ``D'``
    be ``D`` plus one unit.

    * Keys present in both tables: their ``(U', C')`` vector moves by at most ``k`` in
      ``U`` (each by 1) and ``k R`` in ``C`` (L1), so it is ``eps_0``-DP with
      ``eps_0 = k / t1 + k R / t2`` plus the fast samplers' pmf slack ``2 a`` per draw (Ghosh,
      Roughgarden and Sundararajan 2012 for the discrete Laplace); the scales are chosen so
      that this is at most the stated epsilon.
    * Keys only ``D'`` has hold ``U = 1`` and ``1 <= C <= R``; ``S`` grows with ``C``, so each
      is released with probability at most ``P[R (1 + Z1) + w (R + Z2) > tau] e^{2a}``, and
      ``delta_thr`` (:attr:`threshold_delta`) is ``k`` times that (union bound).

    Then the mechanism is ``(eps_0, delta_thr)``-DP by the argument of the module docstring for
    Gaussian thresholding with ``delta_G = 0`` (the shared part is pure): for any output set
    ``O``, ``P[M(D') in O] <= e^eps_0 P[M(D) in O] + delta_thr`` and ``P[M(D) in O] <= e^eps_0
    P[M(D') in O] + delta_thr``. This is the "Laplace thresholding" of Desfontaines, Voss,
    Gipson and Mandayam (PoPETs 2022, Section 5) and of Wilson et al. (PoPETs 2020), applied
    to the count that is released anyway, so selection costs no separate share of epsilon; with
    ``k = 1`` the delta above is exact for the threshold (the hockey-stick divergence at
    ``eps_0`` of a new key is its release probability). The units count (``units_share``) adds
    a second, lower-sensitivity look at the same key: it lowers the group size released half the
    time when units contribute fewer than ``R`` rows on average, at the price of a noisier count.

    Rounding: scales are rounded up, ``delta_thr`` is summed at 40 digits with a certified tail
    and rounded up, ``tau`` is the smallest integer whose ``delta_thr`` fits the delta stated.
    """

    epsilon: float
    delta: float
    tau: int
    count_scale: float
    units_scale: float | None = None
    max_rows: int = 1
    weight: int = 1
    max_partitions: int = 1
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        dl = check_delta(self.delta, allow_zero=False)
        check_integer(self.tau, name="tau")
        check_positive(self.count_scale, "count_scale")
        if self.units_scale is not None:
            check_positive(self.units_scale, "units_scale")
        R = check_integer(self.max_rows, name="max_rows", minimum=1)
        check_integer(self.weight, name="weight", minimum=1)
        k, rel = _unit_moves(self.max_partitions, self.neighbouring)
        object.__setattr__(self, "neighbouring", rel)
        cost = Fraction(k * R) / Fraction(self.count_scale) + 2 * k * Fraction(
            _dl_slack(self.count_scale)
        )
        if self.units_scale is not None:
            cost += Fraction(k) / Fraction(self.units_scale) + 2 * k * Fraction(
                _dl_slack(self.units_scale)
            )
        if not cost <= Fraction(eps):
            raise PrivacyParameterError(
                f"the noise scales give epsilon {float(cost):.6g} > epsilon={eps!r}; use "
                "NoisyCountSelection.from_epsilon_delta"
            )
        if not self.threshold_delta <= dl:
            raise PrivacyParameterError(
                f"tau={self.tau!r} gives delta {self.threshold_delta:.3g} > delta={dl!r}; use "
                "NoisyCountSelection.from_epsilon_delta"
            )

    @classmethod
    def from_epsilon_delta(
        cls,
        *,
        epsilon: float,
        delta: float,
        max_rows: int = 1,
        max_partitions: int = 1,
        units_share: float = 0.0,
        weight: int = 1,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> NoisyCountSelection:
        """Scales for the calibrated epsilon (``units_share`` of it on the units count, rounded
        down; the rest on the count) and the smallest ``tau`` whose threshold delta is at most
        the calibrated delta (:mod:`dpkit.mechanisms._calibration`)."""
        eps = calibrated_epsilon(check_epsilon(epsilon))
        dl = calibrated_delta(check_delta(delta, allow_zero=False))
        R = check_integer(max_rows, name="max_rows", minimum=1)
        w = check_integer(weight, name="weight", minimum=1)
        share = check_probability(units_share, name="units_share", open_high=True)
        k, rel = _unit_moves(max_partitions, neighbouring)
        total = Fraction(eps)
        e_units = Fraction(down(total * Fraction(share)))
        units_scale = _dl_scale(e_units, 1, k) if e_units > 0 else None
        count_scale = _dl_scale(total - e_units, R, k)
        if units_scale is None:
            w = 1
        base = R * (1 if units_scale is not None else 0) + w * R  # S of a new key, noise 0

        def fits(tau: int) -> bool:
            return _threshold_delta_dl(units_scale, count_scale, R, w, k, tau - base + 1) <= dl

        hi = (
            base
            + 2
            + math.ceil(
                (w * count_scale + R * (units_scale or 0.0)) * (math.log(2.0 * k / dl) + 2.0)
            )
        )
        tau = search_int(fits, base - 1, hi, holds="above", expand="up", what="threshold")
        return cls(
            epsilon=eps,
            delta=dl,
            tau=tau,
            count_scale=count_scale,
            units_scale=units_scale,
            max_rows=R,
            weight=w,
            max_partitions=int(max_partitions),
            neighbouring=rel,
        )

    @property
    def _moves(self) -> int:
        return _unit_moves(self.max_partitions, self.neighbouring)[0]

    @property
    def _base(self) -> int:
        return self.max_rows * (1 if self.units_scale is not None else 0) + (
            self.weight * self.max_rows
        )

    @property
    def threshold_delta(self) -> float:
        """``k P[S > tau]`` for a key of one unit with ``max_rows`` rows, times ``e^{2a}``
        (the fast samplers' pmf slack), rounded up."""
        return _threshold_delta_dl(
            self.units_scale,
            self.count_scale,
            self.max_rows,
            self.weight,
            self._moves,
            self.tau - self._base + 1,
        )

    @property
    def event(self) -> ApproxDpEvent:
        """``(epsilon, delta)`` as stated (the noise and threshold fit inside, checked when
        built)."""
        return ApproxDpEvent(epsilon=self.epsilon, delta=self.delta)

    def probability(self, counts: Any, units: Any = None) -> npt.NDArray[np.float64]:
        """Release probability of keys with ``counts`` rows (and ``units`` units; required
        when the units count is used), floating point, for reporting and tests."""
        c = _integer_counts(counts).reshape(-1)
        u = c if units is None else _integer_counts(units).reshape(-1)
        out = np.empty(c.shape, dtype=np.float64)
        for i, (ci, ui) in enumerate(zip(c.tolist(), u.tolist(), strict=True)):
            s = self.max_rows * ui * (1 if self.units_scale is not None else 0) + self.weight * ci
            m = self.tau - s + 1
            out[i] = _joint_tail_up(
                self.units_scale, self.count_scale, self.max_rows, self.weight, m
            )
        return out.reshape(np.shape(_integer_counts(counts)))

    def release_with_counts(
        self, counts: Any, units: Any = None, *, source: RandomSource | None = None
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
        """``(mask, noisy)``: ``noisy = C + Z2``; only ``noisy[mask]`` may be published.

        ``counts``: rows per key, each unit's rows capped at ``max_rows`` by the caller;
        ``units``: distinct units per key (required when the units count is used).
        """
        src = resolve_source(source)
        c = _integer_counts(counts)
        from dpkit.mechanisms.discrete import DiscreteLaplace

        noisy = np.asarray(
            DiscreteLaplace(scale=self.count_scale, sensitivity=1).release(c, source=src),
            dtype=np.int64,
        ).reshape(c.shape)
        parts = [(self.weight, noisy)]
        if self.units_scale is not None:
            if units is None:
                raise PrivacyParameterError(
                    "this selection also thresholds the units count: pass units=..."
                )
            u = _integer_counts(units)
            if u.shape != c.shape:
                raise PrivacyParameterError("counts and units must have the same shape")
            nu = np.asarray(
                DiscreteLaplace(scale=self.units_scale, sensitivity=1).release(u, source=src),
                dtype=np.int64,
            ).reshape(u.shape)
            parts.append((self.max_rows, nu))
        return _exceeds(parts, self.tau).reshape(c.shape), noisy

    def release(self, counts: Any, *, source: RandomSource | None = None) -> npt.NDArray[np.bool_]:
        """``True`` where the key is released; ``counts`` stand for the units too (use
        :meth:`release_with_counts` to give both)."""
        return self.release_with_counts(counts, counts, source=source)[0]


def _threshold_delta_dl(
    units_scale: float | None, count_scale: float, R: int, w: int, k: int, m: int
) -> float:
    slack = _dl_slack(count_scale) + (0.0 if units_scale is None else _dl_slack(units_scale))
    tail = _joint_tail_up(units_scale, count_scale, R, w, m)
    return min(1.0, up(Fraction(k) * Fraction(tail) * _exp_up(2 * slack)))


def _exp_up(x: float) -> Fraction:
    """An upper bound of ``e^x`` for small ``x >= 0`` (``1 + x + x^2`` while ``x <= 1``)."""
    return 1 + Fraction(x) + Fraction(x) ** 2


def _exceeds(parts: list[tuple[int, npt.NDArray[np.int64]]], tau: int) -> npt.NDArray[np.bool_]:
    """``sum_i c_i x_i > tau`` exactly: in int64 when no partial sum can overflow, else as
    Python integers."""
    bound = abs(tau)
    for c, x in parts:
        bound += c * (int(np.max(np.abs(x))) if x.size else 0)
    if bound < 1 << 62:
        total = np.zeros(parts[0][1].shape, dtype=np.int64)
        for c, x in parts:
            total += np.int64(c) * x
        out: npt.NDArray[np.bool_] = total > tau
        return out
    obj = np.zeros(parts[0][1].shape, dtype=object)
    for c, x in parts:
        obj = obj + c * x.astype(object)
    return np.asarray(obj > tau, dtype=np.bool_)


# ---------------------------------------------------------------------------------------------
# Thresholding a released count whose noise is already priced (analytics)


def _dg_tail_up(sigma: float, t: int) -> Fraction:
    """Upper bound on ``P[Z >= t]``, Z discrete Gaussian with parameter ``sigma``, as a
    rational rounded up (mpmath at 40 digits, a relative ``1e-25`` added before rounding).

    ``P[Z >= t] = S_t / N`` with ``f(x) = exp(-x^2 / (2 sigma^2))``, ``S_t = sum_{j >= t}
    f(j)`` and ``N = sum_k f(k)``.

    * ``sigma <= 256``: both sums term by term. ``N`` over ``|k| < K`` (``K = 13 sigma + 2``,
      a lower bound, every term being positive, short by less than ``e^-84`` relatively);
      ``S_t`` over ``t <= j < t + K`` plus the rest bounded by the integral of ``f`` from ``t +
      K - 1/2`` (midpoint rule, ``f`` convex beyond ``sigma``), below ``e^-84`` of the sum.
    * larger sigma (no sum of ``80 sigma`` terms): ``S_t <= int_{t - 1/2}^inf f = sigma
      sqrt(pi / 2) erfc((t - 1/2) / (sigma sqrt 2))`` when ``t - 1/2 >= sigma`` (``f`` convex on
      ``[sigma, inf)``, so each term is at most its integral over ``[j - 1/2, j + 1/2]``, the
      midpoint rule; relatively about ``(x^2 - 1) / (24 sigma^2)`` above at ``x`` sigmas),
      else ``S_t <= f(t) + int_t^inf f`` (``f`` decreasing); ``N >= sqrt(2 pi) sigma``
      (Poisson summation, ``N = sqrt(2 pi) sigma (1 + 2 sum_m exp(-2 pi^2 sigma^2 m^2))``;
      Canonne, Kamath and Steinke 2020).

    ``t <= 0``: 1."""
    import mpmath

    if t <= 0:
        return Fraction(1)
    with mpmath.workdps(_TAIL_DPS):
        s = mpmath.mpf(sigma)
        two_s2 = 2 * s * s
        rt2 = mpmath.sqrt(2)
        half = mpmath.sqrt(mpmath.pi / 2) * s
        if sigma <= 256.0:
            K = math.ceil(13.0 * sigma) + 2
            den = _dg_norm_down(sigma, K)
            num = mpmath.fsum(mpmath.exp(-(mpmath.mpf(j) ** 2) / two_s2) for j in range(t, t + K))
            num += half * mpmath.erfc((mpmath.mpf(t + K) - mpmath.mpf(1) / 2) / (s * rt2))
        else:
            if t - 0.5 >= sigma:
                num = half * mpmath.erfc((mpmath.mpf(t) - mpmath.mpf(1) / 2) / (s * rt2))
            else:
                num = mpmath.exp(-(mpmath.mpf(t) ** 2) / two_s2) + half * mpmath.erfc(
                    mpmath.mpf(t) / (s * rt2)
                )
            den = mpmath.sqrt(2 * mpmath.pi) * s
        val = num / den * (1 + mpmath.mpf(10) ** -25)
        return _tail_fraction(val)


@functools.lru_cache(maxsize=64)
def _dg_norm_down(sigma: float, K: int) -> Any:
    """``1 + 2 sum_{1 <= k < K} exp(-k^2 / (2 sigma^2))`` at 40 digits: a lower bound of the
    discrete Gaussian's normaliser (positive terms left out), cached per ``sigma`` (a tau
    search evaluates many tails at one sigma)."""
    import mpmath

    with mpmath.workdps(_TAIL_DPS):
        two_s2 = 2 * mpmath.mpf(sigma) ** 2
        return 1 + 2 * mpmath.fsum(mpmath.exp(-(mpmath.mpf(k) ** 2) / two_s2) for k in range(1, K))


def _dl_tail_up(scale: float, t: int) -> Fraction:
    """Upper bound on ``P[Z >= t]``, Z discrete Laplace of scale ``scale`` (pmf proportional to
    ``q^|z|``, ``q = e^(-1/scale)``): ``q^t / (1 + q)`` for ``t >= 1``, at 40 digits with a
    relative ``1e-25`` added, rounded up to a rational (Ghosh, Roughgarden and Sundararajan
    2012; Canonne, Kamath and Steinke 2020, Sec. 2.1)."""
    import mpmath

    if t <= 0:
        return Fraction(1)
    with mpmath.workdps(_TAIL_DPS):
        q = mpmath.exp(-1 / mpmath.mpf(scale))
        val = _dl_tail_mp(q, t) * (1 + mpmath.mpf(10) ** -25)
        return _tail_fraction(val)


#: Tails below ``2^-1100`` (under the smallest positive double) are rounded up to it.
_TAIL_FLOOR = Fraction(1, 2**1100)


def _tail_fraction(val: Any) -> Fraction:
    """The mpmath tail bound ``val`` (at :data:`_TAIL_DPS` digits) as a rational rounded up,
    at most 1 and at least :data:`_TAIL_FLOOR`. A bound below the floor is replaced by the
    floor (still an upper bound); this keeps the rational small, since the decimal text of
    ``exp(-10^9)`` (a noise scale of ``10^-9`` steps, epsilon near ``10^10``) would be turned
    into a power of ten of a billion digits, and every tau and delta the floor can change is
    already below the smallest double."""
    import mpmath

    if val <= mpmath.mpf(_TAIL_FLOOR.numerator) / _TAIL_FLOOR.denominator:
        return _TAIL_FLOOR
    out = Fraction(mpmath.nstr(val, 35, min_fixed=-1, max_fixed=-1))
    return min(Fraction(1), out)


@dataclass(frozen=True, kw_only=True)
class CountThreshold:
    """Release a group iff its already-noised count exceeds :attr:`tau` (strictly).

    The count ``C' = C + Z`` is a released statistic whose noise (discrete Laplace of scale
    ``t`` or discrete Gaussian of parameter ``sigma``) is priced and charged on its own, over
    every group of the data; this object only decides which groups are shown. A group only the
    added privacy unit holds has ``0 <= C <= c`` (``c`` = :attr:`max_value`, the unit's row
    bound for a row count, 1 for a count of units) and, since the release probability grows
    with ``C``, is shown with probability at most ``P[c + Z > tau] = P[Z >= tau - c + 1]``.
    With ``k`` such groups at most (``k = max_partitions``, ``2 max_partitions`` under
    ``replace``), the union bound gives the threshold's delta::

        delta_thr = k P[Z >= tau - c + 1] e^{s}

    (``s`` the sampler's pmf slack: ``2 a`` for the fast discrete Laplace sampler, ``a =
    2**-24``, else 0). :attr:`tau` is the smallest integer with ``delta_thr <=`` the delta
    given. The tails are computed in mpmath at 40 digits (:func:`_dl_tail_up`,
    :func:`_dg_tail_up`) and rounded up, so ``delta_thr`` is never understated and ``tau``
    never too low. The whole release is then ``(eps_0, delta_0 + delta_thr)``-DP when the
    statistics over the groups both neighbours hold are ``(eps_0, delta_0)``-DP (module
    docstring, the argument for Gaussian thresholding; Korolova, Kenthapadi, Mishra and
    Ntoulas 2009; Wilson et al., PoPETs 2020, Sec. 4), and ``delta_thr``-approximately
    ``rho``-zCDP when they are ``rho``-zCDP (Bun and Steinke 2016, Def. 8.1): the groups of
    the added unit are shown only on an event of probability at most ``delta_thr``,
    independent of the other noise. The other statistics of a shown group are
    post-processing of that event and of their own (charged) noise.
    """

    kind: str  # "discrete_laplace" or "discrete_gaussian"
    scale: float
    max_value: int
    max_partitions: int
    tau: int
    fast: bool = False
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    @classmethod
    def calibrate(
        cls,
        *,
        kind: str,
        scale: float,
        max_value: int,
        max_partitions: int,
        delta: float,
        fast: bool = False,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> CountThreshold:
        """The smallest ``tau`` with :attr:`threshold_delta` at most ``delta``."""
        dl = check_delta(delta, allow_zero=False)
        check_positive(scale, "scale")
        c = check_integer(max_value, name="max_value", minimum=1)
        k, rel = _unit_moves(max_partitions, neighbouring)
        if kind not in ("discrete_laplace", "discrete_gaussian"):
            raise PrivacyParameterError(f"unknown noise kind {kind!r}")

        def fits(tau: int) -> bool:
            return _count_threshold_delta(kind, scale, fast, k, tau - c + 1) <= Fraction(dl)

        lg = math.log(2.0 * k) - math.log(dl)  # 2 k / dl overflows for a subnormal dl
        if kind == "discrete_laplace":
            width = scale * (lg + 2.0)
        else:
            width = scale * math.sqrt(2.0 * lg + 2.0)
        hi = c + 2 + math.ceil(width)
        tau = search_int(fits, c - 1, hi, holds="above", expand="up", what="count threshold")
        return cls(
            kind=kind,
            scale=float(scale),
            max_value=c,
            max_partitions=int(max_partitions),
            tau=tau,
            fast=fast,
            neighbouring=rel,
        )

    @property
    def threshold_delta(self) -> float:
        """``k P[Z >= tau - c + 1] e^s`` (class docstring), rounded up to a double."""
        k = _unit_moves(self.max_partitions, self.neighbouring)[0]
        return min(
            1.0,
            up(
                _count_threshold_delta(
                    self.kind, self.scale, self.fast, k, self.tau - self.max_value + 1
                )
            ),
        )

    def release(self, noisy_counts: Any) -> npt.NDArray[np.bool_]:
        """``True`` where the noisy count exceeds :attr:`tau` (the counts are already noised)."""
        x = np.asarray(noisy_counts, dtype=object).reshape(-1)
        return np.array([int(v) > self.tau for v in x], dtype=np.bool_)


def _count_threshold_delta(kind: str, scale: float, fast: bool, k: int, t: int) -> Fraction:
    """``k P[Z >= t] e^s`` as an upper bound (``e^s`` bounded above by ``1 + s + s^2``)."""
    if kind == "discrete_laplace":
        tail = _dl_tail_up(scale, t)
        slack = 2.0 * DISCRETE_LAPLACE_SLACK if fast else 0.0
    else:
        tail = _dg_tail_up(scale, t)
        slack = DISCRETE_GAUSSIAN_SLACK if fast else 0.0
    return min(Fraction(1), k * tail * _exp_up(slack))
