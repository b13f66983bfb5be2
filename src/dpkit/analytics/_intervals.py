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
to the tail; the total is inflated by a relative ``1e-9`` and ``1e-12`` absolute for the
floating-point sums. Interval ends in integer steps beyond ``2^50`` are moved one step inward
before the probabilities are read (a float's rounding there). Each rounding goes to the side
that widens the interval.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dpkit.analytics._pricing import Noise

__all__ = ["joint_halfwidth", "ratio_cells", "ratio_interval", "ratio_intervals"]

FloatArray = npt.NDArray[np.float64]

#: Mass of ``Z_N`` beyond the summed range, as a fraction of alpha (added to the tail whole).
_TRUNC = 1e-4
#: Largest number of ``Z_N`` values summed; beyond, :func:`joint_halfwidth` returns ``None``.
_MAX_TERMS = 200_001
#: Relative and absolute margins on the floating-point tail.
_REL, _ABS = 1e-9, 1e-12
_GAUSS_SUM_LIMIT = 1000.0
#: The search for ``H`` stops within this relative distance above the smallest (widths lose
#: at most this fraction; the interval stays valid, as ``H`` only ever decreases to a value
#: whose bound holds).
_TOL = 2.0**-14
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


def _support(noise: Noise, alpha: float) -> tuple[FloatArray, FloatArray, float] | None:
    """Values ``k`` of ``Z_N`` summed over, their pmf, and the mass left out (upper bound)."""
    h = noise.halfwidth(alpha * _TRUNC)
    if 2 * h + 1 > _MAX_TERMS:
        return None
    k = np.arange(-h, h + 1, dtype=np.float64)
    return k, _pmf(noise, k), alpha * _TRUNC


def _tails(
    nt: Noise,
    k: FloatArray,
    pk: FloatArray,
    rest: float,
    a: FloatArray,
    b: FloatArray,
    h: FloatArray,
) -> FloatArray:
    """Per row ``i``: a certified upper bound on ``P(max(|Z_T - a_i Z_N|, |Z_T - b_i Z_N|) >
    h_i)`` (``a``, ``b``, ``h`` of one length; ``k``, ``pk`` the summed values of ``Z_N``)."""
    ak, bk = np.outer(a, k), np.outer(b, k)
    hh = h[:, None]
    lo = np.ceil(np.maximum(ak, bk) - hh)
    hi = np.floor(np.minimum(ak, bk) + hh)
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
    k, pk, rest = sup
    a, b = np.minimum(a, b), np.maximum(a, b)
    # the union bound holds (up to the float margins): the start of the search
    ht, hn = nt.halfwidth(alpha / 2.0), nn.halfwidth(alpha / 2.0)
    hi = ht + np.ceil(np.maximum(np.abs(a), np.abs(b)) * hn) + 1.0
    while True:
        bad = _tails(nt, k, pk, rest, a, b, hi) > alpha
        if not bool(bad.any()):
            break
        hi = np.where(bad, hi * 2.0, hi)
    lo = np.zeros_like(hi)
    # invariant: the bound holds at hi; stop within a relative _TOL of the smallest H
    while bool((hi - lo > np.maximum(_TOL * hi, 0.0)).any()):
        mid = np.floor((lo + hi) / 2.0)
        ok = _tails(nt, k, pk, rest, a, b, mid) <= alpha
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + 1.0)
    return np.asarray(hi, dtype=np.float64)


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
