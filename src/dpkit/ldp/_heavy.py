"""Server side of heavy-hitter discovery over a domain too large to list (PEM, TreeHistogram).

Prefix extending method (Wang, Li, Lin, Li and Jha, IEEE TDSC 2019): the users are split into
groups; group ``g`` reports the ``lengths[g]``-bit prefix of its item through a frequency oracle
(a sketch, :class:`~dpkit.ldp.OLHSketch` or Apple's Hadamard count-mean sketch
:class:`~dpkit.ldp.HCMS`, so that the server can query any candidate in ``O(hashes)`` without
listing the domain). The server estimates every prefix of
the first length, keeps the ``keep`` largest, extends each by every possible next
``lengths[g] - lengths[g-1]`` bits, estimates those candidates in group ``g``, keeps the
``keep`` largest again, and so on to full items; the ``top`` largest of the last round are
returned with their estimated counts.

Counts and intervals: group ``g`` holds ``n_g`` of the ``n`` users, each assigned uniformly
at random, so an item's count ``c`` is estimated by ``(n / n_g) c_g`` with ``c_g`` the sketch's
unbiased estimate in the last group. Its variance is ``(n / n_g)^2 (Var_sketch +
n_g (c/n)(1 - c/n)(n - n_g)/(n - 1))``: the sketch's exact variance (with the plug-in collision
term of :meth:`~dpkit.ldp.SketchAggregator.estimate_items`) plus the hypergeometric variance of
how many of the item's holders fell in the group. Intervals are normal at ``confidence``; they
describe the estimate of a discovered item, not the chance of discovering it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dpkit._numeric.validation import check_integer, check_probability
from dpkit.errors import PrivacyParameterError
from dpkit.events import DpEvent, PureDpEvent
from dpkit.ldp import client as _c
from dpkit.ldp._aggregate import _z
from dpkit.ldp._protocols import _epsilon
from dpkit.ldp._sketch import HCMS, OLHSketch, SketchAggregator, SketchOracle
from dpkit.noise import RandomSource, resolve_source

__all__ = [
    "PEM",
    "SFP",
    "HeavyHitters",
    "PemAggregator",
    "SfpAggregator",
    "TreeHistAggregator",
    "TreeHistogram",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def _checked(
    epsilon: Any, bits: Any, width: Any, hashes: Any, hash_seed: Any
) -> tuple[float, int, int | None, int | None, int]:
    """The shared parameters of the heavy-hitter protocols, validated (dpkit errors)."""
    eps = _epsilon(epsilon)
    b = check_integer(bits, name="bits", minimum=2, maximum=62)
    if width is not None:
        width = check_integer(width, name="width", minimum=2, maximum=1 << 20)
    if hashes is not None:
        hashes = check_integer(hashes, name="hashes", minimum=1, maximum=1 << 16)
    seed = check_integer(hash_seed, name="hash_seed", minimum=0, maximum=(1 << 63) - 64)
    return eps, b, width, hashes, seed


def _search_options(
    top: Any, keep: Any, threshold: Any, confidence: Any
) -> tuple[int, int, float | None]:
    """``top``, ``keep`` (default ``2 top``) and ``threshold`` of a heavy-hitter search,
    validated with ``confidence`` before any work (dpkit errors)."""
    top = check_integer(top, name="top", minimum=1, maximum=1 << 20)
    keep = (
        2 * top if keep is None else check_integer(keep, name="keep", minimum=top, maximum=1 << 20)
    )
    if threshold is not None:
        threshold = check_probability(threshold, name="threshold")
    _z(confidence)
    return top, keep, threshold


@dataclasses.dataclass(frozen=True)
class HeavyHitters:
    """Discovered items, largest estimate first, with estimated counts and normal intervals."""

    items: IntArray
    counts: FloatArray
    std_errors: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    n: int
    rejected: int
    group_sizes: tuple[int, ...]
    confidence: float

    def as_dict(self) -> dict[int, float]:
        """``{item: estimated count}``."""
        return {int(i): float(c) for i, c in zip(self.items, self.counts, strict=True)}


class PEM(_c.PEM):
    """Prefix extending method over sketches (OLH over public hash functions by default, or
    Apple's Hadamard count-mean sketch): see :class:`dpkit.ldp.client.PEM` and the module
    docstring.

    Array form of reports: ``int64`` rows ``(group, j, y)`` (OLH) or ``(group, j, l, b)``
    (HCMS).
    """

    _groups: list[SketchOracle]  # type: ignore[assignment]
    _sketch_classes: ClassVar[dict[str, type[_c.OLHSketch | _c.HCMS]]] = {
        "olh": OLHSketch,
        "hcms": HCMS,
    }

    def __init__(
        self,
        *,
        epsilon: float,
        bits: int,
        lengths: Sequence[int] | None = None,
        oracle: str = "auto",
        width: int | None = None,
        hashes: int | None = None,
        hash_seed: int = 0,
        users: int | None = None,
    ) -> None:
        eps, b, width, hashes, seed = _checked(epsilon, bits, width, hashes, hash_seed)
        if users is not None:
            users = check_integer(users, name="users", minimum=1, maximum=1 << 62)
        try:
            super().__init__(  # the device-side class of the same name (cooperative)
                epsilon=eps,
                bits=b,
                lengths=lengths,
                oracle=oracle,
                width=width,
                hashes=hashes,
                hash_seed=seed,
                **({} if users is None else {"users": users}),  # PEM's own: not TreeHistogram's
            )
        except (TypeError, ValueError) as exc:
            raise PrivacyParameterError(str(exc)) from None

    @property
    def event(self) -> DpEvent:
        """One report per user: pure DP at :attr:`run_epsilon` (each user reports in one group,
        chosen independently of the data, through an eps-LDP sketch)."""
        return PureDpEvent(epsilon=self.run_epsilon)

    @property
    def groups(self) -> tuple[SketchOracle, ...]:
        """The sketch of each group."""
        return tuple(self._groups)

    def derive_tables(self) -> None:
        """Derive every group's public hash tables now (see
        :meth:`~dpkit.ldp.SketchOracle.derive_tables`)."""
        for sketch in self._groups:
            sketch.derive_tables()

    def encode_many(self, values: Any) -> IntArray:
        """Items as int64; refuses anything outside ``[0, 2**bits)`` (``ValueError``)."""
        arr = np.asarray(values)
        if arr.size and arr.dtype.kind not in "iu":
            raise ValueError(f"PEM: values must be ints in [0, 2**{self._bits})")
        arr = arr.astype(np.int64).reshape(-1)
        bad = (arr < 0) | (arr >= 1 << self._bits)
        if bad.any():
            raise ValueError(
                f"PEM: value {int(arr[np.argmax(bad)])} is outside [0, 2**{self._bits})"
            )
        return arr

    def randomize_many(self, values: Any, source: RandomSource | None = None) -> IntArray:
        """Reports of many users at once (the law of :meth:`randomize`)."""
        src = resolve_source(source)
        x = self.encode_many(values)
        g = self._draw_groups(src, x.size)
        out = np.empty((x.size, 1 + len(self._bounds())), dtype=np.int64)
        out[:, 0] = g
        for k, sketch in enumerate(self._groups):
            idx = np.flatnonzero(g == k)
            if idx.size:
                out[idx, 1:] = sketch._randomize_indices(self.group_values(k, x[idx]), src)
        return out

    def group_values(self, g: int, x: IntArray) -> IntArray:
        """The sketch indices group ``g`` reports for items ``x`` (the vectorised
        :meth:`group_value`): their prefixes."""
        return x >> (self._bits - self._group_bits(g))

    def _draw_groups(self, src: RandomSource, size: int) -> IntArray:
        """Each user's group, uniform over the groups (the law of :meth:`randomize`)."""
        return src.integers(len(self._groups), size)

    def _bounds(self) -> tuple[int, ...]:
        """Exclusive upper bounds of the columns of a sketch report."""
        k, m = self._hashes, self._width
        return (k, m) if self._oracle == "olh" else (k, m, 2)

    def coerce_reports(self, reports: Any) -> tuple[IntArray, int]:
        """Well-formed reports as rows ``(group, *sketch report)`` and the number rejected."""
        bounds = (len(self._groups), *self._bounds())
        cols = len(bounds)
        if (
            isinstance(reports, np.ndarray)
            and reports.dtype.kind in "iu"
            and reports.ndim == 2
            and reports.shape[1] == cols
        ):
            arr = reports.astype(np.int64, copy=False)
            ok = np.ones(arr.shape[0], dtype=np.bool_)
            for c, hi in enumerate(bounds):
                ok &= (arr[:, c] >= 0) & (arr[:, c] < hi)
            return arr[ok], int(arr.shape[0] - np.count_nonzero(ok))
        seq = reports.tolist() if isinstance(reports, np.ndarray) else list(reports)
        good = [
            tuple(r)
            for r in seq
            if isinstance(r, (list, tuple))
            and len(r) == cols
            and all(type(v) is int and 0 <= v < hi for v, hi in zip(r, bounds, strict=True))
        ]
        return np.asarray(good, dtype=np.int64).reshape(-1, cols), len(seq) - len(good)

    def aggregator(self) -> PemAggregator:
        """A fresh :class:`PemAggregator`."""
        return PemAggregator(self)

    def heavy_hitters(self, reports: Any, **kwargs: Any) -> HeavyHitters:
        """Aggregate one batch and discover the heavy hitters (see
        :meth:`PemAggregator.heavy_hitters`)."""
        agg = self.aggregator()
        agg.add(reports)
        return agg.heavy_hitters(**kwargs)


class PemAggregator:
    """Accumulates PEM reports (one sketch aggregator per group); malformed reports are
    dropped and counted, never raised."""

    def __init__(self, protocol: PEM) -> None:
        if not isinstance(protocol, PEM):
            raise PrivacyParameterError(f"protocol must be a dpkit.ldp.PEM, got {protocol!r}")
        self.protocol = protocol
        self._aggs: list[SketchAggregator] = [s.aggregator() for s in protocol.groups]
        self._rejected = 0

    @property
    def n(self) -> int:
        """Accepted reports."""
        return sum(a.n for a in self._aggs)

    @property
    def rejected(self) -> int:
        """Malformed reports dropped."""
        return self._rejected

    def add(self, reports: Any) -> int:
        """Add a batch; returns the number accepted."""
        try:
            arr, bad = self.protocol.coerce_reports(reports)
        except TypeError:
            self._rejected += 1
            return 0
        order = np.argsort(arr[:, 0], kind="stable")
        arr = arr[order]
        bounds = np.searchsorted(arr[:, 0], np.arange(len(self._aggs) + 1))
        for g, agg in enumerate(self._aggs):
            part = arr[bounds[g] : bounds[g + 1], 1:]
            if part.shape[0]:
                agg.add(np.ascontiguousarray(part))
        self._rejected += bad
        return int(arr.shape[0])

    def merge(self, other: PemAggregator) -> PemAggregator:
        """Add another shard's aggregator (identical protocol)."""
        if not isinstance(other, PemAggregator) or repr(other.protocol) != repr(self.protocol):
            raise PrivacyParameterError("can only merge aggregators of identical PEM protocols")
        for mine, theirs in zip(self._aggs, other._aggs, strict=True):
            mine.merge(theirs)
        self._rejected += other._rejected
        return self

    def heavy_hitters(
        self, *, top: int = 100, keep: int | None = None, confidence: float = 0.95
    ) -> HeavyHitters:
        """The ``top`` items of largest estimated count (module docstring); ``keep`` prefixes
        survive each round (default ``2 top``)."""
        top, keep, _ = _search_options(top, keep, None, confidence)
        lens = self.protocol.lengths
        n = self.n
        sizes = tuple(a.n for a in self._aggs)
        cand = np.arange(1 << lens[0], dtype=np.int64)
        raw = se_last = np.zeros(0)
        est = None
        for g, agg in enumerate(self._aggs):
            if g:
                step = lens[g] - lens[g - 1]
                cand = ((cand[:, None] << step) | np.arange(1 << step, dtype=np.int64)).reshape(-1)
            est = agg.estimate_items(cand, confidence=confidence)
            raw = est.raw_counts
            order = np.argsort(-raw, kind="stable")[: keep if g < len(lens) - 1 else top]
            cand, raw = cand[order], raw[order]
            se_last = est.std_errors[order]
        if est is None or n == 0:
            return _empty(n, self._rejected, sizes, confidence)
        return _scaled(cand, raw, se_last, n, sizes, sizes[-1], self._rejected, confidence)


def _empty(n: int, rejected: int, sizes: tuple[int, ...], confidence: float) -> HeavyHitters:
    none = np.zeros(0)
    return HeavyHitters(
        np.zeros(0, dtype=np.int64), none, none, none, none, n, rejected, sizes, float(confidence)
    )


def _scaled(
    items: IntArray,
    raw: FloatArray,
    se_group: FloatArray,
    n: int,
    sizes: tuple[int, ...],
    ng: int,
    rejected: int,
    confidence: float,
) -> HeavyHitters:
    """Counts of ``items`` in one group of ``ng`` of the ``n`` users, scaled to everyone: the
    estimate ``(n / ng) c_g`` and its standard error from the sketch's variance plus the
    hypergeometric variance of the holders in the group (module docstring)."""
    z = _z(confidence)
    if ng == 0:
        return _empty(n, rejected, sizes, confidence)
    scale = n / ng
    counts = raw * scale
    frac = np.clip(counts / n, 0.0, 1.0)
    sampling = ng * frac * (1.0 - frac) * (n - ng) / max(n - 1, 1)
    se = scale * np.sqrt(se_group**2 + sampling)
    return HeavyHitters(
        items=items,
        counts=counts,
        std_errors=se,
        ci_low=counts - z * se,
        ci_high=counts + z * se,
        n=n,
        rejected=rejected,
        group_sizes=sizes,
        confidence=float(confidence),
    )


class TreeHistogram(PEM, _c.TreeHistogram):
    """TreeHist with Hadamard count-mean sketches: see :class:`dpkit.ldp.client.TreeHistogram`.

    Half of the users (uniformly over the ``L`` levels) report prefixes; the server walks the
    prefix tree level by level and keeps the prefixes whose estimate clears a threshold (Bassily
    et al.'s pruning rule, "keep a node when its estimated frequency is at least ``eta``"),
    extending each survivor to every child. The other half (group ``L``) report whole items and
    give the final counts: those users took no part in choosing the candidates, so the counts
    and intervals of the discovered items do not inherit the selection's upward bias (PEM's
    come from the very group that ranked them). Array form of reports: ``int64`` rows
    ``(group, j, l, b)``.
    """

    def _draw_groups(self, src: RandomSource, size: int) -> IntArray:
        """Level ``r`` for ``r < L`` of ``r`` uniform in ``[0, 2L)``, else group ``L``."""
        level = len(self._lengths)
        return np.minimum(src.integers(2 * level, size), level)

    @property
    def d(self) -> int:
        """Items in the domain, ``2**bits``."""
        return 1 << self._bits

    def aggregator(self) -> TreeHistAggregator:
        """A fresh :class:`TreeHistAggregator`."""
        return TreeHistAggregator(self)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        """Variance of a discovered item's estimated count when the estimation group holds
        exactly its expected ``n / 2`` users: ``(n / (n/2))^2 (V(n/2, f) + (n/2) f (1 - f)
        (n/2) / (n - 1)) = 2 V(n, f) + n^2 f (1 - f) / (n - 1)`` with ``V`` the sketch's exact
        variance without heavy collisions (:meth:`HCMS.variance`, linear in the users) and the
        second term the hypergeometric variance of the item's holders in the group."""
        n = check_integer(n, name="n", minimum=1)
        f = check_probability(frequency, name="frequency")
        return 2.0 * self._groups[-1].variance(n, f) + n * n * f * (1.0 - f) / max(n - 1, 1)


class TreeHistAggregator(PemAggregator):
    """Accumulates TreeHist reports; malformed reports are dropped and counted, never raised."""

    protocol: TreeHistogram

    def __init__(self, protocol: TreeHistogram) -> None:
        if not isinstance(protocol, TreeHistogram):
            raise PrivacyParameterError(
                f"protocol must be a dpkit.ldp.TreeHistogram, got {protocol!r}"
            )
        super().__init__(protocol)

    def heavy_hitters(
        self,
        *,
        top: int = 100,
        keep: int | None = None,
        threshold: float | None = None,
        confidence: float = 0.95,
    ) -> HeavyHitters:
        """The ``top`` discovered items of largest count in the estimation group.

        At each level the surviving prefixes' children are estimated in that level's group; a
        prefix survives when its estimated count in the group is at least ``threshold`` times
        the group's size (a fraction of users, the paper's ``eta / n``) or, by default, at least
        ``2`` standard deviations of the estimate of a prefix no one holds (about 2.3% of the
        empty prefixes pass); at most the ``keep`` largest survive (default ``2 top``).
        """
        top, keep, threshold = _search_options(top, keep, threshold, confidence)
        proto = self.protocol
        lens = proto.lengths
        n = self.n
        sizes = tuple(a.n for a in self._aggs)
        cand = np.arange(1 << lens[0], dtype=np.int64)
        for g, length in enumerate(lens):
            if g:
                step = length - lens[g - 1]
                cand = ((cand[:, None] << step) | np.arange(1 << step, dtype=np.int64)).reshape(-1)
            agg = self._aggs[g]
            if agg.n == 0:
                return _empty(n, self._rejected, sizes, confidence)
            raw = agg.estimate_items(cand).raw_counts
            if threshold is None:
                bar = _PRUNE_Z * math.sqrt(proto.groups[g].variance(agg.n))
            else:
                bar = threshold * agg.n
            ok = np.flatnonzero(raw >= bar)
            ok = ok[np.argsort(-raw[ok], kind="stable")[:keep]]
            cand = cand[ok]
            if cand.size == 0:
                return _empty(n, self._rejected, sizes, confidence)
        last = self._aggs[-1]
        est = last.estimate_items(cand, confidence=confidence)
        order = np.argsort(-est.raw_counts, kind="stable")[:top]
        return _scaled(
            cand[order],
            est.raw_counts[order],
            est.std_errors[order],
            n,
            sizes,
            last.n,
            self._rejected,
            confidence,
        )


_PRUNE_Z = 2.0


class SFP(TreeHistogram, _c.SFP):
    """Apple's sequence fragment puzzle over sketches: see :class:`dpkit.ldp.client.SFP`.

    The server estimates every ``(hash, fragment)`` pair of each fragment group and keeps
    those above the pruning bar (as :class:`TreeHistogram`'s levels), joins the surviving
    fragments of equal hash at every position into candidate items, drops the candidates whose
    own hash differs, and counts the rest in the word group (half of the users, who took no
    part in choosing the candidates). Array form of reports: ``int64`` rows ``(group, *sketch
    report)``.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        bits: int,
        lengths: Sequence[int] | None = None,
        hash_bits: int = 8,
        oracle: str = "auto",
        width: int | None = None,
        hashes: int | None = None,
        hash_seed: int = 0,
    ) -> None:
        eps, b, width, hashes, seed = _checked(epsilon, bits, width, hashes, hash_seed)
        hb = check_integer(hash_bits, name="hash_bits", minimum=1, maximum=16)
        try:
            _c.SFP.__init__(
                self,
                epsilon=eps,
                bits=b,
                lengths=lengths,
                hash_bits=hb,
                oracle=oracle,
                width=width,
                hashes=hashes,
                hash_seed=seed,
            )
        except (TypeError, ValueError) as exc:
            raise PrivacyParameterError(str(exc)) from None

    def derive_tables(self) -> None:
        super().derive_tables()
        hasher = self._hasher
        assert isinstance(hasher, SketchOracle)  # the server's sketch classes
        hasher.derive_tables()

    def word_hashes(self, x: Any) -> IntArray:
        """``r(x)`` of many items (the vectorised :meth:`word_hash`)."""
        hasher = self._hasher
        assert isinstance(hasher, SketchOracle)  # the server's sketch classes
        return hasher.cells(0, np.asarray(x, dtype=np.int64))

    def group_values(self, g: int, x: IntArray) -> IntArray:
        if g == len(self._lengths):
            return x
        size = self.fragment_bits(g)
        fragment = (x >> (self._bits - self._lengths[g])) & ((1 << size) - 1)
        return (self.word_hashes(x) << size) | fragment

    def aggregator(self) -> SfpAggregator:
        """A fresh :class:`SfpAggregator`."""
        return SfpAggregator(self)


_SFP_JOIN_LIMIT = 1 << 16  # candidate items assembled per hash value, at most


class SfpAggregator(TreeHistAggregator):
    """Accumulates SFP reports; malformed reports are dropped and counted, never raised."""

    protocol: SFP

    def __init__(self, protocol: SFP) -> None:
        if not isinstance(protocol, SFP):
            raise PrivacyParameterError(f"protocol must be a dpkit.ldp.SFP, got {protocol!r}")
        PemAggregator.__init__(self, protocol)

    def heavy_hitters(
        self,
        *,
        top: int = 100,
        keep: int | None = None,
        threshold: float | None = None,
        confidence: float = 0.95,
    ) -> HeavyHitters:
        """The ``top`` assembled items of largest count in the word group.

        In each fragment group every ``(hash, fragment)`` pair is estimated; a pair survives
        when its estimated count is at least ``threshold`` times the group's size or, by
        default, ``2`` standard deviations of the estimate of a pair no one holds; at most the
        ``keep`` largest survive (default ``2 top``). For each hash value the surviving
        fragments of every position are joined (the smallest dropped first while the join
        would exceed 65,536 items), the items whose hash is another value are discarded, and
        the rest are counted in the word group.
        """
        top, keep, threshold = _search_options(top, keep, threshold, confidence)
        proto = self.protocol
        n = self.n
        sizes = tuple(a.n for a in self._aggs)
        hb = proto.hash_bits
        kept: list[tuple[IntArray, IntArray]] = []  # (hash, fragment) by decreasing estimate
        for g in range(len(proto.lengths)):
            agg, size = self._aggs[g], proto.fragment_bits(g)
            if agg.n == 0:
                return _empty(n, self._rejected, sizes, confidence)
            pairs = np.arange(1 << (hb + size), dtype=np.int64)
            raw = agg.estimate_items(pairs).raw_counts
            if threshold is None:
                bar = _PRUNE_Z * math.sqrt(proto.groups[g].variance(agg.n))
            else:
                bar = threshold * agg.n
            ok = np.flatnonzero(raw >= bar)
            ok = ok[np.argsort(-raw[ok], kind="stable")[:keep]]
            kept.append((pairs[ok] >> size, pairs[ok] & ((1 << size) - 1)))
        found = [self._join(kept, int(r)) for r in np.unique(kept[0][0])]
        last = self._aggs[-1]
        cand = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
        if cand.size == 0 or last.n == 0:
            return _empty(n, self._rejected, sizes, confidence)
        est = last.estimate_items(cand, confidence=confidence)
        order = np.argsort(-est.raw_counts, kind="stable")[:top]
        return _scaled(
            cand[order],
            est.raw_counts[order],
            est.std_errors[order],
            n,
            sizes,
            last.n,
            self._rejected,
            confidence,
        )

    def _join(self, kept: list[tuple[IntArray, IntArray]], r: int) -> IntArray:
        """The items of hash ``r`` whose every fragment survived (see :meth:`heavy_hitters`)."""
        proto = self.protocol
        parts = [frag[h == r] for h, frag in kept]
        while math.prod(p.size for p in parts) > _SFP_JOIN_LIMIT:
            longest = max(range(len(parts)), key=lambda i: parts[i].size)
            parts[longest] = parts[longest][:-1]
        items = np.zeros(1, dtype=np.int64)
        for g, frag in enumerate(parts):
            shift = proto.fragment_bits(g)
            items = ((items[:, None] << shift) | frag[None, :]).reshape(-1)
        return items[proto.word_hashes(items) == r] if items.size else items
