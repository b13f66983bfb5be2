"""Equal-width bin edges kept as three numbers instead of a long tuple.

A quantile's candidate grid has up to ``2**20`` bins; storing, checking, hashing and printing a
tuple of a million edges would cost more than the release itself. :class:`UniformEdges` reads as
that tuple (``len``, indexing, iteration, equality with a tuple) but holds only ``lower``,
``upper`` and ``bins``: edge ``i < bins`` is ``lower + i * step`` with ``step = (upper - lower)
/ bins`` (two double operations, exactly as the engines compute a bin's edge) and edge ``bins``
is ``upper``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from dpkit.errors import PrivacyParameterError

__all__ = ["UniformEdges", "check_equal_bins", "equal_bins_exact"]


def equal_bins_exact(lower: float, upper: float, bins: int) -> bool:
    """Whether ``bins`` equal bins of ``[lower, upper]`` can be told apart exactly in doubles.

    With ``s = max(|lower|, |upper|)`` and ``w = (upper - lower) / bins``, it asks for ``w >=
    2^-40 s``, ``w >= 2^12 ulp(s)`` (what the first becomes for subnormal bounds, where the
    absolute rounding error no longer shrinks with ``s``), a finite ``bins / (upper - lower)``
    and ``lower + (bins - 1) w < upper``. Then every rounding error of ``w``, of ``lower + i
    w`` and of ``(c - lower) bins / (upper - lower)`` is a few ulps of ``s``, below ``2^-10``
    of a bin: the edges increase strictly, and a bin guessed by one multiplication is off by
    at most one (the engines' arithmetic binning relies on this).
    """
    lo, hi = float(lower) + 0.0, float(upper) + 0.0
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi) or bins < 1:
        return False
    scale, step = max(abs(lo), abs(hi)), (hi - lo) / bins
    return (
        math.isfinite(step)
        and step >= math.ldexp(scale, -40)
        and step >= math.ldexp(math.ulp(scale), 12)
        and math.isfinite(bins / (hi - lo))
        and lo + (bins - 1) * step < hi
    )


def check_equal_bins(lower: float, upper: float, bins: int, *, name: str) -> None:
    """Raise :class:`~dpkit.errors.PrivacyParameterError` unless :func:`equal_bins_exact`
    holds: a check of public bounds, made before any charge."""
    if not equal_bins_exact(lower, upper, bins):
        raise PrivacyParameterError(
            f"The {name} bounds [{lower!r}, {upper!r}] are too close together for {bins} equal "
            "bins that doubles can tell apart; give fewer bins or wider bounds (or rescale the "
            "column, for example to other units)."
        )


class UniformEdges(Sequence[float]):
    """The ``bins + 1`` edges of ``bins`` equal bins of ``[lower, upper]`` (module docstring)."""

    __slots__ = ("_bins", "_lower", "_step", "_upper")

    def __init__(self, lower: float, upper: float, bins: int) -> None:
        lo, hi = float(lower) + 0.0, float(upper) + 0.0
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
            raise ValueError(f"bins must be a positive integer, got {bins!r}")
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"need finite lower < upper, got {lower!r}, {upper!r}")
        if not equal_bins_exact(lo, hi, bins):
            raise ValueError(f"{bins} equal bins of [{lo!r}, {hi!r}] are not representable")
        self._lower, self._upper, self._bins = lo, hi, bins
        self._step = (hi - lo) / bins

    @property
    def lower(self) -> float:
        return self._lower

    @property
    def upper(self) -> float:
        return self._upper

    @property
    def bins(self) -> int:
        return self._bins

    @property
    def step(self) -> float:
        return self._step

    def __len__(self) -> int:
        return self._bins + 1

    @overload
    def __getitem__(self, i: int) -> float: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[float, ...]: ...
    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(len(self))[i])
        j = range(self._bins + 1)[i]
        return self._upper if j == self._bins else self._lower + j * self._step

    def __iter__(self) -> Iterator[float]:
        lo, step = self._lower, self._step
        for j in range(self._bins):
            yield lo + j * step
        yield self._upper

    def array(self) -> npt.NDArray[np.float64]:
        """The edges as a float64 array (the same doubles as indexing gives)."""
        out = self._lower + np.arange(self._bins + 1, dtype=np.float64) * self._step
        out[-1] = self._upper
        return out

    def at(self, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Edges ``idx`` (an integer array), without forming the whole grid."""
        out = self._lower + idx.astype(np.float64) * self._step
        return np.where(idx >= self._bins, self._upper, out)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, UniformEdges):
            return (self._lower, self._upper, self._bins) == (
                other._lower,
                other._upper,
                other._bins,
            )
        if isinstance(other, (tuple, list)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("UniformEdges", self._lower, self._upper, self._bins))

    def __repr__(self) -> str:
        return f"UniformEdges({self._lower!r}, {self._upper!r}, {self._bins})"
