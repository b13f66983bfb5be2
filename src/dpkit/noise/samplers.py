"""Samplers over a :class:`~dpkit.noise.RandomSource`, vectorised over numpy arrays.

Each sampler states the distribution it returns. "Fast" samplers compute with doubles and are
within a stated relative pmf error of their target (see each docstring); "exact" samplers use
Python integers and :class:`fractions.Fraction` and return exactly the stated distribution
(Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020,
Algorithms 1-3). No sampler here ever raises on the values it draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from dpkit._numeric.scratch import SCRATCH_LIMIT, scratch
from dpkit._numeric.validation import check_positive, check_probability
from dpkit.errors import PrivacyParameterError
from dpkit.noise._source import RandomSource, _shape

__all__ = [
    "CHUNK",
    "bernoulli",
    "bernoulli_exact",
    "bernoulli_exp",
    "bernoulli_exp_exact",
    "discrete_gaussian",
    "discrete_gaussian_exact",
    "discrete_laplace",
    "discrete_laplace_exact",
    "exponential",
    "exponential_and_sign",
    "exponential_two_tailed",
    "gaussian",
    "gaussian_lattice_float",
    "gaussian_lattice_noise",
    "geometric",
    "gumbel",
    "laplace",
    "laplace_lattice_float",
    "laplace_lattice_noise",
]

CHUNK = 1 << 16
_SIGN_BIT = np.uint64(1 << 63)
_T = TypeVar("_T", bound=np.generic)
_U64_63 = np.uint64(63)
_LN2 = math.log(2.0)
_TWO_M53 = 2.0**-53
_U64_11 = np.uint64(11)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _chunked(
    size: int | tuple[int, ...], dtype: type[_T], fill: Callable[[int], npt.NDArray[_T]]
) -> npt.NDArray[_T]:
    """Build an array of ``size`` by filling it chunk by chunk (cache-resident work)."""
    shape = _shape(size)
    n = int(np.prod(shape, dtype=np.int64))
    out: npt.NDArray[_T] = np.empty(n, dtype=dtype)
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        out[start:stop] = fill(stop - start)
    return out.reshape(shape)


def exponential_and_sign(source: RandomSource, k: int) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """``k`` draws of E ~ Exp(1) (precise in the upper tail) with independent signs.

    A building block shared by the samplers here and the noisy-max selections of
    :mod:`dpkit.mechanisms` (unit scale, no validation: ``k`` is a trusted chunk size).

    E = -ln(V) for a full-precision uniform V, so E is exact to a few ulps for every
    E up to 708 (V down to 2**-1022); the sign is bit 63 of the word, independent of V.
    """
    w = source.words(k)
    v = source.full_precision_from_words(w)
    e = np.log(v)
    np.negative(e, out=e)
    return e, (w >> _U64_63).astype(np.bool_)


def exponential_two_tailed(source: RandomSource, k: int) -> FloatArray:
    """``k`` draws of E ~ Exp(1) precise at both ends of its range.

    A building block like :func:`exponential_and_sign` (unit scale, ``k`` a trusted chunk size).

    By memorylessness, with a fair coin B and a full-precision uniform U,
    ``E = ln 2 - ln U`` when B = 1 (the part E >= ln 2) and ``E = -log1p(-U/2)`` when B = 0
    (the part E < ln 2, whose conditional CDF is 2(1 - e^-x)). Both branches keep 52 bits of
    relative precision, so E near 0 (the Gumbel upper tail) is as exact as E near 700.
    """
    w = source.words(k)
    u = source.full_precision_from_words(w)
    top = (w >> _U64_63).astype(np.bool_)
    upper = _LN2 - np.log(u)
    lower = -np.log1p(-0.5 * u)
    return np.where(top, upper, lower)


# ---------------------------------------------------------------------------------------------
# Continuous samplers (doubles)
# ---------------------------------------------------------------------------------------------
def exponential(source: RandomSource, *, scale: float, size: int | tuple[int, ...]) -> FloatArray:
    """Exponential with density ``exp(-x / scale) / scale`` on x >= 0, precise in both tails."""
    scale = check_positive(scale, "scale")
    return _chunked(size, np.float64, lambda k: scale * exponential_two_tailed(source, k))


def gumbel(source: RandomSource, *, scale: float = 1.0, size: int | tuple[int, ...]) -> FloatArray:
    """Gumbel(0, scale): CDF ``exp(-exp(-x / scale))``, computed as ``-scale ln E``, E ~ Exp(1).

    E is precise near 0, so the upper tail (large x, what decides an arg-max) is exact to a few
    ulps up to x = 744 scale.
    """
    scale = check_positive(scale, "scale")

    def fill(k: int) -> FloatArray:
        e = exponential_two_tailed(source, k)
        return -scale * np.log(e)

    return _chunked(size, np.float64, fill)


def laplace(source: RandomSource, *, scale: float, size: int | tuple[int, ...]) -> FloatArray:
    """Laplace(0, b): density ``exp(-|x| / b) / (2 b)``, by the inverse CDF.

    The inverse CDF is ``x = -b sign(u) ln(1 - 2|u|)`` with u uniform on (-1/2, 1/2). Here
    ``1 - 2|u|`` (uniform on (0, 1)) is drawn directly as a full-precision uniform V and
    ``sign(u)`` as an independent coin, so ``x = -b s ln V`` keeps full relative precision in the
    tails. This is a plain floating-point sampler: releases use :func:`laplace_lattice_noise`.
    """
    scale = check_positive(scale, "scale")

    def fill(k: int) -> FloatArray:
        e, s = exponential_and_sign(source, k)
        e *= scale
        return np.where(s, -e, e)

    return _chunked(size, np.float64, fill)


_POLAR_C = 2.0**-8
_MASK52 = np.uint64((1 << 52) - 1)
_ONE_BITS = np.uint64(0x3FF0000000000000)
_POLAR_LOG_C = 8.0 * _LN2


def _uniform_square(
    source: RandomSource, n: int, *, pooled: bool = True
) -> tuple[FloatArray, FloatArray]:
    """n points uniform on (-1, 1)^2: coordinates +-k 2**-52, k uniform on {0, ..., 2**52 - 1}.

    Built with bit operations only: ``(w & (2**52 - 1)) | bits(1.0)`` is uniform on [1, 2) with
    52 random significand bits (bits 0..51); subtracting 1 is exact; bit 63 of the word, which
    is independent of bits 0..51, becomes the sign.
    (The atom 0 gets both signs, so it weighs 2**-52 instead of 2**-53: a relative error below
    2**-30 on the bin it falls in, within the stated bound.)
    """
    pooled = pooled and 2 * n <= SCRATCH_LIMIT  # pooled: the result lives in scratch space
    w = scratch("sq_w", 2 * n, np.uint64) if pooled else np.empty(2 * n, dtype=np.uint64)
    source.fill_words(w)
    xy = scratch("sq_xy", 2 * n, np.float64) if pooled else np.empty(2 * n)
    bits = xy.view(np.uint64)
    np.bitwise_and(w, _MASK52, out=bits)
    np.bitwise_or(bits, _ONE_BITS, out=bits)
    np.subtract(xy, 1.0, out=xy)
    np.bitwise_and(w, _SIGN_BIT, out=w)
    np.bitwise_or(bits, w, out=bits)
    return xy[:n], xy[n:]


def _polar_deep(
    source: RandomSource, n: int
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """n points uniform in the disc of radius sqrt(_POLAR_C), in exact rescaled form.

    A point uniform in the unit disc conditioned on ``s < c`` is ``sqrt(c)`` times a point
    uniform in the unit disc; recursing until the fresh point has ``s' >= c`` gives the point as
    ``c**(j/2) (x', y')`` with ``s = c**j s'``. Returns ``x', y', s'`` and ``log s``.
    """
    xs, ys, ss, logs = (np.empty(n) for _ in range(4))
    depth = np.ones(n)
    todo = np.arange(n)
    while todo.size:
        x, y = _uniform_square(source, todo.size, pooled=False)  # the caller holds the pool
        s = x * x + y * y
        inside = s < 1.0
        deeper = inside & (s < _POLAR_C)
        done = inside & ~deeper
        idx = todo[done]
        xs[idx], ys[idx], ss[idx] = x[done], y[done], s[done]
        logs[idx] = np.log(s[done]) - depth[idx] * _POLAR_LOG_C
        depth[todo[deeper]] += 1.0
        todo = todo[~done]
    return xs, ys, ss, logs


def _polar_normals(source: RandomSource, k: int, out: FloatArray | None = None) -> FloatArray:
    """``k`` standard normals by Marsaglia's polar method, exact in both tails.

    (x, y) is uniform on the square [-1, 1)^2 (53-bit coordinates); pairs with
    ``s = x^2 + y^2 >= 1`` are rejected (probability 1 - pi/4), and each accepted pair gives the
    two independent normals ``x sqrt(-2 ln s / s)`` and ``y sqrt(-2 ln s / s)`` (Marsaglia and
    Bray 1964): s is uniform on (0, 1) and independent of the angle (x, y) / sqrt(s).
    Two regions where 53-bit coordinates would lose precision are redrawn exactly:

    * ``s < 2**-8`` (the tails): by :func:`_polar_deep` (exact rescaling, any depth);
    * ``s > 1 - 2**-8`` (near 0, where ``ln s`` cancels): the radius uses a fresh
      ``s' = 1 - 2**-8 U`` with a full-precision uniform U and ``ln s' = log1p(-2**-8 U)``,
      which has the law of s on that interval, independent of the angle.

    Elsewhere every quantity has relative error below 2**-43 (``|ln s| >= 2**-8``).
    """
    if out is None:
        out = np.empty(k)
    filled = 0
    with np.errstate(invalid="ignore", divide="ignore"):
        while filled < k:
            need = k - filled
            # pairs expected to give 1% more than need normals (accept pi/4): a second round
            # is needed with probability below 1e-4 for need >= 2**14
            m = int(need * 0.6367 * 1.01) + 64
            pooled = 2 * m <= SCRATCH_LIMIT
            x, y = _uniform_square(source, m, pooled=pooled)
            s = scratch("pol_s", m, np.float64) if pooled else np.empty(m)
            tmp = scratch("pol_t", m, np.float64) if pooled else np.empty(m)
            np.multiply(x, x, out=s)
            np.multiply(y, y, out=tmp)
            np.add(s, tmp, out=s)
            keep = scratch("pol_k", m, np.bool_) if pooled else np.empty(m, dtype=np.bool_)
            mark = scratch("pol_m", m, np.bool_) if pooled else np.empty(m, dtype=np.bool_)
            np.less(s, 1.0, out=keep)
            logs = tmp
            np.log(s, out=logs)
            # Both regions are located on the original s, before the deep redraw replaces s by
            # the rescaled s' (a deep point may have s' > 1 - c; its log already carries the
            # depth term and must not be replaced by a fresh near-1 radius).
            np.greater(s, 1.0 - _POLAR_C, out=mark)
            np.logical_and(mark, keep, out=mark)
            high = np.flatnonzero(mark)
            np.less(s, _POLAR_C, out=mark)
            low = np.flatnonzero(mark)
            if high.size:
                u = source.uniform_full(high.size)
                logs[high] = np.log1p(-_POLAR_C * u)
            if low.size:
                x[low], y[low], s[low], logs[low] = _polar_deep(source, low.size)
            keep[low] = True
            f = logs
            np.multiply(f, -2.0, out=f)
            np.divide(f, s, out=f)
            np.sqrt(f, out=f)
            np.multiply(x, f, out=x)
            np.multiply(y, f, out=y)
            pairs = int(np.count_nonzero(keep))
            if 2 * pairs > need:  # last round: keep only the first accepted pairs needed
                keep[np.flatnonzero(keep)[(need + 1) // 2 :]] = False
                pairs = (need + 1) // 2
            if 2 * pairs <= need:
                np.compress(keep, x, out=out[filled : filled + pairs])
                np.compress(keep, y, out=out[filled + pairs : filled + 2 * pairs])
                filled += 2 * pairs
            else:  # need is odd: one normal of the last pair is dropped
                np.compress(keep, x, out=out[filled : filled + pairs])
                out[filled + pairs : k] = np.compress(keep, y)[: need - pairs]
                filled = k
    return out


def gaussian(source: RandomSource, *, sigma: float, size: int | tuple[int, ...]) -> FloatArray:
    """Normal(0, sigma^2): density ``exp(-x^2 / (2 sigma^2)) / (sigma sqrt(2 pi))`` (polar)."""
    sigma = check_positive(sigma, "sigma")
    return _chunked(size, np.float64, lambda k: sigma * _polar_normals(source, k))


# ---------------------------------------------------------------------------------------------
# Integer noise for lattice releases
# ---------------------------------------------------------------------------------------------
_TWO_LEVEL_T = 2.0**13


def laplace_lattice_noise(
    source: RandomSource, *, t: float, size: int | tuple[int, ...]
) -> IntArray:
    """Integer noise ``Z = rint(t L)`` with L ~ Laplace(0, 1): a Laplace rounded to integers.

    pmf: ``P(0) = 1 - exp(-1/(2t))`` and, for k != 0, ``P(k) = sinh(1/(2t)) exp(-|k|/t)``.
    For an integer n, ``n + Z = rint(n + tL)`` is post-processing of the continuous Laplace
    mechanism, so shifting by Delta integers costs exactly epsilon = Delta / t.

    Sampling. ``tL = S * t E`` with a fair sign S and E ~ Exp(1) (E = -ln V, V full precision).
    For t < 2**13 the product ``t E`` is rounded directly. For larger t (up to 2**33) it is split
    by memorylessness: with w = 2**j and r = t / w in [2**12, 2**13),
    ``t E = w C + R`` where ``C = floor(r E')`` ~ Geometric(exp(-w/t)) and, independently,
    ``R = -t log1p(-U (1 - exp(-w/t)))`` is the exponential truncated to [0, w) (U uniform);
    then ``rint(tL) = S (w C + rint(R))`` because w C is an integer.

    Floating-point deviation. Every double computed on the way has relative error at most
    6 u (u = 2**-53, allowing 4 ulp for the libm log), and the rounded quantity is below
    2**13 * 745 (E <= 708 for V >= 2**-1022), so each bin boundary moves by at most 2**-27.9;
    bins hold at least 2**30 atoms of the sampler. Every bin probability is therefore within a
    factor ``exp(+-2**-26.5)`` of exact; mechanisms charge ``pmf_slack = 2**-25``.
    """
    t = check_positive(t, "t")
    if not t < 2.0**33:
        raise PrivacyParameterError(f"t must be below 2**33, got {t!r}")

    return _chunked(size, np.int64, lambda k: laplace_lattice_float(source, t, k).astype(np.int64))


def laplace_lattice_float(
    source: RandomSource, t: float, k: int, out: FloatArray | None = None
) -> FloatArray:
    """:func:`laplace_lattice_noise` as integer-valued doubles (|Z| < 2**43), without checks."""
    if t < _TWO_LEVEL_T:
        pooled = k <= SCRATCH_LIMIT
        w = scratch("lap_w", k, np.uint64) if pooled else np.empty(k, dtype=np.uint64)
        source.fill_words(w)
        y = source.full_precision_from_words(w, out=out if out is not None else np.empty(k))
        np.log(y, out=y)
        np.multiply(y, -t, out=y)  # t E >= 0
        yb = y.view(np.uint64)
        np.bitwise_and(w, _SIGN_BIT, out=w)
        np.bitwise_or(yb, w, out=yb)  # the sign: bit 63, independent of the uniform
        np.rint(y, out=y)
        return y

    block = math.ldexp(1.0, math.frexp(t)[1] - 13)  # r = t / block in [2**12, 2**13)
    r = t / block
    width = -math.expm1(-block / t)  # P(t E < block), computed to full relative precision
    e, s = exponential_and_sign(source, k)
    e *= r
    coarse = np.floor(e)
    u = source.uniform(k)
    fine = np.log1p(-u * width)
    fine *= -t
    np.rint(fine, out=fine)
    coarse *= block
    coarse += fine
    np.negative(coarse, out=coarse, where=s)
    if out is not None:
        out[...] = coarse
        return out
    return coarse


def gaussian_lattice_noise(
    source: RandomSource, *, sigma: float, size: int | tuple[int, ...]
) -> IntArray:
    """Integer noise ``Z = rint(sigma N)`` with N ~ Normal(0, 1): a Gaussian rounded to integers.

    pmf: ``P(k) = Phi((k + 1/2)/sigma) - Phi((k - 1/2)/sigma)``. For an integer n,
    ``n + Z = rint(n + sigma N)`` is post-processing of the continuous Gaussian mechanism, so it
    inherits that mechanism's exact privacy profile for an integer shift Delta.

    Floating-point deviation: the polar normals have absolute error below ``|N| 2**-43`` where
    ``|N| < 0.2`` and below ``|N| 2**-49`` elsewhere, with |N| <= 53 (see :func:`_polar_normals`),
    so for sigma < 2**21 each bin boundary moves by at most 2**-22.3 and every bin probability is
    within a factor ``exp(+-2**-21.3)`` of exact; mechanisms charge ``pmf_slack = 2**-20``.
    """
    sigma = check_positive(sigma, "sigma")
    if not sigma < 2.0**21:
        raise PrivacyParameterError(f"sigma must be below 2**21, got {sigma!r}")
    return _chunked(
        size, np.int64, lambda k: gaussian_lattice_float(source, sigma, k).astype(np.int64)
    )


def gaussian_lattice_float(
    source: RandomSource, sigma: float, k: int, out: FloatArray | None = None
) -> FloatArray:
    """:func:`gaussian_lattice_noise` as integer-valued doubles (|Z| < 2**27), without checks."""
    g = _polar_normals(source, k, out)
    np.multiply(g, sigma, out=g)
    np.rint(g, out=g)
    return g


# ---------------------------------------------------------------------------------------------
# Bernoulli, geometric, discrete Laplace and discrete Gaussian (fast paths)
# ---------------------------------------------------------------------------------------------
def bernoulli(
    source: RandomSource, *, p: float, size: int | tuple[int, ...]
) -> npt.NDArray[np.bool_]:
    """Bernoulli(p): ``P(True) = ceil(p 2**53) / 2**53``, within 2**-53 of p."""
    p = check_probability(p, name="p")
    return _chunked(size, np.bool_, lambda k: source.uniform(k) < p)


def bernoulli_exp(
    source: RandomSource, *, gamma: float, size: int | tuple[int, ...]
) -> npt.NDArray[np.bool_]:
    """Bernoulli(exp(-gamma)) for gamma >= 0, within 2**-52 of exp(-gamma) (doubles)."""
    if not (
        isinstance(gamma, (int, float))
        and not isinstance(gamma, bool)
        and gamma >= 0
        and math.isfinite(gamma)
    ):
        raise PrivacyParameterError(f"gamma must be a finite non-negative number, got {gamma!r}")
    p = math.exp(-float(gamma))
    return _chunked(size, np.bool_, lambda k: source.uniform(k) < p)


def geometric(source: RandomSource, *, p: float, size: int | tuple[int, ...]) -> IntArray:
    """Geometric on {0, 1, ...}: ``P(k) = (1 - p)^k p`` for p in (0, 1].

    Computed as ``floor(E / lambda)`` with E ~ Exp(1) and ``lambda = -ln(1 - p)``, since
    ``P(floor(E / lambda) >= k) = exp(-k lambda) = (1 - p)^k``. Values above 2**62 saturate.
    """
    p = check_probability(p, name="p", open_low=True)
    if p == 1.0:
        return np.zeros(_shape(size), dtype=np.int64)
    lam = -math.log1p(-p)

    def fill(k: int) -> IntArray:
        e, _ = exponential_and_sign(source, k)
        g = np.floor(e / lam)
        return np.minimum(g, 2.0**62).astype(np.int64)

    return _chunked(size, np.int64, fill)


def discrete_laplace(
    source: RandomSource, *, scale: float, size: int | tuple[int, ...]
) -> IntArray:
    """Discrete Laplace on the integers: ``P(k) = tanh(1/(2t)) exp(-|k| / t)``, t = scale.

    Computed as the difference of two independent geometrics with ratio ``q = exp(-1/t)``
    (each ``floor(t E)``), whose law is ``(1 - q)/(1 + q) q^|k|``. For t < 2**13 the relative
    pmf error is bounded as in :func:`laplace_lattice_noise` (``exp(+-2**-26.5)`` per geometric,
    so ``exp(+-2**-25.5)`` for the difference); beyond, it grows like ``t 2**-48``.
    """
    t = check_positive(scale, "scale")

    def fill(k: int) -> IntArray:
        e1, _ = exponential_and_sign(source, k)
        e2, _ = exponential_and_sign(source, k)
        g: FloatArray = np.floor(e1 * t) - np.floor(e2 * t)
        np.clip(g, -(2.0**62), 2.0**62, out=g)
        return g.astype(np.int64)

    return _chunked(size, np.int64, fill)


def discrete_gaussian(
    source: RandomSource, *, sigma: float, size: int | tuple[int, ...]
) -> IntArray:
    """Discrete Gaussian: ``P(k) = exp(-k^2 / (2 sigma^2)) / sum_j exp(-j^2 / (2 sigma^2))``.

    Vectorised Algorithm 3 of Canonne, Kamath and Steinke (2020): propose Y from the discrete
    Laplace with ``t = floor(sigma) + 1`` and accept with probability
    ``exp(-(|Y| - sigma^2 / t)^2 / (2 sigma^2))``, drawn as ``E >= gamma`` for E ~ Exp(1) with full
    relative precision. The proposal carries the discrete-Laplace error bound
    (``exp(+-2**-25.5)``) and each acceptance probability has relative error below
    ``gamma 2**-50 <= 2**-40`` (gamma <= 708 where E is represented; beyond, the proposal's own
    mass is below 2**-1000), so the output pmf (numerator and normaliser) is within a factor
    ``exp(+-2**-24)`` of the exact law for sigma < 2**13 (charged ``2**-23``); use
    :func:`discrete_gaussian_exact` when exactness is required.
    """
    sigma = check_positive(sigma, "sigma")
    t = math.floor(sigma) + 1
    s2 = sigma * sigma

    def fill(k: int) -> IntArray:
        out = np.empty(k, dtype=np.int64)
        todo = np.arange(k)
        while todo.size:
            m = todo.size
            y = discrete_laplace(source, scale=t, size=m)
            a = np.abs(y).astype(np.float64) - s2 / t
            # Bernoulli(exp(-gamma)) as E >= gamma with E ~ Exp(1) at full relative precision:
            # exact to a relative gamma 2**-50 even where exp(-gamma) is far below 2**-53.
            e, _ = exponential_and_sign(source, m)
            accept = e >= (a * a) / (2.0 * s2)
            out[todo[accept]] = y[accept]
            todo = todo[~accept]
        return out

    return _chunked(size, np.int64, fill)


# ---------------------------------------------------------------------------------------------
# Exact scalar samplers (Canonne, Kamath and Steinke 2020)
# ---------------------------------------------------------------------------------------------
def _as_fraction(name: str, value: Fraction | int | float) -> Fraction:
    if isinstance(value, bool):
        raise PrivacyParameterError(f"{name} must be a rational number, got {value!r}")
    if isinstance(value, float):
        check_positive(value, name) if value != 0 else None
        if not math.isfinite(value):
            raise PrivacyParameterError(f"{name} must be finite, got {value!r}")
        return Fraction(value)
    if isinstance(value, (int, Fraction)):
        return Fraction(value)
    raise PrivacyParameterError(f"{name} must be a rational number, got {value!r}")


def bernoulli_exact(source: RandomSource, p: Fraction) -> bool:
    """Exactly Bernoulli(p) for a rational p in [0, 1] (one uniform integer < denominator)."""
    p = _as_fraction("p", p)
    if not 0 <= p <= 1:
        raise PrivacyParameterError(f"p must lie in [0, 1], got {p}")
    return source.randbelow(p.denominator) < p.numerator


def bernoulli_exp_exact(source: RandomSource, gamma: Fraction) -> bool:
    """Exactly Bernoulli(exp(-gamma)) for a rational gamma >= 0 (CKS 2020, Algorithm 1).

    For gamma in [0, 1]: draw A_k ~ Bernoulli(gamma / k) for k = 1, 2, ... until the first
    failure at K; return ``K odd`` (the alternating series of exp(-gamma)). For gamma > 1 take
    floor(gamma) independent Bernoulli(exp(-1)) and one Bernoulli(exp(-frac(gamma))).
    """
    gamma = _as_fraction("gamma", gamma)
    if gamma < 0:
        raise PrivacyParameterError(f"gamma must be non-negative, got {gamma}")
    return _bernoulli_exp_ratio(source, gamma.numerator, gamma.denominator)


def _bernoulli_exp_ratio(source: RandomSource, num: int, den: int) -> bool:
    """:func:`bernoulli_exp_exact` for ``gamma = num / den`` (integers, ``num >= 0``, ``den >
    0``), in integer arithmetic: ``Bernoulli(gamma / k)`` is ``randbelow(den k) < num``, exactly
    the same law as with the reduced fraction (no gcd per step)."""
    if num <= den:
        k = 1
        while source.randbelow(den * k) < num:
            k += 1
        return k % 2 == 1
    whole, rest = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_ratio(source, 1, 1):
            return False
    return _bernoulli_exp_ratio(source, rest, den)


def discrete_laplace_exact(source: RandomSource, scale: Fraction) -> int:
    """Exactly the discrete Laplace ``P(k) ∝ exp(-|k| / scale)`` for a rational scale > 0.

    CKS 2020, Algorithm 2 with scale = t / s: U uniform on {0..t-1} kept with probability
    exp(-U/t), V ~ Geometric(1 - e^-1), Y = floor((U + t V) / s), random sign with the
    negative zero rejected.
    """
    scale = _as_fraction("scale", scale)
    if scale <= 0:
        raise PrivacyParameterError(f"scale must be positive, got {scale}")
    t, s = scale.numerator, scale.denominator
    while True:
        u = source.randbelow(t)
        if not _bernoulli_exp_ratio(source, u, t):
            continue
        v = 0
        while _bernoulli_exp_ratio(source, 1, 1):
            v += 1
        y = (u + t * v) // s
        negative = source.randbelow(2) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian_exact(source: RandomSource, sigma2: Fraction) -> int:
    """Exactly the discrete Gaussian ``P(k) ∝ exp(-k^2 / (2 sigma^2))`` for a rational sigma^2.

    CKS 2020, Algorithm 3: t = floor(sigma) + 1, propose Y from the exact discrete Laplace with
    scale t, accept with probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)) (exact Bernoulli).
    """
    sigma2 = _as_fraction("sigma2", sigma2)
    if sigma2 <= 0:
        raise PrivacyParameterError(f"sigma2 must be positive, got {sigma2}")
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    while True:
        y = discrete_laplace_exact(source, Fraction(t))
        gamma = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
        if bernoulli_exp_exact(source, gamma):
            return y
