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
_FULL_STEPS = 6  # before this many bits nearly every word still has an undecided lane


def bernoulli_threshold(source: RandomSource, threshold: int, n: int) -> npt.NDArray[np.bool_]:
    """``n`` coins, each ``True`` with probability exactly ``threshold / 2**64``."""
    if threshold >= 1 << 64:
        return np.ones(n, dtype=np.bool_)
    return source.words(n) < np.uint64(threshold)


def bernoulli_bitsliced(source: RandomSource, threshold: int, nwords: int
                        ) -> npt.NDArray[np.uint64]:
    """``64 * nwords`` packed coins, each 1 with probability exactly ``threshold / 2**64``."""
    out = np.zeros(nwords, dtype=np.uint64)
    if threshold <= 0:
        return out
    if threshold >= 1 << 64:
        out[:] = _ALL
        return out
    for start in range(0, nwords, _CHUNK):
        k = min(_CHUNK, nwords - start)
        res = out[start:start + k]
        und = np.full(k, _ALL, dtype=np.uint64)
        idx: npt.NDArray[np.intp] | None = None
        for step, bitpos in enumerate(range(63, -1, -1)):
            if threshold & ((1 << (bitpos + 1)) - 1) == 0:
                break  # the rest of T is zero: an undecided lane has U >= T
            u = source.words(und.size)
            if (threshold >> bitpos) & 1:
                won = und & ~u  # U has 0 where T has 1: U < T
                if idx is None:
                    res |= won
                else:
                    res[idx] |= won
                und &= u
            else:
                und &= ~u  # U has 1 where T has 0: U > T, lane decided 0
            if step + 1 >= _FULL_STEPS:
                alive = und != 0
                idx = np.flatnonzero(alive) if idx is None else idx[alive]
                und = und[alive]
                if und.size == 0:
                    break
    return out
