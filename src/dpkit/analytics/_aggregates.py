"""What an analyst asks for: the aggregates of a private query (:func:`count`, :func:`mean`, ...).

Each constructor validates its arguments at once (column name, bounds, quantiles, bin edges,
weight) and returns a frozen :class:`Statistic`. Nothing here touches data or spends budget; the
pricing (:mod:`dpkit.analytics._pricing`) turns statistics into integer measures and noise.

Bounds. Value aggregates (sum, mean, variance, std, quantile) need public bounds ``(lower,
upper)``: each value is clamped into them before aggregation, so one row moves a sum by at most
``max(|lower|, |upper|)``. ``bounds="auto"`` spends a declared share ``auto_share`` of the
aggregate's budget on a private estimate of the bounds first (a private pair of quantiles over a
wide, public, logarithmic grid) and uses them for the rest.

Dates and timestamps. Quantiles and histograms of a ``DATE`` or ``TIMESTAMP`` column take their
bounds or edges as dates: ISO strings (``"2024-01-01"``, ``"2024-01-01T12:00:00+01:00"``),
:class:`datetime.date` or :class:`datetime.datetime`. The column is read as a whole number (see
:func:`to_number`) and so are the bounds, exactly, once the query knows the column's type
(before anything is charged); the released quantiles are dates or datetimes again (see
:func:`from_number`), and histogram bins are labelled by their dates.

Weights. The aggregates of one query split its budget in proportion to their ``weight``
(default 1 each); partition selection, when used, takes a share too (see the builder).
"""

from __future__ import annotations

import datetime
import itertools
import math
from dataclasses import dataclass, replace
from typing import Any, Literal

from dpkit._numeric.grids import UniformEdges, check_equal_bins, equal_bins_exact
from dpkit._numeric.validation import check_bounds, check_positive, check_probability
from dpkit.errors import PrivacyParameterError

__all__ = [
    "MAX_ABS_BOUND",
    "MAX_QUANTILE_BINS",
    "Statistic",
    "StatisticKind",
    "count",
    "count_distinct",
    "from_number",
    "histogram",
    "is_date_bound",
    "mean",
    "missing_bounds",
    "parse_date_bound",
    "quantile",
    "quantile_bins",
    "std",
    "sum",
    "to_number",
    "variance",
]

StatisticKind = Literal[
    "count", "count_distinct", "sum", "mean", "variance", "std", "quantile", "histogram"
]

#: Largest magnitude accepted for a bound: values up to 2**50 keep the fixed-point integers of
#: one row (up to 2**61) and the noise (below 2**52 lattice steps) inside 64-bit integers.
MAX_ABS_BOUND = 2.0**50

#: Largest number of candidate bins of a quantile between its bounds, and the default (equal
#: bins: the engine computes a row's bin by one multiplication and one correcting comparison and
#: returns only the non-empty bins, and the selection costs time linear in those, so a fine
#: grid is cheap; see :func:`quantile`).
MAX_QUANTILE_BINS = 1 << 20
DEFAULT_QUANTILE_BINS = MAX_QUANTILE_BINS


def quantile_bins(lower: float, upper: float, bins: int = 0) -> int:
    """The number of equal bins of a quantile over ``[lower, upper]``: ``bins`` when given
    (non-zero), else the finest power of two up to :data:`MAX_QUANTILE_BINS` whose width is at
    least ``2**-29 max(|lower|, |upper|)`` (so that the engine still finds a value's bin by
    arithmetic, exactly, :func:`~dpkit._numeric.grids.equal_bins_exact`; 2 when none is). A
    function of the public bounds alone: no data, no budget."""
    if bins:
        return bins
    span, scale = upper - lower, max(abs(lower), abs(upper))
    b = MAX_QUANTILE_BINS
    while b > 2 and (span / b < math.ldexp(scale, -29) or not equal_bins_exact(lower, upper, b)):
        b //= 2
    return b


def _quantile_edges(lower: float, upper: float, bins: int) -> UniformEdges:
    """The equal-bin grid of a quantile, kept compact (:class:`~dpkit._numeric.grids.
    UniformEdges`: the same doubles as ``lower + i (upper - lower) / bins``).

    Raises :class:`~dpkit.errors.PrivacyParameterError` when the bounds are too close for that
    many bins to differ in doubles (from the public bounds alone, before any charge)."""
    b = quantile_bins(lower, upper, bins)
    check_equal_bins(lower, upper, b, name="quantile")
    return UniformEdges(lower, upper, b)


#: Default share of an aggregate's budget spent on ``bounds="auto"``.
DEFAULT_AUTO_SHARE = 0.2


@dataclass(frozen=True, kw_only=True)
class Statistic:
    """One requested aggregate (built by :func:`count`, :func:`mean`, ...; immutable)."""

    kind: StatisticKind
    column: str | None = None
    bounds: tuple[float, float] | Literal["auto"] | None = None
    quantiles: tuple[float, ...] = ()
    edges: tuple[float, ...] | UniformEdges = ()
    categories: tuple[object, ...] = ()
    bins: int = 0
    weight: float = 1.0
    auto_share: float = 0.0
    estimated: bool = False  # bounds were estimated privately (bounds="auto")
    # bounds (quantile) or edges (histogram) given as dates, as given: turned into numbers by
    # :meth:`for_column` once the column's type is known
    temporal: tuple[datetime.date, ...] = ()
    # the column's date reading after :meth:`for_column`: "date", "local", "instant" or ""
    time_kind: str = ""
    # quantiles: the share of the aggregate's budget spent on confidence intervals (0: none)
    interval_share: float = 0.0
    # a planned mean: the centre of its noisy sum and its count's fraction of its share
    # (:func:`dpkit.analytics._planner.mean_centre`); None: the middle of the bounds and
    # :func:`dpkit.analytics._pricing.pool_split`
    centring: tuple[float, float] | None = None

    @property
    def needs_bounds(self) -> bool:
        return self.kind in ("sum", "mean", "variance", "std", "quantile")

    @property
    def auto(self) -> bool:
        return self.bounds == "auto"

    def for_column(
        self, time_kind: str | None, name: str, sql_type: str | None = None
    ) -> Statistic:
        """This statistic for a column whose date reading is ``time_kind`` (``"date"``,
        ``"local"``, ``"instant"``, see :func:`to_number`; ``None``: not a date or timestamp;
        ``sql_type`` names the type in messages).

        Date bounds or edges become the column's numbers, exactly; a date or timestamp column
        needs them (numbers there would be day or microsecond counts nobody means), and has no
        sum, mean, variance or ``bounds="auto"``. Decided by the schema alone, before any
        charge; refusals are :class:`~dpkit.errors.PrivacyParameterError`."""
        col = self.column or ""
        if time_kind is None:
            if self.temporal:
                typed = f" (its type is {sql_type})" if sql_type else ""
                raise PrivacyParameterError(
                    f"{name}: {col!r} is not a date or timestamp column{typed}, so its bounds or "
                    f"edges must be numbers; to read it as dates, cast it to DATE or TIMESTAMP "
                    "first (e.g. a DuckDB view or a typed Parquet file)"
                )
            return self
        if self.kind in ("sum", "mean", "variance", "std"):
            raise PrivacyParameterError(
                f"{name}: {col!r} holds dates or timestamps, which have no {self.kind}; ask "
                f"for quantile({col!r}, ...) or histogram({col!r}, edges=[dates]) instead"
            )
        if self.kind == "quantile" and self.auto:
            raise PrivacyParameterError(
                f"{name}: {col!r} holds dates or timestamps; give its bounds as dates, e.g. "
                "bounds=('2024-01-01', '2024-12-31'), instead of 'auto'"
            )
        if self.kind == "histogram" and self.categories:
            return self
        if self.kind not in ("quantile", "histogram"):
            return self
        if not self.temporal:
            raise PrivacyParameterError(
                f"{name}: {col!r} holds dates or timestamps; give its "
                f"{'bounds' if self.kind == 'quantile' else 'edges'} as dates ('2024-01-01', "
                "datetime.date or datetime.datetime), not numbers"
            )
        nums = tuple(to_number(v, time_kind, f"{name}: {col!r}") for v in self.temporal)
        if any(not a < b for a, b in itertools.pairwise(nums)):
            raise PrivacyParameterError(
                f"{name}: the {'bounds' if self.kind == 'quantile' else 'edges'} of {col!r} "
                f"must be strictly increasing, got {[str(v) for v in self.temporal]}"
            )
        if self.kind == "quantile":
            return replace(
                self,
                bounds=(nums[0], nums[1]),
                edges=_quantile_edges(nums[0], nums[1], self.bins),
                time_kind=time_kind,
            )
        return replace(self, edges=nums, time_kind=time_kind)

    def with_public_bounds(self, lower: float, upper: float) -> Statistic:
        """A copy with public bounds given later (a derived column's own bounds)."""
        lo, hi = _check_value_bounds(self.column or "", (lower, upper))
        edges = _quantile_edges(lo, hi, self.bins) if self.kind == "quantile" else self.edges
        return replace(self, bounds=(lo, hi), edges=edges)

    def with_bounds(self, lower: float, upper: float) -> Statistic:
        """A copy with concrete bounds (used after a private ``"auto"`` estimate)."""
        lo, hi = _check_value_bounds(self.column or "", (lower, upper))
        edges = self.edges
        if self.kind == "quantile":
            edges = _quantile_edges(lo, hi, self.bins)
        return replace(self, bounds=(lo, hi), edges=edges, auto_share=0.0, estimated=True)

    def with_centring(self, centre: float, count_share: float) -> Statistic:
        """A mean with its noisy sum centred at ``centre`` (within its bounds) and its count
        given ``count_share`` of its budget (a planned release's choice, see
        :func:`dpkit.analytics._planner.mean_centre`); other kinds are returned unchanged."""
        if self.kind != "mean" or not isinstance(self.bounds, tuple):
            return self
        lo, hi = self.bounds
        if not (lo <= centre <= hi and 0.0 < count_share < 1.0):
            raise PrivacyParameterError(
                f"a mean's centre must lie within its bounds and its count's share in (0, 1), "
                f"got {centre!r} and {count_share!r}"
            )
        return replace(self, centring=(float(centre), float(count_share)))


def _check_column(column: Any) -> str:
    if not isinstance(column, str) or not column:
        raise PrivacyParameterError(f"column must be a non-empty column name, got {column!r}")
    return column


def _check_weight(weight: Any) -> float:
    return check_positive(weight, "weight")


_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH_LOCAL = datetime.datetime(1970, 1, 1)
_EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MICRO = datetime.timedelta(microseconds=1)
#: Largest magnitude of a date's number (doubles hold every integer up to 2**53 exactly).
MAX_TEMPORAL = 2**53


def is_date_bound(value: Any) -> bool:
    return isinstance(value, (str, datetime.date))


def parse_date_bound(value: Any, what: str) -> datetime.date:
    """A date bound as given: a :class:`datetime.date`/:class:`datetime.datetime`, or an ISO
    string (``YYYY-MM-DD``, or a date-time that :meth:`datetime.datetime.fromisoformat` reads,
    with or without an offset)."""
    if isinstance(value, datetime.date):
        return value
    if not isinstance(value, str):
        raise PrivacyParameterError(
            f"{what} must all be dates (ISO strings, datetime.date or datetime.datetime) or "
            f"all numbers, got {value!r}"
        )
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        pass
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError:
        raise PrivacyParameterError(
            f"{what}: {value!r} is not an ISO date or date-time (bounds are numbers, or dates "
            "for a date column); write e.g. '2024-01-01' or '2024-01-01T12:00:00'"
        ) from None


def to_number(value: datetime.date, time_kind: str, what: str = "date bound") -> float:
    """The number a column of date reading ``time_kind`` holds for ``value`` (exact integers):

    ``"date"`` (a ``DATE`` column): days since 1970-01-01; a :class:`datetime.datetime` is
    refused (a date column has no time of day). ``"local"`` (a wall-clock ``TIMESTAMP``):
    microseconds from 1970-01-01 00:00 to the wall-clock time, a date meaning its midnight; a
    timezone-aware datetime is refused (the column's times belong to no known zone).
    ``"instant"`` (``TIMESTAMP WITH TIME ZONE``): microseconds since the epoch; an aware
    datetime is that instant, a naive datetime or a date is read in UTC. Magnitudes above
    2**53 (instants and wall-clock times outside the years 1685 to 2255) are refused."""
    if time_kind == "date":
        if isinstance(value, datetime.datetime):
            raise PrivacyParameterError(
                f"{what}: {value.isoformat()!r} has a time of day but the column holds dates; "
                "give a date such as '2024-01-01'"
            )
        n = (value - _EPOCH_DATE).days
    elif isinstance(value, datetime.datetime) and value.tzinfo is not None:
        if time_kind != "instant":
            raise PrivacyParameterError(
                f"{what}: {value.isoformat()!r} has a time zone but the column holds wall-clock "
                "times without one; give a naive date-time such as '2024-01-01T12:00:00'"
            )
        n = (value - _EPOCH_UTC) // _MICRO
    else:
        if not isinstance(value, datetime.datetime):
            value = datetime.datetime.combine(value, datetime.time())
        n = (value - _EPOCH_LOCAL) // _MICRO  # wall clock, or UTC for an instant column
    if abs(n) > MAX_TEMPORAL:
        raise PrivacyParameterError(
            f"{what}: {value.isoformat()!r} is too far from 1970 to be read exactly (microseconds "
            "beyond 2**53, outside the years 1685 to 2255)"
        )
    return float(n)


def from_number(x: float, time_kind: str) -> datetime.date:
    """The date or datetime of the number ``x`` of a column of date reading ``time_kind`` (see
    :func:`to_number`), rounded down: a quantile of a date column is the day it falls in, of a
    timestamp column the microsecond. ``"instant"`` gives an aware UTC datetime, ``"local"`` a
    naive one."""
    n = math.floor(x)
    if time_kind == "date":
        return _EPOCH_DATE + datetime.timedelta(days=n)
    base = _EPOCH_UTC if time_kind == "instant" else _EPOCH_LOCAL
    return base + n * _MICRO


def _check_value_bounds(column: str, bounds: Any) -> tuple[float, float]:
    if isinstance(bounds, str) or not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise PrivacyParameterError(
            f"bounds of {column!r} must be a pair (lower, upper) or 'auto', got {bounds!r}"
        )
    lo, hi = check_bounds(
        bounds[0],
        bounds[1],
        lower_name=f"lower bound of {column!r}",
        upper_name=f"upper bound of {column!r}",
    )
    if not lo < hi:
        raise PrivacyParameterError(
            f"bounds of {column!r} must satisfy lower < upper, got {bounds!r}"
        )
    if not max(abs(lo), abs(hi)) <= MAX_ABS_BOUND:
        raise PrivacyParameterError(
            f"bounds of {column!r} must lie within +-2**50 (rescale the column), got {bounds!r}"
        )
    return lo, hi


def _value_bounds(
    column: str, bounds: Any, auto_share: Any
) -> tuple[tuple[float, float] | Literal["auto"], float]:
    if isinstance(bounds, str) and bounds == "auto":
        share = check_probability(auto_share, name="auto_share", open_low=True, open_high=True)
        return "auto", share
    if bounds is None:
        # decided when the query knows the column: a derived column may bound itself
        # (see Query.agg); any other column is refused there with missing_bounds()
        return None, 0.0  # type: ignore[return-value]
    return _check_value_bounds(column, bounds), 0.0


def missing_bounds(column: str) -> str:
    """The refusal of a value aggregate of ``column`` without bounds."""
    return (
        f"{column!r} needs public bounds=(lower, upper) (or bounds='auto' to spend part of "
        "the budget on estimating them)"
    )


def _temporal_bounds(column: str, bounds: Any) -> tuple[datetime.date, ...]:
    """Bounds given as dates, parsed (empty when they are not dates)."""
    if (
        isinstance(bounds, (tuple, list))
        and len(bounds) == 2
        and any(is_date_bound(b) for b in bounds)
    ):
        return tuple(parse_date_bound(b, f"bounds of {column!r}") for b in bounds)
    return ()


def _linspace(lo: float, hi: float, bins: int) -> tuple[float, ...]:
    step = (hi - lo) / bins
    edges = [lo + i * step for i in range(bins)] + [hi]
    return tuple(edges)


def count(column: str | None = None, *, weight: float = 1.0) -> Statistic:
    """Number of rows per group (after contribution bounding); with ``column``, the number of
    its non-NULL values (SQL's ``COUNT(column)``).

    A count of a column beside a mean (variance, std) of the same column is released from that
    statistic's own noisy count, and its budget joins the mean's (post-processing, see
    :func:`dpkit.analytics._pricing.pool_split`)."""
    if column is None:
        return Statistic(kind="count", weight=_check_weight(weight))
    return Statistic(kind="count", column=_check_column(column), weight=_check_weight(weight))


def count_distinct(*, weight: float = 1.0) -> Statistic:
    """Number of distinct privacy units per group (after contribution bounding)."""
    return Statistic(kind="count_distinct", weight=_check_weight(weight))


def _value(
    kind: StatisticKind, column: Any, bounds: Any, weight: Any, auto_share: Any
) -> Statistic:
    col = _check_column(column)
    if _temporal_bounds(col, bounds):
        raise PrivacyParameterError(
            f"{kind} of {col!r}: dates have no {kind}; ask for quantile({col!r}, ...) or "
            f"histogram({col!r}, edges=[dates]) instead"
        )
    b, share = _value_bounds(col, bounds, auto_share)
    return Statistic(
        kind=kind, column=col, bounds=b, weight=_check_weight(weight), auto_share=share
    )


def sum(
    column: str,
    *,
    bounds: tuple[float, float] | str | None = None,
    weight: float = 1.0,
    auto_share: float = DEFAULT_AUTO_SHARE,
) -> Statistic:
    """Sum of ``column`` clamped to ``bounds``; NaN/NULL values are skipped."""
    return _value("sum", column, bounds, weight, auto_share)


def mean(
    column: str,
    *,
    bounds: tuple[float, float] | str | None = None,
    weight: float = 1.0,
    auto_share: float = DEFAULT_AUTO_SHARE,
) -> Statistic:
    """Mean of ``column`` clamped to ``bounds``: a noisy centred sum over a noisy count."""
    return _value("mean", column, bounds, weight, auto_share)


def variance(
    column: str,
    *,
    bounds: tuple[float, float] | str | None = None,
    weight: float = 1.0,
    auto_share: float = DEFAULT_AUTO_SHARE,
) -> Statistic:
    """Population variance of ``column`` clamped to ``bounds`` (noisy count, sum and squares)."""
    return _value("variance", column, bounds, weight, auto_share)


def std(
    column: str,
    *,
    bounds: tuple[float, float] | str | None = None,
    weight: float = 1.0,
    auto_share: float = DEFAULT_AUTO_SHARE,
) -> Statistic:
    """Standard deviation: the square root of the private :func:`variance`."""
    return _value("std", column, bounds, weight, auto_share)


def quantile(
    column: str,
    quantiles: float | list[float] | tuple[float, ...],
    *,
    bounds: tuple[float | str | datetime.date, float | str | datetime.date] | str | None = None,
    bins: int | None = None,
    weight: float = 1.0,
    auto_share: float = DEFAULT_AUTO_SHARE,
    interval_share: float = 0.0,
) -> Statistic:
    """Quantiles of ``column`` by the exponential mechanism over ``bins`` equal bins of bounds.

    ``interval_share`` (in ``[0, 1)``, default 0: no interval): the share of the aggregate's
    budget spent on a confidence interval for each quantile, released as ``_low`` and
    ``_high`` columns at the query's level (two more exponential-mechanism selections per
    quantile aimed below and above its rank,
    :class:`~dpkit.mechanisms.quantile.BinnedQuantileInterval`: at least the level for every
    data set, usually well above it). The point estimates get the rest.

    The engine returns per-group counts of the non-empty candidate bins (never sorted rows);
    under pure DP several quantiles of one aggregate (up to 8) are chosen together by one
    exponential mechanism over tuples of bins whose utility is the largest of their normalised
    rank errors (:class:`~dpkit.mechanisms.quantile.BinnedQuantile` with ``joint=True``): each
    quantile gets the whole budget where it is the worst, more accurate than an even split (in
    small groups much more for the lower levels); under zCDP the budget is split evenly. The
    values are reported in the order of the levels: a lower quantile that comes out above a
    higher one is lowered to it. Without
    ``bins``, the grid is the finest the engine bins exactly, ``2**20`` equal bins for most
    bounds (:func:`quantile_bins`, from the public bounds only): with equal bins the
    exponential mechanism gives every bin the same weight, so a finer grid never costs rank
    accuracy, and the value error of a large group is no longer bounded by the bin width.
    For a date or timestamp column give the bounds as dates (``("2024-01-01",
    "2024-12-31")``, :class:`datetime.date`, :class:`datetime.datetime`); the quantiles come
    back as dates (rounded down to the day) or datetimes (to the microsecond).
    """
    col = _check_column(column)
    qs_in = (quantiles,) if isinstance(quantiles, (int, float)) else quantiles
    if isinstance(qs_in, (str, bytes)) or not isinstance(qs_in, (list, tuple)) or not qs_in:
        raise PrivacyParameterError(
            f"quantiles must be a number or a non-empty list, got {quantiles!r}"
        )
    qs = tuple(check_probability(q, name="quantile") for q in qs_in)
    if len(set(qs)) != len(qs):
        raise PrivacyParameterError(f"quantile levels must be distinct, got {quantiles!r}")
    if bins is None:
        bins = 0  # chosen from the bounds (quantile_bins)
    elif isinstance(bins, bool) or not isinstance(bins, int) or not 2 <= bins <= MAX_QUANTILE_BINS:
        raise PrivacyParameterError(
            f"bins must be an integer in [2, {MAX_QUANTILE_BINS}] or None, got {bins!r}"
        )
    ishare = _check_interval_share(interval_share)
    temporal = _temporal_bounds(col, bounds)
    if temporal:  # numbers once the column's type is known (Statistic.for_column)
        return Statistic(
            kind="quantile",
            column=col,
            quantiles=qs,
            bins=bins,
            weight=_check_weight(weight),
            temporal=temporal,
            interval_share=ishare,
        )
    b, share = _value_bounds(col, bounds, auto_share)
    edges = _quantile_edges(b[0], b[1], bins) if isinstance(b, tuple) else ()
    return Statistic(
        kind="quantile",
        column=col,
        bounds=b,
        quantiles=qs,
        edges=edges,
        bins=bins,
        weight=_check_weight(weight),
        auto_share=share,
        interval_share=ishare,
    )


def _check_interval_share(value: object) -> float:
    """A quantile's interval share: a real number in ``[0, 1)``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0.0 <= value < 1.0
    ):
        raise PrivacyParameterError(
            f"interval_share must be a number in [0, 1) (0: no interval), got {value!r}"
        )
    return float(value)


def histogram(
    column: str,
    *,
    edges: list[float]
    | tuple[float, ...]
    | list[str | datetime.date]
    | tuple[str | datetime.date, ...]
    | None = None,
    categories: list[object] | tuple[object, ...] | None = None,
    weight: float = 1.0,
) -> Statistic:
    """Counts of ``column`` per bin (``edges``, values clamped into the outer bins) or category.

    Bins are ``[e_i, e_{i+1})``, the last one closed; with ``categories`` values outside the list
    are not counted. Give exactly one of ``edges`` and ``categories``. Edges of a date or
    timestamp column are dates (ISO strings, :class:`datetime.date`, :class:`datetime.datetime`);
    its bins are then labelled by them (``n[2024-01-01,2024-04-01)``).
    """
    col = _check_column(column)
    if (edges is None) == (categories is None):
        raise PrivacyParameterError("histogram needs exactly one of edges= and categories=")
    if edges is not None:
        if isinstance(edges, (str, bytes)) or not isinstance(edges, (list, tuple)):
            raise PrivacyParameterError(f"edges must be a list of numbers, got {edges!r}")
        if any(is_date_bound(e) for e in edges):
            ts = tuple(parse_date_bound(e, f"edges of {col!r}") for e in edges)
            if len(ts) < 2:
                raise PrivacyParameterError(f"edges must be at least two dates, got {edges!r}")
            return Statistic(
                kind="histogram", column=col, temporal=ts, weight=_check_weight(weight)
            )
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
