"""Floating-point-safe release on a power-of-two lattice (the fix for Mironov 2012).

Textbook ``x + noise`` in floating point is not differentially private: the set of doubles it can
return depends on x. dpkit never adds noise in floating point. A release

1. maps each value to an integer lattice index ``n = rint(x / s)`` where ``s = 2**k`` is the
   *granularity*, a power of two that depends only on public parameters (never on the data);
   NaN is mapped to 0 and indices are clamped to ``[-2**62, 2**62]`` (both 1-Lipschitz rules
   except NaN, see docs/special-values.md);
2. adds integer noise ``z`` in exact int64 arithmetic (``|n + z| < 2**63``);
3. returns ``(n + z) * s`` as a double (post-processing of an integer, so it leaks nothing).

Rounding moves a value by at most ``s / 2``, so neighbouring values ``|x - x'| <= Delta`` give
indices with ``|n - n'| <= Delta / s + 1``: the rounding is charged as an extra ``s`` of
sensitivity. The granularity is ``2**(floor(log2(min(sensitivity, scale))) - 12)``: at most
``2**-12`` of the sensitivity (the charge) and of the noise scale (the output resolution). It is
coarsened only when the noise scale in lattice units ``t = scale / s`` would exceed the sampler's
limit (2**32 for Laplace, 2**20 for Gaussian), where the floating-point samplers' pmfs are still
within the stated factor of exact (see :func:`dpkit.noise.laplace_lattice_noise`).

Large releases are processed in cache-sized chunks on two threads (numpy releases the GIL).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.noise._source import scratch

__all__ = [
    "DISCRETE_GAUSSIAN_SLACK",
    "DISCRETE_LAPLACE_SLACK",
    "GAUSSIAN_SLACK",
    "LAPLACE_SLACK",
    "LATTICE_BITS",
    "PMF_SLACK",
    "granularity_for",
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
_EXACT_SUM = 2.0**52  # |index| <= 2**52 and |noise| < 2**52: the double sum is exact
_CHUNK = 1 << 16
_WORKERS = max(1, min(2, os.cpu_count() or 1))


def granularity_for(scale: float, sensitivity: float, max_t: float) -> float:
    """The lattice spacing for a noise scale and sensitivity (a power of two).

    ``2**(floor(log2(min(scale, sensitivity))) - LATTICE_BITS)``, coarsened to the smallest power
    of two ``s`` with ``scale / s <= max_t``. Depends on public parameters only.
    """
    _, exponent = math.frexp(min(scale, sensitivity))  # x = m * 2**exponent, m in [0.5, 1)
    s = math.ldexp(1.0, exponent - 1 - LATTICE_BITS)
    while scale / s > max_t:
        s *= 2.0
    return s


def _to_index(x: npt.NDArray[np.float64], s: float,
              out: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.float64]:
    """Lattice indices ``rint(x / s)`` clamped to +-2**62, NaN -> 0, as integer-valued doubles."""
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


def lattice_release(
    values: Any,
    granularity: float,
    noise: Callable[[int, npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    *,
    parallel: bool = True,
) -> npt.NDArray[np.float64]:
    """Release ``values`` on the lattice of spacing ``granularity`` with integer noise ``noise(k)``.

    ``noise(k, out)`` writes k integer-valued doubles below 2**52 in magnitude into ``out`` (and
    returns it). The sum of index and
    noise is computed exactly: in doubles when every index of the chunk is below 2**52 in
    magnitude (both terms and the sum are then exactly representable), in int64 otherwise. Both
    ways give the same integer, so the choice (which depends on the data) changes only timing.
    Returns a float64 array of the same shape whose entries are exact multiples of the
    granularity (or +-inf when the result exceeds the double range). ``parallel=False`` keeps
    the keystream order fixed (seeded sources: reproducible results).
    """
    x = np.asarray(values, dtype=np.float64)
    shape = x.shape
    flat = x.reshape(-1)
    n = flat.size
    out = np.empty(n, dtype=np.float64)
    s = float(granularity)

    def work(start: int) -> None:
        stop = min(start + _CHUNK, n)
        k = stop - start
        idx = _to_index(flat[start:stop], s, scratch("lat_idx", k, np.float64))
        z = noise(k, scratch("lat_z", k, np.float64))
        dest = out[start:stop]
        if idx.size and max(-float(idx.min()), float(idx.max())) <= _EXACT_SUM:
            np.add(idx, z, out=dest)
        else:
            total = idx.astype(np.int64)
            total += z.astype(np.int64)
            dest[...] = total  # int64 -> double: post-processing of the exact integer
        with np.errstate(over="ignore"):  # beyond the double range: +-inf (post-processing)
            dest *= s

    starts = range(0, n, _CHUNK)
    if parallel and n > 4 * _CHUNK and _WORKERS > 1:
        with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
            list(pool.map(work, starts))
    else:
        for start in starts:
            work(start)
    return out.reshape(shape)
