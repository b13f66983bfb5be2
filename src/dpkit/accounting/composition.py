"""Composition theorems as functions: basic, parallel, advanced and optimal.

Every function takes keyword-only privacy parameters, validates them with the shared validator
and rounds its answer towards *more* privacy spent (an upper bound on epsilon or delta).

References
----------
* [DR14] Dwork and Roth, "The Algorithmic Foundations of Differential Privacy", 2014.
* [DRV10] Dwork, Rothblum and Vadhan, "Boosting and Differential Privacy", FOCS 2010.
* [KOV15] Kairouz, Oh and Viswanath, "The Composition Theorem for Differential Privacy",
  ICML 2015 (journal version IEEE Trans. Inf. Theory 2017).
* [McS09] McSherry, "Privacy Integrated Queries", SIGMOD 2009 (parallel composition).

Heterogeneous optimal composition (different epsilons) is #P-hard to evaluate exactly in general
(Murtagh and Vadhan 2016); use the privacy-loss-distribution accountant for it.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

from dpkit._numeric.rounding import float_up, up
from dpkit._numeric.search import search_int
from dpkit._numeric.validation import check_delta, check_epsilon, check_integer
from dpkit.accounting._relations import group_of_two_approx
from dpkit.errors import PrivacyParameterError
from dpkit.events import Neighbouring

__all__ = [
    "advanced_composition",
    "basic_composition",
    "optimal_composition",
    "optimal_composition_delta",
    "parallel_composition",
]

# Working precision of the exact-rounding evaluation of the KOV formula (decimal digits). The
# computation takes O(count) multiplications and additions of positive terms, so the relative
# error of every sum is below count * 10**-_PREC; the final margin _MARGIN covers it.
_PREC = 80
_MARGIN = Decimal("1e-40")


def _validate_lists(
    epsilons: Sequence[float], deltas: Sequence[float] | None
) -> tuple[list[float], list[float]]:
    if isinstance(epsilons, (str, bytes)) or not isinstance(epsilons, Sequence):
        raise PrivacyParameterError(f"epsilons must be a sequence of numbers, got {epsilons!r}")
    eps = [check_epsilon(e, name=f"epsilons[{i}]", allow_zero=True) for i, e in enumerate(epsilons)]
    if deltas is None:
        return eps, [0.0] * len(eps)
    if isinstance(deltas, (str, bytes)) or not isinstance(deltas, Sequence):
        raise PrivacyParameterError(f"deltas must be a sequence of numbers, got {deltas!r}")
    dels = [check_delta(d, name=f"deltas[{i}]") for i, d in enumerate(deltas)]
    if len(dels) != len(eps):
        raise PrivacyParameterError(
            f"epsilons and deltas must have the same length, got {len(eps)} and {len(dels)}"
        )
    return eps, dels


def basic_composition(
    *, epsilons: Sequence[float], deltas: Sequence[float] | None = None
) -> tuple[float, float]:
    """Sequential composition: ``(sum eps_i, sum delta_i)``, rounded up ([DR14] Theorem 3.16).

    Holds for adaptively chosen mechanisms run on the same data. The sums are exact (rationals)
    before the single upward rounding; the delta is capped at 1 (every mechanism is (eps, 1)-DP).
    An empty composition costs ``(0.0, 0.0)``.
    """
    eps, dels = _validate_lists(epsilons, deltas)
    e = sum((Fraction(x) for x in eps), Fraction(0))
    d = sum((Fraction(x) for x in dels), Fraction(0))
    return up(e), min(up(d), 1.0)


def parallel_composition(
    *,
    epsilons: Sequence[float],
    deltas: Sequence[float] | None = None,
    neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
) -> tuple[float, float]:
    """Parallel composition over disjoint partitions ([McS09] Theorem 4; [DR14] Section 2.3).

    Mechanism i sees only ``D ∩ R_i`` where ``R_1, ..., R_t`` partition the data universe
    (pairwise disjoint, union = everything; the partition must be fixed independently of the
    data), and ``(epsilons[i], deltas[i])`` are its guarantees under ADD/REMOVE neighbours.
    Adding or removing one record changes exactly one part, so the release is
    ``(max eps_i, max delta_i)``-DP under ``"add_remove"``. Under ``"replace"`` a replaced record
    either moves between two parts (one removal and one addition: at most ``eps_a + eps_b``) or
    stays in one part, where the replacement is a removal followed by an addition (group privacy
    for two add/remove steps: ``(2 eps_i, (1 + e^eps_i) delta_i)``, [DR14] Theorem 2.2). Both are
    bounded by ``(2 max eps_i, (1 + e^{max eps_i}) max delta_i)``, which is returned. Rounded up.
    """
    eps, dels = _validate_lists(epsilons, deltas)
    try:
        relation = Neighbouring(neighbouring)
    except ValueError as exc:
        raise PrivacyParameterError(
            f"neighbouring must be 'add_remove' or 'replace', got {neighbouring!r}"
        ) from exc
    if not eps:
        return 0.0, 0.0
    if relation is Neighbouring.ADD_REMOVE:
        return max(eps), max(dels)
    return group_of_two_approx(max(eps), max(dels))


def advanced_composition(
    *, epsilon: float, count: int, delta_slack: float, delta: float = 0.0
) -> float:
    """Advanced composition ([DRV10] Theorem III.3; [DR14] Theorem 3.20): composed epsilon.

    ``count`` = k adaptively chosen (epsilon, delta)-DP mechanisms are together
    ``(eps', k * delta + delta_slack)``-DP with

        eps' = sqrt(2 k ln(1 / delta_slack)) * epsilon + k * epsilon * (e^epsilon - 1).

    Basic composition gives ``(k * epsilon, k * delta)``, which is also ``(k epsilon, k delta +
    delta_slack)``-DP, so the minimum of the two is a valid epsilon for the same total delta:
    this function returns ``min(eps', k * epsilon)``, rounded up. The caller's total delta is
    ``count * delta + delta_slack`` (``delta`` defaults to 0: pure-DP releases).

    The term ``k epsilon (e^epsilon - 1)`` is k times the KL bound
    ``D(Y||Z) <= epsilon (e^epsilon - 1)`` of [DR14] Lemma 3.18 (the drift of the privacy-loss
    martingale); the square-root term is Azuma's inequality ([DR14] Lemma 3.19) with
    ``z = sqrt(2 ln(1/delta_slack))`` and increments bounded by epsilon.
    """
    eps = check_epsilon(epsilon, allow_zero=True)
    k = check_integer(count, name="count", minimum=0)
    slack = check_delta(delta_slack, name="delta_slack", allow_zero=False)
    check_delta(delta, name="delta")
    basic = up(k * Fraction(eps))
    if k == 0 or eps == 0.0:
        return 0.0
    if eps > 700.0 or k > 2**900:  # e^eps or k beyond the double range: basic is smaller
        return basic
    adv = math.sqrt(2.0 * k * math.log(1.0 / slack)) * eps + k * eps * math.expm1(eps)
    return min(float_up(adv), basic)


# Number of terms the windowed KOV sums may visit before giving up with a clear error (about
# 60 microseconds each at 80 digits). The window spans about ten standard deviations of the
# binomial or more, so a standard deviation above _WINDOW_MAX / 8 is refused at once (counts
# above about 6e8 at epsilon 0.01).
_WINDOW_MAX = 100_000
# ln(2 pi) / 2 to 100 digits, for Stirling's series
_HALF_LOG_2PI = Decimal(
    "0.9189385332046727417803297364056176398613974736377834128171515404827656959272603976947432986"
    "359541976"
)
# Stirling's series ln n! = (n + 1/2) ln n - n + ln(2 pi)/2 + sum_i B_2i / (2i (2i - 1) n^(2i-1));
# the error is smaller than the first omitted term, B_18 / (306 n^17) < 0.18 n^-17 (< 1e-41 for
# n >= 256, DLMF 5.11.1 and 5.11.10).
_STIRLING = (
    Fraction(1, 12),
    Fraction(-1, 360),
    Fraction(1, 1260),
    Fraction(-1, 1680),
    Fraction(1, 1188),
    Fraction(-691, 360360),
    Fraction(1, 156),
    Fraction(-3617, 122400),
)
_STIRLING_ERR = Decimal("1e-41")


def _log_factorial(n: int) -> Decimal:
    """``ln n!`` in the current decimal context (exact product below 256, else Stirling)."""
    if n < 256:
        return Decimal(math.factorial(n)).ln()
    d = Decimal(n)
    out = (d + Decimal("0.5")) * d.ln() - d + _HALF_LOG_2PI
    power = d
    for c in _STIRLING:
        out += Decimal(c.numerator) / (Decimal(c.denominator) * power)
        power *= d * d
    return out


def _log_binom(k: int, j: int) -> Decimal:
    """``ln C(k, j)`` to within about ``3e-41`` (absolute) in the current decimal context."""
    return _log_factorial(k) - _log_factorial(j) - _log_factorial(k - j)


def _kov_window(
    eps: Decimal, count: int, log_tail: Decimal
) -> tuple[int, Decimal, Decimal, Decimal]:
    """Where to start the KOV sums: ``(j0, P_j0, Q_j0, T)``.

    ``P_j = C(k, j) p^(k-j) (1-p)^j`` and ``Q_j = P_j e^{-(k - 2j) eps}`` with
    ``p = e^eps / (1 + e^eps)`` are the masses of "j coordinates disagree" under the two
    randomized-response outputs. The terms with ``j < j0`` are not visited: their total P-mass is
    at most ``T`` (and their Q-mass too, since ``Q_j <= P_j`` for ``j < k/2``), a rigorous bound.
    For ``i <= j0`` below the mode the ratio ``P_{i-1} / P_i = i e^eps / (k - i + 1)`` is at most
    ``rho = j0 e^eps / (k - j0 + 1) < 1``, so ``sum_{i < j0} P_i <= P_j0 rho / (1 - rho)``.
    ``j0`` is the largest index (found by bisection) at which that bound is below
    ``e^log_tail``; it is 0 (nothing skipped, ``T = 0``) when no such index exists.
    """
    log1pe = eps + (1 + (-eps).exp()).ln()  # ln(1 + e^eps)
    e_eps = eps.exp()
    p_dis = 1 / (1 + e_eps)
    if 64 * count * p_dis * (1 - p_dis) > _WINDOW_MAX * _WINDOW_MAX:
        raise _too_many_terms(count)

    def log_p(j: int) -> Decimal:
        return _log_binom(count, j) + (count - j) * eps - count * log1pe

    def bound(j: int) -> Decimal | None:
        rho = j * e_eps / (count - j + 1)
        if rho >= 1:
            return None
        return log_p(j) + (rho / (1 - rho)).ln()

    def skippable(j: int) -> bool:  # j = 0 skips nothing, so it always qualifies
        b = bound(j) if j > 0 else None
        return j == 0 or (b is not None and b <= log_tail)

    # [0, count // 2 + 1]: the top is one past the last candidate, so count // 2 is tried too
    j0 = search_int(skippable, 0, count // 2 + 1, holds="below", what="tail index")
    lp = log_p(j0)
    p0 = lp.exp()
    q0 = (lp - (count - 2 * j0) * eps).exp()
    if j0 == 0:
        return 0, p0, q0, Decimal(0)
    rho = j0 * e_eps / (count - j0 + 1)
    tail = p0 * rho / (1 - rho) * (1 + Decimal("1e-30"))  # + Stirling and rounding slack
    return j0, p0, q0, tail


def _context() -> decimal.Context:
    return decimal.Context(
        prec=_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, rounding=decimal.ROUND_HALF_EVEN
    )


def _too_many_terms(count: int) -> PrivacyParameterError:
    return PrivacyParameterError(
        f"count={count} is too large for the exact optimal composition at this epsilon (more "
        f"than {_WINDOW_MAX} non-negligible binomial terms); use basic_composition, "
        "advanced_composition or the PLD accountant"
    )


def _rr_delta(epsilon: float, count: int, target_epsilon: float) -> Decimal:
    """An upper bound on delta(target) of k-fold binary randomized response (Decimal).

    The privacy loss of the k-fold composition takes the value ``L_j = (k - 2j) eps`` when j of
    the k coordinates disagree; j is Binomial(k, 1 - p) under P and Binomial(k, p) under Q. The
    hockey-stick divergence is ``sum_{j: L_j > t} P_j - e^t Q_j``. The terms below the window of
    :func:`_kov_window` add at most its ``T`` (their Q part only lowers delta), which is added.
    """
    with decimal.localcontext(_context()):
        eps = Decimal(epsilon)  # exact: every double is a finite decimal
        t = Decimal(target_epsilon)
        j, pj, qj, tail = _kov_window(eps, count, Decimal(-150))
        e_eps = eps.exp()
        e_minus = (-eps).exp()
        a = tail
        b = Decimal(0)
        start = j
        while j <= count and (count - 2 * j) * eps > t:
            if j - start > _WINDOW_MAX:
                raise _too_many_terms(count)
            a += pj
            b += qj
            pj = pj * (count - j) / (j + 1) * e_minus
            qj = qj * (count - j) / (j + 1) * e_eps
            j += 1
        return a - t.exp() * b


def optimal_composition_delta(*, epsilon: float, count: int, target_epsilon: float) -> float:
    """Smallest delta such that every k-fold composition of epsilon-DP is (target, delta)-DP.

    [KOV15] Theorem 3.3 shows that k-fold binary randomized response with parameter epsilon is
    the worst case: its privacy region is exactly the composed one. So the answer is the
    hockey-stick divergence of that pair at ``target_epsilon``::

        delta(t) = sum_{j : (k - 2j) eps > t} C(k, j) (e^{(k-j) eps} - e^{t + j eps})
                   / (1 + e^eps)^k

    which at ``t = (k - 2i) eps`` is the theorem's ``delta_i``. Evaluated with 80-digit decimals
    and rounded up.
    """
    eps = check_epsilon(epsilon, allow_zero=True)
    k = check_integer(count, name="count", minimum=0)
    t = check_epsilon(target_epsilon, name="target_epsilon", allow_zero=True)
    if k == 0 or eps == 0.0 or Fraction(t) >= k * Fraction(eps):  # exact comparison
        return 0.0
    try:
        val = _rr_delta(eps, k, t)
    except (decimal.Overflow, decimal.InvalidOperation):
        # e^eps or e^t beyond the decimal exponent range (eps or t above about 2e18): the
        # trivial bound
        return 1.0
    out = up(Fraction(val + _MARGIN))
    return min(max(out, 0.0), 1.0)


def optimal_composition(
    *, epsilon: float, count: int, delta: float, release_delta: float = 0.0
) -> float:
    """Exact optimal composition of ``count`` (epsilon, release_delta)-DP mechanisms ([KOV15]).

    Returns the smallest ``eps'`` such that every k-fold adaptive composition is
    ``(eps', delta)``-DP. By [KOV15] Theorem 3.3 the composed mechanisms satisfy
    ``(eps', 1 - (1 - release_delta)^k (1 - delta_RR(eps')))``-DP and nothing smaller, where
    ``delta_RR`` is the privacy profile of k-fold randomized response (see
    :func:`optimal_composition_delta`). On the interval between two consecutive privacy-loss
    values ``L_{j+1} <= eps' <= L_j`` the profile is ``A_j - e^{eps'} B_j`` with
    ``A_j = sum_{i<=j} P_i`` and ``B_j = sum_{i<=j} Q_i``, so the answer is the closed form
    ``eps' = ln((A_j - delta_RR) / B_j)`` on the first interval where the profile crosses the
    target. Everything is evaluated with 80-digit decimals (no overflow for any count; the count
    is used as an exact integer) and the result is rounded up; it is never larger than basic
    composition ``k * epsilon``. Only the binomial terms whose mass is not negligible are visited
    (the skipped mass is bounded and added, see :func:`_kov_window`), so the cost grows like the
    binomial's standard deviation ``sqrt(k) / (2 cosh(eps / 2))``, not like ``k``; beyond
    ``10^5`` visited terms a :class:`~dpkit.errors.PrivacyParameterError` says so.

    Returns ``inf`` when ``delta < 1 - (1 - release_delta)^k`` (no epsilon is certified).
    """
    eps = check_epsilon(epsilon, allow_zero=True)
    k = check_integer(count, name="count", minimum=0)
    target_delta = check_delta(delta)
    d0 = check_delta(release_delta, name="release_delta")
    basic = up(k * Fraction(eps))
    with decimal.localcontext(_context()):
        # delta_RR must not exceed 1 - (1 - delta) / (1 - d0)^k.
        target = 1 - (1 - Decimal(target_delta)) / (1 - Decimal(d0)) ** k
        if target < 0:
            return math.inf
        if k == 0 or eps == 0.0:
            return 0.0
        if target == 0:
            return basic
        try:
            answer = _kov_epsilon(eps, k, target)
        except (decimal.Overflow, decimal.InvalidOperation):
            return basic  # exponents beyond the decimal range (eps * k above about 2e18)
        if answer is None:  # delta(0) <= target: the composition is (0, delta)-DP
            return 0.0
        result = up(Fraction(answer + _MARGIN * (1 + abs(answer))))
    return min(result, basic)


def _kov_epsilon(eps: float, k: int, target: Decimal) -> Decimal | None:
    """The KOV crossing of the randomized-response profile with ``target`` (None: below 0)."""
    dec_eps = Decimal(eps)
    # skip the binomial terms whose total mass is below target * 1e-40 (their bound T is
    # added to A, which can only raise the answer)
    log_tail = (target.ln() if target < 1 else Decimal(0)) - Decimal(92)
    j, pj, qj, tail = _kov_window(dec_eps, k, log_tail)
    e_eps = dec_eps.exp()
    e_minus = (-dec_eps).exp()
    a = tail
    b = Decimal(0)
    start = j
    answer: Decimal | None = None
    while 2 * j < k:
        if j - start > _WINDOW_MAX:
            raise _too_many_terms(k)
        high = (k - 2 * j) * dec_eps  # L_j > 0
        a += pj
        b += qj
        low = max(high - 2 * dec_eps, Decimal(0))
        if a - low.exp() * b > target:  # the profile crosses the target inside [low, high]
            answer = ((a - target) / b).ln() if b > 0 else high
            answer = min(max(answer, low), high)
            break
        pj = pj * (k - j) / (j + 1) * e_minus
        qj = qj * (k - j) / (j + 1) * e_eps
        j += 1
    return answer
