"""Per-thread reusable work arrays for chunked numpy kernels (no randomness, no privacy state).

Re-allocating chunk-sized temporaries makes the C library hand pages back to the OS and fault
them in again on every chunk; reusing them keeps large releases in cache. The samplers
(:mod:`dpkit.noise`) and the lattice releases (:mod:`dpkit.mechanisms`) share this one pool.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["SCRATCH_LIMIT", "scratch"]


_POOL = threading.local()
SCRATCH_LIMIT = 1 << 17


def scratch(name: str, n: int, dtype: type) -> npt.NDArray[Any]:
    """A per-thread reusable work array of ``n`` elements (internal temporaries only).

    Re-allocating chunk-sized temporaries makes the C library hand pages back to the OS and fault
    them in again on every chunk; reusing them keeps large releases in cache. Callers must not
    let the array escape, and must ask only for ``n <= SCRATCH_LIMIT``.
    """
    pool = getattr(_POOL, "arrays", None)
    if pool is None:
        pool = _POOL.arrays = {}
    arr = pool.get(name)
    if arr is None or arr.size < n or arr.dtype != dtype:
        arr = np.empty(max(n, 1 << 10), dtype=dtype)
        pool[name] = arr
    view: npt.NDArray[Any] = arr[:n]
    return view
