"""Renyi differential privacy (RDP) accounting over a grid of orders.

A mechanism is (alpha, r)-RDP when the Renyi divergence of order alpha between its outputs on
neighbouring inputs is at most r (Mironov 2017, Definition 4); RDP adds up under (adaptive)
composition (Mironov 2017, Proposition 1). :class:`RdpAccountant` keeps, for every order of its
grid, an upper bound on the composed RDP, and converts it to (epsilon, delta) at the end.

Per-event RDP (alpha > 1; ``s`` = noise multiplier):

* Gaussian: ``alpha / (2 s^2)`` (Mironov 2017, Proposition 7), exact.
* Laplace: ``1/(alpha-1) ln( alpha/(2 alpha-1) e^{(alpha-1)/s} + (alpha-1)/(2 alpha-1)
  e^{-alpha/s} )`` (Mironov 2017, Table II / Proposition 6), exact.
* Any epsilon-DP event (exponential mechanism, report noisy max, discrete Laplace with
  ``eps = Delta / scale``, PureDp, ApproxDp with delta 0): the RDP of binary randomized response
  with that epsilon, ``1/(alpha-1) ln( (e^{alpha eps} + e^{(1-alpha) eps}) / (1 + e^eps) )``.
  This is the tight bound: every eps-DP pair is a post-processing of that pair (Kairouz, Oh and
  Viswanath 2015, Theorem 2.1) and Renyi divergence obeys data processing; it equals the bound
  ``ln(sinh(alpha eps) - sinh((alpha-1) eps)) - ln(sinh eps)`` over ``alpha-1`` in the proof of
  Bun and Steinke 2016, Proposition 3.3, and is below both ``eps`` and ``alpha eps^2 / 2``.
* The exponential mechanism (``ExponentialMechanismEvent``, ``ReportNoisyMaxEvent`` with Gumbel
  noise) at epsilon: also at most ``alpha epsilon^2 / 8``, the smaller of the two is used. It is
  epsilon-bounded-range, hence ``epsilon^2 / 8``-zCDP (Cesar and Rogers 2021; see
  :mod:`dpkit.accounting.zcdp`).
* k-ary randomized response keeping the truth with probability p (q = (1-p)/(k-1)):
  ``1/(alpha-1) ln( p^alpha q^{1-alpha} + q^alpha p^{1-alpha} + (k-2) q )``, exact.
* Discrete Gaussian with sigma and sensitivity Delta: ``alpha Delta^2 / (2 sigma^2)`` (Canonne,
  Kamath and Steinke 2020, Proposition 5: it is (Delta^2/(2 sigma^2))-concentrated DP), an upper
  bound.
* Poisson-subsampled Gaussian (add/remove neighbours, rate q) at integer orders:
  ``1/(alpha-1) ln sum_{k=0}^{alpha} C(alpha,k) (1-q)^{alpha-k} q^k e^{(k^2-k)/(2 s^2)}``
  (Mironov, Talwar and Zhang 2019, Section 3.3, the binomial expansion), computed in log space.
  At fractional orders: the two series of MTZ Section 3.3 split at ``z0``, summed until a
  certified bound on the rest is negligible, the bound and all rounding errors added (see
  :func:`_sampled_gaussian_frac`); an upper bound that matches numerical integration of
  ``E[(P/Q)^alpha]`` to about 1e-9 relative.
* Gaussian (replace-one, noise multiplier ``m``) on a fixed-size batch of ``b`` of ``n`` records
  drawn without replacement (:class:`~dpkit.events.SampledWithoutReplacementEvent`, replace-one
  neighbours), at integer orders ``alpha >= 2``: the general bound of Wang, Balle and
  Kasiviswanathan 2019 (AISTATS, Theorem 9) with ``gamma = b / n`` and the base mechanism's RDP
  ``e(j) = j / (2 m^2)`` (``e(inf) = inf``, so every ``min{2, (e^{e(inf)} - 1)^j}`` is 2)::

      (alpha - 1) rdp(alpha) <= ln( 1 + gamma^2 C(alpha, 2) min{4 (e^{e(2)} - 1), 2 e^{e(2)}}
                                       + sum_{j=3}^{alpha} 2 gamma^j C(alpha, j) e^{(j-1) e(j)} ).

  At fractional orders the cumulant ``K(alpha) = (alpha - 1) rdp(alpha)``, convex with
  ``K(1) = 0``, is bounded by the chord between the neighbouring integers (WBK 2019, Corollary
  10). Rounded up: ``gamma`` is ``b / n`` rounded up (every term grows with it), the sum is taken
  by :func:`_lse_up`, and the result is capped by the unsampled Gaussian ``alpha / (2 m^2)``
  (sampling never hurts under replace-one: the subsampled pair is a mixture of pairs each no
  worse than the base mechanism, and Renyi divergence is jointly quasi-convex). Other inner
  events are refused.
* Gaussian sparse vector (``c`` AboveThreshold runs over at most ``k`` queries each):
  ``c (a alpha + ln(k) / (alpha - 1))`` with ``a = 1/s1^2 + 2/s2^2`` (Zhu and Wang 2020,
  Theorem 8; see :class:`~dpkit.events.GaussianSparseVectorEvent`), an upper bound.
* NoOp: 0; NonPrivate: infinity; Composed / SelfComposed: sums. Anything else is refused.

``pmf_slack`` ``a`` of each event (see :mod:`dpkit.events`) is summed to ``A`` and
applied at conversion: ``delta_actual(eps) <= e^A delta_ideal(eps - 2A)``, hence
``eps_actual(delta) = 2A + eps_ideal(delta e^{-A})``.

Conversion to (epsilon, delta), for each order, then the best order (all rounded up):

* Balle, Barthe, Gaboardi, Hsu and Sato 2020, Theorem 21 / Canonne, Kamath and Steinke 2020,
  Proposition 12: ``eps = r + ln((alpha-1)/alpha) - (ln delta + ln alpha)/(alpha-1)``, and the
  inverse ``delta = exp((alpha-1)(r - eps + ln(1 - 1/alpha)) - ln alpha)``;
* the total-variation bound: ``delta(0) <= sqrt(1 - e^{-KL})`` (Bretagnolle-Huber) with
  ``KL <= r_alpha``;
* the accountant also keeps the pure-DP sum of the events that are pure DP (infinite otherwise)
  and answers the smaller of the two bounds.

Floating point: per-order values are computed in double precision; each is then raised by an
absolute margin that bounds the rounding error of the log-sum-exp that produced it (see
:func:`_lse_up`), so the grid holds upper bounds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln, gammasgn, log_ndtr

from dpkit._numeric.rounding import float_up, up
from dpkit._numeric.validation import (
    check_delta,
    check_integer,
    check_positive,
    check_probability,
)
from dpkit.accounting._base import PrivacyAccountant
from dpkit.accounting.pure import delta_at, pure_epsilon_of
from dpkit.accounting.zcdp import is_bounded_range
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    ApproxDpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    GaussianSparseVectorEvent,
    LaplaceEvent,
    Neighbouring,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

__all__ = ["DEFAULT_ORDERS", "RdpAccountant", "dpsgd_rdp_epsilon", "event_rdp"]

FloatArray = npt.NDArray[np.float64]

#: Default grid: fine fractional orders near 1 (where small compositions are decided), tenths
#: up to 11 and quarters up to 20 (where DP-SGD runs are decided), every integer from 2 to 256,
#: and a few large orders for very private totals.
DEFAULT_ORDERS: tuple[float, ...] = tuple(
    sorted(
        {1.0 + x / 20.0 for x in range(1, 20)}
        | {round(2.0 + x / 10.0, 1) for x in range(1, 90) if x % 10}
        | {2.0 + x / 4.0 for x in range(1, 72) if x % 4}
        | {float(a) for a in range(2, 257)}
        | {320.0, 384.0, 512.0, 768.0, 1024.0}
    )
)

_ULP = 2.0**-52


def _lse_up(terms: FloatArray, magnitude: float) -> float:
    """Upper bound on ``ln sum exp(terms)``.

    ``magnitude`` bounds the absolute values of the pieces each term was computed from. Each
    term then carries an absolute error of at most a few ``ulp * magnitude``; the exponentials,
    the positive sum of n terms and the final logarithm add at most ``(n + 3) ulp`` relative.
    The margin ``2**-48 (magnitude + n + 4)`` is 16 times that estimate.
    """
    if np.any(np.isnan(terms)) or np.any(terms == math.inf):
        return math.inf  # an overflowed or undefined term: no finite bound
    finite = terms[np.isfinite(terms)]
    if finite.size == 0:
        return -math.inf
    m = float(np.max(finite))
    val = m + math.log(float(np.sum(np.exp(finite - m))))
    margin = 16.0 * 4.0 * _ULP * (magnitude + abs(m) + finite.size + 4.0)
    return val + margin


def _gaussian(s: float, orders: FloatArray) -> FloatArray:
    out: FloatArray = orders * (0.5 / s / s)  # 1/(2 s^2) overflows to inf, never divides by 0
    return out * (1.0 + 4.0 * _ULP)


def _laplace(s: float, orders: FloatArray) -> FloatArray:
    out = np.empty_like(orders)
    for i, a in enumerate(orders):
        t = np.array(
            [
                math.log(a / (2.0 * a - 1.0)) + (a - 1.0) / s,
                math.log((a - 1.0) / (2.0 * a - 1.0)) - a / s,
            ]
        )
        out[i] = max(_lse_up(t, (a + 1.0) / s + 2.0), 0.0) / (a - 1.0)
    return np.minimum(out, 1.0 / s * (1.0 + 4.0 * _ULP))


def _pure(eps: float, orders: FloatArray) -> FloatArray:
    """RDP of binary randomized response with parameter eps: the worst eps-DP pair."""
    if eps == 0.0:
        return np.zeros_like(orders)
    out = np.empty_like(orders)
    log1pe = math.log1p(math.exp(-eps)) + eps  # ln(1 + e^eps) without overflow
    for i, a in enumerate(orders):
        t = np.array([a * eps - log1pe, (1.0 - a) * eps - log1pe])
        out[i] = max(_lse_up(t, a * eps + log1pe), 0.0) / (a - 1.0)
    bound = np.minimum(eps, orders * eps * eps / 2.0) * (1.0 + 4.0 * _ULP)
    return np.minimum(out, bound)


def _randomized_response(p: float, k: int, orders: FloatArray) -> FloatArray:
    if p == 1.0:
        return np.full_like(orders, math.inf)
    q = (1.0 - p) / (k - 1)
    if p <= q:  # p == 1/k: the output does not depend on the input
        return np.zeros_like(orders)
    lp, lq = math.log(p), math.log(q)
    out = np.empty_like(orders)
    for i, a in enumerate(orders):
        terms = [a * lp + (1.0 - a) * lq, a * lq + (1.0 - a) * lp]
        if k > 2:
            terms.append(math.log(k - 2) + lq)
        mag = a * (abs(lp) + abs(lq)) + math.log(k)
        out[i] = max(_lse_up(np.array(terms), mag), 0.0) / (a - 1.0)
    return out


@functools.lru_cache(maxsize=8192)
def _sampled_gaussian_int(q: float, s: float, alpha: int) -> float:
    """RDP of order ``alpha`` (integer >= 2) of the Poisson-sampled Gaussian (MTZ 2019)."""
    k = np.arange(alpha + 1, dtype=np.float64)
    log_binom = gammaln(alpha + 1.0) - gammaln(k + 1.0) - gammaln(alpha - k + 1.0)
    log1mq = math.log1p(-q)
    logq = math.log(q)
    inv = 0.5 / s / s  # may be inf for tiny s: then the RDP is inf (no bound), never 0 * inf
    with np.errstate(invalid="ignore", over="ignore"):
        quad = np.where(k > 1.0, (k * k - k) * inv, 0.0)
    terms = log_binom + (alpha - k) * log1mq + k * logq + quad
    magnitude = (
        math.lgamma(alpha + 1) * 3.0 + alpha * (abs(log1mq) + abs(logq)) + alpha * alpha * inv
    )
    return max(_lse_up(terms, magnitude), 0.0) / (alpha - 1.0)


_FRAC_MAX_TERMS = 1 << 21  # terms of the fractional-order series before the tail bound is used
_FRAC_MAX_Z0 = 2.0**18  # beyond this crossing point the fractional orders are not evaluated
_FRAC_REL_TAIL = 1e-10  # stop extending the series once the tail bound is this small, relatively


@functools.lru_cache(maxsize=8192)
def _sampled_gaussian_frac(q: float, s: float, alpha: float) -> float:
    """RDP of fractional order ``alpha > 1`` of the Poisson-sampled Gaussian, an upper bound.

    Mironov, Talwar and Zhang 2019, Section 3.3: with ``z0 = s^2 ln(1/q - 1) + 1/2`` (where the
    ratio ``q e^{(2z-1)/(2 s^2)} / (1 - q)`` crosses 1) the binomial series of
    ``(1 - q + q e^{(2z-1)/(2s^2)})^alpha`` converges on each side of ``z0``, and
    ``A_alpha = E[(P/Q)^alpha] = A1 + A2`` with (``b_i = C(alpha, i)``, of alternating sign for
    ``i > alpha``)

        A1 = sum_i b_i q^i (1-q)^(alpha-i) e^{(i^2-i)/(2s^2)} Phi((z0 - i)/s),
        A2 = sum_i b_i q^(alpha-i) (1-q)^i e^{(j^2-j)/(2s^2)} Phi((j - z0)/s),  j = alpha - i,

    and the RDP is ``ln(A_alpha) / (alpha - 1)``. Terms are computed in log space
    (``log_ndtr``), the first ``N`` exactly and the rest bounded: with the Mills-ratio bound
    ``Phi(-x) <= phi(x) / x`` (``x > 0``) every term with ``i >= N`` is at most
    ``C |b_i| / (i + c)`` with ``C = (1-q)^alpha e^{-z0^2/(2s^2)} s / sqrt(2 pi)`` and
    ``c = -z0`` (A1) or ``z0 - alpha`` (A2) (the powers of q cancel exactly), and
    ``|b_i| <= |b_N| ((N+1)/(i+1))^(alpha+1)`` because ``|b_{i+1}/b_i| = (i - alpha)/(i + 1)``.
    Summing, the tail is at most ``C |b_N| (F1 + F2) (1/(N+1) + 1/(alpha+1))`` with
    ``F = max(1, (N+1)/(N+c))``; it is added, as are the rounding errors of every term
    (``16 ulp`` times the magnitude of the pieces of its logarithm) and of the sums (correctly
    rounded by ``math.fsum``), so the result is an upper bound. Its precision is limited by
    ``A_alpha`` being near 1: the absolute error of ``ln A_alpha`` is about ``1e-14``, below
    1e-6 relative once the RDP exceeds about 1e-8.
    """
    logq, log1mq = math.log(q), math.log1p(-q)
    inv = 0.5 / s / s
    z0 = s * s * (log1mq - logq) + 0.5
    if not (math.isfinite(z0) and abs(z0) < _FRAC_MAX_Z0):
        # The series would need more than ~z0 terms (or z0 is not a number): give no bound
        # here; the caller takes the minimum with the unsampled Gaussian's RDP and the
        # integer orders, both exact, so the answer stays a valid (looser) upper bound.
        return math.inf
    lg_a1 = float(gammaln(alpha + 1.0))
    log_c = alpha * log1mq - z0 * z0 * inv + math.log(s) - 0.5 * math.log(2.0 * math.pi)
    n_terms = int(max(alpha, z0, alpha - z0, 0.0)) + 64
    while True:
        i = np.arange(n_terms, dtype=np.float64)
        j = alpha - i
        lg_i = gammaln(i + 1.0)
        lg_j = gammaln(j + 1.0)
        sign = gammasgn(j + 1.0)
        logb = lg_a1 - lg_i - lg_j
        with np.errstate(over="ignore", invalid="ignore"):
            n1 = log_ndtr((z0 - i) / s)
            n2 = log_ndtr((j - z0) / s)
            quad1 = (i * i - i) * inv
            quad2 = (j * j - j) * inv
            t1 = logb + i * logq + j * log1mq + quad1 + n1
            t2 = logb + j * logq + i * log1mq + quad2 + n2
            base = abs(lg_a1) + np.abs(lg_i) + np.abs(lg_j)
            mag1 = base + np.abs(i * logq) + np.abs(j * log1mq) + np.abs(quad1) + np.abs(n1)
            mag2 = base + np.abs(j * logq) + np.abs(i * log1mq) + np.abs(quad2) + np.abs(n2)
        terms = np.concatenate((t1, t2))
        if not np.all(np.isfinite(terms[terms > -np.inf])) or np.any(np.isnan(terms)):
            return math.inf
        m = float(np.max(terms))
        w = np.exp(terms - m) * np.concatenate((sign, sign))
        mags = np.concatenate((mag1, mag2))
        pos = math.fsum(w[w > 0].tolist())  # correctly rounded sums: one ulp each
        neg = -math.fsum(w[w < 0].tolist())
        err = math.fsum((np.abs(w) * (16.0 * _ULP * (mags + abs(m) + 4.0))).tolist())
        err = err * (1.0 + 1e-6) + 2.0 * _ULP * (pos + neg)
        # tail bound for i >= n_terms
        big_n = float(n_terms)
        log_bn = lg_a1 - float(gammaln(big_n + 1.0)) - float(gammaln(alpha - big_n + 1.0))
        f1 = max(1.0, (big_n + 1.0) / (big_n - z0))
        f2 = max(1.0, (big_n + 1.0) / (big_n + z0 - alpha))
        tail = (
            math.exp(min(log_c + log_bn - m, 700.0))
            * (f1 + f2)
            * (1.0 / (big_n + 1.0) + 1.0 / (alpha + 1.0))
            * 1.01
        )
        total = pos - neg + err + tail  # A_alpha e^{-m}, rounded up
        excess = abs(m + math.log(max(pos - neg, 1e-300)))  # ~ ln A_alpha
        if tail <= _FRAC_REL_TAIL * max(excess, 1e-300) or n_terms >= _FRAC_MAX_TERMS:
            break
        n_terms *= 4
    if not total > 0.0:
        return math.inf  # pragma: no cover - A_alpha >= its first term > 0
    log_a = m + math.log(total)
    log_a += 4.0 * _ULP * (abs(m) + abs(math.log(total)) + 1.0)
    return max(log_a, 0.0) / (alpha - 1.0) * (1.0 + 4.0 * _ULP)


def _sampled_gaussian(q: float, s: float, orders: FloatArray) -> FloatArray:
    if q == 0.0:
        return np.zeros_like(orders)
    if q == 1.0:
        return _gaussian(s, orders)
    out = np.empty_like(orders)
    for i, a in enumerate(orders):
        n = math.floor(a)
        if a == n:
            out[i] = _sampled_gaussian_int(q, s, n)
        else:
            out[i] = _sampled_gaussian_frac(q, s, float(a))
    return np.minimum(out, _gaussian(s, orders))


@functools.lru_cache(maxsize=8192)
def _wor_gaussian_cgf(q: float, m: float, alpha: int) -> float:
    """Upper bound on ``K(alpha) = (alpha - 1) rdp(alpha)`` of a Gaussian (replace-one, noise
    multiplier ``m``) on a batch sampled without replacement at rate ``q`` (WBK 2019, Theorem 9;
    the formula is in the module docstring); integer ``alpha >= 1``, rounded up."""
    if alpha <= 1:
        return 0.0
    inv = 0.5 / m / m  # e(j) = j * inv; may be inf for tiny m (then no finite bound)
    if not math.isfinite(inv):
        return math.inf
    logq = math.log(q)
    j = np.arange(2, alpha + 1, dtype=np.float64)
    log_binom = gammaln(alpha + 1.0) - gammaln(j + 1.0) - gammaln(alpha - j + 1.0)
    e2 = 2.0 * inv
    # ln(e^{e2} - 1) without overflow or cancellation
    log_em1 = e2 + math.log(-math.expm1(-e2)) if e2 > 0.0 else -math.inf
    second = min(math.log(4.0) + log_em1, math.log(2.0) + e2)
    with np.errstate(over="ignore", invalid="ignore"):
        terms = math.log(2.0) + j * logq + log_binom + (j - 1.0) * j * inv
    terms[0] = 2.0 * logq + float(log_binom[0]) + second
    terms = np.concatenate((np.zeros(1), terms))
    magnitude = (
        3.0 * math.lgamma(alpha + 1.0) + alpha * abs(logq) + alpha * alpha * inv + abs(e2) + 4.0
    )
    return max(_lse_up(terms, magnitude), 0.0)


def _wor_gaussian(q: float, m: float, orders: FloatArray) -> FloatArray:
    """RDP curve of the Gaussian on a batch sampled without replacement (module docstring)."""
    out = np.empty_like(orders)
    for i, a in enumerate(orders):
        lo = math.floor(a)
        if a == lo:
            k = _wor_gaussian_cgf(q, m, lo)
        else:  # chord of the convex cumulant between the neighbouring integer orders
            t = float(a) - lo
            k_lo, k_hi = _wor_gaussian_cgf(q, m, lo), _wor_gaussian_cgf(q, m, lo + 1)
            k = ((1.0 - t) * k_lo + t * k_hi) * (1.0 + 4.0 * _ULP)
        out[i] = k / (float(a) - 1.0) * (1.0 + 4.0 * _ULP)
    return np.minimum(out, _gaussian(m, orders))


def _gaussian_sparse_vector(event: GaussianSparseVectorEvent, orders: FloatArray) -> FloatArray:
    """``c (a alpha + L / (alpha - 1))`` (event docstring), each order rounded up."""
    a = up(event.quadratic)
    c = float(event.max_positives)
    with np.errstate(over="ignore"):
        curve: FloatArray = orders * a + event.log_term / (orders - 1.0)
        out: FloatArray = curve * c * (1.0 + 8.0 * _ULP)
    return out


def _leaf_rdp(event: DpEvent, orders: FloatArray) -> FloatArray | None:
    """RDP curve of one occurrence of a non-composite event (ideal, without slack)."""
    if isinstance(event, NoOpEvent):
        return np.zeros_like(orders)
    if isinstance(event, NonPrivateEvent):
        return np.full_like(orders, math.inf)
    if isinstance(event, GaussianEvent):
        return _gaussian(event.noise_multiplier, orders)
    if isinstance(event, LaplaceEvent):
        return _laplace(event.noise_multiplier, orders)
    if isinstance(event, GaussianSparseVectorEvent):
        return _gaussian_sparse_vector(event, orders)
    if isinstance(event, DiscreteGaussianEvent):
        return _gaussian(event.sigma / event.sensitivity, orders)
    if isinstance(event, RandomizedResponseEvent):
        return _randomized_response(event.p_truth, event.categories, orders)
    if isinstance(event, DiscreteLaplaceEvent):
        return _pure(up(Fraction(event.sensitivity) / Fraction(event.scale)), orders)
    if isinstance(event, (ExponentialMechanismEvent, ReportNoisyMaxEvent)) and is_bounded_range(
        event
    ):
        eps = event.epsilon
        return np.minimum(_pure(eps, orders), orders * (eps * eps / 8.0) * (1.0 + 4.0 * _ULP))
    if isinstance(event, (ExponentialMechanismEvent, ReportNoisyMaxEvent, PureDpEvent)):
        return _pure(event.epsilon, orders)
    if isinstance(event, ApproxDpEvent):
        return _pure(event.epsilon, orders) if event.delta == 0.0 else None
    if isinstance(event, PoissonSampledEvent):
        inner = event.event
        if isinstance(inner, GaussianEvent) and inner.neighbouring is Neighbouring.ADD_REMOVE:
            return _sampled_gaussian(event.sampling_rate, inner.noise_multiplier, orders)
        if isinstance(inner, NoOpEvent) or event.sampling_rate == 0.0:
            return np.zeros_like(orders) if _rdp_supported(inner) else None
        return None
    if isinstance(event, SampledWithoutReplacementEvent):
        inner = event.event
        if isinstance(inner, NoOpEvent) or (event.sample_size == 0 and _rdp_supported(inner)):
            return np.zeros_like(orders)
        if not isinstance(inner, GaussianEvent) or inner.neighbouring is not Neighbouring.REPLACE:
            return None
        if event.sample_size == event.dataset_size:
            return _gaussian(inner.noise_multiplier, orders)
        q = up(Fraction(event.sample_size, event.dataset_size))
        return _wor_gaussian(q, inner.noise_multiplier, orders)
    return None


def _rdp_supported(event: DpEvent) -> bool:
    return event_rdp(event, np.array([2.0])) is not None


def _slack_of(event: DpEvent) -> Fraction | None:
    """Total pmf slack of one occurrence (sum over leaves, with multiplicities)."""
    if isinstance(event, ComposedEvent):
        total = Fraction(0)
        for e in event.events:
            s = _slack_of(e)
            if s is None:
                return None
            total += s
        return total
    if isinstance(event, SelfComposedEvent):
        s = _slack_of(event.event)
        return None if s is None else event.count * s
    if isinstance(event, (PoissonSampledEvent, SampledWithoutReplacementEvent)):
        # The subsampled mixture of pmfs each within exp(+-a) of ideal is within exp(+-a) too.
        return _slack_of(event.event)
    return Fraction(getattr(event, "pmf_slack", 0.0))


def event_rdp(event: DpEvent, orders: FloatArray) -> FloatArray | None:
    """Upper bounds on the RDP of ONE occurrence of ``event`` at ``orders`` (``None``: refused).

    The ideal mechanism's RDP; ``pmf_slack`` is accounted separately by :class:`RdpAccountant`.
    """
    if isinstance(event, ComposedEvent):
        total = np.zeros_like(orders)
        for e in event.events:
            r = event_rdp(e, orders)
            if r is None:
                return None
            total = total + r
        return total
    if isinstance(event, SelfComposedEvent):
        r = event_rdp(event.event, orders)
        if r is None:
            return None
        if event.count == 0:
            return np.zeros_like(orders)
        return _times(r, event.count)
    return _leaf_rdp(event, orders)


def _times(curve: FloatArray, count: int) -> FloatArray:
    """``count * curve`` rounded up: the count rounded up to a double (``inf`` beyond the
    double range, so 10**400 compositions give no finite bound rather than an error), the
    product nudged up one ulp; zero entries stay zero."""
    cnt = up(count)
    with np.errstate(over="ignore", invalid="ignore"):
        out: FloatArray = np.where(curve > 0, np.nextafter(cnt * curve, np.inf), 0.0)
    return out


def _check_orders(orders: Sequence[float] | None) -> FloatArray:
    if orders is None:
        return np.array(DEFAULT_ORDERS, dtype=np.float64)
    vals = sorted({check_positive(a, "order") for a in orders})
    if not vals:
        raise PrivacyParameterError("orders must not be empty")
    for a in vals:
        if not 1.0 < a <= 1e6:
            raise PrivacyParameterError(f"Renyi orders must lie in (1, 1e6], got {a!r}")
    return np.array(vals, dtype=np.float64)


class RdpAccountant(PrivacyAccountant):
    """Renyi-DP accountant over a grid of orders; answers are upper bounds (rounded up).

    Parameters
    ----------
    orders:
        Renyi orders (all > 1). Default :data:`DEFAULT_ORDERS`: 1.05 to 1.95 by 0.05, tenths
        up to 10.9, the quarter-points up to 19.75, every integer 2..256, and 320, 384, 512,
        768, 1024.
    combine_bounds:
        ``True`` (default): answer the best of several valid bounds (the conversion at every
        order, the total-variation bound, the pure-DP sum). ``False``: use only the RDP-to-DP
        conversion at each order; with a single order this is exactly the quantity bounded by
        the Renyi filter of Feldman and Zrnic (2021), valid for adaptively chosen parameters.
    """

    is_upper_bound = True

    def __init__(
        self, *, orders: Sequence[float] | None = None, combine_bounds: bool = True
    ) -> None:
        super().__init__()
        if not isinstance(combine_bounds, bool):
            raise PrivacyParameterError(f"combine_bounds must be a bool, got {combine_bounds!r}")
        self._combine = combine_bounds
        self._orders = _check_orders(orders)
        self._rdp: FloatArray = np.zeros_like(self._orders)
        self._pure: Fraction | float = Fraction(0)
        self._slack: Fraction = Fraction(0)

    @property
    def orders(self) -> FloatArray:
        """The grid of orders (a copy)."""
        return self._orders.copy()

    @property
    def rdp(self) -> FloatArray:
        """The composed RDP upper bound at each order (a copy; ideal mechanisms, no slack)."""
        with self._lock:
            return self._rdp.copy()

    def clone(self) -> RdpAccountant:
        """An independent copy with the same state (used by budgets to try a charge)."""
        with self._lock:
            new = type(self)(
                orders=tuple(float(a) for a in self._orders), combine_bounds=self._combine
            )
            new._rdp = self._rdp.copy()
            new._pure = self._pure
            new._slack = self._slack
            self._copy_history_to(new)
            return new

    def _walk(self, event: DpEvent, count: int, apply: bool) -> bool:
        curve = event_rdp(event, self._orders)
        if curve is None:
            return False
        slack = _slack_of(event)
        if slack is None:  # pragma: no cover - event_rdp refuses first
            return False
        if apply and count > 0:
            if np.any(curve > 0):
                self._rdp = self._rdp + _times(curve, count)
            pure = pure_epsilon_of(event)
            if pure is None or isinstance(pure, float) or isinstance(self._pure, float):
                self._pure = math.inf
            else:
                self._pure += count * pure
            self._slack += count * slack
        return True

    # ------------------------------------------------------------------ conversion
    def _ideal_epsilon(self, delta: float) -> float:
        """Smallest epsilon the RDP curve certifies at ``delta`` (no slack), rounded up."""
        r = self._rdp
        if np.any(np.isinf(r)) or np.any(np.isnan(r)):  # overflow or undefined: no bound
            return math.inf
        if not np.any(r > 0):
            return 0.0
        if delta <= 0.0:
            return math.inf
        a = self._orders
        logd = math.log(delta)
        best = math.inf
        for ai, ri in zip(a, r, strict=True):
            ai_f, ri_f = float(ai), float(ri)
            # Bretagnolle-Huber: TV <= sqrt(1 - e^{-KL}) and KL <= D_alpha.
            if self._combine and -math.expm1(-ri_f) * (1.0 + 1e-9) <= delta * delta:
                return 0.0
            eps = ri_f + math.log1p(-1.0 / ai_f) - (logd + math.log(ai_f)) / (ai_f - 1.0)
            mag = abs(ri_f) + (abs(logd) + math.log(ai_f)) / (ai_f - 1.0) + 1.0
            eps = eps + 64.0 * _ULP * mag
            best = min(best, eps)
        return max(float_up(best), 0.0)

    def _ideal_delta(self, epsilon: float) -> float:
        """Smallest delta the RDP curve certifies at ``epsilon`` (no slack), rounded up."""
        r = self._rdp
        if np.any(np.isinf(r)):
            return 1.0
        if not np.any(r > 0):
            return 0.0
        best = 0.0  # best log delta, start at ln 1
        for ai, ri in zip(self._orders, r, strict=True):
            ai_f, ri_f = float(ai), float(ri)
            use_tv = self._combine and epsilon == 0.0 and ri_f > 0
            cand = [0.5 * math.log(-math.expm1(-ri_f))] if use_tv else []
            logd = (ai_f - 1.0) * (ri_f - epsilon + math.log1p(-1.0 / ai_f)) - math.log(ai_f)
            mag = (ai_f - 1.0) * (abs(ri_f) + epsilon + 1.0) + math.log(ai_f)
            cand.append(logd + 64.0 * _ULP * mag)
            best = min(best, *cand)
        return min(float_up(math.exp(best)), 1.0)

    def _epsilon(self, delta: float) -> float:
        pure = self._pure
        pure_eps = math.inf if isinstance(pure, float) or not self._combine else up(pure)
        if self._slack == 0:
            rdp_eps = self._ideal_epsilon(delta)
        else:
            big_a = up(self._slack)
            ideal = self._ideal_epsilon(delta * math.exp(-big_a) * (1.0 - 1e-12))
            rdp_eps = float_up(2.0 * big_a + ideal)
        return min(pure_eps, rdp_eps)

    def _delta(self, epsilon: float) -> float:
        pure = self._pure
        from_pure = (
            1.0
            if isinstance(pure, float) or not self._combine
            else delta_at(total_epsilon=pure, total_delta=Fraction(0), epsilon=epsilon)
        )
        if self._slack == 0:
            from_rdp = self._ideal_delta(epsilon)
        else:
            big_a = up(self._slack)
            shifted = epsilon - 2.0 * big_a
            if shifted < 0.0:
                from_rdp = 1.0
            else:
                from_rdp = min(float_up(math.exp(big_a) * self._ideal_delta(shifted)), 1.0)
        return min(from_pure, from_rdp)


def dpsgd_rdp_epsilon(
    *, sampling_rate: float, noise_multiplier: float, steps: int, delta: float
) -> float:
    """Epsilon of DP-SGD (Poisson sampling, Gaussian noise) by RDP, an upper bound.

    ``steps`` compositions of the Poisson-subsampled Gaussian mechanism with rate
    ``sampling_rate`` and noise multiplier ``noise_multiplier`` (add/remove neighbours; Abadi et
    al. 2016 with the RDP analysis of Mironov, Talwar and Zhang 2019), converted at ``delta``
    with the bound of Balle et al. 2020 (Theorem 21) over :data:`DEFAULT_ORDERS`. Rounded up.
    """
    q = check_probability(sampling_rate, name="sampling_rate")
    s = check_positive(noise_multiplier, "noise_multiplier")
    n = check_integer(steps, name="steps", minimum=0)
    d = check_delta(delta)
    acct = RdpAccountant()
    acct.compose(PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=s)), n)
    return acct.get_epsilon(d)
