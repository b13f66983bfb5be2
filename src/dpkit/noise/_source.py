"""``RandomSource``: the only place in dpkit where randomness is produced.

Construction (secure default)
-----------------------------
The secure source is a counter-mode keystream generator: AES-256 in CTR mode, keyed with 32
bytes from the operating system (``os.urandom``), encrypting zero blocks. This is the CTR_DRBG
construction of NIST SP 800-90A (without derivation function): its output is computationally
indistinguishable from uniform bits as long as AES-256 is a pseudorandom permutation. AES-CTR is
used instead of ChaCha20 because OpenSSL's AES-NI path runs at about 8 GB/s on this class of
machine, against 0.35 GB/s measured for ChaCha20 through ``cryptography``; both are standard.

The key is replaced with fresh OS entropy after every 2**36 bytes. Draws are serialised by a
lock, so one source can be shared by threads.

Fork safety
-----------
``os.fork`` copies every lock in the state it had in the parent: if another thread was drawing at
that instant, the child's copy of the lock is held by a thread that does not exist in the child,
and the child's first draw would wait forever. A handler registered with
``os.register_at_fork(after_in_child=...)`` therefore runs in every child created by ``os.fork``
(and by ``multiprocessing``'s fork start method) before any user code: it gives every live source
a fresh lock and a fresh key, so parent and child never share a keystream. A secure source takes
a new key from ``os.urandom``; a seeded source derives the child's key as
``SHA-256(tag || parent key || child pid)`` (reproducible, and distinct from the parent's).
The handler is the primary mechanism; the process id is also checked on every draw as a second
line for a ``fork()`` made from C without Python's hooks. The pid alone would not be enough: a
recycled pid could match the one the source last saw.

A seeded source (same construction, key = SHA-256 of the seed) exists for reproducible tests and
examples only. It must be requested with ``insecure=True``; it says so in its ``repr`` and in
:attr:`RandomSource.secure`, and dpkit's release paths refuse it unless the caller passes it
explicitly.

Uniform doubles
---------------
* :meth:`RandomSource.uniform` returns ``k * 2**-53`` with ``k`` uniform on ``{0, ..., 2**53-1}``:
  all 53 bits of a double's significand are random.
* :meth:`RandomSource.uniform_full` returns a "full-precision" uniform on (0, 1): the binade
  ``[2**-(j+1), 2**-j)`` is chosen with probability ``2**-(j+1)`` and the 52 significand bits are
  uniform inside it, so every value carries 52 random bits of *relative* precision, down to
  ``2**-1022``. This is what keeps the tails of exponential, Laplace and Gaussian samples exact
  far beyond ``2**-53`` (where the plain construction would stop).
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from dpkit._numeric.scratch import scratch
from dpkit.errors import InsecureRandomnessError, PrivacyParameterError

__all__ = ["RandomSource", "default_source", "resolve_source"]

_CHUNK_WORDS = 1 << 15  # 256 KiB of keystream per cipher call: stays in L2 cache
_ZEROS = bytes(_CHUNK_WORDS * 8)
_REKEY_BYTES = 1 << 36
_MASK52 = np.uint64((1 << 52) - 1)
_MIN_NORMAL_BITS = np.uint64(1 << 52)
_U64_52 = np.uint64(52)
_U64_11 = np.uint64(11)
_EXP_FIELD = np.uint64(0x7FF)
_TWO_M53 = 2.0**-53

# _LEAD[x] for an 11-bit x > 0 is 10 - floor(log2 x): the number of leading zero bits of x,
# which is the binade index j with P(j) = 2**-(j+1) for j in 0..10; x == 0 means "j >= 11".
_LEAD = np.zeros(2048, dtype=np.uint64)
_LEAD[1:] = (10 - np.floor(np.log2(np.arange(1, 2048)))).astype(np.uint64)
_MAX_BINADE = 1021  # keeps results normal: exponent field 1022 - j >= 1
# _EXP_BITS[x]: the IEEE exponent field (1022 - j) << 52 of binade j = _LEAD[x]; 0 marks x == 0.
_EXP_BITS = ((np.uint64(1022) - _LEAD) << np.uint64(52)).astype(np.uint64)
_EXP_BITS[0] = 0


def _shape(size: int | tuple[int, ...]) -> tuple[int, ...]:
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        if size < 0:
            raise PrivacyParameterError(f"size must be non-negative, got {size!r}")
        return (int(size),)
    if isinstance(size, tuple) and all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in size
    ):
        return tuple(int(s) for s in size)
    raise PrivacyParameterError(f"size must be a non-negative int or tuple of ints, got {size!r}")


class RandomSource:
    """A vectorised source of random bits: secure by default, seeded only when marked insecure.

    Parameters
    ----------
    seed:
        ``None`` (default) keys the generator from the operating system. An ``int``, ``str`` or
        ``bytes`` seed makes the stream reproducible and therefore *not* private; it is only
        accepted together with ``insecure=True``.
    insecure:
        Must be ``True`` exactly when a seed is given.
    """

    __slots__ = (
        "__weakref__",
        "_bytes_used",
        "_encryptor",
        "_key",
        "_lock",
        "_pid",
        "_secure",
        "_seed_repr",
    )

    def __init__(self, *, seed: int | str | bytes | None = None, insecure: bool = False) -> None:
        if seed is None and insecure:
            raise InsecureRandomnessError(
                "insecure=True without a seed makes no sense: omit both for the secure default"
            )
        if seed is not None and insecure is not True:
            raise InsecureRandomnessError(
                "a seeded RandomSource is reproducible and therefore not private; pass "
                "insecure=True to acknowledge that it is for tests and examples only"
            )
        self._lock = threading.Lock()
        self._secure = seed is None
        self._seed_repr = None if seed is None else repr(seed)
        self._pid = os.getpid()
        self._bytes_used = 0
        if seed is None:
            self._set_key(os.urandom(32), os.urandom(16))
        else:
            material = seed if isinstance(seed, bytes) else repr(seed).encode()
            digest = hashlib.sha256(b"dpkit-insecure-seed\x00" + material).digest()
            self._set_key(digest, bytes(16))
        _LIVE_SOURCES.add(self)

    def _set_key(self, key: bytes, nonce: bytes) -> None:
        # A secure source keeps no copy of its key (only the cipher context has it); a seeded
        # one keeps it so that a forked child can derive its own key from it.
        self._key = b"" if self._secure else key
        self._encryptor = Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()

    # -- identity ---------------------------------------------------------------------------
    @property
    def secure(self) -> bool:
        """``True`` for the OS-keyed default, ``False`` for a seeded (reproducible) source."""
        return self._secure

    def __repr__(self) -> str:
        if self._secure:
            return "RandomSource(secure, AES-256-CTR keyed from os.urandom)"
        return f"RandomSource(INSECURE seeded={self._seed_repr}: for tests and examples only)"

    # -- raw bits ---------------------------------------------------------------------------
    def _rekey(self, pid: int) -> None:
        """A new key: fresh OS entropy, or (seeded) one derived from the old key and ``pid``."""
        if self._secure:
            self._set_key(os.urandom(32), os.urandom(16))
        else:
            # Reproducible per process, and never the parent's stream: the child's key hashes
            # the parent's key with the child's pid.
            material = self._key + pid.to_bytes(8, "little")
            self._set_key(hashlib.sha256(b"dpkit-insecure-fork\x00" + material).digest(), bytes(16))
        self._pid = pid
        self._bytes_used = 0

    def _after_fork_in_child(self) -> None:
        # Runs in the child only, single-threaded, before any user code. The parent's lock may
        # have been copied in the held state (another thread was drawing): replace it rather
        # than release it (releasing a lock this thread does not own is an error).
        self._lock = threading.Lock()
        self._rekey(os.getpid())

    def _rekey_if_needed(self) -> None:
        # Called with the lock held. The pid test is a second line behind the fork handler.
        pid = os.getpid()
        if pid != self._pid or (self._secure and self._bytes_used >= _REKEY_BYTES):
            self._rekey(pid)

    def fill_words(self, out: npt.NDArray[np.uint64]) -> None:
        """Fill a C-contiguous ``uint64`` array with uniform random words, in place."""
        if out.dtype != np.uint64 or not out.flags.c_contiguous:
            raise TypeError("fill_words needs a C-contiguous uint64 array")
        view = memoryview(out).cast("B")  # type: ignore[arg-type]
        total = view.nbytes
        step = len(_ZEROS)
        with self._lock:
            self._rekey_if_needed()
            for start in range(0, total, step):
                stop = min(start + step, total)
                self._encryptor.update_into(_ZEROS[: stop - start], view[start:stop])
            self._bytes_used += total

    def words(self, size: int | tuple[int, ...]) -> npt.NDArray[np.uint64]:
        """Uniform random 64-bit words."""
        out = np.empty(_shape(size), dtype=np.uint64)
        self.fill_words(out.reshape(-1))
        return out

    def bytes(self, n: int) -> bytes:
        """``n`` uniform random bytes: the first ``n`` of the next ``ceil(n / 8)`` words (the
        keystream is consumed in whole words, as by :meth:`words`)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise PrivacyParameterError(f"n must be a non-negative integer, got {n!r}")
        m = (int(n) + 7) // 8 * 8
        if m > len(_ZEROS):
            return self.words(m // 8).tobytes()[:n]
        with self._lock:  # small draws straight from the cipher, without an array
            self._rekey_if_needed()
            out = self._encryptor.update(_ZEROS[:m])
            self._bytes_used += m
        return out[:n]

    def bits(self, size: int | tuple[int, ...]) -> npt.NDArray[np.bool_]:
        """Independent fair coin flips, as booleans."""
        shape = _shape(size)
        n = int(np.prod(shape, dtype=np.int64))
        raw = self.words((n + 63) // 64).view(np.uint8)
        return np.unpackbits(raw, count=n).astype(np.bool_).reshape(shape)

    # -- uniform doubles --------------------------------------------------------------------
    def uniform(self, size: int | tuple[int, ...]) -> npt.NDArray[np.float64]:
        """Uniform on [0, 1): ``k * 2**-53`` with ``k`` uniform on ``{0, ..., 2**53 - 1}``."""
        w = self.words(size)
        return (w >> _U64_11).astype(np.float64) * _TWO_M53

    def uniform_full(self, size: int | tuple[int, ...]) -> npt.NDArray[np.float64]:
        """Full-precision uniform on (0, 1) (see the module docstring)."""
        w = self.words(size)
        return self.full_precision_from_words(w)

    def full_precision_from_words(
        self, w: npt.NDArray[np.uint64], out: npt.NDArray[np.float64] | None = None
    ) -> npt.NDArray[np.float64]:
        """Map words to full-precision uniforms; draws extra words for the rare deep binades.

        Bits 0..51 of each word are the significand, bits 52..62 choose the binade (leading zeros
        of an 11-bit field), bit 63 is left unused so callers may take it as an independent coin.
        """
        if out is None:
            field = (w >> _U64_52) & _EXP_FIELD
            bits = _EXP_BITS[field]
            bits |= w & _MASK52
        else:  # the same, in place into out (and a scratch array)
            field = scratch("fp_field", w.size, np.uint64).reshape(w.shape)
            np.right_shift(w, _U64_52, out=field)
            np.bitwise_and(field, _EXP_FIELD, out=field)
            bits = out.view(np.uint64)
            np.take(_EXP_BITS, field.view(np.int64), out=bits, mode="clip")
            tmp = scratch("fp_tmp", w.size, np.uint64).reshape(w.shape)
            np.bitwise_and(w, _MASK52, out=tmp)
            np.bitwise_or(bits, tmp, out=bits)
        flat = bits.reshape(-1)
        if flat.min() < _MIN_NORMAL_BITS:  # some field == 0: probability 2**-11 each
            deep = np.flatnonzero(field.reshape(-1) == 0)
            depth = np.full(deep.size, 11, dtype=np.uint64)
            pending = np.arange(deep.size)
            while pending.size:
                extra = (self.words(pending.size) >> _U64_52) & _EXP_FIELD
                depth[pending] += _LEAD[extra]
                pending = pending[extra == 0]
                depth[pending] += np.uint64(11)
                pending = pending[depth[pending] < _MAX_BINADE]
            depth = np.minimum(depth, np.uint64(_MAX_BINADE))
            flat[deep] = ((np.uint64(1022) - depth) << _U64_52) | (w.reshape(-1)[deep] & _MASK52)
        result: npt.NDArray[np.float64] = bits.view(np.float64)
        return result

    # -- integers ---------------------------------------------------------------------------
    def integers(self, high: int, size: int | tuple[int, ...]) -> npt.NDArray[np.int64]:
        """Uniform integers on ``{0, ..., high - 1}`` (exactly uniform: rejection sampling)."""
        if (
            isinstance(high, bool)
            or not isinstance(high, (int, np.integer))
            or not (1 <= int(high) <= 2**63)
        ):
            raise PrivacyParameterError(f"high must be an integer in [1, 2**63], got {high!r}")
        high = int(high)
        shape = _shape(size)
        n = int(np.prod(shape, dtype=np.int64))
        if high == 1:
            return np.zeros(shape, dtype=np.int64)
        bits = (high - 1).bit_length()
        mask = np.uint64((1 << bits) - 1)
        out = np.empty(n, dtype=np.int64)
        todo = np.arange(n)
        hi = np.uint64(high)
        while todo.size:
            cand = self.words(todo.size) & mask  # accept with probability > 1/2
            ok = cand < hi
            out[todo[ok]] = cand[ok].astype(np.int64)
            todo = todo[~ok]
        return out.reshape(shape)

    def randbelow(self, n: int) -> int:
        """One exactly uniform Python integer in ``{0, ..., n - 1}`` for any ``n >= 1``."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise PrivacyParameterError(f"n must be a positive integer, got {n!r}")
        if n == 1:
            return 0
        k = (n - 1).bit_length()
        nbytes = (k + 7) // 8
        while True:
            r = int.from_bytes(self.bytes(nbytes), "little") & ((1 << k) - 1)
            if r < n:
                return r


_LIVE_SOURCES: weakref.WeakSet[RandomSource] = weakref.WeakSet()
_default_lock = threading.Lock()
_default: RandomSource | None = None


def _reinit_after_fork() -> None:
    """``os.register_at_fork`` child handler: new locks and new keys for every live source."""
    global _default_lock
    _default_lock = threading.Lock()
    for source in list(_LIVE_SOURCES):
        source._after_fork_in_child()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_reinit_after_fork)


def default_source() -> RandomSource:
    """The process-wide secure source (created on first use; re-keyed in a forked child)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = RandomSource()
    return _default


def resolve_source(source: RandomSource | None) -> RandomSource:
    """Return ``source`` or the secure default; refuse anything that is not a RandomSource.

    A seeded source is accepted here because passing one is the explicit opt-in; its
    insecurity is visible in its repr and in the mechanism's outputs' provenance.
    """
    if source is None:
        return default_source()
    if not isinstance(source, RandomSource):
        raise InsecureRandomnessError(
            f"randomness must come from a dpkit RandomSource, got {type(source).__name__}; "
            "numpy generators and the random module are not cryptographically secure"
        )
    return source
