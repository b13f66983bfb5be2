"""Optimal (epsilon, delta) of composing bounded-range mechanisms (exponential mechanisms).

A mechanism is epsilon-bounded-range (BR) when, for every pair of neighbours, its privacy loss
``L(y) = ln(P(y) / Q(y))`` takes values in an interval ``[t - epsilon, t]`` of width epsilon for
some ``t`` in ``[0, epsilon]`` (Durfee and Rogers 2019). The exponential mechanism at epsilon is
epsilon-BR, and so are Gumbel report-noisy-max and every round of peeling / one-shot Gumbel
top-k (:func:`dpkit.accounting.zcdp.is_bounded_range`). Every epsilon-BR pair is epsilon-DP, but
k of them compose to much less than k-fold epsilon-DP (the Kairouz-Oh-Viswanath optimum of
:func:`~dpkit.accounting.composition.optimal_composition`).

Reduction (Dong, Durfee and Rogers 2020, "Optimal differential privacy composition for
exponential mechanisms", ICML, Section 4). A pair whose loss lies in ``[t - epsilon, t]`` is a
post-processing of the binary pair ``RR_t`` with losses ``t`` and ``t - epsilon``::

    P(a) = p_t = (e^eps - e^t) / (e^eps - 1),   Q(a) = q_t = p_t e^-t   (and b the rest).

(Mix the two outputs with the weights that reproduce ``P(y), Q(y)``; they are non-negative
exactly because ``L(y)`` lies between the endpoints.) Swapping P and Q maps ``t`` to
``epsilon - t``, so the family is closed under the swap and one direction suffices.

Non-adaptive composition (the k mechanisms fixed in advance, e.g. ``count`` independent
exponential mechanisms on the same scores): the worst case is k copies of one ``RR_t``
([DDR20], Section 5), whose hockey-stick divergence at ``e^x`` is a finite binomial sum::

    delta_na(x) = max_{t in [0, eps]} max_l [ P(Bin(k, p_t) >= l) - e^x P(Bin(k, q_t) >= l) ]

(the optimal rejection set is ``{L > x}``, an upper set in the number of ``a`` outcomes).

Adaptive composition (each mechanism chosen after seeing the earlier outputs: peeling top-k,
one-shot Gumbel top-k which equals it, EM chains): the adversary picks ``t`` per step from the
history, and [DDR20] show this is strictly worse than the non-adaptive value. The optimum is the
recursion (condition on the first output; ``V`` is the hockey-stick divergence as a function of
the remaining threshold)::

    V_0(x) = max(0, 1 - e^x)
    V_m(x) = sup_{t in [0, eps]} [ p_t V_{m-1}(x - t) + (1 - p_t) V_{m-1}(x - t + eps) ]

and ``delta_ad(x) = V_k(x)``.

Certified upper bounds. Non-adaptive: the supremum over ``t`` is bounded on a grid of cells
``[t_a, t_b]`` using monotonicity only: ``p_t`` decreases in ``t``, so ``Bin(k, p_t)`` is
stochastically below ``Bin(k, p_{t_a})``, and the weight ``(1 - e^(x - L_N(t)))_+`` is at most
its value at ``t_b`` and non-decreasing in N (at least 2048 cells; the sum is cheap).
Adaptive: the recursion runs on the grid ``x = j h``, ``h = eps / T``. Each ``V_m`` is
non-increasing in ``x`` and convex in ``e^x`` (a supremum of hockey-stick divergences
``P(S) - e^x Q(S)``), so between two grid points it lies below the chord, in ``e^x``, of its
grid bounds; on each t-cell the recursion applied to those chords is ``c0 + c1 / s + c2 s`` in
``s = e^t``, maximised exactly (an end of the cell or ``sqrt(c1 / c2)``). ``V_m = 0`` for
``x >= m eps``. The same sweeps at the grid values of ``t`` give *lower* bounds (a particular
adversary), returned by :func:`bounded_range_bracket` so tests can see how tight the bounds
are. Floating point: every value lies in ``[0, 1]`` and each step adds a few roundings of at
most ``2**-53`` (and a second-order error, far smaller, in the location of the interior
maximum); the returned delta adds ``(k + 4) 2**-44`` (the safe side), the returned epsilon is
the smallest grid threshold whose certified delta is at most the target, rounded up.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dpkit._numeric.rounding import float_up, up
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_integer,
)
from dpkit.accounting.zcdp import is_bounded_range
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    ApproxDpEvent,
    DpEvent,
    ExponentialMechanismEvent,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
)

__all__ = [
    "bounded_range_bracket",
    "bounded_range_composition",
    "bounded_range_composition_delta",
    "bounded_range_event",
]

_MARGIN_PER_STEP = 2.0**-44
_MAX_COUNT = 4096
_AUTO_WORK = 5 * 10**6  # the default resolution keeps the adaptive recursion near this
_NONADAPTIVE_CELLS = 2048  # the binomial formula is cheap: always at least this fine in t
_MAX_WORK = 10**8  # grid cells visited by the adaptive recursion (about a minute)


def _margin(k: int) -> float:
    return (k + 4) * _MARGIN_PER_STEP


def _weights(eps: float, cells: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``p_t`` and ``q_t`` at the grid points ``t = i eps / cells``, ``i = 0..cells``."""
    t = np.arange(cells + 1, dtype=np.float64) * (eps / cells)
    t[-1] = eps
    em1 = math.expm1(eps)
    # p_t = (e^eps - e^t) / (e^eps - 1) = (expm1(eps) - expm1(t)) / expm1(eps)
    p = np.clip((em1 - np.expm1(t)) / em1, 0.0, 1.0)
    q = np.clip(p * np.exp(-t), 0.0, 1.0)
    p[0], q[0], p[-1], q[-1] = 1.0, 1.0, 0.0, 0.0
    return p, q


def _check(epsilon: float, count: int, resolution: int | None) -> tuple[float, int, int]:
    eps = check_epsilon(epsilon)
    k = check_integer(count, name="count", minimum=0, maximum=_MAX_COUNT)
    if resolution is None:  # about 5e6 grid cells for the adaptive recursion
        cells = int(min(256, max(8, math.sqrt(_AUTO_WORK / (2 * max(k, 1) ** 2)))))
    else:
        cells = check_integer(resolution, name="resolution", minimum=2, maximum=1 << 16)
    if not eps < 700.0:
        raise PrivacyParameterError(
            f"epsilon must be below 700 for bounded-range composition, got {epsilon!r}; "
            "use basic composition (count * epsilon) instead"
        )
    return eps, k, cells


def _nonadaptive(eps: float, k: int, x: float, cells: int) -> tuple[float, float]:
    """(lower, upper) of ``delta_na(x)`` (module docstring), before the rounding margin.

    ``delta(t) = E[(1 - e^(x - L_N(t)))_+]`` with ``N ~ Bin(k, p_t)`` and ``L_N(t) = k t -
    (k - N) eps``. On a cell the weight ``(1 - e^(x - L_N(t)))_+`` is at most its value at
    ``t_b`` and non-decreasing in N, so the expectation is at most the one under
    ``Bin(k, p_{t_a})`` (stochastically larger).
    """
    from scipy.stats import binom  # deferred: scipy.stats costs ~0.6 s to import

    p, _ = _weights(eps, cells)
    t = np.arange(cells + 1, dtype=np.float64) * (eps / cells)
    t[-1] = eps
    n = np.arange(k + 1, dtype=np.float64)
    pmf = binom.pmf(n[None, :], k, p[:, None])  # (cells + 1, k + 1)
    loss = k * t[:, None] - (k - n[None, :]) * eps
    with np.errstate(over="ignore"):
        weight = np.maximum(0.0, -np.expm1(np.minimum(x - loss, 700.0)))
    at_points = (pmf * weight).sum(axis=1)
    upper_cells = (pmf[:-1] * weight[1:]).sum(axis=1)
    return max(0.0, float(at_points.max())), max(0.0, float(upper_cells.max()))


def _cell_max(
    lo_a: npt.NDArray[np.float64],
    hi_a: npt.NDArray[np.float64],
    lo_b: npt.NDArray[np.float64],
    hi_b: npt.NDArray[np.float64],
    eps: float,
    t_a: float,
    t_b: float,
) -> npt.NDArray[np.float64]:
    """``max_{t in [t_a, t_b]} p_t A(t) + (1 - p_t) B(t)`` with A, B the chords in ``e^y`` (module
    docstring): with ``s = e^t`` the objective is ``c0 + c1 / s + c2 s``, whose maximum on the
    cell is at an end or at ``sqrt(c1 / c2)``; the three candidates are evaluated directly."""
    em1 = math.expm1(eps)
    r_a, r_b = math.exp(-t_a), math.exp(-t_b)
    den = r_a - r_b
    d_a, d_b = hi_a - lo_a, hi_b - lo_b

    def value(s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        w = np.clip((1.0 / s - r_b) / den, 0.0, 1.0)
        p = np.clip((em1 - np.expm1(np.log(s))) / em1, 0.0, 1.0)
        return p * (lo_a + d_a * w) + (1.0 - p) * (lo_b + d_b * w)

    s_a, s_b = math.exp(t_a), math.exp(t_b)
    # g(s) = c0 + c1 / s + c2 s with a = a0 + a1 / s, b = b0 + b1 / s
    a1, b1 = d_a / den, d_b / den
    a0, b0 = lo_a - d_a * r_b / den, lo_b - d_b * r_b / den
    c1 = b1 + (em1 + 1.0) * (a1 - b1) / em1
    c2 = -(a0 - b0) / em1
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = c1 / c2
    inner = np.sqrt(np.where(ratio > 0, ratio, s_a * s_a))
    inner = np.clip(np.nan_to_num(inner, nan=s_a, posinf=s_b), s_a, s_b)
    best = np.maximum(value(np.full(lo_a.shape, s_a)), value(np.full(lo_a.shape, s_b)))
    return np.asarray(np.maximum(best, value(inner)), dtype=np.float64)


def _adaptive_curves(
    eps: float, k: int, cells: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Lower and upper bounds of ``V_k(j h)`` for ``j = 0..k cells`` (module docstring).

    Upper: ``V_{m-1}`` is convex in ``e^y`` (a supremum of hockey-stick divergences ``P(S) -
    e^y Q(S)``), so between grid points it lies below the chord of its grid bounds; the sup over
    each t-cell of the recursion with those chords is found exactly (:func:`_cell_max`). Lower:
    the recursion at the grid values of t themselves (a particular adversary).
    """
    if k * k * cells * cells * 2 > _MAX_WORK:
        raise PrivacyParameterError(
            f"count {k} at resolution {cells} is too large for the adaptive bounded-range "
            "recursion; lower the resolution or use the zCDP accountant (epsilon^2/8 per "
            "mechanism)"
        )
    p, _ = _weights(eps, cells)
    h = eps / cells
    j = np.arange(-k * cells, k * cells + 1)
    x = j * h
    base = np.where(x < 0, -np.expm1(np.minimum(x, 0.0)), 0.0)
    upper = base.copy()
    lower = base.copy()
    n = j.size
    off = cells + 1
    for m in range(1, k + 1):
        # pad: below the range V <= 1 (never read for j >= 0 after k steps), above it V = 0
        up_pad = np.concatenate([np.ones(off), upper, np.zeros(off)])
        lo_pad = np.concatenate([np.zeros(off), lower, np.zeros(off)])
        new_up = np.zeros(n)
        new_lo = np.zeros(n)
        for i in range(cells):
            # t in [i h, (i + 1) h]: x - t between grid points j - i - 1 and j - i
            lo_a = up_pad[off - i - 1 : off - i - 1 + n]
            hi_a = up_pad[off - i : off - i + n]
            lo_b = up_pad[off - i - 1 + cells : off - i - 1 + cells + n]
            hi_b = up_pad[off - i + cells : off - i + cells + n]
            t_b = eps if i == cells - 1 else (i + 1) * h
            np.maximum(new_up, _cell_max(lo_a, hi_a, lo_b, hi_b, eps, i * h, t_b), out=new_up)
        for i in range(cells + 1):
            a = lo_pad[off - i : off - i + n]
            b = lo_pad[off - i + cells : off - i + cells + n]
            np.maximum(new_lo, p[i] * a + (1.0 - p[i]) * b, out=new_lo)
        new_up[j >= m * cells] = 0.0  # the loss never exceeds m eps
        new_lo[j >= m * cells] = 0.0
        upper, lower = np.minimum(new_up, 1.0), new_lo
    start = k * cells
    return lower[start:], upper[start:]


def bounded_range_bracket(
    *,
    epsilon: float,
    count: int,
    target_epsilon: float,
    adaptive: bool = True,
    resolution: int | None = None,
) -> tuple[float, float]:
    """``(lower, upper)`` bounds of the optimal delta at ``target_epsilon`` (module docstring).

    The exact optimum lies between them; ``upper`` is what
    :func:`bounded_range_composition_delta` returns (before its rounding margin) and ``lower``
    is attained by a particular pair of neighbouring binary mechanisms.
    """
    eps, k, cells = _check(epsilon, count, resolution)
    x = check_epsilon(target_epsilon, name="target_epsilon", allow_zero=True)
    if not isinstance(adaptive, bool):
        raise PrivacyParameterError(f"adaptive must be a bool, got {adaptive!r}")
    if k == 0 or x >= k * eps:
        return 0.0, 0.0
    if not adaptive:
        return _nonadaptive(eps, k, x, max(cells, _NONADAPTIVE_CELLS))
    lower, upper = _adaptive_curves(eps, k, cells)
    h = eps / cells
    j_low = math.floor(x / h)  # grid point at or below x: V there is at least V(x)
    j_high = min(math.ceil(x / h), lower.size - 1)  # grid point at or above: below V(x)
    while j_low > 0 and j_low * h > x:
        j_low -= 1
    while j_high * h < x and j_high < lower.size - 1:
        j_high += 1
    lo = float(lower[j_high]) if j_high * h >= x else 0.0
    return lo, float(upper[min(j_low, upper.size - 1)])


def bounded_range_composition_delta(
    *,
    epsilon: float,
    count: int,
    target_epsilon: float,
    adaptive: bool = True,
    resolution: int | None = None,
) -> float:
    """Smallest certified delta with which ``count`` epsilon-BR mechanisms are
    ``(target_epsilon, delta)``-DP ([DDR20]; module docstring), rounded up.

    ``adaptive=True`` (the default) holds for mechanisms chosen from earlier outputs (peeling,
    one-shot Gumbel top-k, chains of exponential mechanisms); ``adaptive=False`` only for
    mechanisms fixed in advance. Never above the generic optimum for epsilon-DP mechanisms.
    """
    _, high = bounded_range_bracket(
        epsilon=epsilon,
        count=count,
        target_epsilon=target_epsilon,
        adaptive=adaptive,
        resolution=resolution,
    )
    k = check_integer(count, name="count", minimum=0, maximum=_MAX_COUNT)
    if k == 0 or target_epsilon >= k * epsilon:  # the loss never exceeds k epsilon
        return 0.0
    return min(1.0, up(high + _margin(k)))


def bounded_range_composition(
    *,
    epsilon: float,
    count: int,
    delta: float,
    adaptive: bool = True,
    resolution: int | None = None,
) -> float:
    """Smallest certified epsilon with which ``count`` epsilon-BR mechanisms are
    ``(epsilon', delta)``-DP ([DDR20]; module docstring), rounded up; at most ``count * epsilon``.

    Searched over the thresholds ``j epsilon / resolution`` (the answer is the first whose
    certified delta is at most ``delta``). ``resolution`` (cells per epsilon; default: 256,
    fewer for large counts so the adaptive recursion stays near 5e6 grid cells) trades time
    for tightness; every resolution gives a valid bound.
    """
    eps, k, cells = _check(epsilon, count, resolution)
    d = check_delta(delta)
    if not isinstance(adaptive, bool):
        raise PrivacyParameterError(f"adaptive must be a bool, got {adaptive!r}")
    basic = up(k * eps * (1 + 2.0**-52)) if k else 0.0
    if k == 0:
        return 0.0
    h = eps / cells
    margin = _margin(k)
    if adaptive:
        _, upper = _adaptive_curves(eps, k, cells)
        ok = np.nonzero(upper + margin <= d)[0]
        if ok.size == 0:
            return basic
        return min(basic, float_up(float(ok[0]) * h))

    def certified(j: int) -> bool:
        return _nonadaptive(eps, k, j * h, max(cells, _NONADAPTIVE_CELLS))[1] + margin <= d

    lo, hi = 0, k * cells  # certified(hi) holds: delta is 0 at k eps
    if certified(0):
        return 0.0
    while hi - lo > 1:  # certified is monotone in j (delta_na decreases in x)
        mid = (lo + hi) // 2
        if certified(mid):
            hi = mid
        else:
            lo = mid
    return min(basic, float_up(hi * h))


def bounded_range_event(
    event: DpEvent, *, delta: float, adaptive: bool = True, resolution: int | None = None
) -> ApproxDpEvent:
    """The ``(epsilon', delta)`` event of a repeated bounded-range event, for approximate-DP
    budgets: ``event`` is ``SelfComposedEvent`` of an exponential-mechanism event (or
    Gumbel report-noisy-max), such as :attr:`NoisyTopK.event` with ``method="gumbel"``.

    The per-mechanism width is ``epsilon + 4 pmf_slack`` (the floating-point slack moves each
    log-probability by at most ``2 pmf_slack``). ``adaptive`` as in
    :func:`bounded_range_composition`.
    """
    if not isinstance(event, SelfComposedEvent) or not is_bounded_range(event.event):
        raise PrivacyParameterError(
            "bounded_range_event needs a SelfComposedEvent of an exponential-mechanism event "
            f"(or Gumbel report-noisy-max), got {type(event).__name__}"
        )
    inner = event.event
    assert isinstance(inner, (ExponentialMechanismEvent, ReportNoisyMaxEvent))
    width = float_up(inner.epsilon + 4 * inner.pmf_slack)
    eps_total = bounded_range_composition(
        epsilon=width, count=event.count, delta=delta, adaptive=adaptive, resolution=resolution
    )
    return ApproxDpEvent(epsilon=eps_total, delta=delta)
