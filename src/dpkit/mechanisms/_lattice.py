"""Floating-point-safe release on a power-of-two lattice (the fix for Mironov 2012).

Textbook ``x + noise`` in floating point is not differentially private: the set of doubles it can
return depends on x. dpkit never adds noise in floating point. A release

1. maps each value to an integer lattice index ``n = rint(x / s)`` (half to even) where
   ``s = 2**k`` is the *granularity*, a power of two that depends only on public parameters
   (never on the data); NaN is mapped to 0 and indices are clamped to ``[-2**62, 2**62]``
   (both 1-Lipschitz rules except NaN, see docs/special-values.md). The index is computed
   *exactly* for every accepted input type (:mod:`dpkit._numeric.values`): float64 by an exact
   scaling, integers by integer shifts, longdouble in longdouble, Python ints, Fractions and
   Decimals in rational arithmetic; nothing is rounded to a double before the lattice;
2. adds integer noise ``z`` exactly (``|n + z| < 2**63``);
3. returns ``(n + z) * s`` as a double computed from the integer ``n + z`` alone (a zero sum
   is always ``+0.0``, never ``-0.0``): post-processing of an integer, so it leaks nothing.

Rounding moves a value by at most ``s / 2``, so neighbouring values ``|x - x'| <= Delta`` give
indices with ``|n - n'| <= Delta / s + 1``: the rounding is charged as an extra ``s`` of
sensitivity. The granularity is ``2**(floor(log2(m)) - 12)`` with
``m = min(sensitivity, max(scale, sensitivity / 64))``: at most ``2**-12`` of the sensitivity
(the charge) and of the noise scale (the output resolution) whenever the noise scale is at least
``sensitivity / 64``; below that (epsilon above about 64) the resolution stays at ``2**-18`` of
the sensitivity, so that the clamp ``2**62 s`` stays at least ``2**43`` (8.8e12) sensitivities
away from 0 whatever the epsilon. It is never below the smallest double ``2**-1074``, and is
coarsened only when the noise scale in lattice units ``t = scale / s`` would exceed the sampler's
limit (2**32 for Laplace, 2**20 for Gaussian), where the floating-point samplers' pmfs are still
within the stated factor of exact (see :func:`dpkit.noise.laplace_lattice_noise`).

Large releases are processed in cache-sized chunks on two threads (numpy releases the GIL).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.scratch import scratch
from dpkit._numeric.values import ParsedValues, parse_values

__all__ = [
    "DISCRETE_GAUSSIAN_SLACK",
    "DISCRETE_LAPLACE_SLACK",
    "GAUSSIAN_SLACK",
    "LAPLACE_SLACK",
    "LATTICE_BITS",
    "PMF_SLACK",
    "clamp_bound",
    "granularity_for",
    "lattice_index",
    "lattice_release",
]

LATTICE_BITS = 12
LAPLACE_SLACK = 2.0**-25
"""Charged pmf deviation of lattice Laplace noise (analysed: 2**-26.5)."""
GAUSSIAN_SLACK = 2.0**-20
"""Charged pmf deviation of lattice Gaussian noise with sigma < 2**21 (analysed: 2**-21.3)."""
DISCRETE_LAPLACE_SLACK = 2.0**-24
"""Charged pmf deviation of the fast discrete Laplace (analysed: 2**-25.5)."""
DISCRETE_GAUSSIAN_SLACK = 2.0**-23
"""Charged pmf deviation of the fast discrete Gaussian (analysed: 2**-24.5)."""
PMF_SLACK = LAPLACE_SLACK

_INDEX_LIMIT = 2.0**62
_LIMIT = 2**62
_RESOLUTION_FLOOR = 2.0**-6  # the resolution is never finer than 2**-12 of sensitivity / 64
_MIN_EXPONENT = -1074  # the smallest positive double is 2**-1074
_EXACT_SUM = 2.0**52  # |index| <= 2**52 and |noise| < 2**52: the double sum is exact
_CHUNK = 1 << 16
_WORKERS = max(1, min(2, os.cpu_count() or 1))


def granularity_for(scale: float, sensitivity: float, max_t: float) -> float:
    """The lattice spacing for a noise scale and sensitivity (a power of two).

    ``2**(floor(log2(m)) - LATTICE_BITS)`` with ``m = min(sensitivity, max(scale,
    sensitivity / 64))``, at least ``2**-1074``, coarsened to the smallest power of two ``s``
    with ``scale / s <= max_t``. Depends on public parameters only.
    """
    m = min(sensitivity, max(scale, sensitivity * _RESOLUTION_FLOOR))
    _, exponent = math.frexp(m)  # m = f * 2**exponent, f in [0.5, 1)
    s = math.ldexp(1.0, max(exponent - 1 - LATTICE_BITS, _MIN_EXPONENT))
    while scale / s > max_t:
        s *= 2.0
    return s


def clamp_bound(granularity: float) -> float:
    """The clamp of every lattice release: ``2**62 * granularity`` (inputs beyond it, and +-inf,
    are released as +-this bound; may be +inf when it exceeds the double range)."""
    with np.errstate(over="ignore"):
        return float(np.float64(_INDEX_LIMIT) * np.float64(granularity))


def _float_index(
    x: npt.NDArray[np.float64], s: float, out: npt.NDArray[np.float64] | None = None
) -> npt.NDArray[np.float64]:
    """Lattice indices ``rint(x / s)`` clamped to +-2**62, NaN -> 0, as integer-valued doubles.

    Exact: dividing a double by a power of two is exact unless it overflows (then the clamp
    applies) or underflows below 1/2 (then the index is 0 either way).
    """
    inv = 1.0 / s  # exact: s is a power of two (inf only if s < 2**-1024)
    y = np.empty(x.shape) if out is None else out
    with np.errstate(over="ignore", invalid="ignore"):
        # exact scaling by a power of two (or a monotone under/overflow); inf * 0 cannot occur
        if np.isfinite(inv):
            np.multiply(x, inv, out=y)
        else:
            np.divide(x, s, out=y)
    np.rint(y, out=y)
    np.clip(y, -_INDEX_LIMIT, _INDEX_LIMIT, out=y)
    np.nan_to_num(y, copy=False, nan=0.0)  # NaN inputs are released as 0
    return y


def _longdouble_index(x: npt.NDArray[np.longdouble], s: float) -> npt.NDArray[Any]:
    """:func:`_float_index` in longdouble arithmetic (exact for the same reasons), as int64."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        y = np.rint(x / np.longdouble(s))
    y = np.clip(y, -np.longdouble(_INDEX_LIMIT), np.longdouble(_INDEX_LIMIT))
    y = np.nan_to_num(y, nan=0.0)
    return np.asarray(y, dtype=np.int64)


def _integer_index(x: npt.NDArray[Any], s: float) -> npt.NDArray[Any]:
    """``rint(x / s)`` (half to even) clamped to +-2**62 for int64 or uint64 ``x``, exactly.

    With ``s = 2**e``: for ``e <= 0`` the index is ``x * 2**-e`` (clamping x first is the same,
    since ``2**(62 + e) * 2**-e = 2**62``); for ``e >= 1`` it is ``q = floor(x / 2**e)`` plus one
    when the remainder ``r = x mod 2**e`` exceeds half of ``2**e``, or equals it and q is odd.
    Only integer operations: no value is rounded to a double.
    """
    e = math.frexp(s)[1] - 1  # s == 2**e exactly
    unsigned = x.dtype == np.uint64
    if e <= 0:
        m = -e
        if m > 62:  # every non-zero integer is beyond the clamp
            sign = (x != 0) if unsigned else np.sign(x)
            return np.asarray(sign, dtype=np.int64) * np.int64(_LIMIT)
        lim = _LIMIT >> m
        if unsigned:
            capped = np.minimum(x, np.uint64(lim)).astype(np.int64)
        else:
            capped = np.clip(x, -lim, lim).astype(np.int64)
        return np.asarray(np.left_shift(capped, np.int64(m)), dtype=np.int64)
    if e >= 64:  # |x / 2**e| <= 1/2 for int64; for uint64 only e == 64 can reach above 1/2
        if unsigned and e == 64:
            return (x > np.uint64(2**63)).astype(np.int64)
        return np.zeros(x.shape, dtype=np.int64)
    if unsigned:
        uq = np.right_shift(x, np.uint64(e))
        ur = np.bitwise_and(x, np.uint64((1 << e) - 1))
        uhalf = np.uint64(1 << (e - 1))
        ubump = (ur > uhalf) | ((ur == uhalf) & (np.bitwise_and(uq, np.uint64(1)) == 1))
        capped_u = np.minimum(uq + ubump.astype(np.uint64), np.uint64(_LIMIT))
        return np.asarray(capped_u, dtype=np.int64)
    xi = x.astype(np.int64, copy=False)
    q = np.right_shift(xi, np.int64(e))  # arithmetic shift: floor division by 2**e
    r = np.bitwise_and(xi, np.int64((1 << e) - 1))  # x - q 2**e, in [0, 2**e)
    half = np.int64(1 << (e - 1))
    bump = (r > half) | ((r == half) & (np.bitwise_and(q, np.int64(1)) == 1))
    return np.asarray(np.clip(q + bump.astype(np.int64), -_LIMIT, _LIMIT), dtype=np.int64)


def _exact_index(x: npt.NDArray[Any], s: float) -> npt.NDArray[np.int64]:
    """The index of Python ints, Fractions and floats in exact rational arithmetic.

    ``round`` of a Fraction rounds half to even, as ``rint`` does; NaN -> 0, +-inf -> clamp.
    """
    inv = 1 / Fraction(s)
    flat = x.reshape(-1)
    out = np.empty(flat.size, dtype=np.int64)
    for i, v in enumerate(flat):
        if isinstance(v, float):
            if v != v:
                out[i] = 0
                continue
            if math.isinf(v):
                out[i] = _LIMIT if v > 0 else -_LIMIT
                continue
        out[i] = max(-_LIMIT, min(_LIMIT, round(Fraction(v) * inv)))
    return out.reshape(x.shape)


def lattice_index(values: ParsedValues, granularity: float) -> npt.NDArray[Any]:
    """The clamped lattice indices of parsed values: int64, or integer-valued float64 for
    float64 inputs (see :func:`lattice_release` for the rules)."""
    x = values.array
    if values.kind == "float":
        return _float_index(x, granularity)
    if values.kind == "longdouble":
        return _longdouble_index(x, granularity)
    if values.kind in ("int", "uint"):
        return _integer_index(x, granularity)
    return _exact_index(x, granularity)


def lattice_release(
    values: Any,
    granularity: float,
    noise: Callable[[int, npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    *,
    parallel: bool = True,
) -> Any:
    """Release ``values`` on the lattice of spacing ``granularity`` with integer noise ``noise(k)``.

    ``values`` goes through :func:`dpkit._numeric.values.parse_values` (``accept="real"``): its
    type decides, once, how it is read, and a refused type raises before any noise is drawn.
    ``noise(k, out)`` writes k integer-valued doubles below 2**52 in magnitude into ``out`` (and
    returns it). The sum of index and noise is computed exactly: in doubles when every index of
    a float64 chunk is below 2**52 in magnitude (both terms and the sum are then exactly
    representable; ``+ 0.0`` then turns a zero sum of ``-0.0`` terms into ``+0.0``), in int64
    otherwise. Both ways give the same double for the same integer, so the choice (which depends
    on the data) changes only timing. Returns float64 entries that are exact multiples of the
    granularity (or +-inf when the result exceeds the double range), in the container of the
    input (:meth:`~dpkit._numeric.values.ParsedValues.wrap`). ``parallel=False`` keeps the
    keystream order fixed (seeded sources: reproducible results).
    """
    parsed = parse_values(values, accept="real")
    s = float(granularity)
    shape = parsed.array.shape
    kind = parsed.kind
    if kind == "exact":  # Python ints / Fractions: indices up front (one Python loop)
        flat: npt.NDArray[Any] = _exact_index(parsed.array, s).reshape(-1)
    else:
        flat = parsed.array.reshape(-1)
    n = flat.size
    out = np.empty(n, dtype=np.float64)

    def work(start: int) -> None:
        stop = min(start + _CHUNK, n)
        k = stop - start
        chunk = flat[start:stop]
        if kind == "float":
            idx = _float_index(chunk, s, scratch("lat_idx", k, np.float64))
        elif kind in ("int", "uint"):
            idx = _integer_index(chunk, s)
        elif kind == "longdouble":
            idx = _longdouble_index(chunk, s)
        else:
            idx = chunk
        z = noise(k, scratch("lat_z", k, np.float64))
        dest = out[start:stop]
        if idx.dtype == np.float64 and (
            not idx.size or max(-float(idx.min()), float(idx.max())) <= _EXACT_SUM
        ):
            np.add(idx, z, out=dest)
            dest += 0.0  # -0.0 + 0.0 == +0.0: the double depends on the integer sum only
        else:
            total = idx.astype(np.int64)
            total += z.astype(np.int64)
            dest[...] = total  # int64 -> double: a function of the exact integer (no -0.0)
        with np.errstate(over="ignore"):  # beyond the double range: +-inf (post-processing)
            dest *= s

    starts = range(0, n, _CHUNK)
    if parallel and n > 4 * _CHUNK and _WORKERS > 1:
        from concurrent.futures import ThreadPoolExecutor  # only large releases use threads

        with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
            list(pool.map(work, starts))
    else:
        for start in starts:
            work(start)
    return parsed.wrap(out.reshape(shape))
