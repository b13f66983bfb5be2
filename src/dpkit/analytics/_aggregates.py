"""What an analyst asks for: the aggregates of a private query (:func:`count`, :func:`mean`, ...).

Each constructor validates its arguments at once (column name, bounds, quantiles, bin edges,
weight) and returns a frozen :class:`Statistic`. Nothing here touches data or spends budget; the
pricing (:mod:`dpkit.analytics._pricing`) turns statistics into integer measures and noise.

Bounds. Value aggregates (sum, mean, variance, std, quantile) need public bounds ``(lower,
upper)``: each value is clamped into them before aggregation, so one row moves a sum by at most
``max(|lower|, |upper|)``. ``bounds="auto"`` spends a declared share ``auto_share`` of the
aggregate's budget on a private estimate of the bounds first (a private pair of quantiles over a
wide, public, logarithmic grid) and uses them for the rest.

Weights. The aggregates of one query split its budget in proportion to their ``weight``
(default 1 each); partition selection, when used, takes a share too (see the builder).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from dpkit._numeric.validation import check_bounds, check_positive, check_probability
from dpkit.errors import PrivacyParameterError

__all__ = [
    "MAX_ABS_BOUND",
    "Statistic",
    "StatisticKind",
    "count",
    "count_distinct",
    "histogram",
    "mean",
    "quantile",
    "std",
    "sum",
    "variance",
]

StatisticKind = Literal[
    "count", "count_distinct", "sum", "mean", "variance", "std", "quantile", "histogram"
]

#: Largest magnitude accepted for a bound: values up to 2**50 keep the fixed-point integers of
#: one row (up to 2**61) and the noise (below 2**52 lattice steps) inside 64-bit integers.
MAX_ABS_BOUND = 2.0**50

#: Default number of candidate bins of a quantile between its bounds (equal bins: the engine
#: computes a row's bin by one multiplication and one correcting comparison, so a fine grid is
#: cheap, and the error of a quantile over many rows is dominated by the bin width).
DEFAULT_QUANTILE_BINS = 1024

#: Default share of an aggregate's budget spent on ``bounds="auto"``.
DEFAULT_AUTO_SHARE = 0.2


@dataclass(frozen=True, kw_only=True)
class Statistic:
    """One requested aggregate (built by :func:`count`, :func:`mean`, ...; immutable)."""

    kind: StatisticKind
    column: str | None = None
    bounds: tuple[float, float] | Literal["auto"] | None = None
    quantiles: tuple[float, ...] = ()
    edges: tuple[float, ...] = ()
    categories: tuple[object, ...] = ()
    bins: int = 0
    weight: float = 1.0
    auto_share: float = 0.0
    estimated: bool = False  # bounds were estimated privately (bounds="auto")

    @property
    def needs_bounds(self) -> bool:
        return self.kind in ("sum", "mean", "variance", "std", "quantile")

    @property
    def auto(self) -> bool:
        return self.bounds == "auto"

    def with_bounds(self, lower: float, upper: float) -> Statistic:
        """A copy with concrete bounds (used after a private ``"auto"`` estimate)."""
        from dataclasses import replace

        lo, hi = _check_value_bounds(self.column or "", (lower, upper))
        edges = self.edges
        if self.kind == "quantile":
            edges = _linspace(lo, hi, self.bins)
        return replace(self, bounds=(lo, hi), edges=edges, auto_share=0.0, estimated=True)


def _check_column(column: Any) -> str:
    if not isinstance(column, str) or not column:
        raise PrivacyParameterError(f"column must be a non-empty column name, got {column!r}")
    return column


def _check_weight(weight: Any) -> float:
    return check_positive(weight, "weight")


def _check_value_bounds(column: str, bounds: Any) -> tuple[float, float]:
    if isinstance(bounds, str) or not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise PrivacyParameterError(
            f"bounds of {column!r} must be a pair (lower, upper) or 'auto', got {bounds!r}"
        )
    lo, hi = check_bounds(bounds[0], bounds[1], lower_name=f"lower bound of {column!r}",
                          upper_name=f"upper bound of {column!r}")
    if not lo < hi:
        raise PrivacyParameterError(
            f"bounds of {column!r} must satisfy lower < upper, got {bounds!r}"
        )
    if not max(abs(lo), abs(hi)) <= MAX_ABS_BOUND:
        raise PrivacyParameterError(
            f"bounds of {column!r} must lie within +-2**50 (rescale the column), got {bounds!r}"
        )
    return lo, hi


def _value_bounds(column: str, bounds: Any, auto_share: Any
                  ) -> tuple[tuple[float, float] | Literal["auto"], float]:
    if isinstance(bounds, str) and bounds == "auto":
        share = check_probability(auto_share, name="auto_share", open_low=True, open_high=True)
        return "auto", share
    if bounds is None:
        raise PrivacyParameterError(
            f"{column!r} needs public bounds=(lower, upper) (or bounds='auto' to spend part of "
            "the budget on estimating them)"
        )
    return _check_value_bounds(column, bounds), 0.0


def _linspace(lo: float, hi: float, bins: int) -> tuple[float, ...]:
    step = (hi - lo) / bins
    edges = [lo + i * step for i in range(bins)] + [hi]
    return tuple(edges)


def count(*, weight: float = 1.0) -> Statistic:
    """Number of rows per group (after contribution bounding)."""
    return Statistic(kind="count", weight=_check_weight(weight))


def count_distinct(*, weight: float = 1.0) -> Statistic:
    """Number of distinct privacy units per group (after contribution bounding)."""
    return Statistic(kind="count_distinct", weight=_check_weight(weight))


def _value(kind: StatisticKind, column: Any, bounds: Any, weight: Any, auto_share: Any
           ) -> Statistic:
    col = _check_column(column)
    b, share = _value_bounds(col, bounds, auto_share)
    return Statistic(kind=kind, column=col, bounds=b, weight=_check_weight(weight),
                     auto_share=share)


def sum(column: str, *, bounds: tuple[float, float] | str | None = None,
        weight: float = 1.0, auto_share: float = DEFAULT_AUTO_SHARE) -> Statistic:
    """Sum of ``column`` clamped to ``bounds``; NaN/NULL values are skipped."""
    return _value("sum", column, bounds, weight, auto_share)


def mean(column: str, *, bounds: tuple[float, float] | str | None = None,
         weight: float = 1.0, auto_share: float = DEFAULT_AUTO_SHARE) -> Statistic:
    """Mean of ``column`` clamped to ``bounds``: a noisy centred sum over a noisy count."""
    return _value("mean", column, bounds, weight, auto_share)


def variance(column: str, *, bounds: tuple[float, float] | str | None = None,
             weight: float = 1.0, auto_share: float = DEFAULT_AUTO_SHARE) -> Statistic:
    """Population variance of ``column`` clamped to ``bounds`` (noisy count, sum and squares)."""
    return _value("variance", column, bounds, weight, auto_share)


def std(column: str, *, bounds: tuple[float, float] | str | None = None,
        weight: float = 1.0, auto_share: float = DEFAULT_AUTO_SHARE) -> Statistic:
    """Standard deviation: the square root of the private :func:`variance`."""
    return _value("std", column, bounds, weight, auto_share)


def quantile(column: str, quantiles: float | list[float] | tuple[float, ...], *,
             bounds: tuple[float, float] | str | None = None, bins: int = DEFAULT_QUANTILE_BINS,
             weight: float = 1.0, auto_share: float = DEFAULT_AUTO_SHARE) -> Statistic:
    """Quantiles of ``column`` by the exponential mechanism over ``bins`` equal bins of bounds.

    The engine returns per-group counts of the candidate bins (never sorted rows); the budget of
    the aggregate is split evenly across the requested quantiles.
    """
    col = _check_column(column)
    qs_in = (quantiles,) if isinstance(quantiles, (int, float)) else quantiles
    if isinstance(qs_in, (str, bytes)) or not isinstance(qs_in, (list, tuple)) or not qs_in:
        raise PrivacyParameterError(f"quantiles must be a number or a non-empty list, got "
                                    f"{quantiles!r}")
    qs = tuple(check_probability(q, name="quantile") for q in qs_in)
    if len(set(qs)) != len(qs):
        raise PrivacyParameterError(f"quantile levels must be distinct, got {quantiles!r}")
    if isinstance(bins, bool) or not isinstance(bins, int) or not 2 <= bins <= 1 << 16:
        raise PrivacyParameterError(f"bins must be an integer in [2, 65536], got {bins!r}")
    b, share = _value_bounds(col, bounds, auto_share)
    edges = () if b == "auto" else _linspace(b[0], b[1], bins)
    return Statistic(kind="quantile", column=col, bounds=b, quantiles=qs, edges=edges, bins=bins,
                     weight=_check_weight(weight), auto_share=share)


def histogram(column: str, *, edges: list[float] | tuple[float, ...] | None = None,
              categories: list[object] | tuple[object, ...] | None = None,
              weight: float = 1.0) -> Statistic:
    """Counts of ``column`` per bin (``edges``, values clamped into the outer bins) or category.

    Bins are ``[e_i, e_{i+1})``, the last one closed; with ``categories`` values outside the list
    are not counted. Give exactly one of ``edges`` and ``categories``.
    """
    col = _check_column(column)
    if (edges is None) == (categories is None):
        raise PrivacyParameterError("histogram needs exactly one of edges= and categories=")
    if edges is not None:
        if isinstance(edges, (str, bytes)) or not isinstance(edges, (list, tuple)):
            raise PrivacyParameterError(f"edges must be a list of numbers, got {edges!r}")
        es = tuple(_finite_edge(e) for e in edges)
        if len(es) < 2 or any(not es[i] < es[i + 1] for i in range(len(es) - 1)):
            raise PrivacyParameterError(
                f"edges must be at least two strictly increasing finite numbers, got {edges!r}"
            )
        return Statistic(kind="histogram", column=col, edges=es, weight=_check_weight(weight))
    assert categories is not None
    if isinstance(categories, (str, bytes)) or not isinstance(categories, (list, tuple)):
        raise PrivacyParameterError(f"categories must be a list, got {categories!r}")
    cats = tuple(categories)
    if not cats:
        raise PrivacyParameterError("categories must not be empty")
    for c in cats:
        if c is None or (isinstance(c, float) and math.isnan(c)):
            raise PrivacyParameterError("categories must not contain None/NaN")
        if not isinstance(c, (str, int, float)):
            raise PrivacyParameterError(
                f"categories must be strings or numbers, got {type(c).__name__} {c!r}"
            )
    if len(set(cats)) != len(cats):
        raise PrivacyParameterError(f"categories must be distinct, got {categories!r}")
    return Statistic(kind="histogram", column=col, categories=cats, weight=_check_weight(weight))


def _finite_edge(e: Any) -> float:
    from dpkit._numeric.validation import check_finite

    x = check_finite(e, "histogram edge")
    if not abs(x) <= MAX_ABS_BOUND:
        raise PrivacyParameterError(f"histogram edges must lie within +-2**50, got {e!r}")
    return x
