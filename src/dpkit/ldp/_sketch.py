"""Server side of Apple's sketches (CMS, HCMS): vectorised hashing, simulation, decoding.

Both sketches are frequency oracles (a report supports item ``v`` with probability ``p`` when the
user holds ``v`` and ``q`` otherwise) whose ``q`` holds over the draw of the public hash
functions. With ``k`` hash functions drawn from a 3-wise independent family (simple tabulation)
and each user choosing one uniformly, the estimate ``c_v = (S_v - n q)/(p - q)`` is unbiased and
its variance over the coins, the users' choices of function and the draw of the functions is
exactly

``Var[c_v] = (n_v p(1-p) + (n - n_v) q(1-q)) / (p-q)^2 + (F - (n - n_v)) / (k (m - 1))``

where ``F = sum_{u != v} n_u^2`` is the sum of the squared counts of the other items. Derivation:
given the functions, a user holding ``u != v`` supports ``v`` with probability
``pi_u = (1 - p') + a c_u`` (CMS: ``p' = p``, ``a = 2p - 1``; HCMS: ``pi_u = 1/2 + a c_u``,
``a = p - 1/2``) where ``c_u`` is the fraction of functions on which ``u`` and ``v`` collide;
``E c_u = 1/m``, ``Var c_u = (1/m)(1 - 1/m)/k`` and, by 3-wise independence, the ``c_u`` are
uncorrelated. The law of total variance gives ``sum n_u (q(1-q) - a^2 Var c) + a^2 Var c F``,
and ``a^2 Var c / (p - q)^2 = 1/(k (m - 1))`` because ``p - q = a (1 - 1/m)``. When every other
user holds a distinct item (``F = n - n_v``) the last term vanishes and this is the variance of a
"pure" protocol (Wang et al., USENIX Security 2017).
"""

from __future__ import annotations

import abc
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.rounding import up
from dpkit._numeric.validation import check_integer, check_nonnegative, check_probability
from dpkit.errors import PrivacyParameterError
from dpkit.events import DpEvent, PureDpEvent, randomized_response_epsilon
from dpkit.ldp import client as _c
from dpkit.ldp._aggregate import FrequencyAggregator, FrequencyEstimate, _z
from dpkit.ldp._protocols import SUE, FrequencyOracle, _epsilon, _users
from dpkit.ldp._sampling import bernoulli_threshold
from dpkit.noise import RandomSource

__all__ = ["CMS", "HCMS", "OLHSketch", "SketchAggregator", "SketchOracle"]

IntArray = npt.NDArray[np.int64]
IndexArray = npt.NDArray[Any]  # int32 or int64 indices (int32 when they fit)
CellArray = npt.NDArray[Any]  # cells of a sketch row: uint8, uint16 or uint32 (by the width)
_LIST_LIMIT = _c.MAX_DOMAIN  # estimate every item only up to this many
_QUERY_BLOCK = 1 << 16  # (function, item) cells a query gathers at once
_SPARSE_HADAMARD = 8  # HCMS sums coefficients directly while items x non-zeros <= 8 k m


def _sketch_args(
    domain: Any, width: Any, hashes: Any, hash_seed: Any
) -> tuple[int | Sequence[Hashable], int, int, int]:
    if isinstance(domain, (int, np.integer)) and not isinstance(domain, (bool, np.bool_)):
        dom: int | Sequence[Hashable] = check_integer(
            domain, name="domain", minimum=2, maximum=_c.MAX_SKETCH_DOMAIN
        )
    else:
        from dpkit.ldp._protocols import _domain

        dom = _domain(domain)
    m = check_integer(width, name="width", minimum=2, maximum=1 << 20)
    if m & (m - 1):
        raise PrivacyParameterError(f"width must be a power of two (Apple's sketches), got {m}")
    k = check_integer(hashes, name="hashes", minimum=1, maximum=1 << 16)
    seed = check_integer(hash_seed, name="hash_seed", minimum=0, maximum=(1 << 63) - 1)
    return dom, m, k, seed


class SketchOracle(FrequencyOracle):
    """Server-side pieces shared by :class:`CMS` and :class:`HCMS` (see the module docstring)."""

    _k: int
    _m: int
    _seed: int
    _np_tables: CellArray | None = None
    _np_offsets: IndexArray | None = None

    # -- hashing -------------------------------------------------------------------------------
    def _tables_np(self) -> CellArray:
        """The ``k`` tabulation tables reduced to what a cell reads: a ``(k, b, 256)`` array of
        the entries' low ``log2 m`` bits (``uint8`` up to ``m = 256``, ``uint16`` up to
        ``2^16``, else ``uint32``), ``b`` the bytes of the largest item ``d - 1``.

        A cell is ``h_j(x) & (m - 1)`` and ``m`` is a power of two, so masking every entry
        first gives the same cell. Items are below the domain size ``d``: byte ``i < b`` of an
        item is at most byte ``i`` of ``d - 1`` when the bytes above it are those of ``d - 1``,
        and bytes ``b`` to 7 are 0. Only the entries ever read are derived (a table's first
        ``8 e`` bytes are its first ``e`` entries, SHAKE's shorter outputs being prefixes of its
        longer ones); the others stay 0, and the entries at 0 of bytes ``b`` to 7, the same for
        every item, are XORed into byte 0's table. The client's 64-bit tables
        (:func:`~dpkit.ldp.client.sketch_table`) would take ``16 KiB`` per function; these take
        ``256 b`` bytes (``uint8``), so sketches of tens of thousands of functions fit."""
        if self._np_tables is None:
            k, mask = self._k, np.uint64(self._m - 1)
            small = self._m <= 1 << 8, self._m <= 1 << 16
            dtype = np.uint8 if small[0] else np.uint16 if small[1] else np.uint32
            top = self._d - 1
            need = max(1, (top.bit_length() + 7) // 8)
            # entries of table i ever read: all 256 below the top byte, up to its value there
            sizes = [256] * (need - 1) + [((top >> (8 * (need - 1))) & 0xFF) + 1]
            out = np.zeros((k, need, 256), dtype=dtype)
            for i, e in enumerate([*sizes, *([1] * (8 - need))]):
                raw = b"".join(_c.sketch_table_bytes(self._seed, j, i, 8 * e) for j in range(k))
                entries = (np.frombuffer(raw, dtype="<u8").reshape(k, e) & mask).astype(dtype)
                if i < need:
                    out[:, i, :e] = entries
                else:  # byte i is 0 in every item: its entry 0 joins byte 0's table
                    out[:, 0, :] ^= entries
            self._np_tables = out
        return self._np_tables

    def derive_tables(self) -> None:
        """Derive the public hash tables now instead of at the first report or query: a
        one-off setup (about ``8 hashes`` SHAKE-256 calls) a server can do before reports
        arrive."""
        self._tables_np()

    def _item_bytes(self, x: IntArray) -> list[IntArray]:
        """Bytes 0, 1, ... of items ``x`` up to the highest non-zero one (at least byte 0)."""
        nbytes = max(1, (int(x.max()).bit_length() + 7) // 8) if x.size else 1
        return [(x >> (8 * i)) & 0xFF for i in range(min(nbytes, self._tables_np().shape[1]))]

    def _block_cells(self, idx: list[IntArray], lo: int, hi: int) -> CellArray:
        """``h_j`` of the items of bytes ``idx`` (:meth:`_item_bytes`) for the functions ``j``
        in ``[lo, hi)``: a ``(hi - lo, items)`` array of the tables' dtype."""
        tables = self._tables_np()
        cells: CellArray = np.take(tables[lo:hi, 0, :], idx[0], axis=1)
        for i in range(1, tables.shape[1]):
            if i < len(idx):
                cells ^= np.take(tables[lo:hi, i, :], idx[i], axis=1)
            else:  # byte i is 0 in every item
                cells ^= tables[lo:hi, i, 0][:, None]
        return cells

    def cells(self, rows: Any, items: Any) -> IntArray:
        """``h_rows(items)`` elementwise (broadcast), the vectorised :meth:`cell`."""
        tables = self._tables_np()
        need = tables.shape[1]
        flat = tables.reshape(-1)
        r = np.asarray(rows, dtype=np.int64)
        x = np.asarray(items, dtype=np.int64)
        r, x = np.broadcast_arrays(r, x)
        base = r * (need * 256)
        h = np.take(flat, base + (x & 0xFF))
        for i in range(1, need):
            h ^= np.take(flat, base + (i * 256 + ((x >> (8 * i)) & 0xFF)))
        out: IntArray = h.astype(np.int64)
        return out

    def all_cells(self, items: Any) -> IntArray:
        """``h_j(items)`` for every function ``j``: a ``(k, len(items))`` array (blocks of
        functions holding about 2^21 cells at a time)."""
        x = np.asarray(items, dtype=np.int64).reshape(-1)
        idx = self._item_bytes(x)
        out = np.empty((self._k, x.size), dtype=np.int64)
        step = max(1, (1 << 21) // max(x.size, 1))
        for lo in range(0, self._k, step):
            hi = min(self._k, lo + step)
            out[lo:hi] = self._block_cells(idx, lo, hi)
        return out

    # -- variance ------------------------------------------------------------------------------
    def variance(
        self, n: int, frequency: float = 0.0, *, other_squares: float | None = None
    ) -> float:
        """Exact variance of an item's estimated count (module docstring): ``n`` users, the
        item's relative frequency ``frequency``, and ``other_squares`` the sum of the squared
        counts of the other items (default ``n (1 - frequency)``: every other user holds a
        distinct item, which removes the collision term)."""
        n = _users(n)
        f = check_probability(frequency, name="frequency")
        base = float(self._count_variance(n, np.float64(f)))
        if other_squares is None:
            return base
        sq = check_nonnegative(other_squares, "other_squares")
        return base + (sq - n * (1.0 - f)) / (self._k * (self._m - 1))

    # -- values --------------------------------------------------------------------------------
    def encode_many(self, values: Any) -> IntArray:
        if self._labels is None and self._d > _LIST_LIMIT:
            arr = np.asarray(values)
            if arr.size and arr.dtype.kind not in "iu":
                raise ValueError(f"{self.name}: values must be ints in [0, {self._d})")
            arr = arr.astype(np.int64).reshape(-1)
            bad = (arr < 0) | (arr >= self._d)
            if bad.any():
                raise ValueError(
                    f"{self.name}: value {int(arr[np.argmax(bad)])} is outside "
                    f"the domain [0, {self._d})"
                )
            return arr
        return super().encode_many(values)

    # -- server --------------------------------------------------------------------------------
    def _offsets(self) -> IndexArray:
        """``j m`` for every function ``j``: the start of row ``j`` in the flattened ``k x m``
        cell table (``int32`` when ``k m`` fits)."""
        if self._np_offsets is None:
            dtype = np.int32 if self._k * self._m <= 1 << 31 else np.int64
            self._np_offsets = np.arange(self._k, dtype=dtype) * self._m
        return self._np_offsets

    def _item_cells(self, x: IntArray) -> CellArray:
        """``h_j(x)`` for every function ``j`` (a ``(k, len(x))`` array of the tables' dtype,
        as :meth:`all_cells`), for few items."""
        return self._block_cells(self._item_bytes(x), 0, self._k)

    def query(self, stat: IntArray, items: Any) -> IntArray:
        """Support counts ``S_v`` of domain indices ``items`` from an accumulated statistic:
        ``S_v = sum_j M[j, h_j(v)]`` over the ``k x m`` cell table ``M``, gathered a block of
        functions at a time (at most about 2^16 cells held at once, so the block stays in
        cache)."""
        x = np.asarray(items, dtype=np.int64).reshape(-1)
        flat = self._cell_table(stat).reshape(-1)
        out = np.zeros(x.size, dtype=np.int64)
        if not x.size:
            return self._support_from_cells(stat, out)
        idx = self._item_bytes(x)
        offsets = self._offsets()
        step = max(1, _QUERY_BLOCK // x.size)
        for lo in range(0, self._k, step):
            hi = min(self._k, lo + step)
            cells = self._block_cells(idx, lo, hi).astype(offsets.dtype)
            cells += offsets[lo:hi, None]
            out += np.take(flat, cells).sum(axis=0)
        return self._support_from_cells(stat, out)

    @abc.abstractmethod
    def _cell_table(self, stat: IntArray) -> IntArray:
        """The ``k x m`` table of per-cell support counts read from ``stat`` (each sketch
        stores its statistic in its own layout: CMS as cell counts, HCMS as Hadamard
        coefficients)."""

    def _support_from_cells(self, stat: IntArray, summed: IntArray) -> IntArray:
        return summed

    def support_from_statistic(self, stat: IntArray) -> IntArray:
        if self._d > _LIST_LIMIT:
            raise PrivacyParameterError(
                f"the domain has {self._d:,} items, too many to list; estimate chosen items "
                "with aggregator().estimate_items(items)"
            )
        return self.query(stat, np.arange(self._d, dtype=np.int64))

    def support_counts(self, reports: Any) -> IntArray:
        return self.support_from_statistic(self.statistic(reports))

    def aggregator(self) -> SketchAggregator:
        """A fresh :class:`SketchAggregator` (a frequency aggregator that also answers items of
        a domain too large to list)."""
        return SketchAggregator(self)


class CMS(SketchOracle, _c.CMS):
    """Apple's count-mean sketch: see :class:`dpkit.ldp.client.CMS` and the module docstring.

    Array form of reports: ``uint8`` rows of ``2 + ceil(m/8)`` bytes, the function index ``j``
    (little-endian, two bytes) then the cell bits. The statistic is the ``k x m`` table of bit
    counts, ``S_v = sum_j M[j, h_j(v)]``. Variance at frequency 0 (no heavy collisions):
    ``n q(1-q)/(p-q)^2``, about ``n e^(eps/2)/(e^(eps/2) - 1)^2`` for large ``m``.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        width: int = 1024,
        hashes: int = 1024,
        hash_seed: int = 0,
    ) -> None:
        dom, m, k, seed = _sketch_args(domain, width, hashes, hash_seed)
        _c.CMS.__init__(
            self, epsilon=_epsilon(epsilon), domain=dom, width=m, hashes=k, hash_seed=seed
        )
        self._sue = SUE(epsilon=self._epsilon, domain=m)  # same law as the client's cells
        self._cells = self._sue

    @property
    def _nb(self) -> int:
        return (self._m + 7) // 8

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> npt.NDArray[np.uint8]:
        j = source.integers(self._k, x.size)
        bits = self._sue._randomize_indices(self.cells(j, x), source)
        out = np.empty((x.size, 2 + self._nb), dtype=np.uint8)
        out[:, 0] = j & 0xFF
        out[:, 1] = j >> 8
        out[:, 2:] = bits
        return out

    def coerce_reports(self, reports: Any) -> tuple[npt.NDArray[np.uint8], int]:
        nb = self._nb
        if (
            isinstance(reports, np.ndarray)
            and reports.dtype == np.uint8
            and reports.ndim == 2
            and reports.shape[1] == 2 + nb
        ):
            j = reports[:, 0].astype(np.int64) | (reports[:, 1].astype(np.int64) << 8)
            pad = np.uint8(0xFF ^ self._sue._pad_mask)
            ok = ((reports[:, -1] & pad) == 0) & (j < self._k)
            return reports[ok], int(reports.shape[0] - np.count_nonzero(ok))
        seq = reports.tolist() if isinstance(reports, np.ndarray) else list(reports)
        good_j: list[int] = []
        good_bits: list[str] = []
        for r in seq:
            if (
                isinstance(r, (list, tuple))
                and len(r) == 2
                and type(r[0]) is int
                and 0 <= r[0] < self._k
            ):
                bad = self._sue.coerce_reports([r[1]])[1]
                if not bad:
                    good_j.append(r[0])
                    good_bits.append(r[1])
        out = np.empty((len(good_j), 2 + nb), dtype=np.uint8)
        if good_j:
            jj = np.asarray(good_j, dtype=np.int64)
            out[:, 0], out[:, 1] = jj & 0xFF, jj >> 8
            out[:, 2:] = self._sue.coerce_reports(good_bits)[0]
        return out, len(seq) - len(good_j)

    def statistic(self, reports: npt.NDArray[np.uint8]) -> IntArray:
        """The ``k x m`` table of bit counts, flattened (additive across batches).

        Counted eight bits at a time: each report byte becomes a ``uint64`` holding its eight
        bits in eight separate bytes (:data:`_SPREAD`), so adding such words adds eight cell
        counters at once; the reports are sorted by function and summed in runs of at most 255
        (no counter can carry into its neighbour), then the runs' bytes are added to the table.
        """
        j = reports[:, 0].astype(np.int64) | (reports[:, 1].astype(np.int64) << 8)
        table = np.zeros((self._k, self._nb * 8), dtype=np.int64)
        if not j.size:
            return table[:, : self._m].reshape(-1)
        order = np.argsort(j, kind="stable")
        js = j[order]
        pos = np.arange(js.size, dtype=np.int64)
        first = np.flatnonzero(np.r_[True, js[1:] != js[:-1]])
        run_start = np.repeat(first, np.diff(np.r_[first, js.size]))
        starts = np.flatnonzero((pos - run_start) % 255 == 0)  # runs of <= 255 per function
        step = 1 << 8  # runs per chunk: at most 65,280 reports, 1 KiB of words each (m = 1024)
        for lo in range(0, starts.size, step):
            seg = starts[lo : lo + step]
            hi = int(starts[lo + step]) if lo + step < starts.size else js.size
            words = _SPREAD[reports[order[seg[0] : hi], 2:]]  # (rows, nb): 8 counters a word
            sums = np.add.reduceat(words, seg - seg[0], axis=0)
            counts = sums.view(np.uint8).reshape(seg.size, -1).astype(np.int64)
            fn = js[seg]
            firsts = np.flatnonzero(np.r_[True, fn[1:] != fn[:-1]])
            table[fn[firsts]] += np.add.reduceat(counts, firsts, axis=0)
        return table[:, : self._m].reshape(-1)

    def _cell_table(self, stat: IntArray) -> IntArray:
        return stat.reshape(self._k, self._m)


_SPREAD = np.array(
    [sum(((v >> i) & 1) << (8 * i) for i in range(8)) for v in range(256)], dtype="<u8"
)  # byte v -> its bits i in byte i of a little-endian word (CMS.statistic)


def _fwht_rows(a: IntArray) -> IntArray:
    """Unnormalised fast Walsh-Hadamard transform of every row (exact, integers): as two
    matrix products (:func:`_hadamard_product_rows`) for sketch widths up to 2^14 when float64
    is exact, else by butterflies."""
    rows, size = a.shape
    if 4 <= size <= 1 << 14 and int(np.abs(a).sum(axis=1).max(initial=0)) < 1 << 52:
        return _hadamard_product_rows(a)
    a = a.copy()
    h = 1
    while h < size:
        v = a.reshape(rows, -1, 2, h)
        x, y = v[:, :, 0, :].copy(), v[:, :, 1, :]
        v[:, :, 0, :] += y
        v[:, :, 1, :] = x - y
        h *= 2
    return a


def _hadamard(size: int) -> npt.NDArray[np.float64]:
    """The ``size x size`` Sylvester-Hadamard matrix, ``H[i, l] = (-1)^popcount(i & l)``."""
    idx = np.arange(size, dtype=np.uint64)
    return np.where(np.bitwise_count(idx[:, None] & idx[None, :]) & 1, -1.0, 1.0)


def _hadamard_product_rows(a: IntArray) -> IntArray:
    """The same transform as two matrix products: with ``size = 2^(b1 + b2)`` and index
    ``l = 2^b2 l1 + l0``, ``popcount(i & l)`` splits over the two halves of the bits, so
    ``H_size = H_(2^b1) kron H_(2^b2)`` and each row, read as a ``2^b1 x 2^b2`` matrix ``D``,
    transforms to ``H_(2^b1) D H_(2^b2)``. Exact in float64 while every partial sum stays below
    ``2^53``: the caller checks that each row's absolute sum is below ``2^52``."""
    rows, size = a.shape
    bits = size.bit_length() - 1
    lo = bits // 2
    left, right = _hadamard(1 << (bits - lo)), _hadamard(1 << lo)
    d = a.astype(np.float64).reshape(rows, 1 << (bits - lo), 1 << lo)
    w = np.matmul(np.matmul(left, d), right)
    out: IntArray = np.rint(w).astype(np.int64).reshape(rows, size)
    return out


class HCMS(SketchOracle, _c.HCMS):
    """Apple's Hadamard count-mean sketch: see :class:`dpkit.ldp.client.HCMS`.

    Array form of reports: ``int64`` rows ``(j, l, b)``. The statistic is the histogram of
    ``(j, l, b)``; with ``D_j`` the row of ``#(b = 1) - #(b = 0)`` over ``l`` and ``W_j`` its
    Walsh-Hadamard transform, ``S_v = sum_j (n_j + W_j[h_j(v)]) / 2`` (``n_j`` reports used
    function ``j``). Variance at frequency 0 (no heavy collisions): ``n q(1-q)/(p-q)^2``, about
    ``n ((e^eps + 1)/(e^eps - 1))^2`` for large ``m``.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        width: int = 1024,
        hashes: int = 1024,
        hash_seed: int = 0,
    ) -> None:
        dom, m, k, seed = _sketch_args(domain, width, hashes, hash_seed)
        _c.HCMS.__init__(
            self, epsilon=_epsilon(epsilon), domain=dom, width=m, hashes=k, hash_seed=seed
        )

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> IntArray:
        j = source.integers(self._k, x.size)
        col = source.integers(self._m, x.size)
        plus = (np.bitwise_count(self.cells(j, x) & col) & 1) == 0
        keep = bernoulli_threshold(source, self._keep, x.size)
        return np.stack([j, col, (plus == keep).astype(np.int64)], axis=1)

    def coerce_reports(self, reports: Any) -> tuple[IntArray, int]:
        if (
            isinstance(reports, np.ndarray)
            and reports.dtype.kind in "iu"
            and reports.ndim == 2
            and reports.shape[1] == 3
        ):
            arr = reports.astype(np.int64, copy=False)
            ok = (
                (arr[:, 0] >= 0)
                & (arr[:, 0] < self._k)
                & (arr[:, 1] >= 0)
                & (arr[:, 1] < self._m)
                & ((arr[:, 2] == 0) | (arr[:, 2] == 1))
            )
            return arr[ok], int(arr.shape[0] - np.count_nonzero(ok))
        seq = reports.tolist() if isinstance(reports, np.ndarray) else list(reports)
        good = [
            (r[0], r[1], r[2])
            for r in seq
            if isinstance(r, (list, tuple))
            and len(r) == 3
            and all(type(v) is int for v in r)
            and 0 <= r[0] < self._k
            and 0 <= r[1] < self._m
            and r[2] in (0, 1)
        ]
        return np.asarray(good, dtype=np.int64).reshape(-1, 3), len(seq) - len(good)

    def statistic(self, reports: IntArray) -> IntArray:
        """Histogram of ``(j, l, b)``, flattened (additive across batches)."""
        flat = (reports[:, 0] * self._m + reports[:, 1]) * 2 + reports[:, 2]
        return np.bincount(flat, minlength=2 * self._k * self._m).astype(np.int64, copy=False)

    def _cell_table(self, stat: IntArray) -> IntArray:
        h = stat.reshape(self._k, self._m, 2)
        return _fwht_rows(h[:, :, 1] - h[:, :, 0])

    def query(self, stat: IntArray, items: Any) -> IntArray:
        """Support counts of ``items``; when few reports and few items make it cheaper than
        transforming the whole table, each needed coefficient is summed from the non-zero
        differences directly: ``W_j[c] = sum_l D_j[l] (-1)^popcount(c & l)`` over the ``l``
        with ``D_j[l] != 0``, i.e. ``sum_l D_j[l] - 2 sum_l D_j[l] [popcount(c & l) odd]``
        (the same integers as the transform; the float64 product is exact while the weights'
        absolute sum is below ``2^52``)."""
        x = np.asarray(items, dtype=np.int64).reshape(-1)
        h = stat.reshape(self._k, self._m, 2)
        diff = (h[:, :, 1] - h[:, :, 0]).reshape(-1)
        nz = np.flatnonzero(diff)
        weight = diff[nz]
        exact = int(np.abs(weight).sum()) < 1 << 52
        if not exact or x.size * nz.size > _SPARSE_HADAMARD * self._k * self._m:
            return super().query(stat, items)
        mask = self._m - 1
        rows, cols = nz // self._m, (nz & mask).astype(np.int32)
        cells = self._item_cells(x)  # (k, items), int32 or int64
        odd_sum = np.zeros(x.size)
        step = max(1, _QUERY_BLOCK // max(x.size, 1))
        for lo in range(0, nz.size, step):
            part = slice(lo, lo + step)
            odd = np.bitwise_count(cells[rows[part]] & cols[part, None]) & 1
            odd_sum += weight[part].astype(np.float64) @ odd.astype(np.float64)
        summed = int(weight.sum()) - 2 * np.rint(odd_sum).astype(np.int64)
        return self._support_from_cells(stat, summed)

    def _support_from_cells(self, stat: IntArray, summed: IntArray) -> IntArray:
        n = int(stat.sum())
        return (n + summed) // 2


class OLHSketch(SketchOracle, _c.OLHSketch):
    """Optimal local hashing over public tabulation hash functions: see
    :class:`dpkit.ldp.client.OLHSketch`.

    Array form of reports: ``int64`` rows ``(j, y)``. The statistic is the ``k x g`` histogram
    of ``(j, y)``, ``S_v = sum_j M[j, h_j(v)]``; variance as for the other sketches with
    ``m = g`` (module docstring): at frequency 0 without heavy collisions ``n q(1-q)/(p-q)^2``,
    about ``n 4 e^eps / (e^eps - 1)^2``.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        width: int | None = None,
        hashes: int = 1024,
        hash_seed: int = 0,
    ) -> None:
        eps = _epsilon(epsilon)
        g = _c.olh_sketch_width(_c.calibrated_epsilon(eps)) if width is None else width
        dom, m, k, seed = _sketch_args(domain, g, hashes, hash_seed)
        _c.OLHSketch.__init__(self, epsilon=eps, domain=dom, width=m, hashes=k, hash_seed=seed)

    @property
    def event(self) -> DpEvent:
        """Pure DP at :attr:`run_epsilon`; at an epsilon so small that ``p`` was raised to
        ``1/g`` (:func:`dpkit.ldp.client.at_least_uniform`), the law's own loss, that of g-ary
        randomized response with ``p`` rounded up, if larger (as :class:`~dpkit.ldp.OLH`)."""
        if not self._keep_raised:
            return super().event
        p = up(self.support_probabilities()[0])
        return PureDpEvent(epsilon=max(self.run_epsilon, randomized_response_epsilon(p, self._m)))

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> IntArray:
        j = source.integers(self._k, x.size)
        c = self.cells(j, x)
        keep = bernoulli_threshold(source, self._keep, x.size)
        other = source.integers(self._m - 1, x.size)
        other += other >= c
        return np.stack([j, np.where(keep, c, other)], axis=1)

    def coerce_reports(self, reports: Any) -> tuple[IntArray, int]:
        if (
            isinstance(reports, np.ndarray)
            and reports.dtype.kind in "iu"
            and reports.ndim == 2
            and reports.shape[1] == 2
        ):
            arr = reports.astype(np.int64, copy=False)
            ok = (arr[:, 0] >= 0) & (arr[:, 0] < self._k) & (arr[:, 1] >= 0) & (arr[:, 1] < self._m)
            return arr[ok], int(arr.shape[0] - np.count_nonzero(ok))
        seq = reports.tolist() if isinstance(reports, np.ndarray) else list(reports)
        good = [
            (r[0], r[1])
            for r in seq
            if isinstance(r, (list, tuple))
            and len(r) == 2
            and all(type(v) is int for v in r)
            and 0 <= r[0] < self._k
            and 0 <= r[1] < self._m
        ]
        return np.asarray(good, dtype=np.int64).reshape(-1, 2), len(seq) - len(good)

    def statistic(self, reports: IntArray) -> IntArray:
        """Histogram of ``(j, y)``, flattened (additive across batches)."""
        flat = reports[:, 0] * self._m + reports[:, 1]
        return np.bincount(flat, minlength=self._k * self._m).astype(np.int64)

    def _cell_table(self, stat: IntArray) -> IntArray:
        return stat.reshape(self._k, self._m)


class SketchAggregator(FrequencyAggregator):
    """A :class:`~dpkit.ldp.FrequencyAggregator` for a sketch, which can also estimate chosen
    items of a domain too large to list (:meth:`estimate_items`)."""

    protocol: SketchOracle

    def estimate_items(
        self, items: Any, *, confidence: float = 0.95, other_squares: float | None = None
    ) -> FrequencyEstimate:
        """Unbiased counts of the domain indices ``items`` with standard errors and intervals.

        The standard error is the exact variance (module docstring) at the clipped estimate,
        with the collision term's ``F`` taken from ``other_squares`` when given, else plugged in
        from these items' own clipped estimates (the rest of the users counted as distinct
        items): right when ``items`` include the heavy items, as a heavy-hitter search's do.
        """
        z = _z(confidence)
        proto, n = self.protocol, self.n
        x = np.asarray(items, dtype=np.int64).reshape(-1)
        if x.size and (x.min() < 0 or x.max() >= proto.d):
            raise PrivacyParameterError(f"items must be domain indices in [0, {proto.d})")
        p, q = proto.p, proto.q
        support = np.zeros(x.size) if self._stat is None else proto.query(self._stat, x)
        raw = (support - n * q) / (p - q)
        raw = np.asarray(raw, dtype=np.float64).reshape(-1)
        if n:
            f = np.clip(raw / n, 0.0, 1.0)
            clipped = f * n
            if other_squares is None:
                heavy = float(np.sum(clipped**2)) + max(n - float(clipped.sum()), 0.0)
                sq = np.maximum(heavy - clipped**2, n * (1.0 - f))
            else:
                sq = np.full(x.size, check_nonnegative(other_squares, "other_squares"))
            var = proto._count_variance(n, f) + (sq - n * (1.0 - f)) / (proto._k * (proto._m - 1))
            se = np.sqrt(np.maximum(var, 0.0))
        else:
            se = np.full(x.size, np.inf)
        labels = (
            tuple(x.tolist()) if proto._labels is None else tuple(proto.labels[int(v)] for v in x)
        )
        return FrequencyEstimate(
            labels=labels,
            counts=raw,
            raw_counts=raw,
            std_errors=se,
            ci_low=raw - z * se,
            ci_high=raw + z * se,
            n=n,
            rejected=self.rejected,
            confidence=float(confidence),
            postprocess=None,
        )

    def merge(self, other: FrequencyAggregator) -> FrequencyAggregator:
        """Add another shard's aggregator (same sketch: parameters and hash seed)."""
        same = (
            isinstance(other, SketchAggregator)
            and type(other.protocol) is type(self.protocol)
            and repr(other.protocol) == repr(self.protocol)
            and other.protocol._labels == self.protocol._labels
        )
        if not same:
            raise PrivacyParameterError("can only merge aggregators of identical sketches")
        if other._stat is not None:
            self._stat = other._stat.copy() if self._stat is None else self._stat + other._stat
        self._n += other._n
        self._rejected += other._rejected
        return self
