"""Confidence intervals at their stated level for statistics built from two noisy integers.

A mean and a sum that shares a mean's measures are functions of two independently noised
integers: the centred sum ``T' = t + Z_T`` (in lattice steps) and the count ``N' = n + Z_N``.
A union bound (each at ``1 - alpha/2``) covers far more often than claimed (99.4-99.8% at a
claimed 95%); the intervals here use the joint law of ``(Z_T, Z_N)`` instead.

Exact law of a linear combination. For real ``a <= b`` and an integer ``H``::

    P(max(|Z_T - a Z_N|, |Z_T - b Z_N|) > H)
        = sum_k P(Z_N = k) P(Z_T not in [max(a k, b k) - H, min(a k, b k) + H])

(independence of the two noises). :func:`joint_halfwidth` returns the smallest ``H`` whose
certified upper bound on that probability is at most ``alpha``. With ``a = b`` it is the exact
law of ``Z_T - a Z_N``: a shared sum ``S' = T' + c N'`` has error ``Z_T + c Z_N``, so ``[S' -
H, S' + H]`` with ``H = joint_halfwidth(-c, -c)`` covers with probability at least ``1 -
alpha``, and no more than the lattice's discreteness requires.

Mean (Fieller's construction, Fieller 1954, made exact for the noise law). For a candidate
centred mean ``r`` (steps), ``D(r) = T' - r N'``. At the true ``r* = t / n`` (``n >= 1``),
``D(r*) = Z_T - r* Z_N`` exactly, whatever ``n``: a pivot. So the set ``{r : |D(r)| <=
h(r)}``, with ``h(r)`` the ``1 - alpha`` quantile of ``|Z_T - r Z_N|``, contains ``r*`` with
probability at least ``1 - alpha``, and the interval is its hull within the bounds. ``h`` is
replaced by an upper envelope: the bound range is cut into cells ``[a, b]``; since ``r ->
|Z_T - r Z_N|`` is convex, ``|Z_T - r Z_N| <= max(|Z_T - a Z_N|, |Z_T - b Z_N|)`` on the cell,
so ``H_cell = joint_halfwidth(a, b)`` is at least ``h(r)`` for every ``r`` in it. A cell's part
of the set is ``{r in [a, b] : |T' - r N'| <= H_cell}``, an interval in closed form.
Probability that the true mean is outside: at most ``alpha`` (and close to it when the cells
are narrow). The construction never needs ``N'`` to be positive.

Certification. Probabilities are computed in double precision from closed forms (discrete
Laplace: ``P(Z > x) = q^(x+1) / (1 + q)``, ``q = e^(-1/t)``; discrete Gaussian of parameter
``sigma < 1000``: its pmf summed over ``|k| <= 40 sigma + 2``; above, the bounds ``P(Z > x) <=
Q(x / sigma)`` and ``P(Z > x) >= Q((x + 1) / sigma) (1 - 1e-8)`` for ``x >= 0``, from the
integral comparison and Poisson summation of :func:`dpkit.mechanisms.discrete.
_gaussian_tail_bound`); ``Z_N`` is summed over ``|k| <= K`` with ``P(|Z_N| > K)`` added whole
to the tail, in at most 1,025 runs of values bounded at their worst corner (a discrete Laplace
too wide to enumerate has its runs' masses read from the closed form, :func:`_laplace_runs`);
the total is inflated by a relative ``1e-9`` and ``1e-12`` absolute for the
floating-point sums. Interval ends in integer steps beyond ``2^50`` are moved one step inward
before the probabilities are read (a float's rounding there); beyond ``2^53`` an end ``x`` may still
be off by its ulp, ``2^-52 |x|``, which moves a discrete Laplace tail ``e^(-|x|/t) / (1 + q)``
by a factor at most ``e^(2^-52 |x| / t)``: a relative ``1.4e-14`` while ``|x| < 60 t``, and
beyond, where the tail is below ``e^(-60)``, an absolute ``1e-26`` (a normal tail at ``|x| <
40 sigma`` moves by a factor ``e^(2^-52 x^2 / sigma^2)``, ``4e-13``): inside the margins. Each
rounding goes to the side that widens the interval.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dpkit.analytics._pricing import Noise

__all__ = [
    "complement_mean_intervals",
    "complement_sum_halfwidth",
    "count_intervals",
    "joint_halfwidth",
    "lattice_offsets",
    "ratio_cells",
    "ratio_interval",
    "ratio_intervals",
    "zero_reach",
]

FloatArray = npt.NDArray[np.float64]

#: Mass of ``Z_N`` beyond the summed range, as a fraction of alpha (added to the tail whole).
_TRUNC = 1e-4
#: Largest number of ``Z_N`` values summed; beyond, :func:`joint_halfwidth` returns ``None``.
_MAX_TERMS = 200_001
#: Largest number of runs the summed values of ``Z_N`` are read in (:func:`_support`): the
#: cost of a tail bound is rows times runs.
_GROUPS = 1025
#: Relative and absolute margins on the floating-point tail.
_REL, _ABS = 1e-9, 1e-12
_GAUSS_SUM_LIMIT = 1000.0
#: The search for ``H`` stops within this relative distance above the smallest (widths lose
#: at most this fraction; the interval stays valid, as ``H`` only ever decreases to a value
#: whose bound holds).
_TOL = 2.0**-14
#: Most steps of the regula falsi of :func:`_illinois` (each row usually stops within 10).
_ILLINOIS_STEPS = 60
#: Cells of the bound range for the mean's envelope.
CELLS = 64


def _gaussian_table(sigma: float) -> tuple[int, FloatArray]:
    """``(m, upper)`` with ``upper[j] = P(Z > j)`` for ``0 <= j <= m``, ``sigma < 1000``."""
    m = math.ceil(40.0 * sigma) + 2
    k = np.arange(0, m + 2, dtype=np.float64)
    with np.errstate(under="ignore"):
        w = np.exp(-(k * k) / (2.0 * sigma * sigma))
    norm = float(w[0] + 2.0 * w[1:].sum())
    rev = np.cumsum(w[::-1])[::-1]  # rev[j] = sum_{i >= j} w_i
    return m, np.asarray(rev[1:] / norm, dtype=np.float64)  # P(Z > j) = rev[j + 1] / norm


_TABLES: dict[float, tuple[int, FloatArray]] = {}


def _survival(noise: Noise, x: FloatArray) -> FloatArray:
    """An upper bound on ``P(Z > x)`` for integer-valued float ``x`` (elementwise)."""
    pos = x >= 0
    y = np.where(pos, x, -x - 1.0)  # P(Z > x) = 1 - P(Z > -x - 1) for x < 0
    if noise.kind == "discrete_laplace":
        t = noise.scale
        q = math.exp(-1.0 / t)
        with np.errstate(under="ignore"):
            up_y = np.exp(-(y + 1.0) / t) / (1.0 + q)
        lo_y = up_y
    elif noise.scale < _GAUSS_SUM_LIMIT:
        if noise.scale not in _TABLES:
            _TABLES[noise.scale] = _gaussian_table(noise.scale)
        m, table = _TABLES[noise.scale]
        idx = np.minimum(y, m).astype(np.int64)
        up_y = np.where(y > m, 0.0, table[idx])
        lo_y = up_y
    else:
        from scipy.special import ndtr  # type: ignore[import-untyped,unused-ignore]

        sigma = noise.scale
        up_y = np.asarray(ndtr(-y / sigma), dtype=np.float64)
        lo_y = np.asarray(ndtr(-(y + 1.0) / sigma), dtype=np.float64) * (1.0 - 1e-8)
    return np.asarray(np.where(pos, up_y, 1.0 - lo_y), dtype=np.float64)


def _pmf(noise: Noise, k: FloatArray) -> FloatArray:
    """``P(Z = k)`` for integer-valued float ``k`` (to double precision)."""
    ak = np.abs(k)
    if noise.kind == "discrete_laplace":
        t = noise.scale
        with np.errstate(under="ignore"):
            return np.asarray(math.tanh(0.5 / t) * np.exp(-ak / t), dtype=np.float64)
    sigma = noise.scale
    if sigma < _GAUSS_SUM_LIMIT:
        diff = _survival(noise, ak - 1.0) - _survival(noise, ak)
        return np.asarray(np.maximum(diff, 0.0), dtype=np.float64)
    # normaliser sigma sqrt(2 pi) (1 + 2 sum_k e^(-2 pi^2 sigma^2 k^2)): the extra term is 0
    # in double precision for sigma >= 1000
    with np.errstate(under="ignore"):
        w = np.exp(-(ak * ak) / (2.0 * sigma * sigma))
    return np.asarray(w / (sigma * math.sqrt(2.0 * math.pi)), dtype=np.float64)


def _support(noise: Noise, alpha: float) -> tuple[FloatArray, FloatArray, FloatArray, float] | None:
    """``Z_N``'s summed range in at most :data:`_GROUPS` runs of consecutive values: per run its
    first and last value ``(k_lo, k_hi)`` and its mass, and the mass left out (upper bound).

    Within a run the tails are bounded at the run's worst point: the event ``|A - c k| > H``
    for some ``c`` in ``[a, b]`` implies ``A`` outside ``[max c k - H, min c k + H]``, and over
    ``k`` in ``[k_lo, k_hi]`` the products ``c k`` are extreme at the four corners, so the
    probability summed per run with the corners' bound is an upper bound on the exact sum
    (equal to it when every run is one value, as below :data:`_GROUPS` values).

    Up to :data:`_MAX_TERMS` values the pmf is summed value by value; a wider discrete Laplace
    is read in runs from its closed form (:func:`_laplace_runs`), a wider discrete Gaussian is
    ``None``."""
    h = noise.halfwidth(alpha * _TRUNC)
    if 2 * h + 1 > _MAX_TERMS:
        if noise.kind != "discrete_laplace":
            return None
        k_lo, k_hi, pk = _laplace_runs(noise.scale, h)
        return k_lo, k_hi, pk, alpha * _TRUNC
    k = np.arange(-h, h + 1, dtype=np.float64)
    pk = _pmf(noise, k)
    if k.size <= _GROUPS:
        return k, k, pk, alpha * _TRUNC
    width = -(-k.size // _GROUPS)
    starts = np.arange(0, k.size, width)
    ends = np.minimum(starts + width, k.size) - 1
    return k[starts], k[ends], np.add.reduceat(pk, starts), alpha * _TRUNC


def _float_down(i: int) -> float:
    """The largest double at most the integer ``i``."""
    f = float(i)
    return f if f <= i else math.nextafter(f, -math.inf)


def _float_up(i: int) -> float:
    """The smallest double at least the integer ``i``."""
    f = float(i)
    return f if f >= i else math.nextafter(f, math.inf)


def _laplace_runs(t: float, h: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The values ``-h..h`` of a discrete Laplace of scale ``t`` in at most :data:`_GROUPS`
    runs of equal width (the grid of :func:`_support`'s summed runs), each run's mass read
    from the closed form without enumerating its values.

    With ``q = e^(-1/t)`` and ``P(Z >= k) = q^k / (1 + q)`` for ``k >= 0``, a run ``[k_lo,
    k_hi]`` with ``k_lo >= 0`` has mass ``P(Z >= k_lo) - P(Z > k_hi) = e^(-k_lo/t) (1 -
    e^(-w/t)) / (1 + q)``, ``w = k_hi - k_lo + 1``, computed with ``expm1`` (a product of
    terms each within a few ulps, no cancellation); a run of negative values is its mirror
    image, and the run holding 0 has mass ``1 - P(Z > k_hi) - P(Z < k_lo) = ((1 -
    e^(-(k_hi + 1)/t)) + q (1 - e^(k_lo/t))) / (1 + q)``, a sum of two non-negative terms.
    Each mass is thus within a relative ``1e-13`` of the exact value (arguments ``|k| / t``
    below 60, each rounded to half an ulp, move the exponential by a relative ``60 * 2^-53``;
    ``exp``, ``expm1`` and the products add a few ulps), so the tail bound ``sum_j out_j p_j``
    (``0 <= out_j <= 1``) is within a relative ``1e-13`` of its value with exact masses: far
    inside :data:`_REL` (``1e-9``) and the absolute :data:`_ABS`. Ends are exact integers up
    to ``2^53``; beyond, a run's first value is rounded down and its last up (to the next
    double), so the runs as read hold at least their integers (overlapping by a value or so,
    which only adds mass) and the corners of :func:`_corners` are read over a superset."""
    size = 2 * h + 1
    width = -(-size // _GROUPS)
    starts = list(range(-h, h + 1, width))
    lows = [_float_down(s) for s in starts]
    highs = [_float_up(min(s + width, h + 1) - 1) for s in starts]
    k_lo = np.array(lows, dtype=np.float64)
    k_hi = np.array(highs, dtype=np.float64)
    q = math.exp(-1.0 / t)
    pos = k_lo >= 0.0
    neg = k_hi <= 0.0
    # distance of the run's nearer end from 0 and its width, by symmetry for negative runs
    near = np.where(pos, k_lo, np.where(neg, -k_hi, 0.0))
    w = k_hi - k_lo + 1.0
    with np.errstate(under="ignore"):
        side = np.exp(-near / t) * -np.expm1(-w / t) / (1.0 + q)
        mid = (-np.expm1(-(k_hi + 1.0) / t) + q * -np.expm1(k_lo / t)) / (1.0 + q)
    pk = np.where(pos | neg, side, mid)
    return k_lo, k_hi, np.asarray(pk, dtype=np.float64)


def _corners(
    a: FloatArray, b: FloatArray, k_lo: FloatArray, k_hi: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Per row ``i`` and run ``j``: the smallest and largest ``c k`` over ``c`` in ``[a_i,
    b_i]`` and ``k`` in ``[k_lo_j, k_hi_j]`` (bilinear, so at a corner)."""
    p = (np.outer(a, k_lo), np.outer(a, k_hi), np.outer(b, k_lo), np.outer(b, k_hi))
    if k_lo is k_hi:
        return np.minimum(p[0], p[2]), np.maximum(p[0], p[2])
    return (
        np.minimum(np.minimum(p[0], p[1]), np.minimum(p[2], p[3])),
        np.maximum(np.maximum(p[0], p[1]), np.maximum(p[2], p[3])),
    )


def _tails(
    nt: Noise,
    sup: tuple[FloatArray, FloatArray, FloatArray, float],
    corners: tuple[FloatArray, FloatArray],
    h: FloatArray,
) -> FloatArray:
    """Per row ``i``: a certified upper bound on ``P(max(|Z_T - a_i Z_N|, |Z_T - b_i Z_N|) >
    h_i)`` (``sup`` the runs of ``Z_N`` of :func:`_support`; ``corners`` their
    :func:`_corners` with the rows' ``a`` and ``b``, which a search over ``h`` reads as is)."""
    _, _, pk, rest = sup
    mn, mx = corners
    hh = h[:, None]
    lo = np.ceil(mx - hh)
    hi = np.floor(mn + hh)
    big = 2.0**50
    lo = np.where(np.abs(lo) > big, lo + 1.0, lo)
    hi = np.where(np.abs(hi) > big, hi - 1.0, hi)
    out = _survival(nt, hi) + _survival(nt, -lo)  # P(Z > hi) + P(Z < lo), Z symmetric
    out = np.where(lo > hi, 1.0, np.minimum(out, 1.0))
    total = out @ pk + rest
    return np.asarray(total * (1.0 + _REL) + _ABS, dtype=np.float64)


def _halfwidths(
    nt: Noise, nn: Noise, a: FloatArray, b: FloatArray, alpha: float
) -> FloatArray | None:
    """Per row the smallest integer ``H`` whose certified bound on ``P(max(|Z_T - a Z_N|,
    |Z_T - b Z_N|) > H)`` is at most ``alpha``, to within a relative ``_TOL`` above it: a
    bisection run on every row at once."""
    sup = _support(nn, alpha)
    if sup is None:
        return None
    a, b = np.minimum(a, b), np.maximum(a, b)
    corners = _corners(a, b, sup[0], sup[1])
    # the union bound holds (up to the float margins): the start of the search
    ht, hn = nt.halfwidth(alpha / 2.0), nn.halfwidth(alpha / 2.0)
    hi = ht + np.ceil(np.maximum(np.abs(a), np.abs(b)) * hn) + 1.0
    while True:
        bad = _tails(nt, sup, corners, hi) > alpha
        if not bool(bad.any()):
            break
        hi = np.where(bad, hi * 2.0, hi)
    lo = np.zeros_like(hi)
    # invariant: the bound holds at hi; stop within a relative _TOL of the smallest H
    while bool((hi - lo > np.maximum(_TOL * hi, 0.0)).any()):
        mid = np.floor((lo + hi) / 2.0)
        ok = _tails(nt, sup, corners, mid) <= alpha
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + 1.0)
    return np.asarray(hi, dtype=np.float64)


@lru_cache(maxsize=1024)
def lattice_offsets(noise: Noise, alpha: float) -> tuple[int, int]:
    """``(below, above)``: the interval ``[X - below, X + above]`` around a released integer
    ``X = x + Z`` holds ``x`` with probability at least ``1 - alpha``, and as close to it as
    the lattice allows.

    The symmetric interval ``+-h`` (``h`` the smallest integer with ``P(|Z| > h) <= alpha``,
    :meth:`Noise.halfwidth`) can cover far more than claimed when the noise is narrow: the
    discrete Laplace of scale 1 covers 97.3% with ``h = 3`` (92.7% with ``h = 2``). ``x`` is
    missed exactly when ``Z > below`` or ``Z < -above``, so, ``Z`` being symmetric,
    ``P(miss) = P(Z > below) + P(Z > above)``; with ``below = h`` and ``above = h - 1`` that
    is ``P(Z > h) + P(Z > h - 1)``, which lies between the two symmetric tails, and the
    shorter interval is used when its certified bound (the upper bounds of
    :func:`_survival`, inflated by the float margins) is at most ``alpha`` (95.0% at scale
    1). Otherwise ``(h, h)``. The upper side is the shorter one (a count's lower side is
    often cut at 0 anyway)."""
    h = noise.halfwidth(alpha)
    if h < 1:
        return h, h
    tails = _survival(noise, np.array([float(h), float(h - 1)], dtype=np.float64))
    total = float(tails.sum()) * (1.0 + _REL) + _ABS
    return (h, h - 1) if total <= alpha else (h, h)


@lru_cache(maxsize=1024)
def zero_reach(noise: Noise, alpha: float) -> int:
    """``b``: the largest released value ``X = x + Z`` at which a never-negative count's
    interval still holds 0, the smallest integer ``b >= 0`` whose certified bound on ``P(Z >
    b)`` (:func:`_survival`, float margins added) is at most ``alpha``.

    Neyman's construction over the count's possible values ``x in {0, 1, ...}``: for ``x >=
    1`` the acceptance set is :func:`lattice_offsets`' ``{X : x - above <= X <= x + below}``,
    for ``x = 0`` it is ``{X : X <= b}``, of probability ``P(Z <= b) >= 1 - alpha``. The set
    of counts whose acceptance set holds ``X`` is ``[max(X - below, 0), max(X + above, 0)]``
    when ``X <= b`` (then ``X - below <= 0``, as ``b <= below``) and ``[max(X - below, 1), X +
    above]`` otherwise, an interval of integers in both cases: it covers ``x >= 1`` exactly as
    often as :func:`lattice_offsets` says, and ``0`` with probability ``P(Z <= b)``. Clipping
    the unclipped interval at 0 instead holds 0 whenever ``X <= below``, with probability
    ``1 - P(Z > below)`` (97.9% at discrete Laplace scale 3, where ``b`` gives 95.9%)."""
    h = noise.halfwidth(alpha)

    def ok(b: int) -> bool:
        tail = _survival(noise, np.array([float(b)], dtype=np.float64))
        return bool(tail[0] * (1.0 + _REL) + _ABS <= alpha)

    # P(Z > b) only falls as b grows, so the smallest b that passes is found by bisection
    # (the noise of a sum has up to 2^52 lattice steps: no table over 0..h)
    if not ok(h):
        return h
    lo, hi = -1, h  # ok(hi) holds; ok(lo) is taken as false
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def count_intervals(
    noisy: npt.NDArray[np.int64], below: int, above: int, reach: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The interval of a never-negative count from its released ``X`` (:func:`zero_reach`):
    ``[max(X - below, 0 if X <= reach else 1), max(X + above, 0)]``."""
    floor = np.where(noisy <= reach, 0, 1)
    lo = np.maximum(noisy - below, floor)
    hi = np.maximum(noisy + above, 0)
    return lo.astype(np.int64), hi.astype(np.int64)


@lru_cache(maxsize=1024)
def joint_halfwidth(nt: Noise, nn: Noise, a: float, b: float, alpha: float) -> int | None:
    """Smallest integer ``H`` (to a relative ``2^-14``) with ``P(max(|Z_T - a Z_N|, |Z_T - b
    Z_N|) > H) <= alpha`` (certified: never too small), ``Z_T ~ nt`` and ``Z_N ~ nn``
    independent; ``None`` when ``Z_N``'s law is too wide to sum (then the caller keeps its
    union bound)."""
    h = _halfwidths(nt, nn, np.array([a]), np.array([b]), alpha)
    return None if h is None else int(h[0])


@lru_cache(maxsize=256)
def ratio_cells(
    nt: Noise, nn: Noise, r_lo: float, r_hi: float, alpha: float
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """The envelope of the mean's pivot over ``[r_lo, r_hi]`` (steps): cell ends and ``H``."""
    edges = np.linspace(r_lo, r_hi, CELLS + 1)
    edges[0], edges[-1] = r_lo, r_hi
    a, b = edges[:-1].copy(), edges[1:].copy()
    hs = _halfwidths(nt, nn, a, b, alpha)
    if hs is None:
        return None
    for arr in (a, b, hs):
        arr.setflags(write=False)
    return a, b, hs


def ratio_intervals(
    t: FloatArray, n: FloatArray, cells: tuple[FloatArray, FloatArray, FloatArray]
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """Per group ``(t_i, n_i)`` the hull of ``{r : |t_i - r n_i| <= H_cell(r)}`` (steps), and
    whether the set is non-empty (it is empty with probability at most alpha; the ends are
    then NaN). Float division is widened by a relative ``1e-12``."""
    a, b, hh = (x[None, :] for x in cells)
    tt, nv = t[:, None], n[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = (tt - hh) / nv
        e2 = (tt + hh) / nv
    zero = nv == 0.0
    lo = np.where(zero, a, np.maximum(np.minimum(e1, e2), a))
    hi = np.where(zero, b, np.minimum(np.maximum(e1, e2), b))
    ok = np.where(zero, np.abs(tt) <= hh, lo <= hi)
    lo_v = np.where(ok, lo, np.inf).min(axis=1)
    hi_v = np.where(ok, hi, -np.inf).max(axis=1)
    found = ok.any(axis=1)
    lo_v = np.where(found, lo_v, np.nan)
    hi_v = np.where(found, hi_v, np.nan)
    pad = 1e-12 * (np.abs(lo_v) + np.abs(hi_v) + 1.0)
    lo_v = np.maximum(lo_v - pad, cells[0][0])
    hi_v = np.minimum(hi_v + pad, cells[1][-1])
    return (
        np.asarray(lo_v, dtype=np.float64),
        np.asarray(hi_v, dtype=np.float64),
        np.asarray(found, dtype=np.bool_),
    )


def ratio_interval(
    t: int, n: int, cells: tuple[FloatArray, FloatArray, FloatArray]
) -> tuple[float, float] | None:
    """:func:`ratio_intervals` of one group: the hull, or ``None`` if the set is empty."""
    lo, hi, found = ratio_intervals(np.array([float(t)]), np.array([float(n)]), cells)
    return (float(lo[0]), float(hi[0])) if bool(found[0]) else None


# --- variance: a pivot of the count, centred sum and sum of squares -------------------------

#: Share of alpha spent on the mean's interval that pins the variance's nuisance (the mean).
#: The mean's uncertainty enters the variance's upper end squared (:func:`variance_cells`), so
#: a wider mean interval costs groups of a few hundred people most: 1/20 rather than 1/50 made
#: their intervals 3% shorter in the utility benchmark, and large groups' 1% longer.
VAR_MEAN_ALPHA = 1.0 / 20.0
#: Cells of the mean's range and of the variance's range ``[0, h^2]``. The mean's cells set
#: the slope ``lam`` and so how far the interval reaches beyond the level (see
#: :func:`variance_cells`): 128 rather than 32 (with :data:`VAR_MEAN_ALPHA` 1/20 rather than
#: 1/50) took the coverage from 96.7% to 95.6-96.0% in
#: ``tests/analytics/test_variance_interval.py``'s settings, the widths 4-5% shorter; in the
#: utility benchmark, cities of 10,000 people and more get intervals 8% shorter, 1,000-9,999
#: 2.5% shorter, 100-999 1.4% longer (there the hull's second-order reach, the mean's
#: uncertainty squared, dominates, and on a coarse cell the pivot is concave in ``mu``, which
#: trims it).
VAR_MEAN_CELLS, VAR_CELLS = 128, 32
#: Smallest discrete Gaussian sigma (in lattice steps) of ``T`` and ``Q`` read through the
#: continuous law; below it the release keeps its union bound.
_GAUSS_CONT_MIN = 2.0**20
#: Relative bound on the density ratio of the smoothed discrete Gaussian to the normal law
#: within 40 sigma, squared for the pair (see :func:`variance_cells`), with room to spare.
_GAUSS_CONT_REL = 1e-4


#: Least relative gap between the scales of :func:`laplace_sum_survival` with three laws (the
#: smaller ones are raised to it, which only raises the tail).
_SCALE_GAP = 2.0**-10
#: Least ratio of the smallest to the largest scale of :func:`laplace_sum_survival` with three
#: laws (raised to it, which only raises the tail): the weights' products stay normal floats.
_SCALE_FLOOR = 2.0**-200


def laplace_sum_survival(
    b1: float, b2: FloatArray, x: FloatArray, b3: FloatArray | None = None
) -> FloatArray:
    """``P(L_1 + L_2 > x)`` for independent continuous Laplace laws of scales ``b1`` and
    ``b2`` (elementwise in ``b2`` and ``x``); with ``b3``, an upper bound on ``P(L_1 + L_2 +
    L_3 > x)`` (three laws, elementwise in ``b2``, ``b3`` and ``x``; 1 for ``x < 0``, where
    it is only ever read as the trivial bound).

    For ``x >= 0`` and ``b1 != b2``: ``(b1^2 e^(-x/b1) - b2^2 e^(-x/b2)) / (2 (b1^2 -
    b2^2))`` (the convolution of the two densities, integrated; at ``b1 = b2 = b``: ``(2 b +
    x) e^(-x/b) / (4 b)``); for ``x < 0``, one minus the value at ``-x``. Where the scales are
    within a relative ``1e-4`` both are read as the larger (the tail only grows with a scale:
    Anderson's theorem for symmetric unimodal laws), avoiding the cancellation.

    Three laws. The characteristic function ``prod_i 1 / (1 + c_i^2 s^2)`` is, for distinct
    scales, ``sum_i w_i / (1 + c_i^2 s^2)`` with ``w_i = prod_(j != i) c_i^2 / (c_i^2 -
    c_j^2)`` (partial fractions in ``s^2``; ``sum_i w_i = 1``), so for ``x >= 0`` the tail is
    ``sum_i w_i e^(-x/c_i) / 2``. The scales are sorted and the middle and largest raised to at
    least ``1 + 2^-10`` times the one below (:data:`_SCALE_GAP`): the tail only grows with a
    scale (Anderson's theorem, the other two laws' sum being symmetric and log-concave), and
    ``|w_i|`` stays below ``2^21`` or so. The cancellation's rounding, at most ``2^-49 sum_i
    |w_i| e^(-x/c_i) / 2``, is added."""
    if b3 is not None:
        return _laplace3_survival(b1, b2, b3, x)
    b2 = np.broadcast_to(b2, x.shape).astype(np.float64)
    ax = np.abs(x)
    close = np.abs(b1 - b2) <= 1e-4 * np.maximum(b1, b2)
    big = np.maximum(b1, b2)
    with np.errstate(under="ignore", over="ignore", divide="ignore", invalid="ignore"):
        e1, e2 = np.exp(-ax / b1), np.exp(-ax / b2)
        eq = (2.0 * big + ax) * np.where(b1 >= b2, e1, e2) / (4.0 * big)
        r1, r2 = b1 / big, b2 / big  # the weights read at a unit largest scale (no underflow)
        ne = (r1 * r1 * e1 - r2 * r2 * e2) / (2.0 * (r1 * r1 - r2 * r2))
    f = np.clip(np.where(close, eq, ne), 0.0, 0.5)
    return np.asarray(np.where(x >= 0, f, 1.0 - f), dtype=np.float64)


def _laplace3_survival(b1: float, b2: FloatArray, b3: FloatArray, x: FloatArray) -> FloatArray:
    """:func:`laplace_sum_survival` with three scales (see there)."""
    c = np.sort(
        np.stack(
            [
                np.broadcast_to(np.float64(b1), x.shape),
                np.broadcast_to(b2, x.shape),
                np.broadcast_to(b3, x.shape),
            ]
        ),
        axis=0,
    )
    # a zero scale (its law a point) and one below 2^-200 of the largest are raised to that
    c[0] = np.maximum(np.maximum(c[0], np.finfo(np.float64).tiny), c[2] * _SCALE_FLOOR)
    c[1] = np.maximum(c[1], c[0] * (1.0 + _SCALE_GAP))
    c[2] = np.maximum(c[2], c[1] * (1.0 + _SCALE_GAP))
    u = c / c[2]  # the weights are scale-free: read at a unit largest scale (no underflow)
    ax = np.abs(x)
    total = np.zeros(x.shape)
    size = np.zeros(x.shape)
    with np.errstate(under="ignore", over="ignore", divide="ignore", invalid="ignore"):
        for i in range(3):
            w = np.ones(x.shape)
            for j in range(3):
                if j != i:
                    w = w * (u[i] * u[i]) / ((u[i] - u[j]) * (u[i] + u[j]))
            term = w * np.exp(-ax / c[i]) / 2.0
            total = total + term
            size = size + np.abs(term)
    up = np.clip(total + size * 2.0**-49, 0.0, 0.5)
    return np.asarray(np.where(x >= 0, up, 1.0), dtype=np.float64)


def _pair_survival(kind: str, b1: float, b2: FloatArray, x: FloatArray) -> FloatArray:
    """``P(A > x)`` for ``A`` the sum of two independent continuous laws (Laplace scales or
    normal standard deviations ``b1``, ``b2``)."""
    if kind == "discrete_laplace":
        return laplace_sum_survival(b1, b2, x)
    from scipy.special import ndtr  # type: ignore[import-untyped,unused-ignore]

    sd = np.sqrt(b1 * b1 + np.broadcast_to(b2, x.shape) ** 2)
    return np.asarray(ndtr(-x / sd), dtype=np.float64)


def _pair_halfwidths(
    kind: str,
    b1: float,
    b2: FloatArray,
    margin: FloatArray,
    nn: Noise,
    ka: FloatArray,
    kb: FloatArray,
    alpha: float,
) -> FloatArray | None:
    """Per row ``i`` the smallest real ``H`` (to a relative ``2^-14``) whose certified bound
    on ``P(max(|A_i - ka_i Z_N|, |A_i - kb_i Z_N|) > H)`` is at most ``alpha``, where ``A_i``
    is within ``margin_i`` of the sum of two continuous laws of scales ``b1`` and ``b2_i``
    and ``Z_N ~ nn`` is independent of it."""
    sup = _support(nn, alpha)
    if sup is None:
        return None
    k_lo, k_hi, pk, rest = sup
    lo_k, hi_k = np.minimum(ka, kb), np.maximum(ka, kb)
    slack = 1.0 + (_GAUSS_CONT_REL if kind == "discrete_gaussian" else 0.0)
    mn, mx = _corners(lo_k, hi_k, k_lo, k_hi)

    def tails(h: FloatArray, rows: npt.NDArray[np.intp]) -> FloatArray:
        hh, mm = h[:, None], margin[rows, None]
        lo = mx[rows] - hh + mm
        hi = mn[rows] + hh - mm
        bb = np.broadcast_to(b2[rows, None], lo.shape)
        out = _pair_survival(kind, b1, bb, hi) + _pair_survival(kind, b1, bb, -lo)
        out = np.where(lo > hi, 1.0, np.minimum(out * slack, 1.0))
        total = out @ pk + rest
        return np.asarray(total * (1.0 + _REL) + _ABS, dtype=np.float64)

    hi = 40.0 * (b1 + b2) + 2.0 * margin + np.maximum(np.abs(ka), np.abs(kb)) * float(k_hi[-1])
    return _solve_tails(tails, alpha, np.maximum(hi, 1e-300))


def _pair_pivot_halfwidths(
    t: float,
    b_q: float,
    s_q: float,
    s_t: float,
    pair: tuple[int, int],
    lam: FloatArray,
    kappa: tuple[FloatArray, FloatArray],
    alpha: float,
) -> FloatArray:
    """Per cell the smallest ``H`` (to a relative ``2^-14``) with ``P(|s_q Z_c - a Z_A - b
    Z_B| > H) <= alpha`` certified for every ``kappa`` of the cell (:func:`variance_cells`
    with the complementary pair; ``b_q = s_q t_Q`` the squares' scale, ``t`` the pair's).

    Derivation. ``N`` and ``T`` are rebuilt from the pair ``A' = A + Z_A``, ``B' = B + Z_B``
    (``A = hi N - S``, ``B = S - lo N`` in the sum's steps, ``T = S - c N``, ``u = lo - c``,
    ``w = hi - c``, ``D = w - u``): ``Z_N = (Z_A + Z_B) / D`` and ``Z_T = (w Z_B + u Z_A) /
    D``, so the pivot's noise ``s_q Z_c - lam s_t Z_T - kappa Z_N`` (:func:`variance_cells`,
    ``kappa`` less ``q_center``) is ``s_q Z_c - a Z_A - b Z_B`` with ``a = (kappa + lam s_t
    u) / D`` and ``b = (kappa + lam s_t w) / D``, both affine in ``kappa`` (``lam`` is fixed
    on the cell), so ``|a| <= a*`` and ``|b| <= b*`` for every candidate of the cell, the
    larger of their absolute values at the cell's two ends (widened by a relative
    ``1e-12``).

    Bound. The coupling ``Z = floor(E_1) - floor(E_2) = L + d`` (``L = E_1 - E_2`` a
    continuous Laplace of the same scale, ``|d| < 1``; :func:`variance_cells`) of each of the
    three discrete Laplace noises gives ``|s_q Z_c - a Z_A - b Z_B| <= |s_q L_c - a L_A - b
    L_B| + s_q + |a| + |b|``. Each ``L`` is symmetric and log-concave, and so is the sum of
    any two of them, so conditioned on the third, ``P(|X + c y| > x)`` does not fall as
    ``|c y|`` grows (Anderson 1955, ``X`` the other two): the tail does not fall as ``|a|`` or
    ``|b|`` grows. Hence, at the true ``kappa``, ``P(|R| > H) <= 2 P(L_1 + L_2 + L_3 > H -
    s_q - a* - b*)`` with Laplace scales ``b_q``, ``a* t``, ``b* t``
    (:func:`laplace_sum_survival` with three laws, an upper bound), inflated by the float
    margins. No noise is summed term by term; at the pair's usual lattice (``t`` about
    ``2^44`` steps) the margin costs nothing, and it is certified at any ``t``."""
    u, w = float(pair[0]), float(pair[1])
    d = w - u
    ls = lam * s_t
    k_a, k_b = kappa
    a_ends = [(k_a + ls * u) / d, (k_b + ls * u) / d]
    b_ends = [(k_a + ls * w) / d, (k_b + ls * w) / d]
    a_star = np.maximum(np.abs(a_ends[0]), np.abs(a_ends[1])) * (1.0 + 1e-12)
    b_star = np.maximum(np.abs(b_ends[0]), np.abs(b_ends[1])) * (1.0 + 1e-12)
    margin = (s_q + a_star + b_star) * (1.0 + 1e-12)
    ba, bb = a_star * t, b_star * t

    def tails(h: FloatArray, rows: npt.NDArray[np.intp]) -> FloatArray:
        y = h - margin[rows]
        one = laplace_sum_survival(b_q, ba[rows], y, bb[rows])
        out = np.where(y > 0.0, np.minimum(2.0 * one, 1.0), 1.0)
        return np.asarray(out * (1.0 + _REL) + _ABS, dtype=np.float64)

    return _solve_tails(tails, alpha, np.maximum(40.0 * (b_q + ba + bb) + 2.0 * margin, 1e-300))


def _solve_tails(
    tails: Callable[[FloatArray, npt.NDArray[np.intp]], FloatArray],
    alpha: float,
    hi: FloatArray,
) -> FloatArray:
    """Per cell the smallest ``H`` with ``tails(H) <= alpha`` (:func:`_illinois`), from a
    start ``hi`` (positive) doubled where its tail is still above ``alpha``."""
    every = np.arange(hi.size)
    while True:
        f_hi = tails(hi, every)
        bad = f_hi > alpha
        if not bool(bad.any()):
            break
        hi = np.where(bad, hi * 2.0, hi)
    return _illinois(tails, alpha, hi, np.log(f_hi / alpha))


def _illinois(
    tails: Callable[[FloatArray, npt.NDArray[np.intp]], FloatArray],
    alpha: float,
    hi: FloatArray,
    g_hi: FloatArray,
) -> FloatArray:
    """Per row the smallest ``h`` in ``(0, hi]`` with ``tails(h) <= alpha``, to a relative
    :data:`_TOL` above it: the Illinois variant of regula falsi (Dowell and Jarratt 1971) on
    ``g(h) = log(tails(h) / alpha)``, nearly linear in ``h`` for the tails here, keeping a
    bracket ``[lo, hi]`` with ``g(lo) > 0 >= g(hi)``. Each row stops when its bracket is within
    :data:`_TOL`, or after :data:`_ILLINOIS_STEPS` steps. ``hi`` only ever moves to a point
    whose bound was checked, so the answer is certified whatever the convergence (it can only
    be less tight)."""
    lo = np.zeros_like(hi)
    g_lo = np.full_like(hi, math.log(1.0 / alpha))  # tails(0) is 1, up to the float margins
    side = np.zeros(hi.shape, dtype=np.int8)  # the end moved last: +1 hi, -1 lo
    for _ in range(_ILLINOIS_STEPS):
        rows = np.flatnonzero(hi - lo > _TOL * hi)
        if rows.size == 0:
            break
        a, b, ga, gb = lo[rows], hi[rows], g_lo[rows], g_hi[rows]
        x = b - gb * (b - a) / (gb - ga)
        w = b - a
        x = np.clip(x, a + w * 2.0**-10, b - w * 2.0**-10)  # strictly inside
        g = np.log(tails(x, rows) / alpha)
        ok = g <= 0.0
        prev = side[rows]
        hi[rows] = np.where(ok, x, b)
        g_hi[rows] = np.where(ok, g, np.where(prev == -1, gb / 2.0, gb))
        lo[rows] = np.where(ok, a, x)
        g_lo[rows] = np.where(ok, np.where(prev == 1, ga / 2.0, ga), g)
        side[rows] = np.where(ok, 1, -1)
    return np.asarray(hi, dtype=np.float64)


@lru_cache(maxsize=64)
def variance_cells(
    nt: Noise,
    nq: Noise,
    nn: Noise,
    s_t: float,
    s_q: float,
    mu_half: float,
    v_range: tuple[float, float],
    shift: float,
    alpha: float,
    q_center: float = 0.0,
    pair: tuple[int, int] | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray] | None:
    """The variance pivot's envelope: per cell ``(mean range, variance range)`` the slope
    ``lam`` and the threshold ``H`` (real units); ``None`` where the laws cannot be read.

    Notation (real units; means relative to the squares' centre ``m``): ``n`` values with
    mean ``mu`` and variance ``v``; exact integers ``N = n``, ``T = t`` with ``t s_t = n (mu -
    shift)`` (the centred sum, centre ``m + shift``), ``Q = q`` with ``q s_q = n (v +
    mu^2)``; released ``N' = n + Z_N``, ``T' = t + Z_T``, ``Q' = q + Z_Q``. For a candidate
    ``(mu, v)`` and any slope ``lam`` chosen from the candidate alone::

        R(mu, v) = s_q Q' - (v + mu^2) N' - lam (s_t T' - (mu - shift) N')

    equals ``s_q Z_Q - lam s_t Z_T - kappa Z_N`` with ``kappa = v + mu^2 - lam (mu -
    shift)`` at the true ``(mu, v)``: a pivot. When the squares are noised centred (``Q =
    Q_c + kq N`` rebuilt from the noisy ``Q_c`` and ``N``, ``q_center = kq s_q``), ``Z_Q =
    Z_c + kq Z_N`` and the same holds with ``Z_c`` for ``Z_Q`` and ``kappa - q_center`` for
    ``kappa``. With ``lam = 2 mu`` it is, to first order, ``n``
    times the error of the plug-in variance ``s_q Q'/N' - (s_t T'/N' + shift)^2``, so the
    test ``|R| <= H`` is as sharp as that estimate allows. Cells: the mean's range
    ``[-mu_half, mu_half]`` in :data:`VAR_MEAN_CELLS`, ``lam`` the cell's middle times 2; the
    variance's ``v_range`` in :data:`VAR_CELLS`; ``kappa`` then ranges over ``[k_a, k_b]`` on
    the cell and, ``|A - kappa Z_N|`` being convex in ``kappa``, ``H`` certified for the
    larger of the two ends covers every candidate of the cell.

    Why the mean's cells are narrow. The interval is the projection (hull over ``mu`` in the
    mean's interval) of the accepted pairs, and its level is only certified at the true
    ``mu``; on a cell, ``R(mu, v) - R(mu', v) = -N' (mu - mu') (mu + mu' - lam)`` (``lam``
    fixed), of first order in ``mu - mu'`` wherever ``mu + mu'`` is away from ``lam``, so a
    ``v`` is also accepted through another ``mu`` of the mean's interval, up to about the
    cell's width times the mean pivot's quantile ``|T' - mu N'| <= H_D``. That reach is what
    the cells' width costs (coverage above the level, never below); with ``lam = 2 mu``
    exactly only a second-order ``(H_D^2 - D^2) / N'`` would remain. The level itself does not
    depend on the number of cells.

    Laws. ``Z_T`` and ``Z_Q`` are read through continuous laws. Discrete Laplace of scale
    ``t``: ``Z = floor(E_1) - floor(E_2)`` with ``E_i`` exponential of mean ``t`` (a
    difference of two geometric laws of ratio ``e^(-1/t)``), so ``|Z - L| < 1`` for ``L =
    E_1 - E_2``, continuous Laplace of scale ``t``: an exact coupling, ``A`` within ``s_q +
    |lam| s_t`` of a sum of two Laplace laws (:func:`laplace_sum_survival`). Discrete Gaussian
    of ``sigma >= 2^20`` steps: ``Z + U`` (``U`` uniform on ``[-1/2, 1/2)``) has density
    ``p(round(y))``, within ``exp(+-(|y| + 1/4) / (2 sigma^2))`` of the normal density (the
    normaliser is ``sigma sqrt(2 pi)`` to ``1e-300``), so any event of the pair within ``40
    sigma`` has at most ``1 + 1e-4`` times its normal probability (the mass beyond is below
    ``1e-300``); margin ``(s_q + |lam| s_t) / 2``. ``Z_N`` is summed exactly as for the mean.

    The complementary pair (``pair = (u, w)``, pure sessions): ``N`` and ``T`` rebuilt from
    the pair, ``H`` from the three Laplace laws (:func:`_pair_pivot_halfwidths`).
    """
    if nt.kind != nq.kind:
        return None
    if nt.kind == "discrete_gaussian":
        if min(nt.scale, nq.scale) < _GAUSS_CONT_MIN:
            return None
        sd = (nq.scale * s_q, nt.scale * s_t)
        m_scale = 0.5
    else:
        sd = (nq.scale * s_q, nt.scale * s_t)
        m_scale = 1.0
    j, ll = VAR_MEAN_CELLS, VAR_CELLS
    mu_e = np.linspace(-mu_half, mu_half, j + 1)
    v_e = np.linspace(v_range[0], v_range[1], ll + 1)
    mu_a, mu_b = np.repeat(mu_e[:-1], ll), np.repeat(mu_e[1:], ll)
    v_a, v_b = np.tile(v_e[:-1], j), np.tile(v_e[1:], j)
    mid = (mu_a + mu_b) / 2.0
    lam = 2.0 * mid
    # mu^2 - lam mu = (mu - mid)^2 - mid^2 on the cell: from -mid^2 to (width/2)^2 - mid^2
    w2 = ((mu_b - mu_a) / 2.0) ** 2
    ka = v_a - mid * mid + lam * shift - q_center
    kb = v_b + w2 - mid * mid + lam * shift - q_center
    pad = 1e-12 * (np.abs(ka) + np.abs(kb) + mu_half * mu_half + abs(v_range[1]))
    ka, kb = ka - pad, kb + pad
    if pair is None:
        b2 = np.abs(lam) * sd[1]
        margin = m_scale * (s_q + np.abs(lam) * s_t) * (1.0 + 1e-12)
        hs = _pair_halfwidths(nt.kind, sd[0], b2, margin, nn, ka, kb, alpha)
    else:
        if nt.kind != "discrete_laplace" or nn != nt:
            return None
        hs = _pair_pivot_halfwidths(nt.scale, sd[0], s_q, s_t, pair, lam, (ka, kb), alpha)
    if hs is None:
        return None
    out = (mu_a, mu_b, v_a, v_b, hs)
    for arr in out:
        arr.setflags(write=False)
    return out


def variance_intervals(
    t: FloatArray,
    q: FloatArray,
    n: FloatArray,
    mu_lo: FloatArray,
    mu_hi: FloatArray,
    cells: tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray],
    s_t: float,
    s_q: float,
    shift: float,
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """Per group the hull of the candidates ``v`` with ``|R(mu, v)| <= H`` for some ``mu`` in
    the group's mean interval ``[mu_lo, mu_hi]`` (real units relative to ``m``; ``NaN``: the
    mean interval was empty) and whether any was found. ``R`` is linear in ``v``
    (coefficient ``-N'``) and, on a cell, quadratic in ``mu``, so the accepted ``v`` of a
    cell is ``X(mu) - H <= v N' <= X(mu) + H`` over the ``mu`` of the cell, with ``X``'s
    extremes at the ends or the vertex; intersected with the cell's ``v`` range."""
    mu_a_all = cells[0]
    g = t.shape[0]
    lo_v = np.full(g, np.inf)
    hi_v = np.full(g, -np.inf)
    found = np.zeros(g, dtype=np.bool_)
    # Cells of one mean range at a time, for the groups whose mean interval meets it (most
    # groups' mean intervals meet a few of the ranges): the same arithmetic, element by element,
    # as over every cell at once.
    starts = np.flatnonzero(np.r_[True, mu_a_all[1:] != mu_a_all[:-1]])
    stops = np.r_[starts[1:], mu_a_all.size]
    for c0, c1 in zip(starts.tolist(), stops.tolist(), strict=True):
        m_lo, m_hi = float(cells[0][c0]), float(cells[1][c0])
        rows = np.flatnonzero((mu_lo <= m_hi) & (mu_hi >= m_lo))  # NaN ends: no row
        if rows.size == 0:
            continue
        lo_b, hi_b, ok_b = _variance_block(
            t[rows], q[rows], n[rows], mu_lo[rows], mu_hi[rows],
            tuple(x[c0:c1] for x in cells), s_t, s_q, shift,
        )  # fmt: skip
        lo_v[rows] = np.minimum(lo_v[rows], lo_b)
        hi_v[rows] = np.maximum(hi_v[rows], hi_b)
        found[rows] |= ok_b
    return (
        np.asarray(np.where(found, lo_v, np.nan), dtype=np.float64),
        np.asarray(np.where(found, hi_v, np.nan), dtype=np.float64),
        np.asarray(found, dtype=np.bool_),
    )


def _variance_block(
    t: FloatArray,
    q: FloatArray,
    n: FloatArray,
    mu_lo: FloatArray,
    mu_hi: FloatArray,
    cells: tuple[FloatArray, ...],
    s_t: float,
    s_q: float,
    shift: float,
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """:func:`variance_intervals` over some cells: per group the smallest and largest accepted
    ``v`` (``inf`` / ``-inf`` where none) and whether any was accepted."""
    mu_a, mu_b, v_a, v_b, hh = (x[None, :] for x in cells)
    tt, qq, nv = t[:, None] * s_t, q[:, None] * s_q, n[:, None]
    lo_m = np.maximum(mu_a, mu_lo[:, None])
    hi_m = np.minimum(mu_b, mu_hi[:, None])
    live = lo_m <= hi_m  # NaN mean ends compare False: no cell
    lam = mu_a + mu_b  # 2 * middle

    def x_of(mu: FloatArray) -> FloatArray:
        return np.asarray(qq - mu * mu * nv - lam * (tt - (mu - shift) * nv), dtype=np.float64)

    # X(mu) = -N' mu^2 + lam N' mu + const: vertex at mu = lam / 2
    ends = [x_of(lo_m), x_of(hi_m)]
    vert = np.clip(lam / 2.0, lo_m, hi_m)
    ends.append(x_of(vert))
    x_min = np.minimum(np.minimum(ends[0], ends[1]), ends[2])
    x_max = np.maximum(np.maximum(ends[0], ends[1]), ends[2])
    a, b = x_min - hh, x_max + hh
    pad = 1e-12 * (np.abs(a) + np.abs(b))
    a, b = a - pad, b + pad
    with np.errstate(divide="ignore", invalid="ignore"):
        e1, e2 = a / nv, b / nv
    pos, neg = nv > 0.0, nv < 0.0
    v_lo = np.where(pos, e1, np.where(neg, e2, v_a))
    v_hi = np.where(pos, e2, np.where(neg, e1, v_b))
    ok_zero = (a <= 0.0) & (b >= 0.0)
    lo = np.maximum(v_lo, v_a)
    hi = np.minimum(v_hi, v_b)
    ok = live & np.where(nv == 0.0, ok_zero, lo <= hi)
    return (
        np.asarray(np.where(ok, lo, np.inf).min(axis=1), dtype=np.float64),
        np.asarray(np.where(ok, hi, -np.inf).max(axis=1), dtype=np.float64),
        np.asarray(ok.any(axis=1), dtype=np.bool_),
    )


# --- the complementary pair: room below the upper bound and sum above the lower bound --------

#: Groups per block of :func:`complement_mean_intervals` (its temporaries are groups x cells).
_COMPLEMENT_BLOCK = 4096
#: Relative precision of the scalar search of :func:`complement_sum_halfwidth`.
_SCALAR_TOL = 2.0**-24
#: Largest magnitude of the bounds ``lo``, ``hi`` of the complementary pair (exact as doubles).
_BOUND_MAX = 2**53


def _check_bounds(lo: int, hi: int, alpha: float) -> tuple[int, int]:
    """The bounds as Python integers (numpy integers accepted), after checking ``lo < hi``,
    both within ``2^53`` (exact as doubles), and ``0 < alpha < 1``."""
    if isinstance(lo, bool) or isinstance(hi, bool):
        raise TypeError("the bounds lo and hi must be integers (lattice steps)")
    try:
        lo_i, hi_i = operator.index(lo), operator.index(hi)
    except TypeError:
        raise TypeError("the bounds lo and hi must be integers (lattice steps)") from None
    if not lo_i < hi_i or max(abs(lo_i), abs(hi_i)) > _BOUND_MAX:
        raise ValueError(f"need integer bounds lo < hi within 2^53 steps, got [{lo_i}, {hi_i}]")
    if not (isinstance(alpha, float | int) and 0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return lo_i, hi_i


def _scalar_search(bound: Callable[[float], float], alpha: float, start: float) -> float:
    """The smallest ``x > 0`` (to a relative :data:`_SCALAR_TOL` above it) with ``bound(x) <=
    alpha``, ``bound`` non-increasing: doubling from ``start``, then bisection. The answer is
    always a point whose bound was checked."""
    hi = max(start, 1e-300)
    while bound(hi) > alpha:
        hi *= 2.0
    lo = 0.0
    while hi - lo > _SCALAR_TOL * hi:
        mid = 0.5 * (lo + hi)
        if bound(mid) <= alpha:
            hi = mid
        else:
            lo = mid
    return hi


def complement_sum_halfwidth(noise: Noise, lo: int, hi: int, alpha: float) -> float:
    """A certified halfwidth ``H`` (steps, real) of the sum rebuilt from the complementary pair:
    ``P(|hi Z_B + lo Z_A| / (hi - lo) > H) <= alpha``, ``Z_A, Z_B`` independent of law
    ``noise``, never too small and within a relative ``2^-24`` of the smallest ``H`` whose
    certified bound holds (so ``[S' - H, S' + H]``, ``S' = (hi B' + lo A') / (hi - lo)``,
    holds ``S`` with probability at least ``1 - alpha``).

    ``lo = 0`` or ``hi = 0``: the error is ``Z_B`` (or ``-Z_A``), one integer noise; ``H`` is
    its lattice halfwidth :meth:`Noise.halfwidth` (an integer). Otherwise, with ``u = |hi|``,
    ``v = |lo|``, ``c = min(u, v) / max(u, v)``: by the symmetry and independence of the two
    noises, ``|hi Z_B + lo Z_A|`` has the law of ``max(u, v) |Z_1 - c Z_2|``, and two certified
    bounds on its tail are computed, the smaller ``H`` kept (each is an upper bound):

    * the exact law, ``P(|Z_1 - c Z_2| > x) = sum_k P(Z_2 = k) P(Z_1 notin [c k - x, c k +
      x])`` summed as in :func:`joint_halfwidth` (``c`` read as the interval ``c (1 +-
      2^-50)`` to cover its rounding; runs of :func:`_support` when ``Z_2`` is wide): sharp
      when the noise is narrow;
    * discrete Laplace only: the coupling ``Z = floor(E_1) - floor(E_2)`` with ``E_i``
      independent exponential of mean ``t`` (the discrete Laplace as the difference of two
      geometric laws of ratio ``e^(-1/t)``, ``floor(E)`` being geometric: Inusah and
      Kozubowski 2006, "A discrete analogue of the Laplace distribution"), so ``Z = X + d``
      with ``X = E_1 - E_2`` a continuous Laplace of scale ``t`` and ``|d| < 1``. Hence ``|hi
      Z_B + lo Z_A| <= |hi X_B + lo X_A| + u + v``, and ``P(|hi X_B + lo X_A| > y) = 2
      P(L_1 + L_2 > y)`` with Laplace laws of scales ``u t`` and ``v t``
      (:func:`laplace_sum_survival`, exact): ``P(error > x) <= 2 P(L_1 + L_2 > x - u - v)``.
      Sharp when the noise is wide (the shift ``u + v`` against a quantile of order ``3 t
      max(u, v)``).

    Both bounds are inflated by the float margins (relative ``1e-9``, absolute ``1e-12``) and
    the answer is rounded up by a relative ``2^-50``."""
    lo, hi = _check_bounds(lo, hi, alpha)
    if lo == 0 or hi == 0:
        return float(noise.halfwidth(alpha))
    u, v = float(abs(hi)), float(abs(lo))
    big = max(u, v)
    c = min(u, v) / big
    span = float(hi - lo)
    best = math.inf
    sup = _support(noise, alpha)
    if sup is not None:
        ca = np.array([c * (1.0 - 2.0**-50)])
        cb = np.array([min(c * (1.0 + 2.0**-50), 1.0)])
        corners = _corners(ca, cb, sup[0], sup[1])

        def exact(x: float) -> float:
            return float(_tails(noise, sup, corners, np.array([x]))[0])

        start = float(noise.halfwidth(alpha / 2.0)) * (1.0 + c) + 1.0
        best = _scalar_search(exact, alpha, start) * big / span
    if noise.kind == "discrete_laplace":
        t = noise.scale

        def coupled(x: float) -> float:
            y = np.array([x - u - v])
            if y[0] < 0.0:
                return 1.0
            tail = 2.0 * laplace_sum_survival(u * t, np.array([v * t]), y)[0]
            return float(tail) * (1.0 + _REL) + _ABS

        start = 40.0 * (u + v) * t + u + v
        best = min(best, _scalar_search(coupled, alpha, start) / span)
    if not math.isfinite(best):
        raise ValueError(f"the law of {noise} is too wide to read")
    return best * (1.0 + 2.0**-50)


def complement_mean_intervals(
    noise: Noise, a: FloatArray, b: FloatArray, lo: int, hi: int, alpha: float
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """Per group ``(a_i, b_i)``, the released ``A' = A + Z_A`` and ``B' = B + Z_B`` of the
    complementary pair (``A = hi N - S``, ``B = S - lo N``, integer bounds ``lo < hi``): the
    hull ``[low, high]`` (steps, within ``[lo, hi]``) of a confidence set for the mean ``mu =
    S / N`` holding it with probability at least ``1 - alpha``, and whether the set was
    non-empty (the ends are then NaN, as in :func:`ratio_intervals`).

    Pivot (Fieller 1954, on the pair). For a candidate ``m``, ``P(m) = (hi - m) B' - (m - lo)
    A'``. At ``m = mu``: ``(hi - mu) B - (mu - lo) A = (hi - lo)(S - mu N) = 0``, so ``P(mu) =
    (hi - mu) Z_B - (mu - lo) Z_A`` exactly, whatever ``N``.

    Two halves. For ``m`` in ``[lo, mid]`` (``mid = (lo + hi) / 2``) divide by ``hi - m > 0``:
    ``B' - r A'`` with ``r = (m - lo) / (hi - m)`` in ``[0, 1]``, equal to ``Z_B - r Z_A`` at
    ``r* = (mu - lo) / (hi - mu)``. :func:`ratio_cells` over ``r`` in ``[0, 1]`` (``Z_T =
    Z_B``, ``Z_N = Z_A``) and :func:`ratio_intervals` with ``(t, n) = (B', A')`` give the hull
    of ``R = {r : |B' - r A'| <= H_cell(r)}``, which holds ``r*`` with probability at least ``1
    - alpha`` (the envelope argument of the module docstring). For ``m`` in ``[mid, hi]``
    divide by ``m - lo``: ``A' - r' B'``, ``r' = (hi - m) / (m - lo)`` in ``[0, 1]``, of law
    ``Z_A - r' Z_B`` at ``mu``: the same law as the first (the noises are independent and
    identically distributed), so the same cells, with ``(t, n) = (A', B')``. ``r -> lo + (hi
    - lo) r / (1 + r)`` is increasing and ``r' -> hi - (hi - lo) r' / (1 + r')`` decreasing,
    each onto its half, so the halves' hulls map to hulls in ``m``; the interval is the hull
    of their union.

    Coverage. ``mu`` lies in (at least) one half; there ``r*`` (or ``r'*``) is in ``[0, 1]``
    and is accepted with probability at least ``1 - alpha``; when it is, ``mu`` is in that
    half's image, hence in the hull: ``P(mu in [low, high]) >= 1 - alpha``. Each ``m`` is
    tested once (both halves only at ``mid``), so the level is not spent twice; what lies
    above ``1 - alpha`` is the cells' envelope, the lattice and the hull.

    The estimate ``lo + (hi - lo) B' / (A' + B')`` (when ``A', B' >= 0``, ``A' + B' > 0``) zeroes
    the pivot, so it is always inside. Floats: ``a`` and ``b`` are read as exact (integers up to
    ``2^53`` are); the halves' ends are widened by a relative ``1e-12`` in ``r``
    (:func:`ratio_intervals`) and the mapped ends by ``1e-12 (|lo| + |hi|)`` steps, outward,
    then clipped to ``[lo, hi]``. Groups are read in blocks of :data:`_COMPLEMENT_BLOCK`."""
    lo, hi = _check_bounds(lo, hi, alpha)
    cells = ratio_cells(noise, noise, 0.0, 1.0, alpha)
    if cells is None:
        raise ValueError(f"the law of {noise} is too wide to read")
    av = np.asarray(a, dtype=np.float64).ravel()
    bv = np.asarray(b, dtype=np.float64).ravel()
    if av.shape != bv.shape:
        raise ValueError("a and b must have the same number of groups")
    low = np.empty_like(av)
    high = np.empty_like(av)
    found = np.zeros(av.shape, dtype=np.bool_)
    flo, fhi = float(lo), float(hi)
    span = float(hi - lo)
    pad = 1e-12 * (abs(flo) + abs(fhi))
    for s in range(0, av.size, _COMPLEMENT_BLOCK):
        blk = slice(s, s + _COMPLEMENT_BLOCK)
        r_lo, r_hi, f_low = ratio_intervals(bv[blk], av[blk], cells)  # m in [lo, mid]
        p_lo, p_hi, f_high = ratio_intervals(av[blk], bv[blk], cells)  # m in [mid, hi]
        m1 = (flo + span * (r_lo / (1.0 + r_lo)), flo + span * (r_hi / (1.0 + r_hi)))
        m2 = (fhi - span * (p_hi / (1.0 + p_hi)), fhi - span * (p_lo / (1.0 + p_lo)))
        lo_b = np.fmin(m1[0], m2[0]) - pad  # fmin / fmax: an empty half (NaN) is left out
        hi_b = np.fmax(m1[1], m2[1]) + pad
        low[blk] = np.clip(lo_b, flo, fhi)
        high[blk] = np.clip(hi_b, flo, fhi)
        found[blk] = f_low | f_high
    return (
        np.asarray(low, dtype=np.float64),
        np.asarray(high, dtype=np.float64),
        np.asarray(found, dtype=np.bool_),
    )
