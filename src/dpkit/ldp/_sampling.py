"""Vectorised exact coins for the LDP simulations, drawn from a :class:`~dpkit.noise.RandomSource`.

``bernoulli_threshold(source, T, n)`` is ``True`` with probability exactly ``T / 2**64``: one
uniform 64-bit word per draw compared with ``T``, the same law as the client's
``secrets.randbits(64) < T``.

``bernoulli_bitsliced(source, T, nwords)`` returns ``64 * nwords`` such coins packed in ``uint64``
words, using far fewer random words: bit lane ``i`` compares a uniform 64-bit number ``U_i`` with
``T`` most significant bit first, and the comparison is decided at the first bit where they differ
(``U_i < T`` exactly when that bit of ``T`` is 1). Word ``w`` of the source at step ``k`` supplies
bit ``k`` of the 64 lanes' numbers. Each lane is decided after two bits on average, so about 7
random words produce 64 coins instead of 64; the law is exactly that of ``U < T`` with ``U``
uniform on ``[0, 2**64)``, because every lane's bits are independent fair coins.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dpkit.noise import RandomSource

__all__ = ["bernoulli_bitsliced", "bernoulli_threshold"]

_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_CHUNK = 1 << 16
_FULL_STEPS = 8  # before this many bits most words still have an undecided lane


def bernoulli_threshold(source: RandomSource, threshold: int, n: int) -> npt.NDArray[np.bool_]:
    """``n`` coins, each ``True`` with probability exactly ``threshold / 2**64``."""
    if threshold >= 1 << 64:
        return np.ones(n, dtype=np.bool_)
    return source.words(n) < np.uint64(threshold)


def bernoulli_bitsliced(
    source: RandomSource, threshold: int, nwords: int
) -> npt.NDArray[np.uint64]:
    """``64 * nwords`` packed coins, each 1 with probability exactly ``threshold / 2**64``."""
    out = np.zeros(nwords, dtype=np.uint64)
    if threshold <= 0:
        return out
    if threshold >= 1 << 64:
        out[:] = _ALL
        return out
    size = min(_CHUNK, nwords)
    bufs = (np.empty(size, dtype=np.uint64), np.empty(size, dtype=np.uint64))
    for start in range(0, nwords, _CHUNK):
        k = min(_CHUNK, nwords - start)
        res = out[start : start + k]
        cur, m = 0, k
        und = bufs[0][:k]  # lanes whose comparison is still undecided
        und[:] = _ALL
        idx: npt.NDArray[np.intp] | None = None  # positions of und in res, once compacted
        for step, bitpos in enumerate(range(63, -1, -1)):
            if threshold & ((1 << (bitpos + 1)) - 1) == 0:
                break  # the rest of T is zero: an undecided lane has U >= T
            u = bufs[1 - cur][:m]
            source.fill_words(u)  # bit `bitpos` of every lane's U
            if (threshold >> bitpos) & 1:
                np.bitwise_and(u, und, out=u)  # U bit 1 = T bit: still undecided
                np.bitwise_xor(und, u, out=und)  # U bit 0 < T bit 1: decided, U < T
                if idx is None:
                    np.bitwise_or(res, und, out=res)
                else:
                    res[idx] |= und
                cur, und = 1 - cur, u
            else:
                np.invert(u, out=u)  # U bit 1 > T bit 0: decided, U > T (stays 0)
                np.bitwise_and(und, u, out=und)
            if step + 1 >= _FULL_STEPS:
                alive = und != 0
                idx = np.flatnonzero(alive) if idx is None else idx[alive]
                kept = und[alive]
                m = kept.size
                if m == 0:
                    break
                und = bufs[cur][:m]
                und[:] = kept
    return out
