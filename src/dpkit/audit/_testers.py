"""Black-box testers: families of candidate events chosen on one half of the samples.

A tester looks at the *selection half* of the outputs of M(D) (side A) and M(D') (side B) and
proposes a finite family of events ``S_1, ..., S_m`` of the output space (a threshold, a set of
categories, a half-space found by a classifier). The events are then frozen; the audit counts
how often each falls in the *evaluation half*, which is independent of the selection half, so
the Clopper-Pearson bounds computed there are valid no matter how the events were chosen
(Ding, Wang, Wang, Zhang and Kifer, "Detecting violations of differential privacy", CCS 2018,
Section 4: "event selection" and "hypothesis testing" on separate samples).

Every event is a post-processing of the output, so a tester can never make a private mechanism
look less private than it is; a good tester only makes a non-private one look as bad as it is.

Testers
-------
* :class:`ThresholdTester`: scalar outputs, events ``{x > t}`` (their complements ``{x <= t}``
  are the lower tails), t taken at quantiles of the pooled selection half, denser in both tails.
* :class:`HistogramTester`: discrete outputs (numbers, bit vectors, tuples, strings). Categories
  are sorted by their empirical likelihood ratio on the selection half and the events are the
  prefixes of that order: by the Neyman-Pearson lemma the most powerful tests are of this form.
* :class:`ClassifierTester`: vector outputs. A logistic regression (ridge-regularised, fitted by
  Newton's method) or a nearest-mean rule learns a direction w on the selection half; the events
  are thresholds of the score ``<w, x>``.
* :func:`float_structure`: a feature for floating-point outputs (use it with the histogram
  tester). Mironov ("On significance of the least significant bits for differential privacy",
  CCS 2012) showed that ``x + Laplace`` computed in doubles leaks x through *which* doubles can
  occur: the set of reachable outputs depends on x. The feature keeps the sign bit, the
  exponent field and the position of the lowest set bit of the significand, and tells every
  zero, infinity and NaN apart by its full bit pattern (sign of zero, NaN payload); for textbook
  floating-point Laplace the outputs of x = 0 and x = 1 then have disjoint supports on some
  categories, and a release whose ``-0.0`` depends on the input is seen too.
  :func:`float_low_bits` keeps the low 8 bits of the significand instead (leaks above the
  lowest set bit).
* :class:`BitTester`: floating-point outputs, one event per bit of the 64-bit pattern
  (``{bit k = 1}``: 52 significand bits, 11 exponent bits, the sign). A release that writes
  the input into any single bit (for instance significand bit 20, which neither the lowest
  set bit nor the low 8 bits show) differs in that bit's frequency between the two inputs.
  Like every tester it only proposes events: the audit screens them on the selection half and
  evaluates one on the held-out half.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from dpkit._numeric.validation import check_integer, check_positive

__all__ = [
    "BitTester",
    "ClassifierTester",
    "FittedEvents",
    "HistogramTester",
    "Tester",
    "ThresholdTester",
    "float_low_bits",
    "float_structure",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Feature = Callable[[Any], Any]


class FittedEvents(Protocol):
    """A frozen family of ``m`` events produced by :meth:`Tester.fit`."""

    @property
    def size(self) -> int:
        """The number m of events."""
        ...

    def counts(self, samples: Any) -> IntArray:
        """How many of ``samples`` fall in each event (an int array of length m)."""
        ...

    def describe(self, index: int) -> str:
        """Plain-words description of event ``index``."""
        ...


class Tester(Protocol):
    """Proposes candidate events from the selection halves of the two sides."""

    name: str

    def fit(self, a: Any, b: Any) -> FittedEvents | None:
        """Return the frozen events, or ``None`` when the tester does not apply to the data."""
        ...


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _tail_quantiles(n: int, points: int) -> FloatArray:
    """Quantile levels spaced geometrically towards both tails and linearly in the middle."""
    half = max(points // 3, 1)
    low = np.geomspace(1.0 / max(n, 2), 0.05, half)
    mid = np.linspace(0.05, 0.95, max(points - 2 * half, 1))
    return np.unique(np.concatenate([low, mid, 1.0 - low]))


def _as_scalar_floats(x: Any) -> FloatArray | None:
    arr = np.asarray(x)
    if arr.ndim != 1 or arr.dtype.kind not in "biuf":
        return None
    return arr.astype(np.float64, copy=False)


@dataclass(frozen=True)
class _ThresholdEvents:
    """Events ``{feature(x) > t_i}``."""

    thresholds: FloatArray
    feature: Callable[[Any], FloatArray]
    label: str

    @property
    def size(self) -> int:
        return int(self.thresholds.size)

    def counts(self, samples: Any) -> IntArray:
        # k(x) = number of thresholds below x, so x > t_i exactly when i < k(x); NaN is in no
        # upper tail (k = 0). One pass, O(n log m), no sort of the samples.
        x = self.feature(samples)
        m = self.thresholds.size
        k = np.searchsorted(self.thresholds, x, side="left")
        k = np.where(np.isnan(x), 0, k)
        per = np.bincount(k, minlength=m + 1)
        above = per[::-1].cumsum()[::-1][1:]
        return np.asarray(above, dtype=np.int64)

    def describe(self, index: int) -> str:
        return f"{self.label} > {self.thresholds[index]:.17g}"


def _threshold_candidates(pooled: FloatArray, points: int) -> FloatArray:
    pooled = pooled[~np.isnan(pooled)]
    if pooled.size == 0:
        return np.zeros(0)
    qs = _tail_quantiles(pooled.size, points)
    cand = np.unique(np.quantile(pooled, qs, method="lower"))  # selection, no full sort
    if cand.size < qs.size // 2:
        # few distinct values (discrete outputs): use every value but the largest, if few
        uniq = np.unique(pooled)
        if uniq.size <= points:
            return uniq[:-1] if uniq.size > 1 else uniq  # x > max is empty: drop it
    return cand


# ---------------------------------------------------------------------------------------------
# threshold tester
# ---------------------------------------------------------------------------------------------
class ThresholdTester:
    """Events ``{x > t}`` and, through complements, ``{x <= t}``, for scalar outputs.

    Parameters
    ----------
    points:
        Number of candidate thresholds (quantiles of the pooled selection half: a third of them
        spaced geometrically in each tail, where the likelihood ratio of most mechanisms is
        largest).
    feature:
        Optional post-processing applied to the outputs first (it must return one float per
        output). Any fixed feature keeps the audit valid.
    """

    def __init__(self, *, points: int = 256, feature: Feature | None = None) -> None:
        self.points = check_integer(points, name="points", minimum=2)
        self.feature = feature
        self.name = "threshold" if feature is None else f"threshold[{_name(feature)}]"

    def _apply(self, samples: Any) -> FloatArray:
        x = self.feature(samples) if self.feature is not None else samples
        out = _as_scalar_floats(x)
        if out is None:
            raise ValueError("the threshold tester needs one real number per output")
        return out

    def fit(self, a: Any, b: Any) -> FittedEvents | None:
        try:
            xa, xb = self._apply(a), self._apply(b)
        except (ValueError, TypeError):
            return None
        t = _threshold_candidates(np.concatenate([xa, xb]), self.points)
        if t.size == 0:
            return None
        return _ThresholdEvents(t, self._apply, "output" if self.feature is None else self.name)


def _name(f: Any) -> str:
    return str(getattr(f, "__name__", type(f).__name__))


# ---------------------------------------------------------------------------------------------
# histogram tester
# ---------------------------------------------------------------------------------------------
def _keys(samples: Any) -> npt.NDArray[Any]:
    """One sortable key per output: numbers stay numbers, rows become bytes, others strings."""
    arr = np.asarray(samples)
    if arr.dtype.kind in "biuf" and arr.ndim == 1:
        return arr
    if arr.dtype.kind in "biufSU" and arr.ndim >= 2:
        rows = np.ascontiguousarray(arr.reshape(arr.shape[0], -1))
        return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    if arr.dtype.kind in "SU" and arr.ndim == 1:
        return arr
    seq = samples if not isinstance(samples, np.ndarray) else list(samples)
    return np.array([repr(s) for s in seq])


@dataclass(frozen=True)
class _PrefixEvents:
    """Events ``S_j = {categories ranked < cut_j}`` with categories ranked by likelihood ratio."""

    categories: npt.NDArray[Any]  # sorted unique keys (for searchsorted)
    rank: IntArray  # rank of each category in likelihood-ratio order
    cuts: IntArray  # event j = ranks < cuts[j]
    feature: Feature | None
    shown: tuple[str, ...]  # categories in rank order (for descriptions), truncated
    table: tuple[int, IntArray] | None = None  # small integer keys: (offset, rank or -1)

    @property
    def size(self) -> int:
        return int(self.cuts.size)

    def counts(self, samples: Any) -> IntArray:
        x = self.feature(samples) if self.feature is not None else samples
        keys = _keys(x)
        k = self.categories.size
        if self.table is not None and keys.dtype.kind in "biu":
            lo, ranks = self.table
            idx = keys.astype(np.int64) - lo
            idx = idx[(idx >= 0) & (idx < ranks.size)]
            r = ranks[idx]
            per = np.bincount(r[r >= 0], minlength=k)
            return np.asarray(np.concatenate([[0], np.cumsum(per)])[self.cuts], dtype=np.int64)
        pos = np.searchsorted(self.categories, keys)
        pos_c = np.minimum(pos, k - 1)
        known = (pos < k) & (self.categories[pos_c] == keys)
        per_rank = np.bincount(self.rank[pos_c[known]], minlength=k)
        cum = np.concatenate([[0], np.cumsum(per_rank)])
        return np.asarray(cum[self.cuts], dtype=np.int64)

    def describe(self, index: int) -> str:
        c = int(self.cuts[index])
        head = ", ".join(self.shown[: min(c, 6)])
        more = f", ... ({c} categories)" if c > 6 else ""
        return f"output in {{{head}{more}}}"


def _small_int_range(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> tuple[int, int] | None:
    """``(min, max - min + 1)`` of two integer key arrays when that range is small."""
    if a.dtype.kind not in "biu" or a.size == 0 or b.size == 0:
        return None
    lo = int(min(a.min(), b.min()))
    hi = int(max(a.max(), b.max()))
    return (lo, hi - lo + 1) if hi - lo < (1 << 20) else None


def _show(key: Any) -> str:
    if isinstance(key, np.void):
        return "0x" + key.tobytes().hex()
    if isinstance(key, bytes):
        return "0x" + key.hex()
    return str(key.item() if hasattr(key, "item") else key)


class HistogramTester:
    """Sets of categories for discrete outputs, ranked by empirical likelihood ratio.

    On the selection half, category c has counts ``n_A(c)``, ``n_B(c)``; categories are sorted
    by ``ln((n_A(c) + 1/2) / N_A) - ln((n_B(c) + 1/2) / N_B)`` (the 1/2 keeps categories seen on
    one side only finite and ordered by how often they were seen). The events are the prefixes
    of this order; complements (suffixes) come from the audit's two orientations. Categories
    never seen in the selection half belong to no prefix.

    Parameters
    ----------
    feature:
        Optional map from the array of outputs to an array of category keys (for instance
        :func:`float_structure`). Rows of a 2-D output array are categories.
    max_events:
        With more categories than this, prefixes are taken at evenly spaced cut points.
    """

    def __init__(self, *, feature: Feature | None = None, max_events: int = 2048) -> None:
        self.feature = feature
        self.max_events = check_integer(max_events, name="max_events", minimum=1)
        self.name = "histogram" if feature is None else f"histogram[{_name(feature)}]"

    def fit(self, a: Any, b: Any) -> FittedEvents | None:
        try:
            ka = _keys(self.feature(a) if self.feature is not None else a)
            kb = _keys(self.feature(b) if self.feature is not None else b)
            if ka.dtype != kb.dtype:
                return None
            small = _small_int_range(ka, kb)
            if small is None:
                cats, inv = np.unique(np.concatenate([ka, kb]), return_inverse=True)
        except (TypeError, ValueError):
            return None
        table: tuple[int, IntArray] | None = None
        if small is not None:
            # integer keys in a small range: counting sort instead of np.unique
            lo, width = small
            fa = np.bincount(ka.astype(np.int64) - lo, minlength=width)
            fb = np.bincount(kb.astype(np.int64) - lo, minlength=width)
            present = np.flatnonzero(fa + fb)
            cats = (present + lo).astype(ka.dtype)
            ca, cb = fa[present].astype(np.float64), fb[present].astype(np.float64)
        else:
            inv = inv.reshape(-1)
            ca = np.bincount(inv[: ka.size], minlength=cats.size).astype(np.float64)
            cb = np.bincount(inv[ka.size :], minlength=cats.size).astype(np.float64)
        k = cats.size
        if k < 2:
            return None
        score = np.log((ca + 0.5) / ka.size) - np.log((cb + 0.5) / kb.size)
        order = np.argsort(-score, kind="stable")
        rank = np.empty(k, dtype=np.int64)
        rank[order] = np.arange(k)
        if k - 1 <= self.max_events:
            cuts = np.arange(1, k, dtype=np.int64)
        else:
            cuts = np.unique(np.linspace(1, k - 1, self.max_events).astype(np.int64))
        shown = tuple(_show(cats[i]) for i in order[:6])
        if small is not None:
            ranks = np.full(small[1], -1, dtype=np.int64)
            ranks[present] = rank
            table = (small[0], ranks)
        return _PrefixEvents(cats, rank, cuts, self.feature, shown, table)


# ---------------------------------------------------------------------------------------------
# classifier tester
# ---------------------------------------------------------------------------------------------
def _as_matrix(x: Any) -> FloatArray | None:
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        return None
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        arr = arr.reshape(arr.shape[0], -1)
    return arr.astype(np.float64, copy=False)


def _logistic_direction(x: FloatArray, y: FloatArray, ridge: float, iterations: int) -> FloatArray:
    """Ridge-regularised logistic regression by Newton's method (IRLS); returns [bias, w]."""
    design = np.hstack([np.ones((x.shape[0], 1)), x])
    w = np.zeros(design.shape[1])
    penalty = ridge * np.eye(design.shape[1])
    penalty[0, 0] = 0.0
    for _ in range(iterations):
        z = np.clip(design @ w, -30.0, 30.0)
        p = 1.0 / (1.0 + np.exp(-z))
        grad = design.T @ (p - y) + penalty @ w
        hess = (design * (p * (1.0 - p))[:, None]).T @ design + penalty + 1e-9 * np.eye(w.size)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.max(np.abs(step))) < 1e-8:
            break
    return w


class _Projection:
    """The frozen score ``<w, (x - center) / scale>`` of a fitted classifier."""

    __name__ = "classifier_score"

    def __init__(
        self, center: FloatArray, scale: FloatArray, w: FloatArray, feature: Feature | None
    ) -> None:
        self.center, self.scale, self.w, self.feature = center, scale, w, feature

    def __call__(self, samples: Any) -> FloatArray:
        x = _as_matrix(self.feature(samples) if self.feature is not None else samples)
        if x is None:
            raise ValueError("the classifier tester needs numeric outputs")
        return np.asarray(((x - self.center) / self.scale) @ self.w, dtype=np.float64)


class ClassifierTester:
    """Threshold events on the score of a linear classifier trained on the selection half.

    ``method="logistic"`` fits a ridge-regularised logistic regression separating side A from
    side B (Newton's method on at most ``max_train`` rows per side, features standardised);
    ``method="nearest_mean"`` uses the direction ``(mean_B - mean_A) / var`` (a diagonal Fisher
    discriminant). The score is then audited like a scalar output by a
    :class:`ThresholdTester`; training and threshold choice use only the selection half.
    """

    def __init__(
        self,
        *,
        method: str = "logistic",
        points: int = 256,
        ridge: float = 1.0,
        max_train: int = 100_000,
        feature: Feature | None = None,
    ) -> None:
        if method not in ("logistic", "nearest_mean"):
            raise ValueError(f"method must be 'logistic' or 'nearest_mean', got {method!r}")
        self.method = method
        self.points = check_integer(points, name="points", minimum=2)
        self.ridge = check_positive(ridge, "ridge")
        self.max_train = check_integer(max_train, name="max_train", minimum=10)
        self.feature = feature
        self.name = f"classifier[{method}]"

    def fit(self, a: Any, b: Any) -> FittedEvents | None:
        xa = _as_matrix(self.feature(a) if self.feature is not None else a)
        xb = _as_matrix(self.feature(b) if self.feature is not None else b)
        if xa is None or xb is None or xa.shape[1] != xb.shape[1]:
            return None
        xa_t, xb_t = xa[: self.max_train], xb[: self.max_train]
        pooled = np.vstack([xa_t, xb_t])
        center = pooled.mean(axis=0)
        scale = pooled.std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        za, zb = (xa_t - center) / scale, (xb_t - center) / scale
        if self.method == "nearest_mean":
            w = zb.mean(axis=0) - za.mean(axis=0)
        else:
            y = np.concatenate([np.zeros(za.shape[0]), np.ones(zb.shape[0])])
            w = _logistic_direction(np.vstack([za, zb]), y, self.ridge, 25)[1:]
        if not np.all(np.isfinite(w)) or not np.any(w != 0):
            return None
        proj = _Projection(center, scale, w, self.feature)
        inner = ThresholdTester(points=self.points, feature=proj)
        fitted = inner.fit(a, b)
        if isinstance(fitted, _ThresholdEvents):
            return _ThresholdEvents(fitted.thresholds, fitted.feature, "score")
        return fitted


# ---------------------------------------------------------------------------------------------
# floating-point structure (Mironov 2012)
# ---------------------------------------------------------------------------------------------
_SPECIAL_OFFSET = 1 << 21  # codes of finite non-zero doubles lie in [1, 2**21)
_EXPONENT_MASK = np.uint64(0x7FF)
_SIGNIFICAND_MASK = np.uint64((1 << 52) - 1)


def float_structure(values: Any) -> IntArray:
    """Category of each double: every structural bit of its representation.

    * zeros, infinities and NaNs: one category per full 64-bit pattern, so ``-0.0`` and
      ``+0.0``, ``-inf`` and ``+inf`` and every NaN payload (and sign) are told apart; their
      codes are the bit patterns read as int64 (none falls in the range of the codes below);
    * finite non-zero doubles: the sign *bit*, the raw 11-bit exponent field (every binade,
      subnormals included) and the lattice position, i.e. the number of significant bits
      ``b = 53 - z`` with z the number of trailing zero bits of the 53-bit significand
      (subnormals: of their 52-bit field). The code is ``1 + (sign 2**11 + exponent) 64 + b``.

    Two doubles in the same binade with different codes lie on different lattices: this is the
    information the textbook floating-point Laplace mechanism leaks (Mironov, CCS 2012); the sign
    of zero and NaN payloads are what a release leaks when it is not a function of its lattice
    integer alone.
    """
    y = np.ascontiguousarray(np.asarray(values, dtype=np.float64).reshape(-1))
    bits = y.view(np.uint64)
    sign = (bits >> np.uint64(63)).astype(np.int64)
    exponent = ((bits >> np.uint64(52)) & _EXPONENT_MASK).astype(np.int64)
    significand = bits & _SIGNIFICAND_MASK
    full = np.where(exponent > 0, significand | np.uint64(1 << 52), significand)
    low = (full & (~full + np.uint64(1))).astype(np.float64)  # lowest set bit, exact
    _, low_e = np.frexp(low)  # low = 2**(low_e - 1); z = low_e - 1
    width = np.where(exponent > 0, 53, 52)
    b = np.where(full > 0, width - (low_e - 1), 0)
    code = 1 + (sign * 2048 + exponent) * 64 + b
    special = (y == 0.0) | ~np.isfinite(y)
    return np.asarray(np.where(special, bits.view(np.int64), code), dtype=np.int64)


_LOW_BITS = 8


def float_low_bits(values: Any) -> IntArray:
    """Category of each double: sign bit, exponent field and the low 8 bits of the significand.

    The companion of :func:`float_structure` for leaks in low-order bits *above* the lowest set
    one (for instance an output whose second-lowest bit depends on the input while the lowest
    is always set: the lattice position is then the same for both inputs). Zeros, infinities
    and NaNs get their full bit pattern as in :func:`float_structure`; the other codes are
    ``1 + (sign 2**11 + exponent) 2**8 + (significand mod 2**8)``. Not among the default
    testers (it splits every binade into 256 categories); pass
    ``HistogramTester(feature=float_low_bits)`` to look for such leaks.
    """
    y = np.ascontiguousarray(np.asarray(values, dtype=np.float64).reshape(-1))
    bits = y.view(np.uint64)
    head = (bits >> np.uint64(52)).astype(np.int64)  # sign bit and exponent field
    low = (bits & np.uint64((1 << _LOW_BITS) - 1)).astype(np.int64)
    code = 1 + (head << _LOW_BITS) + low
    special = (y == 0.0) | ~np.isfinite(y)
    return np.asarray(np.where(special, bits.view(np.int64), code), dtype=np.int64)


_BIT_BLOCK = 1 << 16  # rows per block when unpacking bits (4 MiB of uint8 per block)


def _bit_counts(values: Any) -> IntArray:
    """How many doubles have each of the 64 bits set (index k = bit k, 0 the lowest)."""
    y = np.ascontiguousarray(np.asarray(values, dtype="<f8").reshape(-1))  # little-endian
    raw = y.view(np.uint8).reshape(-1, 8)  # byte j holds bits 8j .. 8j + 7
    total = np.zeros(64, dtype=np.int64)
    for start in range(0, raw.shape[0], _BIT_BLOCK):
        bits = np.unpackbits(raw[start : start + _BIT_BLOCK], axis=1, bitorder="little")
        total += bits.sum(axis=0, dtype=np.int64)
    return total


def _bit_name(k: int) -> str:
    if k == 63:
        return "sign bit"
    if k >= 52:
        return f"exponent bit {k - 52}"
    return f"significand bit {k}"


@dataclass(frozen=True)
class _BitEvents:
    """Events ``{bit b_i of the double's 64-bit pattern is 1}``."""

    bits: IntArray

    @property
    def size(self) -> int:
        return int(self.bits.size)

    def counts(self, samples: Any) -> IntArray:
        return np.asarray(_bit_counts(samples)[self.bits], dtype=np.int64)

    def describe(self, index: int) -> str:
        return f"{_bit_name(int(self.bits[index]))} of the output is 1"


class BitTester:
    """One event per bit of the outputs' 64-bit patterns: ``{bit k = 1}``, k = 0..63.

    For 1-D floating-point outputs. The events are fixed in advance (the 52 significand bits,
    the 11 exponent bits and the sign bit); :meth:`fit` keeps those that are not constant on
    the pooled selection data (a bit that never changes cannot tell the inputs apart, and fewer
    events mean a smaller Bonferroni factor when the audit screens them). Their complements
    ``{bit k = 0}`` come from the audit's two orientations. Cost: one pass over the samples,
    64 bits unpacked per double.
    """

    name = "bits"

    def fit(self, a: Any, b: Any) -> FittedEvents | None:
        xa, xb = _as_scalar_floats(a), _as_scalar_floats(b)
        if xa is None or xb is None or np.asarray(a).dtype.kind != "f":
            return None
        n = xa.size + xb.size
        pooled = _bit_counts(xa) + _bit_counts(xb)
        live = np.flatnonzero((pooled > 0) & (pooled < n)).astype(np.int64)
        if live.size == 0:
            return None
        return _BitEvents(live)


def default_testers(sample: Any) -> Sequence[Tester]:
    """Testers suited to a sample of outputs (used when the audit is given none).

    * 1-D floats: thresholds, the floating-point structure histogram and the per-bit events;
    * 1-D integers or booleans: thresholds and the histogram;
    * 2-D integers or booleans (bit vectors, tuples of counts): the histogram and the logistic
      classifier; 2-D floats: the logistic and nearest-mean classifiers;
    * anything else (strings, tuples, objects): the histogram.
    """
    arr = np.asarray(sample)
    if arr.ndim == 1 and arr.dtype.kind == "f":
        return (ThresholdTester(), HistogramTester(feature=float_structure), BitTester())
    if arr.ndim == 1 and arr.dtype.kind in "biu":
        return (ThresholdTester(), HistogramTester())
    if arr.ndim >= 2 and arr.dtype.kind in "biu":
        return (HistogramTester(), ClassifierTester())
    if arr.ndim >= 2 and arr.dtype.kind == "f":
        return (ClassifierTester(), ClassifierTester(method="nearest_mean"))
    return (HistogramTester(),)
