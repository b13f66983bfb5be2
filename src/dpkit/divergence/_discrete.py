"""Divergences between two distributions on the same finite set (exact up to rounding).

Definitions follow Dwork and Roth, "The Algorithmic Foundations of Differential Privacy",
Section 3.5.1 (Definitions 3.5 and 3.6), and Renyi (1961) / Mironov (2017) for the Renyi
divergence. A ratio with zero denominator and positive numerator is +inf.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp

from dpkit._numeric.validation import (
    check_delta,
    check_finite,
    check_positive,
    check_real_array,
)
from dpkit.errors import PrivacyParameterError

__all__ = [
    "approx_max_divergence",
    "hockey_stick_divergence",
    "kl_divergence",
    "max_divergence",
    "renyi_divergence",
    "statistical_distance",
]

FloatArray = NDArray[np.float64]


def _pmfs(p: ArrayLike, q: ArrayLike) -> tuple[FloatArray, FloatArray]:
    pp = check_real_array(p, "p", low=0.0, high=1.0)
    qq = check_real_array(q, "q", low=0.0, high=1.0)
    if pp.shape != qq.shape:
        raise PrivacyParameterError(f"p and q differ in shape: {pp.shape} vs {qq.shape}")
    for name, v in (("p", pp), ("q", qq)):
        total = math.fsum(v.tolist())
        if not abs(total - 1.0) <= 1e-9:
            raise PrivacyParameterError(f"{name} must sum to 1, sums to {total!r}")
    return pp, qq


def kl_divergence(*, p: ArrayLike, q: ArrayLike) -> float:
    """``D(P || Q) = sum_x P(x) ln(P(x) / Q(x))`` (Dwork-Roth Definition 3.5), in nats.

    Terms with ``P(x) = 0`` contribute 0; ``P(x) > 0 = Q(x)`` makes it +inf.
    """
    pp, qq = _pmfs(p, q)
    s = pp > 0
    if np.any(qq[s] == 0):
        return math.inf
    terms = pp[s] * (np.log(pp[s]) - np.log(qq[s]))
    return max(0.0, math.fsum(terms.tolist()))


def max_divergence(*, p: ArrayLike, q: ArrayLike) -> float:
    """``D_inf(P || Q) = max_{S in Supp(P)} ln(P(S) / Q(S)) = max_{x: P(x) > 0} ln(P(x)/Q(x))``
    (Dwork-Roth Definition 3.6; a ratio of sums never exceeds the largest ratio)."""
    pp, qq = _pmfs(p, q)
    s = pp > 0
    if np.any(qq[s] == 0):
        return math.inf
    return float(np.max(np.log(pp[s]) - np.log(qq[s])))


def hockey_stick_divergence(*, p: ArrayLike, q: ArrayLike, epsilon: float) -> float:
    """``H_{e^eps}(P || Q) = sup_S P(S) - e^eps Q(S) = sum_x (P(x) - e^eps Q(x))_+``.

    A pair of neighbouring output distributions satisfies (eps, delta)-DP in this direction iff
    this is at most delta. Any real epsilon.
    """
    eps = check_finite(epsilon, "epsilon")
    pp, qq = _pmfs(p, q)
    return _hockey(pp, qq, eps)


def _hockey(pp: FloatArray, qq: FloatArray, eps: float) -> float:
    e = math.exp(min(eps, 700.0))
    terms = pp - e * qq
    return max(0.0, math.fsum(terms[terms > 0].tolist()))


def approx_max_divergence(*, p: ArrayLike, q: ArrayLike, delta: float) -> float:
    """``D_inf^delta(P || Q) = max_{S in Supp(P), P(S) >= delta} ln((P(S) - delta) / Q(S))``
    (Dwork-Roth Definition 3.6), computed exactly.

    For every real eps, ``D_inf^delta <= eps`` iff ``P(S) - delta <= e^eps Q(S)`` for all S iff
    ``H_{e^eps}(P || Q) <= delta``. ``gamma -> H_gamma`` is continuous, piecewise linear and
    decreasing, so the divergence is ``ln gamma*`` with ``H_{gamma*} = delta`` (the smallest
    such gamma), found exactly between consecutive likelihood ratios. It can be negative (e.g.
    ``D_inf^delta(P || P) = ln(1 - delta)``); it is +inf if ``P(Q = 0) > delta``.
    """
    d = check_delta(delta)
    pp, qq = _pmfs(p, q)
    s = pp > 0
    pp = pp[s]
    qq = qq[s]
    p_inf = math.fsum(pp[qq == 0].tolist())
    if p_inf > d:
        return math.inf
    fin = qq > 0
    pp = pp[fin]
    qq = qq[fin]
    ratios = pp / qq
    order = np.argsort(-ratios)
    r = ratios[order]
    pc = np.cumsum(pp[order])
    qc = np.cumsum(qq[order])
    # On gamma in [r_{j+1}, r_j] the outcomes 0..j are active: H = p_inf + pc_j - gamma qc_j.
    for j in range(r.size):
        lo = r[j + 1] if j + 1 < r.size else 0.0
        h_lo = p_inf + pc[j] - lo * qc[j]
        if h_lo >= d:  # H crosses delta inside [lo, r_j]
            gamma = (p_inf + pc[j] - d) / qc[j]
            gamma = min(max(gamma, lo), float(r[j]))
            return math.log(gamma) if gamma > 0 else -math.inf
    return -math.inf  # pragma: no cover - H(0) = P(Supp) = 1 > delta


def statistical_distance(*, p: ArrayLike, q: ArrayLike) -> float:
    """``Delta(P, Q) = max_S |P(S) - Q(S)| = (1/2) sum_x |P(x) - Q(x)|`` (total variation)."""
    pp, qq = _pmfs(p, q)
    return min(1.0, 0.5 * math.fsum(np.abs(pp - qq).tolist()))


def renyi_divergence(*, p: ArrayLike, q: ArrayLike, alpha: float) -> float:
    """``D_alpha(P || Q) = (1/(alpha - 1)) ln sum_x P(x)^alpha Q(x)^(1 - alpha)`` (Renyi 1961).

    ``alpha = 1`` gives KL, ``alpha = inf`` the max divergence; alpha must be positive.
    Evaluated with a log-sum-exp, or near ``alpha = 1`` (``|alpha - 1| max|ln(P/Q)| <= 1``) as
    ``log1p(sum P expm1((alpha - 1) ln(P/Q))) / (alpha - 1)``; rounded up by a bound on the
    evaluation error (a divergence is never understated).
    """
    a = check_positive(alpha, "alpha", allow_inf=True)
    if a == 1.0:
        return kl_divergence(p=p, q=q)
    if math.isinf(a):
        return max_divergence(p=p, q=q)
    pp, qq = _pmfs(p, q)
    s = pp > 0
    if a > 1.0 and np.any(qq[s] == 0):
        return math.inf
    both = s & (qq > 0)
    if not np.any(both):
        return math.inf
    lp, lq = np.log(pp[both]), np.log(qq[both])
    t = a - 1.0
    loss = lp - lq  # ln(P/Q) on the common support
    if abs(t) * float(np.max(np.abs(loss))) <= 1.0:
        # near alpha = 1: sum P^a Q^(1-a) = sum P e^(t l) = 1 + sum P expm1(t l) - P(Q = 0)
        # (P, Q normalised; P(Q = 0) only for alpha < 1), so
        # D = log1p(sum P expm1(t l) - P(Q = 0)) / t keeps its relative precision as t -> 0
        # where ln(sum ...) / t loses it all (Renyi divergence is continuous at 1, = KL).
        # Each term errs by at most 4 u relative (l = ln P - ln Q to u (|ln P| + |ln Q|),
        # times |t| <= 1 / max|l| of the exponent); the bound below rounds up.
        terms = pp[both] * np.expm1(t * loss)
        p_off = math.fsum(pp[s & ~(qq > 0)].tolist())
        x = math.fsum(terms.tolist()) - p_off
        err = (
            8.0
            * 2.0**-53
            * (
                math.fsum(np.abs(terms).tolist())
                + p_off
                + abs(t) * math.fsum((pp[both] * (np.abs(lp) + np.abs(lq))).tolist())
            )
        )
        if x <= -1.0:  # pragma: no cover - needs P mass ~1 where Q = 0 with alpha < 1
            return math.inf
        val = math.log1p(x) / t
        slack = err / (abs(t) * max(1.0 + x - err, 2.0**-1022))
        return max(0.0, math.nextafter(val + slack + 4.0 * 2.0**-53 * abs(val), math.inf))
    logs = a * lp + (1.0 - a) * lq
    val = float(logsumexp(logs)) / t
    # logsumexp errs by a few u times the largest |term| (absolute in the log)
    slack = 8.0 * 2.0**-53 * (float(np.max(np.abs(logs))) + 1.0) / abs(t)
    return max(0.0, math.nextafter(val + slack, math.inf))
